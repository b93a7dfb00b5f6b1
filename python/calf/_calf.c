/* _calf.c: the CPython extension module calf._calf, a thin layer over calf's public API
 * (calf/vec_env.h, policy.h, trainer.h, version.h, error.h). VecEnv steps a block of
 * calf's envs into NumPy arrays the caller allocates, so the hot path makes no Python
 * object per env; Policy acts greedily on a batch of rows; Trainer runs a training job
 * one iteration at a time. The Gymnasium-shaped API and the argument
 * checking that reads better in Python are the pure-Python layer's (calf/_*.py). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL calf_numpy_api /* shared with _pyenv.c and _scalars.c */
#include <numpy/arrayobject.h>

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "calf/env.h"
#include "calf/error.h"
#include "calf/policy.h"
#include "calf/render.h"
#include "calf/trainer.h"
#include "calf/vec_env.h"
#include "calf/version.h"
#include "_calf.h"
#include "_pyenv.h"

PyObject *raise_calf(const calf_error *err) {
    PyObject *type = PyExc_RuntimeError;
    if (err->status == CALF_EINVAL) type = PyExc_ValueError;
    else if (err->status == CALF_ENOMEM) type = PyExc_MemoryError;
    else if (err->status == CALF_EIO) type = PyExc_OSError;
    else if (err->status == CALF_EINTR) type = PyExc_KeyboardInterrupt;
    PyErr_SetString(type, err->msg[0] ? err->msg : "calf: unknown error");
    return NULL;
}

int conf_texts_init(conf_texts *ct, const char *who, PyObject *params) {
    ct->tuple = NULL;
    ct->texts = NULL;
    ct->n = 0;
    /* A tuple of our own keeps the strings alive, and unchanged, while the GIL is
     * released: a list the caller holds could be mutated by another thread. */
    ct->tuple = params && params != Py_None ? PySequence_Tuple(params) /* new reference */
                                            : PyTuple_New(0);         /* new reference */
    if (!ct->tuple) return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(ct->tuple);
    if (n > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "%s: too many conf_params", who);
        conf_texts_free(ct);
        return -1;
    }
    ct->texts = PyMem_Calloc(n ? (size_t)n : 1, sizeof *ct->texts);
    if (!ct->texts) {
        conf_texts_free(ct);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(ct->tuple, i); /* borrowed from the tuple */
        if (!PyUnicode_Check(item)) {
            PyErr_Format(PyExc_TypeError, "%s: conf_params[%zd] must be a str, got %R", who, i,
                         item);
            conf_texts_free(ct);
            return -1;
        }
        ct->texts[i] = PyUnicode_AsUTF8(item); /* the str's own buffer, alive with the tuple */
        if (!ct->texts[i]) {
            conf_texts_free(ct);
            return -1;
        }
    }
    ct->n = (int)n;
    return 0;
}

void conf_texts_free(conf_texts *ct) {
    PyMem_Free(ct->texts);
    ct->texts = NULL;
    Py_CLEAR(ct->tuple);
    ct->n = 0;
}

/* d[key] = value, consuming the new reference value (NULL: an error already set). */
static int dict_put(PyObject *d, const char *key, PyObject *value) {
    if (!value) return -1;
    int rc = PyDict_SetItemString(d, key, value);
    Py_DECREF(value);
    return rc;
}

#define VECENV "calf.VecEnv" /* the type's name in messages */

typedef struct {
    PyObject_HEAD
    calf_vec_env *v; /* NULL once closed */
    /* set while a call runs without the GIL: calf allows one thread per handle */
    int busy;
    int n, obs_dim;
    int discrete, action_dim;
    int dims;         /* MultiDiscrete: sub-actions; else 0 */
    int u8;           /* a uint8 env (calf_vec_env_obs_high > 0): step_gym reads its
                         observations as bytes (calf_vec_env_step_u8), returning uint8 */
    /* scratch of step_gym, allocated with the block: calf writes float32 rewards,
     * Gymnasium returns float64 */
    float *reward;    /* (n) */
    int *act;         /* (n, max(dims, 1)) discrete actions as calf takes them */
    float *cont;      /* (n, action_dim) continuous actions as calf takes them */
    void *final_obs;  /* (n, obs_dim) float32, bytes for u8; the ended envs' rows are
                         copied out */
    calf_renderer *renderer; /* made by the first render(), for its picture size */
} VecEnvObject;

/* Fails with a Python exception when the env is closed or in use by another thread. */
static int vecenv_usable(VecEnvObject *self) {
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "calf.VecEnv: used from two threads at once (one thread at a time)");
        return 0;
    }
    if (!self->v) {
        PyErr_SetString(PyExc_ValueError, "calf.VecEnv: the env is closed");
        return 0;
    }
    return 1;
}

/* Whether obj is a C-contiguous ndarray of dtype `type` and the given shape (ndim 1 or
 * 2; cols ignored for ndim 1), writable when `writable`; else raises naming `who` (the
 * type) and `what`. */
static int check_array(const char *who, PyObject *obj, const char *what, int type,
                       int ndim, npy_intp rows, npy_intp cols, int writable) {
    if (!PyArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be a numpy.ndarray", who, what);
        return 0;
    }
    PyArrayObject *a = (PyArrayObject *)obj; /* borrowed, as obj */
    if (PyArray_TYPE(a) != type) {
        PyArray_Descr *want = PyArray_DescrFromType(type); /* new reference */
        if (!want) return 0;
        PyErr_Format(PyExc_TypeError, "%s: %s must have dtype %S, got %S", who, what,
                     (PyObject *)want, (PyObject *)PyArray_DESCR(a));
        Py_DECREF(want);
        return 0;
    }
    int shape_ok = PyArray_NDIM(a) == ndim && PyArray_DIMS(a)[0] == rows &&
                   (ndim == 1 || PyArray_DIMS(a)[1] == cols);
    if (!shape_ok) {
        if (ndim == 1)
            PyErr_Format(PyExc_ValueError, "%s: %s must have shape (%zd,)", who, what,
                         (Py_ssize_t)rows);
        else
            PyErr_Format(PyExc_ValueError, "%s: %s must have shape (%zd, %zd)", who,
                         what, (Py_ssize_t)rows, (Py_ssize_t)cols);
        return 0;
    }
    if (!PyArray_IS_C_CONTIGUOUS(a) || (writable && !PyArray_ISWRITEABLE(a))) {
        PyErr_Format(PyExc_ValueError, "%s: %s must be C-contiguous%s", who, what,
                     writable ? " and writable" : "");
        return 0;
    }
    if (!PyArray_ISNOTSWAPPED(a)) { /* calf reads and writes the bytes as this machine's */
        PyErr_Format(PyExc_ValueError, "%s: %s has dtype %S, not this machine's byte order "
                     "(convert it with .astype(%S))", who, what, (PyObject *)PyArray_DESCR(a),
                     (PyObject *)PyArray_DESCR(a)->typeobj);
        return 0;
    }
    return 1;
}

static void vecenv_release(VecEnvObject *self);

