/* _job.c: the extension's whole-job functions: calf.train (calf_train, the job `calf
 * train` runs, --nproc workers included), python3 -m calf (the calf program's own
 * calf_cli_main, in this process, and its command table) and Policy.record (calf_play,
 * `calf play --video`). */
#include "_calf.h"
#include "_pyenv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calf/train.h"
#include "commands.h"

/* Run fn(arg) holding calf's run lock alone (_calf.h). Without Python envs the GIL is
 * released meanwhile; with them the job keeps it, so that --nproc workers are forked
 * holding it and run Python's fork steps (pyenv's fork guard), as os.fork's children
 * do, and other Python threads wait until the job ends. */
static int run_locked(int python_env, int (*fn)(void *), void *arg) {
    int rc;
    Py_BEGIN_ALLOW_THREADS
    run_lock_alone();
    if (!python_env) rc = fn(arg);
    Py_END_ALLOW_THREADS
    if (python_env) {
        pyenv_fork_guard(1);
        rc = fn(arg);
        pyenv_fork_guard(0);
    }
    run_unlock();
    return rc;
}

typedef struct {
    const calf_train_options *o;
    calf_error *err;
} train_args;
static int train_call(void *arg) {
    train_args *a = arg;
    return calf_train(a->o, a->err);
}

typedef struct {
    int argc;
    char **argv;
} cli_args;
static int cli_call(void *arg) {
    cli_args *a = arg;
    int rc = calf_cli_main(a->argc, a->argv);
    fflush(NULL); /* the program's output before Python writes anything more */
    return rc;
}

PyDoc_STRVAR(train_doc,
             "train(root_dir, conf=None, conf_params=(), nproc=1, quiet=False,\n"
             "      python_env=False, conf_text=None)\n\n"
             "Run the training job `calf train` runs (calf_train): --root_dir, --conf (or the\n"
             "config as gin text, conf_text), the 'Scope.param=value' strings of conf_params\n"
             "as --conf_param, --nproc workers.\n"
             "Raises ValueError with calf's message for bad input, KeyboardInterrupt after\n"
             "the checkpoint a Ctrl-C makes calf write, RuntimeError when a worker fails\n"
             "(its message is on stderr, as the CLI prints it).");
static PyObject *job_train(PyObject *module, PyObject *args, PyObject *kwds) {
    (void)module;
    static char *kwlist[] = {"root_dir", "conf", "conf_params", "nproc", "quiet", "python_env",
                             "conf_text", NULL};
    const char *root_dir = NULL, *conf = NULL, *conf_text = NULL;
    PyObject *params_arg = NULL; /* borrowed */
    int nproc = 1, quiet = 0, python_env = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "s|zOippz:train", kwlist, &root_dir, &conf,
                                     &params_arg, &nproc, &quiet, &python_env, &conf_text))
        return NULL;
    if (nproc < 1 || nproc > 1024) /* the CLI's bounds for --nproc */
        return PyErr_Format(PyExc_ValueError, "calf.train: nproc must be in [1, 1024], got %d",
                            nproc);
    conf_texts ct;
    if (conf_texts_init(&ct, "calf.train", params_arg) < 0) return NULL;
    calf_train_options o;
    memset(&o, 0, sizeof o);
    o.root_dir = root_dir;
    o.conf_path = conf;
    o.conf_text = conf_text;
    o.conf_params = ct.texts;
    o.num_conf_params = ct.n;
    o.nproc = nproc;
    o.quiet = quiet;
    calf_error err;
    calf_error_clear(&err);
    int rc;
    /* calf installs its own SIGINT/SIGTERM handlers for the job and puts Python's back
     * when it returns, so a Ctrl-C stops the job the way it stops `calf train` */
    rc = run_locked(python_env, train_call, &(train_args){&o, &err});
    conf_texts_free(&ct);
    if (rc == CALF_OK) Py_RETURN_NONE;
    if (rc == CALF_EINTR) {
        /* A SIGINT that Python's own handler caught during the job (one that came before
         * calf's handlers were in place, in its setup) is the interrupt calf stopped for,
         * or one before it: raised once, here, not again in the caller's except block */
        if (PyErr_CheckSignals() < 0) {
            if (!PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) return NULL;
            PyErr_Clear();
        }
        PyErr_SetString(PyExc_KeyboardInterrupt,
                        "calf.train: interrupted: stopped after an iteration, its checkpoint "
                        "written (calling train again resumes from it)");
        return NULL;
    }
    if (!err.msg[0]) /* --nproc workers report their failures on stderr themselves */
        calf_error_set(&err, rc, "calf.train: the job in %s failed (`calf train` would exit "
                       "%d); the workers' messages are on stderr above", root_dir,
                       calf_exit_code(rc));
    return raise_calf(&err);
}

PyDoc_STRVAR(cli_main_doc,
             "cli_main(argv, python_env=False) -> int\n\nRun the calf program in this process "
             "on argv (argv[0] the program's name,\nargv[1] the subcommand) and return its exit "
             "status; its output goes to this\nprocess's stdout and stderr file descriptors. "
             "python_env: Python envs are\nregistered (the GIL is kept, as calf.train keeps it).");
