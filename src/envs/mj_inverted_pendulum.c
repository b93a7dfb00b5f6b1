/* mj_inverted_pendulum.c: InvertedPendulum-v4 as Gymnasium defines it: frame skip 2
 * (dt 0.04), reward 1 every step, terminated when the observation is not finite or
 * the pole's angle |qpos[1]| exceeds 0.2; observation qpos then qvel (4); reset noise
 * U(+-0.01) on qpos and qvel. */
#include <math.h>

#include "envs/envs.h"
#include "envs/mj_env.h"

enum { NQ = 2, NV = 2, NU = 1 };

static const float lo[NU] = {-3}, hi[NU] = {3};

static int ip_terminated(const mjData *d) {
    int finite = 1;
    for (int i = 0; i < NQ; i++) finite &= isfinite(d->qpos[i]) != 0;
    for (int i = 0; i < NV; i++) finite &= isfinite(d->qvel[i]) != 0;
    return !finite || fabs(d->qpos[1]) > 0.2;
}

static const mj_task task = {
    .name = "InvertedPendulum-v4",
    .file = "inverted_pendulum_v4.xml",
    .xml = mjcf_inverted_pendulum_v4,
    .xml_size = &mjcf_inverted_pendulum_v4_size,
    .frame_skip = 2,
    .nq = NQ, .nv = NV, .nu = NU,
    .qpos_noise = 0.01,
    .qvel_noise = 0.01,
    .qvel_normal = 0,
    .spec = &inverted_pendulum_class.spec,
    .healthy_reward = 1.0, /* the whole reward: 1 per step, no forward term, no cost */
    .terminated = ip_terminated,
};

static int ip_create(void *state, calf_error *err) { return mj_env_create(state, &task, err); }

const calf_env_class inverted_pendulum_class =
    MJ_ENV_CLASS("InvertedPendulum-v4", NQ + NV, NQ, NV, NU, lo, hi, ip_create);
