/* pendulum.c: Pendulum-v1 (inverted pendulum swing-up) as Gymnasium defines it:
 * g = 10, m = l = 1, dt = 0.05, torque in [-2, 2], speed clipped to [-8, 8], semi-implicit
 * Euler, cost from the pre-step state, never terminates (200-step time limit). */
#include "envs/envs.h"

#include <math.h>

#include "base/cmath.h"

#define PD_PI 3.14159265358979323846

static const double max_speed = 8.0;
static const double max_torque = 2.0;
static const double dt = 0.05;
static const double g = 10.0;
static const double m = 1.0;
static const double l = 1.0;

/* ((x + pi) mod 2 pi) - pi with a floored modulo (the sign of the divisor), as
 * NumPy's `%` computes it: fmod, then + 2 pi for a negative remainder. fmod is slow
 * and the angle is usually within a turn or two, so those cases are done directly
 * with the same result: fmod(y) is y itself for |y| < 2 pi, and y - 2 pi for y in
 * [2 pi, 4 pi], a subtraction that is exact there (Sterbenz). */
static double angle_normalize(double x) {
    const double two_pi = 2 * PD_PI;
    double y = x + PD_PI, r;
    if (y >= 0.0 && y < two_pi)
        r = y;
    else if (y >= two_pi && y <= 2 * two_pi)
        r = y - two_pi;
    else if (y < 0.0 && y > -two_pi)
        r = y + two_pi;
    else {
        r = fmod(y, two_pi);
        if (r != 0.0) {
            if (r < 0.0) r += two_pi;
        } else {
            r = 0.0; /* copysign(0, divisor): +0 */
        }
    }
    return r - PD_PI;
}

static void pendulum_observe(const void *state, float *obs) {
    const pendulum_state *s = state;
    obs[0] = (float)cm_cos(s->th);
    obs[1] = (float)cm_sin(s->th);
    obs[2] = (float)s->thdot;
}

static void pendulum_reset(void *state, calf_rng *rng, float *obs) {
    pendulum_state *s = state;
    s->th = calf_rng_uniform_range(rng, -PD_PI, PD_PI);
    s->thdot = calf_rng_uniform_range(rng, -1.0, 1.0);
    pendulum_observe(s, obs);
}

static int pendulum_step(void *state, calf_rng *rng, int action, const float *u_in, float *obs,
                         float *reward) {
    (void)rng;
    (void)action;
    pendulum_state *s = state;
    /* calf_env_step already clipped to the class bounds; clip again so a direct
     * caller of the class function gets Gymnasium's behaviour too. */
    double u = u_in[0];
    if (u < -max_torque) u = -max_torque;
    if (u > max_torque) u = max_torque;
    double th = s->th, thdot = s->thdot;
    double an = angle_normalize(th);
    double costs = an * an + 0.1 * (thdot * thdot) + 0.001 * (u * u);
    double newthdot = thdot + (3 * g / (2 * l) * cm_sin(th) + 3.0 / (m * (l * l)) * u) * dt;
    if (newthdot < -max_speed) newthdot = -max_speed;
    if (newthdot > max_speed) newthdot = max_speed;
    s->th = th + newthdot * dt;
    s->thdot = newthdot;
    pendulum_observe(s, obs);
    *reward = (float)-costs;
    return 0;
}

const calf_env_class pendulum_class = {
    .spec = {.name = "Pendulum-v1",
             .obs_dim = 3,
             .num_actions = 0,
             .action_dim = 1,
             .action_low = (const float[]){-2.0f},
             .action_high = (const float[]){2.0f},
             .max_episode_steps = 200,
             .state_size = sizeof(pendulum_state)},
    .reset = pendulum_reset,
    .step = pendulum_step,
    .observe = pendulum_observe,
};
