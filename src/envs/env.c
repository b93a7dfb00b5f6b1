/* env.c: the environment registry and the generic reset/step wrapper (time limit,
 * action clipping). The built-in classes sit first in a fixed order; classes
 * registered at run time follow in registration order, some of them by plug-in
 * libraries loaded here (calf_env_load_library). */
#include "calf/env.h"
#include "calf/version.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "envs/envs.h"
#if CALF_HAVE_MUJOCO
#include "envs/mj_env.h"
#endif

static const calf_env_class *const builtin_classes[] = {
    &cartpole_class,     &pendulum_class,
    &acrobot_class,      &mountain_car_class,
    &mountain_car_continuous_class,
    &cartpole_novel_class, &pendulum_novel_class,
#if CALF_HAVE_MUJOCO
#define MJ_TASK_ENTRY_(id, name, model) &id##_class,
    MJ_TASKS(MJ_TASK_ENTRY_)
#endif
    MINATAR_BUILTINS,
};
#define NUM_BUILTINS ((int)(sizeof builtin_classes / sizeof builtin_classes[0]))

#if !CALF_HAVE_MUJOCO
/* Built in only with MuJoCo; named here so asking for one says how to get it. */
#define MJ_TASK_NAME_(id, name, model) name,
static const char *const mujoco_names[] = {MJ_TASKS(MJ_TASK_NAME_)};
#endif

bool env_class_measure(const calf_env_class *cls, size_t *mapped, size_t *touched) {
#if CALF_HAVE_MUJOCO
    if (mj_env_measure(cls, mapped, touched)) return true;
#else
    (void)cls, (void)mapped, (void)touched;
#endif
    return false;
}

/* The classes added by calf_env_register (not the built-ins). Process-wide like the
 * context: filled at start-up, before workers fork, then mostly read. An embedding
 * program may register, load plug-ins and make envs from several threads, so
 * registry_lock guards registered, libs and loading_lib, each call holding it throughout
 * (a plug-in is looked for, loaded and registered as one step). Recursive: a plug-in's
 * register function, called under it, calls calf_env_register. */
static const calf_env_class *registered[CALF_ENV_MAX_CLASSES - NUM_BUILTINS];
static int registered_by[CALF_ENV_MAX_CLASSES - NUM_BUILTINS]; /* index in libs, or -1 */
/* For a class an older plug-in passed (ABI 2 or 3): the plug-in's own object, which its
 * create_at is told (registered[] holds calf's converted copy, malloc'ed, kept for the
 * process's life unless its library fails to load); NULL for classes in this version's
 * layout. */
static const void *registered_old[CALF_ENV_MAX_CLASSES - NUM_BUILTINS];
static int num_registered = 0;

/* The plug-in libraries loaded, in load order (absolute paths, strdup'ed; kept with
 * their handles for the life of the process), and the one whose register function is
 * running (-1 when none), to which calf_env_register attributes what it adds. */
static struct {
    char *path;
    void *handle;
} libs[CALF_ENV_MAX_LIBRARIES];
static int num_libs = 0;
static int loading_lib = -1;
/* While a plug-in's register function runs: the ABI version the loader called it with
 * (the layout calf_env_register reads), and the version the plug-in said it was built
 * for when it refused (calf_plugin_check_abi; 0 when it did not say). */
static int loading_abi = CALF_PLUGIN_ABI_VERSION;
static int loading_told_abi = 0;
static pthread_mutex_t registry_lock;
static pthread_once_t registry_lock_once = PTHREAD_ONCE_INIT;

static void make_registry_lock(void) {
    pthread_mutexattr_t a;
    CALF_ASSERT(pthread_mutexattr_init(&a) == 0);
    CALF_ASSERT(pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE) == 0);
    CALF_ASSERT(pthread_mutex_init(&registry_lock, &a) == 0);
    pthread_mutexattr_destroy(&a);
}
static void lock_registry(void) {
    CALF_ASSERT(pthread_once(&registry_lock_once, make_registry_lock) == 0);
    CALF_ASSERT(pthread_mutex_lock(&registry_lock) == 0);
}
static void unlock_registry(void) { CALF_ASSERT(pthread_mutex_unlock(&registry_lock) == 0); }

int calf_env_count(void) {
    lock_registry();
    int n = NUM_BUILTINS + num_registered;
    unlock_registry();
    return n;
}

const calf_env_class *calf_env_at(int i) {
    lock_registry();
    const calf_env_class *c = i < 0 || i >= NUM_BUILTINS + num_registered ? NULL
                              : i < NUM_BUILTINS ? builtin_classes[i]
                                                 : registered[i - NUM_BUILTINS];
    unlock_registry();
    return c;
}

