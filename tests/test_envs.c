/* test_envs.c: the built-in environments against reference trajectories computed here
 * from the published equations (written in their textbook form, not copied from the
 * env sources), their termination and truncation edges, reset distributions, and the
 * registry (unknown names, duplicates, bad specs, custom classes). */
#include "calf/env.h"
#include "calf/version.h"

#include <math.h>
#include <stdint.h>

#include "envs/envs.h"
#include "test_util.h"

#define PI 3.14159265358979323846
/* Buffer sizes for the classic-control envs these tests drive (the interface itself
 * has no caps: each env says its sizes). */
#define CLASSIC_MAX_OBS 8
#define CLASSIC_MAX_ACT 2

/* 1e-6, relative for magnitudes above 1 (float observations of values near 10 carry
 * half-ulp errors of ~5e-7). */
#define CHECK_CLOSE(a, b) CHECK_NEAR((a), (b), 1e-6 * fmax(1.0, fabs((double)(b))))

static calf_env make_env(const char *name, uint64_t seed, uint64_t index) {
    calf_env env;
    calf_error err;
    int rc = calf_env_init(&env, name, seed, index, &err);
    CHECK_INT_EQ(rc, CALF_OK);
    if (rc != CALF_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    return env;
}

/* ---- CartPole-v1 --------------------------------------------------------------- */

/* Barto et al. / Florian (2007) with m_c = 1, m_p = 0.1, l = 0.5, g = 9.8, F = +-10,
 * explicit Euler over tau = 0.02. */
static int ref_cartpole(double s[4], int action) {
    const double g = 9.8, mc = 1.0, mp = 0.1, l = 0.5, tau = 0.02;
    const double M = mc + mp;
    double F = action == 1 ? 10.0 : -10.0;
    double x = s[0], xd = s[1], th = s[2], thd = s[3];
    double st = sin(th), ct = cos(th);
    double thdd = (g * st - ct * (F + mp * l * thd * thd * st) / M) / (l * (4.0 / 3.0 - mp * ct * ct / M));
    double xdd = (F + mp * l * (thd * thd * st - thdd * ct)) / M;
    s[0] = x + tau * xd;
    s[1] = xd + tau * xdd;
    s[2] = th + tau * thd;
    s[3] = thd + tau * thdd;
    double thr = 12.0 * PI / 180.0;
    return fabs(s[0]) > 2.4 || fabs(s[2]) > thr;
}

static void test_cartpole_dynamics(void) {
    calf_env env = make_env("CartPole-v1", 1, 0);
    cartpole_state *st = env.state;
    double ref[4] = {0.01, -0.02, 0.03, 0.04};
    st->x = ref[0], st->x_dot = ref[1], st->theta = ref[2], st->theta_dot = ref[3];
    int terminated_at = -1;
    for (int t = 0; t < 200 && terminated_at < 0; t++) {
        int a = (t * 7 / 3 + t / 5) % 2; /* fixed, irregular action sequence */
        float obs[4], r;
        int term, trunc;
        calf_env_step(&env, a, NULL, obs, &r, &term, &trunc);
        int ref_term = ref_cartpole(ref, a);
        CHECK_CLOSE(st->x, ref[0]);
        CHECK_CLOSE(st->x_dot, ref[1]);
        CHECK_CLOSE(st->theta, ref[2]);
        CHECK_CLOSE(st->theta_dot, ref[3]);
        for (int j = 0; j < 4; j++) CHECK_CLOSE(obs[j], ref[j]);
        CHECK(obs[2] == (float)st->theta); /* float32 of the double state */
        CHECK(r == 1.0f);                  /* including the terminating step */
        CHECK_INT_EQ(term, ref_term);
        CHECK_INT_EQ(trunc, 0);
        if (term) terminated_at = t;
    }
    /* The irregular sequence loses balance within a few dozen steps. */
    CHECK(terminated_at > 5);
    calf_env_free(&env);
}

static void test_cartpole_thresholds(void) {
    calf_env env = make_env("CartPole-v1", 1, 0);
    cartpole_state *st = env.state;
    const double thr = 12 * 2 * PI / 360;
    float obs[4], r;
    int term, trunc;

    /* Exactly on the angle threshold is still alive (strict inequality)... */
    *st = (cartpole_state){0.0, 0.0, thr, 0.0};
    calf_env_step(&env, 1, NULL, obs, &r, &term, &trunc);
    CHECK(st->theta == thr);
    CHECK_INT_EQ(term, 0);
    /* ...a hair beyond is terminated. */
    *st = (cartpole_state){0.0, 0.0, thr, 1e-9};
    calf_env_step(&env, 1, NULL, obs, &r, &term, &trunc);
    CHECK(st->theta > thr);
    CHECK_INT_EQ(term, 1);
    *st = (cartpole_state){0.0, 0.0, -thr, -1e-9};
    calf_env_step(&env, 0, NULL, obs, &r, &term, &trunc);
    CHECK_INT_EQ(term, 1);
    /* Same for the cart position, both sides. */
    *st = (cartpole_state){2.4, 0.0, 0.0, 0.0};
    calf_env_step(&env, 1, NULL, obs, &r, &term, &trunc);
    CHECK(st->x == 2.4);
    CHECK_INT_EQ(term, 0);
    *st = (cartpole_state){2.4, 1e-9, 0.0, 0.0};
    calf_env_step(&env, 1, NULL, obs, &r, &term, &trunc);
    CHECK_INT_EQ(term, 1);
    *st = (cartpole_state){-2.4, -1e-9, 0.0, 0.0};
    calf_env_step(&env, 0, NULL, obs, &r, &term, &trunc);
    CHECK_INT_EQ(term, 1);
    CHECK(r == 1.0f);
    calf_env_free(&env);
}

/* ---- Pendulum-v1 --------------------------------------------------------------- */

static double ref_pendulum(double s[2], double u) {
    const double g = 10.0, m = 1.0, l = 1.0, dt = 0.05;
    u = fmax(-2.0, fmin(2.0, u));
    double th = s[0], thd = s[1];
    double an = atan2(sin(th), cos(th)); /* th normalised to [-pi, pi] */
    double cost = an * an + 0.1 * thd * thd + 0.001 * u * u;
    double thd2 = thd + (3.0 * g / (2.0 * l) * sin(th) + 3.0 / (m * l * l) * u) * dt;
    thd2 = fmax(-8.0, fmin(8.0, thd2));
    s[0] = th + thd2 * dt;
    s[1] = thd2;
    return -cost;
}

static void test_pendulum_dynamics(void) {
    calf_env env = make_env("Pendulum-v1", 1, 0);
    pendulum_state *st = env.state;
    /* Starts outside [-pi, pi] (one and several turns, both signs, far away) to
     * exercise every branch of the angle normalisation in the cost. */
    static const double starts[][2] = {{7.5, -0.7}, {-20.0, 3.0}, {1.0e4, 0.0}, {-2.0, 0.5}};
    for (int k = 0; k < 4; k++) {
        double ref[2] = {starts[k][0], starts[k][1]};
        st->th = ref[0], st->thdot = ref[1];
        env.elapsed_steps = 0;
        for (int t = 0; t < 199; t++) {
            /* Includes actions beyond the [-2, 2] bounds: they are clipped. */
            float u = (float)(3.5 * sin(0.37 * t + k) + ((t % 11 == 0) ? 5.0 : 0.0));
            float u_copy = u;
            float obs[3], r;
            int term, trunc;
            calf_env_step(&env, 0, &u, obs, &r, &term, &trunc);
            CHECK(u == u_copy); /* the caller's buffer is not clipped in place */
            double ref_r = ref_pendulum(ref, u);
            CHECK_CLOSE(st->th, ref[0]);
            CHECK_CLOSE(st->thdot, ref[1]);
            CHECK_CLOSE(obs[0], cos(ref[0]));
            CHECK_CLOSE(obs[1], sin(ref[0]));
            CHECK_CLOSE(obs[2], ref[1]);
            CHECK_CLOSE(r, ref_r);
            CHECK_INT_EQ(term, 0);
            CHECK_INT_EQ(trunc, 0);
        }
    }
    /* Speed clipping. */
    *st = (pendulum_state){PI / 2, 7.9};
    float u = 2.0f, obs[3], r;
    int term, trunc;
    calf_env_step(&env, 0, &u, obs, &r, &term, &trunc);
    CHECK(st->thdot == 8.0);
    CHECK_CLOSE(st->th, PI / 2 + 8.0 * 0.05);
    /* Reward uses the pre-step state: upright, still, no torque costs nothing. */
    *st = (pendulum_state){0.0, 0.0};
    u = 0.0f;
    calf_env_step(&env, 0, &u, obs, &r, &term, &trunc);
    CHECK(r == 0.0f);
    /* Hanging down at rest with full torque: -(pi^2 + 0.001 * 4). */
    *st = (pendulum_state){PI, 0.0};
    u = -2.0f;
    calf_env_step(&env, 0, &u, obs, &r, &term, &trunc);
    CHECK_CLOSE(r, -(PI * PI + 0.004));
    calf_env_free(&env);
}

/* ---- Acrobot-v1 ---------------------------------------------------------------- */

/* Sutton & Barto's book equations with m1 = m2 = l1 = 1, lc1 = lc2 = 0.5, I1 = I2 = 1,
 * g = 9.8; cos(a - pi/2) written as sin(a). */
static void ref_acrobot_deriv(const double s[4], double tau, double ds[4]) {
    const double m1 = 1, m2 = 1, l1 = 1, lc1 = 0.5, lc2 = 0.5, I1 = 1, I2 = 1, g = 9.8;
    double t1 = s[0], t2 = s[1], w1 = s[2], w2 = s[3];
    double d1 = m1 * lc1 * lc1 + m2 * (l1 * l1 + lc2 * lc2 + 2 * l1 * lc2 * cos(t2)) + I1 + I2;
    double d2 = m2 * (lc2 * lc2 + l1 * lc2 * cos(t2)) + I2;
    double phi2 = m2 * lc2 * g * sin(t1 + t2);
    double phi1 = -m2 * l1 * lc2 * w2 * w2 * sin(t2) - 2 * m2 * l1 * lc2 * w2 * w1 * sin(t2) +
                  (m1 * lc1 + m2 * l1) * g * sin(t1) + phi2;
    double a2 = (tau + d2 / d1 * phi1 - m2 * l1 * lc2 * w1 * w1 * sin(t2) - phi2) /
                (m2 * lc2 * lc2 + I2 - d2 * d2 / d1);
    double a1 = -(d2 * a2 + phi1) / d1;
    ds[0] = w1, ds[1] = w2, ds[2] = a1, ds[3] = a2;
}

static int ref_acrobot(double s[4], int action) {
    double tau = action - 1.0, h = 0.2;
    double k[4][4], y[4];
    ref_acrobot_deriv(s, tau, k[0]);
    for (int stage = 1; stage < 4; stage++) {
        double c = stage == 3 ? h : h / 2;
        for (int i = 0; i < 4; i++) y[i] = s[i] + c * k[stage - 1][i];
        ref_acrobot_deriv(y, tau, k[stage]);
    }
    for (int i = 0; i < 4; i++) s[i] += h / 6 * (k[0][i] + 2 * k[1][i] + 2 * k[2][i] + k[3][i]);
    for (int i = 0; i < 2; i++) {
        while (s[i] > PI) s[i] -= 2 * PI;
        while (s[i] < -PI) s[i] += 2 * PI;
    }
    s[2] = fmax(-4 * PI, fmin(4 * PI, s[2]));
    s[3] = fmax(-9 * PI, fmin(9 * PI, s[3]));
    return -cos(s[0]) - cos(s[0] + s[1]) > 1.0;
}

static void test_acrobot_dynamics(void) {
    calf_env env = make_env("Acrobot-v1", 1, 0);
    acrobot_state *st = env.state;
    double ref[4] = {0.05, -0.08, 0.02, 0.09};
    st->theta1 = ref[0], st->theta2 = ref[1], st->dtheta1 = ref[2], st->dtheta2 = ref[3];
    int terminated_at = -1;
    /* Pump energy with torque in phase with the second joint until the tip reaches
     * the goal height (about 60 steps). */
    for (int t = 0; t < 500 && terminated_at < 0; t++) {
        int a = ref[3] > 0 ? 2 : ref[3] < 0 ? 0 : 1;
        if (t % 13 == 5) a = 1;
        float obs[6], r;
        int term, trunc;
        calf_env_step(&env, a, NULL, obs, &r, &term, &trunc);
        int ref_term = ref_acrobot(ref, a);
        CHECK_CLOSE(st->theta1, ref[0]);
        CHECK_CLOSE(st->theta2, ref[1]);
        CHECK_CLOSE(st->dtheta1, ref[2]);
        CHECK_CLOSE(st->dtheta2, ref[3]);
        CHECK_CLOSE(obs[0], cos(ref[0]));
        CHECK_CLOSE(obs[1], sin(ref[0]));
        CHECK_CLOSE(obs[2], cos(ref[1]));
        CHECK_CLOSE(obs[3], sin(ref[1]));
        CHECK_CLOSE(obs[4], ref[2]);
        CHECK_CLOSE(obs[5], ref[3]);
        CHECK_INT_EQ(term, ref_term);
        CHECK(r == (ref_term ? 0.0f : -1.0f));
        CHECK_INT_EQ(trunc, 0);
        if (term) terminated_at = t;
    }
    CHECK(terminated_at > 10);

    /* Single steps from edge states: angles wrapping past +-pi, velocities beyond
     * the 4 pi / 9 pi clips. */
    static const double edges[][4] = {
        {3.1, 0.0, 3.0, 0.0},   {-3.1, 0.5, -3.0, 2.0}, {0.3, 3.1, 0.0, 5.0},
        {0.0, 0.0, 0.0, 100.0}, {1.0, -2.0, 15.0, -30.0},
    };
    int wrapped = 0, clipped = 0;
    for (int e = 0; e < 5; e++) {
        for (int a = 0; a < 3; a++) {
            double s0[4], s1[4];
            memcpy(s0, edges[e], sizeof s0);
            memcpy(s1, edges[e], sizeof s1);
            s1[0] += 0.2 * s1[2], s1[1] += 0.2 * s1[3]; /* roughly where it lands, unwrapped */
            *st = (acrobot_state){s0[0], s0[1], s0[2], s0[3]};
            float obs[6], r;
            int term, trunc;
            calf_env_step(&env, a, NULL, obs, &r, &term, &trunc);
            int ref_term = ref_acrobot(s0, a);
            CHECK_CLOSE(st->theta1, s0[0]);
            CHECK_CLOSE(st->theta2, s0[1]);
            CHECK_CLOSE(st->dtheta1, s0[2]);
            CHECK_CLOSE(st->dtheta2, s0[3]);
            CHECK_INT_EQ(term, ref_term);
            CHECK(st->theta1 >= -PI && st->theta1 <= PI && st->theta2 >= -PI && st->theta2 <= PI);
            CHECK(fabs(st->dtheta1) <= 4 * PI && fabs(st->dtheta2) <= 9 * PI);
            wrapped += fabs(s1[0]) > PI || fabs(s1[1]) > PI;
            clipped += fabs(st->dtheta1) == 4 * PI || fabs(st->dtheta2) == 9 * PI;
        }
    }
    CHECK(wrapped >= 6); /* the edge states really exercise both paths */
    CHECK(clipped >= 3);
    calf_env_free(&env);
}

/* ---- MountainCar-v0 and MountainCarContinuous-v0 -------------------------------- */

static int ref_mountain_car(double s[2], double accel, double goal) {
    double v = s[1] + accel - 0.0025 * cos(3 * s[0]);
    v = fmax(-0.07, fmin(0.07, v));
    double p = fmax(-1.2, fmin(0.6, s[0] + v));
    if (p == -1.2 && v < 0) v = 0;
    s[0] = p, s[1] = v;
    return p >= goal && v >= 0;
}

static void test_mountain_car_dynamics(void) {
    calf_env env = make_env("MountainCar-v0", 1, 0);
    mountain_car_state *st = env.state;
    double ref[2] = {-0.5, 0.0};
    st->position = ref[0], st->velocity = ref[1];
    int terminated_at = -1;
    /* Bang-bang on the velocity sign reaches the goal in about 100 steps. */
    for (int t = 0; t < 200 && terminated_at < 0; t++) {
        int a = ref[1] >= 0 ? 2 : 0;
        if (t < 3 || t % 17 == 0) a = 1;
        float obs[2], r;
        int term, trunc;
        calf_env_step(&env, a, NULL, obs, &r, &term, &trunc);
        int ref_term = ref_mountain_car(ref, (a - 1) * 0.001, 0.5);
        CHECK_CLOSE(st->position, ref[0]);
        CHECK_CLOSE(st->velocity, ref[1]);
        CHECK_CLOSE(obs[0], ref[0]);
        CHECK_CLOSE(obs[1], ref[1]);
        CHECK(r == -1.0f);
        CHECK_INT_EQ(term, ref_term);
        if (term) {
            terminated_at = t;
            CHECK(ref[0] >= 0.5);
        }
    }
    CHECK(terminated_at > 50);

    float obs[2], r;
    int term, trunc;
    /* Past the goal but rolling back: goal_velocity 0 keeps it alive. */
    *st = (mountain_car_state){0.55, -0.001};
    calf_env_step(&env, 0, NULL, obs, &r, &term, &trunc);
    CHECK(st->position >= 0.5 && st->velocity < 0);
    CHECK_INT_EQ(term, 0);
    /* At the goal with velocity exactly 0: goal_velocity is inclusive. The start
     * velocity cancels this step's gravity term exactly (no push with action 1). */
    *st = (mountain_car_state){0.6, -(0.0 + cos(3 * 0.6) * (-0.0025))};
    calf_env_step(&env, 1, NULL, obs, &r, &term, &trunc);
    CHECK(st->velocity == 0.0 && st->position == 0.6);
    CHECK_INT_EQ(term, 1);
    /* Inelastic left wall: position clipped to -1.2 and velocity zeroed. */
    *st = (mountain_car_state){-1.19, -0.05};
    calf_env_step(&env, 0, NULL, obs, &r, &term, &trunc);
    CHECK(st->position == -1.2);
    CHECK(st->velocity == 0.0);
    /* Right edge: position clipped to 0.6, terminated. */
    *st = (mountain_car_state){0.59, 0.07};
    calf_env_step(&env, 2, NULL, obs, &r, &term, &trunc);
    CHECK(st->position == 0.6);
    CHECK(st->velocity == 0.07);
    CHECK_INT_EQ(term, 1);
    calf_env_free(&env);
}

static void test_mountain_car_continuous_dynamics(void) {
    calf_env env = make_env("MountainCarContinuous-v0", 1, 0);
    mountain_car_state *st = env.state;
    double ref[2] = {-0.5, 0.0};
    st->position = ref[0], st->velocity = ref[1];
    int terminated_at = -1;
    for (int t = 0; t < 999 && terminated_at < 0; t++) {
        float u = ref[1] >= 0 ? 1.7f : -0.8f; /* 1.7 is clipped to 1 */
        if (t % 9 == 4) u = 0.25f;
        float obs[2], r;
        int term, trunc;
        calf_env_step(&env, 0, &u, obs, &r, &term, &trunc);
        double uc = fmin(1.0, u);
        int ref_term = ref_mountain_car(ref, uc * 0.0015, 0.45);
        /* Gymnasium keeps this env's state in float32 between steps. */
        ref[0] = (float)ref[0], ref[1] = (float)ref[1];
        CHECK_CLOSE(st->position, ref[0]);
        CHECK_CLOSE(st->velocity, ref[1]);
        CHECK(st->position == (double)(float)st->position);
        CHECK_CLOSE(obs[0], ref[0]);
        CHECK_CLOSE(obs[1], ref[1]);
        CHECK_INT_EQ(term, ref_term);
        CHECK_CLOSE(r, (ref_term ? 100.0 : 0.0) - 0.1 * uc * uc);
        if (term) terminated_at = t;
    }
    CHECK(terminated_at > 30);

    /* The goal is 0.45 here (not 0.5), and velocity exactly 0 there counts. */
    float obs[2], r, u = 0.0f;
    int term, trunc;
    *st = (mountain_car_state){0.46, -(0.0 * 0.0015 - 0.0025 * cos(3 * 0.46))};
    calf_env_step(&env, 0, &u, obs, &r, &term, &trunc);
    CHECK(st->velocity == 0.0 && st->position == (float)0.46);
    CHECK_INT_EQ(term, 1);
    CHECK(r == 100.0f);
    *st = (mountain_car_state){0.44, 0.0};
    calf_env_step(&env, 0, &u, obs, &r, &term, &trunc);
    CHECK(st->position < 0.45);
    CHECK_INT_EQ(term, 0);
    calf_env_free(&env);
}

/* ---- the NoVel envs ----------------------------------------------------------------- */

/* One observation of a NoVel env against its base env's: the masked entries zero with
 * the velocity's sign (the float32 `observation * mask` of rl-baselines3-zoo's
 * MaskVelocityWrapper), every other entry the base's bits. */
static bool novel_agrees(const float *base, const float *novel, int dim, const int *masked,
                         int nmasked) {
    bool ok = true;
    for (int j = 0; j < dim; j++) {
        bool is_masked = false;
        for (int k = 0; k < nmasked; k++) is_masked |= masked[k] == j;
        float want = is_masked ? base[j] * 0.0f : base[j];
        ok &= !is_masked || novel[j] == 0.0f;
        ok &= memcmp(&want, &novel[j], sizeof want) == 0;
    }
    return ok;
}

/* Whole episodes of a NoVel env stepped beside its base env from the same (seed, index)
 * and the same actions: the same states, rewards, endings and random draws at every step
 * (the base class's code), the observations as novel_agrees says. */
static void check_novel(const char *name, const char *base_name, const int *masked,
                        int nmasked) {
    calf_env a = make_env(name, 13, 2), b = make_env(base_name, 13, 2);
    const calf_env_spec *sa = &a.cls->spec, *sb = &b.cls->spec;
    CHECK(sa->obs_dim == sb->obs_dim && sa->num_actions == sb->num_actions &&
          sa->action_dim == sb->action_dim && sa->max_episode_steps == sb->max_episode_steps &&
          sa->state_size == sb->state_size && sa->save_size == sb->save_size);
    for (int j = 0; j < sa->action_dim; j++)
        CHECK(sa->action_low[j] == sb->action_low[j] && sa->action_high[j] == sb->action_high[j]);
    CHECK((a.cls->step_many != NULL) == (b.cls->step_many != NULL));
    calf_rng pick;
    calf_rng_seed(&pick, 5, 0, CALF_RNG_ACTION);
    float oa[CLASSIC_MAX_OBS], ob[CLASSIC_MAX_OBS], seen[CLASSIC_MAX_OBS], u[CLASSIC_MAX_ACT];
    int episodes = 0, steps = 0, negative_zero = 0;
    bool same = true;
    calf_env_reset(&a, oa);
    calf_env_reset(&b, ob);
    same &= novel_agrees(ob, oa, sa->obs_dim, masked, nmasked);
    while (episodes < 6) {
        int act = sa->num_actions ? (int)calf_rng_below(&pick, (uint32_t)sa->num_actions) : 0;
        for (int j = 0; j < sa->action_dim; j++)
            u[j] = (float)calf_rng_uniform_range(&pick, -2.5, 2.5); /* some beyond the bounds */
        float ra, rb;
        int ta, tb, ua, ub;
        calf_env_step(&a, act, u, oa, &ra, &ta, &ua);
        calf_env_step(&b, act, u, ob, &rb, &tb, &ub);
        steps++;
        same &= novel_agrees(ob, oa, sa->obs_dim, masked, nmasked);
        same &= memcmp(&ra, &rb, sizeof ra) == 0 && ta == tb && ua == ub;
        same &= memcmp(a.state, b.state, sa->state_size) == 0;
        same &= memcmp(&a.rng, &b.rng, sizeof a.rng) == 0 && a.elapsed_steps == b.elapsed_steps;
        a.cls->observe(a.state, seen); /* what a checkpoint's record is validated with */
        same &= memcmp(seen, oa, (size_t)sa->obs_dim * sizeof(float)) == 0;
        for (int k = 0; k < nmasked; k++) negative_zero += signbit(oa[masked[k]]) != 0;
        if (ta || ua) {
            episodes++;
            calf_env_reset(&a, oa);
            calf_env_reset(&b, ob);
            same &= novel_agrees(ob, oa, sa->obs_dim, masked, nmasked);
        }
    }
    CHECK(same);
    CHECK(steps > 6 * 9);
    CHECK(negative_zero > 0); /* the sign rule above was exercised */
    /* The check rejects planted mistakes in the last step's observation: an unmasked
     * entry zeroed (index 0 is never a velocity here), a velocity left in. */
    float wrong[CLASSIC_MAX_OBS];
    CHECK(ob[0] != 0.0f && novel_agrees(ob, oa, sa->obs_dim, masked, nmasked));
    memcpy(wrong, oa, sizeof wrong);
    wrong[0] = ob[0] * 0.0f;
    CHECK(!novel_agrees(ob, wrong, sa->obs_dim, masked, nmasked));
    memcpy(wrong, oa, sizeof wrong);
    wrong[masked[nmasked - 1]] = ob[masked[nmasked - 1]] != 0.0f ? ob[masked[nmasked - 1]] : 0.25f;
    CHECK(!novel_agrees(ob, wrong, sa->obs_dim, masked, nmasked));
    calf_env_free(&a);
    calf_env_free(&b);
}

static void test_novel(void) {
    check_novel("CartPoleNoVel-v1", "CartPole-v1", (const int[]){1, 3}, 2);
    check_novel("PendulumNoVel-v1", "Pendulum-v1", (const int[]){2}, 1);
}

/* ---- batched stepping ------------------------------------------------------------ */

/* A class's step_many must give the bytes n separate step calls give, whatever n
 * (including counts that are not a multiple of any internal group size). */
static void test_step_many(void) {
    for (int c = 0; c < calf_env_count(); c++) {
        const calf_env_class *cls = calf_env_at(c);
        if (!cls->step_many) continue;
        const calf_env_spec *sp = &cls->spec;
        enum { N = 29 };
        calf_env a[N], b[N];
        int actions[N];
        float u[N * CLASSIC_MAX_ACT];
        calf_rng pick;
        calf_rng_seed(&pick, 8, 0, CALF_RNG_ACTION);
        for (int i = 0; i < N; i++) {
            a[i] = make_env(sp->name, 21, (uint64_t)i);
            b[i] = make_env(sp->name, 21, (uint64_t)i);
        }
        int same = 1, ended = 0;
        for (int t = 0; t < 300; t++) {
            int n = 1 + (int)calf_rng_below(&pick, N); /* a varying prefix of the envs */
            for (int i = 0; i < n; i++) {
                actions[i] = sp->num_actions ? (int)calf_rng_below(&pick, (uint32_t)sp->num_actions) : 0;
                for (int j = 0; j < sp->action_dim; j++)
                    u[i * sp->action_dim + j] = (float)calf_rng_uniform_range(&pick, sp->action_low[j], sp->action_high[j]);
            }
            float obs_a[N * CLASSIC_MAX_OBS], obs_b[N * CLASSIC_MAX_OBS], r_a[N], r_b[N];
            uint8_t term_a[N], term_b[N];
            if (t == 0)
                for (int i = 0; i < N; i++) calf_env_reset(&a[i], obs_a), calf_env_reset(&b[i], obs_b);
            cls->step_many(a, n, actions, u, obs_a, r_a, term_a);
            for (int i = 0; i < n; i++) {
                term_b[i] = (uint8_t)cls->step(b[i].state, &b[i].rng, actions[i], u + i * sp->action_dim,
                                               obs_b + i * sp->obs_dim, &r_b[i]);
                same &= (term_a[i] != 0) == (term_b[i] != 0);
                same &= memcmp(a[i].state, b[i].state, sp->state_size) == 0;
                same &= memcmp(&a[i].rng, &b[i].rng, sizeof a[i].rng) == 0;
            }
            same &= memcmp(obs_a, obs_b, (size_t)n * (size_t)sp->obs_dim * sizeof(float)) == 0;
            same &= memcmp(r_a, r_b, (size_t)n * sizeof(float)) == 0;
            for (int i = 0; i < n; i++)
                if (term_b[i]) {
                    ended++;
                    calf_env_reset(&a[i], obs_a);
                    calf_env_reset(&b[i], obs_b);
                }
        }
        CHECK(same);
        CHECK(ended > 10);
        for (int i = 0; i < N; i++) calf_env_free(&a[i]), calf_env_free(&b[i]);
    }
    CHECK(calf_env_find("CartPole-v1")->step_many != NULL); /* the loop above ran */
}

/* ---- time limits ----------------------------------------------------------------- */

/* Runs a fresh episode with a passive action; it must neither terminate nor truncate
 * before the limit, and truncate exactly at it. */
static void check_time_limit(const char *name, int passive_action, int limit) {
    calf_env env = make_env(name, 3, 1);
    float obs[CLASSIC_MAX_OBS], r, u[CLASSIC_MAX_ACT] = {0};
    int term = 0, trunc = 0, steps = 0;
    CHECK_INT_EQ(env.cls->spec.max_episode_steps, limit);
    calf_env_reset(&env, obs);
    while (!term && !trunc && steps < limit + 5) {
        calf_env_step(&env, passive_action, u, obs, &r, &term, &trunc);
        steps++;
    }
    CHECK_INT_EQ(term, 0);
    CHECK_INT_EQ(trunc, 1);
    CHECK_INT_EQ(steps, limit);
    CHECK_INT_EQ(env.elapsed_steps, limit);
    calf_env_reset(&env, obs);
    CHECK_INT_EQ(env.elapsed_steps, 0);
    calf_env_free(&env);
}

static void test_truncation(void) {
    check_time_limit("Pendulum-v1", 0, 200);
    check_time_limit("MountainCar-v0", 1, 200);
    check_time_limit("MountainCarContinuous-v0", 0, 999);
    check_time_limit("Acrobot-v1", 1, 500);

    /* CartPole cannot survive 500 steps passively; place it mid-episode instead. */
    calf_env env = make_env("CartPole-v1", 3, 1);
    cartpole_state *st = env.state;
    float obs[4], r;
    int term, trunc;
    *st = (cartpole_state){0, 0, 0, 0};
    env.elapsed_steps = 498;
    calf_env_step(&env, 0, NULL, obs, &r, &term, &trunc);
    CHECK_INT_EQ(trunc, 0);
    calf_env_step(&env, 1, NULL, obs, &r, &term, &trunc);
    CHECK_INT_EQ(term, 0);
    CHECK_INT_EQ(trunc, 1);
    /* Terminating on the last allowed step reports terminated only. */
    *st = (cartpole_state){2.4, 1.0, 0, 0};
    env.elapsed_steps = 499;
    calf_env_step(&env, 1, NULL, obs, &r, &term, &trunc);
    CHECK_INT_EQ(term, 1);
    CHECK_INT_EQ(trunc, 0);
    calf_env_free(&env);
}

/* ---- reset distributions ---------------------------------------------------------- */

static void test_reset_distributions(void) {
    const int n = 2000;
    double lo[4], hi[4];
    struct {
        const char *name;
        int dims;
        double low, high;
    } cases[] = {
        {"CartPole-v1", 4, -0.05, 0.05},
        {"Acrobot-v1", 4, -0.1, 0.1},
    };
    for (int c = 0; c < 2; c++) {
        for (int j = 0; j < 4; j++) lo[j] = 1e9, hi[j] = -1e9;
        int ok = 1;
        for (int i = 0; i < n; i++) {
            calf_env env = make_env(cases[c].name, (uint64_t)i * 7919u, (uint64_t)i);
            float obs[6];
            calf_env_reset(&env, obs);
            const double *s = env.state;
            for (int j = 0; j < cases[c].dims; j++) {
                /* Acrobot's draws are rounded to float32, which may land on 0.1f. */
                ok &= s[j] >= (float)cases[c].low && s[j] <= (float)cases[c].high;
                lo[j] = fmin(lo[j], s[j]);
                hi[j] = fmax(hi[j], s[j]);
            }
            calf_env_free(&env);
        }
        CHECK(ok);
        for (int j = 0; j < cases[c].dims; j++) {
            double span = cases[c].high - cases[c].low;
            CHECK(lo[j] < cases[c].low + 0.01 * span);
            CHECK(hi[j] > cases[c].high - 0.01 * span);
        }
    }

    /* Pendulum: theta in [-pi, pi), thdot in [-1, 1); observation consistent. */
    int ok = 1, near_pi = 0, near_mpi = 0;
    double mean_th = 0;
    for (int i = 0; i < n; i++) {
        calf_env env = make_env("Pendulum-v1", 11, (uint64_t)i);
        float obs[3];
        calf_env_reset(&env, obs);
        pendulum_state *s = env.state;
        ok &= s->th >= -PI && s->th < PI && s->thdot >= -1.0 && s->thdot < 1.0;
        ok &= obs[0] == (float)cos(s->th) && obs[1] == (float)sin(s->th) && obs[2] == (float)s->thdot;
        near_pi += s->th > PI - 0.05;
        near_mpi += s->th < -PI + 0.05;
        mean_th += s->th / n;
        calf_env_free(&env);
    }
    CHECK(ok);
    CHECK(near_pi > 0 && near_mpi > 0);
    CHECK_NEAR(mean_th, 0.0, 0.2);

    /* MountainCar(s): position in [-0.6, -0.4), velocity exactly 0. */
    const char *mc[] = {"MountainCar-v0", "MountainCarContinuous-v0"};
    for (int c = 0; c < 2; c++) {
        ok = 1;
        double pmin = 0, pmax = -1;
        for (int i = 0; i < n; i++) {
            calf_env env = make_env(mc[c], 5, (uint64_t)i);
            float obs[2];
            calf_env_reset(&env, obs);
            mountain_car_state *s = env.state;
            ok &= s->position >= -0.6 && s->position < -0.4 && s->velocity == 0.0;
            ok &= obs[0] == (float)s->position && obs[1] == 0.0f;
            pmin = fmin(pmin, s->position);
            pmax = fmax(pmax, s->position);
            calf_env_free(&env);
        }
        CHECK(ok);
        CHECK(pmin < -0.598 && pmax > -0.402);
    }

    /* Streams: same (seed, index) resets identically, a different index differently,
     * and successive resets of one env differ. */
    calf_env a = make_env("CartPole-v1", 17, 4), b = make_env("CartPole-v1", 17, 4),
             c = make_env("CartPole-v1", 17, 5);
    float oa[4], ob[4], oc[4], oa2[4];
    calf_env_reset(&a, oa);
    calf_env_reset(&b, ob);
    calf_env_reset(&c, oc);
    calf_env_reset(&a, oa2);
    CHECK(memcmp(oa, ob, sizeof oa) == 0);
    CHECK(memcmp(oa, oc, sizeof oa) != 0);
    CHECK(memcmp(oa, oa2, sizeof oa) != 0);
    calf_env_free(&a);
    calf_env_free(&b);
    calf_env_free(&c);
}

/* ---- registry --------------------------------------------------------------------- */

/* A one-dimensional continuous env that remembers the action it was given, to check
 * the registry and the clipping done by calf_env_step. */
typedef struct probe_state {
    double last_u[2];
    int steps;
} probe_state;

static void probe_reset(void *state, calf_rng *rng, float *obs) {
    probe_state *s = state;
    s->last_u[0] = s->last_u[1] = 0;
    s->steps = 0;
    obs[0] = (float)calf_rng_uniform_double(rng);
}

static int probe_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                      float *reward) {
    (void)rng;
    (void)action;
    probe_state *s = state;
    s->last_u[0] = u[0];
    s->last_u[1] = u[1];
    s->steps++;
    obs[0] = (float)s->steps;
    *reward = u[0] + u[1];
    return s->steps >= 3;
}

