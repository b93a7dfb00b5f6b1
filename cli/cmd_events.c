/* cmd_events.c: `calf events FILE`: print a TensorBoard events file, one value per
 * line, after checking every record's CRCs (a debugging and testing aid). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "calf/summary.h"
#include "commands.h"

int calf_cmd_events(int argc, char **argv) {
    if (argc == 1 && (!strcmp(argv[0], "-h") || !strcmp(argv[0], "--help"))) {
        puts("usage: calf events FILE\n\nprints `<step> <tag> <value>` for every value in a "
             "TensorBoard events file,\nchecking every record's CRCs; a damaged record is an error "
             "naming its offset");
        return 0;
    }
    if (argc != 1 || argv[0][0] == '-') {
        fprintf(stderr, "usage: calf events FILE\n");
        return 2;
    }
    calf_error err;
    calf_error_clear(&err);
    if (calf_events_dump(argv[0], stdout, &err) != CALF_OK) {
        /* a file that cannot be read is bad input; output that cannot be written, a failure */
        bool write_failed = fflush(stdout) != 0 || ferror(stdout);
        fprintf(stderr, "calf: %s\n", err.msg);
        return write_failed ? 1 : 2;
    }
    return 0;
}
