/* mj_ant.c: Ant-v4 as Gymnasium defines it (use_contact_forces False): frame skip 5
 * (dt 0.05), reward the torso's x velocity (its body position xpos, as each step leaves
 * it: the position at the start of the last physics step) plus 1 (healthy) minus
 * 0.5 * sum(action^2); terminated when some of qpos, qvel is not finite or the height
 * qpos[2] leaves [0.2, 1]; observation qpos[2:] then qvel (27); reset noise U(+-0.1) on
 * qpos, 0.1 * N(0, 1) on qvel. */
#include <math.h>

#include "envs/envs.h"
#include "envs/mj_env.h"

enum { NQ = 15, NV = 14, NU = 8 };

static const float lo[NU] = {-1, -1, -1, -1, -1, -1, -1, -1}, hi[NU] = {1, 1, 1, 1, 1, 1, 1, 1};

static const mj_task task = {
    .name = "Ant-v4",
    .file = "ant_v4.xml",
    .xml = mjcf_ant_v4,
    .xml_size = &mjcf_ant_v4_size,
    .frame_skip = 5,
    .nq = NQ, .nv = NV, .nu = NU,
    .qpos_noise = 0.1,
    .qvel_noise = 0.1,
    .qvel_normal = 1,
    .track_body = "torso",
    .spec = &ant_class.spec,
};

static int ant_create(void *state, calf_error *err) { return mj_env_create(state, &task, err); }

static void ant_observe(const void *state, float *obs) {
    const mjData *d = ((const mj_state *)state)->d;
    for (int i = 2; i < NQ; i++) *obs++ = (float)d->qpos[i];
    for (int i = 0; i < NV; i++) *obs++ = (float)d->qvel[i];
}

static int ant_healthy(const mjData *d) {
    for (int i = 0; i < NQ; i++)
        if (!isfinite(d->qpos[i])) return 0;
    for (int i = 0; i < NV; i++)
        if (!isfinite(d->qvel[i])) return 0;
    return 0.2 <= d->qpos[2] && d->qpos[2] <= 1.0;
}

static void ant_reset(void *state, calf_rng *rng, float *obs) {
    mj_env_reset(state, rng);
    ant_observe(state, obs);
}

static int ant_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                    float *reward) {
    (void)rng;
    (void)action;
    mj_state *s = state;
    double x_before = s->track_xy[0];
    mj_env_simulate(s, u);
    double x_velocity = (s->track_xy[0] - x_before) / mj_env_dt(s);
    double forward_reward = x_velocity;
    double healthy_reward = 1.0; /* terminate_when_unhealthy: paid every step */
    double rewards = forward_reward + healthy_reward;
    float ctrl_cost = 0.5f * mj_env_sum_squares(u, NU);
    *reward = (float)(rewards - (double)ctrl_cost);
    ant_observe(s, obs);
    return !ant_healthy(s->d);
}

const calf_env_class ant_class = {
    .spec = {.name = "Ant-v4",
             .obs_dim = NQ - 2 + NV,
             .action_dim = NU,
             .action_low = lo,
             .action_high = hi,
             .max_episode_steps = 1000,
             .state_size = sizeof(mj_state),
             .save_size = MJ_SAVE_SIZE(NQ, NV, 0, NU),
             .reset_state_dim = NQ + NV},
    .reset = ant_reset,
    .step = ant_step,
    .observe = ant_observe,
    .create = ant_create,
    .destroy = mj_env_destroy_hook,
    .save = mj_env_save_hook,
    .load = mj_env_load_hook,
    .reset_state = mj_env_reset_state_hook,
};