static PyObject *job_cli_main(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *arg; /* borrowed */
    int python_env = 0;
    if (!PyArg_ParseTuple(args, "O|p:cli_main", &arg, &python_env)) return NULL;
    conf_texts ct;
    if (conf_texts_init(&ct, "calf.cli_main", arg) < 0) return NULL;
    /* the program may reorder its argv (the --env_lib options are taken out) */
    char **argv = PyMem_Calloc((size_t)ct.n + 1, sizeof *argv);
    if (!argv) {
        conf_texts_free(&ct);
        return PyErr_NoMemory();
    }
    for (int i = 0; i < ct.n; i++) argv[i] = (char *)ct.texts[i];
    int rc = run_locked(python_env, cli_call, &(cli_args){ct.n, argv});
    PyMem_Free(argv);
    conf_texts_free(&ct);
    /* interrupted (exit status 130): a SIGINT Python's handler also caught is that same
     * interrupt, which the program has reported (see job_train) */
    if (rc == 130 && PyErr_CheckSignals() < 0) {
        if (!PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) return NULL;
        PyErr_Clear();
    }
    return PyLong_FromLong(rc);
}

/* The command table's kinds as python3 -m calf names them. */
static const char *const kind_names[] = {
    [CLI_FLAG] = "flag",         [CLI_TEXT] = "text",   [CLI_INT] = "integer",
    [CLI_U64] = "unsigned",      [CLI_REAL] = "number", [CLI_CHOICE] = "choice",
};

PyDoc_STRVAR(cli_commands_doc,
             "cli_commands() -> ((name, summary, ((option, kind, help), ...)), ...)\n\n"
             "The calf program's command table (cli/commands.c), from which its parser and\n"
             "--help derive: each command with its options; kind is flag, text, integer,\n"
             "unsigned, number or choice; help is None for an option the command's text\n"
             "describes.");
static PyObject *job_cli_commands(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    PyObject *commands = PyTuple_New(cli_num_commands); /* new reference */
    for (int k = 0; commands && k < cli_num_commands; k++) {
        const cli_command *c = &cli_commands[k];
        PyObject *options = PyTuple_New(c->num_options); /* new reference */
        for (int j = 0; options && j < c->num_options; j++) {
            const cli_option *o = &c->options[j];
            PyObject *row = Py_BuildValue("(ssz)", o->name, kind_names[o->kind], o->help);
            if (!row) Py_CLEAR(options);
            else PyTuple_SET_ITEM(options, j, row); /* steals row */
        }
        PyObject *command = options ? Py_BuildValue("(ssN)", c->name, c->summary, options)
                                    : NULL; /* new reference; steals options */
        if (!command) Py_CLEAR(commands);
        else PyTuple_SET_ITEM(commands, k, command); /* steals command */
    }
    return commands;
}

/* Close a memory stream and take its text as a new str; NULL with an exception set
 * when it cannot be closed or decoded. Frees the buffer either way. */
static PyObject *memstream_text(FILE *f, char **buf, size_t *len) {
    int bad = fclose(f) != 0;
    PyObject *s = bad ? PyErr_NoMemory()
                      : PyUnicode_DecodeUTF8(*buf ? *buf : "", *buf ? (Py_ssize_t)*len : 0,
                                             "replace"); /* new reference */
    free(*buf);
    *buf = NULL;
    return s;
}

typedef struct {
    const calf_play_options *o;
    calf_error *err;
} play_args;
static int play_call(void *arg) {
    play_args *a = arg;
    return calf_play(a->o, a->err);
}

PyDoc_STRVAR(play_doc,
             "play(root_dir, checkpoint, num_episodes, seed, video, width, height, max_frames,\n"
             "     python_env=False) -> str\n\n"
             "Run `calf play` (calf_play) on a run and return its report; `video` records the\n"
             "episodes as an MP4 or GIF file (calf play --video). Raises ValueError or OSError\n"
             "with calf's message; the video is written whole or not at all.");
static PyObject *job_play(PyObject *module, PyObject *args, PyObject *kwds) {
    (void)module;
    static char *kwlist[] = {"root_dir", "checkpoint", "num_episodes", "seed", "video",
                             "width", "height", "max_frames", "python_env", NULL};
    calf_play_options o;
    memset(&o, 0, sizeof o);
    int python_env = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "sziLziiL|p:play", kwlist, &o.root_dir,
                                     &o.checkpoint, &o.num_episodes, &o.seed, &o.video, &o.width,
                                     &o.height, &o.max_frames, &python_env))
        return NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    if (!out) return PyErr_NoMemory();
    o.out = out;
    calf_error err;
    calf_error_clear(&err);
    int rc = run_locked(python_env, play_call, &(play_args){&o, &err});
    PyObject *report = memstream_text(out, &buf, &len); /* new reference */
    if (rc != CALF_OK) {
        Py_XDECREF(report);
        PyErr_Clear(); /* calf's failure is the one to report */
        return raise_calf(&err);
    }
    return report;
}

PyMethodDef job_methods[] = {
    {"play", (PyCFunction)(void (*)(void))job_play, METH_VARARGS | METH_KEYWORDS, play_doc},
    {"train", (PyCFunction)(void (*)(void))job_train, METH_VARARGS | METH_KEYWORDS, train_doc},
    {"cli_main", job_cli_main, METH_VARARGS, cli_main_doc},
    {"cli_commands", job_cli_commands, METH_NOARGS, cli_commands_doc},
    {NULL, NULL, 0, NULL},
};
