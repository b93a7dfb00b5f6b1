/* calf/env.h: the environment interface and the registry of environment classes.
 * An environment is a state plus two functions (reset, step) over it; the state is
 * plain data a checkpoint can memcpy, or a native one with hooks to create, destroy,
 * save and load it. Every random draw comes from the env's own stream seeded by
 * (seed, global env index), never from which process steps it. */
#ifndef CALF_ENV_H
#define CALF_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "calf/error.h"
#include "calf/rng.h"

#define CALF_ENV_MAX_CLASSES 64 /* built-ins plus registered classes */

/* One named part of a Dict observation (since ABI version 3): values [offset, offset +
 * size) of the flat observation, size the product of shape's nonzero entries. */
typedef struct calf_obs_part {
    const char *name;        /* the Dict's key: printable, unique among the parts */
    int shape[3];            /* (H, W, C) of an image part (NHWC); (n, 0, 0) a vector of n */
    int dtype;               /* CALF_DTYPE_F32 or CALF_DTYPE_U8: the part's own values
                                (integers 0..255 for U8; the whole is kept as bytes only
                                when the spec's obs_dtype is U8) */
    int offset;              /* where the part starts in the flat observation */
} calf_obs_part;

typedef struct calf_env_spec {
    const char *name;        /* e.g. "CartPole-v1"; unique in the registry */
    int obs_dim;             /* >= 1; the env sets it, callers size their buffers by it */
    int num_actions;         /* discrete: number of actions; 0 when continuous */
    int action_dim;          /* continuous: size of the action vector (>= 1); 0 when discrete */
    const float *action_low, *action_high; /* (action_dim) continuous bounds, low < high;
                                              static arrays that outlive the class */
    int max_episode_steps;   /* time limit: truncated=1 when reached */
    size_t state_size;       /* bytes of the env's state object; for plain-data classes (no
                                save/load) also what a checkpoint copies byte for byte */
    size_t save_size;        /* classes with save/load: bytes of a saved state; else 0 */
    int reset_state_dim;     /* classes with reset_state: doubles it writes; else 0 */

    /* ---- since ABI version 3: the spaces' shapes; all 0 is what version 2 meant ---- */
    int obs_shape[3];        /* (H, W, C) of an image observation, NHWC (row, column,
                                channel), H*W*C == obs_dim; all 0: a flat vector of obs_dim */
    int obs_dtype;           /* CALF_DTYPE_F32 or CALF_DTYPE_U8 (below) */
    int obs_high;            /* CALF_DTYPE_U8 only: the largest value the env writes, 1..255
                                (0 means 255); the Box's high, and the default scale of the
                                conversion to the network's floats, x / obs_high */
    int num_action_dims;     /* MultiDiscrete: the number of sub-actions (>= 1); 0 otherwise */
    const int *action_nvec;  /* MultiDiscrete: (num_action_dims) sizes, each >= 1, summing to
                                num_actions; a static array that outlives the class */
    int action_mask;         /* 1: the class says after every reset and step which of the
                                num_actions actions are valid; 0: all always are */
    int num_obs_parts;       /* a Dict observation: its parts (1..64), in the order they lie
                                in the flat vector, one after another from offset 0 to
                                obs_dim (obs_shape then all 0); 0: not a Dict */
    const calf_obs_part *obs_parts; /* (num_obs_parts) a static array that outlives the
                                       class, or NULL with num_obs_parts 0 */
} calf_env_spec;

#define CALF_OBS_MAX_PARTS 64

/* An observation's storage type. The env writes floats; with CALF_DTYPE_U8 they are
 * integers 0..obs_high (exact in a float, checked as the env returns them), and calf
 * keeps them as bytes in rollouts, replay buffers and checkpoints, turning them back into
 * those floats where a network reads them (which scales them by its uint8 scale). Such
 * a class may also write them as bytes straight away (reset_u8, step_u8 below). */
enum { CALF_DTYPE_F32 = 0, CALF_DTYPE_U8 = 1 };

struct calf_env;

/* Two kinds of class. Plain data (classic control): the state is state_size bytes that
 * reset/step change and checkpoints memcpy; only reset and step are required. Native
 * state (MuJoCo): create/destroy hold resources the state points to (a simulator's
 * data), and save/load turn the state into save_size bytes of plain data and back. A
 * plain-data class whose step indexes arrays by its state (MinAtar's games) also has
 * save/load: save copies the bytes, load checks them before it copies them back. */
