/* algorithm.h: the small table of functions between the generic trainer (trainer.c:
 * the iteration loop, env stepping, evaluation, summaries, checkpoints, stopping) and
 * an algorithm (src/algorithms/: PPO, SAC), after ALF's split of RLTrainer and
 * RLAlgorithm. An algorithm owns its networks, losses, optimizers, random streams,
 * rollout or replay storage, checkpoint sections and summaries. It never steps an
 * environment and never opens a file: the trainer does both. See docs/DESIGN.md. */
#ifndef CALF_ALGORITHM_H
#define CALF_ALGORITHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "calf/env.h"
#include "calf/error.h"
#include "calf/rng.h"
#include "records/checkpoint.h"
#include "parallel/comm.h"
#include "numerics/export_c.h"
#include "training/registry.h"

typedef struct algorithm algorithm; /* each algorithm's own struct, opaque here */

/* What the trainer resolves once and hands to create. */
typedef struct algo_setup {
    const calf_config *cfg;     /* read by create only: typed values are resolved there */
    const calf_env_spec *spec;  /* the environment's sizes and action bounds */
    comm *c;                    /* NULL when created only to act (calf play) */
    int E;                      /* global envs */
    int begin, count;           /* this process's envs [begin, begin + count); count 0: play */
    int T;                      /* steps per env per iteration (unroll_length) */
    uint64_t seed;
    int64_t total_iterations;   /* the run's planned iterations, from num_iterations or
                                 * num_env_steps (learning-rate schedules); 0 when only
                                 * acting */
} algo_setup;

/* One rollout step of this process's envs, as the trainer saw it. */
typedef struct algo_step {
    int s;                      /* step within the iteration, 0..T-1 */
    const float *obs;           /* (count, obs_dim) the observation acted on */
    const int *act;             /* (count) discrete actions taken */
    const float *u;             /* (count, action_dim) continuous actions as sampled */
    const float *reward;        /* (count) */
    const uint8_t *terminated;  /* (count) no bootstrap */
    const uint8_t *truncated;   /* (count) cut by the time limit: bootstrap */
    const float *final_obs;     /* (count, obs_dim) the step's own next observation (before
                                 * any auto-reset) */
    const float *next_obs;      /* (count, obs_dim) what the next step will act on (the reset
                                 * observation where an episode ended) */
    const uint8_t *next_mask;   /* (count, num_actions) the actions valid at final_obs (all 1
                                 * where terminated); NULL when the env has no mask */
    /* A uint8 env whose block is kept as bytes (its class writes them): obs, final_obs and
     * next_obs as (count, obs_dim) bytes, the floats' values, for an algorithm that keeps
     * bytes to take instead of narrowing the floats; NULL otherwise. */
    const uint8_t *obs8, *final_obs8, *next_obs8;
} algo_step;

