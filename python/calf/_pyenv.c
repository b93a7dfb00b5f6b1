/* _pyenv.c: Gymnasium-API Python environments as calf env classes, so calf's C trainer
 * steps them like its own: one class object per factory (calf.register_env), one Python
 * env object per calf env, created by the process that owns the env and seeded once
 * with reset(seed=job seed + global index); checkpoints hold each env's pickled state,
 * signed with this user's key, and a resume unpickles only what that key signed unless
 * the user trusts the checkpoint (unpickling runs code). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL calf_numpy_api
#define NO_IMPORT_ARRAY
#include <numpy/arrayobject.h>

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "_calf.h"
#include "_pyenv.h"
#include "calf/env.h"
#include "calf/error.h"

/* Saved state: u32 magic, u32 length (NOT_SAVED: no state, then u32 why and u32 the
 * pickle's size when it did not fit), the pickle's HMAC-SHA256 under this user's key
 * (calf/_ckpt_key.py), then the pickle's bytes and zeros up to the class's save_size. "CPY1" states (before the signature) have no
 * HMAC: u32 magic, u32 length, the pickle; they load only when trusted. A class with an
 * action mask keeps the env's last mask (num_actions bytes) at the end of save_size: it
 * came from an info dict or an observation, which the pickle does not hold. */
#define SAVE_MAGIC 0x32595043u    /* "CPY2" read as little-endian bytes */
#define SAVE_MAGIC_V1 0x31595043u /* "CPY1": unsigned */
#define SAVE_MAC 32
#define SAVE_HEADER (8 + SAVE_MAC)
#define SAVE_HEADER_V1 8
#define NOT_SAVED 0xFFFFFFFFu
enum { UNSAVED_UNPICKLABLE = 1, UNSAVED_TOO_BIG = 2, UNSAVED_UNSIGNED = 3 };
#define PICKLE_PROTOCOL 4      /* fixed, so the bytes do not follow Python's default */
#define PYENV_NAME_SIZE 200    /* a class name's room, its NUL included */
#define PYENV_MAX_DIMS 1024    /* MultiDiscrete sub-actions (env.c's bound) */
#define PYENV_PART_NAME 65     /* a Dict part's name's room (env.c takes 64), NUL included */

typedef struct pyenv_class {
    calf_env_class cls;  /* first: hooks get &cls and cast back */
    char name[PYENV_NAME_SIZE];
    PyObject *module;    /* strong: the module that registered it, whose state mod is */
    pyenv_module *mod;   /* the module's state: pickle's functions, the first error */
    PyObject *factory;   /* strong; replaced when the same name is registered again */
    PyObject *key;       /* strong bytes: the key that signs its envs' pickles */
    PyObject *key_path;  /* strong str: the file the key came from, for messages */
    float *low, *high;   /* (action_dim) continuous bounds, or NULL */
    /* the observation the env returns: a Box's shape (a tuple of ints), or for a Dict of
     * Boxes its keys in the order calf flattens them and each key's Box shape (tuples) */
    PyObject *box_shape, *dict_keys, *dict_shapes; /* strong, or NULL */
    calf_obs_part *parts; /* (number of dict_keys) the spec's obs_parts, or NULL */
    char *part_names;     /* (number of dict_keys, PYENV_PART_NAME) their names */
    int *nvec;           /* (num_action_dims) MultiDiscrete sizes, or NULL */
    int masked;          /* each reset and step returns an action mask */
    int unsaved_said;    /* an env's state did not fit or pickle: said once */
    int trusted_said;    /* an unsigned state was unpickled on trust: said once */
} pyenv_class;

typedef struct pyenv_state {
    const pyenv_class *pc;
    PyObject *env;        /* strong: the env object */
    PyObject *step_fn;    /* strong: env.step, looked up once */
    PyObject *first_seed; /* strong: the seed of the first reset, NULL once used */
    uint64_t index;       /* global env index */
    int restarted;        /* the last load found no saved state */
    uint8_t *mask;        /* (num_actions) the last action mask, when the class is masked */
    int failed;           /* a calf_status: reset/step raised (CALF_EIO) or returned a
                             wrong value (CALF_EINVAL); CALF_OK while it has not */
    char failure[400];
} pyenv_state;

/* ---- failures ------------------------------------------------------------------- */

/* Record the pending Python exception (or, with no exception, `what`) as env s's
 * failure: one line for calf's fault message; the exception object is kept for
 * calf.train to chain, and its traceback printed where no caller will see it. */
static void env_fail(pyenv_state *s, const char *where, const char *what) {
    pyenv_module *mod = s->pc->mod;
    if (s->failed) {
        PyErr_Clear();
        return;
    }
    if (!PyErr_Occurred()) {
        s->failed = CALF_EINVAL;
        snprintf(s->failure, sizeof s->failure, "%s %s", where, what);
        return;
    }
    s->failed = CALF_EIO;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb && value) PyException_SetTraceback(value, tb);
    const char *tname = type ? ((PyTypeObject *)type)->tp_name : "an exception";
    PyObject *str = value ? PyObject_Str(value) : NULL;
    const char *msg = str ? PyUnicode_AsUTF8(str) : NULL;
    if (!msg) PyErr_Clear();
    /* where the exception came from: the innermost frame */
    char at[160] = "";
    PyTracebackObject *t = (PyTracebackObject *)tb;
    while (t && t->tb_next) t = t->tb_next;
    if (t && t->tb_frame) {
        PyCodeObject *code = PyFrame_GetCode(t->tb_frame);
        const char *file = code ? PyUnicode_AsUTF8(code->co_filename) : NULL;
        if (file) snprintf(at, sizeof at, " (%s:%d)", file, t->tb_lineno);
        else PyErr_Clear();
        Py_XDECREF(code);
    }
    snprintf(s->failure, sizeof s->failure, "%s raised %s: %s%s", where, tname,
             msg ? msg : "?", at);
    Py_XDECREF(str);
    if (mod->print_tracebacks || getpid() != mod->pid) {
        PySys_WriteStderr("calf: env %llu (%s): %s raised:\n", (unsigned long long)s->index,
                          s->pc->name, where);
        /* PyErr_Display, not PyErr_Print: that one exits the process on SystemExit,
         * running the host's atexit handlers in a forked worker */
        if (type && value) PyErr_Display(type, value, tb);
    }
    if (!mod->first_error && value) {
        mod->first_error = value;
        value = NULL;
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

static void fill_nan(float *x, int n) {
    for (int j = 0; j < n; j++) x[j] = NAN;
}

/* Whether arr's shape is `shape` (a tuple of ints). */
static int shape_is(PyArrayObject *arr, PyObject *shape) {
    Py_ssize_t nd = PyTuple_GET_SIZE(shape);
    if (PyArray_NDIM(arr) != nd) return 0;
    for (Py_ssize_t k = 0; k < nd; k++)
        if (PyArray_DIMS(arr)[k] != PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, k))) return 0;
    return 1;
}

/* One Box's observation obj of `shape` into out (its size in float32, C order, NumPy's
 * cast: uint8 and bool exact); 0 with s failed. part: which Box of a Dict it is, for the
 * message ("" for a Box space, " part 'image'"). */
