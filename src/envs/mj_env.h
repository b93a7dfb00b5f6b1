/* mj_env.h: what the MuJoCo envs (Gymnasium v4) share: one compiled model per process
 * and task (read-only), one mjData per env, Gymnasium's reset and frame-skipped step,
 * and the env's saved form for checkpoints. Each env's file (mj_half_cheetah.c, ...)
 * gives its constants, camera and health test; the locomotion step, reset and observation
 * are shared (mj_env_step_hook); the others (pendulums, Reacher, Pusher, Humanoid) have
 * their own step and observation over the shared reset, simulation and saved form. */
#ifndef CALF_MJ_ENV_H
#define CALF_MJ_ENV_H

#include <stdbool.h>
#include <stddef.h>

#include <mujoco/mujoco.h>

#include "calf/env.h"
#include "envs/envs.h"

/* mjData arrays besides the integration state that a task's observation or next reward
 * reads as the last step left them. mj_step computes them from the state before its last
 * integration, so the saved qpos and qvel cannot give them back: they are saved too, in
 * this order (mj_env_save), and a loaded env observes and rewards as the saved one. */
enum {
    MJ_KEEP_XPOS = 1 << 0,            /* xpos, nbody x 3 (Reacher, Pusher: body positions) */
    MJ_KEEP_QFRC_CONSTRAINT = 1 << 1, /* qfrc_constraint, nv (InvertedDoublePendulum) */
    MJ_KEEP_CINERT = 1 << 2,          /* cinert, nbody x 10 (the Humanoids) */
    MJ_KEEP_CVEL = 1 << 3,            /* cvel, nbody x 6 */
    MJ_KEEP_QFRC_ACTUATOR = 1 << 4,   /* qfrc_actuator, nv */
    MJ_KEEP_CFRC_EXT = 1 << 5,        /* cfrc_ext, nbody x 6 (mj_rnePostConstraint's) */
};

/* How Gymnasium draws a task (draw_mujoco.c follows it): its metadata render_fps and the
 * DEFAULT_CAMERA_CONFIG of its *_v4.py; zeros are Gymnasium's free camera, looking at the
 * geoms' median from the model's extent. */
typedef struct mj_camera {
    double fps;         /* metadata render_fps, 1 / dt (0: taken from the env's dt) */
    int track_body;     /* the body followed (its subtree's centre of mass); -1 or 0: none.
                           HalfCheetah, Ant and Swimmer follow their torso (body 1) as the
                           "track" camera of Gymnasium's models does; the others as their
                           config's trackbodyid says */
    double distance;    /* 0: the model's extent */
    bool has_lookat;
    double lookat[3];
    bool has_elevation;
    double elevation;
} mj_camera;

/* One task: its model and Gymnasium's constants for it. */
typedef struct mj_task {
    const char *name;     /* the class's name, for messages */
    const char *file;     /* the model's name in MuJoCo's virtual file system */
    const char *xml;      /* the MJCF text, embedded at build time (cmake/embed.cmake) */
    const int *xml_size;  /* its length in bytes */
    int frame_skip;       /* physics steps per env step */
    int nq, nv, nu;       /* what the compiled model must have (checked at load) */
    double qpos_noise;    /* reset: qpos = qpos0 + U(-qpos_noise, qpos_noise) */
    double qvel_noise;    /* reset: qvel = qvel_noise * N(0, 1), or U(-qvel_noise, qvel_noise) */
    int qvel_normal;      /* 1: the normal draw; 0: the uniform one */
    const char *track_body; /* a body whose xpos the reward reads (Ant's torso), or NULL */
    int track_mass_center;  /* 1: track_xy is the mass center's x, y (Humanoid's reward) */
    int post_constraint;    /* 1: mj_rnePostConstraint after the steps (fills cfrc_ext) */
    unsigned keep;          /* MJ_KEEP_* bits: derived arrays the saved form holds */
    /* The task's own observation (what its class's observe hook is), which
     * mj_env_reset_hook writes after the shared reset; NULL: mj_env_observe_hook. */
    void (*observe)(const void *state, float *obs);
    const calf_env_spec *spec; /* the class's spec: its action bounds must be ctrlrange */
    /* The locomotion tasks' observation, reward and termination (mj_env_step_hook and
     * the other hooks below; InvertedPendulum-v4 has its own): */
    int obs_qpos_from;    /* observation: qpos[obs_qpos_from:], then qvel */
    double obs_qvel_clip; /* qvel clipped to +-this (0: not clipped) */
    float ctrl_cost_weight; /* reward: x velocity + healthy_reward - weight * sum(u^2) */
    double healthy_reward;  /* paid every step (terminate_when_unhealthy); 0: none */
    int (*healthy)(const mjData *d); /* 0: terminated; NULL: never terminates */
    mj_camera camera;     /* how its pictures are taken */
} mj_task;

