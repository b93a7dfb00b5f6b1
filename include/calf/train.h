/* calf/train.h: the library's entry points for training and playing a policy.
 * The command-line program is a thin layer over these. */
#ifndef CALF_TRAIN_H
#define CALF_TRAIN_H

#include <stdbool.h>

#include "calf/config.h"
#include "calf/error.h"

typedef struct calf_train_options {
    const char *root_dir;            /* where the run's files go (required) */
    const char *conf_path;           /* gin file; NULL: ROOT/config.gin of an earlier run */
    const char *const *conf_params;  /* --conf_param assignments, applied after the file */
    int num_conf_params;
    int nproc;                       /* local worker processes; <= 1: this process only */
    bool quiet;                      /* no progress output on stderr */
} calf_train_options;

/* Load, override and validate the config described by `o` (no files written).
 * Errors: CALF_EINVAL / CALF_EIO with "file:line: ..." messages. */
int calf_train_load_config(const calf_train_options *o, calf_config *cfg, calf_error *err);

/* Train. Returns CALF_OK, CALF_EINVAL for bad input (exit 2), CALF_EINTR when stopped
 * by Ctrl-C after writing a checkpoint (exit 130), or another status for failures. */
int calf_train(const calf_train_options *o, calf_error *err);

typedef struct calf_play_options {
    const char *root_dir;            /* a run's root dir (its config.gin and checkpoints) */
    const char *checkpoint;          /* a checkpoint file; NULL: the newest valid one */
    int num_episodes;                /* episodes to run (>= 1) */
    long long seed;                  /* seed of the play environments */
    bool verbose;                    /* print every episode */
} calf_play_options;

/* Run the greedy policy of a checkpoint; prints each episode's return and the average
 * to stdout. Returns a calf_status. */
int calf_play(const calf_play_options *o, calf_error *err);

#endif
