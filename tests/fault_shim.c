/* fault_shim.c: an LD_PRELOAD library, built only for the tests, that makes the k-th
 * write, fsync, rename or open of a file fail, as SQLite's test VFS does, so that
 * tests/e2e_faults.sh can prove that every write error of a run is caught (exit 1, the
 * file named, nothing half-written) and that a resume afterwards is exact.
 *
 * Counted calls: write(2) to a regular file; fsync(2) of a regular file or directory;
 * rename(2); open(2)/openat(2) that may write (O_WRONLY, O_RDWR, O_CREAT) or of a
 * directory (calf opens one to fsync it). Reads, and writes to pipes, terminals and
 * sockets, are not counted. The count is shared by a process and the workers it forks.
 *
 * Settings (environment):
 *   CALF_FAULT_K=k         fail the k-th counted call (0 or unset: only count)
 *   CALF_FAULT_ERRNO=name  ENOSPC (default), EIO, EFBIG, EROFS or EDQUOT
 *   CALF_FAULT_MODE=m      once (default): only call k fails; persist: every counted
 *                          call from k on fails (a full disk); short: a write at k writes
 *                          half its bytes and succeeds, and the next counted call fails
 *                          (a disk that fills up in the middle of a write)
 *   CALF_FAULT_CALLS=list  which calls count, e.g. "write,fsync" (default: all four)
 *   CALF_FAULT_PATH=text   count only calls on paths containing text
 *   CALF_FAULT_LOG=file    append "k <call> <path>" for each call made to fail
 *   CALF_FAULT_COUNT=file  at exit of the first process, write the number of counted
 *                          calls
 *   CALF_FAULT_LOCK=name   every fcntl record lock request (F_SETLK, F_SETLKW and their
 *                          F_OFD_ forms) fails with that errno, as on a file system
 *                          without locks (ENOLCK: an NFS mount without lockd); not
 *                          counted */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef int (*fsync_fn)(int);
typedef int (*rename_fn)(const char *, const char *);
typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*fcntl_fn)(int, int, ...);

static write_fn real_write;
static fsync_fn real_fsync;
static rename_fn real_rename;
static open_fn real_open, real_open64;
static openat_fn real_openat;
static fcntl_fn real_fcntl;
static int lock_errno; /* CALF_FAULT_LOCK, 0 if unset */

/* Shared with forked workers: the count, and whether the next call must fail (short). */
typedef struct shared_state {
    _Atomic long count;
    _Atomic int fail_next;
} shared_state;

static shared_state *state;
static shared_state local_state; /* if the shared mapping cannot be made */
static long fault_k;
static int fault_errno = ENOSPC;
static enum { MODE_ONCE, MODE_PERSIST, MODE_SHORT } fault_mode;
static const char *calls = "write,fsync,rename,open";
static const char *path_filter;
static const char *log_path, *count_path;
static pid_t first_pid;

static int errno_named(const char *s) {
    if (!s || !*s || !strcmp(s, "ENOSPC")) return ENOSPC;
    if (!strcmp(s, "EIO")) return EIO;
    if (!strcmp(s, "EFBIG")) return EFBIG;
    if (!strcmp(s, "EROFS")) return EROFS;
    if (!strcmp(s, "EDQUOT")) return EDQUOT;
    if (!strcmp(s, "ENOLCK")) return ENOLCK;
    if (!strcmp(s, "EOPNOTSUPP")) return EOPNOTSUPP;
    if (!strcmp(s, "EINVAL")) return EINVAL;
    long v = strtol(s, NULL, 10);
    return v > 0 && v < 4096 ? (int)v : ENOSPC;
}

__attribute__((constructor)) static void shim_init(void) {
    real_write = (write_fn)dlsym(RTLD_NEXT, "write");
    real_fsync = (fsync_fn)dlsym(RTLD_NEXT, "fsync");
    real_rename = (rename_fn)dlsym(RTLD_NEXT, "rename");
    real_open = (open_fn)dlsym(RTLD_NEXT, "open");
    real_open64 = (open_fn)dlsym(RTLD_NEXT, "open64");
    real_openat = (openat_fn)dlsym(RTLD_NEXT, "openat");
    real_fcntl = (fcntl_fn)dlsym(RTLD_NEXT, "fcntl");
    if (getenv("CALF_FAULT_LOCK")) lock_errno = errno_named(getenv("CALF_FAULT_LOCK"));
    void *m = mmap(NULL, sizeof *state, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    state = m == MAP_FAILED ? &local_state : m;
    const char *k = getenv("CALF_FAULT_K");
    fault_k = k ? strtol(k, NULL, 10) : 0;
    fault_errno = errno_named(getenv("CALF_FAULT_ERRNO"));
    const char *mode = getenv("CALF_FAULT_MODE");
    if (mode && !strcmp(mode, "persist")) fault_mode = MODE_PERSIST;
    if (mode && !strcmp(mode, "short")) fault_mode = MODE_SHORT;
    if (getenv("CALF_FAULT_CALLS")) calls = getenv("CALF_FAULT_CALLS");
    path_filter = getenv("CALF_FAULT_PATH");
    log_path = getenv("CALF_FAULT_LOG");
    count_path = getenv("CALF_FAULT_COUNT");
    first_pid = getpid();
}

__attribute__((destructor)) static void shim_fini(void) {
    if (!count_path || getpid() != first_pid) return;
    FILE *f = fopen(count_path, "w"); /* stdio's own write is not the interposed one */
    if (f) {
        fprintf(f, "%ld\n", atomic_load(&state->count));
        fclose(f);
    }
}

static bool call_counted(const char *name) {
    const char *p = strstr(calls, name);
    return p != NULL;
}

static void fd_path(int fd, char *out, size_t cap) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, cap - 1);
    out[n > 0 ? n : 0] = '\0';
}

