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

/* Write the n bytes at data as the file path, for play's dump and export's C file: when
 * path is a regular file or new, atomically (fs_write_file_atomic: after a failure
 * there is no new file, not an empty or partial one; a file it replaces keeps its
 * permissions, and a read-only one is refused, left as it was); when it exists as
 * something a rename must not replace (/dev/stdout, a pipe, /dev/full), straight into
 * it. A failure is CALF_EIO "cannot write PATH: ..." ending in the system's reason. */
int play_write_output(const char *path, const void *data, /* (n) */ size_t n, calf_error *err);

#endif
