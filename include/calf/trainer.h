/* calf/trainer.h: the stepwise trainer, for programs that drive training themselves:
 * open a run (a config file or config text, overrides, a root dir), run it one iteration
 * at a time reading each iteration's metrics as values, checkpoint when they like, close.
 * calf_train (calf/train.h) and the `calf train` command are this loop run to the end. */
#ifndef CALF_TRAINER_H
#define CALF_TRAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "calf/error.h"

/* An open run: its config, the root dir's lock, its envs, the algorithm and the files it
 * writes. Opaque; made by calf_trainer_open, released by calf_trainer_close. */
typedef struct calf_trainer calf_trainer;

/* What one iteration did. The trainer owns it (calf_trainer_metrics); it is valid until
 * the next calf_trainer_step or calf_trainer_close. Fields are only ever added at the
 * end, so a program built against an older header reads the ones it knows. */
typedef struct calf_trainer_metrics {
    int64_t iteration;           /* iterations completed, this one included */
    int64_t env_steps;           /* env steps of the whole run so far */
    int64_t episodes;            /* episodes that ended in this iteration */
    int64_t total_episodes;      /* episodes that ended in the whole run so far */
    double average_return;       /* over this iteration's ended episodes; NAN when none */
    double average_episode_length; /* likewise */
    double eval_return;          /* the greedy evaluation's average return when this
                                  * iteration evaluated (TrainerConfig.evaluate), else NAN */
    double steps_per_sec;        /* env steps per second of this iteration (timing only) */
    /* The algorithm's own scalars (losses, learning rates, its temperature), as its
     * summaries name them ("PPOLoss/pg_loss", "SacLoss/actor_loss", ...), on iterations
     * that write summaries (every TrainerConfig.summary_interval); 0 entries on the
     * others. names[k] goes with values[k]. */
    int num_algorithm_metrics;
    const char *const *algorithm_metric_names;
    const double *algorithm_metric_values;
    /* The greedy evaluation of an iteration that evaluated, beside eval_return (its mean
     * return), as SB3's evaluate_policy reports one: the population standard deviation
     * of its episodes' returns and their mean length in env steps (an episode ended at
     * TrainerConfig.eval_max_episode_steps counts that many), both NAN when this
     * iteration did not evaluate; and how many episodes it ran (0 then). */
    double eval_return_std;
    double eval_episode_length;
    int64_t eval_episodes;
} calf_trainer_metrics;

/* How a run is opened. Initialise with CALF_TRAINER_OPTIONS_INIT (which records the
 * struct's size as the caller's header has it) and set what you need: fields are only
 * ever added at the end, and the library reads only those within struct_size. */
typedef struct calf_trainer_options {
    size_t struct_size;              /* sizeof(calf_trainer_options) as the caller built it */
    const char *root_dir;            /* where the run's files go (required) */
    const char *conf_path;           /* a gin file, or NULL */
    const char *conf_text;           /* in place of conf_path: the config as gin text held in
                                      * memory (errors name it "<conf_text>:LINE"); both NULL:
                                      * ROOT/config.gin of an earlier run; both set:
                                      * CALF_EINVAL */
    const char *const *conf_params;  /* 'Scope.param=value' assignments, after the config;
                                      * none NULL (else CALF_EINVAL) */
    int num_conf_params;             /* >= 0 (else CALF_EINVAL) */
    bool quiet;                      /* no progress lines or notes on stderr */
    /* Install SIGINT/SIGTERM handlers for the trainer's life (restored by close): a
     * signal then makes the next calf_trainer_step finish its iteration, write a
     * checkpoint and return CALF_EINTR. false (the default): the host's handlers stay.
     * Signal handlers are the process's, so one run at a time may have them: while a
     * trainer opened with handle_signals, or a calf_train job, runs in this process,
     * another open with handle_signals is CALF_EINVAL saying so. */
    bool handle_signals;
    /* Called at the end of every calf_trainer_step with that iteration's metrics. It may
     * read the trainer and call calf_trainer_checkpoint; calf_trainer_step and
     * calf_trainer_close from inside it return CALF_EINVAL (the iteration is not over). */
    void (*progress)(const calf_trainer_metrics *m, void *arg);
    void *progress_arg;
} calf_trainer_options;

#define CALF_TRAINER_OPTIONS_INIT {.struct_size = sizeof(calf_trainer_options)}

/* Open a run: load, override and validate the config, check the root dir and take its
 * lock (held until close), resume from the newest valid checkpoint there if any, build
 * the envs and the algorithm, write ROOT/config.gin. Nothing is trained yet.
 *
 * Processes: the trainer runs in the calling process and steps all of the config's
 * envs; the result is the bytes a `--nproc N` or MPI run of the same config writes.
 * Under an MPI launcher (mpirun) it refuses to open (CALF_EINVAL): there, and for
 * --nproc workers, use calf_train, which runs the whole job (its workers are forked
 * copies of the calling process, made after setup).
 *
 * On success *out is the caller's, to release with calf_trainer_close. A run that is
 * already complete opens (calf_trainer_done is then true). On failure *out is NULL,
 * err says what and where (config errors as "file:line: ..."), nothing is left locked
 * or open, and the process can open another. Returns a calf_status.
 *
 * Misuse is CALF_EINVAL with a message, never undefined: NULL options or out, a NULL
 * trainer, or one already closed, given to any call below (the queries then answer
 * done true, iteration -1, metrics NULL), a second close, a NULL conf_params entry or a
 * negative num_conf_params. One thread at a time per trainer.
 *
 * Threads: trainers open at once in different threads are independent, each writing its
 * own files (the current summary writer, calf/summary.h, is each thread's). What is the
 * process's and not the trainer's: the signal handlers (one trainer at a time asks for
 * them, handle_signals above) and the env registry (calf/env.h, safe from any thread). */
int calf_trainer_open(const calf_trainer_options *o, calf_trainer **out, calf_error *err);

/* Whether the run has reached its end (TrainerConfig.num_iterations or num_env_steps). */
bool calf_trainer_done(const calf_trainer *t);

/* Iterations completed so far (those a resume started from included). */
int64_t calf_trainer_iteration(const calf_trainer *t);

/* Run one iteration: step the envs for TrainerConfig.unroll_length steps, train, write
 * the summaries and evaluation the config asks for, and the checkpoint it plans (spread
 * over the run, and one at the end). Returns CALF_OK; CALF_EINTR after a handled signal
 * (the checkpoint is written); CALF_EINVAL when the run is already done; another status
 * when training failed (err says why; the run then cannot go on: close it). */
int calf_trainer_step(calf_trainer *t, calf_error *err);

/* The last calf_trainer_step's metrics; NULL before the first step. */
const calf_trainer_metrics *calf_trainer_metrics_last(const calf_trainer *t);

/* Write a checkpoint of the current iteration now (ROOT/train/algorithm/ckpt-N, written
 * atomically; the summaries up to it are flushed first). A run reopened from this root
 * resumes here. Returns a calf_status. */
int calf_trainer_checkpoint(calf_trainer *t, calf_error *err);

/* Close the run: flush and close its summaries and log, release the lock, free
 * everything. Returns the first failure among those final writes (CALF_OK when none).
 * NULL is fine (CALF_OK); a trainer closed already, or from inside its progress
 * callback, is CALF_EINVAL. */
int calf_trainer_close(calf_trainer *t, calf_error *err);

#endif