static int read_box(pyenv_state *s, const char *where, const char *part, PyObject *obj,
                    PyObject *shape, float *out) {
    /* The common cases without a temporary array: float64 (Gymnasium's classic-control and
     * MuJoCo envs) rounded to float32 as NumPy's cast rounds, float32 copied, and the
     * bytes of images. */
    if (PyArray_CheckExact(obj) && shape_is((PyArrayObject *)obj, shape) &&
        PyArray_ISCARRAY_RO((PyArrayObject *)obj) && PyArray_ISNOTSWAPPED((PyArrayObject *)obj)) {
        PyArrayObject *arr = (PyArrayObject *)obj;
        npy_intp n = PyArray_SIZE(arr);
        int type = PyArray_TYPE(arr);
        if (type == NPY_FLOAT64) {
            const double *d = PyArray_DATA(arr);
            for (npy_intp j = 0; j < n; j++) out[j] = (float)d[j];
            return 1;
        }
        if (type == NPY_FLOAT32) {
            memcpy(out, PyArray_DATA(arr), (size_t)n * sizeof *out);
            return 1;
        }
        if (type == NPY_UINT8 || type == NPY_BOOL) {
            const uint8_t *b = PyArray_DATA(arr);
            for (npy_intp j = 0; j < n; j++) out[j] = (float)b[j];
            return 1;
        }
    }
    PyObject *a = PyArray_FromAny(obj, PyArray_DescrFromType(NPY_FLOAT32), 0, 0,
                                  NPY_ARRAY_CARRAY_RO | NPY_ARRAY_FORCECAST, NULL);
    if (!a) {
        env_fail(s, where, "");
        return 0;
    }
    PyArrayObject *arr = (PyArrayObject *)a;
    if (!shape_is(arr, shape)) {
        char what[300], want[96] = "?";
        PyObject *r = PyObject_Repr(shape);
        const char *rs = r ? PyUnicode_AsUTF8(r) : NULL;
        if (rs) snprintf(want, sizeof want, "%s", rs);
        Py_XDECREF(r);
        PyErr_Clear();
        int nd = PyArray_NDIM(arr);
        snprintf(what, sizeof what,
                 "returned an observation%s of %d dimension%s (first %ld), not shape %s as "
                 "its observation_space",
                 part, nd, nd == 1 ? "" : "s", nd > 0 ? (long)PyArray_DIMS(arr)[0] : 0L, want);
        Py_DECREF(a);
        env_fail(s, where, what);
        return 0;
    }
    memcpy(out, PyArray_DATA(arr), (size_t)PyArray_SIZE(arr) * sizeof *out);
    Py_DECREF(a);
    return 1;
}

/* obs (any array-like; for a Dict space a mapping of them) into out (obs_dim float32:
 * a Dict's Boxes one after another in the class's key order); 0 with s failed. */
static int read_obs(pyenv_state *s, const char *where, PyObject *obj, float *out) {
    const pyenv_class *pc = s->pc;
    if (!pc->dict_keys) return read_box(s, where, "", obj, pc->box_shape, out);
    if (!PyMapping_Check(obj) || PyUnicode_Check(obj) || PyBytes_Check(obj)) {
        env_fail(s, where, "returned an observation that is not a dict, as its Dict "
                           "observation_space says");
        return 0;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(pc->dict_keys);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *key = PyTuple_GET_ITEM(pc->dict_keys, k);
        PyObject *shape = PyTuple_GET_ITEM(pc->dict_shapes, k);
        char part[140] = " part ?";
        PyObject *r = PyObject_Repr(key);
        const char *rs = r ? PyUnicode_AsUTF8(r) : NULL;
        if (rs) snprintf(part, sizeof part, " part %s", rs);
        Py_XDECREF(r);
        PyErr_Clear();
        PyObject *v = PyObject_GetItem(obj, key); /* new reference */
        if (!v) {
            PyErr_Clear();
            char what[200];
            snprintf(what, sizeof what, "returned an observation without its%s", part);
            env_fail(s, where, what);
            return 0;
        }
        int ok = read_box(s, where, part, v, shape, out);
        Py_DECREF(v);
        if (!ok) return 0;
        Py_ssize_t size = 1;
        for (Py_ssize_t d = 0; d < PyTuple_GET_SIZE(shape); d++)
            size *= PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
        out += size;
    }
    return 1;
}

/* ---- action masks ------------------------------------------------------------------ */

/* Bytes a masked class keeps after the pickle's room (see the saved state above). */
static size_t mask_room(const pyenv_class *pc) {
    return pc->masked ? (size_t)pc->cls.spec.num_actions : 0;
}

/* The mask `obj` into s->mask: num_actions numbers (any shape, nonzero valid), or for
 * MultiDiscrete a sequence of one array per sub-action (Gymnasium's MultiDiscrete mask
 * is a tuple). 0 with s failed. */
static int read_mask_value(pyenv_state *s, const char *where, PyObject *obj) {
    const calf_env_spec *sp = &s->pc->cls.spec;
    const int n = sp->num_actions, D = sp->num_action_dims;
    PyObject *parts = NULL; /* a new list of the per-sub-action arrays, or NULL */
    if (D > 1 && (PyTuple_Check(obj) || PyList_Check(obj)) && PySequence_Size(obj) == D) {
        PyObject *first = PySequence_GetItem(obj, 0);
        int nested = first && (PySequence_Check(first) || PyArray_Check(first));
        Py_XDECREF(first);
        if (nested) parts = PySequence_List(obj);
        if (!parts) PyErr_Clear();
    }
    int got = 0, ok = 1;
    for (int d = 0; ok && d < (parts ? D : 1); d++) {
        PyObject *item = parts ? PyList_GET_ITEM(parts, d) : obj; /* borrowed */
        PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(item, NPY_DOUBLE, 0, 0,
                                                             NPY_ARRAY_CARRAY_RO |
                                                                 NPY_ARRAY_FORCECAST);
        if (!a) {
            env_fail(s, where, "");
            ok = 0;
            break;
        }
        npy_intp size = PyArray_SIZE(a);
        int want = parts ? sp->action_nvec[d] : n;
        if (size != want) {
            char what[200];
            snprintf(what, sizeof what,
                     "returned an action_mask of %ld values%s, not %d (its action space's)",
                     (long)size, parts ? " for a sub-action" : "", want);
            Py_DECREF(a);
            env_fail(s, where, what);
            ok = 0;
            break;
        }
        const double *v = PyArray_DATA(a);
        for (npy_intp j = 0; j < size; j++) s->mask[got + j] = v[j] != 0.0;
        got += (int)size;
        Py_DECREF(a);
    }
    Py_XDECREF(parts);
    return ok;
}

/* A masked class's mask after reset or step: the observation's "action_mask" key when
 * the observation is a dict that has one (it wins: it belongs to that observation),
 * else info["action_mask"]. *obs becomes a new reference to the observation to read
 * (the dict without that key; its one value when one is left, as register_env read the
 * space). 0 with s failed (and *obs NULL). */
