/* rank_log.c: a process's log of its part of a run (rank_log.h), written line by line
 * with write(2) so that a failure is seen where it happens and a shim can inject it. */
#include "training/rank_log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/mem.h"

int rank_log_open(rank_log *l, const char *root, int rank, calf_error *err) {
    size_t cap = strlen(root) + 64;
    l->path = mem_alloc(cap, err);
    if (!l->path) return CALF_ENOMEM;
    snprintf(l->path, cap, "%s/log", root);
    int rc = fs_mkdir_p(l->path, err);
    if (rc) return rc;
    snprintf(l->path, cap, "%s/log/rank-%d.log", root, rank);
    /* not through a link: rundir_check_links refuses a run dir with one, and O_NOFOLLOW
     * holds for one planted after that check */
    l->fd = open(l->path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0666);
    struct stat st;
    if (l->fd < 0 && errno == ELOOP)
        return calf_error_set(err, CALF_EINVAL, "%s is a symbolic link, which calf does not "
                              "write through", l->path);
    if (l->fd < 0 || fstat(l->fd, &st) != 0)
        return calf_error_set(err, CALF_EIO, "cannot open %s: %s", l->path, strerror(errno));
    l->size = st.st_size;
    return CALF_OK;
}

void rank_log_line(rank_log *l, const char *line) {
    if (l->fd < 0 || l->err.status != CALF_OK) return;
    /* lines come from rank_log_printf or the progress line, at most 8191 characters */
    char buf[8193];
    size_t n = strlen(line);
    if (n > sizeof buf - 1) n = sizeof buf - 1;
    memcpy(buf, line, n);
    buf[n] = '\n';
    if (fs_write_all(l->fd, buf, n + 1, l->path, &l->err) == CALF_OK) {
        l->size += (off_t)(n + 1);
    } else {
        int cut = ftruncate(l->fd, l->size); /* best effort: the write error is reported */
        (void)cut;
    }
}

void rank_log_close(rank_log *l) {
    if (l->fd >= 0 && close(l->fd) != 0 && l->err.status == CALF_OK)
        calf_error_set(&l->err, CALF_EIO, "close %s: %s", l->path, strerror(errno));
    l->fd = -1;
    free(l->path);
    l->path = NULL;
}

void rank_log_printf(rank_log *l, bool to_stderr, const char *fmt, ...) {
    char line[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    rank_log_line(l, line);
    if (to_stderr && l->echo) fprintf(stderr, "%s\n", line);
}
