/* test_mujoco.c: the MuJoCo locomotion envs (Gymnasium v4): their one list (MJ_TASKS)
 * against the classes and the registry, model dimensions and a trajectory digest recorded
 * from the comparison with Gymnasium's model files, reset ranges, observation layout,
 * reward and termination on crafted states, NumPy's summation order for the control cost,
 * determinism (same seed and actions, same bits; env i the same alone and in a block of
 * 64) and checkpoint records that resume mid-episode exactly. Skipped, saying why, in a
 * build without MuJoCo. */
#include <stdio.h>

#include "calf/env.h"
#include "test_files.h"
#include "test_util.h"

#if !CALF_HAVE_MUJOCO
int main(void) {
    printf("skipped: calf was built without MuJoCo (apt-get install libmujoco-dev)\n");
    return 77;
}
#else

#include <math.h>

#include <sys/resource.h>

#include "envs/mj_env.h"
#include "mj_test_util.h"
#include "envs/vec_env.h"

enum { MAX_OBS = MJ_TEST_MAX_OBS, MAX_ACT = MJ_TEST_MAX_ACT };

/* What each class's spec must say beyond the model's sizes: the observation's size,
 * Gymnasium's time limit, and the doubles of derived arrays its saved form keeps. */
static const struct shape {
    const char *name;
    int obs_dim, max_steps, kept;
} shapes[] = {
    {"InvertedPendulum-v4", 4, 1000, 0},       {"HalfCheetah-v4", 17, 1000, 0},
    {"Hopper-v4", 11, 1000, 0},                {"Walker2d-v4", 17, 1000, 0},
    {"Ant-v4", 27, 1000, 0},                   {"InvertedDoublePendulum-v4", 11, 1000, 3},
    {"Swimmer-v4", 8, 1000, 0},                {"Reacher-v4", 11, 50, 3 * 5},
    {"Pusher-v4", 23, 100, 3 * 13},            {"Humanoid-v4", 376, 1000, 14 * 22 + 23},
    {"HumanoidStandup-v4", 376, 1000, 14 * 22 + 23},
};
static const struct shape *shape_of(const char *name) {
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (!strcmp(shapes[i].name, name)) return &shapes[i];
    fprintf(stderr, "no shape for %s\n", name);
    exit(1);
}

/* The envs whose observation is qpos[skip:] then qvel (the locomotion ones and
 * InvertedPendulum) and whose reset is the shared noise draw. */
static int plain_layout(const char *name) {
    return !strcmp(name, "InvertedPendulum-v4") || !strcmp(name, "HalfCheetah-v4") ||
           !strcmp(name, "Hopper-v4") || !strcmp(name, "Walker2d-v4") || !strcmp(name, "Ant-v4") ||
           !strcmp(name, "Swimmer-v4");
}

/* Positions the observation skips (Gymnasium's exclude_current_positions): x, or x and
 * y for Ant and Swimmer; none for InvertedPendulum. */
static int skipped_positions(const char *name) {
    return !strcmp(name, "Ant-v4") || !strcmp(name, "Swimmer-v4") ? 2
           : !strcmp(name, "InvertedPendulum-v4")                 ? 0
                                                                  : 1;
}
static int clips_velocity(const char *name) {
    return !strcmp(name, "Hopper-v4") || !strcmp(name, "Walker2d-v4");
}

static calf_env make(const char *name, uint64_t seed, uint64_t index) {
    calf_env env;
    calf_error err;
    int rc = calf_env_init(&env, name, seed, index, &err);
    if (rc != CALF_OK) {
        fprintf(stderr, "%s: %s\n", name, err.msg);
        exit(1);
    }
    return env;
}
static mj_state *st(calf_env *env) { return env->state; }

/* Places the env in a crafted state as Gymnasium's set_state does (then one mj_forward),
 * and refreshes what the env reads from the forward pass (Ant's torso position). */
static void set_state(calf_env *env, const double *qpos, const double *qvel) {
    mj_state *s = st(env);
    memcpy(s->d->qpos, qpos, sizeof(double) * (size_t)s->m->nq);
    memcpy(s->d->qvel, qvel, sizeof(double) * (size_t)s->m->nv);
    mj_forward(s->m, s->d);
    if (s->track_id >= 0) {
        s->track_xy[0] = s->d->xpos[3 * s->track_id];
        s->track_xy[1] = s->d->xpos[3 * s->track_id + 1];
    }
}

/* ---- the model ------------------------------------------------------------------- */

static void test_model(const mj_expect *x) {
    calf_env env = make(x->name, 1, 0);
    const calf_env_spec *sp = &env.cls->spec;
    const mjModel *m = st(&env)->m;
    CHECK_INT_EQ(m->nq, x->nq);
    CHECK_INT_EQ(m->nv, x->nv);
    CHECK_INT_EQ(m->nu, x->nu);
    CHECK_INT_EQ(m->na, 0);
    CHECK(m->opt.timestep == x->timestep);
    CHECK_INT_EQ(m->opt.integrator, x->integrator);
    CHECK(mj_env_dt(st(&env)) == x->timestep * x->frame_skip);
    const struct shape *sh = shape_of(x->name);
    if (plain_layout(x->name)) CHECK_INT_EQ(sh->obs_dim, x->nq - skipped_positions(x->name) + x->nv);
    CHECK_INT_EQ(sp->obs_dim, sh->obs_dim);
    CHECK_INT_EQ(sp->action_dim, x->nu);
    CHECK_INT_EQ(sp->max_episode_steps, sh->max_steps);
    CHECK_INT_EQ(sp->reset_state_dim, x->nq + x->nv);
    CHECK_INT_EQ(sp->save_size, MJ_SAVE_SIZE(x->nq, x->nv, 0, x->nu) + 8 * (size_t)sh->kept);
    for (int j = 0; j < x->nu; j++) {
        CHECK(sp->action_low[j] == (float)m->actuator_ctrlrange[2 * j]);
        CHECK(sp->action_high[j] == (float)m->actuator_ctrlrange[2 * j + 1]);
    }
    /* One model per process: a second env shares it. */
    calf_env other = make(x->name, 2, 5);
    CHECK(st(&other)->m == m && st(&other)->d != st(&env)->d);
    calf_env_free(&other);
    /* The trajectory Gymnasium's model file gives (tests/test_mj_reference.c). */
    uint64_t digest = mj_trajectory_digest(env.cls, st(&env));
    if (digest != x->digest)
        fprintf(stderr, "%s: digest 0x%016llx, recorded 0x%016llx\n", x->name,
                (unsigned long long)digest, (unsigned long long)x->digest);
    CHECK(digest == x->digest);
    calf_env_free(&env);
}

