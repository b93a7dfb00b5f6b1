/* rank_log.h: a process's log of its part of a run, ROOT/log/rank-R.log: whole lines
 * through write(2), the first failure kept; private to src/training/. */
#ifndef CALF_RANK_LOG_H
#define CALF_RANK_LOG_H

#include <stdbool.h>
#include <sys/types.h>

#include "calf/error.h"

/* The first failed write is kept (and a line that went out in part is cut off again);
 * it stops the job at the end of the iteration. */
typedef struct rank_log {
    int fd;             /* -1 when not open */
    char *path;         /* malloc'd */
    off_t size;         /* bytes of whole lines in the file */
    calf_error err;     /* first failure; status CALF_OK while none */
    bool echo;          /* lines marked for stderr go there too (main process, not quiet) */
} rank_log;

/* Open (append to) ROOT/log/rank-RANK.log, making ROOT/log. l->fd must be -1 before. */
int rank_log_open(rank_log *l, const char *root, int rank, calf_error *err);
/* One line (without its newline; at most 8191 characters): nothing once a write failed
 * or when the log is not open. */
void rank_log_line(rank_log *l, const char *line);
/* A formatted line to the log, and to stderr when to_stderr and l->echo. */
void rank_log_printf(rank_log *l, bool to_stderr, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Close; a failure to close is kept like a failed write. */
void rank_log_close(rank_log *l);

#endif
