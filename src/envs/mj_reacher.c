/* mj_reacher.c: Reacher-v4 as Gymnasium defines it: frame skip 2 (dt 0.02), 50 steps;
 * reward -|fingertip - target| - sum(action^2), taken before the step from the bodies'
 * xpos as the previous step (or the reset) left them; never terminates; observation cos
 * and sin of the two arm angles, the target's qpos, the arm's qvel, fingertip - target
 * (11); reset U(+-0.1) on qpos, then the target drawn in U(+-0.2)^2 until inside the
 * disc of radius 0.2, then U(+-0.005) on the arm's qvel (the target's is 0). */
#include <math.h>

#include "base/cmath.h"
#include "envs/envs.h"
#include "envs/mj_env.h"

enum { NQ = 4, NV = 4, NU = 2, OBS = 11 };
enum { FINGERTIP = 3, TARGET = 4 }; /* body ids (checked at create) */

static const float lo[NU] = {-1, -1}, hi[NU] = {1, 1};

static const mj_task task = {
    .name = "Reacher-v4",
    MJ_TASK_MODEL(reacher_v4),
    .frame_skip = 2,
    .nq = NQ, .nv = NV, .nu = NU,
    .keep = MJ_KEEP_XPOS,
    .spec = &reacher_class.spec,
    .camera = {.fps = 50, .track_body = -1, .distance = 0},
};

static int reacher_create(void *state, calf_error *err) {
    static const char *const names[] = {"fingertip", "target"};
    static const int ids[] = {FINGERTIP, TARGET};
    return mj_env_create_with_bodies(state, &task, names, ids, 2, err);
}

/* get_body_com("fingertip") - get_body_com("target") */
static void fingertip_to_target(const mjData *d, double *vec) {
    for (int j = 0; j < 3; j++) vec[j] = d->xpos[3 * FINGERTIP + j] - d->xpos[3 * TARGET + j];
}

static void reacher_observe(const void *state, float *obs) {
    const mjData *d = ((const mj_state *)state)->d;
    double vec[3];
    fingertip_to_target(d, vec);
    for (int i = 0; i < 2; i++) *obs++ = (float)cm_cos(d->qpos[i]);
    for (int i = 0; i < 2; i++) *obs++ = (float)cm_sin(d->qpos[i]);
    for (int i = 2; i < NQ; i++) *obs++ = (float)d->qpos[i];
    for (int i = 0; i < 2; i++) *obs++ = (float)d->qvel[i];
    for (int j = 0; j < 3; j++) *obs++ = (float)vec[j];
}

static void reacher_reset(void *state, calf_rng *rng, float *obs) {
    mj_state *s = state;
    const mjModel *m = s->m;
    double *qpos = s->drawn, *qvel = s->drawn + NQ;
    for (int i = 0; i < NQ; i++) qpos[i] = calf_rng_uniform_range(rng, -0.1, 0.1) + m->qpos0[i];
    double goal[2];
    do {
        goal[0] = calf_rng_uniform_range(rng, -0.2, 0.2);
        goal[1] = calf_rng_uniform_range(rng, -0.2, 0.2);
    } while (!(sqrt(goal[0] * goal[0] + goal[1] * goal[1]) < 0.2));
    qpos[NQ - 2] = goal[0];
    qpos[NQ - 1] = goal[1];
    for (int i = 0; i < NV; i++) qvel[i] = 0.0 + calf_rng_uniform_range(rng, -0.005, 0.005);
    qvel[NV - 2] = qvel[NV - 1] = 0;
    mj_env_reset_drawn(s);
    reacher_observe(s, obs);
}

static int reacher_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                        float *reward) {
    (void)rng;
    (void)action;
    mj_state *s = state;
    double vec[3];
    fingertip_to_target(s->d, vec);
    double reward_dist = -mj_env_norm3(vec);
    float reward_ctrl = -mj_env_sum_squares(u, NU);
    *reward = (float)(reward_dist + (double)reward_ctrl);
    mj_env_simulate(s, u);
    reacher_observe(s, obs);
    return 0;
}

const calf_env_class reacher_class =
    MJ_TASK_CLASS("Reacher-v4", OBS, NQ, NV, NU, lo, hi, 50, 3 * 5, reacher_reset, reacher_step,
                  reacher_observe, reacher_create);
