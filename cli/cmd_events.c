/* cmd_events.c: `calf events [--raw] [--csv] FILE...`: print TensorBoard events files,
 * one value per line or as CSV, after checking every record's CRCs (a debugging and
 * testing aid that shows a run as TensorBoard would, or as stored). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "calf/summary.h"
#include "commands.h"

typedef struct {
    calf_events_dump_options opt;
    const char **paths; /* one per argument at most */
    size_t n;
} events_state;

static int events_set(void *ctx, int id, const cli_value *v) {
    events_state *e = ctx;
    switch (id) {
    case CLI_OPERAND: e->paths[e->n++] = v->text; break; /* "-" is a file name here, not stdin */
    case EVENTS_RAW: e->opt.raw = true; break;
    case EVENTS_CSV: e->opt.csv = true; break;
    }
    return 0;
}

int calf_cmd_events(const cli_command *self, int argc, char **argv) {
    events_state e = {{false, false, stderr}, NULL, 0};
    e.paths = calloc((size_t)argc + 1, sizeof *e.paths);
    if (!e.paths) {
        fprintf(stderr, "calf: out of memory\n");
        return 1;
    }
    int rc = cli_parse(self, &argc, argv, events_set, &e);
    if (rc == CLI_RUN && e.n == 0) {
        fprintf(stderr, "calf events: no FILE given\n%s", self->usage);
        rc = 2;
    }
    if (rc != CLI_RUN) {
        free(e.paths);
        return rc;
    }
    calf_error err;
    calf_error_clear(&err);
    rc = calf_events_dump(e.paths, e.n, &e.opt, stdout, &err);
    free(e.paths);
    if (rc != CALF_OK) {
        /* a file that cannot be read is bad input; output that cannot be written, a failure */
        bool write_failed = fflush(stdout) != 0 || ferror(stdout);
        fprintf(stderr, "calf: %s\n", err.msg);
        return write_failed ? 1 : 2;
    }
    return 0;
}
