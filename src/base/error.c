/* error.c: error messages and the panic path shared by every module. */
#include "calf/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void calf_error_fit(char *dst, size_t cap, const char *src) {
    CALF_ASSERT(cap >= 64 && src != NULL);
    size_t len = strlen(src);
    if (len < cap) {
        memcpy(dst, src, len + 1);
    } else {
        /* The marker's length depends on the count it states; two passes settle it. */
        char marker[64];
        size_t mlen = 0, head = 0, tail = 0;
        for (int pass = 0; pass < 2; pass++) {
            size_t keep = cap - 1 - mlen;
            head = keep * 2 / 5; /* a path is usually nearer the start; the cause is last */
            tail = keep - head;
            int m = snprintf(marker, sizeof marker, "[... %zu characters cut ...]",
                             len - head - tail);
            mlen = m > 0 ? (size_t)m : 0;
        }
        size_t keep = cap - 1 - mlen;
        head = keep * 2 / 5;
        tail = keep - head;
        memcpy(dst, src, head);
        memcpy(dst + head, marker, mlen);
        memcpy(dst + head + mlen, src + len - tail, tail);
        dst[head + mlen + tail] = '\0';
    }
    /* one line, whatever a quoted name or value held */
    for (char *p = dst; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
}

int calf_error_set(calf_error *err, int status, const char *fmt, ...) {
    if (err) {
        /* Format whole first (paths may be 4,000 characters), then fit: a cut at the
         * end would lose the cause, which comes last. */
        char local[8192], *text = local;
        va_list ap, again;
        va_start(ap, fmt);
        va_copy(again, ap);
        int n = vsnprintf(local, sizeof local, fmt, ap);
        va_end(ap);
        if (n >= (int)sizeof local) {
            char *big = malloc((size_t)n + 1); /* without it, the first 8 KiB still tell */
            if (big) {
                vsnprintf(big, (size_t)n + 1, fmt, again);
                text = big;
            }
        }
        va_end(again);
        if (n < 0) local[0] = '\0';
        calf_error_fit(err->msg, sizeof err->msg, text);
        if (text != local) free(text);
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
