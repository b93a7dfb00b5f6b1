/* cmd_plot.c: `calf plot ROOT... [-o FILE.svg] [--tag T]... [--smooth W] [--x ...]
 * [--group]`: the runs' learning curves as one SVG file, written whole or not at all
 * (a temporary file renamed into place), so a failed plot never leaves half a picture. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calf/plot.h"
#include "commands.h"

#define PLOT_USAGE                                                                          \
    "usage: calf plot ROOT... [-o FILE.svg] [--tag T]... [--smooth W]\n"                   \
    "                 [--x steps|iterations|seconds] [--group]\n"

static const char plot_help[] =
    PLOT_USAGE
    "\n"
    "draws the learning curves of training runs (each ROOT a calf train --root_dir) as one\n"
    "SVG 1.1 file: one panel per tag and directory, one colour per run with a legend of\n"
    "the runs' directory names, TensorBoard's smoothing over the faint raw curve, axes\n"
    "with 1-2-5 ticks. ROOT/eval and ROOT/train are each read as TensorBoard reads a run\n"
    "(as calf events does: files in name order, restart markers applied).\n"
    "\n"
    "  -o FILE          the SVG file (default plot.svg; - for standard output)\n"
    "  --tag T          a panel per directory that has scalar tag T; eval:T or train:T\n"
    "                   for one directory (repeatable; default Metrics/AverageReturn,\n"
    "                   eval's panel then train's)\n"
    "  --smooth W       TensorBoard's smoothing weight in [0, 1) (default 0.6; 0: none):\n"
    "                   its exponential moving average with debiasing\n"
    "  --x steps        x = environment steps (default): a Metrics/X value is placed at\n"
    "                   the Metrics/EnvironmentSteps of its step, and a\n"
    "                   Metrics_vs_EnvironmentSteps/X value at its own step\n"
    "  --x iterations   x = the iteration (the events' step)\n"
    "  --x seconds      x = wall-clock seconds since the run's first record\n"
    "  --group          runs whose names differ only by a seed suffix (ppo-seed1, ppo_2,\n"
    "                   ppo3) as one line, their mean, over a band from their min to max\n"
    "\n"
    "The same events give the same bytes. Exit 2, with one line saying why, for a ROOT\n"
    "with no events file, a tag no run has, a damaged events file or a bad option.\n";

static const char *value_of(int argc, char **argv, int *i, const char *name, bool *bad) {
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n] != '\0') return NULL;
    if (*i + 1 >= argc) {
        fprintf(stderr, "calf plot: option %s needs a value\n", name);
        *bad = true;
        return NULL;
    }
    return argv[++*i];
}

/* err's message, which names no file, prefixed by the output's name. */
static int name_output(calf_error *err, const char *name) {
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s", err->msg);
    return calf_error_set(err, err->status, "%s: %s", name, msg);
}

/* Write the plot to path through path.tmp.<pid>, renamed into place on success. */
static int plot_to_file(const char *const *roots, size_t n, const calf_plot_options *opt,
                        const char *path, calf_error *err) {
    size_t cap = strlen(path) + 32;
    char *tmp = malloc(cap);
    if (!tmp) return calf_error_set(err, CALF_ENOMEM, "out of memory");
    snprintf(tmp, cap, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        int rc = calf_error_set(err, CALF_EIO, "%s: cannot create: %s", path, strerror(errno));
        free(tmp);
        return rc;
    }
    int rc = calf_plot(roots, n, opt, f, err);
    bool write_failed = ferror(f) != 0;
    if (fclose(f) != 0 && rc == CALF_OK)
        rc = calf_error_set(err, CALF_EIO, "%s: writing the SVG: %s", path, strerror(errno));
    else if (rc != CALF_OK && write_failed)
        rc = name_output(err, path);
    if (rc == CALF_OK && rename(tmp, path) != 0)
        rc = calf_error_set(err, CALF_EIO, "rename %s to %s: %s", tmp, path, strerror(errno));
    if (rc != CALF_OK) unlink(tmp); /* already failing: its own failure adds nothing */
    free(tmp);
    return rc;
}

int calf_cmd_plot(int argc, char **argv) {
    const char **roots = calloc((size_t)argc + 1, sizeof *roots);
    const char **tags = calloc((size_t)argc + 1, sizeof *tags);
    if (!roots || !tags) {
        free(roots);
        free(tags);
        fprintf(stderr, "calf: out of memory\n");
        return 1;
    }
    calf_plot_options opt = {NULL, 0, 0.6, CALF_PLOT_X_STEPS, false, stderr};
    const char *output = "plot.svg";
    size_t nroots = 0;
    bool bad = false, options_done = false;
    for (int i = 0; i < argc && !bad; i++) {
        const char *a = argv[i], *v;
        if (options_done || a[0] != '-' || a[1] == '\0') {
            roots[nroots++] = a;
        } else if (!strcmp(a, "--")) {
            options_done = true;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(plot_help, stdout);
            free(roots);
            free(tags);
            return 0;
        } else if (!strcmp(a, "--group")) {
            opt.group = true;
        } else if ((v = value_of(argc, argv, &i, "-o", &bad)) ||
                   (v = value_of(argc, argv, &i, "--output", &bad))) {
            if (!*v) {
                fprintf(stderr, "calf plot: -o needs a file name\n");
                bad = true;
            }
            output = v;
        } else if ((v = value_of(argc, argv, &i, "--tag", &bad))) {
            tags[opt.num_tags++] = v;
        } else if ((v = value_of(argc, argv, &i, "--smooth", &bad))) {
            char *end = NULL;
            errno = 0;
            opt.smooth = strtod(v, &end);
            if (end == v || *end != '\0' || errno || !(opt.smooth >= 0 && opt.smooth < 1)) {
                fprintf(stderr, "calf plot: --smooth expects a number in [0, 1), got '%s'\n", v);
                bad = true;
            }
        } else if ((v = value_of(argc, argv, &i, "--x", &bad))) {
            if (!strcmp(v, "steps")) opt.x = CALF_PLOT_X_STEPS;
            else if (!strcmp(v, "iterations")) opt.x = CALF_PLOT_X_ITERATIONS;
            else if (!strcmp(v, "seconds")) opt.x = CALF_PLOT_X_SECONDS;
            else {
                fprintf(stderr, "calf plot: --x expects steps, iterations or seconds, got '%s'\n", v);
                bad = true;
            }
        } else if (!bad) {
            fprintf(stderr, "calf plot: unknown option '%s'\n", a);
            bad = true;
        }
    }
    if (!bad && nroots == 0) {
        fprintf(stderr, "calf plot: no ROOT given (a run's --root_dir)\n");
        bad = true;
    }
    int rc = 0;
    if (!bad) {
        opt.tags = tags;
        calf_error err;
        calf_error_clear(&err);
        int st;
        if (!strcmp(output, "-")) {
            st = calf_plot(roots, nroots, &opt, stdout, &err);
            if (st != CALF_OK && ferror(stdout)) st = name_output(&err, "standard output");
        } else {
            st = plot_to_file(roots, nroots, &opt, output, &err);
        }
        if (st != CALF_OK) fprintf(stderr, "calf plot: %s\n", err.msg);
        rc = calf_exit_code(st);
    }
    free(roots);
    free(tags);
    return bad ? 2 : rc;
}
