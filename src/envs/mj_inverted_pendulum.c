/* mj_inverted_pendulum.c: InvertedPendulum-v4 as Gymnasium defines it: frame skip 2
 * (dt 0.04), reward 1 every step, terminated when the observation is not finite or
 * the pole's angle |qpos[1]| exceeds 0.2; observation qpos then qvel (4); reset noise
 * U(+-0.01) on qpos and qvel. */
#include <math.h>

#include "envs/envs.h"
#include "envs/mj_env.h"

enum { NQ = 2, NV = 2, NU = 1 };

static const float lo[NU] = {-3}, hi[NU] = {3};

static void ip_observe(const void *state, float *obs);

static const mj_task task = {
    .name = "InvertedPendulum-v4",
    MJ_TASK_MODEL(inverted_pendulum_v4),
    .frame_skip = 2,
    .nq = NQ, .nv = NV, .nu = NU,
    .qpos_noise = 0.01,
    .qvel_noise = 0.01,
    .qvel_normal = 0,
    .spec = &inverted_pendulum_class.spec,
    .observe = ip_observe,
    .camera = {.fps = 25, .track_body = -1, .distance = 2.04},
};

static int ip_create(void *state, calf_error *err) { return mj_env_create(state, &task, err); }

static void ip_observe(const void *state, float *obs) {
    const mjData *d = ((const mj_state *)state)->d;
    for (int i = 0; i < NQ; i++) *obs++ = (float)d->qpos[i];
    for (int i = 0; i < NV; i++) *obs++ = (float)d->qvel[i];
}

static int ip_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                   float *reward) {
    (void)rng;
    (void)action;
    mj_state *s = state;
    mj_env_simulate(s, u);
    const mjData *d = s->d;
    int finite = 1;
    for (int i = 0; i < NQ; i++) finite &= isfinite(d->qpos[i]) != 0;
    for (int i = 0; i < NV; i++) finite &= isfinite(d->qvel[i]) != 0;
    *reward = 1.0f;
    ip_observe(s, obs);
    return !finite || fabs(d->qpos[1]) > 0.2;
}

const calf_env_class inverted_pendulum_class =
    MJ_ENV_CLASS("InvertedPendulum-v4", NQ + NV, NQ, NV, NU, lo, hi, mj_env_reset_hook, ip_step,
                 ip_observe, ip_create);
