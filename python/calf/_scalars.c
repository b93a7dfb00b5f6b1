/* _scalars.c: the extension's side of calf.read_scalars: a run's events files read by
 * calf's reader (calf_events_scalars, what `calf events --csv` prints) into one NumPy
 * array per tag and column, the numbers as stored, with no text in between. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL calf_numpy_api
#define NO_IMPORT_ARRAY
#include <numpy/arrayobject.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "_calf.h"
#include "calf/summary.h"

/* One tag's scalars, grown as the reader gives them (without the GIL, so with
 * PyMem_Raw*). */
typedef struct tag_columns {
    char *tag; /* owned */
    size_t n, cap;
    int64_t *steps;     /* (n) */
    double *wall_times; /* (n) */
    float *values;      /* (n) */
} tag_columns;

/* Every tag's columns, tags in order of first appearance (the order of the CSV's rows). */
typedef struct columns {
    tag_columns *tags; /* (num_tags) */
    size_t num_tags, cap;
    size_t last; /* the tag the previous scalar had: runs of one tag are common */
} columns;

static void columns_free(columns *c) {
    for (size_t i = 0; i < c->num_tags; i++) {
        tag_columns *t = &c->tags[i];
        PyMem_RawFree(t->tag);
        PyMem_RawFree(t->steps);
        PyMem_RawFree(t->wall_times);
        PyMem_RawFree(t->values);
    }
    PyMem_RawFree(c->tags);
    memset(c, 0, sizeof *c);
}

/* p resized to n elements of size each; 0, or -1 with p unchanged. */
static int grow(void **p, size_t n, size_t size) {
    void *q = PyMem_RawRealloc(*p, n * size);
    if (!q) return -1;
    *p = q;
    return 0;
}

/* The columns of tag, added when new; NULL when out of memory. */
static tag_columns *columns_of(columns *c, const char *tag) {
    if (c->last < c->num_tags && strcmp(c->tags[c->last].tag, tag) == 0)
        return &c->tags[c->last];
    for (size_t i = 0; i < c->num_tags; i++)
        if (strcmp(c->tags[i].tag, tag) == 0) {
            c->last = i;
            return &c->tags[i];
        }
    if (c->num_tags == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        if (grow((void **)&c->tags, cap, sizeof *c->tags) < 0) return NULL;
        c->cap = cap;
    }
    size_t len = strlen(tag) + 1;
    char *copy = PyMem_RawMalloc(len);
    if (!copy) return NULL;
    memcpy(copy, tag, len);
    c->last = c->num_tags++;
    tag_columns *t = &c->tags[c->last];
    memset(t, 0, sizeof *t);
    t->tag = copy;
    return t;
}

/* calf_events_scalar_fn: one more row into its tag's columns. */
static int add_scalar(void *arg, const char *tag, int64_t step, double wall_time, float value) {
    columns *c = arg;
    tag_columns *t = columns_of(c, tag);
    if (!t) return CALF_ENOMEM;
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        if (grow((void **)&t->steps, cap, sizeof *t->steps) < 0 ||
            grow((void **)&t->wall_times, cap, sizeof *t->wall_times) < 0 ||
            grow((void **)&t->values, cap, sizeof *t->values) < 0)
            return CALF_ENOMEM;
        t->cap = cap;
    }
    t->steps[t->n] = step;
    t->wall_times[t->n] = wall_time;
    t->values[t->n] = value;
    t->n++;
    return CALF_OK;
}

/* A new 1-D array of n elements of type, copied from data; NULL with an exception set. */
static PyObject *array_of(const void *data, size_t n, int type, size_t size) {
    npy_intp dims[1] = {(npy_intp)n};
    PyObject *a = PyArray_SimpleNew(1, dims, type); /* new reference, returned */
    if (a && n > 0) memcpy(PyArray_DATA((PyArrayObject *)a), data, n * size);
    return a;
}

/* The columns as {tag: (steps int64, wall_times float64, values float32)}, a new dict;
 * NULL with an exception set. Tags are decoded as UTF-8, a byte that is not replaced. */
static PyObject *columns_dict(const columns *c) {
    PyObject *dict = PyDict_New(); /* new reference, returned */
    for (size_t i = 0; dict && i < c->num_tags; i++) {
        const tag_columns *t = &c->tags[i];
        PyObject *tag = PyUnicode_DecodeUTF8(t->tag, (Py_ssize_t)strlen(t->tag), "replace");
        PyObject *cols = Py_BuildValue(
            "(NNN)", array_of(t->steps, t->n, NPY_INT64, sizeof *t->steps),
            array_of(t->wall_times, t->n, NPY_FLOAT64, sizeof *t->wall_times),
            array_of(t->values, t->n, NPY_FLOAT32, sizeof *t->values)); /* steals the arrays */
        if (!tag || !cols || PyDict_SetItem(dict, tag, cols) < 0) Py_CLEAR(dict);
        Py_XDECREF(tag);
        Py_XDECREF(cols);
    }
    return dict;
}

PyDoc_STRVAR(events_scalars_doc,
             "events_scalars(paths) -> ({tag: (steps, wall_times, values)}, warnings)\n\n"
             "Read the events files `paths` as one run, as TensorBoard reads them, and return\n"
             "the scalars `calf events --csv` prints, as arrays per tag (steps int64,\n"
             "wall_times float64, values float32, as stored; tags in order of first\n"
             "appearance), and the warnings it would print (a cut last record). Raises\n"
             "ValueError or OSError with calf's message for a damaged or unreadable file.");
static PyObject *events_scalars(PyObject *module, PyObject *arg) {
    (void)module;
    conf_texts ct;
    if (conf_texts_init(&ct, "calf.read_scalars", arg) < 0) return NULL;
    char *warn_buf = NULL;
    size_t warn_len = 0;
    FILE *warn = open_memstream(&warn_buf, &warn_len);
    if (!warn) {
        conf_texts_free(&ct);
        return PyErr_NoMemory();
    }
    columns c;
    memset(&c, 0, sizeof c);
    calf_error err;
    calf_error_clear(&err);
    int rc;
    Py_BEGIN_ALLOW_THREADS /* reads the files */
    rc = calf_events_scalars(ct.texts, (size_t)ct.n, warn, add_scalar, &c, &err);
    Py_END_ALLOW_THREADS
    conf_texts_free(&ct);
    int warn_bad = fclose(warn) != 0;
    PyObject *result = NULL;
    if (rc == CALF_ENOMEM && !err.msg[0]) { /* add_scalar's: it has no err to fill */
        PyErr_NoMemory();
    } else if (rc != CALF_OK) {
        raise_calf(&err);
    } else if (warn_bad) {
        PyErr_NoMemory();
    } else {
        PyObject *dict = columns_dict(&c); /* new reference */
        PyObject *warnings = dict ? PyUnicode_DecodeUTF8(warn_buf ? warn_buf : "",
                                                         warn_buf ? (Py_ssize_t)warn_len : 0,
                                                         "replace")
                                  : NULL; /* new reference */
        if (dict && warnings) result = Py_BuildValue("(NN)", dict, warnings); /* steals both */
        else {
            Py_XDECREF(dict);
            Py_XDECREF(warnings);
        }
    }
    free(warn_buf);
    columns_free(&c);
    return result;
}

PyMethodDef scalars_methods[] = {
    {"events_scalars", events_scalars, METH_O, events_scalars_doc},
    {NULL, NULL, 0, NULL},
};