const calf_env_class *calf_env_find(const char *name) {
    if (!name) return NULL;
    lock_registry();
    const calf_env_class *found = NULL;
    for (int i = 0; i < calf_env_count() && !found; i++) {
        const calf_env_class *c = calf_env_at(i);
        if (strcmp(c->spec.name, name) == 0) found = c;
    }
    unlock_registry();
    return found;
}

const calf_env_class *calf_env_lookup(const char *name, calf_error *err) {
    const calf_env_class *cls = calf_env_find(name);
    if (cls) return cls;
#if !CALF_HAVE_MUJOCO
    for (size_t i = 0; name && i < sizeof mujoco_names / sizeof mujoco_names[0]; i++)
        if (strcmp(name, mujoco_names[i]) == 0) {
            /* what the build did: turned off (-DCALF_WITH_MUJOCO=OFF) or did not find it */
            calf_error_set(err, CALF_EINVAL, "environment '%s' needs MuJoCo, which this calf "
                           "was built without (%s)", name, calf_feature_note("mujoco"));
            return NULL;
        }
#endif
    if (name && strncmp(name, "py:", 3) == 0) {
        /* a Python env: its code comes from the command line or the API, never a config */
        const char *fn = name + 3;
        calf_error_set(err, CALF_EINVAL,
                       "environment '%s' is a Python env factory, which only the command line "
                       "or the API can load: run `python3 -m calf ... --env_py %s`, or pass "
                       "env=%s to calf.train / calf.Trainer / calf.load_policy",
                       name, fn, strchr(fn, ':') ? strchr(fn, ':') + 1 : fn);
        return NULL;
    }
    char known[768];
    calf_env_list_names(known, sizeof known);
    calf_error_set(err, CALF_EINVAL, "unknown environment '%s' (known: %s)",
                   name ? name : "(null)", known);
    return NULL;
}

void calf_env_list_names(char *buf, size_t size) {
    if (!buf || size == 0) return;
    size_t used = 0;
    buf[0] = '\0';
    lock_registry();
    for (int i = 0; i < calf_env_count(); i++) {
        int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", calf_env_at(i)->spec.name);
        if (n < 0 || (size_t)n >= size - used) break; /* truncated; snprintf terminated it */
        used += (size_t)n;
    }
    unlock_registry();
}

/* A Dict's parts: named, each of a known dtype and a positive shape, one after another
 * from offset 0 to obs_dim, and never with an image obs_shape (the whole is no image). */
static int check_obs_parts(const calf_env_spec *s, calf_error *err) {
    const char *n = s->name;
    if (s->num_obs_parts == 0 && !s->obs_parts) return CALF_OK;
    if (s->num_obs_parts < 1 || s->num_obs_parts > CALF_OBS_MAX_PARTS || !s->obs_parts ||
        s->obs_shape[0] != 0)
        return calf_error_set(err, CALF_EINVAL,
                              "env '%s': num_obs_parts %d is not 1..%d with obs_parts, on a "
                              "flat observation (obs_shape all 0)",
                              n, s->num_obs_parts, CALF_OBS_MAX_PARTS);
    int64_t at = 0;
    for (int k = 0; k < s->num_obs_parts; k++) {
        const calf_obs_part *p = &s->obs_parts[k];
        const int *sh = p->shape;
        int image = sh[1] != 0 || sh[2] != 0;
        int64_t size = image ? (int64_t)sh[0] * sh[1] * sh[2] : sh[0];
        if (!p->name || !p->name[0] || strlen(p->name) > 64)
            return calf_error_set(err, CALF_EINVAL, "env '%s': obs_parts[%d] has no name (or "
                                  "one longer than 64 characters)", n, k);
        for (int j = 0; j < k; j++)
            if (strcmp(s->obs_parts[j].name, p->name) == 0)
                return calf_error_set(err, CALF_EINVAL, "env '%s': obs_parts[%d]'s name '%s' "
                                      "is obs_parts[%d]'s too", n, k, p->name, j);
        if (sh[0] < 1 || (image && (sh[1] < 1 || sh[2] < 1)) || size > s->obs_dim)
            return calf_error_set(err, CALF_EINVAL,
                                  "env '%s': obs_parts[%d] '%s' has shape (%d, %d, %d): not an "
                                  "image (H, W, C) or a vector (n, 0, 0) of positive sizes",
                                  n, k, p->name, sh[0], sh[1], sh[2]);
        if (p->dtype != CALF_DTYPE_F32 && p->dtype != CALF_DTYPE_U8)
            return calf_error_set(err, CALF_EINVAL, "env '%s': obs_parts[%d] '%s': dtype %d is "
                                  "neither CALF_DTYPE_F32 nor CALF_DTYPE_U8", n, k, p->name,
                                  p->dtype);
        if (p->offset != at)
            return calf_error_set(err, CALF_EINVAL,
                                  "env '%s': obs_parts[%d] '%s' starts at %d, not at %lld where "
                                  "the parts before it end",
                                  n, k, p->name, p->offset, (long long)at);
        at += size;
    }
    if (at != s->obs_dim)
        return calf_error_set(err, CALF_EINVAL,
                              "env '%s': obs_parts hold %lld values, not obs_dim %d", n,
                              (long long)at, s->obs_dim);
    return CALF_OK;
}

