/* mj_half_cheetah.c: HalfCheetah-v4 as Gymnasium defines it: frame skip 5 (dt 0.05),
 * reward x velocity of qpos[0] minus 0.1 * sum(action^2), never terminates; observation
 * qpos[1:] then qvel (17); reset noise U(+-0.1) on qpos, 0.1 * N(0, 1) on qvel. */
#include "envs/envs.h"
#include "envs/mj_env.h"

enum { NQ = 9, NV = 9, NU = 6 };

static const float lo[NU] = {-1, -1, -1, -1, -1, -1}, hi[NU] = {1, 1, 1, 1, 1, 1};

static const mj_task task = {
    .name = "HalfCheetah-v4",
    .file = "half_cheetah_v4.xml",
    .xml = mjcf_half_cheetah_v4,
    .xml_size = &mjcf_half_cheetah_v4_size,
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
};

static int hc_create(void *state, calf_error *err) { return mj_env_create(state, &task, err); }

const calf_env_class half_cheetah_class = {
    .spec = {.name = "HalfCheetah-v4",
             .obs_dim = NQ - 1 + NV,
             .action_dim = NU,
             .action_low = lo,
             .action_high = hi,
             .max_episode_steps = 1000,
             .state_size = sizeof(mj_state),
             .save_size = MJ_SAVE_SIZE(NQ, NV, 0, NU),
             .reset_state_dim = NQ + NV},
    .reset = mj_env_reset_hook,
    .step = mj_env_step_hook,
    .observe = mj_env_observe_hook,
    .create = hc_create,
    .destroy = mj_env_destroy_hook,
    .save = mj_env_save_hook,
    .load = mj_env_load_hook,
    .reset_state = mj_env_reset_state_hook,
};