static int read_mask(pyenv_state *s, const char *where, PyObject **obs, PyObject *info) {
    PyObject *o = *obs;
    *obs = NULL;
    PyObject *m = PyDict_Check(o) ? PyDict_GetItemString(o, "action_mask") : NULL; /* borrowed */
    if (m) {
        PyObject *rest = PyDict_Copy(o);
        if (!rest || PyDict_DelItemString(rest, "action_mask") != 0) {
            Py_XDECREF(rest);
            env_fail(s, where, "");
            return 0;
        }
        if (!read_mask_value(s, where, m)) {
            Py_DECREF(rest);
            return 0;
        }
        if (PyDict_Size(rest) == 1) { /* {"observation": ..., "action_mask": ...}: the one */
            Py_ssize_t pos = 0;
            PyObject *k, *v;
            PyDict_Next(rest, &pos, &k, &v);
            Py_INCREF(v);
            Py_SETREF(rest, v);
        }
        *obs = rest;
        return 1;
    }
    m = info && PyDict_Check(info) ? PyDict_GetItemString(info, "action_mask") : NULL;
    if (!m) {
        env_fail(s, where, "returned no action mask (info[\"action_mask\"], or an "
                           "\"action_mask\" key of a dict observation), which it returned when "
                           "it was registered");
        return 0;
    }
    if (!read_mask_value(s, where, m)) return 0;
    Py_INCREF(o);
    *obs = o;
    return 1;
}

/* read_obs, after the action mask for a masked class (read_mask). */
static int read_obs_mask(pyenv_state *s, const char *where, PyObject *obs, PyObject *info,
                         float *out) {
    if (!s->pc->masked) return read_obs(s, where, obs, out);
    PyObject *o = obs;
    if (!read_mask(s, where, &o, info)) return 0;
    int ok = read_obs(s, where, o, out);
    Py_DECREF(o);
    return ok;
}

static void pyenv_action_mask(const void *state, uint8_t *mask) {
    const pyenv_state *s = state;
    memcpy(mask, s->mask, (size_t)s->pc->cls.spec.num_actions);
}

/* ---- the hooks -------------------------------------------------------------------- */

static int pyenv_create_at(void *state, const calf_env_class *cls, uint64_t seed,
                           uint64_t index, calf_error *err) {
    pyenv_state *s = state;
    const pyenv_class *pc = (const pyenv_class *)cls;
    s->pc = pc;
    s->index = index;
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = CALF_OK;
    if (pc->masked) { /* all valid until the env says (a failed reset leaves it so) */
        s->mask = PyMem_RawMalloc((size_t)pc->cls.spec.num_actions);
        if (!s->mask) {
            PyGILState_Release(g);
            return calf_error_set(err, CALF_ENOMEM, "out of memory allocating env %llu's mask",
                                  (unsigned long long)index);
        }
        memset(s->mask, 1, (size_t)pc->cls.spec.num_actions);
    }
    PyObject *base = PyLong_FromUnsignedLongLong(seed), *idx = PyLong_FromUnsignedLongLong(index);
    s->first_seed = base && idx ? PyNumber_Add(base, idx) : NULL;
    Py_XDECREF(base);
    Py_XDECREF(idx);
    s->env = s->first_seed ? PyObject_CallNoArgs(pc->factory) : NULL;
    if (!s->env) {
        pyenv_state tmp = *s;
        env_fail(&tmp, "its factory", "");
        rc = calf_error_set(err, CALF_EINVAL, "environment %s, env index %llu: %s", pc->name,
                            (unsigned long long)index, tmp.failure);
        Py_CLEAR(s->first_seed);
    }
    PyGILState_Release(g);
    return rc;
}

static void pyenv_destroy(void *state) {
    pyenv_state *s = state;
    PyGILState_STATE g = PyGILState_Ensure();
    /* close() is optional, as in Gymnasium's Env, whose default does nothing */
    if (s->env && PyObject_HasAttrString(s->env, "close")) {
        PyObject *r = PyObject_CallMethod(s->env, "close", NULL);
        if (!r) {
            PySys_WriteStderr("calf: env %llu (%s): close() raised; ignored\n",
                              (unsigned long long)s->index, s->pc->name);
            PyErr_Clear();
        }
        Py_XDECREF(r);
    }
    Py_CLEAR(s->step_fn);
    Py_CLEAR(s->env);
    Py_CLEAR(s->first_seed);
    PyMem_RawFree(s->mask);
    s->mask = NULL;
    PyGILState_Release(g);
}

static void pyenv_reset(void *state, calf_rng *rng, float *obs) {
    (void)rng; /* the env draws from its own generator, seeded once */
    pyenv_state *s = state;
    const int dim = s->pc->cls.spec.obs_dim;
    if (s->failed) {
        fill_nan(obs, dim);
        return;
    }
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *r = NULL;
    if (s->first_seed) {
        PyObject *args = PyTuple_New(0), *kw = Py_BuildValue("{s:O}", "seed", s->first_seed);
        PyObject *f = PyObject_GetAttrString(s->env, "reset");
        if (args && kw && f) r = PyObject_Call(f, args, kw);
        Py_XDECREF(args);
        Py_XDECREF(kw);
        Py_XDECREF(f);
        Py_CLEAR(s->first_seed);
    } else {
        r = PyObject_CallMethod(s->env, "reset", NULL);
    }
    int ok = 0;
    if (!r) {
        env_fail(s, "reset()", "");
    } else if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2) {
        env_fail(s, "reset()", "returned something other than a tuple (obs, info)");
    } else {
        ok = read_obs_mask(s, "reset()", PyTuple_GET_ITEM(r, 0), PyTuple_GET_ITEM(r, 1), obs);
    }
    if (!ok) fill_nan(obs, dim);
    Py_XDECREF(r);
    PyGILState_Release(g);
}

/* env.step(action) of a discrete (action), MultiDiscrete (actions: an int64 array of
 * num_action_dims, as Gymnasium's MultiDiscrete samples) or continuous (u) env. */
static int step_env(pyenv_state *s, int action, const int *actions, const float *u, float *obs,
                    float *reward) {
    const calf_env_spec *spec = &s->pc->cls.spec;
    if (s->failed) {
        fill_nan(obs, spec->obs_dim);
        *reward = NAN;
        return 1;
    }
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *a;
    if (spec->action_dim > 0) {
        npy_intp dims[1] = {spec->action_dim};
        a = PyArray_SimpleNew(1, dims, NPY_FLOAT32);
        if (a && u) memcpy(PyArray_DATA((PyArrayObject *)a), u, (size_t)spec->action_dim * sizeof *u);
    } else if (actions) {
        npy_intp dims[1] = {spec->num_action_dims};
        a = PyArray_SimpleNew(1, dims, NPY_INT64);
        for (int d = 0; a && d < spec->num_action_dims; d++)
            ((int64_t *)PyArray_DATA((PyArrayObject *)a))[d] = actions[d];
    } else {
        a = PyLong_FromLong(action);
    }
    if (!s->step_fn) s->step_fn = PyObject_GetAttrString(s->env, "step");
    PyObject *r = a && s->step_fn ? PyObject_CallOneArg(s->step_fn, a) : NULL;
    Py_XDECREF(a);
    int ret = 1, ok = 0;
    if (!r) {
        env_fail(s, "step()", "");
    } else if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 5) {
        env_fail(s, "step()",
                 "returned something other than Gymnasium's 5-tuple (obs, reward, "
                 "terminated, truncated, info)");
    } else if (read_obs_mask(s, "step()", PyTuple_GET_ITEM(r, 0), PyTuple_GET_ITEM(r, 4), obs)) {
        double rew = PyFloat_AsDouble(PyTuple_GET_ITEM(r, 1));
        int term = PyObject_IsTrue(PyTuple_GET_ITEM(r, 2));
        int trunc = PyObject_IsTrue(PyTuple_GET_ITEM(r, 3));
        if (PyErr_Occurred() || term < 0 || trunc < 0) {
            env_fail(s, "step()", "");
        } else {
            *reward = (float)rew;
            ret = term ? 1 : trunc ? CALF_ENV_TRUNCATED : 0;
            ok = 1;
        }
    }
    if (!ok) {
        fill_nan(obs, spec->obs_dim);
        *reward = NAN;
    }
    Py_XDECREF(r);
    PyGILState_Release(g);
    return ret;
}

