/* error.c: error messages and the panic path shared by every module. */
#include "calf/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int calf_error_set(calf_error *err, int status, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        /* one line, whatever a quoted name or value held */
        for (char *p = err->msg; *p; p++)
            if (*p == '\n' || *p == '\r') *p = ' ';
        err->status = status;
    }
    return status;
}

void calf_error_clear(calf_error *err) {
    if (err) {
        err->status = CALF_OK;
        err->msg[0] = '\0';
    }
}

int calf_exit_code(int status) {
    switch (status) {
    case CALF_OK: return 0;
    case CALF_EINVAL: return 2;
    case CALF_EINTR: return 130;
    default: return 1;
    }
}

_Noreturn void calf_panic(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "calf: internal error at %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

/* Running out of memory is the machine's limit, not a bug: say so and exit 1 (no core
 * dump, no abort message that reads like a crash). */
static _Noreturn void out_of_memory(size_t count, size_t size) {
    fprintf(stderr, "calf: out of memory allocating %zu x %zu bytes\n", count, size);
    exit(1);
}

void *calf_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) out_of_memory(1, n);
    return p;
}

void *calf_xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) out_of_memory(count, size);
    return p;
}
