/* _calf.c: the CPython extension module calf._calf, a thin layer over calf's public API
 * (calf/vec_env.h, version.h, error.h). VecEnv steps a block of calf's envs into NumPy
 * arrays the caller allocates, so the hot path makes no Python object per env; the
 * Gymnasium-shaped API is the pure-Python layer's (calf/__init__.py). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <stdint.h>

#include "calf/env.h"
#include "calf/error.h"
#include "calf/vec_env.h"
#include "calf/version.h"

/* Raise the Python exception for a calf status, carrying calf's message. Returns NULL so
 * callers can `return raise_calf(&err);`. */
static PyObject *raise_calf(const calf_error *err) {
    PyObject *type = PyExc_RuntimeError;
    if (err->status == CALF_EINVAL) type = PyExc_ValueError;
    else if (err->status == CALF_ENOMEM) type = PyExc_MemoryError;
    else if (err->status == CALF_EIO) type = PyExc_OSError;
    else if (err->status == CALF_EINTR) type = PyExc_KeyboardInterrupt;
    PyErr_SetString(type, err->msg[0] ? err->msg : "calf: unknown error");
    return NULL;
}

typedef struct {
    PyObject_HEAD
    calf_vec_env *v; /* NULL once closed */
    /* set while a call runs without the GIL: calf allows one thread per handle */
    int busy;
    int n, obs_dim;
    float *reward; /* (n) scratch: calf writes float32, Gymnasium returns float64 */
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
 * 2; cols ignored for ndim 1), writable when `writable`; else raises naming `what`. */
static int check_array(PyObject *obj, const char *what, int type, int ndim, npy_intp rows,
                       npy_intp cols, int writable) {
    if (!PyArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "calf.VecEnv: %s must be a numpy.ndarray", what);
        return 0;
    }
    PyArrayObject *a = (PyArrayObject *)obj; /* borrowed, as obj */
    if (PyArray_TYPE(a) != type) {
        PyArray_Descr *want = PyArray_DescrFromType(type); /* new reference */
        if (!want) return 0;
        PyErr_Format(PyExc_TypeError, "calf.VecEnv: %s must have dtype %S, got %S", what,
                     (PyObject *)want, (PyObject *)PyArray_DESCR(a));
        Py_DECREF(want);
        return 0;
    }
    int shape_ok = PyArray_NDIM(a) == ndim && PyArray_DIMS(a)[0] == rows &&
                   (ndim == 1 || PyArray_DIMS(a)[1] == cols);
    if (!shape_ok) {
        if (ndim == 1)
            PyErr_Format(PyExc_ValueError, "calf.VecEnv: %s must have shape (%zd,)", what,
                         (Py_ssize_t)rows);
        else
            PyErr_Format(PyExc_ValueError, "calf.VecEnv: %s must have shape (%zd, %zd)", what,
                         (Py_ssize_t)rows, (Py_ssize_t)cols);
        return 0;
    }
    if (!PyArray_IS_C_CONTIGUOUS(a) || (writable && !PyArray_ISWRITEABLE(a))) {
        PyErr_Format(PyExc_ValueError, "calf.VecEnv: %s must be C-contiguous%s", what,
                     writable ? " and writable" : "");
        return 0;
    }
    return 1;
}

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
    self->n = calf_vec_env_count(v);
    self->obs_dim = calf_vec_env_obs_dim(v);
    self->reward = PyMem_Malloc(sizeof(float) * (size_t)self->n);
    if (!self->reward) {
        calf_vec_env_close(v);
        PyErr_NoMemory();
        return -1;
    }
    self->v = v;
    return 0;
}

static void vecenv_release(VecEnvObject *self) {
    calf_vec_env_close(self->v);
    self->v = NULL;
    PyMem_Free(self->reward);
    self->reward = NULL;
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
             "obs: (num_envs, obs_dim) float32, C-contiguous.");
