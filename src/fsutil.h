/* fsutil.h: the few file-system helpers several modules share. */
#ifndef CALF_FSUTIL_H
#define CALF_FSUTIL_H

#include <stddef.h>

#include "calf/error.h"

/* mkdir -p: create dir and its missing parents. An existing directory is fine; an
 * existing non-directory is CALF_EIO naming it. */
int fs_mkdir_p(const char *dir, calf_error *err);

/* "a/b" into out (cap bytes); a path that does not fit is CALF_EINVAL naming it. */
int fs_join(char *out, size_t cap, const char *a, const char *b, calf_error *err);

/* Replace path with data (n bytes) so that no reader ever sees it half-written: write
 * "<path>.tmp.<pid>", fsync, rename over path. On failure the temporary file is removed,
 * path is untouched and the message names the file and the call that failed (CALF_EIO). */
int fs_write_atomic(const char *path, const void *data, size_t n, calf_error *err);

#endif
