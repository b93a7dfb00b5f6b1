/* novel.c: CartPoleNoVel-v1 and PendulumNoVel-v1, partially observable classic control:
 * CartPole-v1 and Pendulum-v1 (their own classes' functions: same dynamics, rewards,
 * time limits and random draws) with the velocity entries of the observation zeroed, as
 * rl-baselines3-zoo's MaskVelocityWrapper defines them (rl_zoo3/wrappers.py: velocity
 * indices CartPole-v1 [1, 3], Pendulum-v1 [2]). Only a policy with memory can solve them. */
#include "envs/envs.h"

/* The wrapper returns `observation * mask` in float32 with mask 0 at the velocity
 * indices and 1 elsewhere: the other entries keep their bits (x * 1 == x), a masked one
 * becomes a zero with the velocity's sign (-0.0 where it was negative), as here. */
static const int cartpole_masked[] = {1, 3};
static const int pendulum_masked[] = {2};

static void mask(float *obs, const int *idx, int n) {
    for (int k = 0; k < n; k++) obs[idx[k]] = obs[idx[k]] * 0.0f;
}

#define MASK_CARTPOLE(obs) mask((obs), cartpole_masked, 2)
#define MASK_PENDULUM(obs) mask((obs), pendulum_masked, 1)

static void cartpole_novel_reset(void *state, calf_rng *rng, float *obs) {
    cartpole_class.reset(state, rng, obs);
    MASK_CARTPOLE(obs);
}

static int cartpole_novel_step(void *state, calf_rng *rng, int action, const float *u,
                               float *obs, float *reward) {
    int rc = cartpole_class.step(state, rng, action, u, obs, reward);
    MASK_CARTPOLE(obs);
    return rc;
}

static void cartpole_novel_observe(const void *state, float *obs) {
    cartpole_class.observe(state, obs);
    MASK_CARTPOLE(obs);
}

static void cartpole_novel_step_many(calf_env *envs, int n, const int *actions, const float *u,
                                     float *obs, float *reward, uint8_t *terminated) {
    cartpole_class.step_many(envs, n, actions, u, obs, reward, terminated);
    for (int i = 0; i < n; i++) MASK_CARTPOLE(obs + 4 * i);
}

static void pendulum_novel_reset(void *state, calf_rng *rng, float *obs) {
    pendulum_class.reset(state, rng, obs);
    MASK_PENDULUM(obs);
}

static int pendulum_novel_step(void *state, calf_rng *rng, int action, const float *u,
                               float *obs, float *reward) {
    int rc = pendulum_class.step(state, rng, action, u, obs, reward);
    MASK_PENDULUM(obs);
    return rc;
}

static void pendulum_novel_observe(const void *state, float *obs) {
    pendulum_class.observe(state, obs);
    MASK_PENDULUM(obs);
}

/* The specs are the base classes' (a static initializer cannot read another object's
 * fields); test_envs checks that they agree field by field. */
const calf_env_class cartpole_novel_class = {
    .spec = {.name = "CartPoleNoVel-v1",
             .obs_dim = 4,
             .num_actions = 2,
             .action_dim = 0,
             .max_episode_steps = 500,
             .state_size = sizeof(cartpole_state)},
    .reset = cartpole_novel_reset,
    .step = cartpole_novel_step,
    .observe = cartpole_novel_observe,
    .step_many = cartpole_novel_step_many,
};

const calf_env_class pendulum_novel_class = {
    .spec = {.name = "PendulumNoVel-v1",
             .obs_dim = 3,
             .num_actions = 0,
             .action_dim = 1,
             .action_low = (const float[]){-2.0f},
             .action_high = (const float[]){2.0f},
             .max_episode_steps = 200,
             .state_size = sizeof(pendulum_state)},
    .reset = pendulum_novel_reset,
    .step = pendulum_novel_step,
    .observe = pendulum_novel_observe,
};