static void log_fault(long k, const char *call, const char *path) {
    if (!log_path) return;
    FILE *f = fopen(log_path, "a");
    if (!f) return;
    fprintf(f, "%ld %s %s\n", k, call, path);
    fclose(f);
}

/* 0: let the call through; 1: fail it; 2: (short mode, a write) write half of it. */
static int decide(const char *call, const char *path) {
    if (!call_counted(call)) return 0;
    if (path_filter && (!path || !strstr(path, path_filter))) return 0;
    long k = atomic_fetch_add(&state->count, 1) + 1;
    if (fault_k <= 0) return 0;
    int fail = 0;
    if (atomic_exchange(&state->fail_next, 0)) fail = 1;
    else if (k == fault_k) fail = fault_mode == MODE_SHORT && !strcmp(call, "write") ? 2 : 1;
    else if (k > fault_k && fault_mode == MODE_PERSIST) fail = 1;
    if (fail == 1) log_fault(k, call, path ? path : "?");
    if (fail == 2) atomic_store(&state->fail_next, 1);
    return fail;
}

static bool fd_is(int fd, mode_t kind) {
    struct stat st;
    return fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == kind;
}

ssize_t write(int fd, const void *buf, size_t n) {
    if (!real_write) shim_init();
    if (n > 0 && fd_is(fd, S_IFREG)) {
        char path[4200];
        fd_path(fd, path, sizeof path);
        int d = decide("write", path);
        if (d == 1) {
            errno = fault_errno;
            return -1;
        }
        if (d == 2 && n > 1) return real_write(fd, buf, n / 2);
    }
    return real_write(fd, buf, n);
}

int fsync(int fd) {
    if (!real_fsync) shim_init();
    if (fd_is(fd, S_IFREG) || fd_is(fd, S_IFDIR)) {
        char path[4200];
        fd_path(fd, path, sizeof path);
        if (decide("fsync", path)) {
            errno = fault_errno;
            return -1;
        }
    }
    return real_fsync(fd);
}

int rename(const char *from, const char *to) {
    if (!real_rename) shim_init();
    if (decide("rename", from)) {
        errno = fault_errno;
        return -1;
    }
    return real_rename(from, to);
}

static bool open_counted(int flags) {
    return (flags & (O_WRONLY | O_RDWR | O_CREAT)) != 0 || (flags & O_DIRECTORY) != 0;
}

/* The mode argument that follows flags when they create a file (read in the variadic
 * function itself, hence a macro). */
#define OPEN_MODE(flags, mode)                   \
    do {                                         \
        if ((flags) & (O_CREAT | __O_TMPFILE)) { \
            va_list ap;                          \
            va_start(ap, flags);                 \
            (mode) = va_arg(ap, mode_t);         \
            va_end(ap);                          \
        }                                        \
    } while (0)

static int open_common(open_fn real, const char *path, int flags, mode_t mode) {
    if (open_counted(flags) && decide("open", path)) {
        errno = fault_errno;
        return -1;
    }
    return real(path, flags, mode);
}

int open(const char *path, int flags, ...) {
    if (!real_open) shim_init();
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    return open_common(real_open, path, flags, mode);
}

int open64(const char *path, int flags, ...) {
    if (!real_open64) shim_init();
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    return open_common(real_open64, path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...) {
    if (!real_openat) shim_init();
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    if (open_counted(flags) && decide("open", path)) {
        errno = fault_errno;
        return -1;
    }
    return real_openat(dirfd, path, flags, mode);
}

/* Every command's argument fits in a pointer-sized slot, which is how glibc's own fcntl
 * reads it too. */
int fcntl(int fd, int cmd, ...) {
    if (!real_fcntl) shim_init();
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    bool lock = cmd == F_SETLK || cmd == F_SETLKW;
#ifdef F_OFD_SETLK
    lock = lock || cmd == F_OFD_SETLK || cmd == F_OFD_SETLKW;
#endif
    if (lock && lock_errno) {
        errno = lock_errno;
        return -1;
    }
    return real_fcntl(fd, cmd, arg);
}
