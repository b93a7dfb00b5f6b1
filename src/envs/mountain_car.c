/* mountain_car.c: MountainCar-v0 (Moore 1990) as Gymnasium defines it: push left, none
 * or right (force 0.001) against gravity 0.0025 on a cos(3x) valley, inelastic wall at
 * x = -1.2, reward -1 per step, terminated at x >= 0.5 with velocity >= 0. */
#include "envs/envs.h"

#include <math.h>

#include "base/cmath.h"

static const double min_position = -1.2;
static const double max_position = 0.6;
static const double max_speed = 0.07;
static const double goal_position = 0.5;
static const double goal_velocity = 0.0;
static const double force = 0.001;
static const double gravity = 0.0025;

/* np.clip keeps a NaN, so compare rather than fmin/fmax. */
static double clip(double x, double lo, double hi) {
    return x < lo ? lo : x > hi ? hi : x;
}

static void mountain_car_observe(const void *state, float *obs) {
    const mountain_car_state *s = state;
    obs[0] = (float)s->position;
    obs[1] = (float)s->velocity;
}

static void mountain_car_reset(void *state, calf_rng *rng, float *obs) {
    mountain_car_state *s = state;
    s->position = calf_rng_uniform_range(rng, -0.6, -0.4);
    s->velocity = 0.0;
    mountain_car_observe(s, obs);
}

static int mountain_car_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                             float *reward) {
    (void)rng;
    (void)u;
    mountain_car_state *s = state;
    double position = s->position, velocity = s->velocity;
    velocity = velocity + ((action - 1) * force + cm_cos(3 * position) * (-gravity));
    velocity = clip(velocity, -max_speed, max_speed);
    position = position + velocity;
    position = clip(position, min_position, max_position);
    if (position == min_position && velocity < 0) velocity = 0.0;
    s->position = position;
    s->velocity = velocity;
    mountain_car_observe(s, obs);
    *reward = -1.0f;
    return position >= goal_position && velocity >= goal_velocity;
}

const calf_env_class mountain_car_class = {
    .spec = {.name = "MountainCar-v0",
             .obs_dim = 2,
             .num_actions = 3,
             .action_dim = 0,
             .max_episode_steps = 200,
             .state_size = sizeof(mountain_car_state)},
    .reset = mountain_car_reset,
    .step = mountain_car_step,
    .observe = mountain_car_observe,
};