static int vecenv_init(VecEnvObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"name", "num_envs", "seed", "first_index", "env_lib", NULL};
    const char *name = NULL, *env_lib = NULL;
    int num_envs = 0, first_index = 0;
    unsigned long long seed = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "siK|iz:VecEnv", kwlist, &name, &num_envs,
                                     &seed, &first_index, &env_lib))
        return -1;
    if (self->v || self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "calf.VecEnv: already open");
        return -1;
    }
    calf_error err = {0};
    calf_vec_env *v = NULL;
    int rc;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS /* loading a plug-in and making the envs */
    rc = calf_vec_env_open(name, env_lib, (uint64_t)seed, first_index, num_envs, &v, &err);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (rc != CALF_OK) {
        raise_calf(&err);
        return -1;
    }
    self->v = v;
    self->n = calf_vec_env_count(v);
    self->obs_dim = calf_vec_env_obs_dim(v);
    self->discrete = calf_vec_env_discrete(v);
    self->action_dim = calf_vec_env_action_dim(v);
    self->dims = calf_vec_env_action_dims(v);
    self->u8 = calf_vec_env_obs_high(v) > 0;
    size_t n = (size_t)self->n;
    self->reward = PyMem_Malloc(sizeof(float) * n);
    self->act = PyMem_Malloc(sizeof(int) * n * (size_t)(self->dims ? self->dims : 1));
    self->cont = PyMem_Malloc(sizeof(float) * n * (size_t)(self->action_dim ? self->action_dim : 1));
    self->final_obs = PyMem_Malloc((self->u8 ? 1 : sizeof(float)) * n * (size_t)self->obs_dim);
    if (!self->reward || !self->act || !self->cont || !self->final_obs) {
        vecenv_release(self);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void vecenv_release(VecEnvObject *self) {
    calf_renderer_close(self->renderer);
    self->renderer = NULL;
    calf_vec_env_close(self->v);
    self->v = NULL;
    PyMem_Free(self->reward);
    PyMem_Free(self->act);
    PyMem_Free(self->cont);
    PyMem_Free(self->final_obs);
    self->reward = NULL;
    self->act = NULL;
    self->cont = NULL;
    self->final_obs = NULL;
}

static void vecenv_dealloc(VecEnvObject *self) {
    vecenv_release(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyDoc_STRVAR(vecenv_close_doc, "close()\n\nRelease the envs; a second call does nothing.");
static PyObject *vecenv_close(VecEnvObject *self, PyObject *Py_UNUSED(ignored)) {
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "calf.VecEnv: close() while another thread steps the env");
        return NULL;
    }
    vecenv_release(self);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(vecenv_reset_doc,
             "reset(obs)\n\nStart a new episode in every env (calf_vec_env_reset), writing "
             "obs: (num_envs, obs_dim) float32, or uint8 for a uint8 env (read as bytes: "
             "calf_vec_env_reset_u8), C-contiguous.");
/* Whether a uint8 env's caller gave obs as uint8 (then the bytes are read, else floats). */
static int wants_bytes(const VecEnvObject *self, PyObject *obs) {
    return self->u8 && PyArray_Check(obs) && PyArray_TYPE((PyArrayObject *)obs) == NPY_UINT8;
}

static PyObject *vecenv_reset(VecEnvObject *self, PyObject *obs) {
    if (!vecenv_usable(self)) return NULL;
    int bytes = wants_bytes(self, obs);
    if (!check_array(VECENV, obs, "obs", bytes ? NPY_UINT8 : NPY_FLOAT32, 2, self->n,
                     self->obs_dim, 1))
        return NULL;
    void *out = PyArray_DATA((PyArrayObject *)obs);
    calf_error err = {0};
    int rc;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    rc = bytes ? calf_vec_env_reset_u8(self->v, out, &err) : calf_vec_env_reset(self->v, out, &err);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (rc != CALF_OK) return raise_calf(&err);
    Py_RETURN_NONE;
}

/* One calf_vec_env_step (bytes: calf_vec_env_step_u8, o and fo then bytes) with the GIL
 * released, act the discrete or continuous actions as the block takes them; the float32
 * rewards widened into r. Returns 0, or -1 with calf's exception set (the outputs
 * written all the same). */
static int vecenv_run_step(VecEnvObject *self, const void *act, void *o, double *r,
                           uint8_t *te, uint8_t *tr, void *fo, int bytes) {
    calf_error err = {0};
    int rc;
    self->busy = 1;
    const int *da = self->discrete ? act : NULL;
    const float *ca = self->discrete ? NULL : act;
    Py_BEGIN_ALLOW_THREADS
    rc = bytes ? calf_vec_env_step_u8(self->v, da, ca, o, self->reward, te, tr, fo, &err)
               : calf_vec_env_step(self->v, da, ca, o, self->reward, te, tr, fo, &err);
    for (int e = 0; e < self->n; e++) r[e] = (double)self->reward[e];
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (rc != CALF_OK) {
        raise_calf(&err);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(vecenv_step_doc,
             "step(actions, obs, rewards, terminated, truncated, final_obs)\n\n"
             "Step every env once (calf_vec_env_step), auto-resetting in the same step.\n"
             "actions: (num_envs,) int32 for a discrete env, (num_envs, action_dim) float32 for\n"
             "a continuous one. Writes obs and final_obs: (num_envs, obs_dim) float32 (or\n"
             "both uint8 for a uint8 env, read as bytes: calf_vec_env_step_u8),\n"
             "rewards: (num_envs,) float64, terminated and truncated: (num_envs,) bool.\n"
             "All arrays C-contiguous. The outputs are written even when the step raises\n"
             "for a non-finite value.");
static PyObject *vecenv_step(VecEnvObject *self, PyObject *args) {
    PyObject *actions, *obs, *rewards, *term, *trunc, *final_obs; /* borrowed */
    if (!PyArg_ParseTuple(args, "OOOOOO:step", &actions, &obs, &rewards, &term, &trunc,
                          &final_obs))
        return NULL;
    if (!vecenv_usable(self)) return NULL;
    int ok = self->dims ? check_array(VECENV, actions, "actions", NPY_INT32, 2, self->n,
                                      self->dims, 0)
             : self->discrete ? check_array(VECENV, actions, "actions", NPY_INT32, 1, self->n, 0, 0)
                              : check_array(VECENV, actions, "actions", NPY_FLOAT32, 2, self->n,
                                            self->action_dim, 0);
    int bytes = wants_bytes(self, obs), ot = bytes ? NPY_UINT8 : NPY_FLOAT32;
    ok = ok && check_array(VECENV, obs, "obs", ot, 2, self->n, self->obs_dim, 1) &&
         check_array(VECENV, rewards, "rewards", NPY_FLOAT64, 1, self->n, 0, 1) &&
         check_array(VECENV, term, "terminated", NPY_BOOL, 1, self->n, 0, 1) &&
         check_array(VECENV, trunc, "truncated", NPY_BOOL, 1, self->n, 0, 1) &&
         check_array(VECENV, final_obs, "final_obs", ot, 2, self->n, self->obs_dim, 1);
    if (!ok) return NULL;
    const void *act = PyArray_DATA((PyArrayObject *)actions);
    void *o = PyArray_DATA((PyArrayObject *)obs);
    double *r = PyArray_DATA((PyArrayObject *)rewards);
    /* numpy.bool_ is one byte holding 0 or 1, which is what calf writes */
    uint8_t *te = PyArray_DATA((PyArrayObject *)term);
    uint8_t *tr = PyArray_DATA((PyArrayObject *)trunc);
    void *fo = PyArray_DATA((PyArrayObject *)final_obs);
    if (vecenv_run_step(self, act, o, r, te, tr, fo, bytes) < 0) return NULL;
    Py_RETURN_NONE;
}

/* The shape of a as a Python tuple, for messages (a new reference, or NULL). */
static PyObject *shape_of(PyArrayObject *a) {
    return PyObject_GetAttrString((PyObject *)a, "shape");
}

/* Raise "calf.VecEnv.step: actions must have shape WANT, got (a's shape)". */
static const void *actions_shape_error(PyArrayObject *a, const char *want) {
    PyObject *got = shape_of(a); /* new reference */
    if (got) PyErr_Format(PyExc_ValueError, VECENV ".step: actions must have shape %s, got %S",
                          want, got);
    Py_XDECREF(got);
    return NULL;
}

/* step_gym's actions as calf takes them: a's own data when it is that already (int32
 * or float32, C-contiguous, this machine's byte order), else converted into the block's scratch, as the pure-Python
 * layer converted them (integers for a discrete env, checked to fit calf's int; any
 * numbers cast to float32 for a continuous one). NULL with an exception set when a
 * has the wrong shape or kind. */
static const void *gym_actions(VecEnvObject *self, PyArrayObject *a) {
    npy_intp n = self->n;
    char want[64];
    if (self->discrete) {
        int md = self->dims > 0;
        if (!md && (PyArray_NDIM(a) != 1 || PyArray_DIMS(a)[0] != n)) {
            snprintf(want, sizeof want, "(%d,)", self->n);
            return actions_shape_error(a, want);
        }
        if (md && (PyArray_NDIM(a) != 2 || PyArray_DIMS(a)[0] != n ||
                   PyArray_DIMS(a)[1] != self->dims)) {
            snprintf(want, sizeof want, "(%d, %d)", self->n, self->dims);
            return actions_shape_error(a, want);
        }
        n *= md ? self->dims : 1; /* the ints, row by row */
        if (!PyArray_ISINTEGER(a)) {
            PyErr_Format(PyExc_TypeError, VECENV ".step: discrete actions must be integers, got %S",
                         (PyObject *)PyArray_DESCR(a));
            return NULL;
        }
        if (PyArray_TYPE(a) == NPY_INT32 && PyArray_IS_C_CONTIGUOUS(a) && PyArray_ISALIGNED(a) &&
            PyArray_ISNOTSWAPPED(a))
            return PyArray_DATA(a);
        int is_unsigned = PyArray_ISUNSIGNED(a);
        /* new reference: a itself when it is int64/uint64 C-contiguous already */
        PyArrayObject *w = (PyArrayObject *)PyArray_FromArray(
            a, PyArray_DescrFromType(is_unsigned ? NPY_UINT64 : NPY_INT64),
            NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_FORCECAST);
        if (!w) return NULL;
        const int64_t *si = PyArray_DATA(w);
        const uint64_t *ui = PyArray_DATA(w);
        for (npy_intp e = 0; e < n; e++) {
            int fits = is_unsigned ? ui[e] <= (uint64_t)INT_MAX : si[e] >= 0 && si[e] <= INT_MAX;
            if (!fits) {
                Py_ssize_t env = (Py_ssize_t)(md ? e / self->dims : e);
                int top = md ? calf_vec_env_action_nvec(self->v)[e % self->dims] - 1
                             : calf_vec_env_num_actions(self->v) - 1;
                if (is_unsigned)
                    PyErr_Format(PyExc_ValueError, VECENV ".step: action %llu of env %zd is out "
                                 "of range 0..%d", (unsigned long long)ui[e], env, top);
                else
                    PyErr_Format(PyExc_ValueError, VECENV ".step: action %lld of env %zd is out "
                                 "of range 0..%d", (long long)si[e], env, top);
                Py_DECREF(w);
                return NULL;
            }
            self->act[e] = (int)(is_unsigned ? (int64_t)ui[e] : si[e]);
        }
        Py_DECREF(w);
        return self->act;
    }
    if (PyArray_NDIM(a) != 2 || PyArray_DIMS(a)[0] != n || PyArray_DIMS(a)[1] != self->action_dim) {
        snprintf(want, sizeof want, "(%d, %d)", self->n, self->action_dim);
        return actions_shape_error(a, want);
    }
    if (PyArray_TYPE(a) == NPY_FLOAT32 && PyArray_IS_C_CONTIGUOUS(a) && PyArray_ISALIGNED(a) &&
        PyArray_ISNOTSWAPPED(a))
        return PyArray_DATA(a);
    PyArrayObject *w = (PyArrayObject *)PyArray_FromArray( /* new reference */
        a, PyArray_DescrFromType(NPY_FLOAT32),
        NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_FORCECAST);
    if (!w) return NULL;
    memcpy(self->cont, PyArray_DATA(w), sizeof(float) * (size_t)n * (size_t)self->action_dim);
    Py_DECREF(w);
    return self->cont;
}

/* Gymnasium's SAME_STEP infos for a step that ended the envs marked in te | tr, as
 * SyncVectorEnv builds them: {} when none ended; else final_obs, an object array
 * holding a new (obs_dim,) float32 (uint8 for a u8 env) copy of the ended episode's last
 * observation for each env that ended and None for the others, the "_final_obs" mask, an empty
 * final_info and its own "_final_info" mask. A new dict, or NULL. */
static PyObject *mask_array(VecEnvObject *self);

/* infos["action_mask"] (num_envs, num_actions) bool, the valid actions of the states obs
 * shows, and "_action_mask" all True, for an env that masks its actions; 0, or -1 with
 * an exception set. */
static int put_mask_info(VecEnvObject *self, PyObject *infos) {
    if (!calf_vec_env_action_mask(self->v)) return 0;
    npy_intp n = self->n;
    PyObject *m = mask_array(self), *all = PyArray_SimpleNew(1, &n, NPY_BOOL); /* new */
    if (!m || !all) {
        Py_XDECREF(m);
        Py_XDECREF(all);
        return -1;
    }
    memset(PyArray_DATA((PyArrayObject *)all), 1, (size_t)n);
    return dict_put(infos, "action_mask", m) < 0 || dict_put(infos, "_action_mask", all) < 0
               ? -1 : 0;
}

static PyObject *gym_infos(VecEnvObject *self, const uint8_t *te, const uint8_t *tr) {
    PyObject *infos = PyDict_New(); /* new reference, returned */
    if (!infos) return NULL;
    if (put_mask_info(self, infos) < 0) {
        Py_DECREF(infos);
        return NULL;
    }
    int ended = 0;
    for (int e = 0; e < self->n; e++) ended |= te[e] | tr[e];
    if (!ended) return infos;
    npy_intp n = self->n, od = self->obs_dim;
    /* new references; an object array from PyArray_Empty holds None in every slot */
    PyObject *final_obs = PyArray_Empty(1, &n, PyArray_DescrFromType(NPY_OBJECT), 0);
    PyObject *mask = PyArray_SimpleNew(1, &n, NPY_BOOL);
    PyObject *mask_info = PyArray_SimpleNew(1, &n, NPY_BOOL);
    int bad = !final_obs || !mask || !mask_info;
    for (npy_intp e = 0; !bad && e < n; e++) {
        uint8_t end = te[e] | tr[e];
        ((uint8_t *)PyArray_DATA((PyArrayObject *)mask))[e] = end;
        ((uint8_t *)PyArray_DATA((PyArrayObject *)mask_info))[e] = end;
        if (!end) continue;
        /* new reference */
        PyObject *row = PyArray_SimpleNew(1, &od, self->u8 ? NPY_UINT8 : NPY_FLOAT32);
        if (!row) {
            bad = 1;
            break;
        }
        size_t width = (self->u8 ? 1 : sizeof(float)) * (size_t)od;
        memcpy(PyArray_DATA((PyArrayObject *)row), (const char *)self->final_obs + e * width,
               width);
        PyObject **slot = (PyObject **)PyArray_GETPTR1((PyArrayObject *)final_obs, e);
        Py_XSETREF(*slot, row); /* the array takes row's reference, drops its None */
    }
    if (bad) {
        Py_XDECREF(final_obs);
        Py_XDECREF(mask);
        Py_XDECREF(mask_info);
        Py_DECREF(infos);
        return NULL;
    }
    if (dict_put(infos, "final_obs", final_obs) < 0 || dict_put(infos, "_final_obs", mask) < 0 ||
        dict_put(infos, "final_info", PyDict_New()) < 0 ||
        dict_put(infos, "_final_info", mask_info) < 0) {
        Py_DECREF(infos);
        return NULL;
    }
    return infos;
}

/* A step that raised (an env's non-finite value) still wrote every env's results: they
 * go on the pending exception as its `results` attribute, the tuple a step returns
 * (new references to the arrays, infos built here), so the caller loses none. Failing
 * to attach them leaves the exception as it was. */
static void attach_results(VecEnvObject *self, PyObject *obs, PyObject *rewards,
                           PyObject *term, PyObject *trunc, const uint8_t *te,
                           const uint8_t *tr) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *infos = value ? gym_infos(self, te, tr) : NULL; /* new reference */
    PyObject *results = infos ? Py_BuildValue("(OOOON)", obs, rewards, term, trunc, infos)
                              : NULL; /* steals infos */
    if (!results || PyObject_SetAttrString(value, "results", results) < 0) PyErr_Clear();
    Py_XDECREF(results);
    PyErr_Restore(type, value, tb);
}

PyDoc_STRVAR(vecenv_step_gym_doc,
             "step_gym(actions) -> (obs, rewards, terminations, truncations, infos)\n\n"
             "Gymnasium's step in SAME_STEP mode in one call: actions an ndarray, (num_envs,)\n"
             "integers for a discrete env or (num_envs, action_dim) numbers for a continuous\n"
             "one; returns new arrays, obs (num_envs, obs_dim) float32 (uint8 for a uint8\n"
             "env, read as bytes), rewards float64,\n"
             "terminations and truncations bool, and the infos SyncVectorEnv returns.\n"
             "When an env gives a non-finite value the step raises, and that tuple, every\n"
             "env's results, is the exception's `results`.");
static PyObject *vecenv_step_gym(VecEnvObject *self, PyObject *arg) {
    if (!vecenv_usable(self)) return NULL;
    if (!PyArray_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, VECENV ".step_gym: actions must be a numpy.ndarray");
        return NULL;
    }
    const void *act = gym_actions(self, (PyArrayObject *)arg); /* arg's or the scratch */
    if (!act) return NULL;
    npy_intp dims[2] = {self->n, self->obs_dim};
    /* new references, returned */
    PyObject *obs = PyArray_SimpleNew(2, dims, self->u8 ? NPY_UINT8 : NPY_FLOAT32);
    PyObject *rewards = PyArray_SimpleNew(1, dims, NPY_FLOAT64);
    PyObject *term = PyArray_SimpleNew(1, dims, NPY_BOOL);
    PyObject *trunc = PyArray_SimpleNew(1, dims, NPY_BOOL);
    PyObject *infos = NULL;
    if (obs && rewards && term && trunc) {
        uint8_t *te = PyArray_DATA((PyArrayObject *)term);
        uint8_t *tr = PyArray_DATA((PyArrayObject *)trunc);
        if (vecenv_run_step(self, act, PyArray_DATA((PyArrayObject *)obs),
                            PyArray_DATA((PyArrayObject *)rewards), te, tr, self->final_obs,
                            self->u8) == 0)
            infos = gym_infos(self, te, tr);
        else
            attach_results(self, obs, rewards, term, trunc, te, tr);
    }
    if (!infos) {
        Py_XDECREF(obs);
        Py_XDECREF(rewards);
        Py_XDECREF(term);
        Py_XDECREF(trunc);
        return NULL;
    }
    return Py_BuildValue("(NNNNN)", obs, rewards, term, trunc, infos); /* steals all five */
}

/* ---- the block's spaces, read once by the Python layer -------------------------- */

/* MultiDiscrete sizes as a new (D,) int64 array, or None. */
static PyObject *nvec_array(const int *nvec, int dims) {
    if (!nvec || dims < 1) Py_RETURN_NONE;
    npy_intp shape[1] = {dims};
    PyObject *a = PyArray_SimpleNew(1, shape, NPY_INT64); /* new reference */
    if (!a) return NULL;
    for (int d = 0; d < dims; d++) ((int64_t *)PyArray_DATA((PyArrayObject *)a))[d] = nvec[d];
    return a;
}
/* The continuous action bounds as a new (action_dim,) float32 array, or None. */
static PyObject *bounds_array(const float *b, int dim) {
    if (!b) Py_RETURN_NONE;
    npy_intp shape[1] = {dim};
    PyObject *a = PyArray_SimpleNew(1, shape, NPY_FLOAT32); /* new reference */
    if (!a) return NULL;
    float *d = PyArray_DATA((PyArrayObject *)a);
    for (int i = 0; i < dim; i++) d[i] = b[i];
    return a;
}

#define VECENV_INT_GETTER(field, call)                                      \
    static PyObject *vecenv_get_##field(VecEnvObject *self, void *closure) { \
        (void)closure;                                                      \
        if (!vecenv_usable(self)) return NULL;                              \
        return PyLong_FromLong((long)call(self->v));                        \
    }
VECENV_INT_GETTER(num_envs, calf_vec_env_count)
VECENV_INT_GETTER(first_index, calf_vec_env_first_index)
VECENV_INT_GETTER(obs_dim, calf_vec_env_obs_dim)
VECENV_INT_GETTER(num_actions, calf_vec_env_num_actions)
VECENV_INT_GETTER(action_dim, calf_vec_env_action_dim)
VECENV_INT_GETTER(max_episode_steps, calf_vec_env_max_episode_steps)
VECENV_INT_GETTER(action_dims, calf_vec_env_action_dims)
VECENV_INT_GETTER(obs_high, calf_vec_env_obs_high)

/* The block's action masks as a new (num_envs, num_actions) bool array, or None for an
 * env without a mask. */
static PyObject *mask_array(VecEnvObject *self) {
    const uint8_t *m = calf_vec_env_action_mask(self->v);
    if (!m) Py_RETURN_NONE;
    npy_intp shape[2] = {self->n, calf_vec_env_num_actions(self->v)};
    PyObject *a = PyArray_SimpleNew(2, shape, NPY_BOOL); /* new reference */
    if (!a) return NULL;
    uint8_t *d = PyArray_DATA((PyArrayObject *)a);
    for (npy_intp i = 0; i < shape[0] * shape[1]; i++) d[i] = m[i] != 0;
    return a;
}
static PyObject *vecenv_get_action_mask(VecEnvObject *self, void *closure) {
    (void)closure;
    if (!vecenv_usable(self)) return NULL;
    return mask_array(self);
}
static PyObject *vecenv_get_action_nvec(VecEnvObject *self, void *closure) {
    (void)closure;
    if (!vecenv_usable(self)) return NULL;
    return nvec_array(calf_vec_env_action_nvec(self->v), calf_vec_env_action_dims(self->v));
}

static PyObject *vecenv_get_discrete(VecEnvObject *self, void *closure) {
    (void)closure;
    if (!vecenv_usable(self)) return NULL;
    return PyBool_FromLong(calf_vec_env_discrete(self->v));
}
static PyObject *vecenv_get_name(VecEnvObject *self, void *closure) {
    (void)closure;
    if (!vecenv_usable(self)) return NULL;
    return PyUnicode_FromString(calf_vec_env_name(self->v));
}
static PyObject *vecenv_get_action_low(VecEnvObject *self, void *closure) {
    (void)closure;
    if (!vecenv_usable(self)) return NULL;
    return bounds_array(calf_vec_env_action_low(self->v), calf_vec_env_action_dim(self->v));
}
static PyObject *vecenv_get_action_high(VecEnvObject *self, void *closure) {
    (void)closure;
    if (!vecenv_usable(self)) return NULL;
    return bounds_array(calf_vec_env_action_high(self->v), calf_vec_env_action_dim(self->v));
}
static PyObject *vecenv_get_closed(VecEnvObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(self->v == NULL);
}

static PyObject *vecenv_get_render_fps(VecEnvObject *self, void *closure);

static PyGetSetDef vecenv_getset[] = {
    {"num_envs", (getter)vecenv_get_num_envs, NULL, "envs in the block", NULL},
    {"first_index", (getter)vecenv_get_first_index, NULL, "the job's index of env 0", NULL},
    {"name", (getter)vecenv_get_name, NULL, "the environment's registered name", NULL},
    {"render_fps", (getter)vecenv_get_render_fps, NULL,
     "frames per second of the env's videos (Gymnasium's metadata render_fps); None "
     "before the first render()", NULL},
    {"obs_dim", (getter)vecenv_get_obs_dim, NULL, "floats per observation", NULL},
    {"obs_high", (getter)vecenv_get_obs_high, NULL,
     "a uint8 env's largest observation value (its observations are then read as bytes, "
     "uint8 arrays), 0 for float observations", NULL},
    {"discrete", (getter)vecenv_get_discrete, NULL, "True when actions are discrete", NULL},
    {"num_actions", (getter)vecenv_get_num_actions, NULL, "discrete: choices; else 0", NULL},
    {"action_dim", (getter)vecenv_get_action_dim, NULL, "continuous: floats; else 0", NULL},
    {"action_low", (getter)vecenv_get_action_low, NULL,
     "continuous: (action_dim,) float32 lower bounds; discrete: None", NULL},
    {"action_high", (getter)vecenv_get_action_high, NULL,
     "continuous: (action_dim,) float32 upper bounds; discrete: None", NULL},
    {"action_dims", (getter)vecenv_get_action_dims, NULL, "MultiDiscrete: sub-actions; else 0",
     NULL},
    {"action_nvec", (getter)vecenv_get_action_nvec, NULL,
     "MultiDiscrete: (D,) int64 sizes; else None", NULL},
    {"action_mask", (getter)vecenv_get_action_mask, NULL,
     "a new (num_envs, num_actions) bool array of the actions each env's state allows; "
     "None for an env without a mask", NULL},
    {"max_episode_steps", (getter)vecenv_get_max_episode_steps, NULL,
     "steps after which an episode is truncated", NULL},
    {"closed", (getter)vecenv_get_closed, NULL, "True after close()", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(vecenv_render_doc,
             "render(width, height) -> tuple\n\nEach env's current state drawn as Gymnasium's "
             "rgb_array mode draws it\n(calf_renderer_draw): a (height, width, 3) uint8 array "
             "per env, new on\nevery call. Raises ValueError for an env that cannot be drawn or "
             "a calf\nwithout video support, OSError when the renderer cannot start.");
static PyObject *vecenv_render(VecEnvObject *self, PyObject *args) {
    int width, height;
    if (!PyArg_ParseTuple(args, "ii:render", &width, &height)) return NULL;
    if (!vecenv_usable(self)) return NULL;
    calf_error err = {0};
    if (self->renderer && (calf_renderer_width(self->renderer) != width ||
                           calf_renderer_height(self->renderer) != height)) {
        calf_renderer_close(self->renderer);
        self->renderer = NULL;
    }
    if (!self->renderer &&
        calf_renderer_open(calf_vec_env_name(self->v), width, height, &self->renderer, &err) !=
            CALF_OK)
        return raise_calf(&err);
    PyObject *frames = PyTuple_New(self->n); /* new reference, returned */
    if (!frames) return NULL;
    npy_intp dims[3] = {height, width, 3};
    for (int e = 0; e < self->n; e++) {
        PyObject *a = PyArray_SimpleNew(3, dims, NPY_UINT8); /* new reference */
        if (!a) {
            Py_DECREF(frames);
            return NULL;
        }
        PyTuple_SET_ITEM(frames, e, a); /* steals a */
        uint8_t *rgb = PyArray_DATA((PyArrayObject *)a);
        if (calf_renderer_draw(self->renderer, calf_vec_env_env(self->v, e), rgb, &err) !=
            CALF_OK) {
            Py_DECREF(frames);
            return raise_calf(&err);
        }
    }
    return frames;
}

static PyObject *vecenv_get_render_fps(VecEnvObject *self, void *closure) {
    (void)closure;
    if (!vecenv_usable(self)) return NULL;
    if (!self->renderer) Py_RETURN_NONE; /* known once render() has made the renderer */
    return PyFloat_FromDouble(calf_renderer_fps(self->renderer));
}

static PyMethodDef vecenv_methods[] = {
    {"render", (PyCFunction)vecenv_render, METH_VARARGS, vecenv_render_doc},
    {"reset", (PyCFunction)vecenv_reset, METH_O, vecenv_reset_doc},
    {"step", (PyCFunction)vecenv_step, METH_VARARGS, vecenv_step_doc},
    {"step_gym", (PyCFunction)vecenv_step_gym, METH_O, vecenv_step_gym_doc},
    {"close", (PyCFunction)vecenv_close, METH_NOARGS, vecenv_close_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(vecenv_doc,
             "VecEnv(name, num_envs, seed, first_index=0, env_lib=None)\n\n"
             "Envs [first_index, first_index + num_envs) of a job of env `name` seeded with\n"
             "`seed`, as calf's trainer makes them (calf_vec_env_open). `env_lib` loads a\n"
             "plug-in first. Every env has started its first episode.");

static PyTypeObject VecEnvType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "calf._calf.VecEnv",
    .tp_basicsize = sizeof(VecEnvObject),
    .tp_dealloc = (destructor)vecenv_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = vecenv_doc,
    .tp_methods = vecenv_methods,
    .tp_getset = vecenv_getset,
    .tp_init = (initproc)vecenv_init,
    .tp_new = PyType_GenericNew,
};

/* ---- Policy: a run's greedy policy (calf/policy.h) ------------------------------- */

#define POLICY "calf.Policy"

typedef struct {
    PyObject_HEAD
    calf_policy *p; /* NULL once closed */
    int busy;       /* set while calf_policy_greedy runs without the GIL, as VecEnv's */
} PolicyObject;

static int policy_usable(PolicyObject *self) {
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "calf.Policy: used from two threads at once (one thread at a time)");
        return 0;
    }
    if (!self->p) {
        PyErr_SetString(PyExc_ValueError, "calf.Policy: the policy is closed");
        return 0;
    }
    return 1;
}

static int policy_init(PolicyObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"root_dir", "checkpoint", NULL};
    const char *root_dir = NULL, *checkpoint = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "z|z:Policy", kwlist, &root_dir,
                                     &checkpoint))
        return -1;
    if (self->p || self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "calf.Policy: already open");
        return -1;
    }
    calf_error err = {0};
    calf_policy *p = NULL;
    int rc;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS /* reads the config and the checkpoint */
    rc = calf_policy_open(root_dir, checkpoint, &p, &err);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (rc != CALF_OK) {
        raise_calf(&err);
        return -1;
    }
    self->p = p;
    return 0;
}

