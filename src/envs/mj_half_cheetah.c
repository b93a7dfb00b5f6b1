/* mj_half_cheetah.c: HalfCheetah-v4 as Gymnasium defines it: frame skip 5 (dt 0.05),
 * reward x velocity of qpos[0] minus 0.1 * sum(action^2), never terminates; observation
 * qpos[1:] then qvel (17); reset noise U(+-0.1) on qpos, 0.1 * N(0, 1) on qvel. */
#include "envs/envs.h"
#include "envs/mj_env.h"

enum { NQ = 9, NV = 9, NU = 6 };

static const float lo[NU] = {-1, -1, -1, -1, -1, -1}, hi[NU] = {1, 1, 1, 1, 1, 1};

static const mj_task task = {
    .name = "HalfCheetah-v4",
    MJ_TASK_MODEL(half_cheetah_v4),
    .frame_skip = 5,
    .nq = NQ, .nv = NV, .nu = NU,
    .qpos_noise = 0.1,
    .qvel_noise = 0.1,
    .qvel_normal = 1,
    .spec = &half_cheetah_class.spec,
    .obs_qpos_from = 1,
    .obs_qvel_clip = 0,
    .ctrl_cost_weight = 0.1f,
    .healthy_reward = 0,
    .healthy = NULL,
    .camera = {.fps = 20, .track_body = 1, .distance = 4.0},
};

static int hc_create(void *state, calf_error *err) { return mj_env_create(state, &task, err); }

const calf_env_class half_cheetah_class =
    MJ_LOCOMOTION_CLASS("HalfCheetah-v4", NQ - 1 + NV, NQ, NV, NU, lo, hi, hc_create);
