/* envs.h: the built-in environment classes (Gymnasium classic control, and MuJoCo
 * locomotion where the build has it) and the classic ones' plain-data states. The
 * states are exposed here, not in the public header, so tests can place an env in an
 * exact start state; users only see state_size bytes. */
#ifndef CALF_ENVS_H
#define CALF_ENVS_H

#include <stdbool.h>
#include <stddef.h>

#include "calf/env.h"

typedef struct cartpole_state {
    double x, x_dot, theta, theta_dot;
} cartpole_state;

typedef struct pendulum_state {
    double th, thdot;
} pendulum_state;

typedef struct acrobot_state {
    double theta1, theta2, dtheta1, dtheta2;
} acrobot_state;

/* Shared by MountainCar-v0 and MountainCarContinuous-v0. */
typedef struct mountain_car_state {
    double position, velocity;
} mountain_car_state;

extern const calf_env_class cartpole_class;                /* CartPole-v1 */
extern const calf_env_class pendulum_class;                /* Pendulum-v1 */
extern const calf_env_class acrobot_class;                 /* Acrobot-v1 */
extern const calf_env_class mountain_car_class;            /* MountainCar-v0 */
extern const calf_env_class mountain_car_continuous_class; /* MountainCarContinuous-v0 */

/* What one more env of cls takes, for a class that can say: the bytes it maps and, of
 * those, the bytes it touches (MuJoCo's classes: their mjData, the stack as deep as a reset
 * and 8 steps used it); true then. false for a class that cannot say (the others: plain
 * data, plug-ins), whose caller measures instead. */
bool env_class_measure(const calf_env_class *cls, size_t *mapped, size_t *touched);

#if CALF_HAVE_MUJOCO
/* MuJoCo locomotion (src/envs/mj_*.c); their state is native (envs/mj_env.h). */
extern const calf_env_class inverted_pendulum_class; /* InvertedPendulum-v4 */
extern const calf_env_class half_cheetah_class;      /* HalfCheetah-v4 */
extern const calf_env_class hopper_class;            /* Hopper-v4 */
extern const calf_env_class walker2d_class;          /* Walker2d-v4 */
extern const calf_env_class ant_class;               /* Ant-v4 */
extern const calf_env_class inverted_double_pendulum_class; /* InvertedDoublePendulum-v4 */
extern const calf_env_class swimmer_class;           /* Swimmer-v4 */
extern const calf_env_class reacher_class;           /* Reacher-v4 */
extern const calf_env_class pusher_class;            /* Pusher-v4 */
extern const calf_env_class humanoid_class;          /* Humanoid-v4 */
extern const calf_env_class humanoid_standup_class;  /* HumanoidStandup-v4 */
#endif

#endif
