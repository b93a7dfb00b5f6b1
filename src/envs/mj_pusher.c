/* mj_pusher.c: Pusher-v4 as Gymnasium defines it: frame skip 5 (dt 0.05), 100 steps;
 * reward -|object - goal| - 0.1 sum(action^2) - 0.5 |object - arm tip|, taken before the
 * step from the bodies' xpos as the previous step (or the reset) left them; never
 * terminates; observation the arm's qpos and qvel (7 each), then the xpos of the arm's
 * tip, the object and the goal (23); reset: qpos0, the object's two slides (its y one
 * first) drawn in [-0.3, 0) x [-0.2, 0.2) until farther than 0.17 from the goal at the
 * origin, U(+-0.005) on the arm's qvel (the object's and goal's are 0). */
#include <math.h>
#include <string.h>

#include "envs/envs.h"
#include "envs/mj_env.h"

enum { NQ = 11, NV = 11, NU = 7, ARM = 7, OBS = 2 * ARM + 9, NBODY = 13 };
enum { TIPS_ARM = 10, OBJECT = 11, GOAL = 12 }; /* body ids (checked at create) */

static const float lo[NU] = {-2, -2, -2, -2, -2, -2, -2}, hi[NU] = {2, 2, 2, 2, 2, 2, 2};

static const mj_task task = {
    .name = "Pusher-v4",
    MJ_TASK_MODEL(pusher_v4),
    .frame_skip = 5,
    .nq = NQ, .nv = NV, .nu = NU,
    .keep = MJ_KEEP_XPOS,
    .spec = &pusher_class.spec,
    .camera = {.fps = 20, .track_body = -1, .distance = 4.0},
};

static int pusher_create(void *state, calf_error *err) {
    static const char *const names[] = {"tips_arm", "object", "goal"};
    static const int ids[] = {TIPS_ARM, OBJECT, GOAL};
    return mj_env_create_with_bodies(state, &task, names, ids, 3, err);
}

static void pusher_observe(const void *state, float *obs) {
    const mjData *d = ((const mj_state *)state)->d;
    for (int i = 0; i < ARM; i++) *obs++ = (float)d->qpos[i];
    for (int i = 0; i < ARM; i++) *obs++ = (float)d->qvel[i];
    for (int j = 0; j < 9; j++) *obs++ = (float)d->xpos[3 * TIPS_ARM + j];
}

static void pusher_reset(void *state, calf_rng *rng, float *obs) {
    mj_state *s = state;
    const mjModel *m = s->m;
    double *qpos = s->drawn, *qvel = s->drawn + NQ;
    memcpy(qpos, m->qpos0, sizeof(double) * NQ);
    double cx, cy; /* Gymnasium's cylinder_pos, minus the goal (0, 0) as it subtracts it */
    do {
        cx = calf_rng_uniform_range(rng, -0.3, 0);
        cy = calf_rng_uniform_range(rng, -0.2, 0.2);
    } while (!(sqrt((cx - 0) * (cx - 0) + (cy - 0) * (cy - 0)) > 0.17));
    qpos[NQ - 4] = cx;
    qpos[NQ - 3] = cy;
    qpos[NQ - 2] = qpos[NQ - 1] = 0;
    for (int i = 0; i < NV; i++) qvel[i] = 0.0 + calf_rng_uniform_range(rng, -0.005, 0.005);
    for (int i = NV - 4; i < NV; i++) qvel[i] = 0;
    mj_env_reset_drawn(s);
    pusher_observe(s, obs);
}

static int pusher_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                       float *reward) {
    (void)rng;
    (void)action;
    mj_state *s = state;
    const double *x = s->d->xpos;
    double vec_1[3], vec_2[3];
    for (int j = 0; j < 3; j++) {
        vec_1[j] = x[3 * OBJECT + j] - x[3 * TIPS_ARM + j];
        vec_2[j] = x[3 * OBJECT + j] - x[3 * GOAL + j];
    }
    double reward_near = -mj_env_norm3(vec_1), reward_dist = -mj_env_norm3(vec_2);
    float reward_ctrl = -mj_env_sum_squares(u, NU);
    /* 0.1 * a float32 is a float32 (NumPy 2's rule), the rest double */
    *reward = (float)((reward_dist + (double)(0.1f * reward_ctrl)) + 0.5 * reward_near);
    mj_env_simulate(s, u);
    pusher_observe(s, obs);
    return 0;
}

const calf_env_class pusher_class =
    MJ_TASK_CLASS("Pusher-v4", OBS, NQ, NV, NU, lo, hi, 100, 3 * NBODY, pusher_reset, pusher_step,
                  pusher_observe, pusher_create);