/* The fields since ABI 3: a shape that is the observation's size, a dtype calf knows,
 * MultiDiscrete sizes that are the discrete action count, a mask only over discrete
 * actions. */
static int check_spaces(const calf_env_spec *s, calf_error *err) {
    const char *n = s->name;
    const int *sh = s->obs_shape;
    if (sh[0] || sh[1] || sh[2]) {
        if (sh[0] < 1 || sh[1] < 1 || sh[2] < 1 ||
            (int64_t)sh[0] * sh[1] * sh[2] != s->obs_dim)
            return calf_error_set(err, CALF_EINVAL,
                                  "env '%s': obs_shape (%d, %d, %d) is not positive with a "
                                  "product of obs_dim %d (or all 0 for a flat vector)",
                                  n, sh[0], sh[1], sh[2], s->obs_dim);
    }
    if (s->obs_dtype != CALF_DTYPE_F32 && s->obs_dtype != CALF_DTYPE_U8)
        return calf_error_set(err, CALF_EINVAL,
                              "env '%s': obs_dtype %d is neither CALF_DTYPE_F32 (%d) nor "
                              "CALF_DTYPE_U8 (%d)",
                              n, s->obs_dtype, CALF_DTYPE_F32, CALF_DTYPE_U8);
    if (s->obs_high < 0 || s->obs_high > 255 || (s->obs_high && s->obs_dtype != CALF_DTYPE_U8))
        return calf_error_set(err, CALF_EINVAL,
                              "env '%s': obs_high %d is not 0 or, for CALF_DTYPE_U8, 1..255", n,
                              s->obs_high);
    if (s->num_action_dims < 0 || (s->num_action_dims > 0 && s->num_actions < 1))
        return calf_error_set(err, CALF_EINVAL,
                              "env '%s': num_action_dims %d: MultiDiscrete actions are discrete "
                              "(num_actions, the sum of action_nvec, >= 1)",
                              n, s->num_action_dims);
    if (s->num_action_dims > 0) {
        if (!s->action_nvec)
            return calf_error_set(err, CALF_EINVAL,
                                  "env '%s': num_action_dims %d without action_nvec", n,
                                  s->num_action_dims);
        int64_t sum = 0;
        for (int j = 0; j < s->num_action_dims && sum <= s->num_actions; j++) {
            if (s->action_nvec[j] < 1)
                return calf_error_set(err, CALF_EINVAL, "env '%s': action_nvec[%d] = %d < 1", n,
                                      j, s->action_nvec[j]);
            sum += s->action_nvec[j];
        }
        if (sum != s->num_actions)
            return calf_error_set(err, CALF_EINVAL,
                                  "env '%s': action_nvec's %d sizes do not sum to num_actions %d",
                                  n, s->num_action_dims, s->num_actions);
    }
    if (s->action_mask != 0 && (s->action_mask != 1 || s->num_actions < 1))
        return calf_error_set(err, CALF_EINVAL,
                              "env '%s': action_mask %d is not 0, or 1 with discrete actions", n,
                              s->action_mask);
    return check_obs_parts(s, err);
}

/* The action side of ABI 3's hooks, once check_spaces passed the fields: a MultiDiscrete
 * class steps through step_multi (and only it has one), a masked one has action_mask. */
