/* cmd_events.c: `calf events [--raw] [--csv] FILE...`: print TensorBoard events files,
 * one value per line or as CSV, after checking every record's CRCs (a debugging and
 * testing aid that shows a run as TensorBoard would, or as stored). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calf/summary.h"
#include "commands.h"

#define EVENTS_USAGE "usage: calf events [--raw] [--csv] FILE...\n"

static const char events_help[] =
    EVENTS_USAGE
    "\n"
    "prints TensorBoard events files after checking both CRCs of every record:\n"
    "  file_version <v>\n"
    "  <step> <tag> <value>                                 a scalar\n"
    "  <step> <tag> histogram num=N min=A max=B sum=S       a histogram\n"
    "  <step> session_start                                 a restart marker\n"
    "Several files are read in the order given as one run, as TensorBoard reads the\n"
    "files of a run directory in name order (calf names them by creation time, so\n"
    "DIR/events.out.tfevents.* lists them launch by launch). A FILE may be a pipe:\n"
    "`... | calf events /dev/stdin`.\n"
    "\n"
    "By default the output is what TensorBoard shows: at each session_start after the\n"
    "run's first, the values read before it with step >= its step are dropped (the\n"
    "launch that resumed there wrote them again).\n"
    "\n"
    "  --raw   every record as stored; nothing dropped\n"
    "  --csv   tag,step,wall_time,value: a header, then one row per scalar (histograms\n"
    "          and markers have none); wall_time %.17g seconds and value %.9g, both\n"
    "          exact; a tag with a comma, quote or line break is quoted, CSV-style\n"
    "\n"
    "A file that ends inside its last record (a crash while writing) is shown up to\n"
    "that record with a warning, exit 0. A damaged record (CRC mismatch, bad length)\n"
    "is an error naming its offset, exit 2, after what came before it is shown.\n";

int calf_cmd_events(int argc, char **argv) {
    calf_events_dump_options opt = {false, false, stderr};
    const char **paths = calloc((size_t)argc + 1, sizeof *paths);
    if (!paths) {
        fprintf(stderr, "calf: out of memory\n");
        return 1;
    }
    size_t n = 0;
    bool options_done = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (options_done || a[0] != '-' || a[1] == '\0') {
            paths[n++] = a; /* "-" is a file name here, not stdin */
        } else if (!strcmp(a, "--")) {
            options_done = true;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(events_help, stdout);
            free(paths);
            return 0;
        } else if (!strcmp(a, "--raw")) {
            opt.raw = true;
        } else if (!strcmp(a, "--csv")) {
            opt.csv = true;
        } else {
            fprintf(stderr, "calf events: unknown option '%s'\n" EVENTS_USAGE, a);
            free(paths);
            return 2;
        }
    }
    if (n == 0) {
        fputs("calf events: no FILE given\n" EVENTS_USAGE, stderr);
        free(paths);
        return 2;
    }
    calf_error err;
    calf_error_clear(&err);
    int rc = calf_events_dump(paths, n, &opt, stdout, &err);
    free(paths);
    if (rc != CALF_OK) {
        /* a file that cannot be read is bad input; output that cannot be written, a failure */
        bool write_failed = fflush(stdout) != 0 || ferror(stdout);
        fprintf(stderr, "calf: %s\n", err.msg);
        return write_failed ? 1 : 2;
    }
    return 0;
}
