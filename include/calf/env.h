/* calf/env.h: the environment interface and the registry of environment classes.
 * An environment is plain-data state plus two functions (reset, step) over it, so a
 * checkpoint can memcpy the state, and every random draw comes from the env's own
 * stream seeded by (seed, global env index), never from which process steps it. */
#ifndef CALF_ENV_H
#define CALF_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "calf/error.h"
#include "calf/rng.h"

#define CALF_ENV_MAX_OBS 32
#define CALF_ENV_MAX_ACT 8
#define CALF_ENV_MAX_CLASSES 64 /* built-ins plus registered classes */

typedef struct calf_env_spec {
    const char *name;        /* e.g. "CartPole-v1"; unique in the registry */
    int obs_dim;             /* 1..CALF_ENV_MAX_OBS */
    int num_actions;         /* discrete: number of actions; 0 when continuous */
    int action_dim;          /* continuous: size of the action vector (1..CALF_ENV_MAX_ACT); 0 when discrete */
    float action_low[CALF_ENV_MAX_ACT], action_high[CALF_ENV_MAX_ACT]; /* continuous bounds, low < high */
    int max_episode_steps;   /* time limit: truncated=1 when reached */
    size_t state_size;       /* bytes of the env's plain-data physical state (memcpy-able) */
} calf_env_spec;

struct calf_env;

typedef struct calf_env_class {
    calf_env_spec spec;
    /* state points to spec.state_size bytes; plain data so checkpoints can memcpy it.
     * Draws the initial state from rng and writes the first observation (obs_dim). */
    void (*reset)(void *state, calf_rng *rng, float *obs);
    /* Advance one step; returns terminated (0/1). Discrete envs read `action`
     * (0..num_actions-1), continuous ones read `u` (action_dim, already clipped to
     * bounds). Writes the next observation (obs_dim) and the reward. */
    int (*step)(void *state, calf_rng *rng, int action, const float *u, float *obs, float *reward);
    /* Optional (may be NULL): write the observation of the current state, the same
     * one reset/step last wrote. Used to validate checkpointed records. */
    void (*observe)(const void *state, float *obs);
    /* Optional (may be NULL): step envs[0..n) at once, bit for bit as n calls of
     * `step` would (each env's state and rng are its own), so grouping never changes
     * a result. Reads actions (n) or u (n, action_dim; already clipped); writes obs
     * (n, obs_dim), reward (n), terminated (n). Lets a class overlap independent envs
     * (libm calls, divisions) that one-at-a-time stepping serialises. Time limits and
     * resets stay with the caller. */
    void (*step_many)(struct calf_env *envs, int n, const int *actions, const float *u, float *obs,
                      float *reward, uint8_t *terminated);
} calf_env_class;

typedef struct calf_env {
    const calf_env_class *cls;
    void *state;            /* owned: spec.state_size bytes */
    calf_rng rng;           /* dynamics/reset stream: (seed, index, CALF_RNG_DYNAMICS) */
    int elapsed_steps;      /* steps in the current episode */
} calf_env;

/* Add a class to the registry. The registry keeps the pointer, so cls must outlive
 * every use (a static object). Fails with CALF_EINVAL on a duplicate name or a bad
 * spec, and when the registry is full. Not thread-safe: register at start-up. */
int calf_env_register(const calf_env_class *cls, calf_error *err);
const calf_env_class *calf_env_find(const char *name);  /* NULL if unknown */
int calf_env_count(void);
const calf_env_class *calf_env_at(int i);   /* built-ins first, in a fixed order; NULL out of range */
/* Writes "A, B, C" (the registered names, in order) into buf; truncates to fit. */
void calf_env_list_names(char *buf, size_t size);

/* Create env `index` of a job seeded with `seed`. Unknown name -> CALF_EINVAL naming
 * it and listing the known names. The state is zeroed: call calf_env_reset before
 * the first step. */
int calf_env_init(calf_env *env, const char *name, uint64_t seed, uint64_t index, calf_error *err);
void calf_env_free(calf_env *env);      /* safe on a zeroed/freed env */
/* Start a new episode: draws from env->rng, elapsed_steps = 0, writes obs (obs_dim). */
void calf_env_reset(calf_env *env, float *obs);
/* One step. Clips continuous actions to bounds (in a copy, not the caller's buffer;
 * NaN stays NaN); sets truncated when elapsed_steps reaches max_episode_steps and the
 * step did not terminate. Does not reset: the caller does, after either flag. */
void calf_env_step(calf_env *env, int action, const float *u, float *obs, float *reward,
                   int *terminated, int *truncated);

#endif