/* ---- reset ---------------------------------------------------------------------- */

static void test_reset(const mj_expect *x) {
    calf_env env = make(x->name, 3, 2);
    mj_state *s = st(&env);
    const mjModel *m = s->m;
    const mj_task *t = s->task;
    const int resets = 200, skip = skipped_positions(x->name);
    const int free_joint = !strcmp(x->name, "Ant-v4");
    float obs[MAX_OBS];
    double drawn[128], sum = 0, sum2 = 0;
    int in_range = 1, matches = 1, layout = 1;
    long n = 0;
    for (int k = 0; k < resets; k++) {
        /* Leave the previous episode somewhere else first: reset must not depend on it. */
        float u[MAX_ACT] = {0};
        for (int j = 0; j < m->nu; j++) u[j] = env.cls->spec.action_high[j];
        float r;
        int term, trunc;
        calf_env_step(&env, 0, u, obs, &r, &term, &trunc);
        calf_env_reset(&env, obs);
        CHECK_INT_EQ(env.elapsed_steps, 0);
        CHECK_INT_EQ(calf_env_reset_state(&env, drawn), m->nq + m->nv);
        for (int i = 0; i < m->nq; i++) {
            double q = drawn[i] - m->qpos0[i];
            in_range &= q >= -t->qpos_noise - 1e-12 && q < t->qpos_noise + 1e-12;
        }
        for (int i = 0; i < m->nv; i++) {
            double v = drawn[m->nq + i];
            if (t->qvel_normal) {
                sum += v, sum2 += v * v, n++;
            } else {
                in_range &= v >= -t->qvel_noise && v < t->qvel_noise;
            }
        }
        /* What reset hands the physics is what it drew (Ant's quaternion, which
         * mj_forward normalizes in place, aside). */
        for (int i = 0; i < m->nq; i++)
            if (!(free_joint && i >= 3 && i < 7)) matches &= s->d->qpos[i] == drawn[i];
        matches &= memcmp(s->d->qvel, drawn + m->nq, sizeof(double) * (size_t)m->nv) == 0;
        matches &= s->d->time == 0.0;
        for (int j = 0; j < m->nu; j++) matches &= s->d->ctrl[j] == 0.0;
        for (int i = skip; i < m->nq; i++) layout &= obs[i - skip] == (float)s->d->qpos[i];
        for (int i = 0; i < m->nv; i++) layout &= obs[m->nq - skip + i] == (float)s->d->qvel[i];
    }
    CHECK(in_range);
    CHECK(matches);
    CHECK(layout);
    if (t->qvel_normal) {
        double mean = sum / (double)n, sd = sqrt(sum2 / (double)n - mean * mean);
        CHECK(fabs(mean) < 4 * t->qvel_noise / sqrt((double)n));
        CHECK(fabs(sd / t->qvel_noise - 1.0) < 0.1);
    }
    if (free_joint) { /* Ant: the free joint's quaternion, normalized by mj_forward */
        double *q = s->d->qpos + 3;
        CHECK_NEAR(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3], 1.0, 1e-12);
    }
    calf_env_free(&env);
}

/* ---- observation layout --------------------------------------------------------- */

static void test_observation(const mj_expect *x) {
    calf_env env = make(x->name, 4, 0);
    mj_state *s = st(&env);
    const mjModel *m = s->m;
    const int skip = skipped_positions(x->name), clip = clips_velocity(x->name);
    float obs[MAX_OBS], want[MAX_OBS];
    calf_env_reset(&env, obs);
    double qpos[64], qvel[64];
    memcpy(qpos, s->d->qpos, sizeof(double) * (size_t)m->nq);
    for (int i = 0; i < m->nv; i++) qvel[i] = 0.5 * (i + 1) * (i % 2 ? -1 : 1);
    qvel[m->nv - 1] = 50.0;  /* beyond the clip */
    qvel[m->nv - 2] = -50.0;
    set_state(&env, qpos, qvel);
    env.cls->observe(s, obs);
    for (int i = skip; i < m->nq; i++) want[i - skip] = (float)qpos[i];
    for (int i = 0; i < m->nv; i++) {
        double v = qvel[i];
        if (clip) v = v > 10 ? 10 : v < -10 ? -10 : v;
        want[m->nq - skip + i] = (float)v;
    }
    CHECK(memcmp(obs, want, sizeof(float) * (size_t)env.cls->spec.obs_dim) == 0);
    if (clip) CHECK(obs[env.cls->spec.obs_dim - 1] == 10.0f && obs[env.cls->spec.obs_dim - 2] == -10.0f);
    calf_env_free(&env);
}

/* ---- reward and termination ----------------------------------------------------- */

/* One step from a crafted state: returns terminated, fills reward and the x position of
 * the reward's reference (qpos[0], or Ant's torso xpos) before and after. */
