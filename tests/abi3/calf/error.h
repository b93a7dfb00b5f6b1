/* tests/abi3/calf/error.h: include/calf/error.h at plug-in ABI version 3, frozen beside env.h. */
/* calf/error.h: the two error tiers. Recoverable failures (I/O, config, checkpoint,
 * communication) return CALF_OK or an error status and fill a calf_error with a one-line
 * message naming what and where. Broken invariants call calf_panic via CALF_ASSERT. */
#ifndef CALF_ERROR_H
#define CALF_ERROR_H

#include <stddef.h>

enum calf_status {
    CALF_OK = 0,
    CALF_EIO = 1,      /* file system or system call failure */
    CALF_EINVAL = 2,   /* bad input: config, CLI, checkpoint contents */
    CALF_ECOMM = 3,    /* a peer vanished, a collective timed out, digests differ */
    CALF_ENOMEM = 4,
    CALF_EINTR = 5     /* stopped by a signal (Ctrl-C) */
};

typedef struct calf_error {
    int status;      /* a calf_status; CALF_OK when nothing failed */
    char msg[1024];  /* one line, no trailing newline */
} calf_error;

/* Record status and a printf-style message; returns status so callers can
 * `return calf_error_set(err, CALF_EINVAL, "...")`. err may be NULL. A message longer
 * than msg holds loses its middle (calf_error_fit), never its end: the cause, which
 * comes last ("...: No space left on device"), survives a path of 4,000 characters. */
int calf_error_set(calf_error *err, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void calf_error_clear(calf_error *err);
/* Copy the one-line text src into dst (cap bytes, cap >= 64): whole when it fits, else
 * its first and last parts around "[... N characters cut ...]", so that both what failed
 * (the start) and why (the end) are kept. Newlines become spaces. */
void calf_error_fit(char *dst, size_t cap, const char *src);
/* The process exit status for a status: 0 ok, 2 bad input, 130 interrupted, 1 else. */
int calf_exit_code(int status);

/* Print "file:line: message" to stderr and abort. For broken invariants only. */
_Noreturn void calf_panic(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define CALF_ASSERT(cond)                                                      \
    do {                                                                       \
        if (!(cond)) calf_panic(__FILE__, __LINE__, "assertion failed: %s", #cond); \
    } while (0)

/* Running out of memory is an ordinary failure: CALF_ENOMEM with a message saying how
 * many bytes and where, from whatever call ran out; calf never ends the process for it. */

#endif