static int pyenv_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                      float *reward) {
    (void)rng;
    return step_env(state, action, NULL, u, obs, reward);
}

static int pyenv_step_multi(void *state, calf_rng *rng, const int *actions, float *obs,
                            float *reward) {
    (void)rng;
    return step_env(state, 0, actions, NULL, obs, reward);
}

static int pyenv_failure(const void *state, char *buf, size_t size) {
    const pyenv_state *s = state;
    if (s->failed != CALF_OK) snprintf(buf, size, "%s", s->failure);
    return s->failed;
}

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* mac = HMAC-SHA256(the class's key, data[0..n)); 0, or -1 with an exception set. */
static int sign(const pyenv_class *pc, const void *data, size_t n, unsigned char mac[SAVE_MAC]) {
    PyObject *view = PyMemoryView_FromMemory((char *)data, (Py_ssize_t)n, PyBUF_READ);
    PyObject *d = view ? PyObject_CallFunction(pc->mod->hmac_digest, "OOs", pc->key, view,
                                               "sha256")
                       : NULL;
    Py_XDECREF(view);
    int ok = d && PyBytes_Check(d) && PyBytes_GET_SIZE(d) == SAVE_MAC;
    if (ok) memcpy(mac, PyBytes_AS_STRING(d), SAVE_MAC);
    else if (d) PyErr_SetString(PyExc_ValueError, "hmac.digest: not a SHA-256 digest");
    Py_XDECREF(d);
    return ok ? 0 : -1;
}

/* state_bytes that hold a pickle of n bytes with room to grow: twice what it needs, in
 * whole KiB (register_env's own default is eight times a fresh pickle). */
static size_t roomy(size_t n) { return ((n + SAVE_HEADER) * 2 + 1023) / 1024 * 1024; }

static void pyenv_save(const void *state, void *buf) {
    const pyenv_state *s = state;
    const size_t cap = s->pc->cls.spec.save_size - mask_room(s->pc);
    unsigned char *p = buf;
    memset(p, 0, cap);
    if (s->pc->masked) memcpy(p + cap, s->mask, mask_room(s->pc));
    put_u32(p, SAVE_MAGIC);
    put_u32(p + 4, NOT_SAVED);
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *b = PyObject_CallFunction(s->pc->mod->pickle_dumps, "Oi", s->env, PICKLE_PROTOCOL);
    /* said once per class and process: register_env already warned of an env that
     * cannot be pickled at all */
    int *said = &((pyenv_class *)s->pc)->unsaved_said;
    if (!b) {
        if (!*said)
            PySys_WriteStderr("calf: env %llu (%s): cannot be pickled; checkpoints do not hold "
                              "its state, and a resume starts a new episode there\n",
                              (unsigned long long)s->index, s->pc->name);
        *said = 1;
        PyErr_Clear();
        put_u32(p + 8, UNSAVED_UNPICKLABLE);
    } else if ((size_t)PyBytes_GET_SIZE(b) > cap - SAVE_HEADER) {
        size_t n = (size_t)PyBytes_GET_SIZE(b);
        if (!*said)
            PySys_WriteStderr("calf: env %llu (%s): its pickle (%zu bytes) outgrew the %zu bytes "
                              "its checkpoint slot holds, so checkpoints do not hold its state "
                              "and a resume starts a new episode there; a run started with "
                              "register_env(state_bytes=%zu) or --env_py_state_bytes %zu keeps "
                              "it\n",
                              (unsigned long long)s->index, s->pc->name, n, cap - SAVE_HEADER,
                              roomy(n), roomy(n));
        *said = 1;
        put_u32(p + 8, UNSAVED_TOO_BIG);
        put_u32(p + 12, n > UINT32_MAX ? UINT32_MAX : (uint32_t)n);
    } else if (sign(s->pc, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b), p + 8) != 0) {
        if (!*said)
            PySys_WriteStderr("calf: env %llu (%s): its pickle could not be signed; "
                              "checkpoints do not hold its state\n",
                              (unsigned long long)s->index, s->pc->name);
        *said = 1;
        PyErr_Clear();
        memset(p + 8, 0, SAVE_MAC);
        put_u32(p + 8, UNSAVED_UNSIGNED);
    } else {
        put_u32(p + 4, (uint32_t)PyBytes_GET_SIZE(b));
        memcpy(p + SAVE_HEADER, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
    }
    Py_XDECREF(b);
    PyGILState_Release(g);
}

/* set_trust_checkpoint's flag: the calling thread's, not the module's, since a resume
 * runs in the thread that opens the run (and in the workers it forks, which copy it),
 * and a trust=True given to one thread's run must not reach a run another thread opens
 * meanwhile. */
static _Thread_local int trust_checkpoint;

/* Whether the pickle of len bytes at p + header may be unpickled: signed with the class's
 * key, or trusted by the user for this resume. 0, or -1 with err set (and no exception
 * left pending). The GIL is held. */
static int check_signed(pyenv_state *s, const unsigned char *p, size_t header, uint32_t len,
                        calf_error *err) {
    pyenv_class *pc = (pyenv_class *)s->pc;
    int good = 0;
    if (header == SAVE_HEADER) {
        unsigned char mac[SAVE_MAC], diff = 0;
        if (sign(pc, p + header, len, mac) != 0) {
            pyenv_state tmp = *s;
            tmp.failed = CALF_OK;
            env_fail(&tmp, "signing it", "");
            calf_error_set(err, CALF_EINVAL, "%s", tmp.failure);
            return -1;
        }
        for (int i = 0; i < SAVE_MAC; i++) diff |= (unsigned char)(mac[i] ^ p[8 + i]);
        good = diff == 0;
    }
    if (good) return 0;
    const char *why = header == SAVE_HEADER
                          ? "its pickle is not signed with this user's key"
                          : "its pickle is unsigned (written before calf signed them)";
    const char *key = PyUnicode_AsUTF8(pc->key_path);
    if (!key) {
        PyErr_Clear();
        key = "?";
    }
    if (!trust_checkpoint) {
        calf_error_set(err, CALF_EINVAL,
                       "env %llu (%s): %s (%s), and unpickling runs any code it holds: not "
                       "loaded; if you trust where this checkpoint came from, resume with "
                       "--trust_checkpoint (calf.train/calf.Trainer: trust=True) to accept it "
                       "once",
                       (unsigned long long)s->index, pc->name, why, key);
        return -1;
    }
    if (!pc->trusted_said)
        PySys_WriteStderr("calf: env %llu (%s): %s (%s); unpickling it as --trust_checkpoint "
                          "says\n",
                          (unsigned long long)s->index, pc->name, why, key);
    pc->trusted_said = 1;
    return 0;
}

static int pyenv_load(void *state, const void *buf, calf_error *err) {
    pyenv_state *s = state;
    const size_t cap = s->pc->cls.spec.save_size - mask_room(s->pc);
    const unsigned char *p = buf;
    if (s->pc->masked) { /* a mask that allows no action was not one the env returned */
        int any = 0;
        for (size_t j = 0; j < mask_room(s->pc); j++) any |= p[cap + j] > 1 ? 2 : p[cap + j];
        if (any != 1)
            return calf_error_set(err, CALF_EINVAL, "a saved Python env's action mask is not "
                                  "bytes of 0 and 1 with one valid action");
    }
    uint32_t magic = get_u32(p);
    if (magic != SAVE_MAGIC && magic != SAVE_MAGIC_V1)
        return calf_error_set(err, CALF_EINVAL, "not a saved Python env (bad magic)");
    const size_t header = magic == SAVE_MAGIC ? SAVE_HEADER : SAVE_HEADER_V1;
    uint32_t len = get_u32(p + 4);
    if (len == NOT_SAVED) {
        s->restarted = 1;
        uint32_t why = header == SAVE_HEADER ? get_u32(p + 8) : UNSAVED_UNPICKLABLE;
        uint32_t n = get_u32(p + 12);
        PyGILState_STATE g = PyGILState_Ensure();
        if (why == UNSAVED_TOO_BIG)
            PySys_WriteStderr("calf: env %llu (%s): the checkpoint holds no state for it (its "
                              "pickle, %u bytes, outgrew the %zu bytes of its slot); it starts "
                              "a new episode (a run started with register_env(state_bytes=%zu) "
                              "or --env_py_state_bytes %zu keeps it)\n",
                              (unsigned long long)s->index, s->pc->name, (unsigned)n,
                              cap - SAVE_HEADER, roomy(n), roomy(n));
        else
            PySys_WriteStderr("calf: env %llu (%s): the checkpoint holds no state for it (it "
                              "could not be %s); it starts a new episode\n",
                              (unsigned long long)s->index, s->pc->name,
                              why == UNSAVED_UNSIGNED ? "signed" : "pickled");
        PyGILState_Release(g);
        return CALF_OK;
    }
    if (len > cap - header)
        return calf_error_set(err, CALF_EINVAL, "saved Python env of %u bytes exceeds %zu",
                              (unsigned)len, cap - header);
    PyGILState_STATE g = PyGILState_Ensure();
    if (check_signed(s, p, header, len, err) != 0) {
        PyGILState_Release(g);
        return err->status;
    }
    int rc = CALF_OK;
    PyObject *env = PyObject_CallFunction(s->pc->mod->pickle_loads, "y#",
                                          (const char *)p + header, (Py_ssize_t)len);
    if (!env) {
        pyenv_state tmp = *s;
        tmp.failed = CALF_OK;
        env_fail(&tmp, "unpickling it", "");
        rc = calf_error_set(err, CALF_EINVAL, "%s", tmp.failure);
    } else {
        PyObject *old = s->env;
        s->env = env;
        Py_CLEAR(s->step_fn);
        Py_CLEAR(s->first_seed); /* it continues: no seeded reset */
        s->restarted = 0;
        PyObject *r = PyObject_CallMethod(old, "close", NULL);
        if (!r) PyErr_Clear();
        Py_XDECREF(r);
        Py_DECREF(old);
        if (s->pc->masked) memcpy(s->mask, p + cap, mask_room(s->pc));
    }
    PyGILState_Release(g);
    return rc;
}

static int pyenv_load_restarts(const void *state) { return ((const pyenv_state *)state)->restarted; }

/* env.render() (an env made with render_mode="rgb_array"): an (h, w, 3) uint8 picture,
 * scaled to width x height by nearest pixel (the same pixels on every machine). */
static int pyenv_render(const void *state, int width, int height, uint8_t *rgb,
                        calf_error *err) {
    const pyenv_state *s = state;
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = CALF_OK;
    PyObject *frame = PyObject_CallMethod(s->env, "render", NULL);
    PyArrayObject *a = NULL;
    if (!frame) {
        /* said, not kept: a picture that cannot be made is not the env failing a step */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *str = value ? PyObject_Str(value) : NULL;
        const char *msg = str ? PyUnicode_AsUTF8(str) : NULL;
        rc = calf_error_set(err, CALF_EINVAL, "env %llu (%s) cannot be drawn: render() raised "
                            "%s: %s", (unsigned long long)s->index, s->pc->name,
                            type ? ((PyTypeObject *)type)->tp_name : "?", msg ? msg : "?");
        PyErr_Clear();
        Py_XDECREF(str);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
    } else if (frame == Py_None) {
        rc = calf_error_set(err, CALF_EINVAL,
                            "env %llu (%s): render() returned None: make the env with "
                            "render_mode=\"rgb_array\" to draw it",
                            (unsigned long long)s->index, s->pc->name);
    } else {
        a = (PyArrayObject *)PyArray_FROMANY(frame, NPY_UINT8, 3, 3, NPY_ARRAY_CARRAY_RO);
        if (!a || PyArray_DIMS(a)[2] != 3 || PyArray_DIMS(a)[0] < 1 || PyArray_DIMS(a)[1] < 1) {
            PyErr_Clear();
            rc = calf_error_set(err, CALF_EINVAL,
                                "env %llu (%s): render() returned something other than an "
                                "(height, width, 3) uint8 picture",
                                (unsigned long long)s->index, s->pc->name);
        } else {
            const npy_intp fh = PyArray_DIMS(a)[0], fw = PyArray_DIMS(a)[1];
            const uint8_t *src = PyArray_DATA(a);
            for (int y = 0; y < height; y++) {
                npy_intp sy = (npy_intp)y * fh / height;
                for (int x = 0; x < width; x++) {
                    npy_intp sx = (npy_intp)x * fw / width;
                    memcpy(rgb + ((size_t)y * (size_t)width + (size_t)x) * 3,
                           src + ((size_t)sy * (size_t)fw + (size_t)sx) * 3, 3);
                }
            }
        }
    }
    Py_XDECREF((PyObject *)a);
    Py_XDECREF(frame);
    PyGILState_Release(g);
    return rc;
}

/* ---- the module's functions ----------------------------------------------------------- */

/* Whether class pc's observation has the form register_env was given now (the Box's shape,
 * None for a flat vector; or the Dict's keys and shapes), exceptions cleared. */
static int same_obs_form(const pyenv_class *pc, PyObject *box_shape, PyObject *dict_keys,
                         PyObject *dict_shapes) {
    int same;
    if (dict_keys != Py_None)
        same = pc->dict_keys && PyObject_RichCompareBool(pc->dict_keys, dict_keys, Py_EQ) == 1 &&
               PyObject_RichCompareBool(pc->dict_shapes, dict_shapes, Py_EQ) == 1;
    else
        same = pc->box_shape &&
               (box_shape == Py_None ||
                PyObject_RichCompareBool(pc->box_shape, box_shape, Py_EQ) == 1);
    PyErr_Clear();
    return same;
}

/* The values a shape (a tuple of ints >= 1) holds, or -1 (no exception) when it is not
 * one or holds more than 2^20. */
static Py_ssize_t shape_size(PyObject *shape) {
    if (!PyTuple_Check(shape)) return -1;
    Py_ssize_t size = 1;
    for (Py_ssize_t d = 0; d < PyTuple_GET_SIZE(shape); d++) {
        PyObject *x = PyTuple_GET_ITEM(shape, d);
        long e = PyLong_Check(x) ? PyLong_AsLong(x) : -1;
        if (e == -1) PyErr_Clear();
        if (e < 1 || e > (1 << 20) || size > (1 << 20) / e) return -1;
        size *= e;
    }
    return size;
}

/* Everything a class not (yet) registered holds; NULL is fine. */
static void class_free(pyenv_class *pc) {
    if (!pc) return;
    Py_XDECREF(pc->box_shape);
    Py_XDECREF(pc->dict_keys);
    Py_XDECREF(pc->dict_shapes);
    PyMem_RawFree(pc->low);
    PyMem_RawFree(pc->high);
    PyMem_RawFree(pc->nvec);
    PyMem_RawFree(pc->parts);
    PyMem_RawFree(pc->part_names);
    PyMem_RawFree(pc);
}

/* A Dict class's obs_parts from its keys (their str), shapes (rank 3: an image; rank 2:
 * an image of one channel, as a Box observation is read; else a vector of the values)
 * and dict_u8 (a tuple of bools: the part is bytes; None: as obs_dtype). 0, or -1 with
 * an exception set. */
static int make_parts(pyenv_class *pc, PyObject *dict_u8, int obs_dtype) {
    Py_ssize_t n = PyTuple_GET_SIZE(pc->dict_keys);
    if (n > CALF_OBS_MAX_PARTS) {
        PyErr_Format(PyExc_ValueError, "calf.register_env: a Dict of %zd keys (calf takes %d)",
                     n, CALF_OBS_MAX_PARTS);
        return -1;
    }
    if (dict_u8 != Py_None && (!PyTuple_Check(dict_u8) || PyTuple_GET_SIZE(dict_u8) != n)) {
        PyErr_SetString(PyExc_ValueError, "calf.register_env: dict_u8 is not a tuple of one "
                        "bool per key");
        return -1;
    }
    pc->parts = PyMem_RawCalloc((size_t)n, sizeof *pc->parts);
    pc->part_names = PyMem_RawCalloc((size_t)n, PYENV_PART_NAME);
    if (!pc->parts || !pc->part_names) {
        PyErr_NoMemory();
        return -1;
    }
    int offset = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *str = PyObject_Str(PyTuple_GET_ITEM(pc->dict_keys, k)); /* new reference */
        const char *key = str ? PyUnicode_AsUTF8(str) : NULL;
        if (!key || strlen(key) >= PYENV_PART_NAME) {
            if (key)
                PyErr_Format(PyExc_ValueError, "calf.register_env: Dict key '%.64s...' is "
                             "longer than %d characters", key, PYENV_PART_NAME - 1);
            Py_XDECREF(str);
            return -1;
        }
        char *name = pc->part_names + k * PYENV_PART_NAME;
        memcpy(name, key, strlen(key) + 1);
        Py_DECREF(str);
        PyObject *shape = PyTuple_GET_ITEM(pc->dict_shapes, k); /* checked by shape_size */
        Py_ssize_t rank = PyTuple_GET_SIZE(shape);
        long d[3] = {1, 1, 1}, size = 1;
        for (Py_ssize_t j = 0; j < rank; j++) {
            long e = PyLong_AsLong(PyTuple_GET_ITEM(shape, j));
            size *= e;
            if (j < 3) d[j] = e;
        }
        calf_obs_part *p = &pc->parts[k];
        p->name = name;
        if (rank == 3 || rank == 2) {
            p->shape[0] = (int)d[0], p->shape[1] = (int)d[1], p->shape[2] = (int)d[2];
        } else {
            p->shape[0] = (int)size;
        }
        int u8 = dict_u8 == Py_None ? obs_dtype == CALF_DTYPE_U8
                                    : PyObject_IsTrue(PyTuple_GET_ITEM(dict_u8, k));
        if (u8 < 0) return -1;
        p->dtype = u8 ? CALF_DTYPE_U8 : CALF_DTYPE_F32;
        p->offset = offset;
        offset += (int)size;
    }
    return 0;
}