static int step_from(calf_env *env, const double *qpos, const double *qvel, const float *u,
                     float *reward, double *x_before, double *x_after) {
    mj_state *s = st(env);
    float obs[MAX_OBS];
    calf_env_reset(env, obs);
    set_state(env, qpos, qvel);
    *x_before = s->track_id >= 0 ? s->d->xpos[3 * s->track_id] : s->d->qpos[0];
    int term, trunc;
    calf_env_step(env, 0, u, obs, reward, &term, &trunc);
    *x_after = s->track_id >= 0 ? s->d->xpos[3 * s->track_id] : s->d->qpos[0];
    return term;
}

static void test_reward_termination(void) {
    float r;
    double xb, xa;
    double qpos[16], qvel[16];
    /* HalfCheetah: forward velocity minus 0.1 * sum(u^2) in float32; never terminates,
     * even upside down. */
    {
        calf_env env = make("HalfCheetah-v4", 5, 0);
        const mjModel *m = st(&env)->m;
        memcpy(qpos, m->qpos0, sizeof(double) * 9);
        memset(qvel, 0, sizeof qvel);
        qvel[0] = 3.0;
        const float u[6] = {0.5f, -1.0f, 0.25f, 0.0f, 1.0f, -0.75f}; /* squares sum to 2.875 */
        int term = step_from(&env, qpos, qvel, u, &r, &xb, &xa);
        CHECK_INT_EQ(term, 0);
        CHECK(xa - xb > 0.05);
        float want = (float)(1.0 * ((xa - xb) / 0.05) - (double)(0.1f * 2.875f));
        CHECK(r == want);
        qpos[2] = 3.14159; /* flipped over */
        CHECK_INT_EQ(step_from(&env, qpos, qvel, u, &r, &xb, &xa), 0);
        calf_env_free(&env);
    }
    /* Hopper: forward velocity + 1 - 1e-3 * sum(u^2); unhealthy when the angle leaves
     * (-0.2, 0.2) or some of qpos[2:], qvel leaves (-100, 100); no upper height bound. */
    {
        calf_env env = make("Hopper-v4", 5, 0);
        const mjModel *m = st(&env)->m;
        const float u[3] = {0.5f, -0.25f, 1.0f}; /* squares sum to 1.3125 */
        memcpy(qpos, m->qpos0, sizeof(double) * 6);
        memset(qvel, 0, sizeof qvel);
        qpos[1] = 3.0; /* in the air */
        qvel[0] = 2.0;
        CHECK_INT_EQ(step_from(&env, qpos, qvel, u, &r, &xb, &xa), 0);
        CHECK(r == (float)((1.0 * ((xa - xb) / 0.008) + 1.0) - (double)(1e-3f * 1.3125f)));
        qpos[2] = 0.5; /* leaning too far */
        CHECK_INT_EQ(step_from(&env, qpos, qvel, u, &r, &xb, &xa), 1);
        CHECK(r == (float)((1.0 * ((xa - xb) / 0.008) + 1.0) - (double)(1e-3f * 1.3125f)));
        qpos[2] = 0.0;
        qvel[0] = 150.0; /* the state range covers qvel[0] too */
        CHECK_INT_EQ(step_from(&env, qpos, qvel, u, &r, &xb, &xa), 1);
        qvel[0] = 0.0;
        qpos[1] = 1.25; /* standing as at reset */
        CHECK_INT_EQ(step_from(&env, qpos, qvel, u, &r, &xb, &xa), 0);
        calf_env_free(&env);
    }
    /* Walker2d: healthy for heights in (0.8, 2) and angles in (-1, 1). */
    {
        calf_env env = make("Walker2d-v4", 5, 0);
        const mjModel *m = st(&env)->m;
        const float u[6] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
        memcpy(qpos, m->qpos0, sizeof(double) * 9);
        memset(qvel, 0, sizeof qvel);
        CHECK_INT_EQ(step_from(&env, qpos, qvel, u, &r, &xb, &xa), 0);
        CHECK(r == (float)((1.0 * ((xa - xb) / 0.008) + 1.0) - (double)(1e-3f * 6.0f)));
        qpos[1] = 3.0; /* too high */
        CHECK_INT_EQ(step_from(&env, qpos, qvel, u, &r, &xb, &xa), 1);
        qpos[1] = 1.25;
        qpos[2] = -1.2; /* leaning too far back */
        CHECK_INT_EQ(step_from(&env, qpos, qvel, u, &r, &xb, &xa), 1);
        qpos[2] = 0.9;
        CHECK_INT_EQ(step_from(&env, qpos, qvel, u, &r, &xb, &xa), 0);
        calf_env_free(&env);
    }
    /* Ant: the torso's xpos (as the step leaves it: the start of its last physics step,
     * not qpos[0]) + 1 - 0.5 * sum(u^2); healthy for heights in [0.2, 1]. */
    {
        calf_env env = make("Ant-v4", 5, 0);
        mj_state *s = st(&env);
        const mjModel *m = s->m;
        const float u[8] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
        memcpy(qpos, m->qpos0, sizeof(double) * 15);
        memset(qvel, 0, sizeof qvel);
        qvel[0] = 1.0;
        CHECK_INT_EQ(step_from(&env, qpos, qvel, u, &r, &xb, &xa), 0);
        CHECK(r == (float)((((xa - xb) / 0.05) + 1.0) - (double)(0.5f * 2.0f)));
        CHECK(s->track_xy[0] == xa && xa != s->d->qpos[0]);
        qpos[2] = 1.5; /* too high */
        CHECK_INT_EQ(step_from(&env, qpos, qvel, u, &r, &xb, &xa), 1);
        calf_env_free(&env);
    }
    /* InvertedPendulum: 1 per step; terminated past |angle| 0.2. */
    {
        calf_env env = make("InvertedPendulum-v4", 5, 0);
        const float u[1] = {0.0f};
        qpos[0] = 0.0, qpos[1] = 0.1, qvel[0] = qvel[1] = 0.0;
        CHECK_INT_EQ(step_from(&env, qpos, qvel, u, &r, &xb, &xa), 0);
        CHECK(r == 1.0f);
        qpos[1] = -0.3;
        CHECK_INT_EQ(step_from(&env, qpos, qvel, u, &r, &xb, &xa), 1);
        CHECK(r == 1.0f);
        calf_env_free(&env);
    }
}