static void policy_dealloc(PolicyObject *self) {
    calf_policy_close(self->p);
    self->p = NULL;
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyDoc_STRVAR(policy_close_doc, "close()\n\nRelease the policy; a second call does nothing.");
static PyObject *policy_close(PolicyObject *self, PyObject *Py_UNUSED(ignored)) {
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        "calf.Policy: close() while another thread acts with the policy");
        return NULL;
    }
    calf_policy_close(self->p);
    self->p = NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(policy_greedy_doc,
             "greedy(obs, actions, mask=None)\n\n"
             "Greedy actions for obs: (rows, obs_dim) float32 (calf_policy_greedy_masked),\n"
             "written to actions: (rows,) int32 for a discrete policy, (rows, D) int32 for a\n"
             "MultiDiscrete one, (rows, action_dim) float32 for a continuous one; among the\n"
             "actions mask allows, (rows, num_actions) uint8 (nonzero: valid), when given.\n"
             "All arrays C-contiguous.");
/* greedy's and sample's work: check the arrays, act without the GIL. */
static PyObject *policy_act(PolicyObject *self, PyObject *obs, PyObject *actions,
                            PyObject *mask_obj, int sample) {
    if (!policy_usable(self)) return NULL;
    if (!PyArray_Check(obs)) {
        PyErr_SetString(PyExc_TypeError, "calf.Policy: obs must be a numpy.ndarray");
        return NULL;
    }
    npy_intp rows = PyArray_NDIM((PyArrayObject *)obs) == 2
                        ? PyArray_DIMS((PyArrayObject *)obs)[0] : -1;
    if (rows > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "calf.Policy: %zd rows are more than %d",
                     (Py_ssize_t)rows, INT_MAX);
        return NULL;
    }
    int discrete = calf_policy_discrete(self->p), obs_dim = calf_policy_obs_dim(self->p);
    int dims = calf_policy_action_dims(self->p);
    int ok = check_array(POLICY, obs, "obs", NPY_FLOAT32, 2, rows, obs_dim, 0) &&
             (dims > 0 ? check_array(POLICY, actions, "actions", NPY_INT32, 2, rows, dims, 1)
              : discrete ? check_array(POLICY, actions, "actions", NPY_INT32, 1, rows, 0, 1)
                         : check_array(POLICY, actions, "actions", NPY_FLOAT32, 2, rows,
                                       calf_policy_action_dim(self->p), 1)) &&
             (mask_obj == Py_None ||
              check_array(POLICY, mask_obj, "mask", NPY_UINT8, 2, rows,
                          calf_policy_num_actions(self->p), 0));
    if (!ok) return NULL;
    const float *o = PyArray_DATA((PyArrayObject *)obs);
    void *a = PyArray_DATA((PyArrayObject *)actions);
    const uint8_t *mask =
        mask_obj == Py_None ? NULL : PyArray_DATA((PyArrayObject *)mask_obj);
    calf_error err = {0};
    int rc;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    rc = sample ? calf_policy_sample(self->p, o, mask, (int)rows, discrete ? a : NULL,
                                     discrete ? NULL : a, &err)
                : calf_policy_greedy_masked(self->p, o, mask, (int)rows, discrete ? a : NULL,
                                            discrete ? NULL : a, &err);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (rc != CALF_OK) return raise_calf(&err);
    Py_RETURN_NONE;
}

