/* trainer_checkpoint.h: the trainer's checkpoint payload (trainer_checkpoint.c) and what
 * it needs of a run, passed to it explicitly: the checkpoint never sees the trainer's
 * state. Private to src/training/. */
#ifndef CALF_TRAINER_CHECKPOINT_H
#define CALF_TRAINER_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "calf/config.h"
#include "calf/error.h"
#include "envs/vec_env.h"
#include "parallel/comm.h"
#include "records/checkpoint.h"
#include "training/algorithm.h"
#include "training/rank_log.h"

/* The checkpoint a run resumes from, found and validated (its CRC over every byte)
 * before any process starts; each process then reads what it needs of it. */
typedef struct resume_state {
    bool found;
    char path[4096];
    ckpt_header hdr;
    bool via_rank0;         /* only rank 0 reads the file (MPI); it sends the rest */
} resume_state;

/* What a checkpoint reads and writes of one process's part of a run. */
typedef struct trainer_ckpt_view {
    comm *c;                  /* the job's: its main process writes the file */
    const char *root;         /* the run's root dir; checkpoints go in ROOT/train/algorithm */
    uint64_t digest;          /* the config's (calf_config_digest), in the file header */
    int64_t keep;             /* TrainerConfig.num_checkpoints: how many to keep */
    int E, T;                 /* global envs, unroll length */
    int begin, count;         /* this process owns envs [begin, begin+count) */
    const char *env_name;     /* named when a plug-in's env no longer fits a checkpoint */
    vec_env *ve;              /* this process's envs and their records */
    const algorithm_ops *ops;
    algorithm *algo;          /* its sections, and its part of each env record */
    rank_log *log;            /* "checkpoint PATH", and a failed prune's warning */
} trainer_ckpt_view;

/* The run's counters a checkpoint holds (its META section). */
typedef struct trainer_counters {
    int64_t iteration;        /* iterations completed */
    int64_t env_steps;        /* global env steps completed */
    int64_t total_episodes;
} trainer_counters;

/* Write iteration n->iteration's checkpoint, then prune the older ones beyond v->keep.
 * Collective: every rank calls it together. */
int trainer_checkpoint_write(const trainer_ckpt_view *v, const trainer_counters *n,
                             calf_error *err);
/* Resume from rs: the algorithm's and this process's envs' state loaded, and *counters
 * the checkpoint's. Collective. */
int trainer_checkpoint_load(const trainer_ckpt_view *v, const resume_state *rs,
                            trainer_counters *counters, calf_error *err);

/* Build the config's algorithm for acting only and load the state of checkpoint path
 * into it (validated before, e.g. by ckpt_read_head, which filled hdr; only the head is
 * read, never the env records). On success *algo is the caller's: release with
 * (*ops)->destroy. */
int trainer_load_policy(const calf_config *cfg, const char *path, const ckpt_header *hdr,
                        const algorithm_ops **ops, algorithm **algo, calf_error *err);

#endif