static int check_action_hooks(const calf_env_class *cls, calf_error *err) {
    const calf_env_spec *s = &cls->spec;
    const char *n = s->name;
    if (s->num_action_dims > (1 << 10))
        return calf_error_set(err, CALF_EINVAL, "env '%s': num_action_dims %d not in [0, 1024]",
                              n, s->num_action_dims);
    if ((s->num_action_dims > 0) != (cls->step_multi != NULL))
        return calf_error_set(err, CALF_EINVAL,
                              s->num_action_dims > 0
                                  ? "env '%s': a MultiDiscrete action needs action_nvec and "
                                    "step_multi"
                                  : "env '%s': step_multi without a MultiDiscrete action "
                                    "(num_action_dims 0)",
                              n);
    if ((s->action_mask != 0) != (cls->action_mask != NULL))
        return calf_error_set(err, CALF_EINVAL,
                              "env '%s': spec.action_mask (1) and the action_mask hook go "
                              "together", n);
    return CALF_OK;
}

/* ABI 4's byte observation: reset_u8 and step_u8 together, step_many_u8 only beside
 * them, and only for a uint8 observation with Discrete or continuous actions. */
static int check_u8_hooks(const calf_env_class *cls, calf_error *err) {
    const calf_env_spec *s = &cls->spec;
    bool any = cls->reset_u8 || cls->step_u8 || cls->step_many_u8;
    if (!any) return CALF_OK;
    if (!cls->reset_u8 || !cls->step_u8)
        return calf_error_set(err, CALF_EINVAL,
                              "env '%s': reset_u8 and step_u8 go together (step_many_u8 only "
                              "beside them)", s->name);
    if (s->obs_dtype != CALF_DTYPE_U8 || s->num_action_dims > 0)
        return calf_error_set(err, CALF_EINVAL,
                              "env '%s': the byte hooks (reset_u8, step_u8) are for a "
                              "CALF_DTYPE_U8 observation and Discrete or continuous actions",
                              s->name);
    return CALF_OK;
}

/* Rejects what would break an env at run time: sizes no buffer could hold, an
 * ambiguous action space, bounds that clipping cannot use, hooks without their pair. */
static int check_spec(const calf_env_class *cls, calf_error *err) {
    const calf_env_spec *s = &cls->spec;
    if (!s->name || !s->name[0])
        return calf_error_set(err, CALF_EINVAL, "env class has no name");
    const char *n = s->name;
    if (strlen(n) > 64)
        return calf_error_set(err, CALF_EINVAL, "env name '%.64s...' is longer than 64 characters", n);
    for (const char *p = n; *p; p++) {
        if (*p <= ' ' || *p > '~')
            return calf_error_set(err, CALF_EINVAL,
                                  "env name '%s' contains a space or non-printable character", n);
    }
    if (!cls->reset || (!cls->step && !(s->num_action_dims > 0 && cls->step_multi)))
        return calf_error_set(err, CALF_EINVAL, "env '%s': reset and step are required", n);
    /* The limits only keep products of sizes far from overflow. */
    if (s->obs_dim < 1 || s->obs_dim > (1 << 20))
        return calf_error_set(err, CALF_EINVAL, "env '%s': obs_dim %d not in [1, 2^20]", n,
                              s->obs_dim);
    if ((s->num_actions > 0) == (s->action_dim > 0) || s->num_actions < 0 || s->action_dim < 0)
        return calf_error_set(err, CALF_EINVAL,
                              "env '%s': exactly one of num_actions (%d) and action_dim (%d) "
                              "must be positive",
                              n, s->num_actions, s->action_dim);
    if (s->action_dim > (1 << 16) || s->num_actions > (1 << 16))
        return calf_error_set(err, CALF_EINVAL, "env '%s': more than 2^16 actions", n);
    if (s->action_dim > 0 && (!s->action_low || !s->action_high))
        return calf_error_set(err, CALF_EINVAL, "env '%s': continuous actions need bounds", n);
    for (int j = 0; j < s->action_dim; j++) {
        float lo = s->action_low[j], hi = s->action_high[j];
        if (!isfinite(lo) || !isfinite(hi) || !(lo < hi))
            return calf_error_set(err, CALF_EINVAL,
                                  "env '%s': action bounds [%g, %g] of dimension %d are not "
                                  "finite with low < high",
                                  n, (double)lo, (double)hi, j);
    }
    if (s->max_episode_steps < 1)
        return calf_error_set(err, CALF_EINVAL, "env '%s': max_episode_steps %d < 1", n,
                              s->max_episode_steps);
    if (s->state_size < 1 || s->state_size > (1u << 20))
        return calf_error_set(err, CALF_EINVAL, "env '%s': state_size %zu not in [1, 1 MiB]", n,
                              s->state_size);
    if (cls->destroy && !cls->create && !cls->create_at)
        return calf_error_set(err, CALF_EINVAL, "env '%s': destroy without create", n);
    if (cls->create && cls->create_at)
        return calf_error_set(err, CALF_EINVAL, "env '%s': both create and create_at", n);
    if (!cls->save != !cls->load || (cls->save != NULL) != (s->save_size > 0))
        return calf_error_set(err, CALF_EINVAL,
                              "env '%s': save, load and save_size go together", n);
    if (s->save_size > (1u << 20))
        return calf_error_set(err, CALF_EINVAL, "env '%s': save_size %zu exceeds 1 MiB", n,
                              s->save_size);
    if ((cls->reset_state != NULL) != (s->reset_state_dim > 0) || s->reset_state_dim > (1 << 16))
        return calf_error_set(err, CALF_EINVAL,
                              "env '%s': reset_state and reset_state_dim (1..2^16) go together", n);
    int rc = check_spaces(s, err);
    if (rc == CALF_OK) rc = check_action_hooks(cls, err);
    return rc != CALF_OK ? rc : check_u8_hooks(cls, err);
}

