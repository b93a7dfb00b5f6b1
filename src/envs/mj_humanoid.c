/* mj_humanoid.c: Humanoid-v4 and HumanoidStandup-v4 as Gymnasium defines them, one
 * 17-motor body on a free joint (RK4 at 0.003 s, frame skip 5: dt 0.015) with one
 * observation: qpos[2:], qvel, then per body cinert, cvel, then qfrc_actuator and per
 * body cfrc_ext (mj_rnePostConstraint's, after the steps) (376). Reset noise U(+-0.01)
 * on qpos and qvel for both.
 * Humanoid: reward 1.25 * the mass center's x velocity + 5 - 0.1 * sum(ctrl^2) (float64),
 * terminated when the height qpos[2] leaves (1, 2).
 * HumanoidStandup (lying down at reset): reward qpos[2] / timestep - 0.1 * sum(ctrl^2)
 * - min(0.5e-6 * sum(cfrc_ext^2), 10) + 1, never terminates. */
#include "envs/envs.h"
#include "envs/mj_env.h"

enum { NQ = 24, NV = 23, NU = 17, NBODY = 14 };
enum { OBS = NQ - 2 + NV + 10 * NBODY + 6 * NBODY + NV + 6 * NBODY };
enum { KEPT = 10 * NBODY + 6 * NBODY + NV + 6 * NBODY };

static const float lo[NU] = {-.4f, -.4f, -.4f, -.4f, -.4f, -.4f, -.4f, -.4f, -.4f,
                             -.4f, -.4f, -.4f, -.4f, -.4f, -.4f, -.4f, -.4f},
                   hi[NU] = {.4f, .4f, .4f, .4f, .4f, .4f, .4f, .4f, .4f,
                             .4f, .4f, .4f, .4f, .4f, .4f, .4f, .4f};

/* The camera looks at (0, 0, LOOKAT_Z), 4 away, 20 degrees from above, following the torso. */
#define HUMANOID_TASK(NAME, MODEL, CLASS, MASS_CENTER, LOOKAT_Z)                              \
    {.name = (NAME), MJ_TASK_MODEL(MODEL), .frame_skip = 5,                                  \
     .nq = NQ, .nv = NV, .nu = NU, .qpos_noise = 1e-2, .qvel_noise = 1e-2, .qvel_normal = 0, \
     .track_mass_center = (MASS_CENTER), .post_constraint = 1,                               \
     .keep = MJ_KEEP_CINERT | MJ_KEEP_CVEL | MJ_KEEP_QFRC_ACTUATOR | MJ_KEEP_CFRC_EXT,      \
     .spec = &(CLASS).spec, .observe = humanoid_observe,                                     \
     .camera = {.fps = 67, .track_body = 1, .distance = 4.0, .has_lookat = true,             \
                .lookat = {0, 0, (LOOKAT_Z)}, .has_elevation = true, .elevation = -20.0}}

static void humanoid_observe(const void *state, float *obs);

static const mj_task humanoid_task =
    HUMANOID_TASK("Humanoid-v4", humanoid_v4, humanoid_class, 1, 2.0);
static const mj_task standup_task =
    HUMANOID_TASK("HumanoidStandup-v4", humanoidstandup_v4, humanoid_standup_class, 0, 0.8925);

static int humanoid_create(void *state, calf_error *err) {
    return mj_env_create(state, &humanoid_task, err);
}
static int standup_create(void *state, calf_error *err) {
    return mj_env_create(state, &standup_task, err);
}

static float *put(float *obs, const double *v, int n) {
    for (int i = 0; i < n; i++) *obs++ = (float)v[i];
    return obs;
}

static void humanoid_observe(const void *state, float *obs) {
    const mjData *d = ((const mj_state *)state)->d;
    obs = put(obs, d->qpos + 2, NQ - 2);
    obs = put(obs, d->qvel, NV);
    obs = put(obs, d->cinert, 10 * NBODY);
    obs = put(obs, d->cvel, 6 * NBODY);
    obs = put(obs, d->qfrc_actuator, NV);
    put(obs, d->cfrc_ext, 6 * NBODY);
}

static int humanoid_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                         float *reward) {
    (void)rng;
    (void)action;
    mj_state *s = state;
    double x_before = s->track_xy[0];
    mj_env_simulate(s, u);
    double x_velocity = (s->track_xy[0] - x_before) / mj_env_dt(s);
    double ctrl_cost = 0.1 * mj_env_sum_squares_f64(s->d->ctrl, NU);
    double forward_reward = 1.25 * x_velocity;
    double healthy_reward = 1.0 * 5.0; /* float(is_healthy or terminate_when_unhealthy) */
    *reward = (float)((forward_reward + healthy_reward) - ctrl_cost);
    humanoid_observe(s, obs);
    double z = s->d->qpos[2];
    return !(1.0 < z && z < 2.0);
}

static int standup_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                        float *reward) {
    (void)rng;
    (void)action;
    mj_state *s = state;
    mj_env_simulate(s, u);
    const mjData *d = s->d;
    double uph_cost = (d->qpos[2] - 0) / s->m->opt.timestep;
    double quad_ctrl_cost = 0.1 * mj_env_sum_squares_f64(d->ctrl, NU);
    double quad_impact_cost = 0.5e-6 * mj_env_sum_squares_f64(d->cfrc_ext, 6 * NBODY);
    if (10 < quad_impact_cost) quad_impact_cost = 10; /* Python's min(cost, 10) */
    *reward = (float)(uph_cost - quad_ctrl_cost - quad_impact_cost + 1);
    humanoid_observe(s, obs);
    return 0;
}

const calf_env_class humanoid_class =
    MJ_TASK_CLASS("Humanoid-v4", OBS, NQ, NV, NU, lo, hi, 1000, KEPT, mj_env_reset_hook,
                  humanoid_step, humanoid_observe, humanoid_create);
const calf_env_class humanoid_standup_class =
    MJ_TASK_CLASS("HumanoidStandup-v4", OBS, NQ, NV, NU, lo, hi, 1000, KEPT, mj_env_reset_hook,
                  standup_step, humanoid_observe, standup_create);
