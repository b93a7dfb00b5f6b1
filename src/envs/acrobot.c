/* acrobot.c: Acrobot-v1 as Gymnasium defines it (Sutton & Barto's book dynamics): two
 * links, torque -1/0/+1 on the middle joint, one RK4 step over dt = 0.2 s, angles
 * wrapped to [-pi, pi], velocities clipped to 4 pi and 9 pi, reward -1 until the tip
 * rises above height 1 (then 0 and terminated), no torque noise. */
#include "envs/envs.h"

#include <math.h>

#include "base/cmath.h"

#define AC_PI 3.14159265358979323846

static const double dt = 0.2;
static const double link_length_1 = 1.0;
static const double link_mass_1 = 1.0;
static const double link_mass_2 = 1.0;
static const double link_com_pos_1 = 0.5;
static const double link_com_pos_2 = 0.5;
static const double link_moi = 1.0;
static const double max_vel_1 = 4 * AC_PI;
static const double max_vel_2 = 9 * AC_PI;

/* Time derivative of (theta1, theta2, dtheta1, dtheta2) under torque a. The
 * expressions keep the published operation order so results match bit for bit. */
static void dsdt(const double s[4], double a, double ds[4]) {
    const double m1 = link_mass_1, m2 = link_mass_2, l1 = link_length_1;
    const double lc1 = link_com_pos_1, lc2 = link_com_pos_2;
    const double I1 = link_moi, I2 = link_moi, g = 9.8;
    double theta1 = s[0], theta2 = s[1], dtheta1 = s[2], dtheta2 = s[3];
    double cos2 = cm_cos(theta2), sin2 = cm_sin(theta2);
    double d1 = m1 * (lc1 * lc1) + m2 * (l1 * l1 + lc2 * lc2 + 2 * l1 * lc2 * cos2) + I1 + I2;
    double d2 = m2 * (lc2 * lc2 + l1 * lc2 * cos2) + I2;
    double phi2 = m2 * lc2 * g * cm_cos(theta1 + theta2 - AC_PI / 2.0);
    double phi1 = -m2 * l1 * lc2 * (dtheta2 * dtheta2) * sin2 -
                  2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin2 +
                  (m1 * lc1 + m2 * l1) * g * cm_cos(theta1 - AC_PI / 2) + phi2;
    double ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * (dtheta1 * dtheta1) * sin2 - phi2) /
                      (m2 * (lc2 * lc2) + I2 - (d2 * d2) / d1);
    double ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
    ds[0] = dtheta1;
    ds[1] = dtheta2;
    ds[2] = ddtheta1;
    ds[3] = ddtheta2;
}

/* Wrap into [lo, hi] by whole turns, as Gymnasium's wrap() loops. One step's
 * velocity moves an angle by well under a turn; the fmod only guards the loops
 * against absurd (e.g. hand-edited) states, and an infinity becomes NaN. */
static double wrap(double x, double lo, double hi) {
    double diff = hi - lo;
    if (!(fabs(x) < 64 * diff)) x = fmod(x, diff);
    while (x > hi) x = x - diff;
    while (x < lo) x = x + diff;
    return x;
}

/* min(max(x, lo), hi) with Python's NaN behaviour (a NaN passes through). */
static double bound(double x, double lo, double hi) {
    return x < lo ? lo : x > hi ? hi : x;
}

static void acrobot_observe(const void *state, float *obs) {
    const acrobot_state *s = state;
    obs[0] = (float)cm_cos(s->theta1);
    obs[1] = (float)cm_sin(s->theta1);
    obs[2] = (float)cm_cos(s->theta2);
    obs[3] = (float)cm_sin(s->theta2);
    obs[4] = (float)s->dtheta1;
    obs[5] = (float)s->dtheta2;
}

static void acrobot_reset(void *state, calf_rng *rng, float *obs) {
    acrobot_state *s = state;
    /* Gymnasium stores the initial state as float32, so round each draw to float. */
    s->theta1 = (float)calf_rng_uniform_range(rng, -0.1, 0.1);
    s->theta2 = (float)calf_rng_uniform_range(rng, -0.1, 0.1);
    s->dtheta1 = (float)calf_rng_uniform_range(rng, -0.1, 0.1);
    s->dtheta2 = (float)calf_rng_uniform_range(rng, -0.1, 0.1);
    acrobot_observe(s, obs);
}

static int acrobot_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                        float *reward) {
    (void)rng;
    (void)u;
    static const double avail_torque[3] = {-1.0, 0.0, 1.0};
    acrobot_state *st = state;
    double a = avail_torque[action];
    double y0[4] = {st->theta1, st->theta2, st->dtheta1, st->dtheta2};
    double k1[4], k2[4], k3[4], k4[4], y[4];
    const double dt2 = dt / 2.0;
    dsdt(y0, a, k1);
    for (int i = 0; i < 4; i++) y[i] = y0[i] + dt2 * k1[i];
    dsdt(y, a, k2);
    for (int i = 0; i < 4; i++) y[i] = y0[i] + dt2 * k2[i];
    dsdt(y, a, k3);
    for (int i = 0; i < 4; i++) y[i] = y0[i] + dt * k3[i];
    dsdt(y, a, k4);
    double ns[4];
    for (int i = 0; i < 4; i++)
        ns[i] = y0[i] + dt / 6.0 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);
    st->theta1 = wrap(ns[0], -AC_PI, AC_PI);
    st->theta2 = wrap(ns[1], -AC_PI, AC_PI);
    st->dtheta1 = bound(ns[2], -max_vel_1, max_vel_1);
    st->dtheta2 = bound(ns[3], -max_vel_2, max_vel_2);
    acrobot_observe(st, obs);
    int terminated = -cm_cos(st->theta1) - cm_cos(st->theta2 + st->theta1) > 1.0;
    *reward = terminated ? 0.0f : -1.0f;
    return terminated;
}

const calf_env_class acrobot_class = {
    .spec = {.name = "Acrobot-v1",
             .obs_dim = 6,
             .num_actions = 3,
             .action_dim = 0,
             .max_episode_steps = 500,
             .state_size = sizeof(acrobot_state)},
    .reset = acrobot_reset,
    .step = acrobot_step,
    .observe = acrobot_observe,
};