/* calf_env_spec and calf_env_class as ABI version 2 laid them out (include/calf/env.h
 * before version 3 appended to the spec; tests/abi2/calf/env.h is that header, frozen,
 * and tests/e2e_plugin.sh trains with a plug-in built against it). */
typedef struct abi2_spec {
    const char *name;
    int obs_dim, num_actions, action_dim;
    const float *action_low, *action_high;
    int max_episode_steps;
    size_t state_size, save_size;
    int reset_state_dim;
} abi2_spec;
typedef struct abi2_class {
    abi2_spec spec;
    void (*reset)(void *state, calf_rng *rng, float *obs);
    int (*step)(void *state, calf_rng *rng, int action, const float *u, float *obs, float *reward);
    void (*observe)(const void *state, float *obs);
    void (*step_many)(struct calf_env *envs, int n, const int *actions, const float *u, float *obs,
                      float *reward, uint8_t *terminated);
    int (*create)(void *state, calf_error *err);
    void (*destroy)(void *state);
    void (*save)(const void *state, void *buf);
    int (*load)(void *state, const void *buf, calf_error *err);
    void (*reset_state)(const void *state, double *out);
    int (*render)(const void *state, int width, int height, uint8_t *rgb, calf_error *err);
    double render_fps;
    int (*create_at)(void *state, const struct calf_env_class *cls, uint64_t seed,
                     uint64_t index, calf_error *err);
    int (*failure)(const void *state, char *buf, size_t size);
    int (*load_restarts)(const void *state);
} abi2_class;
_Static_assert(CALF_PLUGIN_ABI_OLDEST == 2, "the loader converts version 2's layout only");

/* A class in this version's layout from a version-2 one: its fields, those since version
 * 3 zero, and no step_many (which may read calf_env_class in its own layout; the envs
 * then step one at a time, which by its contract gives the same bits). Caller frees. */
static calf_env_class *class_from_abi2(const abi2_class *o, calf_error *err) {
    calf_env_class *c = mem_calloc(1, sizeof *c, err);
    if (!c) return NULL;
    c->spec.name = o->spec.name;
    c->spec.obs_dim = o->spec.obs_dim;
    c->spec.num_actions = o->spec.num_actions;
    c->spec.action_dim = o->spec.action_dim;
    c->spec.action_low = o->spec.action_low;
    c->spec.action_high = o->spec.action_high;
    c->spec.max_episode_steps = o->spec.max_episode_steps;
    c->spec.state_size = o->spec.state_size;
    c->spec.save_size = o->spec.save_size;
    c->spec.reset_state_dim = o->spec.reset_state_dim;
    c->reset = o->reset;
    c->step = o->step;
    c->observe = o->observe;
    c->create = o->create;
    c->destroy = o->destroy;
    c->save = o->save;
    c->load = o->load;
    c->reset_state = o->reset_state;
    c->render = o->render;
    c->render_fps = o->render_fps;
    c->create_at = o->create_at;
    c->failure = o->failure;
    c->load_restarts = o->load_restarts;
    return c;
}

/* A class in this version's layout from a version-3 one: version 4 appended the byte
 * observation's hooks to calf_env_class and changed nothing before them, so its bytes
 * up to those, and the new hooks NULL (its envs write floats). Caller frees. */
static calf_env_class *class_from_abi3(const void *o, calf_error *err) {
    calf_env_class *c = mem_calloc(1, sizeof *c, err);
    if (c) memcpy(c, o, offsetof(calf_env_class, reset_u8));
    return c;
}
_Static_assert(CALF_PLUGIN_ABI_VERSION == 4, "version 3's class is version 4's up to reset_u8");