/* ---- the six later tasks: their own resets, observations, rewards --------------- */

static double com_x(const mj_state *s) { /* Gymnasium's mass_center x */
    double num = 0, total = 0;
    for (int b = 0; b < s->m->nbody; b++) num += s->m->body_mass[b] * s->d->xipos[3 * b];
    for (int b = 0; b < s->m->nbody; b++) total += s->m->body_mass[b];
    return num / total;
}

static void test_own_resets(void) {
    float obs[MAX_OBS];
    double drawn[128];
    /* Reacher: the arm's angles U(+-0.1), the goal inside the disc of radius 0.2, the
     * target's velocity 0; the observation as Gymnasium's _get_obs. */
    {
        calf_env env = make("Reacher-v4", 6, 1);
        mj_state *s = st(&env);
        int ok = 1, layout = 1, far = 0;
        for (int k = 0; k < 300; k++) {
            calf_env_reset(&env, obs);
            calf_env_reset_state(&env, drawn);
            double gx = drawn[2], gy = drawn[3];
            ok &= fabs(drawn[0]) < 0.1 && fabs(drawn[1]) < 0.1 && sqrt(gx * gx + gy * gy) < 0.2;
            ok &= fabs(drawn[4]) < 0.005 && fabs(drawn[5]) < 0.005 && drawn[6] == 0 && drawn[7] == 0;
            far += fabs(gx) > 0.15 || fabs(gy) > 0.15;
            const double *x = s->d->xpos;
            layout &= fabs(obs[0] - cos(drawn[0])) < 1e-6 && fabs(obs[3] - sin(drawn[1])) < 1e-6 &&
                      obs[4] == (float)gx && obs[5] == (float)gy && obs[6] == (float)drawn[4] &&
                      obs[8] == (float)(x[3 * 3] - x[3 * 4]) && obs[9] == (float)(x[3 * 3 + 1] - x[3 * 4 + 1]);
        }
        CHECK(ok);
        CHECK(layout);
        CHECK(far > 0); /* the square's corners are cut, not its sides */
        calf_env_free(&env);
    }
    /* Pusher: the arm at rest at qpos0, the object's slides (y, then x) in [-0.3, 0) x
     * [-0.2, 0.2), farther than 0.17 from the goal at the origin; its body where the
     * slides put it. */
    {
        calf_env env = make("Pusher-v4", 6, 2);
        mj_state *s = st(&env);
        int ok = 1, layout = 1;
        for (int k = 0; k < 300; k++) {
            calf_env_reset(&env, obs);
            calf_env_reset_state(&env, drawn);
            double cx = drawn[7], cy = drawn[8];
            for (int i = 0; i < 7; i++) ok &= drawn[i] == 0 && fabs(drawn[11 + i]) < 0.005;
            ok &= cx >= -0.3 && cx < 0 && cy >= -0.2 && cy < 0.2 && sqrt(cx * cx + cy * cy) > 0.17;
            ok &= drawn[9] == 0 && drawn[10] == 0;
            for (int i = 18; i < 22; i++) ok &= drawn[i] == 0;
            /* the object's first slide is its y one */
            layout &= obs[17] == (float)s->d->xpos[3 * 11] && fabs(obs[17] - (0.45 + cy)) < 1e-6 &&
                      fabs(obs[18] - (-0.05 + cx)) < 1e-6 && obs[20] == 0.45f && obs[6] == 0.0f;
        }
        CHECK(ok);
        CHECK(layout);
        calf_env_free(&env);
    }
    /* The Humanoids: U(+-0.01) on qpos (before mj_forward normalizes the quaternion)
     * and qvel; the observation's blocks in Gymnasium's order. */
    for (int h = 0; h < 2; h++) {
        calf_env env = make(h ? "HumanoidStandup-v4" : "Humanoid-v4", 6, 3);
        mj_state *s = st(&env);
        const mjModel *m = s->m;
        int ok = 1;
        for (int k = 0; k < 50; k++) {
            calf_env_reset(&env, obs);
            calf_env_reset_state(&env, drawn);
            for (int i = 0; i < m->nq; i++) ok &= fabs(drawn[i] - m->qpos0[i]) <= 0.01;
            for (int i = 0; i < m->nv; i++) ok &= fabs(drawn[m->nq + i]) <= 0.01;
        }
        CHECK(ok);
        const mjData *d = s->d;
        CHECK(obs[0] == (float)d->qpos[2] && obs[22] == (float)d->qvel[0]);
        CHECK(obs[45] == (float)d->cinert[0] && obs[45 + 140] == (float)d->cvel[0]);
        CHECK(obs[45 + 10 * 14 + 6 * 1] == (float)d->cvel[6]);
        CHECK(obs[45 + 224] == (float)d->qfrc_actuator[0] && obs[375] == (float)d->cfrc_ext[83]);
        if (h) CHECK(d->qpos[2] < 0.2); /* HumanoidStandup starts lying down */
        calf_env_free(&env);
    }
}

