/* mountain_car_continuous.c: MountainCarContinuous-v0 as Gymnasium defines it: force
 * in [-1, 1] times power 0.0015, goal at x >= 0.45 with velocity >= 0 (reward +100),
 * minus 0.1 * action^2 every step; Gymnasium keeps the state in float32 between steps. */
#include "envs/envs.h"

#include <math.h>

#include "base/cmath.h"

static const double min_action = -1.0;
static const double max_action = 1.0;
static const double min_position = -1.2;
static const double max_position = 0.6;
static const double max_speed = 0.07;
static const double goal_position = 0.45;
static const double goal_velocity = 0.0;
static const double power = 0.0015;

static void mcc_observe(const void *state, float *obs) {
    const mountain_car_state *s = state;
    obs[0] = (float)s->position;
    obs[1] = (float)s->velocity;
}

static void mcc_reset(void *state, calf_rng *rng, float *obs) {
    mountain_car_state *s = state;
    s->position = calf_rng_uniform_range(rng, -0.6, -0.4);
    s->velocity = 0.0;
    mcc_observe(s, obs);
}

static int mcc_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                    float *reward) {
    (void)rng;
    (void)action;
    mountain_car_state *s = state;
    double a = u[0];
    /* min(max(a, -1), 1): a NaN passes through as in Python. */
    double f = a < min_action ? min_action : a > max_action ? max_action : a;
    double position = s->position, velocity = s->velocity;
    velocity = velocity + (f * power - 0.0025 * cm_cos(3 * position));
    if (velocity > max_speed) velocity = max_speed;
    if (velocity < -max_speed) velocity = -max_speed;
    position = position + velocity;
    if (position > max_position) position = max_position;
    if (position < min_position) position = min_position;
    if (position == min_position && velocity < 0) velocity = 0.0;
    int terminated = position >= goal_position && velocity >= goal_velocity;
    double r = terminated ? 100.0 : 0.0;
    r = r - a * a * 0.1;
    s->position = (float)position;
    s->velocity = (float)velocity;
    mcc_observe(s, obs);
    *reward = (float)r;
    return terminated;
}

const calf_env_class mountain_car_continuous_class = {
    .spec = {.name = "MountainCarContinuous-v0",
             .obs_dim = 2,
             .num_actions = 0,
             .action_dim = 1,
             .action_low = (const float[]){-1.0f},
             .action_high = (const float[]){1.0f},
             .max_episode_steps = 999,
             .state_size = sizeof(mountain_car_state)},
    .reset = mcc_reset,
    .step = mcc_step,
    .observe = mcc_observe,
};
