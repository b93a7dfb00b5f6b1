/* cartpole.c: CartPole-v1 (Barto, Sutton & Anderson 1983) as Gymnasium defines it:
 * explicit Euler over tau = 0.02 s, push of +-10 N, reward 1 on every step including
 * the terminating one, termination outside |x| <= 2.4 or |theta| <= 12 degrees. */
#include "envs/envs.h"

#include <math.h>

#include "base/cmath.h"

#define CP_PI 3.14159265358979323846

/* Constants written as Gymnasium derives them so each rounds to the same double. */
static const double gravity = 9.8;
static const double masscart = 1.0;
static const double masspole = 0.1;
static const double length = 0.5; /* half the pole's length */
static const double force_mag = 10.0;
static const double tau = 0.02;
static const double x_threshold = 2.4;

static void cartpole_observe(const void *state, float *obs) {
    const cartpole_state *s = state;
    obs[0] = (float)s->x;
    obs[1] = (float)s->x_dot;
    obs[2] = (float)s->theta;
    obs[3] = (float)s->theta_dot;
}

static void cartpole_reset(void *state, calf_rng *rng, float *obs) {
    cartpole_state *s = state;
    s->x = calf_rng_uniform_range(rng, -0.05, 0.05);
    s->x_dot = calf_rng_uniform_range(rng, -0.05, 0.05);
    s->theta = calf_rng_uniform_range(rng, -0.05, 0.05);
    s->theta_dot = calf_rng_uniform_range(rng, -0.05, 0.05);
    cartpole_observe(s, obs);
}

/* The published accelerations for one state; shared by the single and the batched
 * step so both produce the same bits. Operation order follows the published
 * expressions (the build disables FMA contraction; SIMD lanes round like scalars). */
static inline void cartpole_accel(double theta_dot, double force, double sintheta,
                                  double costheta, double *thetaacc, double *xacc) {
    const double total_mass = masspole + masscart;
    const double polemass_length = masspole * length;
    double temp = (force + polemass_length * (theta_dot * theta_dot) * sintheta) / total_mass;
    double ta = (gravity * sintheta - costheta * temp) /
                (length * (4.0 / 3.0 - masspole * (costheta * costheta) / total_mass));
    *thetaacc = ta;
    *xacc = temp - polemass_length * ta * costheta / total_mass;
}

static inline int cartpole_terminated(double x, double theta) {
    const double theta_threshold = 12 * 2 * CP_PI / 360;
    return (x < -x_threshold) | (x > x_threshold) | (theta < -theta_threshold) |
           (theta > theta_threshold);
}

static int cartpole_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                         float *reward) {
    (void)rng;
    (void)u;
    cartpole_state *s = state;
    double thetaacc, xacc;
    cartpole_accel(s->theta_dot, action == 1 ? force_mag : -force_mag, cm_sin(s->theta),
                   cm_cos(s->theta), &thetaacc, &xacc);
    s->x = s->x + tau * s->x_dot;
    s->x_dot = s->x_dot + tau * xacc;
    s->theta = s->theta + tau * s->theta_dot;
    s->theta_dot = s->theta_dot + tau * thetaacc;
    cartpole_observe(s, obs);
    *reward = 1.0f;
    return cartpole_terminated(s->x, s->theta);
}

/* Batched: gather a group of envs into arrays, make their cm_sin/cm_cos calls back to back,
 * then run the arithmetic as loops over the group, which the compiler turns into
 * SIMD across envs (each lane rounds exactly as the scalar code), so the divider
 * and the calls of independent envs overlap instead of queueing. */
static void cartpole_step_many(calf_env *envs, int n, const int *actions, const float *u,
                               float *obs, float *reward, uint8_t *terminated) {
    (void)u;
    enum { GROUP = 8 };
    for (int b = 0; b < n; b += GROUP) {
        int m = n - b < GROUP ? n - b : GROUP;
        /* Zeroed so the SIMD loops over the whole group never read garbage lanes
         * when n is not a multiple of GROUP. */
        double x[GROUP] = {0}, xd[GROUP] = {0}, th[GROUP] = {0}, thd[GROUP] = {0}, f[GROUP] = {0};
        double sn[GROUP] = {0}, cs[GROUP] = {0}, ta[GROUP], xa[GROUP];
        for (int k = 0; k < m; k++) {
            const cartpole_state *s = envs[b + k].state;
            x[k] = s->x, xd[k] = s->x_dot, th[k] = s->theta, thd[k] = s->theta_dot;
            f[k] = actions[b + k] == 1 ? force_mag : -force_mag;
        }
        for (int k = 0; k < m; k++) {
            sn[k] = cm_sin(th[k]);
            cs[k] = cm_cos(th[k]);
        }
        for (int k = 0; k < GROUP; k++) cartpole_accel(thd[k], f[k], sn[k], cs[k], &ta[k], &xa[k]);
        for (int k = 0; k < GROUP; k++) {
            x[k] = x[k] + tau * xd[k];
            xd[k] = xd[k] + tau * xa[k];
            th[k] = th[k] + tau * thd[k];
            thd[k] = thd[k] + tau * ta[k];
        }
        for (int k = 0; k < m; k++) {
            int i = b + k;
            cartpole_state *s = envs[i].state;
            s->x = x[k], s->x_dot = xd[k], s->theta = th[k], s->theta_dot = thd[k];
            cartpole_observe(s, obs + 4 * i);
            reward[i] = 1.0f;
            terminated[i] = (uint8_t)cartpole_terminated(x[k], th[k]);
        }
    }
}

const calf_env_class cartpole_class = {
    .spec = {.name = "CartPole-v1",
             .obs_dim = 4,
             .num_actions = 2,
             .action_dim = 0,
             .max_episode_steps = 500,
             .state_size = sizeof(cartpole_state)},
    .reset = cartpole_reset,
    .step = cartpole_step,
    .observe = cartpole_observe,
    .step_many = cartpole_step_many,
};