/* The class object its own hooks know: the plug-in's for a converted older class. */
static const calf_env_class *class_as_made(const calf_env_class *cls) {
    const calf_env_class *made = cls;
    lock_registry();
    for (int i = 0; i < num_registered; i++)
        if (registered[i] == cls && registered_old[i]) made = registered_old[i];
    unlock_registry();
    return made;
}

static int register_locked(const calf_env_class *cls, const void *old, calf_error *err);

int calf_env_register(const calf_env_class *cls, calf_error *err) {
    if (!cls) return calf_error_set(err, CALF_EINVAL, "env class is NULL");
    lock_registry();
    /* an older plug-in's register function, called by the loader with 2 or 3, passes its
     * classes in that version's layout */
    const void *old = loading_lib >= 0 && loading_abi < CALF_PLUGIN_ABI_VERSION ? cls : NULL;
    calf_env_class *copy = !old                ? NULL
                           : loading_abi == 2 ? class_from_abi2(old, err)
                                              : class_from_abi3(old, err);
    int rc = old && !copy ? CALF_ENOMEM : check_spec(copy ? copy : cls, err);
    if (rc == CALF_OK) rc = register_locked(copy ? copy : cls, old, err);
    if (rc != CALF_OK) free(copy);
    unlock_registry();
    return rc;
}

static int register_locked(const calf_env_class *cls, const void *old, calf_error *err) {
    const calf_env_class *taken = calf_env_find(cls->spec.name);
    if (taken) {
        const char *lib = calf_env_class_library(taken);
        int builtin = 0;
        for (int i = 0; i < NUM_BUILTINS; i++) builtin |= builtin_classes[i] == taken;
        return calf_error_set(err, CALF_EINVAL, "env '%s' is already registered%s%s", cls->spec.name,
                              builtin ? " (a built-in environment)" : lib ? " by library " : "",
                              builtin || !lib ? "" : lib);
    }
    if (calf_env_count() >= CALF_ENV_MAX_CLASSES)
        return calf_error_set(err, CALF_EINVAL, "cannot register env '%s': registry full (%d classes)",
                              cls->spec.name, CALF_ENV_MAX_CLASSES);
    registered_by[num_registered] = loading_lib;
    registered_old[num_registered] = old;
    registered[num_registered++] = cls;
    return CALF_OK;
}

const char *calf_env_class_library(const calf_env_class *cls) {
    const char *path = NULL;
    lock_registry();
    for (int i = 0; i < num_registered && !path; i++)
        if (registered[i] == cls && registered_by[i] >= 0) path = libs[registered_by[i]].path;
    unlock_registry();
    return path;
}

int calf_env_library_count(void) {
    lock_registry();
    int n = num_libs;
    unlock_registry();
    return n;
}

const char *calf_env_library_at(int i) {
    lock_registry();
    const char *path = i >= 0 && i < num_libs ? libs[i].path : NULL;
    unlock_registry();
    return path;
}

int calf_plugin_check_abi(int loader_abi, int plugin_abi, calf_error *err) {
    if (loader_abi == plugin_abi) return CALF_OK;
    lock_registry();
    if (loading_lib >= 0) loading_told_abi = plugin_abi; /* the loader may call it again */
    unlock_registry();
    return calf_error_set(err, CALF_EINVAL,
                          "built for calf plug-in ABI version %d, but this calf has version %d "
                          "(and loads versions %d to %d): rebuild it against this calf's headers",
                          plugin_abi, loader_abi, CALF_PLUGIN_ABI_OLDEST, CALF_PLUGIN_ABI_VERSION);
}

static int load_library_locked(const char *path, const char *abs, calf_error *err);

int calf_env_load_library(const char *path, calf_error *err) {
    if (!path || !path[0]) return calf_error_set(err, CALF_EINVAL, "--env_lib: empty path");
    char abs[PATH_MAX];
    if (!realpath(path, abs))
        return calf_error_set(err, CALF_EINVAL, "--env_lib %s: %s", path, strerror(errno));
    lock_registry();
    int rc = load_library_locked(path, abs, err);
    unlock_registry();
    return rc;
}

