/* fsutil.c: file-system helpers shared by the summary writer, checkpoints, the trainer's
 * log and config files, and `calf export`. Writes go through write(2) rather than stdio,
 * so a failure is seen where it happens, with its errno, and never hides in a buffer. */
#include "base/fsutil.h"
#include "base/mem.h"

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
    char *p = mem_alloc(n + 1, err);
    if (!p) return CALF_ENOMEM;
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

int fs_write_all(int fd, const void *p, size_t n, const char *path, calf_error *err) {
    const unsigned char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) /* 0 for n > 0 is not supposed to happen; do not spin on it */
            return calf_error_set(err, CALF_EIO, "write %s: %s", path,
                                  strerror(w < 0 ? errno : EIO));
        c += w;
        n -= (size_t)w;
    }
    return CALF_OK;
}

int fs_fsync_dir(const char *dir, calf_error *err) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return calf_error_set(err, CALF_EIO, "open directory %s: %s", dir, strerror(errno));
    int rc = CALF_OK;
    if (fsync(fd) != 0)
        rc = calf_error_set(err, CALF_EIO, "fsync directory %s: %s", dir, strerror(errno));
    close(fd); /* opened read-only: nothing to lose */
    return rc;
}

int fs_write_file_atomic(const char *path, const void *data, size_t n, calf_error *err) {
    size_t len = strlen(path);
    char *tmp = mem_alloc(len + 32, err), *dir = tmp ? mem_alloc(len + 2, err) : NULL;
    if (!dir) {
        free(tmp);
        return CALF_ENOMEM;
    }
    snprintf(tmp, len + 32, "%s.tmp.%ld", path, (long)getpid());
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, len + 2, ".");
    else if (slash == path) snprintf(dir, len + 2, "/");
    else snprintf(dir, len + 2, "%.*s", (int)(slash - path), path);
    int rc = CALF_OK;
    /* O_NOFOLLOW: a link planted at the temporary name would have the write land in the
     * file it points to (rename then replaces a link at path itself, not its target) */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) {
        rc = calf_error_set(err, CALF_EIO, "create %s: %s", tmp, strerror(errno));
    } else {
        rc = fs_write_all(fd, data, n, tmp, err);
        /* on disk before the rename makes it the file, or a power loss could leave the
         * name over missing blocks */
        if (rc == CALF_OK && fsync(fd) != 0)
            rc = calf_error_set(err, CALF_EIO, "fsync %s: %s", tmp, strerror(errno));
        if (close(fd) != 0 && rc == CALF_OK)
            rc = calf_error_set(err, CALF_EIO, "close %s: %s", tmp, strerror(errno));
        if (rc == CALF_OK && rename(tmp, path) != 0)
            rc = calf_error_set(err, CALF_EIO, "rename %s to %s: %s", tmp, path, strerror(errno));
        if (rc != CALF_OK) unlink(tmp); /* best effort: the failure reported matters more */
    }
    if (rc == CALF_OK) rc = fs_fsync_dir(dir, err);
    free(tmp);
    free(dir);
    return rc;
}

int fs_join(char *out, size_t cap, const char *a, const char *b, calf_error *err) {
    int n = snprintf(out, cap, "%s/%s", a, b);
    if (n < 0 || (size_t)n >= cap)
        return calf_error_set(err, CALF_EINVAL, "path too long: %s/%s", a, b);
    return CALF_OK;
}