static void test_own_rewards(void) {
    float r, obs[MAX_OBS];
    double qpos[32], qvel[32], xb, xa;
    int term, trunc;
    /* Swimmer: x velocity - 1e-4 * sum(u^2); never terminates. */
    {
        calf_env env = make("Swimmer-v4", 7, 0);
        memset(qpos, 0, sizeof qpos);
        memset(qvel, 0, sizeof qvel);
        qvel[0] = 1.0;
        const float u[2] = {0.5f, -1.0f};
        CHECK_INT_EQ(step_from(&env, qpos, qvel, u, &r, &xb, &xa), 0);
        CHECK(r == (float)((xa - xb) / 0.04 - (double)(1e-4f * 1.25f)));
        calf_env_free(&env);
    }
    /* InvertedDoublePendulum: 10 - distance and velocity penalties from the tip site
     * after the step; terminated once the tip is at height 1 or below. */
    {
        calf_env env = make("InvertedDoublePendulum-v4", 7, 0);
        const mjData *d = st(&env)->d;
        memset(qpos, 0, sizeof qpos);
        memset(qvel, 0, sizeof qvel);
        qpos[1] = 0.05, qvel[1] = 0.5, qvel[2] = -1.0;
        const float u[1] = {0.25f};
        CHECK_INT_EQ(step_from(&env, qpos, qvel, u, &r, &xb, &xa), 0);
        double x = d->site_xpos[0], y = d->site_xpos[2], v1 = d->qvel[1], v2 = d->qvel[2];
        CHECK(r == (float)(10 - (0.01 * x * x + (y - 2) * (y - 2)) - (1e-3 * v1 * v1 + 5e-3 * v2 * v2)));
        CHECK(y > 1.15 && r < 9.4f && r > 9.3f); /* the tip stands at 1.2 */
        qpos[1] = 1.2; /* fallen over */
        CHECK_INT_EQ(step_from(&env, qpos, qvel, u, &r, &xb, &xa), 1);
        calf_env_free(&env);
    }
    /* Reacher and Pusher: the reward is taken from the bodies before the step. */
    {
        calf_env env = make("Reacher-v4", 7, 0);
        mj_state *s = st(&env);
        calf_env_reset(&env, obs);
        qpos[0] = 0.3, qpos[1] = -0.2, qpos[2] = 0.1, qpos[3] = 0.05;
        memset(qvel, 0, sizeof qvel);
        set_state(&env, qpos, qvel);
        double v[3];
        for (int j = 0; j < 3; j++) v[j] = s->d->xpos[9 + j] - s->d->xpos[12 + j];
        const float u[2] = {1.0f, -0.5f};
        calf_env_step(&env, 0, u, obs, &r, &term, &trunc);
        CHECK(r == (float)(-sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]) - 1.25));
        CHECK(!term && obs[8] == (float)(s->d->xpos[9] - s->d->xpos[12]));
        for (int t = 1; t < 50; t++) calf_env_step(&env, 0, u, obs, &r, &term, &trunc);
        CHECK(!term && trunc); /* 50 steps */
        calf_env_free(&env);
    }
    {
        calf_env env = make("Pusher-v4", 7, 0);
        mj_state *s = st(&env);
        calf_env_reset(&env, obs);
        memset(qpos, 0, sizeof qpos);
        memset(qvel, 0, sizeof qvel);
        qpos[0] = 0.4, qpos[7] = -0.2, qpos[8] = 0.1;
        set_state(&env, qpos, qvel);
        const double *x = s->d->xpos;
        double near = 0, dist = 0;
        for (int j = 0; j < 3; j++) {
            near += (x[33 + j] - x[30 + j]) * (x[33 + j] - x[30 + j]);
            dist += (x[33 + j] - x[36 + j]) * (x[33 + j] - x[36 + j]);
        }
        const float u[7] = {1, 1, 1, 1, 1, 1, 2}; /* squares sum to 10 */
        calf_env_step(&env, 0, u, obs, &r, &term, &trunc);
        CHECK(r == (float)((-sqrt(dist) + (double)(0.1f * -10.0f)) + 0.5 * -sqrt(near)));
        for (int t = 1; t < 100; t++) calf_env_step(&env, 0, u, obs, &r, &term, &trunc);
        CHECK(!term && trunc); /* 100 steps */
        calf_env_free(&env);
    }
    /* Humanoid: 1.25 * the mass center's x velocity + 5 - 0.1 * sum(ctrl^2); unhealthy
     * when the height leaves (1, 2). */
    {
        calf_env env = make("Humanoid-v4", 7, 0);
        mj_state *s = st(&env);
        const mjModel *m = s->m;
        memcpy(qpos, m->qpos0, sizeof(double) * 24);
        memset(qvel, 0, sizeof qvel);
        qvel[0] = 1.0;
        float u[17];
        double sq = 0;
        for (int j = 0; j < 17; j++) u[j] = 0.4f * (float)(j % 3 - 1), sq += (double)u[j] * u[j];
        calf_env_reset(&env, obs);
        set_state(&env, qpos, qvel);
        s->track_xy[0] = com_x(s);
        double before = com_x(s);
        calf_env_step(&env, 0, u, obs, &r, &term, &trunc);
        CHECK(!term);
        CHECK_NEAR(r, 1.25 * (com_x(s) - before) / 0.015 + 5 - 0.1 * sq, 1e-4);
        qpos[2] = 0.8; /* too low */
        calf_env_reset(&env, obs);
        set_state(&env, qpos, qvel);
        calf_env_step(&env, 0, u, obs, &r, &term, &trunc);
        CHECK(term);
        calf_env_free(&env);
    }
    /* HumanoidStandup: height / timestep - 0.1 * sum(ctrl^2) - min(0.5e-6 *
     * sum(cfrc_ext^2), 10) + 1, from cfrc_ext as mj_rnePostConstraint leaves it. */
    {
        calf_env env = make("HumanoidStandup-v4", 7, 0);
        mj_state *s = st(&env);
        float u[17] = {0};
        u[0] = 0.4f;
        calf_env_reset(&env, obs);
        int contact = 0;
        for (int t = 0; t < 20; t++) {
            calf_env_step(&env, 0, u, obs, &r, &term, &trunc);
            double impact = 0;
            for (int i = 0; i < 84; i++) impact += s->d->cfrc_ext[i] * s->d->cfrc_ext[i];
            impact = fmin(0.5e-6 * impact, 10);
            contact |= impact > 0;
            CHECK(!term);
            CHECK_NEAR(r, s->d->qpos[2] / 0.003 - 0.1 * 0.16 - impact + 1, 1e-3);
        }
        CHECK(contact); /* lying on the floor: contact forces in the observation */
        calf_env_free(&env);
    }
}