PyObject *pyenv_register(PyObject *module, PyObject *args, PyObject *kwargs) {
    pyenv_module *st = &calf_state(module)->pyenv;
    static char *kwlist[] = {"name", "factory", "obs_dim", "num_actions", "low", "high",
                             "max_episode_steps", "state_bytes", "render_fps", "key",
                             "key_path", "obs_shape", "obs_dtype", "obs_high", "box_shape",
                             "dict_keys", "dict_shapes", "nvec", "masked", "dict_u8", NULL};
    const char *name;
    PyObject *factory, *low = Py_None, *high = Py_None, *key, *key_path, *nvec_obj = Py_None;
    PyObject *box_shape = Py_None, *dict_keys = Py_None, *dict_shapes = Py_None;
    PyObject *dict_u8 = Py_None;
    int obs_dim, num_actions, max_steps, obs_dtype = CALF_DTYPE_F32, obs_high = 0, masked = 0;
    int obs_shape[3] = {0, 0, 0};
    Py_ssize_t state_bytes;
    double render_fps = 0.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "sOiiOOindSU|$(iii)iiOOOOpO:register_env",
                                     kwlist, &name, &factory, &obs_dim, &num_actions, &low,
                                     &high, &max_steps, &state_bytes, &render_fps, &key,
                                     &key_path, &obs_shape[0], &obs_shape[1], &obs_shape[2],
                                     &obs_dtype, &obs_high, &box_shape, &dict_keys, &dict_shapes,
                                     &nvec_obj, &masked, &dict_u8))
        return NULL;
    /* the observation's form: a Box of box_shape (None: a flat vector of obs_dim), or a
     * Dict of dict_keys' Boxes of dict_shapes; their values must add up to obs_dim */
    Py_ssize_t total = -1;
    if (dict_keys != Py_None) {
        if (PyTuple_Check(dict_keys) && PyTuple_Check(dict_shapes) &&
            PyTuple_GET_SIZE(dict_keys) == PyTuple_GET_SIZE(dict_shapes) &&
            PyTuple_GET_SIZE(dict_keys) >= 1) {
            total = 0;
            for (Py_ssize_t k = 0; total >= 0 && k < PyTuple_GET_SIZE(dict_shapes); k++) {
                Py_ssize_t size = shape_size(PyTuple_GET_ITEM(dict_shapes, k));
                total = size < 0 ? -1 : total + size;
            }
        }
    } else {
        total = box_shape == Py_None ? obs_dim : shape_size(box_shape);
    }
    if (total != obs_dim) {
        PyErr_Format(PyExc_ValueError,
                     "calf.register_env: the observation's shapes (box_shape, or dict_keys with "
                     "dict_shapes: tuples of sizes >= 1) do not hold obs_dim %d values",
                     obs_dim);
        return NULL;
    }
    /* MultiDiscrete: the sub-actions' sizes (num_actions is their sum) */
    int dims = 0, nvec[PYENV_MAX_DIMS];
    if (nvec_obj != Py_None) {
        PyArrayObject *nv = (PyArrayObject *)PyArray_FROMANY(nvec_obj, NPY_INT64, 1, 1,
                                                              NPY_ARRAY_CARRAY_RO);
        if (!nv) return NULL;
        long long sum = 0;
        dims = (int)PyArray_DIMS(nv)[0];
        for (int d = 0; d < dims && d < PYENV_MAX_DIMS; d++) {
            int64_t v = ((const int64_t *)PyArray_DATA(nv))[d];
            nvec[d] = v < 1 || v > (1 << 16) ? 0 : (int)v;
            sum += nvec[d];
        }
        Py_DECREF(nv);
        if (dims < 1 || dims > PYENV_MAX_DIMS || sum != num_actions) {
            PyErr_Format(PyExc_ValueError, "calf.register_env: nvec must be 1 to %d sizes in "
                         "[1, 2^16] summing to num_actions", PYENV_MAX_DIMS);
            return NULL;
        }
        for (int d = 0; d < dims; d++)
            if (nvec[d] == 0) {
                PyErr_SetString(PyExc_ValueError, "calf.register_env: nvec sizes in [1, 2^16]");
                return NULL;
            }
    }
    if (masked && num_actions < 1) {
        PyErr_SetString(PyExc_ValueError, "calf.register_env: an action mask needs discrete "
                        "actions");
        return NULL;
    }
    /* a masked env's save form keeps its last mask after the pickle's room */
    size_t save_size = (size_t)state_bytes + (masked ? (size_t)num_actions : 0);
    if (PyBytes_GET_SIZE(key) < 16) {
        PyErr_SetString(PyExc_ValueError, "calf.register_env: the key is shorter than 16 bytes");
        return NULL;
    }
    if (!PyCallable_Check(factory)) {
        PyErr_SetString(PyExc_TypeError, "calf.register_env: the factory is not callable");
        return NULL;
    }
    if (strlen(name) >= PYENV_NAME_SIZE) {
        PyErr_Format(PyExc_ValueError, "calf.register_env: name '%s' is too long", name);
        return NULL;
    }
    if (state_bytes < SAVE_HEADER + 1 || state_bytes > (1 << 20)) {
        PyErr_Format(PyExc_ValueError, "calf.register_env: state_bytes %zd not in [%d, 1 MiB]",
                     state_bytes, SAVE_HEADER + 1);
        return NULL;
    }
    int action_dim = 0;
    PyArrayObject *lo = NULL, *hi = NULL;
    if (num_actions == 0) {
        lo = (PyArrayObject *)PyArray_FROMANY(low, NPY_FLOAT32, 1, 1, NPY_ARRAY_CARRAY_RO);
        hi = lo ? (PyArrayObject *)PyArray_FROMANY(high, NPY_FLOAT32, 1, 1, NPY_ARRAY_CARRAY_RO)
                : NULL;
        if (!hi) {
            Py_XDECREF(lo);
            return NULL;
        }
        action_dim = (int)PyArray_DIMS(lo)[0];
        if (PyArray_DIMS(hi)[0] != action_dim) {
            PyErr_SetString(PyExc_ValueError, "calf.register_env: low and high differ in size");
            Py_DECREF(lo);
            Py_DECREF(hi);
            return NULL;
        }
    }
    /* The same name again: the same spec reuses its class with the new factory (a run
     * resumed in the same process); another spec cannot take the name. */
    for (int i = 0; i < st->num_classes; i++) {
        pyenv_class *pc = st->classes[i];
        if (strcmp(pc->name, name) != 0) continue;
        const calf_env_spec *sp = &pc->cls.spec;
        int same = sp->obs_dim == obs_dim && sp->num_actions == num_actions &&
                   sp->obs_dtype == obs_dtype && sp->obs_high == obs_high &&
                   memcmp(sp->obs_shape, obs_shape, sizeof obs_shape) == 0 &&
                   same_obs_form(pc, box_shape, dict_keys, dict_shapes) &&
                   sp->action_dim == action_dim && sp->max_episode_steps == max_steps &&
                   sp->save_size == save_size && pc->masked == masked &&
                   sp->num_action_dims == dims &&
                   (dims == 0 || memcmp(pc->nvec, nvec, (size_t)dims * sizeof *nvec) == 0) &&
                   (action_dim == 0 ||
                    (memcmp(pc->low, PyArray_DATA(lo), (size_t)action_dim * sizeof(float)) == 0 &&
                     memcmp(pc->high, PyArray_DATA(hi), (size_t)action_dim * sizeof(float)) == 0));
        Py_XDECREF(lo);
        Py_XDECREF(hi);
        if (!same) {
            PyErr_Format(PyExc_ValueError,
                         "calf.register_env: '%s' is already registered with other spaces, "
                         "time limit or state_bytes in this process; give it another name",
                         name);
            return NULL;
        }
        Py_INCREF(factory);
        Py_SETREF(pc->factory, factory);
        Py_INCREF(key);
        Py_SETREF(pc->key, key);
        Py_INCREF(key_path);
        Py_SETREF(pc->key_path, key_path);
        return PyUnicode_FromString(name);
    }
    if (st->num_classes >= PYENV_MAX_CLASSES) {
        Py_XDECREF(lo);
        Py_XDECREF(hi);
        PyErr_Format(PyExc_ValueError, "calf.register_env: more than %d Python env classes",
                     PYENV_MAX_CLASSES);
        return NULL;
    }
    pyenv_class *pc = PyMem_RawCalloc(1, sizeof *pc);
    if (pc && dims > 0 && (pc->nvec = PyMem_RawCalloc((size_t)dims, sizeof *pc->nvec)))
        memcpy(pc->nvec, nvec, (size_t)dims * sizeof *nvec);
    if (pc && action_dim > 0) {
        pc->low = PyMem_RawCalloc((size_t)action_dim, sizeof *pc->low);
        pc->high = PyMem_RawCalloc((size_t)action_dim, sizeof *pc->high);
        if (pc->low && pc->high) {
            memcpy(pc->low, PyArray_DATA(lo), (size_t)action_dim * sizeof *pc->low);
            memcpy(pc->high, PyArray_DATA(hi), (size_t)action_dim * sizeof *pc->high);
        }
    }
    Py_XDECREF(lo);
    Py_XDECREF(hi);
    if (!pc || (action_dim > 0 && (!pc->low || !pc->high)) || (dims > 0 && !pc->nvec)) {
        class_free(pc);
        return PyErr_NoMemory();
    }
    /* a flat vector's shape is (obs_dim,) */
    pc->box_shape = dict_keys != Py_None ? NULL
                    : box_shape == Py_None ? Py_BuildValue("(i)", obs_dim)
                                           : (Py_INCREF(box_shape), box_shape);
    pc->dict_keys = dict_keys != Py_None ? (Py_INCREF(dict_keys), dict_keys) : NULL;
    pc->dict_shapes = dict_keys != Py_None ? (Py_INCREF(dict_shapes), dict_shapes) : NULL;
    if ((!pc->box_shape && !pc->dict_keys) ||
        (pc->dict_keys && make_parts(pc, dict_u8, obs_dtype) != 0)) {
        class_free(pc);
        return NULL;
    }
    snprintf(pc->name, sizeof pc->name, "%s", name);
    pc->mod = st;
    calf_env_class *c = &pc->cls;
    c->spec = (calf_env_spec){
        .name = pc->name,
        .obs_dim = obs_dim,
        .obs_shape = {obs_shape[0], obs_shape[1], obs_shape[2]},
        .obs_dtype = obs_dtype,
        .obs_high = obs_high,
        .num_actions = num_actions,
        .action_dim = action_dim,
        .action_low = pc->low,
        .action_high = pc->high,
        .max_episode_steps = max_steps,
        .state_size = sizeof(pyenv_state),
        .save_size = save_size,
        .num_action_dims = dims,
        .action_nvec = pc->nvec,
        .action_mask = masked,
        .num_obs_parts = pc->parts ? (int)PyTuple_GET_SIZE(pc->dict_keys) : 0,
        .obs_parts = pc->parts,
    };
    pc->masked = masked;
    c->reset = pyenv_reset;
    c->step = pyenv_step;
    if (dims > 0) c->step_multi = pyenv_step_multi;
    if (masked) c->action_mask = pyenv_action_mask;
    c->create_at = pyenv_create_at;
    c->destroy = pyenv_destroy;
    c->save = pyenv_save;
    c->load = pyenv_load;
    c->failure = pyenv_failure;
    c->load_restarts = pyenv_load_restarts;
    c->render = pyenv_render;
    c->render_fps = render_fps > 0 && render_fps < 1e4 ? render_fps : 0.0;
    calf_error err = {0};
    if (calf_env_register(c, &err) != CALF_OK) {
        class_free(pc);
        PyErr_SetString(PyExc_ValueError, err.msg);
        return NULL;
    }
    Py_INCREF(factory);
    pc->factory = factory;
    Py_INCREF(key);
    pc->key = key;
    Py_INCREF(key_path);
    pc->key_path = key_path;
    Py_INCREF(module);
    pc->module = module;
    st->classes[st->num_classes++] = pc;
    return PyUnicode_FromString(name);
}

