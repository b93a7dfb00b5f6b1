/* envs.h: the built-in environment classes (Gymnasium classic control, and MuJoCo
 * locomotion where the build has it: MJ_TASKS, their one list) and the classic ones'
 * plain-data states, exposed here, not in the public header, so tests can place an env in
 * an exact start state; users only see state_size bytes. */
#ifndef CALF_ENVS_H
#define CALF_ENVS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
/* The same with the velocities masked (novel.c): CartPoleNoVel-v1, PendulumNoVel-v1 */
extern const calf_env_class cartpole_novel_class, pendulum_novel_class;

/* calf_env_reset and calf_env_step (one Discrete action, or u for a continuous one) for a
 * class with the byte hooks (reset_u8, step_u8): the observation written as obs_dim
 * bytes, the same values, draws and state as the float calls. */
void env_reset_u8(calf_env *env, uint8_t *obs);
void env_step_u8(calf_env *env, int action, const float *u, uint8_t *obs, float *reward,
                 int *terminated, int *truncated);

/* What one more env of cls takes, for a class that can say: the bytes it maps and, of
 * those, the bytes it touches (MuJoCo's classes: their mjData, the stack as deep as a reset
 * and 8 steps used it); true then. false for a class that cannot say (the others: plain
 * data, plug-ins), whose caller measures instead. */
bool env_class_measure(const calf_env_class *cls, size_t *mapped, size_t *touched);

/* The MuJoCo tasks (Gymnasium's v4 envs), one row each, in the order the registry lists
 * them; what else names every task derives from here: the class declarations below, the
 * registry's entries and the names a build without MuJoCo knows (env.c), the embedded
 * models' declarations (mj_env.h). Adding a task is its file src/envs/mj_<task>.c and a
 * row. X(ID, NAME, MODEL): the class ID##_class, defined in the task's file; NAME, its
 * spec.name (test_mujoco checks the two agree); MODEL, its MJCF file src/envs/MODEL.xml,
 * which cmake/embed.cmake embeds as mjcf_##MODEL. Here, not in mj_env.h, because a build
 * without MuJoCo still needs the names. */
#define MJ_TASKS(X)                                                                           \
    X(inverted_pendulum, "InvertedPendulum-v4", inverted_pendulum_v4)                         \
    X(half_cheetah, "HalfCheetah-v4", half_cheetah_v4)                                        \
    X(hopper, "Hopper-v4", hopper_v4)                                                         \
    X(walker2d, "Walker2d-v4", walker2d_v4)                                                   \
    X(ant, "Ant-v4", ant_v4)                                                                  \
    X(inverted_double_pendulum, "InvertedDoublePendulum-v4", inverted_double_pendulum_v4)     \
    X(swimmer, "Swimmer-v4", swimmer_v4)                                                      \
    X(reacher, "Reacher-v4", reacher_v4)                                                      \
    X(pusher, "Pusher-v4", pusher_v4)                                                         \
    X(humanoid, "Humanoid-v4", humanoid_v4)                                                   \
    X(humanoid_standup, "HumanoidStandup-v4", humanoidstandup_v4)

#define MJ_TASK_COUNT_(id, name, model) +1
enum { MJ_NUM_TASKS = 0 MJ_TASKS(MJ_TASK_COUNT_) };

/* MinAtar's games (src/envs/minatar_*.c): -v0 the full action set, -v1 the minimal one. */
extern const calf_env_class minatar_asterix_v0_class, minatar_asterix_v1_class,
    minatar_breakout_v0_class, minatar_breakout_v1_class, minatar_freeway_v0_class,
    minatar_freeway_v1_class, minatar_seaquest_v0_class, minatar_seaquest_v1_class,
    minatar_space_invaders_v0_class, minatar_space_invaders_v1_class;
#define MINATAR_BUILTINS                                                                   \
    &minatar_asterix_v0_class, &minatar_asterix_v1_class, &minatar_breakout_v0_class,      \
        &minatar_breakout_v1_class, &minatar_freeway_v0_class, &minatar_freeway_v1_class,  \
        &minatar_seaquest_v0_class, &minatar_seaquest_v1_class,                            \
        &minatar_space_invaders_v0_class, &minatar_space_invaders_v1_class

#if CALF_HAVE_MUJOCO
/* The tasks' classes (src/envs/mj_*.c); their state is native (envs/mj_env.h). */
#define MJ_TASK_CLASS_DECL_(id, name, model) extern const calf_env_class id##_class;
MJ_TASKS(MJ_TASK_CLASS_DECL_)
#endif

#endif