static int load_library_locked(const char *path, const char *abs, calf_error *err) {
    for (int i = 0; i < num_libs; i++)
        if (strcmp(libs[i].path, abs) == 0) return CALF_OK; /* already loaded */
    if (num_libs >= CALF_ENV_MAX_LIBRARIES)
        return calf_error_set(err, CALF_EINVAL, "--env_lib %s: more than %d libraries", path,
                              CALF_ENV_MAX_LIBRARIES);
    /* The name is copied first: nothing of the library is loaded if that fails. */
    char *kept = mem_strdup(abs, err);
    if (!kept) return CALF_ENOMEM;
    /* RTLD_LOCAL: two plug-ins may use the same names for their own functions */
    void *h = dlopen(abs, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        free(kept);
        return calf_error_set(err, CALF_EINVAL, "--env_lib %s: cannot load it: %s", path,
                              why ? why : "unknown error");
    }
    dlerror();
    void *sym = dlsym(h, CALF_PLUGIN_REGISTER_NAME);
    if (!sym) {
        dlclose(h);
        free(kept);
        return calf_error_set(err, CALF_EINVAL,
                              "--env_lib %s: not a calf plug-in: it defines no function "
                              CALF_PLUGIN_REGISTER_NAME " (see include/calf/env.h)",
                              path);
    }
    calf_plugin_register_fn reg = (calf_plugin_register_fn)sym;
    int before = num_registered;
    calf_error why;
    calf_error_clear(&why);
    loading_lib = num_libs;
    loading_abi = CALF_PLUGIN_ABI_VERSION;
    loading_told_abi = 0;
    int rc = reg(CALF_PLUGIN_ABI_VERSION, &why);
    if (rc != CALF_OK && num_registered == before && loading_told_abi >= CALF_PLUGIN_ABI_OLDEST &&
        loading_told_abi < CALF_PLUGIN_ABI_VERSION) {
        calf_error_clear(&why); /* built against an older version's headers: asked again in those */
        loading_abi = loading_told_abi;
        rc = reg(loading_abi, &why);
    }
    loading_lib = -1;
    loading_abi = CALF_PLUGIN_ABI_VERSION;
    if (rc == CALF_OK && num_registered == before)
        rc = calf_error_set(&why, CALF_EINVAL,
                            "it registered no environment (a plug-in calls calf_env_register, "
                            "and is not linked against a libcalf of its own)");
    if (rc != CALF_OK) {
        for (int i = before; i < num_registered; i++) /* nothing of it stays: its classes go */
            if (registered_old[i]) free((void *)registered[i]);
        num_registered = before;
        dlclose(h);
        free(kept);
        return calf_error_set(err, CALF_EINVAL, "--env_lib %s: %s", path,
                              why.msg[0] ? why.msg : CALF_PLUGIN_REGISTER_NAME " failed");
    }
    libs[num_libs].path = kept;
    libs[num_libs].handle = h;
    num_libs++;
    return CALF_OK;
}

int calf_env_init(calf_env *env, const char *name, uint64_t seed, uint64_t index, calf_error *err) {
    CALF_ASSERT(env != NULL);
    memset(env, 0, sizeof *env);
    const calf_env_class *cls = calf_env_lookup(name, err);
    if (!cls) return CALF_EINVAL;
    env->state = mem_calloc(1, cls->spec.state_size, err);
    if (!env->state) return CALF_ENOMEM;
    if (cls->spec.action_dim > 0) {
        env->clipped = mem_calloc((size_t)cls->spec.action_dim, sizeof *env->clipped, err);
        if (!env->clipped) {
            calf_env_free(env);
            return CALF_ENOMEM;
        }
    }
    if (cls->create || cls->create_at) {
        int rc = cls->create ? cls->create(env->state, err)
                             : cls->create_at(env->state, class_as_made(cls), seed, index, err);
        if (rc != CALF_OK) {
            calf_env_free(env); /* cls not yet set: no destroy of what was not created */
            return rc;
        }
    }
    env->cls = cls;
    calf_rng_seed(&env->rng, seed, index, CALF_RNG_DYNAMICS);
    env->elapsed_steps = 0;
    return CALF_OK;
}

void calf_env_free(calf_env *env) {
    if (!env) return;
    if (env->cls && env->cls->destroy && env->state) env->cls->destroy(env->state);
    free(env->state);
    free(env->clipped);
    memset(env, 0, sizeof *env);
}

size_t calf_env_saved_size(const calf_env_class *cls) {
    return cls->save ? cls->spec.save_size : cls->spec.state_size;
}

void calf_env_save_state(const calf_env *env, void *buf) {
    if (env->cls->save)
        env->cls->save(env->state, buf);
    else
        memcpy(buf, env->state, env->cls->spec.state_size);
}