static PyObject *policy_greedy(PolicyObject *self, PyObject *args) {
    PyObject *obs, *actions, *mask_obj = Py_None; /* borrowed */
    if (!PyArg_ParseTuple(args, "OO|O:greedy", &obs, &actions, &mask_obj)) return NULL;
    return policy_act(self, obs, actions, mask_obj, 0);
}

PyDoc_STRVAR(policy_sample_doc,
             "sample(obs, actions, seed, mask=None)\n\n"
             "Actions drawn from the policy's distribution (calf_policy_sample), as greedy\n"
             "writes them; seed: an int reseeds the streams first (calf_policy_seed), None\n"
             "goes on from the last draw.");
static PyObject *policy_sample(PolicyObject *self, PyObject *args) {
    PyObject *obs, *actions, *seed, *mask_obj = Py_None; /* borrowed */
    if (!PyArg_ParseTuple(args, "OOO|O:sample", &obs, &actions, &seed, &mask_obj)) return NULL;
    if (!policy_usable(self)) return NULL;
    if (seed != Py_None) {
        unsigned long long s = PyLong_AsUnsignedLongLong(seed);
        if (s == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
        calf_error err = {0};
        if (calf_policy_seed(self->p, (uint64_t)s, &err) != CALF_OK) return raise_calf(&err);
    }
    return policy_act(self, obs, actions, mask_obj, 1);
}

static PyObject *policy_get_stochastic(PolicyObject *self, void *closure) {
    (void)closure;
    if (!policy_usable(self)) return NULL;
    return PyBool_FromLong(calf_policy_stochastic(self->p));
}

PyDoc_STRVAR(policy_reset_doc,
             "reset(rows, which=None)\n\n"
             "A policy with memory (calf_policy_reset): which None, rows rows each starting an\n"
             "episode (state zeroed); else which: (rows,) uint8, C-contiguous, the rows whose\n"
             "byte is nonzero start one, the others keep their state. No memory: nothing.");
static PyObject *policy_reset(PolicyObject *self, PyObject *args) {
    int rows;
    PyObject *which = Py_None; /* borrowed */
    if (!PyArg_ParseTuple(args, "i|O:reset", &rows, &which)) return NULL;
    if (!policy_usable(self)) return NULL;
    const uint8_t *w = NULL;
    if (which != Py_None) {
        if (!check_array(POLICY, which, "which", NPY_UINT8, 1, rows, 0, 0)) return NULL;
        w = PyArray_DATA((PyArrayObject *)which);
    }
    calf_error err = {0};
    if (calf_policy_reset(self->p, rows, w, &err) != CALF_OK) return raise_calf(&err);
    Py_RETURN_NONE;
}

#define POLICY_INT_GETTER(field, call)                                      \
    static PyObject *policy_get_##field(PolicyObject *self, void *closure) { \
        (void)closure;                                                      \
        if (!policy_usable(self)) return NULL;                              \
        return PyLong_FromLongLong((long long)call(self->p));               \
    }
