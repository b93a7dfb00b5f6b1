/* plugin_abi2.c: a plug-in env that tests/e2e_plugin.sh builds against the frozen
 * ABI-2 and ABI-3 headers (-I tests/abi2, tests/abi3) and against this calf's, and trains
 * with each: the loader must read an old build's class in its version's layout and give
 * the same bytes.
 * Stairs-v0 climbs a staircase whose height create_at draws from (seed, index). */
#include <math.h>

#include "calf/env.h"

typedef struct stairs_state {
    int step, height;     /* height: drawn once per env by create_at */
    uint64_t seed, index; /* what create_at was told */
} stairs_state;

static const calf_env_class stairs_class;

static void stairs_observe(const void *state, float *obs) {
    const stairs_state *s = state;
    obs[0] = (float)s->step / (float)s->height;
    obs[1] = (float)s->height / 10.0f;
    obs[2] = (float)(s->index % 3);
}

static void stairs_reset(void *state, calf_rng *rng, float *obs) {
    stairs_state *s = state;
    s->step = (int)calf_rng_below(rng, 2);
    stairs_observe(s, obs);
}

/* 1 climbs, 0 steps down (not below the floor); the top pays 1 and ends the episode. */
static int stairs_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                       float *reward) {
    (void)rng, (void)u;
    stairs_state *s = state;
    s->step += action == 1 ? 1 : s->step > 0 ? -1 : 0;
    int top = s->step >= s->height;
    *reward = top ? 1.0f : -0.02f;
    stairs_observe(s, obs);
    return top;
}

/* Told its own class object, which it reads in the layout it was built with: a loader
 * that passed its converted copy would fail here. */
static int stairs_create_at(void *state, const calf_env_class *cls, uint64_t seed, uint64_t index,
                            calf_error *err) {
    if (cls != &stairs_class || cls->spec.obs_dim != 3 || cls->create_at != stairs_create_at)
        return calf_error_set(err, CALF_EINVAL, "Stairs-v0: create_at was not told its own class");
    stairs_state *s = state;
    s->seed = seed, s->index = index;
    s->height = 3 + (int)((seed * 7 + index * 5) % 6);
    return CALF_OK;
}

#if CALF_PLUGIN_ABI_VERSION == 2 || defined(STAIRS_KEEP_STEP_MANY)
/* Old builds only: a step_many that is not step's equal (a NaN observation, which stops a
 * job), so a loader that kept an ABI-2 class's step_many, whose calf_env_class it may read
 * in the old layout, fails the test (STAIRS_KEEP_STEP_MANY: a new build that keeps it, to
 * show the NaN stops a job). */
static void stairs_step_many(struct calf_env *envs, int n, const int *actions, const float *u,
                             float *obs, float *reward, uint8_t *terminated) {
    (void)actions, (void)u;
    for (int i = 0; i < n; i++) {
        obs[3 * i] = obs[3 * i + 1] = obs[3 * i + 2] = NAN;
        reward[i] = 0;
        terminated[i] = 0;
        (void)envs;
    }
}
#endif

static const calf_env_class stairs_class = {
    .spec = {.name = "Stairs-v0",
             .obs_dim = 3,
             .num_actions = 2,
             .max_episode_steps = 25,
             .state_size = sizeof(stairs_state)},
    .reset = stairs_reset,
    .step = stairs_step,
    .observe = stairs_observe,
#if CALF_PLUGIN_ABI_VERSION == 2 || defined(STAIRS_KEEP_STEP_MANY)
    .step_many = stairs_step_many,
#endif
    .create_at = stairs_create_at,
};

int calf_plugin_register(int abi_version, calf_error *err) {
    int rc = CALF_PLUGIN_CHECK_ABI(abi_version, err);
    if (rc != CALF_OK) return rc;
    return calf_env_register(&stairs_class, err);
}
