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

static const mj_task task = {
    .name = "Hopper-v4",
    MJ_TASK_MODEL(hopper_v4),
    .frame_skip = 4,
    .nq = NQ, .nv = NV, .nu = NU,
    .qpos_noise = 5e-3,
    .qvel_noise = 5e-3,
    .qvel_normal = 0,
    .spec = &hopper_class.spec,
    .obs_qpos_from = 1,
    .obs_qvel_clip = 10.0,
    .ctrl_cost_weight = 1e-3f,
    .healthy_reward = 1.0,
    .healthy = hopper_healthy,
    .camera = {.fps = 125, .track_body = 2, .distance = 3.0, .has_lookat = true,
               .lookat = {0, 0, 1.15}, .has_elevation = true, .elevation = -20.0},
};

static int hopper_create(void *state, calf_error *err) { return mj_env_create(state, &task, err); }

const calf_env_class hopper_class =
    MJ_LOCOMOTION_CLASS("Hopper-v4", NQ - 1 + NV, NQ, NV, NU, lo, hi, hopper_create);