typedef struct calf_env_class {
    calf_env_spec spec;
    /* state points to spec.state_size bytes (created, for classes with create).
     * Draws the initial state from rng and writes the first observation (obs_dim). */
    void (*reset)(void *state, calf_rng *rng, float *obs);
    /* Advance one step; returns 1 when the episode terminated, 0 when it goes on, or
     * CALF_ENV_TRUNCATED when the env itself ended it without a terminal state (its own
     * time limit: a Python env's `truncated`). Discrete envs read `action`
     * (0..num_actions-1), continuous ones read `u` (action_dim, already clipped to
     * bounds). Writes the next observation (obs_dim) and the reward. */
    int (*step)(void *state, calf_rng *rng, int action, const float *u, float *obs, float *reward);
    /* Optional (may be NULL): write the observation of the current state, the same
     * one reset/step last wrote. Used to validate checkpointed records. */
    void (*observe)(const void *state, float *obs);
    /* Optional (may be NULL): step envs[0..n) at once, bit for bit as n calls of
     * `step` would (each env's state and rng are its own), so grouping never changes
     * a result. Reads actions (n) or u (n, action_dim; already clipped); writes obs
     * (n, obs_dim), reward (n), terminated (n). Lets a class overlap independent envs
     * (libm calls, divisions) that one-at-a-time stepping serialises. Time limits and
     * resets stay with the caller. */
    void (*step_many)(struct calf_env *envs, int n, const int *actions, const float *u, float *obs,
                      float *reward, uint8_t *terminated);
    /* Optional pair: create runs on the zeroed state when an env is made and may fail
     * (CALF_EINVAL or CALF_EIO with a message, holding nothing afterwards); destroy
     * releases what create took (called once for every successful create). */
    int (*create)(void *state, calf_error *err);
    void (*destroy)(void *state);
    /* Optional pair, both or neither (then the state must be plain data): save writes
     * spec.save_size bytes of plain data (no pointers; the same bytes for the same
     * state), everything a continuation needs to match an uninterrupted run bit for
     * bit; load validates such bytes (they may come from a corrupted file) and only
     * when they are valid replaces the state, else returns CALF_EINVAL naming why. */
    void (*save)(const void *state, void *buf);
    int (*load)(void *state, const void *buf, calf_error *err);
    /* Optional (may be NULL): the physical state the last reset drew, as
     * spec.reset_state_dim doubles (MuJoCo: qpos then qvel, as handed to the physics),
     * so an episode can be replayed against another implementation. */
    void (*reset_state)(const void *state, double *out);

    /* ---- since ABI version 2 ---- */
    /* Optional (may be NULL): draw the current state for `calf play --video` and
     * calf_renderer_draw (calf/render.h) into rgb, (height, width, 3) bytes, rows from the
     * top, every byte written. CALF_OK, or a status with a message in err. render_fps:
     * the video's frames per second (Gymnasium's metadata render_fps; 0: 30). */
    int (*render)(const void *state, int width, int height, uint8_t *rgb, calf_error *err);
    double render_fps;
    /* Optional (may be NULL): create told its class object, the job's seed and the env's
     * global index; used instead of create when set (destroy pairs with it). For classes
     * made at run time, one object each (a Python env factory), and for envs that seed a
     * generator of their own once from (seed, index) (Gymnasium's reset(seed=...)). */
    int (*create_at)(void *state, const struct calf_env_class *cls, uint64_t seed,
                     uint64_t index, calf_error *err);
    /* Optional: after reset or step wrote a non-finite observation because the env
     * failed, writes one line saying how into buf and returns the failure's calf_status
     * (CALF_EIO for a Python env's exception, a runtime failure: exit 1; CALF_EINVAL for
     * a wrong return value: exit 2); the job's fault message then names that instead of
     * the value. Returns CALF_OK when the env did not fail. */
    int (*failure)(const void *state, char *buf, size_t size);
    /* Optional: after a successful load, 1 when the saved bytes held no state to continue
     * (a Python env that could not be pickled): the env then starts a new episode there
     * instead of continuing the stored one. */
    int (*load_restarts)(const void *state);

    /* ---- since ABI version 3: the action side ---- */
    /* Required when spec.action_mask is 1, else NULL: which actions the current state
     * allows, written into mask (num_actions bytes: 1 valid, 0 not; MultiDiscrete: each
     * sub-action's slice of action_nvec[d] bytes in turn), at least one valid (in every
     * slice). calf asks after every reset and step (and after a checkpoint's state is
     * loaded), so it must depend on the state alone. A policy never picks an invalid
     * action; what step does with one is the class's business. */
    void (*action_mask)(const void *state, uint8_t *mask);
    /* Required for MultiDiscrete (spec.num_action_dims > 0), and then used instead of
     * step (which may be NULL): actions (num_action_dims), actions[d] in
     * 0..action_nvec[d]-1. Returns and writes what step does. */
    int (*step_multi)(void *state, calf_rng *rng, const int *actions, float *obs,
                      float *reward);

    /* ---- since ABI version 4: a uint8 observation written as bytes ---- */
    /* Optional, for a class whose spec.obs_dtype is CALF_DTYPE_U8 and whose actions are
     * not MultiDiscrete: reset_u8 and step_u8 together (step_many_u8 only beside them).
     * reset, step and step_many with the observation written as obs_dim bytes instead of
     * floats: the same values (each float the float hook writes, as a byte), the same
     * draws and the same state afterwards, so that an env may be stepped in either form
     * at any step. A byte is a quarter of a float's stores, which is most of a small
     * grid game's step (MinAtar's); calf keeps such observations as bytes anyway. */
    void (*reset_u8)(void *state, calf_rng *rng, uint8_t *obs);
    int (*step_u8)(void *state, calf_rng *rng, int action, const float *u, uint8_t *obs,
                   float *reward);
    void (*step_many_u8)(struct calf_env *envs, int n, const int *actions, const float *u,
                         uint8_t *obs, float *reward, uint8_t *terminated);
} calf_env_class;

