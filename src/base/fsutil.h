/* fsutil.h: the few file-system helpers several modules share. Every failure is a
 * CALF_EIO message that names the file and the errno's text. */
#ifndef CALF_FSUTIL_H
#define CALF_FSUTIL_H

#include <stddef.h>

#include "calf/error.h"

/* mkdir -p: create dir and its missing parents. An existing directory is fine; an
 * existing non-directory is CALF_EIO naming it. */
int fs_mkdir_p(const char *dir, calf_error *err);

/* write(2) all n bytes to fd, retrying short writes and EINTR. A failure says
 * "write <path>: <strerror>". */
int fs_write_all(int fd, const void *p, /* (n) */ size_t n, const char *path, calf_error *err);

/* fsync the directory dir, so that a rename or a new name in it survives a power loss. */
int fs_fsync_dir(const char *dir, calf_error *err);

/* Replace path with the n bytes at data, atomically: write "<path>.tmp.<pid>", fsync,
 * rename over path, fsync the directory. On failure the temporary file is removed and
 * path is as it was. */
int fs_write_file_atomic(const char *path, const void *data, /* (n) */ size_t n,
                         calf_error *err);

/* "a/b" into out (cap bytes); a path that does not fit is CALF_EINVAL naming it. */
int fs_join(char *out, size_t cap, const char *a, const char *b, calf_error *err);

#endif