static PyObject *vecenv_reset(VecEnvObject *self, PyObject *obs) {
    if (!vecenv_usable(self)) return NULL;
    if (!check_array(obs, "obs", NPY_FLOAT32, 2, self->n, self->obs_dim, 1)) return NULL;
    float *out = PyArray_DATA((PyArrayObject *)obs);
    calf_error err = {0};
    int rc;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    rc = calf_vec_env_reset(self->v, out, &err);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (rc != CALF_OK) return raise_calf(&err);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(vecenv_step_doc,
             "step(actions, obs, rewards, terminated, truncated, final_obs)\n\n"
             "Step every env once (calf_vec_env_step), auto-resetting in the same step.\n"
             "actions: (num_envs,) int32 for a discrete env, (num_envs, action_dim) float32 for\n"
             "a continuous one. Writes obs and final_obs: (num_envs, obs_dim) float32,\n"
             "rewards: (num_envs,) float64, terminated and truncated: (num_envs,) bool.\n"
             "All arrays C-contiguous. The outputs are written even when the step raises\n"
             "for a non-finite value.");
static PyObject *vecenv_step(VecEnvObject *self, PyObject *args) {
    PyObject *actions, *obs, *rewards, *term, *trunc, *final_obs; /* borrowed */
    if (!PyArg_ParseTuple(args, "OOOOOO:step", &actions, &obs, &rewards, &term, &trunc,
                          &final_obs))
        return NULL;
    if (!vecenv_usable(self)) return NULL;
    int discrete = calf_vec_env_discrete(self->v);
    int ok = discrete ? check_array(actions, "actions", NPY_INT32, 1, self->n, 0, 0)
                      : check_array(actions, "actions", NPY_FLOAT32, 2, self->n,
                                    calf_vec_env_action_dim(self->v), 0);
    ok = ok && check_array(obs, "obs", NPY_FLOAT32, 2, self->n, self->obs_dim, 1) &&
         check_array(rewards, "rewards", NPY_FLOAT64, 1, self->n, 0, 1) &&
         check_array(term, "terminated", NPY_BOOL, 1, self->n, 0, 1) &&
         check_array(trunc, "truncated", NPY_BOOL, 1, self->n, 0, 1) &&
         check_array(final_obs, "final_obs", NPY_FLOAT32, 2, self->n, self->obs_dim, 1);
    if (!ok) return NULL;
    const void *act = PyArray_DATA((PyArrayObject *)actions);
    float *o = PyArray_DATA((PyArrayObject *)obs);
    double *r = PyArray_DATA((PyArrayObject *)rewards);
    /* numpy.bool_ is one byte holding 0 or 1, which is what calf writes */
    uint8_t *te = PyArray_DATA((PyArrayObject *)term);
    uint8_t *tr = PyArray_DATA((PyArrayObject *)trunc);
    float *fo = PyArray_DATA((PyArrayObject *)final_obs);
    calf_error err = {0};
    int rc;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    rc = calf_vec_env_step(self->v, discrete ? act : NULL, discrete ? NULL : act, o,
                           self->reward, te, tr, fo, &err);
    for (int e = 0; e < self->n; e++) r[e] = (double)self->reward[e];
    Py_END_ALLOW_THREADS
    self->busy = 0;
    if (rc != CALF_OK) return raise_calf(&err);
    Py_RETURN_NONE;
}

/* ---- the block's spaces, read once by the Python layer -------------------------- */

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

static PyGetSetDef vecenv_getset[] = {
    {"num_envs", (getter)vecenv_get_num_envs, NULL, "envs in the block", NULL},
    {"first_index", (getter)vecenv_get_first_index, NULL, "the job's index of env 0", NULL},
    {"name", (getter)vecenv_get_name, NULL, "the environment's registered name", NULL},
    {"obs_dim", (getter)vecenv_get_obs_dim, NULL, "floats per observation", NULL},
    {"discrete", (getter)vecenv_get_discrete, NULL, "True when actions are discrete", NULL},
    {"num_actions", (getter)vecenv_get_num_actions, NULL, "discrete: choices; else 0", NULL},
    {"action_dim", (getter)vecenv_get_action_dim, NULL, "continuous: floats; else 0", NULL},
    {"action_low", (getter)vecenv_get_action_low, NULL,
     "continuous: (action_dim,) float32 lower bounds; discrete: None", NULL},
    {"action_high", (getter)vecenv_get_action_high, NULL,
     "continuous: (action_dim,) float32 upper bounds; discrete: None", NULL},
    {"max_episode_steps", (getter)vecenv_get_max_episode_steps, NULL,
     "steps after which an episode is truncated", NULL},
    {"closed", (getter)vecenv_get_closed, NULL, "True after close()", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef vecenv_methods[] = {
    {"reset", (PyCFunction)vecenv_reset, METH_O, vecenv_reset_doc},
    {"step", (PyCFunction)vecenv_step, METH_VARARGS, vecenv_step_doc},
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

/* ---- module functions ------------------------------------------------------------ */

PyDoc_STRVAR(features_doc,
             "features() -> dict\n\nWhat this build holds, as `calf --version` says: "
             "{'mpi': note, 'mujoco': note}, each note \"built in\" or \"not built: ...\".");
static PyObject *calf_py_features(PyObject *module, PyObject *Py_UNUSED(ignored)) {
    (void)module;
    static const char *const names[] = {"mpi", "mujoco"};
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
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef calf_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "calf._calf",
    .m_doc = "calf's C library: environments stepped into NumPy arrays.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__calf(void) {
    import_array(); /* NumPy's C API; returns NULL with an ImportError when it fails */
    if (PyType_Ready(&VecEnvType) < 0) return NULL;
    PyObject *m = PyModule_Create(&calf_module); /* new reference, returned */
    if (!m) return NULL;
    Py_INCREF(&VecEnvType); /* PyModule_AddObject steals one on success */
    if (PyModule_AddObject(m, "VecEnv", (PyObject *)&VecEnvType) < 0) {
        Py_DECREF(&VecEnvType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddStringConstant(m, "__version__", calf_version()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
