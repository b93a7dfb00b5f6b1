/* _config.c: the extension's side of calf's binding table and configs (calf/config.h):
 * every row with its type, help and the default each algorithm gives it (what
 * calf.list_bindings and the short names read), and a config's values in effect after
 * its file or text and --conf_param strings, read without training anything. */
#include "_calf.h"

#include <stdio.h>

#include "calf/config.h"

static const char *type_name(calf_config_type t) {
    switch (t) {
    case CALF_CFG_INT: return "int";
    case CALF_CFG_FLOAT: return "float";
    case CALF_CFG_BOOL: return "bool";
    case CALF_CFG_STRING: return "str";
    case CALF_CFG_INT_TUPLE: return "int tuple";
    case CALF_CFG_FLOAT_TUPLE: return "float tuple";
    case CALF_CFG_REF: return "reference";
    case CALF_CFG_CONV_LAYERS: return "conv layers";
    }
    return "?";
}

PyDoc_STRVAR(bindings_doc,
             "bindings(algorithm=None) -> ((name, type, default, help, optional, choices,\n"
             "fallback, owner), ...)\n\n"
             "Every row of calf's binding table in id order: its type ('int', 'float', 'bool',\n"
             "'str', 'int tuple', 'float tuple', 'reference', 'conv layers'), the default as gin\n"
             "text that a config choosing `algorithm` (an algorithm_ctor choice without '@';\n"
             "None: calf's own) gets, its help, whether it takes None, its allowed values\n"
             "('|'-separated or None), the row it falls back to (or None) and the algorithm\n"
             "whose own row it is (or None). ValueError for an unknown algorithm.");
static PyObject *config_bindings(PyObject *module, PyObject *args) {
    (void)module;
    const char *algorithm = NULL;
    if (!PyArg_ParseTuple(args, "|z:bindings", &algorithm)) return NULL;
    int n = calf_binding_count();
    if (algorithm && !calf_binding_default(0, algorithm))
        return PyErr_Format(PyExc_ValueError, "calf: unknown algorithm '%s' (known: %s)",
                            algorithm, calf_binding_choices(CALF_CFG_ALGORITHM_CTOR));
    PyObject *rows = PyTuple_New(n); /* new reference, returned */
    for (int i = 0; rows && i < n; i++) {
        int fb = calf_binding_fallback(i);
        PyObject *row = Py_BuildValue(
            "(ssssNzzz)", calf_binding_name(i), type_name(calf_binding_type(i)),
            calf_binding_default(i, algorithm), calf_binding_help(i),
            PyBool_FromLong(calf_binding_flags(i) & CALF_BINDING_OPTIONAL),
            calf_binding_choices(i), fb == CALF_NO_FALLBACK ? NULL : calf_binding_name(fb),
            calf_binding_algorithm(i)); /* new reference */
        if (!row) Py_CLEAR(rows);
        else PyTuple_SET_ITEM(rows, i, row); /* steals row */
    }
    return rows;
}

PyDoc_STRVAR(config_values_doc,
             "config_values(conf=None, conf_text=None, conf_params=()) -> {name: (value, origin)}\n\n"
             "The values in effect, as gin text, of the config in the gin file `conf` or the\n"
             "text `conf_text` (neither: calf's defaults) after the 'Scope.param=value'\n"
             "strings of conf_params, as a run would read them, and where each was set\n"
             "('file:line', '--conf_param', or '' for a default). Nothing is validated\n"
             "beyond parsing: the run itself checks the rest. ValueError with calf's message.");
static PyObject *config_values(PyObject *module, PyObject *args, PyObject *kwds) {
    (void)module;
    static char *kwlist[] = {"conf", "conf_text", "conf_params", NULL};
    const char *conf = NULL, *conf_text = NULL;
    PyObject *params_arg = NULL; /* borrowed */
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|zzO:config_values", kwlist, &conf,
                                     &conf_text, &params_arg))
        return NULL;
    conf_texts ct;
    if (conf_texts_init(&ct, "calf.config_values", params_arg) < 0) return NULL;
    calf_error err;
    calf_error_clear(&err);
    calf_config *cfg = calf_config_new(&err);
    int rc = cfg ? CALF_OK : err.status;
    if (rc == CALF_OK && conf) rc = calf_config_parse_file(cfg, conf, &err);
    else if (rc == CALF_OK && conf_text)
        rc = calf_config_parse_string(cfg, conf_text, "<conf_text>", &err);
    for (int i = 0; rc == CALF_OK && i < ct.n; i++)
        rc = calf_config_apply_param(cfg, ct.texts[i], &err);
    conf_texts_free(&ct);
    if (rc != CALF_OK) {
        calf_config_free(cfg);
        if (rc == CALF_EIO) err.status = CALF_EINVAL; /* a missing file is bad input, as calf train says */
        return raise_calf(&err);
    }
    PyObject *d = PyDict_New(); /* new reference, returned */
    for (int i = 0, n = calf_binding_count(); d && i < n; i++) {
        char value[2048];
        calf_config_format_value(cfg, i, value, sizeof value);
        PyObject *pair = Py_BuildValue("(ss)", value, calf_config_origin(cfg, i)); /* new */
        if (!pair || PyDict_SetItemString(d, calf_binding_name(i), pair) < 0) Py_CLEAR(d);
        Py_XDECREF(pair);
    }
    calf_config_free(cfg);
    return d;
}

PyMethodDef config_methods[] = {
    {"bindings", config_bindings, METH_VARARGS, bindings_doc},
    {"config_values", (PyCFunction)(void (*)(void))config_values, METH_VARARGS | METH_KEYWORDS,
     config_values_doc},
    {NULL, NULL, 0, NULL},
};
