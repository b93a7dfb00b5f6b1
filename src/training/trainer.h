/* trainer.h: the generic trainer's entry points for job.c (one process's run of a
 * job) and for `calf play` (a checkpoint's policy, greedy evaluation episodes). */
#ifndef CALF_TRAINING_TRAINER_H
#define CALF_TRAINING_TRAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "calf/config.h"
#include "calf/error.h"
#include "calf/train.h"
#include "calf/trainer.h"
#include "training/algorithm.h"
#include "training/trainer_checkpoint.h"
#include "training/trainer_config.h"
#include "parallel/comm.h"

/* What every process of a job runs with. */
typedef struct trainer_args {
    const calf_train_options *o;  /* root_dir and quiet; must outlive the trainer */
    const calf_config *cfg;       /* must outlive the trainer */
    resume_state *rs;
    bool report_via_comm;   /* workers of a job: comm_report_failure; one process: err */
    calf_error err;         /* one process: the failure */
    bool handle_signals;    /* SIGINT/SIGTERM stop after the iteration (restored at close) */
    bool guard_exit;        /* `calf train`'s one process: an exit() from anything it loaded
                             * before close ends it with status 1 and a message, not the
                             * status the caller of exit() chose */
} trainer_args;

/* One process's part of a job, a step at a time (trainer.c). trainer_open always makes
 * *t, also when it fails: pass it to trainer_close, which reports a failure (to the rank
 * log, and through comm when report_via_comm), copies it to *err_out (may be NULL),
 * closes the files and frees t, returning the run's final status. A run that is complete
 * at open is done at once (trainer_done). */
typedef struct trainer trainer;
int trainer_open(trainer **t, comm *c, const trainer_args *wa);
bool trainer_done(const trainer *t);
/* One iteration; the run is done after one that failed, was interrupted (CALF_EINTR,
 * checkpoint written) or reached the end. Must not be called once trainer_done. */
int trainer_step(trainer *t);
int64_t trainer_iteration(const trainer *t);
/* The last step's metrics (the trainer's), NULL before the first step. */
const calf_trainer_metrics *trainer_metrics(const trainer *t);
/* A checkpoint of the current iteration now, the summaries flushed first. Collective. */
int trainer_checkpoint_now(trainer *t);
/* The failure of the last trainer_open, trainer_step or trainer_checkpoint_now. */
const calf_error *trainer_error(const trainer *t);
int trainer_close(trainer *t, int rc, calf_error *err_out);

/* One process's part of the job (a workers_fn): opens its rank log, builds the
 * algorithm for its envs, resumes from rs, trains until the run is complete or stopped.
 * Returns an exit status: 0 ok, 2 bad input, 130 interrupted, else 1. */
int trainer_worker(comm *c, void *arg);

/* Run `episodes` greedy episodes of env_name in parallel, env k seeded from
 * (seed, 2^40 + k); returns[k] gets episode k's return, lengths[k] (when lengths is not
 * NULL) its steps, and *average their mean. An episode that the env has not ended after
 * max_steps steps (TrainerConfig.eval_max_episode_steps) ends there, its return so far
 * counted and its length max_steps; *capped gets how many did, for the caller's warning. c (NULL outside a job) hears comm_progress every step,
 * so that the ranks waiting for this one's evaluation know it works. Fails (CALF_EINVAL)
 * only when the envs cannot be created. */
int trainer_evaluate_greedy(const algorithm_ops *ops, algorithm *algo, comm *c,
                            const char *env_name, uint64_t seed, int episodes, int64_t max_steps,
                            double *returns, /* (episodes) */
                            int64_t *lengths, /* (episodes) or NULL */
                            double *average, int *capped, calf_error *err);
/* The one line that says evaluation episodes of env_name reached max_steps, into buf. */
void trainer_eval_cap_warning(char *buf, size_t cap, const char *env_name, int64_t max_steps,
                              int capped, int episodes);

#endif
