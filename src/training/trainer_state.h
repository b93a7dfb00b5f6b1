/* trainer_state.h: the generic trainer's state, shared by the loop (trainer.c) and its
 * checkpoints (trainer_checkpoint.c); private to src/training/. */
#ifndef CALF_TRAINER_STATE_H
#define CALF_TRAINER_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include <signal.h>
#include <sys/types.h>

#include "calf/config.h"
#include "calf/error.h"
#include "calf/summary.h"
#include "calf/trainer.h"
#include "envs/vec_env.h"
#include "parallel/comm.h"
#include "training/algorithm.h"
#include "training/rank_log.h"
#include "training/trainer.h"

/* Per-env episode statistics of an iteration, summed over envs in canonical order. */
enum { EP_EPISODES, EP_RETURN, EP_LENGTH, NUM_EP_STATS };

/* The trainer's own settings, resolved once from the config. */
typedef struct trainer_params {
    int64_t num_checkpoints;     /* TrainerConfig.num_checkpoints */
    bool evaluate;               /* TrainerConfig.evaluate */
    int64_t eval_interval;
    int num_eval_episodes;
    int64_t summary_interval;
    double summaries_flush_secs;
    bool histograms;             /* TrainerConfig.summarize_grads_and_vars */
    int64_t check_interval;      /* TrainerConfig.ddp_paras_check_interval */
    int64_t initial_collect;     /* TrainerConfig.initial_collect_steps (the ETA's window) */
} trainer_params;


/* The most algorithm scalars one iteration hands back (PPO writes 6, SAC 9). */
#define TRAINER_MAX_METRICS 32

struct trainer {
    trainer_params p;
    const calf_config *cfg;
    comm *c;
    const char *root;
    rank_log log;
    bool quiet;
    int E, begin, count;     /* global envs; this process owns [begin, begin+count) */
    int T;                   /* unroll length */
    uint64_t seed;
    int64_t max_iterations;  /* 0: no limit */
    int64_t max_env_steps;   /* 0: no limit */
    int64_t total_iterations;/* the run's planned length, for checkpoints and ETA */
    const char *env_name;
    const calf_env_spec *spec;

    vec_env ve;
    const algorithm_ops *ops;
    algorithm *algo;
    /* one step of this process's envs */
    float *obs;              /* (count, obs_dim) what the step acted on */
    int *act;                /* (count) */
    float *u;                /* (count, max(action_dim, 1)) */
    float *rew;              /* (count) */
    uint8_t *term, *trunc;   /* (count) */
    float *final_obs;        /* (count, obs_dim) */
    double *ep_return;       /* (count) */
    int *ep_length;          /* (count) */
    double *ep_stats;        /* (count, NUM_EP_STATS) */

    int64_t iteration;       /* iterations completed */
    int64_t env_steps;       /* global env steps completed */
    int64_t total_episodes;

    calf_summary_writer *eval_writer; /* main process only, when evaluating */
    double eval_return;      /* last evaluation's average, NAN before */
    double last_avg_return;  /* last iteration with finished episodes */
    double start_time, last_progress, last_logged; /* progress: stderr's line, the rank log's */
    int64_t start_iteration;
    double eta_time[2];      /* the ETA's window: marks at least 30 s apart (progress) */
    int64_t eta_iteration[2];
    calf_error io_err;       /* this process's first failed write to its log or summaries */
    int stopped_by;          /* -1, or the rank whose failed write stopped the job */
    calf_error *err;         /* where failures go: own_err */
    calf_error own_err;
    bool report_via_comm;    /* workers of a job: comm_report_failure at close */
    bool ended;              /* the run is complete, stopped or failed: no more steps */
    bool handlers;           /* SIGINT/SIGTERM handlers installed; restored at close */
    bool guards_exit;        /* an exit() before close is reported (trainer_args.guard_exit) */
    struct sigaction old_int, old_term;
    calf_summary_writer *train_writer; /* main process only */

    /* the last iteration's metrics, and the algorithm's scalars they point at */
    calf_trainer_metrics metrics;
    bool evaluated;          /* this iteration evaluated */
    int num_metrics;
    char metric_names[TRAINER_MAX_METRICS][96];
    const char *metric_name_ptrs[TRAINER_MAX_METRICS];
    double metric_values[TRAINER_MAX_METRICS];
};

/* Checkpoints (trainer_checkpoint.c). Collective: every rank calls them together. */
int trainer_write_checkpoint(trainer *t, calf_error *err);
int trainer_load_checkpoint(trainer *t, const resume_state *rs, calf_error *err);

#endif
