/* mj_hopper.c: Hopper-v4 as Gymnasium defines it: frame skip 4 (dt 0.008), reward x
 * velocity of qpos[0] plus 1 (healthy) minus 1e-3 * sum(action^2); terminated when
 * unhealthy: some of qpos[2:] and qvel outside (-100, 100), height qpos[1] <= 0.7 or
 * angle qpos[2] outside (-0.2, 0.2); observation qpos[1:] then qvel clipped to +-10
 * (11); reset noise U(+-5e-3) on qpos and qvel. */
#include <math.h>

#include "envs/envs.h"
#include "envs/mj_env.h"

enum { NQ = 6, NV = 6, NU = 3 };

static const float lo[NU] = {-1, -1, -1}, hi[NU] = {1, 1, 1};

static const mj_task task = {
    .name = "Hopper-v4",
    .file = "hopper_v4.xml",
    .xml = mjcf_hopper_v4,
    .xml_size = &mjcf_hopper_v4_size,
    .frame_skip = 4,
    .nq = NQ, .nv = NV, .nu = NU,
    .qpos_noise = 5e-3,
    .qvel_noise = 5e-3,
    .qvel_normal = 0,
    .spec = &hopper_class.spec,
};

static int hopper_create(void *state, calf_error *err) { return mj_env_create(state, &task, err); }

static double clip10(double v) { return v < -10.0 ? -10.0 : v > 10.0 ? 10.0 : v; }

static void hopper_observe(const void *state, float *obs) {
    const mjData *d = ((const mj_state *)state)->d;
    for (int i = 1; i < NQ; i++) *obs++ = (float)d->qpos[i];
    for (int i = 0; i < NV; i++) *obs++ = (float)clip10(d->qvel[i]);
}

/* Comparisons as Gymnasium writes them: a NaN anywhere is unhealthy. */
static int hopper_healthy(const mjData *d) {
    int state_ok = 1;
    for (int i = 2; i < NQ; i++) state_ok &= -100.0 < d->qpos[i] && d->qpos[i] < 100.0;
    for (int i = 0; i < NV; i++) state_ok &= -100.0 < d->qvel[i] && d->qvel[i] < 100.0;
    double z = d->qpos[1], angle = d->qpos[2];
    int z_ok = 0.7 < z && z < INFINITY;
    int angle_ok = -0.2 < angle && angle < 0.2;
    return state_ok && z_ok && angle_ok;
}

static void hopper_reset(void *state, calf_rng *rng, float *obs) {
    mj_env_reset(state, rng);
    hopper_observe(state, obs);
}

static int hopper_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                       float *reward) {
    (void)rng;
    (void)action;
    mj_state *s = state;
    double x_before = s->d->qpos[0];
    mj_env_simulate(s, u);
    double x_velocity = (s->d->qpos[0] - x_before) / mj_env_dt(s);
    float ctrl_cost = 1e-3f * mj_env_sum_squares(u, NU);
    double forward_reward = 1.0 * x_velocity;
    double healthy_reward = 1.0; /* terminate_when_unhealthy: paid every step */
    double rewards = forward_reward + healthy_reward;
    *reward = (float)(rewards - (double)ctrl_cost);
    hopper_observe(s, obs);
    return !hopper_healthy(s->d);
}

const calf_env_class hopper_class = {
    .spec = {.name = "Hopper-v4",
             .obs_dim = NQ - 1 + NV,
             .action_dim = NU,
             .action_low = lo,
             .action_high = hi,
             .max_episode_steps = 1000,
             .state_size = sizeof(mj_state),
             .save_size = MJ_SAVE_SIZE(NQ, NV, 0, NU),
             .reset_state_dim = NQ + NV},
    .reset = hopper_reset,
    .step = hopper_step,
    .observe = hopper_observe,
    .create = hopper_create,
    .destroy = mj_env_destroy_hook,
    .save = mj_env_save_hook,
    .load = mj_env_load_hook,
    .reset_state = mj_env_reset_state_hook,
};