POLICY_INT_GETTER(obs_dim, calf_policy_obs_dim)
POLICY_INT_GETTER(num_actions, calf_policy_num_actions)
POLICY_INT_GETTER(action_dim, calf_policy_action_dim)
POLICY_INT_GETTER(iteration, calf_policy_iteration)
POLICY_INT_GETTER(action_dims, calf_policy_action_dims)

static PyObject *policy_get_masked(PolicyObject *self, void *closure) {
    (void)closure;
    if (!policy_usable(self)) return NULL;
    return PyBool_FromLong(calf_policy_masked(self->p));
}
static PyObject *policy_get_action_nvec(PolicyObject *self, void *closure) {
    (void)closure;
    if (!policy_usable(self)) return NULL;
    return nvec_array(calf_policy_action_nvec(self->p), calf_policy_action_dims(self->p));
}
POLICY_INT_GETTER(state_size, calf_policy_state_size)

static PyObject *policy_get_discrete(PolicyObject *self, void *closure) {
    (void)closure;
    if (!policy_usable(self)) return NULL;
    return PyBool_FromLong(calf_policy_discrete(self->p));
}
static PyObject *policy_get_env_name(PolicyObject *self, void *closure) {
    (void)closure;
    if (!policy_usable(self)) return NULL;
    return PyUnicode_FromString(calf_policy_env_name(self->p));
}
static PyObject *policy_get_checkpoint(PolicyObject *self, void *closure) {
    (void)closure;
    if (!policy_usable(self)) return NULL;
    return PyUnicode_DecodeFSDefault(calf_policy_checkpoint(self->p));
}
static PyObject *policy_get_closed(PolicyObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(self->p == NULL);
}

