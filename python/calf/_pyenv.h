/* _pyenv.h: the module functions of _pyenv.c (Python environments as calf env classes),
 * which _calf.c lists in the module's method table, and the state _pyenv.c keeps in the
 * module's state (_calf.h's calf_module_state). */
#ifndef CALF_PY_PYENV_H
#define CALF_PY_PYENV_H

#include <Python.h>
#include <sys/types.h>

#define PYENV_MAX_CLASSES 16

struct pyenv_class;

/* What _pyenv.c keeps, as a part of the module's state: every hook reaches it through
 * its class (pyenv_class.mod), the module functions through their module. */
typedef struct pyenv_module {
    /* (num_classes) the classes registered through this module; never freed: calf's
     * env registry keeps them for the life of the process */
    struct pyenv_class *classes[PYENV_MAX_CLASSES];
    int num_classes;
    int print_tracebacks;   /* set by the CLI (python -m calf) */
    pid_t pid;              /* the process that imported the module */
    PyObject *first_error;  /* strong: the first exception an env raised, for the API */
    PyObject *pickle_dumps; /* strong: pickle.dumps */
    PyObject *pickle_loads; /* strong: pickle.loads */
    PyObject *hmac_digest;  /* strong: hmac.digest, which signs the pickles */
} pyenv_module;

/* register_env(name, factory, obs_dim, num_actions, low, high, max_episode_steps,
 * state_bytes, render_fps, key, key_path, *, obs_shape, obs_dtype, obs_high, box_shape,
 * dict_keys, dict_shapes, nvec, masked) -> name: the env class `name` whose envs are factory() objects,
 * their checkpointed pickles signed with `key` (bytes, read from the file key_path:
 * calf/_ckpt_key.py). The observation: the spec's obs_shape (H, W, C), obs_dtype and
 * obs_high, and what reset/step return: a Box of box_shape (None: (obs_dim,)), or a
 * Dict whose dict_keys' Boxes of dict_shapes are read in that order into one vector.
 * nvec: a MultiDiscrete action's sizes (None: not one); masked: reset and step give an
 * action mask (info["action_mask"] or the observation's "action_mask" key). */
PyObject *pyenv_register(PyObject *module, PyObject *args, PyObject *kwargs);
/* obs_form(name) -> dict: env class name's observation as its spec and (a Python env)
 * its space say: obs_dim, shape ((H, W, C) of an image, else None), dtype ("uint8" or
 * "float32"), high (uint8: the largest value; else 0), and a Python env's box_shape (a
 * Box's own shape) or dict_keys with dict_shapes (a Dict's Boxes in the order they are
 * flattened), None for the others. ValueError (calf's message) for an unknown name. */
PyObject *pyenv_obs_form(PyObject *module, PyObject *arg);
/* take_env_error() -> the first exception an env raised in this process (cleared), or None */
PyObject *pyenv_take_error(PyObject *module, PyObject *ignored);
/* set_trust_checkpoint(on): while on in the calling thread (each thread its own, as
 * trainers in two threads open at once), a resume unpickles Python envs' states that this
 * user's key did not sign (each said once per class on stderr) */
PyObject *pyenv_set_trust_checkpoint(PyObject *module, PyObject *arg);
/* set_print_tracebacks(on): print an env's traceback on stderr when it raises */
PyObject *pyenv_set_print_tracebacks(PyObject *module, PyObject *arg);
/* While on in the calling thread, a fork it makes (calf's --nproc workers, made with
 * the GIL held) runs Python's before/after-fork steps, as os.fork does. */
void pyenv_fork_guard(int on);
/* At import, on the new module's zeroed state: the process, pickle's functions, the fork
 * hooks (installed once per process). 0, or -1 with an exception set. */
int pyenv_init(pyenv_module *st);
/* The module's m_traverse and m_clear for the objects st holds. */
int pyenv_traverse(pyenv_module *st, visitproc visit, void *arg);
void pyenv_clear(pyenv_module *st);

#endif