static const float probe_low[2] = {-1.0f, 0.0f}, probe_high[2] = {1.0f, 0.5f};
static const float flat_high[2] = {1.0f, 0.0f}; /* low == high in dimension 1 */

/* Byte hooks that are never called: the spec checks refuse the classes that carry them. */
static void u8_reset(void *state, calf_rng *rng, uint8_t *obs) { (void)state, (void)rng, (void)obs; }
static int u8_step(void *state, calf_rng *rng, int action, const float *u, uint8_t *obs,
                   float *reward) {
    (void)state, (void)rng, (void)action, (void)u, (void)obs, (void)reward;
    return 0;
}
static void u8_step_many(struct calf_env *envs, int n, const int *actions, const float *u,
                         uint8_t *obs, float *reward, uint8_t *terminated) {
    (void)envs, (void)n, (void)actions, (void)u, (void)obs, (void)reward, (void)terminated;
}

static const calf_env_class probe_class = {
    .spec = {.name = "Probe-v0",
             .obs_dim = 1,
             .action_dim = 2,
             .action_low = probe_low,
             .action_high = probe_high,
             .max_episode_steps = 10,
             .state_size = sizeof(probe_state)},
    .reset = probe_reset,
    .step = probe_step,
};

static void test_registry(void) {
    const char *builtin[] = {"CartPole-v1", "Pendulum-v1", "Acrobot-v1", "MountainCar-v0",
                             "MountainCarContinuous-v0", "CartPoleNoVel-v1", "PendulumNoVel-v1",
#if CALF_HAVE_MUJOCO
                             "InvertedPendulum-v4", "HalfCheetah-v4", "Hopper-v4", "Walker2d-v4",
                             "Ant-v4", "InvertedDoublePendulum-v4", "Swimmer-v4", "Reacher-v4",
                             "Pusher-v4", "Humanoid-v4", "HumanoidStandup-v4",
#endif
                             "MinAtar/Asterix-v0", "MinAtar/Asterix-v1", "MinAtar/Breakout-v0",
                             "MinAtar/Breakout-v1", "MinAtar/Freeway-v0", "MinAtar/Freeway-v1",
                             "MinAtar/Seaquest-v0", "MinAtar/Seaquest-v1",
                             "MinAtar/SpaceInvaders-v0", "MinAtar/SpaceInvaders-v1",
    };
    enum { NB = (int)(sizeof builtin / sizeof builtin[0]) };
    CHECK_INT_EQ(calf_env_count(), NB);
    for (int i = 0; i < NB; i++) {
        CHECK(calf_env_at(i) != NULL);
        if (calf_env_at(i)) CHECK_STR_EQ(calf_env_at(i)->spec.name, builtin[i]);
        CHECK(calf_env_find(builtin[i]) == calf_env_at(i));
    }
    CHECK(calf_env_at(-1) == NULL);
    CHECK(calf_env_at(NB) == NULL);
    CHECK(calf_env_find("cartpole-v1") == NULL); /* names are exact */
    CHECK(calf_env_find(NULL) == NULL);

    /* Specs of the built-ins (Gymnasium's spaces and time limits). */
    const calf_env_spec *s = &calf_env_find("CartPole-v1")->spec;
    CHECK(s->obs_dim == 4 && s->num_actions == 2 && s->action_dim == 0 && s->max_episode_steps == 500);
    s = &calf_env_find("Pendulum-v1")->spec;
    CHECK(s->obs_dim == 3 && s->num_actions == 0 && s->action_dim == 1 && s->max_episode_steps == 200);
    CHECK(s->action_low[0] == -2.0f && s->action_high[0] == 2.0f);
    s = &calf_env_find("Acrobot-v1")->spec;
    CHECK(s->obs_dim == 6 && s->num_actions == 3 && s->max_episode_steps == 500);
    s = &calf_env_find("MountainCar-v0")->spec;
    CHECK(s->obs_dim == 2 && s->num_actions == 3 && s->max_episode_steps == 200);
    s = &calf_env_find("MountainCarContinuous-v0")->spec;
    CHECK(s->obs_dim == 2 && s->action_dim == 1 && s->max_episode_steps == 999);
    CHECK(s->action_low[0] == -1.0f && s->action_high[0] == 1.0f);

    /* Unknown name: CALF_EINVAL naming it and listing the known names. */
    calf_env env;
    calf_error err;
    calf_error_clear(&err);
    CHECK_INT_EQ(calf_env_init(&env, "NoSuchEnv-v9", 0, 0, &err), CALF_EINVAL);
    CHECK_INT_EQ(err.status, CALF_EINVAL);
    CHECK(strstr(err.msg, "NoSuchEnv-v9") != NULL);
    CHECK(strstr(err.msg, "CartPole-v1") != NULL);
    CHECK(strstr(err.msg, "MountainCarContinuous-v0") != NULL);
    CHECK(env.state == NULL);
    calf_env_free(&env); /* safe after a failed init */
    calf_env_free(&env);
    /* A MuJoCo env in a build without MuJoCo: what the build did with it (turned off, or
     * not found and how to get it), not just "unknown". */
    int mj = calf_env_init(&env, "HalfCheetah-v4", 0, 0, &err);
#if CALF_HAVE_MUJOCO
    CHECK_INT_EQ(mj, CALF_OK);
#else
    CHECK_INT_EQ(mj, CALF_EINVAL);
    CHECK(strstr(err.msg, "HalfCheetah-v4") && strstr(err.msg, calf_feature_note("mujoco")));
    CHECK(strstr(err.msg, "turned off at build time") || strstr(err.msg, "libmujoco-dev"));
    CHECK(calf_env_lookup("Ant-v4", &err) == NULL && strstr(err.msg, "MuJoCo"));
#endif
    calf_env_free(&env);
    /* Every task of MJ_TASKS: built, or known as one that needs MuJoCo. */
#define MJ_NAME_(id, name, model) name,
    static const char *const mj_names[] = {MJ_TASKS(MJ_NAME_)};
#undef MJ_NAME_
    for (size_t i = 0; i < sizeof mj_names / sizeof mj_names[0]; i++) {
#if CALF_HAVE_MUJOCO
        CHECK(calf_env_find(mj_names[i]) != NULL);
#else
        CHECK(calf_env_lookup(mj_names[i], &err) == NULL);
        CHECK(strstr(err.msg, mj_names[i]) && strstr(err.msg, "needs MuJoCo"));
#endif
    }
    CHECK(calf_env_lookup("CartPole-v1", &err) == calf_env_find("CartPole-v1"));

    /* Duplicate of a built-in. */
    calf_env_class dup = probe_class;
    dup.spec.name = "CartPole-v1";
    CHECK_INT_EQ(calf_env_register(&dup, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "CartPole-v1") != NULL && strstr(err.msg, "already") != NULL);

    /* Bad specs. */
    calf_env_class bad = probe_class;
    bad.spec.name = "Bad-v0";
    bad.spec.obs_dim = 0;
    CHECK_INT_EQ(calf_env_register(&bad, &err), CALF_EINVAL);
    bad = probe_class, bad.spec.name = "Bad-v0", bad.spec.obs_dim = (1 << 20) + 1;
    CHECK_INT_EQ(calf_env_register(&bad, &err), CALF_EINVAL);
    bad = probe_class, bad.spec.name = "Bad-v0", bad.spec.action_low = NULL;
    CHECK_INT_EQ(calf_env_register(&bad, &err), CALF_EINVAL);
    bad = probe_class, bad.spec.name = "Bad-v0", bad.spec.save_size = 8; /* without save/load */
    CHECK_INT_EQ(calf_env_register(&bad, &err), CALF_EINVAL);
    bad = probe_class, bad.spec.name = "Bad-v0", bad.spec.reset_state_dim = 2; /* without the hook */
    CHECK_INT_EQ(calf_env_register(&bad, &err), CALF_EINVAL);
    bad = probe_class, bad.spec.name = "Bad-v0", bad.spec.num_actions = 2; /* both kinds */
    CHECK_INT_EQ(calf_env_register(&bad, &err), CALF_EINVAL);
    bad = probe_class, bad.spec.name = "Bad-v0", bad.spec.action_dim = 0; /* neither */
    CHECK_INT_EQ(calf_env_register(&bad, &err), CALF_EINVAL);
    bad = probe_class, bad.spec.name = "Bad-v0", bad.spec.action_high = flat_high;
    CHECK_INT_EQ(calf_env_register(&bad, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "Bad-v0") != NULL);
    bad = probe_class, bad.spec.name = "Bad-v0", bad.spec.max_episode_steps = 0;
    CHECK_INT_EQ(calf_env_register(&bad, &err), CALF_EINVAL);
    bad = probe_class, bad.spec.name = "Bad-v0", bad.step = NULL;
    CHECK_INT_EQ(calf_env_register(&bad, &err), CALF_EINVAL);
    bad = probe_class, bad.spec.name = "Bad v0";
    CHECK_INT_EQ(calf_env_register(&bad, &err), CALF_EINVAL);
    bad = probe_class, bad.spec.name = "";
    CHECK_INT_EQ(calf_env_register(&bad, &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_env_register(NULL, &err), CALF_EINVAL);
    /* A Dict's named parts (obs_dim 1 here): one after another from 0 to obs_dim, named
     * once each, of positive shapes and a known dtype, never with an image obs_shape. */
    static const calf_obs_part one[] = {{"x", {1, 0, 0}, CALF_DTYPE_F32, 0}};
    static const calf_obs_part gap[] = {{"x", {1, 0, 0}, CALF_DTYPE_F32, 1}};
    static const calf_obs_part big[] = {{"x", {2, 0, 0}, CALF_DTYPE_F32, 0}};
    static const calf_obs_part flat_img[] = {{"x", {1, 1, 0}, CALF_DTYPE_F32, 0}};
    static const calf_obs_part dtype[] = {{"x", {1, 0, 0}, 7, 0}};
    static const calf_obs_part noname[] = {{"", {1, 0, 0}, CALF_DTYPE_F32, 0}};
    struct {
        const calf_obs_part *parts;
        int n, shape0;
        const char *says;
    } part_cases[] = {
        {one, 0, 0, "num_obs_parts 0"},      {NULL, 1, 0, "num_obs_parts 1"},
        {one, 1, 1, "obs_shape all 0"},      {gap, 1, 0, "starts at 1, not at 0"},
        {big, 1, 0, "shape (2, 0, 0)"},      {flat_img, 1, 0, "shape (1, 1, 0)"},
        {dtype, 1, 0, "dtype 7"},            {noname, 1, 0, "has no name"},
    };
    for (size_t i = 0; i < sizeof part_cases / sizeof part_cases[0]; i++) {
        bad = probe_class, bad.spec.name = "Bad-v0";
        bad.spec.obs_parts = part_cases[i].parts, bad.spec.num_obs_parts = part_cases[i].n;
        if (part_cases[i].shape0) bad.spec.obs_shape[0] = bad.spec.obs_shape[1] =
                                      bad.spec.obs_shape[2] = 1;
        CHECK_INT_EQ(calf_env_register(&bad, &err), CALF_EINVAL);
        CHECK(strstr(err.msg, part_cases[i].says) != NULL);
    }
    static const calf_obs_part twice[] = {{"x", {1, 0, 0}, CALF_DTYPE_F32, 0},
                                          {"x", {1, 0, 0}, CALF_DTYPE_F32, 1}};
    bad = probe_class, bad.spec.name = "Bad-v0", bad.spec.obs_dim = 2;
    bad.spec.obs_parts = twice, bad.spec.num_obs_parts = 2;
    CHECK_INT_EQ(calf_env_register(&bad, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "name 'x' is obs_parts[0]'s too") != NULL);
    bad.spec.obs_parts = one, bad.spec.num_obs_parts = 1; /* 1 of obs_dim 2 */
    CHECK_INT_EQ(calf_env_register(&bad, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "obs_parts hold 1 values, not obs_dim 2") != NULL);
    CHECK_INT_EQ(calf_env_count(), NB); /* nothing was added */

    /* A custom class: registered, found, listed after the built-ins, usable. */
    CHECK_INT_EQ(calf_env_register(&probe_class, &err), CALF_OK);
    CHECK_INT_EQ(calf_env_count(), NB + 1);
    CHECK(calf_env_at(NB) == &probe_class);
    CHECK(calf_env_find("Probe-v0") == &probe_class);
    CHECK_INT_EQ(calf_env_register(&probe_class, &err), CALF_EINVAL); /* twice */
    char names[1024];
    calf_env_list_names(names, sizeof names);
    CHECK_STR_EQ(names, "CartPole-v1, Pendulum-v1, Acrobot-v1, MountainCar-v0, "
                        "MountainCarContinuous-v0, CartPoleNoVel-v1, PendulumNoVel-v1, "
#if CALF_HAVE_MUJOCO
                        "InvertedPendulum-v4, HalfCheetah-v4, Hopper-v4, Walker2d-v4, Ant-v4, "
                        "InvertedDoublePendulum-v4, Swimmer-v4, Reacher-v4, Pusher-v4, "
                        "Humanoid-v4, HumanoidStandup-v4, "
#endif
                        "MinAtar/Asterix-v0, MinAtar/Asterix-v1, MinAtar/Breakout-v0, "
                        "MinAtar/Breakout-v1, MinAtar/Freeway-v0, MinAtar/Freeway-v1, "
                        "MinAtar/Seaquest-v0, MinAtar/Seaquest-v1, MinAtar/SpaceInvaders-v0, "
                        "MinAtar/SpaceInvaders-v1, "
                        "Probe-v0");
    char small[16];
    calf_env_list_names(small, sizeof small);
    CHECK(strlen(small) < sizeof small);

    CHECK_INT_EQ(calf_env_init(&env, "Probe-v0", 1, 2, &err), CALF_OK);
    float obs[1], r;
    int term, trunc;
    calf_env_reset(&env, obs);
    CHECK(obs[0] >= 0.0f && obs[0] < 1.0f);
    float u[2] = {3.0f, -0.25f};
    calf_env_step(&env, 0, u, obs, &r, &term, &trunc);
    probe_state *ps = env.state;
    CHECK(ps->last_u[0] == 1.0 && ps->last_u[1] == 0.0); /* each dim to its own bounds */
    CHECK(u[0] == 3.0f && u[1] == -0.25f);              /* caller's buffer untouched */
    CHECK(r == 1.0f);
    u[0] = -0.5f, u[1] = 0.75f;
    calf_env_step(&env, 0, u, obs, &r, &term, &trunc);
    CHECK(ps->last_u[0] == -0.5 && ps->last_u[1] == 0.5);
    u[0] = NAN;
    calf_env_step(&env, 0, u, obs, &r, &term, &trunc);
    CHECK(isnan(ps->last_u[0])); /* NaN is not silently turned into a bound */
    CHECK_INT_EQ(term, 1);
    CHECK_INT_EQ(env.elapsed_steps, 3);
    calf_env_free(&env);
}

/* The hooks a MultiDiscrete masked class has (env ABI 3's action side). */
static int md_step(void *state, calf_rng *rng, const int *actions, float *obs, float *reward) {
    (void)state, (void)rng, (void)actions;
    obs[0] = 0, *reward = 0;
    return 1;
}
static void md_mask(const void *state, uint8_t *mask) {
    (void)state;
    memset(mask, 1, 9);
}

/* The spaces since ABI 3: MinAtar's (10, 10, C) bytes, and each field's check (a spec the
 * check would let through if it were missing is refused, naming the field). */
static void test_spaces(void) {
    static const struct { const char *name; int c; } games[] = {
        {"MinAtar/Asterix-v0", 4},  {"MinAtar/Breakout-v1", 4},      {"MinAtar/Freeway-v0", 7},
        {"MinAtar/Seaquest-v1", 10}, {"MinAtar/SpaceInvaders-v0", 6},
    };
    for (size_t i = 0; i < sizeof games / sizeof games[0]; i++) {
        const calf_env_spec *s = &calf_env_find(games[i].name)->spec;
        CHECK(s->obs_shape[0] == 10 && s->obs_shape[1] == 10 && s->obs_shape[2] == games[i].c);
        CHECK(s->obs_dtype == CALF_DTYPE_U8 && s->obs_high == 1);
        CHECK(s->num_action_dims == 0 && s->action_mask == 0);
    }
    const calf_env_spec *cp = &calf_env_find("CartPole-v1")->spec; /* all 0: as before */
    CHECK(cp->obs_shape[0] == 0 && cp->obs_shape[1] == 0 && cp->obs_shape[2] == 0);
    CHECK(cp->obs_dtype == CALF_DTYPE_F32 && cp->obs_high == 0 && cp->num_action_dims == 0);

    static const int nvec[3] = {3, 2, 4}, nvec_zero[2] = {9, 0};
    static calf_env_class img; /* static: the registry keeps the pointer */
    img = probe_class;
    img.spec.name = "Image-v0", img.spec.obs_dim = 2 * 3 * 5;
    img.spec.obs_shape[0] = 2, img.spec.obs_shape[1] = 3, img.spec.obs_shape[2] = 5;
    img.spec.obs_dtype = CALF_DTYPE_U8;
    calf_env_class md = probe_class;
    md.spec.name = "MultiDiscrete-v0", md.spec.action_dim = 0, md.spec.action_low = NULL;
    md.spec.action_high = NULL, md.spec.num_actions = 9;
    md.spec.num_action_dims = 3, md.spec.action_nvec = nvec, md.spec.action_mask = 1;
    md.step_multi = md_step, md.action_mask = md_mask;
    struct {
        const char *why, *field;
        calf_env_class cls;
    } bad[20];
    int nb = 0;
#define BAD_(WHY, FIELD, BASE, EDIT) \
    do {                             \
        bad[nb].why = WHY;           \
        bad[nb].field = FIELD;       \
        bad[nb].cls = BASE;          \
        calf_env_class *c = &bad[nb++].cls; \
        c->spec.name = "BadSpace-v0";       \
        EDIT;                               \
    } while (0)
    BAD_("a product other than obs_dim", "obs_shape", img, c->spec.obs_shape[2] = 4);
    BAD_("a partial shape", "obs_shape", img, (c->spec.obs_shape[2] = 0, c->spec.obs_dim = 6));
    BAD_("a negative extent", "obs_shape", img,
         (c->spec.obs_shape[0] = -2, c->spec.obs_shape[1] = -3));
    BAD_("an unknown dtype", "obs_dtype", img, c->spec.obs_dtype = 2);
    BAD_("a high over 255", "obs_high", img, c->spec.obs_high = 256);
    BAD_("a high on floats", "obs_high", probe_class, c->spec.obs_high = 1);
    BAD_("sub-actions of continuous actions", "num_action_dims", probe_class,
         (c->spec.num_action_dims = 2, c->spec.action_nvec = nvec));
    BAD_("a negative count", "num_action_dims", md, c->spec.num_action_dims = -1);
    BAD_("no sizes", "action_nvec", md, c->spec.action_nvec = NULL);
    BAD_("sizes that do not sum to num_actions", "action_nvec", md, c->spec.num_actions = 10);
    BAD_("a size 0", "action_nvec", md, (c->spec.num_action_dims = 2, c->spec.action_nvec = nvec_zero));
    BAD_("a mask of continuous actions", "action_mask", probe_class, c->spec.action_mask = 1);
    BAD_("a mask flag other than 0/1", "action_mask", md, c->spec.action_mask = 2);
    /* ABI 4's byte hooks: in pairs, and only for a byte observation */
    BAD_("reset_u8 without step_u8", "step_u8", img, c->reset_u8 = u8_reset);
    BAD_("step_many_u8 alone", "step_u8", img, c->step_many_u8 = u8_step_many);
    BAD_("byte hooks on floats", "CALF_DTYPE_U8", probe_class,
         (c->reset_u8 = u8_reset, c->step_u8 = u8_step));
#undef BAD_
    calf_error err;
    int before = calf_env_count();
    for (int i = 0; i < nb; i++) {
        calf_error_clear(&err);
        int rc = calf_env_register(&bad[i].cls, &err);
        CHECK_INT_EQ(rc, CALF_EINVAL);
        if (rc != CALF_EINVAL || !strstr(err.msg, bad[i].field) || !strstr(err.msg, "BadSpace-v0"))
            fprintf(stderr, "  %s: not refused naming %s (%s)\n", bad[i].why, bad[i].field, err.msg);
        CHECK(strstr(err.msg, bad[i].field) != NULL);
    }
    CHECK_INT_EQ(calf_env_count(), before);
    /* the good ones register; the action side's hooks go with their fields */
    calf_env_class nohook = md;
    nohook.spec.name = "BadSpace-v0", nohook.step_multi = NULL;
    CHECK_INT_EQ(calf_env_register(&nohook, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "step_multi") != NULL);
    nohook = md, nohook.spec.name = "BadSpace-v0", nohook.action_mask = NULL;
    CHECK_INT_EQ(calf_env_register(&nohook, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "action_mask hook") != NULL);
    CHECK_INT_EQ(calf_env_register(&img, &err), CALF_OK);
    static calf_env_class md_kept;
    md_kept = md;
    CHECK_INT_EQ(calf_env_register(&md_kept, &err), CALF_OK);
    CHECK_INT_EQ(calf_env_count(), before + 2);
    /* the ABI-2 reading happens only while the loader runs an ABI-2 plug-in: a program's own
     * class keeps its pointer (no copy) */
    CHECK(calf_env_find("Image-v0") == &img);
}

int main(void) {
    test_cartpole_dynamics();
    test_cartpole_thresholds();
    test_pendulum_dynamics();
    test_acrobot_dynamics();
    test_mountain_car_dynamics();
    test_mountain_car_continuous_dynamics();
    test_novel();
    test_step_many();
    test_truncation();
    test_reset_distributions();
    test_registry();
    test_spaces();
    return test_report("test_envs");
}
