/* mj_inverted_double_pendulum.c: InvertedDoublePendulum-v4 as Gymnasium defines it:
 * frame skip 5 (dt 0.05); reward 10 - (0.01 x^2 + (y - 2)^2) - (1e-3 v1^2 + 5e-3 v2^2)
 * from the tip site's position (x, y: its xpos x and z as the step leaves it) and the
 * hinges' velocities; terminated when y <= 1; observation the cart's x, sin and cos of
 * the two angles, qvel and qfrc_constraint clipped to +-10 (11); reset noise U(+-0.1)
 * on qpos, 0.1 * N(0, 1) on qvel. */
#include "base/cmath.h"
#include "envs/envs.h"
#include "envs/mj_env.h"

enum { NQ = 3, NV = 3, NU = 1, OBS = 1 + 2 * (NQ - 1) + 2 * NV };

static const float lo[NU] = {-1}, hi[NU] = {1};

static void idp_observe(const void *state, float *obs);

static const mj_task task = {
    .name = "InvertedDoublePendulum-v4",
    MJ_TASK_MODEL(inverted_double_pendulum_v4),
    .frame_skip = 5,
    .nq = NQ, .nv = NV, .nu = NU,
    .qpos_noise = 0.1,
    .qvel_noise = 0.1,
    .qvel_normal = 1,
    .keep = MJ_KEEP_QFRC_CONSTRAINT,
    .spec = &inverted_double_pendulum_class.spec,
    .observe = idp_observe,
    .camera = {.fps = 20, .track_body = -1, .distance = 4.1225, .has_lookat = true,
               .lookat = {0, 0, 0.12250000000000005}},
};

static int idp_create(void *state, calf_error *err) {
    int rc = mj_env_create(state, &task, err);
    if (rc == CALF_OK && ((mj_state *)state)->m->nsite != 1) {
        mj_env_destroy(state);
        return calf_error_set(err, CALF_EIO, "%s: the model must have one site, the tip", task.name);
    }
    return rc;
}

static float clip10(double v) { return (float)(v < -10 ? -10 : v > 10 ? 10 : v); }

static void idp_observe(const void *state, float *obs) {
    const mjData *d = ((const mj_state *)state)->d;
    *obs++ = (float)d->qpos[0];
    for (int i = 1; i < NQ; i++) *obs++ = (float)cm_sin(d->qpos[i]);
    for (int i = 1; i < NQ; i++) *obs++ = (float)cm_cos(d->qpos[i]);
    for (int i = 0; i < NV; i++) *obs++ = clip10(d->qvel[i]);
    for (int i = 0; i < NV; i++) *obs++ = clip10(d->qfrc_constraint[i]);
}

static int idp_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                    float *reward) {
    (void)rng;
    (void)action;
    mj_state *s = state;
    mj_env_simulate(s, u);
    idp_observe(s, obs);
    const mjData *d = s->d;
    double x = d->site_xpos[0], y = d->site_xpos[2];
    double dist_penalty = 0.01 * (x * x) + (y - 2) * (y - 2);
    double v1 = d->qvel[1], v2 = d->qvel[2];
    double vel_penalty = 1e-3 * (v1 * v1) + 5e-3 * (v2 * v2);
    *reward = (float)(10.0 - dist_penalty - vel_penalty);
    return y <= 1;
}

const calf_env_class inverted_double_pendulum_class =
    MJ_TASK_CLASS("InvertedDoublePendulum-v4", OBS, NQ, NV, NU, lo, hi, 1000, NV, mj_env_reset_hook,
                  idp_step, idp_observe, idp_create);
