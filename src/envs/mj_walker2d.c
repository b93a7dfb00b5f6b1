/* mj_walker2d.c: Walker2d-v4 as Gymnasium defines it: frame skip 4 (dt 0.008), reward
 * x velocity of qpos[0] plus 1 (healthy) minus 1e-3 * sum(action^2); terminated when
 * the height qpos[1] leaves (0.8, 2) or the angle qpos[2] leaves (-1, 1); observation
 * qpos[1:] then qvel clipped to +-10 (17); reset noise U(+-5e-3) on qpos and qvel. */
#include "envs/envs.h"
#include "envs/mj_env.h"

enum { NQ = 9, NV = 9, NU = 6 };

static const float lo[NU] = {-1, -1, -1, -1, -1, -1}, hi[NU] = {1, 1, 1, 1, 1, 1};

static int walker_healthy(const mjData *d) {
    double z = d->qpos[1], angle = d->qpos[2];
    return (0.8 < z && z < 2.0) && (-1.0 < angle && angle < 1.0);
}

static const mj_task task = {
    .name = "Walker2d-v4",
    MJ_TASK_MODEL(walker2d_v4),
    .frame_skip = 4,
    .nq = NQ, .nv = NV, .nu = NU,
    .qpos_noise = 5e-3,
    .qvel_noise = 5e-3,
    .qvel_normal = 0,
    .spec = &walker2d_class.spec,
    .obs_qpos_from = 1,
    .obs_qvel_clip = 10.0,
    .ctrl_cost_weight = 1e-3f,
    .healthy_reward = 1.0,
    .healthy = walker_healthy,
    .camera = {.fps = 125, .track_body = 2, .distance = 4.0, .has_lookat = true,
               .lookat = {0, 0, 1.15}, .has_elevation = true, .elevation = -20.0},
};

static int walker_create(void *state, calf_error *err) { return mj_env_create(state, &task, err); }

const calf_env_class walker2d_class =
    MJ_LOCOMOTION_CLASS("Walker2d-v4", NQ - 1 + NV, NQ, NV, NU, lo, hi, walker_create);