/* The MJCF models, embedded by cmake/embed.cmake from src/envs/<model>.xml: mjcf_<model>
 * and its length mjcf_<model>_size for every MODEL of MJ_TASKS (envs.h). */
#define MJ_TASK_MODEL_DECL_(id, name, model) \
    extern const char mjcf_##model[];        \
    extern const int mjcf_##model##_size;
MJ_TASKS(MJ_TASK_MODEL_DECL_)
/* An mj_task's file, xml and xml_size for the model src/envs/MODEL.xml (its MJ_TASKS row's). */
#define MJ_TASK_MODEL(MODEL) \
    .file = #MODEL ".xml", .xml = mjcf_##MODEL, .xml_size = &mjcf_##MODEL##_size

/* An env's state (spec.state_size = sizeof(mj_state)); made by mj_env_create. */
typedef struct mj_state {
    const mj_task *task;
    const mjModel *m;     /* the process's model of this task, shared by its envs */
    mjData *d;            /* owned */
    int track_id;         /* track_body's id, or -1 */
    double track_xy[2];   /* track_body's xpos x, y as the last reset or step left them */
    double *drawn;        /* owned: (nq + nv) qpos then qvel as the last reset drew them */
} mj_state;

/* The saved form: time, qpos, qvel, act, qacc_warmstart, ctrl, track_xy (doubles). That
 * is MuJoCo's whole integration state for these models (no mocap bodies, applied
 * forces, user data or plugins): the next mj_step reads nothing else from the data.
 * Then the task's kept arrays (MJ_KEEP_*), MJ_KEPT_DOUBLES of them. */
#define MJ_SAVE_DOUBLES(nq, nv, na, nu) (1 + (nq) + (nv) + (na) + (nv) + (nu) + 2)
#define MJ_SAVE_SIZE(nq, nv, na, nu) (8 * (size_t)MJ_SAVE_DOUBLES(nq, nv, na, nu))
/* The doubles of the kept arrays for the task's bits on model m. */
int mj_env_kept_doubles(const mjModel *m, unsigned keep);

/* Takes this process's model of the task (compiling it on first use; a failure names the
 * task and MuJoCo's message) and makes the env's mjData. */
int mj_env_create(mj_state *s, const mj_task *task, calf_error *err);
void mj_env_destroy(mj_state *s);
/* mj_env_create for a task whose code indexes xpos by fixed body ids: also checks that
 * body names[i] has id ids[i] (i < n) in the model; an error naming the task and the
 * body otherwise, with nothing made. */
int mj_env_create_with_bodies(mj_state *s, const mj_task *task, const char *const *names,
                              const int *ids, int n, calf_error *err);
/* For a built-in MuJoCo class (one whose destroy is mj_env_destroy_hook): the bytes one
 * more env maps (its mjData: struct, buffer, the whole stack) and touches (the stack only
 * as deep as a reset and 8 steps used it). false for any other class. */
bool mj_env_measure(const calf_env_class *cls, size_t *mapped, size_t *touched);
/* The most compiled models a process keeps: room for every task and a test's own. */
enum { MJ_MAX_MODELS = 2 * MJ_NUM_TASKS };
/* The process's compiled model of the task, compiled on first use; NULL with a message
 * when it cannot be, or when MJ_MAX_MODELS other tasks' models are kept already. Not
 * owned by the caller. Safe from any thread, as is everything here on separate envs. */
const mjModel *mj_env_model(const mj_task *task, calf_error *err);

/* mj_resetData(m, d)'s result, without clearing the contact and constraint rows that
 * were not used since the last reset (mj_env.c says why and how; MuJoCo 2.2.2 only,
 * mj_resetData itself otherwise). */
void mj_env_reset_data(const mjModel *m, mjData *d);
/* Gymnasium's reset: mj_resetData, qpos0 and zero velocities plus the task's noise from
 * rng (all of qpos's draws, then qvel's), one mj_forward. */
void mj_env_reset(mj_state *s, calf_rng *rng);
/* The end of a reset whose task drew its own start (Reacher's goal, Pusher's object):
 * mj_resetData, then qpos and qvel from s->drawn, one mj_forward. */
void mj_env_reset_drawn(mj_state *s);
/* Gymnasium's do_simulation: ctrl = u (action_dim floats), frame_skip mj_steps; then
 * track_xy from the data as the last step left it. Gymnasium's mj_rnePostConstraint
 * after the steps runs only for the tasks that read what it fills (cacc, cfrc_*:
 * post_constraint); the others' rewards and observations never read them, and no
 * mj_step reads them. */
void mj_env_simulate(mj_state *s, const float *u);
/* The env step's duration, model timestep * frame_skip (Gymnasium's dt). */
double mj_env_dt(const mj_state *s);
/* np.sum(np.square(u)) over float32 u as NumPy computes it: squares in float32 added in
 * NumPy's pairwise order (sequential below 8 terms; 8 lanes, then the rest, up to 128). */
