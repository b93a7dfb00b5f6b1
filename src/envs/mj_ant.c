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

static int ant_healthy(const mjData *d) {
    for (int i = 0; i < NQ; i++)
        if (!isfinite(d->qpos[i])) return 0;
    for (int i = 0; i < NV; i++)
        if (!isfinite(d->qvel[i])) return 0;
    return 0.2 <= d->qpos[2] && d->qpos[2] <= 1.0;
}

static const mj_task task = {
    .name = "Ant-v4",
    MJ_TASK_MODEL(ant_v4),
    .frame_skip = 5,
    .nq = NQ, .nv = NV, .nu = NU,
    .qpos_noise = 0.1,
    .qvel_noise = 0.1,
    .qvel_normal = 1,
    .track_body = "torso",
    .spec = &ant_class.spec,
    .obs_qpos_from = 2,
    .obs_qvel_clip = 0,
    .ctrl_cost_weight = 0.5f,
    .healthy_reward = 1.0,
    .healthy = ant_healthy,
    .camera = {.fps = 20, .track_body = 1, .distance = 4.0},
};

static int ant_create(void *state, calf_error *err) { return mj_env_create(state, &task, err); }

const calf_env_class ant_class =
    MJ_LOCOMOTION_CLASS("Ant-v4", NQ - 2 + NV, NQ, NV, NU, lo, hi, ant_create);