#define CALF_ENV_TRUNCATED 2 /* step's return when the env ended the episode itself */

typedef struct calf_env {
    const calf_env_class *cls;
    void *state;            /* owned: spec.state_size bytes */
    float *clipped;         /* owned: (action_dim) the action the last step applied (clipped
                               to bounds; what Pendulum's torque arrow draws), or NULL for
                               discrete actions */
    calf_rng rng;           /* dynamics/reset stream: (seed, index, CALF_RNG_DYNAMICS) */
    int elapsed_steps;      /* steps in the current episode */
} calf_env;

/* Add a class to the registry. The registry keeps the pointer, so cls must outlive
 * every use (a static object). Fails with CALF_EINVAL on a duplicate name or a bad
 * spec, and when the registry is full. Safe from any thread, as are the look-ups below
 * (the registry is locked); register before workers fork, so that they inherit it. */
int calf_env_register(const calf_env_class *cls, calf_error *err);
const calf_env_class *calf_env_find(const char *name);  /* NULL if unknown */
/* calf_env_find, and when the name is unknown a message in err: the known names, or for
 * an env this build left out (MuJoCo's without libmujoco) how to get it. */
const calf_env_class *calf_env_lookup(const char *name, calf_error *err);
int calf_env_count(void);
const calf_env_class *calf_env_at(int i);   /* built-ins first, in a fixed order; NULL out of range */
/* Writes "A, B, C" (the registered names, in order) into buf; truncates to fit. */
void calf_env_list_names(char *buf, size_t size);

/* ---- plug-ins: environments in a shared library, loaded at run time -------------
 *
 * A plug-in is a shared object (cc -shared -fPIC, not linked against libcalf: it uses
 * the calf_* functions of the program that loads it) that defines one function,
 *
 *     int calf_plugin_register(int abi_version, calf_error *err);
 *
 * which the loader calls once with its CALF_PLUGIN_ABI_VERSION. The function must
 *   1. return CALF_PLUGIN_CHECK_ABI(abi_version, err) when that is not CALF_OK (a
 *      plug-in built against other headers may not read calf_env_class as calf does);
 *   2. call calf_env_register for each of its classes (static objects) and return the
 *      first failure's status, err set, or CALF_OK once all are registered.
 * examples/custom_env.c is one. `calf train|play|export|env|envs --env_lib PATH` loads
 * them; a config file never does (a config is data, and cannot make calf run code).
 *
 * Older plug-ins: one built against version 2's headers refuses the loader's 4 through
 * CALF_PLUGIN_CHECK_ABI, which tells the loader its version; the loader then calls it
 * again with 2, and calf_env_register reads each class it passes during that call in
 * version 2's layout, registering a copy in this one (the fields since version 3 zero:
 * a flat float observation, no MultiDiscrete actions, no mask; its step_many, which may
 * read calf_env_class, is left out, so its envs step one at a time, the same bits).
 * One built against version 3's headers is asked again with 3 the same way, and its
 * classes registered as copies with the hooks since version 4 NULL (its step_many kept:
 * version 4 only appended to calf_env_class, so it reads the copy as it would its own).
 * Any other version is refused. */
#define CALF_PLUGIN_ABI_VERSION 4  /* changes when calf_env_class, calf_env_spec, calf_env,
                                      calf_rng or calf_error change their layout */