PyObject *pyenv_obs_form(PyObject *module, PyObject *arg) {
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    calf_error err = {0};
    const calf_env_class *cls = calf_env_lookup(name, &err);
    if (!cls) {
        PyErr_SetString(PyExc_ValueError, err.msg);
        return NULL;
    }
    const calf_env_spec *sp = &cls->spec;
    PyObject *shape = sp->obs_shape[0] > 0 ? Py_BuildValue("(iii)", sp->obs_shape[0],
                                                           sp->obs_shape[1], sp->obs_shape[2])
                                           : (Py_INCREF(Py_None), Py_None);
    if (!shape) return NULL;
    /* a Python env's own space: what its reset and step return */
    PyObject *box = Py_None, *keys = Py_None, *shapes = Py_None; /* borrowed */
    pyenv_module *st = &calf_state(module)->pyenv;
    for (int i = 0; i < st->num_classes; i++)
        if (&st->classes[i]->cls == cls) {
            const pyenv_class *pc = st->classes[i];
            if (pc->box_shape) box = pc->box_shape;
            if (pc->dict_keys) keys = pc->dict_keys, shapes = pc->dict_shapes;
        }
    int high = sp->obs_dtype == CALF_DTYPE_U8 ? (sp->obs_high > 0 ? sp->obs_high : 255) : 0;
    /* the spec's named parts: (name, (d0, d1, d2), dtype, offset) each */
    PyObject *parts = PyList_New(sp->num_obs_parts); /* new reference */
    for (int k = 0; parts && k < sp->num_obs_parts; k++) {
        const calf_obs_part *p = &sp->obs_parts[k];
        PyObject *t = Py_BuildValue("(s(iii)si)", p->name, p->shape[0], p->shape[1], p->shape[2],
                                    p->dtype == CALF_DTYPE_U8 ? "uint8" : "float32", p->offset);
        if (!t) Py_CLEAR(parts);
        else PyList_SET_ITEM(parts, k, t); /* steals t */
    }
    if (!parts) {
        Py_DECREF(shape);
        return NULL;
    }
    return Py_BuildValue("{s:i,s:N,s:s,s:i,s:O,s:O,s:O,s:N}", "obs_dim", sp->obs_dim, "shape",
                         shape, "dtype", sp->obs_dtype == CALF_DTYPE_U8 ? "uint8" : "float32",
                         "high", high, "box_shape", box, "dict_keys", keys, "dict_shapes", shapes,
                         "parts", parts);
}