static PyGetSetDef policy_getset[] = {
    {"obs_dim", (getter)policy_get_obs_dim, NULL, "floats per observation row", NULL},
    {"discrete", (getter)policy_get_discrete, NULL, "True when actions are discrete", NULL},
    {"num_actions", (getter)policy_get_num_actions, NULL, "discrete: choices; else 0", NULL},
    {"action_dim", (getter)policy_get_action_dim, NULL, "continuous: floats; else 0", NULL},
    {"action_dims", (getter)policy_get_action_dims, NULL, "MultiDiscrete: sub-actions; else 0",
     NULL},
    {"action_nvec", (getter)policy_get_action_nvec, NULL,
     "MultiDiscrete: (D,) int64 sizes; else None", NULL},
    {"masked", (getter)policy_get_masked, NULL, "True when the env masks its actions", NULL},
    {"env_name", (getter)policy_get_env_name, NULL, "the run's environment", NULL},
    {"checkpoint", (getter)policy_get_checkpoint, NULL, "the checkpoint file opened", NULL},
    {"iteration", (getter)policy_get_iteration, NULL, "the checkpoint's iteration", NULL},
    {"state_size", (getter)policy_get_state_size, NULL,
     "floats of state each row carries (a policy with memory); else 0", NULL},
    {"closed", (getter)policy_get_closed, NULL, "True after close()", NULL},
    {"stochastic", (getter)policy_get_stochastic, NULL,
     "True when sample draws from a distribution; False: its samples are greedy", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef policy_methods[] = {
    {"greedy", (PyCFunction)policy_greedy, METH_VARARGS, policy_greedy_doc},
    {"sample", (PyCFunction)policy_sample, METH_VARARGS, policy_sample_doc},
    {"reset", (PyCFunction)policy_reset, METH_VARARGS, policy_reset_doc},
    {"close", (PyCFunction)policy_close, METH_NOARGS, policy_close_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(policy_doc,
             "Policy(root_dir, checkpoint=None)\n\n"
             "The greedy policy of the run in root_dir at its newest valid checkpoint, or at\n"
             "`checkpoint` (calf_policy_open; root_dir None: the run holding it).");

static PyTypeObject PolicyType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "calf._calf.Policy",
    .tp_basicsize = sizeof(PolicyObject),
    .tp_dealloc = (destructor)policy_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = policy_doc,
    .tp_methods = policy_methods,
    .tp_getset = policy_getset,
    .tp_init = (initproc)policy_init,
    .tp_new = PyType_GenericNew,
};

/* ---- Trainer: the stepwise trainer (calf/trainer.h) ------------------------------ */

#define TRAINER "calf.Trainer"

/* The run lock (_calf.h). Writers first where glibc offers it (its default lets a stream
 * of readers keep a writer waiting). */
#ifdef PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP
static pthread_rwlock_t run_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
#else
static pthread_rwlock_t run_lock = PTHREAD_RWLOCK_INITIALIZER;
#endif

void run_lock_shared(void) {
    if (pthread_rwlock_rdlock(&run_lock) != 0) Py_FatalError("calf: the run lock failed");
}
void run_lock_alone(void) {
    if (pthread_rwlock_wrlock(&run_lock) != 0) Py_FatalError("calf: the run lock failed");
}
void run_unlock(void) {
    if (pthread_rwlock_unlock(&run_lock) != 0) Py_FatalError("calf: the run lock failed");
}

typedef struct {
    PyObject_HEAD
    calf_trainer *t; /* NULL once closed */
    int busy;        /* set while a call runs without the GIL, as VecEnv's */
} TrainerObject;

static int trainer_usable(TrainerObject *self) {
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        TRAINER ": used from two threads at once (one thread at a time)");
        return 0;
    }
    if (!self->t) {
        PyErr_SetString(PyExc_ValueError, TRAINER ": the run is closed");
        return 0;
    }
    return 1;
}

static int trainer_init(TrainerObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"root_dir", "conf", "conf_text", "conf_params", "quiet", NULL};
    const char *root_dir = NULL, *conf = NULL, *conf_text = NULL;
    PyObject *params_arg = NULL; /* borrowed */
    int quiet = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "s|zzOp:Trainer", kwlist, &root_dir, &conf,
                                     &conf_text, &params_arg, &quiet))
        return -1;
    if (self->t || self->busy) {
        PyErr_SetString(PyExc_RuntimeError, TRAINER ": already open");
        return -1;
    }
    conf_texts ct;
    if (conf_texts_init(&ct, TRAINER, params_arg) < 0) return -1;
    calf_trainer_options o = CALF_TRAINER_OPTIONS_INIT;
    o.root_dir = root_dir;
    o.conf_path = conf;
    o.conf_text = conf_text;
    o.conf_params = ct.texts;
    o.num_conf_params = ct.n;
    o.quiet = quiet;
    calf_error err = {0};
    calf_trainer *t = NULL;
    int rc;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS /* reads the config, resumes, builds the envs */
    run_lock_shared();
    rc = calf_trainer_open(&o, &t, &err);
    run_unlock();
    Py_END_ALLOW_THREADS
    self->busy = 0;
    conf_texts_free(&ct);
    if (rc != CALF_OK) {
        raise_calf(&err);
        return -1;
    }
    self->t = t;
    return 0;
}