/* np.sum(np.square(u)) in float32: sequential below 8 terms, NumPy's 8 lanes from 8.
 * 4096^2 = 2^24, where adding 1 rounds back to 2^24 but adding 2 does not. */
static void test_sum_squares(void) {
    float u[16];
    for (int i = 0; i < 16; i++) u[i] = 1.0f;
    u[0] = 4096.0f;
    CHECK(mj_env_sum_squares(u, 7) == 16777216.0f);  /* ((2^24 + 1) + 1) ... each lost */
    CHECK(mj_env_sum_squares(u, 8) == 16777222.0f);  /* ((2^24+1)+(1+1)) + ((1+1)+(1+1)) */
    CHECK(mj_env_sum_squares(u, 16) == 16777230.0f); /* lanes of 2 after the second pass */
    CHECK(mj_env_sum_squares(u, 0) == 0.0f);
    const float v[3] = {0.5f, -0.25f, 1.0f};
    CHECK(mj_env_sum_squares(v, 3) == 1.3125f);
}

/* ---- determinism and blocks ----------------------------------------------------- */

static float action_of(int g, int t, int j, float lo, float hi) {
    calf_rng r;
    calf_rng_seed(&r, 31, ((uint64_t)g * 100003u + (uint64_t)t) * 16u + (uint64_t)j, CALF_RNG_ACTION);
    return (float)calf_rng_uniform_range(&r, lo, hi);
}

static void step_block(vec_env *ve, int t, float *reward, uint8_t *term, uint8_t *trunc,
                       float *final_obs) {
    const calf_env_spec *sp = &ve->envs[0].cls->spec;
    float u[64 * MAX_ACT];
    for (int i = 0; i < ve->count; i++)
        for (int j = 0; j < ve->action_dim; j++)
            u[i * ve->action_dim + j] =
                action_of(ve->begin + i, t, j, sp->action_low[j], sp->action_high[j]);
    vec_env_step(ve, NULL, u, reward, term, trunc, final_obs, NULL, NULL);
}

/* Env i alone and as part of a block of 64 (each env makes a 3 MB mjData, so one big
 * block per class); and the same env twice from the same seed and actions. */
static void test_blocks(const mj_expect *x) {
    enum { E = 64, T = 25, L = 4 };
    calf_error err;
    vec_env all;
    CHECK_INT_EQ(vec_env_init(&all, x->name, 77, 0, E, &err), CALF_OK);
    const int lone_at[L] = {0, 17, 63, 17};
    vec_env lone[L];
    for (int k = 0; k < L; k++) CHECK_INT_EQ(vec_env_init(&lone[k], x->name, 77, lone_at[k], 1, &err), CALF_OK);
    const int od = all.obs_dim;
    static float ra[E], rl[L], fa[E * MAX_OBS], fl[L][MAX_OBS];
    static uint8_t ta[E], tl[L], ua[E], ul[L];
    int same_lone = 1, same_twin = 1, ended = 0;
    for (int t = 0; t < T; t++) {
        step_block(&all, t, ra, ta, ua, fa);
        for (int k = 0; k < L; k++) {
            int g = lone_at[k];
            step_block(&lone[k], t, &rl[k], &tl[k], &ul[k], fl[k]);
            same_lone &= memcmp(&ra[g], &rl[k], sizeof *rl) == 0 && ta[g] == tl[k] && ua[g] == ul[k] &&
                         memcmp(fa + (size_t)g * od, fl[k], sizeof(float) * (size_t)od) == 0 &&
                         memcmp(all.obs + (size_t)g * od, lone[k].obs, sizeof(float) * (size_t)od) == 0;
        }
        same_twin &= memcmp(&rl[1], &rl[3], sizeof *rl) == 0 && memcmp(fl[1], fl[3], sizeof fl[1]) == 0;
        for (int i = 0; i < E; i++) ended += ta[i];
    }
    CHECK(same_twin);
    CHECK(same_lone);
    if (!strcmp(x->name, "Hopper-v4") || !strcmp(x->name, "Walker2d-v4")) CHECK(ended > 0); /* auto-resets ran */
    vec_env_free(&all);
    for (int k = 0; k < L; k++) vec_env_free(&lone[k]);
}

/* mj_env_reset_data against mj_resetData on a copy of the same data, byte for byte (the
 * whole buffer and the header fields _resetData sets), after random episodes that used
 * contacts and constraint rows, at several points of them; then the next mj_forward
 * alike. */
