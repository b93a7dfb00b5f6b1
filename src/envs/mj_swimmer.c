/* mj_swimmer.c: Swimmer-v4 as Gymnasium defines it: frame skip 4 (dt 0.04), reward x
 * velocity of qpos[0] minus 1e-4 * sum(action^2), never terminates; observation qpos[2:]
 * then qvel (8); reset noise U(+-0.1) on qpos and qvel. */
#include "envs/envs.h"
#include "envs/mj_env.h"

enum { NQ = 5, NV = 5, NU = 2 };

static const float lo[NU] = {-1, -1}, hi[NU] = {1, 1};

static const mj_task task = {
    .name = "Swimmer-v4",
    MJ_TASK_MODEL(swimmer_v4),
    .frame_skip = 4,
    .nq = NQ, .nv = NV, .nu = NU,
    .qpos_noise = 0.1,
    .qvel_noise = 0.1,
    .qvel_normal = 0,
    .spec = &swimmer_class.spec,
    .obs_qpos_from = 2,
    .obs_qvel_clip = 0,
    .ctrl_cost_weight = 1e-4f,
    .healthy_reward = 0,
    .healthy = NULL,
    .camera = {.fps = 25, .track_body = 1, .distance = 0},
};

static int swimmer_create(void *state, calf_error *err) { return mj_env_create(state, &task, err); }

const calf_env_class swimmer_class =
    MJ_LOCOMOTION_CLASS("Swimmer-v4", NQ - 2 + NV, NQ, NV, NU, lo, hi, swimmer_create);
