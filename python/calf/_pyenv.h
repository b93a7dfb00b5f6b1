/* _pyenv.h: the module functions of _pyenv.c (Python environments as calf env classes),
 * which _calf.c lists in the module's method table. */
#ifndef CALF_PY_PYENV_H
#define CALF_PY_PYENV_H

#include <Python.h>

/* register_env(name, factory, obs_dim, num_actions, low, high, max_episode_steps,
 * state_bytes) -> name: the env class `name` whose envs are factory() objects. */
PyObject *pyenv_register(PyObject *module, PyObject *args, PyObject *kwargs);
/* take_env_error() -> the first exception an env raised in this process (cleared), or None */
PyObject *pyenv_take_error(PyObject *module, PyObject *ignored);
/* set_print_tracebacks(on): print an env's traceback on stderr when it raises */
PyObject *pyenv_set_print_tracebacks(PyObject *module, PyObject *arg);
/* While on, a fork (calf's --nproc workers, made with the GIL held) runs Python's
 * before/after-fork steps, as os.fork does. */
void pyenv_fork_guard(int on);
/* At import: pickle's functions. 0, or -1 with an exception set. */
int pyenv_init(void);

#endif