int calf_env_load_state(calf_env *env, const void *buf, calf_error *err) {
    if (env->cls->load) return env->cls->load(env->state, buf, err);
    memcpy(env->state, buf, env->cls->spec.state_size);
    return CALF_OK;
}

int calf_env_reset_state(const calf_env *env, double *out) {
    if (!env->cls->reset_state) return 0;
    env->cls->reset_state(env->state, out);
    return env->cls->spec.reset_state_dim;
}

void calf_env_reset(calf_env *env, float *obs) {
    env->elapsed_steps = 0;
    env->cls->reset(env->state, &env->rng, obs);
}

int calf_env_action_ints(const calf_env_spec *spec) {
    return spec->num_action_dims > 0 ? spec->num_action_dims : 1;
}

int calf_env_action_mask(const calf_env *env, uint8_t *mask) {
    const calf_env_class *cls = env->cls;
    const calf_env_spec *sp = &cls->spec;
    if (!cls->action_mask) {
        memset(mask, 1, (size_t)sp->num_actions);
        return 0;
    }
    cls->action_mask(env->state, mask);
    int empty = 0, dims = calf_env_action_ints(sp);
    for (int d = 0, off = 0; d < dims; d++) {
        int w = sp->num_action_dims > 0 ? sp->action_nvec[d] : sp->num_actions, any = 0;
        for (int j = 0; j < w; j++) any |= mask[off + j] != 0;
        if (!any) {
            memset(mask + off, 1, (size_t)w);
            empty = 1;
        }
        off += w;
    }
    return empty;
}

void calf_env_step(calf_env *env, int action, const float *u, float *obs, float *reward,
                   int *terminated, int *truncated) {
    calf_env_step_actions(env, &action, u, obs, reward, terminated, truncated);
}

/* A continuous action clipped to the bounds in env->clipped (NULL for a discrete one).
 * Comparisons, not fminf/fmaxf: a NaN action stays NaN (as np.clip). */
static const float *clip_action(calf_env *env, const float *u) {
    const calf_env_spec *spec = &env->cls->spec;
    if (spec->action_dim == 0) return NULL;
    CALF_ASSERT(u != NULL);
    for (int j = 0; j < spec->action_dim; j++) {
        float x = u[j];
        env->clipped[j] = x < spec->action_low[j] ? spec->action_low[j]
                          : x > spec->action_high[j] ? spec->action_high[j] : x;
    }
    return env->clipped;
}

/* The flags of a step whose hook returned r, and its count against the time limit. */
static void end_step(calf_env *env, int r, int *terminated, int *truncated) {
    int term = r != 0 && r != CALF_ENV_TRUNCATED;
    env->elapsed_steps++;
    *terminated = term;
    *truncated = !term && (r == CALF_ENV_TRUNCATED ||
                           env->elapsed_steps >= env->cls->spec.max_episode_steps);
}

void calf_env_step_actions(calf_env *env, const int *actions, const float *u, float *obs,
                           float *reward, int *terminated, int *truncated) {
    const calf_env_class *cls = env->cls;
    const calf_env_spec *spec = &cls->spec;
    const float *uc = clip_action(env, u);
    int r;
    if (spec->num_action_dims > 0) {
        for (int d = 0; d < spec->num_action_dims; d++)
            CALF_ASSERT(actions[d] >= 0 && actions[d] < spec->action_nvec[d]);
        r = cls->step_multi(env->state, &env->rng, actions, obs, reward);
    } else {
        int action = 0;
        if (spec->action_dim == 0) {
            action = actions[0];
            CALF_ASSERT(action >= 0 && action < spec->num_actions);
        }
        r = cls->step(env->state, &env->rng, action, uc, obs, reward);
    }
    end_step(env, r, terminated, truncated);
}

void env_reset_u8(calf_env *env, uint8_t *obs) {
    CALF_ASSERT(env->cls->reset_u8 != NULL);
    env->elapsed_steps = 0;
    env->cls->reset_u8(env->state, &env->rng, obs);
}

void env_step_u8(calf_env *env, int action, const float *u, uint8_t *obs, float *reward,
                 int *terminated, int *truncated) {
    const calf_env_class *cls = env->cls;
    CALF_ASSERT(cls->step_u8 != NULL);
    const float *uc = clip_action(env, u);
    if (cls->spec.action_dim == 0) CALF_ASSERT(action >= 0 && action < cls->spec.num_actions);
    else action = 0;
    end_step(env, cls->step_u8(env->state, &env->rng, action, uc, obs, reward), terminated,
             truncated);
}
