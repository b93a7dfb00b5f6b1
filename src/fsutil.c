/* fsutil.c: file-system helpers shared by the summary writer, checkpoints and the
 * trainer's log and config files, and `calf export`. */
#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fs_mkdir_p(const char *dir, calf_error *err) {
    size_t n = strlen(dir);
    if (n == 0) return calf_error_set(err, CALF_EINVAL, "empty directory name");
    char *p = calf_xmalloc(n + 1);
    memcpy(p, dir, n + 1);
    int rc = CALF_OK;
    /* Create each prefix in turn; an existing directory is fine, anything else is not. */
    for (size_t i = 1; i <= n && rc == CALF_OK; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        char saved = p[i];
        p[i] = '\0';
        if (mkdir(p, 0777) != 0) {
            int e = errno;
            struct stat st;
            if (e != EEXIST || stat(p, &st) != 0 || !S_ISDIR(st.st_mode))
                rc = calf_error_set(err, CALF_EIO, "cannot create directory %s: %s", p,
                                    strerror(e == EEXIST ? ENOTDIR : e));
        }
        p[i] = saved;
    }
    free(p);
    return rc;
}

int fs_join(char *out, size_t cap, const char *a, const char *b, calf_error *err) {
    int n = snprintf(out, cap, "%s/%s", a, b);
    if (n < 0 || (size_t)n >= cap)
        return calf_error_set(err, CALF_EINVAL, "path too long: %s/%s", a, b);
    return CALF_OK;
}

int fs_write_atomic(const char *path, const void *data, size_t n, calf_error *err) {
    size_t cap = strlen(path) + 32;
    char *tmp = calf_xmalloc(cap);
    snprintf(tmp, cap, "%s.tmp.%ld", path, (long)getpid());
    int rc = CALF_OK;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        rc = calf_error_set(err, CALF_EIO, "cannot create %s: %s", tmp, strerror(errno));
        free(tmp);
        return rc;
    }
    const unsigned char *p = data;
    for (size_t done = 0; done < n && rc == CALF_OK;) {
        ssize_t w = write(fd, p + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) rc = calf_error_set(err, CALF_EIO, "write %s: %s", tmp, strerror(w < 0 ? errno : EIO));
        else done += (size_t)w;
    }
    if (rc == CALF_OK && fsync(fd) != 0)
        rc = calf_error_set(err, CALF_EIO, "fsync %s: %s", tmp, strerror(errno));
    if (close(fd) != 0 && rc == CALF_OK)
        rc = calf_error_set(err, CALF_EIO, "close %s: %s", tmp, strerror(errno));
    if (rc == CALF_OK && rename(tmp, path) != 0)
        rc = calf_error_set(err, CALF_EIO, "rename %s to %s: %s", tmp, path, strerror(errno));
    if (rc != CALF_OK) unlink(tmp);
    free(tmp);
    return rc;
}
