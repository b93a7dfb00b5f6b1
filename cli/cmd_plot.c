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

typedef struct {
    calf_plot_options opt;
    const char **roots, **tags; /* one per argument at most */
    size_t nroots;
    const char *output;
} plot_state;

static int plot_set(void *ctx, int id, const cli_value *v) {
    plot_state *p = ctx;
    switch (id) {
    case CLI_OPERAND: p->roots[p->nroots++] = v->text; break;
    case PLOT_OUTPUT: p->output = v->text; break;
    case PLOT_TAG: p->tags[p->opt.num_tags++] = v->text; break;
    case PLOT_SMOOTH: p->opt.smooth = v->real; break;
    case PLOT_X: p->opt.x = v->choice; break;
    case PLOT_GROUP: p->opt.group = true; break;
    }
    return 0;
}

int calf_cmd_plot(const cli_command *self, int argc, char **argv) {
    const char **roots = calloc((size_t)argc + 1, sizeof *roots);
    const char **tags = calloc((size_t)argc + 1, sizeof *tags);
    if (!roots || !tags) {
        free(roots);
        free(tags);
        fprintf(stderr, "calf: out of memory\n");
        return 1;
    }
    plot_state p = {{NULL, 0, 0.6, CALF_PLOT_X_STEPS, false, stderr}, roots, tags, 0, "plot.svg"};
    int rc = cli_parse(self, &argc, argv, plot_set, &p);
    if (rc == CLI_RUN && p.nroots == 0) {
        fprintf(stderr, "calf plot: no ROOT given (a run's --root_dir)\n");
        rc = 2;
    }
    if (rc != CLI_RUN) {
        free(roots);
        free(tags);
        return rc;
    }
    p.opt.tags = tags;
    calf_error err;
    calf_error_clear(&err);
    int st;
    if (!strcmp(p.output, "-")) {
        st = calf_plot(roots, p.nroots, &p.opt, stdout, &err);
        if (st != CALF_OK && ferror(stdout)) st = name_output(&err, "standard output");
    } else {
        st = plot_to_file(roots, p.nroots, &p.opt, p.output, &err);
    }
    if (st != CALF_OK) fprintf(stderr, "calf plot: %s\n", err.msg);
    free(roots);
    free(tags);
    return calf_exit_code(st);
}