/* Close the run; returns calf's status of the final writes, err filled on failure. */
static int trainer_release(TrainerObject *self, calf_error *err) {
    calf_trainer *t = self->t;
    self->t = NULL;
    if (!t) return CALF_OK;
    int rc;
    Py_BEGIN_ALLOW_THREADS /* flushes the summaries and the log */
    run_lock_shared();
    rc = calf_trainer_close(t, err);
    run_unlock();
    Py_END_ALLOW_THREADS
    return rc;
}

static void trainer_dealloc(TrainerObject *self) {
    calf_error err = {0};
    if (trainer_release(self, &err) != CALF_OK) /* no caller to raise to */
        PySys_WriteStderr("calf.Trainer: closing the run: %.900s\n", err.msg);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyDoc_STRVAR(trainer_close_doc,
             "close()\n\nClose the run: flush its summaries and log, release the root dir's\n"
             "lock. Raises when those final writes fail; a second call does nothing.");
static PyObject *trainer_close(TrainerObject *self, PyObject *Py_UNUSED(ignored)) {
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError,
                        TRAINER ": close() while another thread steps the run");
        return NULL;
    }
    calf_error err = {0};
    self->busy = 1;
    int rc = trainer_release(self, &err);
    self->busy = 0;
    if (rc != CALF_OK) return raise_calf(&err);
    Py_RETURN_NONE;
}