/* An algorithm's functions. Its name is its row in ALGORITHMS (training/registry.h). */
typedef struct algorithm_ops {
    /* Build the algorithm for this process's envs: layout and initial parameters from
     * the (seed, 0, CALF_RNG_INIT) stream, per-env streams from (seed, global env,
     * purpose). Errors naming the binding's file:line (CALF_EINVAL) for settings this
     * algorithm cannot use. On error *out is NULL and nothing is left allocated. */
    int (*create)(const algo_setup *s, algorithm **out, calf_error *err);
    void (*destroy)(algorithm *a); /* NULL is fine */
    /* Collective, once after a checkpoint was (or was not) loaded and before the first
     * iteration: e.g. PPO moves its model to memory the processes share. May be NULL. */
    int (*start)(algorithm *a, calf_error *err);
    /* Actions for this process's envs at step s of iteration `iteration` (0-based):
     * writes act (count, action_ints: 1, or num_action_dims for MultiDiscrete) for
     * discrete envs, u (count, action_dim) for continuous ones (the env clips to its
     * bounds in a copy; u is what the algorithm sampled). mask (count, num_actions), or
     * NULL when the env has none: the actions each env's state allows; an algorithm that
     * takes masked envs never picks an invalid one (check refuses them otherwise). */
    void (*act)(algorithm *a, int64_t iteration, int s, const float *obs, const uint8_t *mask,
                int *act, float *u);
    /* What that step did. */
    void (*observe)(algorithm *a, const algo_step *st);
    /* Collective: this iteration's updates, after its T steps. */
    int (*train)(algorithm *a, int64_t iteration, calf_error *err);
    /* Greedy actions for rows of obs (evaluation, play); no collective. mask (rows,
     * num_actions) or NULL, as act's; act (rows, action_ints). */
    void (*greedy)(algorithm *a, const float *obs, const uint8_t *mask, int rows, int *act,
                   float *u);
    /* Optional (may be NULL: 0), a policy with memory (a recurrent core): the floats of
     * state each greedy row carries from one call to the next; 0 for none. */
    int (*greedy_memory)(const algorithm *a);
    /* Optional, required when greedy_memory says > 0: the next greedy calls act on rows
     * [0, rows), each starting an episode now (its state zeroed) and keeping its state from
     * call to call until the next reset; room is made for that many rows (CALF_ENOMEM when
     * it cannot be). A greedy call of more rows than the last reset made room for is a bug. */
    int (*greedy_reset)(algorithm *a, int rows, calf_error *err);
    /* Optional (NULL: the policy is deterministic, its samples are its greedy actions):
     * as greedy (mask, rows, act, u, the rows' state), but each row's action drawn from
     * the policy's distribution, row r's draws from rng[r] (advanced); no collective. */
    void (*sample)(algorithm *a, const float *obs, const uint8_t *mask, int rows,
                   calf_rng *rng, int *act, float *u);
    /* Optional, with greedy_reset: the rows among [0, rows) whose which byte is set start
     * an episode now (their state zeroed), the others keep theirs; rows at most the last
     * greedy_reset's (calf_policy_reset of given rows). */
    void (*greedy_reset_rows)(algorithm *a, const uint8_t *which, int rows);
    /* Collective when summaries are due: reduce the last train's statistics over envs
     * and write them (only the main process has a current writer). */
    int (*summarize)(algorithm *a, int64_t step, bool histograms, calf_error *err);
    /* A digest of every value that must agree across processes (parameters, optimizer
     * state); 0 when the processes share one copy and there is nothing to compare. */
    uint64_t (*digest)(const algorithm *a);
    /* Checkpoints: global state as tagged sections (written by the main process), and a
     * fixed-size record per env in global env order (gathered from every process). */
    void (*save)(const algorithm *a, ckpt_buf *b);
    /* Settings this algorithm cannot train with (before anything is written): a
     * file:line error, CALF_EINVAL. May be NULL. */
    int (*check)(const calf_config *cfg, const calf_env_spec *spec, calf_error *err);
    /* Whether the storage of `envs` envs (e.g. SAC's replay rings) fits in `memory` bytes,
     * what one machine's processes may use (`limit` says what bounds it, for the message),
     * before anything is written: else a file:line error naming what to change,
     * CALF_EINVAL. May be NULL (nothing grows with the run). */
    int (*check_memory)(const calf_config *cfg, const calf_env_spec *spec, int envs,
                        uint64_t memory, const char *limit, calf_error *err);
    /* Read what save wrote, checking it (a file may be damaged or foreign) against this
     * config and `iteration`, the checkpoint's. */
    int (*load)(algorithm *a, ckpt_reader *r, int64_t iteration, calf_error *err);
    size_t (*env_record_size)(const algorithm *a);
    void (*save_env)(const algorithm *a, int local_i, unsigned char *rec);
    int (*load_env)(algorithm *a, int local_i, const unsigned char *rec, const char *name,
                    calf_error *err);
    /* Lines for config.gin's header on how the config was laid out (e.g. minibatches),
     * each but the last ending in '\n'; may be NULL. */
    void (*describe)(const algorithm *a, char *text, size_t cap);
    /* Lines for the rank log at the end of a run of run_s seconds (e.g. what work
     * sharing did), each ending in '\n'; may be NULL. */
    void (*report)(const algorithm *a, double run_s, char *text, size_t cap);
    /* `calf export`: greedy as C (numerics/export_c.h): the networks it runs and the body of
     * calf_policy_act, computing for one row exactly what greedy computes. May be NULL:
     * the algorithm cannot be exported. */
    int (*export_c)(const algorithm *a, export_c *x, calf_error *err);
} algorithm_ops;

/* One algorithm of the registry. */
typedef struct algorithm_entry {
    const char *name;           /* as a config names it: TrainerConfig.algorithm_ctor = @name */
    const algorithm_ops *ops;
} algorithm_entry;

/* Every algorithm's ops, each defined by its file in src/algorithms/. */
#define ALGORITHM_OPS_EXTERN_(name, ops, bindings, defaults, in_every_digest) \
    extern const algorithm_ops ops;
ALGORITHMS(ALGORITHM_OPS_EXTERN_)
#undef ALGORITHM_OPS_EXTERN_

/* The registry, made from ALGORITHMS, in its order (that of algorithm_ctor's choices);
 * *n is its length. Static storage. */
const algorithm_entry *algorithm_registry(int *n);
/* Whether `entries` make a registry: each name a reference a config can write (a letter
 * or '_', then letters, digits and '_') and no other entry's, each ops with every entry
 * this header does not call optional. Else CALF_EINVAL naming the entry. */
int algorithm_registry_check(const algorithm_entry *entries, int n, calf_error *err);
/* The algorithm a config names (TrainerConfig.algorithm_ctor, whose choices are the
 * registry's names); NULL if unknown. */
const algorithm_ops *algorithm_find(const char *name);

#endif
