/* fsutil.c: file-system helpers shared by the summary writer, checkpoints and the
 * trainer's log and config files. */
#include "fsutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
