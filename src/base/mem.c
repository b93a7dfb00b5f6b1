/* mem.c: allocation that can fail with a status (mem.h). The message names the source
 * line that asked, from src/ on, so a report says which buffer did not fit. The
 * alloc_fail test hook (calf/testing.h) makes one chosen allocation fail. */
#include "base/mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/testing.h"

/* "src/x/y.c" of a compiler's full path, or the path as it is. */
static const char *from_src(const char *file) {
    const char *best = file;
    for (const char *p = strstr(file, "src/"); p; p = strstr(p + 1, "src/")) best = p;
    return best;
}

int mem_failed(calf_error *err, size_t count, size_t size, const char *file, int line) {
    if (count == 1)
        return calf_error_set(err, CALF_ENOMEM, "out of memory allocating %zu bytes (%s:%d)", size,
                              from_src(file), line);
    return calf_error_set(err, CALF_ENOMEM, "out of memory allocating %zu x %zu bytes (%s:%d)",
                          count, size, from_src(file), line);
}

void *mem_alloc_at(size_t n, calf_error *err, const char *file, int line) {
    void *p = testing_alloc_fails() ? NULL : malloc(n ? n : 1);
    if (!p) mem_failed(err, 1, n, file, line);
    return p;
}

void *mem_calloc_at(size_t count, size_t size, calf_error *err, const char *file, int line) {
    void *p = testing_alloc_fails() ? NULL : calloc(count ? count : 1, size ? size : 1);
    if (!p) mem_failed(err, count, size, file, line);
    return p;
}

void *mem_realloc_at(void *p, size_t n, calf_error *err, const char *file, int line) {
    void *q = testing_alloc_fails() ? NULL : realloc(p, n ? n : 1);
    if (!q) mem_failed(err, 1, n, file, line);
    return q;
}

char *mem_strdup_at(const char *s, calf_error *err, const char *file, int line) {
    size_t n = strlen(s) + 1;
    char *d = mem_alloc_at(n, err, file, line);
    if (d) memcpy(d, s, n);
    return d;
}
