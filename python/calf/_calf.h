/* _calf.h: what the extension module's C files share (_calf.c holds them): the
 * module's state, calf's errors as Python exceptions, the conf_params argument as C
 * strings, and the lock that keeps a whole job from running beside trainers. */
#ifndef CALF_PY_CALF_H
#define CALF_PY_CALF_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_pyenv.h"
#include "calf/error.h"

/* The module's state (PEP 3121: calf_module's m_size), zeroed when the module is made:
 * what the extension keeps of its own beyond its types and the run lock. */
typedef struct calf_module_state {
    pyenv_module pyenv; /* _pyenv.c's: the Python env classes, pickle's functions */
} calf_module_state;

/* The state of module (calf._calf itself; borrowed, lives as long as the module). */
calf_module_state *calf_state(PyObject *module);

/* Raise the Python exception for a calf status, carrying calf's message: ValueError
 * (CALF_EINVAL), MemoryError, OSError (CALF_EIO), KeyboardInterrupt (CALF_EINTR), else
 * RuntimeError. Returns NULL so callers can `return raise_calf(&err);`. */
PyObject *raise_calf(const calf_error *err);

/* calf's run lock, taken with the GIL released, a reader-writer lock. Every
 * calf_trainer_* call shares it: trainers in different threads run at once (each writes
 * its own summaries, calf/trainer.h). The whole jobs (calf_train, the calf program,
 * calf_play) hold it alone: they install the process's signal handlers and fork
 * workers, and a fork must not copy another thread in the middle of a trainer call (a
 * lock it holds would stay locked in the worker). A waiting job goes before new trainer
 * calls, so stepping trainers cannot starve it. Never freed (a static lock). */
void run_lock_shared(void);
void run_lock_alone(void);
void run_unlock(void);

/* A sequence of str (or None) as the const char * array calf's options take. */
typedef struct conf_texts {
    PyObject *tuple;    /* a tuple of our own holding the strs: their buffers stay valid,
                           and unchanged, while the GIL is released */
    const char **texts; /* (n) UTF-8, the strs' own buffers */
    int n;
} conf_texts;

/* Fill ct from params (an iterable of str, or NULL/None: none). Returns 0, or -1 with a
 * Python exception naming `who` (ct then needs no free). */
int conf_texts_init(conf_texts *ct, const char *who, PyObject *params);
void conf_texts_free(conf_texts *ct); /* idempotent */

/* The module functions of _job.c (calf.train, python3 -m calf, calf play), of
 * _scalars.c (the events reader) and of _config.c (the binding table, a config's values),
 * added to the module by PyInit__calf. */
extern PyMethodDef job_methods[];
extern PyMethodDef scalars_methods[];
extern PyMethodDef config_methods[];

#endif