PyObject *pyenv_take_error(PyObject *module, PyObject *Py_UNUSED(ignored)) {
    pyenv_module *st = &calf_state(module)->pyenv;
    PyObject *e = st->first_error; /* the reference passes to the caller */
    st->first_error = NULL;
    if (!e) Py_RETURN_NONE;
    return e;
}

PyObject *pyenv_set_trust_checkpoint(PyObject *module, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    (void)module;
    trust_checkpoint = on;
    Py_RETURN_NONE;
}

PyObject *pyenv_set_print_tracebacks(PyObject *module, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    calf_state(module)->pyenv.print_tracebacks = on;
    Py_RETURN_NONE;
}

/* The fork hooks are the process's, registered once however often the module is made
 * (pthread_atfork cannot be undone), and called with no argument in the thread that
 * forks: so the guard is that thread's, on only while it runs a job that forks with the
 * GIL held. A fork in any other thread, or in that one outside the job, is left alone. */
static _Thread_local int fork_guard;
static pthread_once_t fork_hooks_once = PTHREAD_ONCE_INIT;
static int fork_hooks_rc; /* pthread_atfork's result, written once under fork_hooks_once */

static void fork_prepare(void) {
    if (fork_guard) PyOS_BeforeFork();
}
static void fork_parent(void) {
    if (fork_guard) PyOS_AfterFork_Parent();
}
static void fork_child(void) {
    if (fork_guard) PyOS_AfterFork_Child();
}
static void install_fork_hooks(void) {
    fork_hooks_rc = pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void pyenv_fork_guard(int on) { fork_guard = on; }

int pyenv_init(pyenv_module *st) {
    st->pid = getpid();
    int rc = pthread_once(&fork_hooks_once, install_fork_hooks);
    if (rc == 0) rc = fork_hooks_rc;
    if (rc != 0) {
        PyErr_Format(PyExc_OSError, "calf: pthread_atfork: %s", strerror(rc));
        return -1;
    }
    PyObject *pickle = PyImport_ImportModule("pickle"); /* new reference */
    if (!pickle) return -1;
    st->pickle_dumps = PyObject_GetAttrString(pickle, "dumps");
    st->pickle_loads = PyObject_GetAttrString(pickle, "loads");
    Py_DECREF(pickle);
    if (!st->pickle_dumps || !st->pickle_loads) return -1;
    PyObject *hmac = PyImport_ImportModule("hmac"); /* new reference */
    if (!hmac) return -1;
    st->hmac_digest = PyObject_GetAttrString(hmac, "digest");
    Py_DECREF(hmac);
    return st->hmac_digest ? 0 : -1;
}

int pyenv_traverse(pyenv_module *st, visitproc visit, void *arg) {
    Py_VISIT(st->first_error);
    Py_VISIT(st->pickle_dumps);
    Py_VISIT(st->pickle_loads);
    Py_VISIT(st->hmac_digest);
    return 0;
}

void pyenv_clear(pyenv_module *st) {
    Py_CLEAR(st->first_error);
    Py_CLEAR(st->pickle_dumps);
    Py_CLEAR(st->pickle_loads);
    Py_CLEAR(st->hmac_digest);
}