static void test_reset_data(const mj_expect *x) {
    enum { T = 300 };
    calf_env env = make(x->name, 5, 0);
    mj_state *s = st(&env);
    const mjModel *m = s->m;
    const calf_env_spec *sp = &env.cls->spec;
    float obs[MAX_OBS], u[32], r;
    int term, trunc, same = 1, used = 0;
    calf_env_reset(&env, obs);
    for (int t = 1; t <= T; t++) {
        for (int j = 0; j < sp->action_dim; j++)
            u[j] = action_of(0, t, j, sp->action_low[j], sp->action_high[j]);
        calf_env_step(&env, 0, u, obs, &r, &term, &trunc);
        used |= s->d->maxuse_efc > 0;
        if (term | trunc) calf_env_reset(&env, obs);
        if (t % 60 != 0) continue;
        /* made (so reset: the padding between arrays zero, as in the env's own data),
         * then copied into */
        mjData *ref = mj_makeData(m), *mine = mj_makeData(m);
        mj_copyData(ref, m, s->d);
        mj_copyData(mine, m, s->d);
        mj_resetData(m, ref);
        mj_env_reset_data(m, mine);
        same &= memcmp(ref->buffer, mine->buffer, (size_t)ref->nbuffer) == 0;
        same &= ref->pstack == mine->pstack && ref->maxuse_stack == mine->maxuse_stack &&
                ref->maxuse_con == mine->maxuse_con && ref->maxuse_efc == mine->maxuse_efc &&
                ref->ne == mine->ne && ref->nf == mine->nf && ref->nefc == mine->nefc &&
                ref->ncon == mine->ncon && ref->solver_iter == mine->solver_iter &&
                ref->solver_nnz == mine->solver_nnz &&
                memcmp(&ref->time, &mine->time, sizeof ref->time) == 0 &&
                memcmp(ref->energy, mine->energy, sizeof ref->energy) == 0 &&
                memcmp(ref->solver_fwdinv, mine->solver_fwdinv, sizeof ref->solver_fwdinv) == 0 &&
                memcmp(ref->warning, mine->warning, sizeof ref->warning) == 0 &&
                memcmp(ref->solver, mine->solver, sizeof ref->solver) == 0;
        mj_forward(m, ref);
        mj_forward(m, mine);
        same &= memcmp(ref->buffer, mine->buffer, (size_t)ref->nbuffer) == 0;
        mj_deleteData(ref);
        mj_deleteData(mine);
    }
    CHECK(same);
    /* constraint rows were in use (the tasks with contacts or joint limits reached) */
    if (strncmp(x->name, "Inverted", 8) && strcmp(x->name, "Swimmer-v4") && strcmp(x->name, "Reacher-v4"))
        CHECK(used);
    calf_env_free(&env);
}

/* ---- checkpoint records --------------------------------------------------------- */

static void test_records(const mj_expect *x) {
    enum { N = 4, K = 47, M = 100 };
    calf_error err;
    vec_env a, b;
    CHECK_INT_EQ(vec_env_init(&a, x->name, 4242, 10, N, &err), CALF_OK);
    static float ra[N], rb[N], fa[N * MAX_OBS], fb[N * MAX_OBS];
    static uint8_t ta[N], tb[N], ua[N], ub[N];
    for (int t = 0; t < K; t++) step_block(&a, t, ra, ta, ua, fa);
    size_t rs = vec_env_record_size(&a);
    CHECK_INT_EQ(rs, (64 + 4 * (size_t)a.obs_dim + MJ_SAVE_SIZE(x->nq, x->nv, 0, x->nu) +
                      8 * (size_t)shape_of(x->name)->kept + 7) / 8 * 8);
    unsigned char *recs = calloc(N, rs), *again = calloc(N, rs);
    for (int i = 0; i < N; i++) vec_env_save_record(&a, i, recs + i * rs);
    for (int i = 0; i < N; i++) vec_env_save_record(&a, i, again + i * rs);
    CHECK(memcmp(recs, again, N * rs) == 0); /* the same bytes for the same state */
    /* Another seed and fresh data: everything must come from the records. */
    CHECK_INT_EQ(vec_env_init(&b, x->name, 1, 10, N, &err), CALF_OK);
    for (int i = 0; i < N; i++) {
        int rc = vec_env_load_record(&b, i, recs + i * rs, &err);
        CHECK_INT_EQ(rc, CALF_OK);
        if (rc) fprintf(stderr, "%s\n", err.msg);
    }
    int same = 1, ended = 0;
    for (int t = K; t < K + M; t++) {
        step_block(&a, t, ra, ta, ua, fa);
        step_block(&b, t, rb, tb, ub, fb);
        same &= memcmp(ra, rb, sizeof ra) == 0 && memcmp(ta, tb, sizeof ta) == 0 &&
                memcmp(ua, ub, sizeof ua) == 0 &&
                memcmp(fa, fb, sizeof(float) * N * (size_t)a.obs_dim) == 0;
        for (int i = 0; i < N; i++) ended += ta[i] | ua[i];
    }
    CHECK(same);
    for (int i = 0; i < N; i++) {
        vec_env_save_record(&a, i, recs + i * rs);
        vec_env_save_record(&b, i, again + i * rs);
    }
    CHECK(memcmp(recs, again, N * rs) == 0);
    /* A saved state that is not finite, or does not give the stored observation, is
     * refused and leaves the env as it was. */
    unsigned char *bad = malloc(rs), *before = malloc(rs), *after = malloc(rs);
    vec_env_save_record(&b, 1, before);
    size_t state_at = 64 + 4 * (size_t)a.obs_dim, qpos_at = state_at + 8;
    memcpy(bad, recs + 1 * rs, rs);
    const double nan = NAN;
    memcpy(bad + qpos_at + 8, &nan, sizeof nan);
    CHECK_INT_EQ(vec_env_load_record(&b, 1, bad, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "not finite") != NULL);
    memcpy(bad, recs + 1 * rs, rs);
    /* a position the observation shows: the last (Pusher's is the goal's, whose place
     * the observation takes from the kept xpos: its first then) */
    size_t tampered = qpos_at + 8 * (size_t)(strcmp(x->name, "Pusher-v4") ? x->nq - 1 : 0);
    double q;
    memcpy(&q, bad + tampered, sizeof q);
    q += 0.5;
    memcpy(bad + tampered, &q, sizeof q);
    CHECK_INT_EQ(vec_env_load_record(&b, 1, bad, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "observation does not match") != NULL);
    vec_env_save_record(&b, 1, after);
    CHECK(memcmp(before, after, rs) == 0);
    free(bad), free(before), free(after), free(recs), free(again);
    vec_env_free(&a);
    vec_env_free(&b);
}