float mj_env_sum_squares(const float *u, int n);
/* The same over float64 values (np.sum(np.square(x)) on a float64 array: data.ctrl,
 * data.cfrc_ext), n up to 128; and np.sum(x) itself in that order. */
double mj_env_sum_squares_f64(const double *x, int n);
double mj_env_sum_f64(const double *x, int n);
/* np.linalg.norm of a float64 3-vector: the square root of its dot with itself, terms
 * added in order (what NumPy's BLAS dot gives for so few terms). */
double mj_env_norm3(const double *v);

void mj_env_save(const mj_state *s, void *buf);
/* Refuses non-finite values and a negative time; only then overwrites the data. */
int mj_env_load(mj_state *s, const void *buf, calf_error *err);
void mj_env_reset_state(const mj_state *s, double *out);

/* Gymnasium's locomotion step (HalfCheetah, Hopper, Walker2d, Ant), from the task's
 * constants: x = qpos[0], or track_body's xpos x; simulate; then in Gymnasium's order
 *   v = (x_after - x_before) / dt                  (forward_reward_weight 1: v itself)
 *   rewards = v + healthy_reward                   (added only when the task has one)
 *   ctrl_cost = ctrl_cost_weight * sum(u^2)        (float32, mj_env_sum_squares)
 *   reward = (float)(rewards - (double)ctrl_cost)
 * and the observation; returns terminated (!healthy). */
int mj_env_step_hook(void *state, calf_rng *rng, int action, const float *u, float *obs,
                     float *reward);
/* mj_env_reset, then the observation (the task's own, or mj_env_observe_hook). */
void mj_env_reset_hook(void *state, calf_rng *rng, float *obs);
/* qpos[obs_qpos_from:] then qvel (clipped when the task says), as float32. */
void mj_env_observe_hook(const void *state, float *obs);

/* fn(arg) with MuJoCo's errors caught, for MuJoCo calls made outside this file that can
 * fail (the renderer's, draw_mujoco.c): CALF_OK, or CALF_EIO "WHAT: MuJoCo: message". */
int mj_env_guarded(void (*fn)(void *arg), void *arg, const char *what, calf_error *err);

/* The class hooks every task shares, on a void *state. */
void mj_env_destroy_hook(void *state);
void mj_env_save_hook(const void *state, void *buf);
int mj_env_load_hook(void *state, const void *buf, calf_error *err);
void mj_env_reset_state_hook(const void *state, double *out);

/* A task's class: its spec from the task's sizes (NQ, NV, NU, the observation's size and
 * the action bounds), Gymnasium's time limit (STEPS), the saved form above with KEPT
 * doubles of kept arrays (checked against the model at load), and the hooks: RESET,
 * STEP and OBSERVE (the shared locomotion ones, or the task's own), CREATE (the task's,
 * the one that names it), then the shared destroy, save, load and reset_state. */
#define MJ_TASK_CLASS(NAME, OBS_DIM, NQ, NV, NU, LO, HI, STEPS, KEPT, RESET, STEP, OBSERVE, \
                      CREATE)                                                             \
    {.spec = {.name = (NAME),                                                             \
              .obs_dim = (OBS_DIM),                                                       \
              .action_dim = (NU),                                                         \
              .action_low = (LO),                                                         \
              .action_high = (HI),                                                        \
              .max_episode_steps = (STEPS),                                               \
              .state_size = sizeof(mj_state),                                             \
              .save_size = MJ_SAVE_SIZE(NQ, NV, 0, NU) + 8 * (size_t)(KEPT),              \
              .reset_state_dim = (NQ) + (NV)},                                            \
     .reset = (RESET),                                                               \
     .step = (STEP),                                                                 \
     .observe = (OBSERVE),                                                           \
     .create = (CREATE),                                                             \
     .destroy = mj_env_destroy_hook,                                                 \
     .save = mj_env_save_hook,                                                       \
     .load = mj_env_load_hook,                                                       \
     .reset_state = mj_env_reset_state_hook}
/* Gymnasium's 1,000-step limit, nothing kept. */
#define MJ_ENV_CLASS(NAME, OBS_DIM, NQ, NV, NU, LO, HI, RESET, STEP, OBSERVE, CREATE) \
    MJ_TASK_CLASS(NAME, OBS_DIM, NQ, NV, NU, LO, HI, 1000, 0, RESET, STEP, OBSERVE, CREATE)
/* The same for a locomotion task: the shared reset, step and observation. */
#define MJ_LOCOMOTION_CLASS(NAME, OBS_DIM, NQ, NV, NU, LO, HI, CREATE)                  \
    MJ_ENV_CLASS(NAME, OBS_DIM, NQ, NV, NU, LO, HI, mj_env_reset_hook, mj_env_step_hook, \
                 mj_env_observe_hook, CREATE)

#endif
