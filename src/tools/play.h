/* play.h: a trained run's policy, loaded for acting only: what `calf play` runs and
 * `calf export` writes out. Only the checkpoint's head is read (never the env records). */
#ifndef CALF_PLAY_H
#define CALF_PLAY_H

#include <stdint.h>

#include "calf/config.h"
#include "calf/env.h"
#include "calf/error.h"
#include "training/algorithm.h"

typedef struct play_policy {
    calf_config cfg;            /* ROOT/config.gin, the run's operative config */
    char path[4200];            /* the checkpoint loaded */
    int64_t iteration;          /* its iteration */
    const calf_env_class *cls;  /* the config's environment */
    const algorithm_ops *ops;
    algorithm *algo;            /* owned; play_policy_close releases it */
} play_policy;

/* Load checkpoint `checkpoint` (NULL: the newest valid one in ROOT/train/algorithm,
 * older ones tried with a warning on stderr when a newer one is damaged) of the run in
 * root_dir, checked against the run's config.gin. Bad input (no config, no checkpoint,
 * a checkpoint of another config) is CALF_EINVAL naming the file. */
int play_policy_open(play_policy *p, const char *root_dir, const char *checkpoint,
                     calf_error *err);
/* Release what open made; safe on a zeroed or closed policy. */
void play_policy_close(play_policy *p);

#endif