/* A model that does not compile, or compiles to another layout, is an error naming the
 * task and what is wrong, never a crash. */
static void test_model_faults(void) {
    static const char broken[] = "<mujoco><worldbody><body name=\"a\"></worldbody></mujoco>";
    static const int broken_size = sizeof broken - 1;
    static const char tiny[] =
        "<mujoco><worldbody><body><joint type=\"slide\"/><geom size=\"0.1\"/></body>"
        "</worldbody></mujoco>";
    static const int tiny_size = sizeof tiny - 1;
    mj_task t = {.name = "Broken-v0", .file = "broken.xml", .xml = broken, .xml_size = &broken_size,
                 .frame_skip = 1, .nq = 1, .nv = 1, .nu = 0,
                 .spec = &calf_env_find("HalfCheetah-v4")->spec};
    mj_state s;
    memset(&s, 0, sizeof s);
    calf_error err;
    calf_error_clear(&err);
    CHECK_INT_EQ(mj_env_create(&s, &t, &err), CALF_EIO);
    CHECK(strstr(err.msg, "Broken-v0") && strstr(err.msg, "cannot compile"));
    CHECK(s.d == NULL);
    mj_task u = t;
    u.name = "Tiny-v0", u.file = "tiny.xml", u.xml = tiny, u.xml_size = &tiny_size;
    calf_error_clear(&err);
    CHECK_INT_EQ(mj_env_create(&s, &u, &err), CALF_EIO); /* nu 0, not HalfCheetah's 6 */
    CHECK(strstr(err.msg, "Tiny-v0") && strstr(err.msg, "expected layout"));
    CHECK(s.d == NULL);
}

/* MJ_TASKS (envs.h) is the one list of the tasks: each row's class bears the row's name,
 * and so does the task its envs are made from, with the row's model; the registry lists
 * the rows in their order, one after another, after the classic envs. */
static void test_task_table(void) {
#define ROW_(id, name, model) {&id##_class, name, #model ".xml"},
    static const struct {
        const calf_env_class *cls;
        const char *name, *file;
    } rows[] = {MJ_TASKS(ROW_)};
#undef ROW_
    int n = (int)(sizeof rows / sizeof rows[0]);
    CHECK_INT_EQ(n, MJ_NUM_TASKS);
    int first = -1;
    for (int i = 0; i < calf_env_count() && first < 0; i++)
        if (calf_env_at(i) == rows[0].cls) first = i;
    CHECK(first > 0);
    for (int i = 0; i < n; i++) {
        CHECK(strcmp(rows[i].cls->spec.name, rows[i].name) == 0);
        CHECK(calf_env_find(rows[i].name) == rows[i].cls);
        CHECK(calf_env_at(first + i) == rows[i].cls);
        calf_env env;
        calf_error err;
        CHECK_INT_EQ(calf_env_init(&env, rows[i].name, 0, 0, &err), CALF_OK);
        const mj_task *t = ((const mj_state *)env.state)->task;
        CHECK(strcmp(t->name, rows[i].name) == 0 && strcmp(t->file, rows[i].file) == 0);
        CHECK(t->spec == &rows[i].cls->spec);
        calf_env_free(&env);
    }
    for (int i = 0; i < first; i++) CHECK(calf_env_at(i)->destroy != mj_env_destroy_hook);
}

/* MuJoCo out of memory (ulimit -v reached while making an env's data) is a status with
 * MuJoCo's message, not an exit: once the limit is lifted the same process makes the env.
 * Not under AddressSanitizer, whose shadow memory lives in the address space. */
static void test_out_of_memory(void) {
#if defined(__SANITIZE_ADDRESS__)
    printf("out-of-memory case skipped under AddressSanitizer\n");
#else
    struct rlimit old;
    unsigned long long vm = vm_size();
    CHECK(vm > 0 && getrlimit(RLIMIT_AS, &old) == 0);
    if (vm == 0) return;
    struct rlimit low = old;
    low.rlim_cur = (rlim_t)(vm + (256u << 10)); /* room for the env, not its MuJoCo data */
    CHECK(setrlimit(RLIMIT_AS, &low) == 0);
    calf_env envs[64];
    int made = 0, rc = CALF_OK;
    calf_error err;
    calf_error_clear(&err);
    while (made < 64 && (rc = calf_env_init(&envs[made], "Hopper-v4", 1, (uint64_t)made, &err)) == CALF_OK)
        made++;
    CHECK(setrlimit(RLIMIT_AS, &old) == 0);
    CHECK_INT_EQ(rc, CALF_ENOMEM);
    /* MuJoCo's own words come through: "Could not allocate memory" */
    CHECK(strstr(err.msg, "Hopper-v4") && strstr(err.msg, "MuJoCo could not make an env's data") &&
          strstr(err.msg, "allocate"));
    for (int i = 0; i < made; i++) calf_env_free(&envs[i]);
    calf_env env;
    CHECK_INT_EQ(calf_env_init(&env, "Hopper-v4", 1, 0, &err), CALF_OK);
    float obs[11];
    calf_env_reset(&env, obs);
    CHECK(isfinite(obs[0]));
    calf_env_free(&env);
#endif
}

int main(void) {
    test_model_faults();
    test_task_table();
    for (int k = 0; k < MJ_NUM_EXPECTED; k++) {
        const mj_expect *x = &mj_expected[k];
        int before = test_failures;
        test_model(x);
        if (plain_layout(x->name)) {
            test_reset(x);
            test_observation(x);
        }
        test_blocks(x);
        test_reset_data(x);
        test_records(x);
        printf("%-20s %s\n", x->name, test_failures == before ? "ok" : "FAILED");
    }
    test_reward_termination();
    test_own_resets();
    test_own_rewards();
    test_sum_squares();
    test_out_of_memory();
    return test_report("test_mujoco");
}
#endif