#define CALF_PLUGIN_ABI_OLDEST 2   /* the oldest version the loader still loads */
#define CALF_PLUGIN_REGISTER_NAME "calf_plugin_register"
typedef int (*calf_plugin_register_fn)(int abi_version, calf_error *err);
int calf_plugin_register(int abi_version, calf_error *err); /* defined by a plug-in */
/* CALF_OK when the loader's ABI (abi_version) is the one the plug-in was compiled with,
 * else CALF_EINVAL saying both (and, while the loader runs the plug-in, telling it the
 * plug-in's version). A macro, so it takes the plug-in's own header version. */
#define CALF_PLUGIN_CHECK_ABI(abi_version, err) \
    calf_plugin_check_abi((abi_version), CALF_PLUGIN_ABI_VERSION, (err))
int calf_plugin_check_abi(int loader_abi, int plugin_abi, calf_error *err);

#define CALF_ENV_MAX_LIBRARIES 16
/* Load the plug-in at path (a file; the same file twice loads it once) and register its
 * classes. CALF_EINVAL with a message naming path when the file is missing or not a
 * shared object, lacks calf_plugin_register, was built for another ABI, registers no
 * class, or a class's name is taken (by a built-in or another library); then nothing
 * of it stays registered or loaded; CALF_ENOMEM (nothing loaded) when memory runs out.
 * Safe from any thread (threads loading one file at once load it once, and all get
 * CALF_OK); load before workers fork (they inherit it). The library stays loaded until
 * the process ends. */
int calf_env_load_library(const char *path, calf_error *err);
int calf_env_library_count(void);
/* The absolute path of the i-th loaded library, in load order; NULL out of range.
 * Static storage owned by calf. */
const char *calf_env_library_at(int i);
/* The library that registered cls (its absolute path), or NULL when cls did not come
 * from a plug-in (a built-in, or registered by the program itself). */
const char *calf_env_class_library(const calf_env_class *cls);

/* Create env `index` of a job seeded with `seed`. Unknown name -> CALF_EINVAL naming
 * it and listing the known names; a failed create hook -> its status and message (env
 * left zeroed); CALF_ENOMEM "out of memory allocating ..." when the state does not
 * fit (env left zeroed). The state is zeroed, then created: call calf_env_reset before
 * the first step. */
int calf_env_init(calf_env *env, const char *name, uint64_t seed, uint64_t index, calf_error *err);
void calf_env_free(calf_env *env);      /* safe on a zeroed/freed env */
/* The state's checkpoint form: spec.save_size bytes for classes with save/load, else
 * the state_size bytes themselves. calf_env_load_state validates first and changes
 * nothing on error. */
size_t calf_env_saved_size(const calf_env_class *cls);
void calf_env_save_state(const calf_env *env, void *buf);
int calf_env_load_state(calf_env *env, const void *buf, calf_error *err);
/* Writes the state the last reset drew (spec.reset_state_dim doubles) and returns that
 * count; 0 for classes without reset_state. */
int calf_env_reset_state(const calf_env *env, double *out);
/* Start a new episode: draws from env->rng, elapsed_steps = 0, writes obs (obs_dim). */
void calf_env_reset(calf_env *env, float *obs);
/* One step. Clips continuous actions to bounds (in a copy, not the caller's buffer;
 * NaN stays NaN); sets truncated when elapsed_steps reaches max_episode_steps and the
 * step did not terminate. Does not reset: the caller does, after either flag. */
void calf_env_step(calf_env *env, int action, const float *u, float *obs, float *reward,
                   int *terminated, int *truncated);
/* Ints an action of spec takes: num_action_dims for MultiDiscrete, else 1 (a Discrete
 * action; continuous envs read floats, and the int is unused). */
int calf_env_action_ints(const calf_env_spec *spec);
/* calf_env_step for every kind of action space: actions (calf_env_action_ints) for
 * Discrete and MultiDiscrete envs, u (action_dim) for continuous ones (the other may be
 * NULL). Each sub-action must lie in its range (asserted). */
void calf_env_step_actions(calf_env *env, const int *actions, const float *u, float *obs,
                           float *reward, int *terminated, int *truncated);
/* The actions the env's current state allows: mask (num_actions bytes, 1 valid, 0 not;
 * MultiDiscrete: each sub-action's slice in turn). All 1 for a class without a mask (or
 * a continuous one, which writes nothing: num_actions is 0). A slice the hook left with
 * no valid action (a terminal state's, or a broken env's) reads as all valid, and the
 * call returns 1 (vec_env reports it as the env's fault); else 0. */
int calf_env_action_mask(const calf_env *env, uint8_t *mask);

#endif