/* The metrics of the last step as a new dict. */
static PyObject *metrics_dict(const calf_trainer_metrics *m) {
    PyObject *d = PyDict_New(); /* new reference, returned */
    if (!d) return NULL;
    int bad = dict_put(d, "iteration", PyLong_FromLongLong(m->iteration)) < 0 ||
              dict_put(d, "env_steps", PyLong_FromLongLong(m->env_steps)) < 0 ||
              dict_put(d, "episodes", PyLong_FromLongLong(m->episodes)) < 0 ||
              dict_put(d, "total_episodes", PyLong_FromLongLong(m->total_episodes)) < 0 ||
              dict_put(d, "average_return", PyFloat_FromDouble(m->average_return)) < 0 ||
              dict_put(d, "average_episode_length",
                       PyFloat_FromDouble(m->average_episode_length)) < 0 ||
              dict_put(d, "eval_return", PyFloat_FromDouble(m->eval_return)) < 0 ||
              dict_put(d, "eval_return_std", PyFloat_FromDouble(m->eval_return_std)) < 0 ||
              dict_put(d, "eval_episode_length", PyFloat_FromDouble(m->eval_episode_length)) < 0 ||
              dict_put(d, "eval_episodes", PyLong_FromLongLong(m->eval_episodes)) < 0 ||
              dict_put(d, "steps_per_sec", PyFloat_FromDouble(m->steps_per_sec)) < 0;
    for (int k = 0; !bad && k < m->num_algorithm_metrics; k++)
        bad = dict_put(d, m->algorithm_metric_names[k],
                       PyFloat_FromDouble(m->algorithm_metric_values[k])) < 0;
    if (bad) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

PyDoc_STRVAR(trainer_step_doc,
             "step() -> dict\n\nRun one iteration (calf_trainer_step) and return its metrics.");
static PyObject *trainer_step(TrainerObject *self, PyObject *Py_UNUSED(ignored)) {
    if (!trainer_usable(self)) return NULL;
    calf_error err = {0};
    int rc;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    run_lock_shared();
    rc = calf_trainer_step(self->t, &err);
    run_unlock();
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (rc != CALF_OK) return raise_calf(&err);
    const calf_trainer_metrics *m = calf_trainer_metrics_last(self->t); /* the trainer's */
    if (!m) {
        PyErr_SetString(PyExc_RuntimeError, TRAINER ": a step left no metrics");
        return NULL;
    }
    return metrics_dict(m);
}

PyDoc_STRVAR(trainer_checkpoint_doc,
             "checkpoint()\n\nWrite a checkpoint of the current iteration now "
             "(calf_trainer_checkpoint).");
static PyObject *trainer_checkpoint(TrainerObject *self, PyObject *Py_UNUSED(ignored)) {
    if (!trainer_usable(self)) return NULL;
    calf_error err = {0};
    int rc;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    run_lock_shared();
    rc = calf_trainer_checkpoint(self->t, &err);
    run_unlock();
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (rc != CALF_OK) return raise_calf(&err);
    Py_RETURN_NONE;
}

static PyObject *trainer_get_done(TrainerObject *self, void *closure) {
    (void)closure;
    if (!trainer_usable(self)) return NULL;
    return PyBool_FromLong(calf_trainer_done(self->t));
}
static PyObject *trainer_get_iteration(TrainerObject *self, void *closure) {
    (void)closure;
    if (!trainer_usable(self)) return NULL;
    return PyLong_FromLongLong((long long)calf_trainer_iteration(self->t));
}
static PyObject *trainer_get_closed(TrainerObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(self->t == NULL);
}

static PyGetSetDef trainer_getset[] = {
    {"done", (getter)trainer_get_done, NULL, "True when the run has reached its end", NULL},
    {"iteration", (getter)trainer_get_iteration, NULL, "iterations completed so far", NULL},
    {"closed", (getter)trainer_get_closed, NULL, "True after close()", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef trainer_methods[] = {
    {"step", (PyCFunction)trainer_step, METH_NOARGS, trainer_step_doc},
    {"checkpoint", (PyCFunction)trainer_checkpoint, METH_NOARGS, trainer_checkpoint_doc},
    {"close", (PyCFunction)trainer_close, METH_NOARGS, trainer_close_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(trainer_doc,
             "Trainer(root_dir, conf=None, conf_text=None, conf_params=(), quiet=True)\n\n"
             "A run opened with calf_trainer_open: a gin file `conf`, or gin text\n"
             "`conf_text`, or neither (ROOT/config.gin of an earlier run), then the\n"
             "'Scope.param=value' strings of conf_params, as --conf_param.");

static PyTypeObject TrainerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "calf._calf.Trainer",
    .tp_basicsize = sizeof(TrainerObject),
    .tp_dealloc = (destructor)trainer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = trainer_doc,
    .tp_methods = trainer_methods,
    .tp_getset = trainer_getset,
    .tp_init = (initproc)trainer_init,
    .tp_new = PyType_GenericNew,
};

/* ---- module functions ------------------------------------------------------------ */

PyDoc_STRVAR(features_doc,
             "features() -> dict\n\nWhat this build holds, as `calf --version` says: "
             "{'mpi': note, 'mujoco': note, 'video': note}, each note \"built in\" or \"not "
             "built: ...\", and {'kernels': the variant of the hot kernels this process runs}.");
static PyObject *calf_py_features(PyObject *module, PyObject *Py_UNUSED(ignored)) {
    (void)module;
    static const char *const names[] = {"mpi", "mujoco", "video", "kernels"};
    PyObject *d = PyDict_New(); /* new reference, returned */
    if (!d) return NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *note = calf_feature_note(names[i]);
        PyObject *s = PyUnicode_FromString(note ? note : "unknown"); /* new reference */
        if (!s || PyDict_SetItemString(d, names[i], s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(s); /* the dict holds its own */
    }
    return d;
}

PyDoc_STRVAR(has_mpi_doc, "has_mpi() -> bool\n\nWhether this build has the MPI backend.");
static PyObject *calf_py_has_mpi(PyObject *module, PyObject *Py_UNUSED(ignored)) {
    (void)module;
    return PyBool_FromLong(calf_has_mpi());
}
PyDoc_STRVAR(has_mujoco_doc, "has_mujoco() -> bool\n\nWhether this build has MuJoCo's envs.");
static PyObject *calf_py_has_mujoco(PyObject *module, PyObject *Py_UNUSED(ignored)) {
    (void)module;
    return PyBool_FromLong(calf_has_mujoco());
}

PyDoc_STRVAR(env_names_doc,
             "env_names() -> list[str]\n\nThe registered environments, built-ins first.");
static PyObject *calf_py_env_names(PyObject *module, PyObject *Py_UNUSED(ignored)) {
    (void)module;
    int count = calf_env_count();
    PyObject *list = PyList_New(count); /* new reference, returned */
    if (!list) return NULL;
    for (int i = 0; i < count; i++) {
        const calf_env_class *cls = calf_env_at(i);
        PyObject *s = PyUnicode_FromString(cls ? cls->spec.name : ""); /* new reference */
        if (!s) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, s); /* steals s */
    }
    return list;
}

static PyMethodDef module_methods[] = {
    {"features", calf_py_features, METH_NOARGS, features_doc},
    {"has_mpi", calf_py_has_mpi, METH_NOARGS, has_mpi_doc},
    {"has_mujoco", calf_py_has_mujoco, METH_NOARGS, has_mujoco_doc},
    {"env_names", calf_py_env_names, METH_NOARGS, env_names_doc},
    {"register_env", (PyCFunction)(void (*)(void))pyenv_register, METH_VARARGS | METH_KEYWORDS,
     "register_env(name, factory, obs_dim, num_actions, low, high, max_episode_steps,\n"
     "state_bytes, render_fps, key, key_path, *, obs_shape, obs_dtype, obs_high, box_shape,\n"
     "dict_keys, dict_shapes, nvec, masked) -> name\n\nRegister a Python env class "
     "(calf.register_env checks the spaces and reads the key)."},
    {"obs_form", pyenv_obs_form, METH_O,
     "obs_form(name) -> dict: the env's observation shape, dtype and high, and a Python "
     "env's Box shape or Dict keys and shapes"},
    {"set_trust_checkpoint", pyenv_set_trust_checkpoint, METH_O,
     "set_trust_checkpoint(on): while on, a resume unpickles Python envs' states this "
     "user's key did not sign"},
    {"take_env_error", pyenv_take_error, METH_NOARGS,
     "take_env_error() -> the first exception an env raised in this process, or None"},
    {"set_print_tracebacks", pyenv_set_print_tracebacks, METH_O,
     "set_print_tracebacks(on): print an env's traceback on stderr when it raises"},
    {NULL, NULL, 0, NULL},
};

calf_module_state *calf_state(PyObject *module) {
    return PyModule_GetState(module); /* not NULL: m_size > 0, made with the module */
}

static int module_traverse(PyObject *module, visitproc visit, void *arg) {
    calf_module_state *st = PyModule_GetState(module);
    return st ? pyenv_traverse(&st->pyenv, visit, arg) : 0;
}

static int module_clear(PyObject *module) {
    calf_module_state *st = PyModule_GetState(module);
    if (st) pyenv_clear(&st->pyenv);
    return 0;
}

static struct PyModuleDef calf_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "calf._calf",
    .m_doc = "calf's C library: envs stepped into NumPy arrays, policies, the trainer.",
    .m_size = sizeof(calf_module_state),
    .m_methods = module_methods,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
};

PyMODINIT_FUNC PyInit__calf(void) {
    import_array(); /* NumPy's C API; returns NULL with an ImportError when it fails */
    if (PyType_Ready(&VecEnvType) < 0 || PyType_Ready(&PolicyType) < 0 ||
        PyType_Ready(&TrainerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&calf_module); /* new reference, returned */
    if (!m) return NULL;
    if (pyenv_init(&calf_state(m)->pyenv) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&VecEnvType); /* PyModule_AddObject steals one on success */
    if (PyModule_AddObject(m, "VecEnv", (PyObject *)&VecEnvType) < 0) {
        Py_DECREF(&VecEnvType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&PolicyType);
    if (PyModule_AddObject(m, "Policy", (PyObject *)&PolicyType) < 0) {
        Py_DECREF(&PolicyType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&TrainerType);
    if (PyModule_AddObject(m, "Trainer", (PyObject *)&TrainerType) < 0) {
        Py_DECREF(&TrainerType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddFunctions(m, job_methods) < 0 ||
        PyModule_AddFunctions(m, scalars_methods) < 0 ||
        PyModule_AddFunctions(m, config_methods) < 0 ||
        PyModule_AddStringConstant(m, "__version__", calf_version()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
