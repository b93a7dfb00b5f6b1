/* comm_local.c: the default backend of `calf train --nproc N`: forked workers share one
 * anonymous mapping made before fork (no ports, no files) and synchronise with C11 atomics;
 * every wait is bounded and watches the launcher's abort flag, so no failure hangs a job. */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"

#define LOCAL_MAGIC 0x4c41434f4c464c43ULL /* "CLFLOCAL" */

/* One rank's place in the shared region, on its own cache lines. */
typedef struct local_slot {
    _Alignas(64) _Atomic uint64_t arrived; /* last collective number this rank reached */
    _Atomic int gone;                      /* supervisor: the process has exited */
    _Atomic int msg_ready;                 /* msg holds the rank's failure message */
    char why[128];                         /* supervisor: how it exited */
    char msg[512];                         /* comm_report_failure / comm_abort */
    size_t heap_used;                      /* this rank's view of the shared heap */
} local_slot;

/* The start of the shared mapping; the two payload arenas follow the slots, then the
 * heap of comm_shared_alloc (as large as an arena). */
struct comm_local_shared {
    uint64_t magic;
    int nproc;
    unsigned spin_polls;  /* polls before a waiter starts yielding its core */
    size_t map_bytes;     /* the whole mapping */
    size_t arena_bytes;   /* each of the two arenas */
    size_t arena_off;     /* arena 0 starts here; arena 1 follows it */
    _Atomic int abort_claim; /* 1 once someone started raising the abort flag */
    _Atomic int abort_rank;  /* -1, or the rank whose failure makes every wait fail */
    char abort_why[768];     /* written before abort_rank is published */
    local_slot slot[];       /* (nproc) */
};

/* Arenas alternate between consecutive collectives: a rank can only write arena
 * (s+2)%2 after every rank has passed collective s+1, i.e. finished reading s. So one
 * barrier per collective suffices. */
static unsigned char *arena_for(comm_local_shared *sh, uint64_t seq) {
    return (unsigned char *)sh + sh->arena_off + (seq & 1) * sh->arena_bytes;
}

static double now_s(void) {
    struct timespec ts;
    int rc = clock_gettime(CLOCK_MONOTONIC, &ts);
    CALF_ASSERT(rc == 0);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* One line into a fixed slot; a long one loses its middle, not its cause (at the end). */
static void copy_line(char *dst, size_t cap, const char *src) {
    calf_error_fit(dst, cap, src ? src : "");
}

static void raise_abort(comm_local_shared *sh, int rank, const char *why) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&sh->abort_claim, &expected, 1)) {
        copy_line(sh->abort_why, sizeof sh->abort_why, why);
        atomic_store_explicit(&sh->abort_rank, rank, memory_order_release);
    }
}

/* A wait spins for spin_polls polls (~tens of microseconds), then yields the CPU until
 * YIELD_S after it began, then sleeps with backoff: with more processes than cores a long
 * wait must not steal the core the awaited rank needs. */
enum { SPIN_POLLS_OWN_CORE = 20000, SPIN_POLLS_SHARED = 2000 };
static const double YIELD_S = 0.02;
static const long SLEEP_MAX_NS = 200000;

static int aborted(const comm *c, int ab, uint64_t seq, calf_error *err) {
    const comm_local_shared *sh = c->impl;
    return calf_error_set(err, CALF_ECOMM,
                          "comm: rank %d failed (%s); rank %d stopped waiting in collective #%llu",
                          ab, sh->abort_why, c->rank, (unsigned long long)seq);
}

static int wait_all(comm *c, uint64_t seq, calf_error *err) {
    comm_local_shared *sh = c->impl;
    const int P = sh->nproc;
    int next = 0;
    unsigned polls = 0;
    double waiting_since = -1.0; /* the clock at the first poll that found a rank missing */
    long sleep_ns = 10000;
    for (;;) {
        while (next < P &&
               atomic_load_explicit(&sh->slot[next].arrived, memory_order_acquire) >= seq)
            next++;
        if (next == P) {
            if (waiting_since >= 0) c->wait_s += now_s() - waiting_since;
            return CALF_OK;
        }
        if (waiting_since < 0) waiting_since = now_s();
        int ab = atomic_load_explicit(&sh->abort_rank, memory_order_acquire);
        if (ab >= 0) return aborted(c, ab, seq, err);
        if (atomic_load_explicit(&sh->slot[next].gone, memory_order_acquire)) {
            /* It may have arrived just before exiting; its arrival is visible now. */
            if (atomic_load_explicit(&sh->slot[next].arrived, memory_order_acquire) >= seq)
                continue;
            /* A failed rank's abort is published before its gone flag: blame the cause. */
            ab = atomic_load_explicit(&sh->abort_rank, memory_order_acquire);
            if (ab >= 0) return aborted(c, ab, seq, err);
            return calf_error_set(err, CALF_ECOMM,
                                  "comm: rank %d vanished (%s) before collective #%llu; "
                                  "rank %d stopped waiting",
                                  next, sh->slot[next].why, (unsigned long long)seq, c->rank);
        }
        if (++polls < sh->spin_polls) {
            cpu_relax();
            continue;
        }
        double t = now_s();
        if (t - waiting_since > c->timeout_s) {
            char list[256] = "";
            size_t used = 0;
            int missing = 0;
            for (int r = next; r < P; r++) {
                if (atomic_load_explicit(&sh->slot[r].arrived, memory_order_acquire) >= seq)
                    continue;
                if (missing++ < 16 && used < sizeof list) {
                    int w = snprintf(list + used, sizeof list - used, "%s%d",
                                     missing > 1 ? ", " : "", r);
                    if (w > 0) used += (size_t)w;
                }
            }
            return calf_error_set(err, CALF_ECOMM,
                                  "comm: collective #%llu timed out after %.3g s on rank %d "
                                  "waiting for rank%s %s%s",
                                  (unsigned long long)seq, c->timeout_s, c->rank,
                                  missing > 1 ? "s" : "", list, missing > 16 ? ", ..." : "");
        }
        if (t - waiting_since < YIELD_S) {
            sched_yield();
        } else {
            struct timespec ts = {0, sleep_ns};
            nanosleep(&ts, NULL); /* EINTR only shortens the nap */
            if (sleep_ns < SLEEP_MAX_NS) sleep_ns *= 2;
        }
    }
}

/* Arrive at the next collective and wait for everyone. */
static int local_sync(comm *c, calf_error *err) {
    comm_local_shared *sh = c->impl;
    uint64_t seq = c->seq + 1;
    atomic_store_explicit(&sh->slot[c->index].arrived, seq, memory_order_release);
    c->seq = seq;
    return wait_all(c, seq, err);
}

static int local_barrier(comm *c, calf_error *err) { return local_sync(c, err); }

/* Fails alike on every rank (all see the same sizes), so nobody is left waiting. */
static int check_fits(comm *c, size_t total, calf_error *err) {
    comm_local_shared *sh = c->impl;
    if (total <= sh->arena_bytes) return CALF_OK;
    return calf_error_set(err, CALF_ENOMEM,
                          "comm: collective #%llu needs %zu bytes of shared memory; the "
                          "local backend reserved %zu per collective",
                          (unsigned long long)(c->seq + 1), total, sh->arena_bytes);
}

static int local_gather_common(comm *c, const void *send, void *recv, const size_t *sizes,
                               int root, calf_error *err) {
    size_t total = 0, off = 0;
    for (int r = 0; r < c->size; r++) {
        if (r < c->index) off += sizes[r];
        if (sizes[r] > SIZE_MAX - total) total = SIZE_MAX;
        else total += sizes[r];
    }
    int rc = check_fits(c, total, err);
    if (rc != CALF_OK) return rc;
    unsigned char *arena = arena_for(c->impl, c->seq + 1);
    if (sizes[c->index]) memcpy(arena + off, send, sizes[c->index]);
    rc = local_sync(c, err);
    if (rc != CALF_OK) return rc;
    if ((root < 0 || root == c->index) && total) memcpy(recv, arena, total);
    return CALF_OK;
}

static int local_allgatherv(comm *c, const void *send, void *recv, const size_t *sizes,
                            calf_error *err) {
    return local_gather_common(c, send, recv, sizes, -1, err);
}

static int local_gatherv(comm *c, const void *send, void *recv, const size_t *sizes, int root,
                         calf_error *err) {
    return local_gather_common(c, send, recv, sizes, root, err);
}

static int local_broadcast(comm *c, void *buf, size_t n, int root, calf_error *err) {
    int rc = check_fits(c, n, err);
    if (rc != CALF_OK) return rc;
    unsigned char *arena = arena_for(c->impl, c->seq + 1);
    if (c->index == root && n) memcpy(arena, buf, n);
    rc = local_sync(c, err);
    if (rc != CALF_OK) return rc;
    if (c->index != root && n) memcpy(buf, arena, n);
    return CALF_OK;
}

/* Zero-copy collectives: ranks write straight into the arena of the next collective and
 * read everyone's data from there. That arena was last used two collectives ago, which
 * every rank has finished reading (they all arrived at the previous one), and it is only
 * rewritten two collectives later, after this rank has arrived at the next one. */
static void *local_next_arena(comm *c, size_t bytes, calf_error *err) {
    if (check_fits(c, bytes, err) != CALF_OK) return NULL;
    return arena_for(c->impl, c->seq + 1);
}

static const void *local_gathered(comm *c, calf_error *err) {
    if (local_sync(c, err) != CALF_OK) return NULL;
    return arena_for(c->impl, c->seq);
}

/* Regions are carved from the heap in rank order at offsets every rank computes alike
 * from everyone's sizes, so the collective needs no further agreement. */
static int local_shared_alloc(comm *c, size_t bytes, void **peers, calf_error *err) {
    comm_local_shared *sh = c->impl;
    int rc = check_fits(c, (size_t)c->size * sizeof(uint64_t), err);
    if (rc != CALF_OK) return rc;
    uint64_t *sizes = (uint64_t *)(void *)arena_for(sh, c->seq + 1);
    sizes[c->index] = bytes;
    rc = local_sync(c, err);
    if (rc != CALF_OK) return rc;
    size_t at = sh->slot[c->index].heap_used, total = 0;
    for (int r = 0; r < c->size; r++) {
        size_t b = (sizes[r] + 63) & ~(size_t)63;
        if (sizes[r] > sh->arena_bytes || b > sh->arena_bytes - at - total)
            return calf_error_set(err, CALF_ENOMEM,
                                  "comm: rank %d asked for %llu bytes of shared memory; %zu of "
                                  "the %zu reserved are left",
                                  r, (unsigned long long)sizes[r], sh->arena_bytes - at - total,
                                  sh->arena_bytes);
        peers[r] = (unsigned char *)sh + sh->arena_off + 2 * sh->arena_bytes + at + total;
        total += b;
    }
    sh->slot[c->index].heap_used = at + total;
    return CALF_OK;
}

static size_t local_shared_left(const comm *c) {
    const comm_local_shared *sh = c->impl;
    return sh->arena_bytes - sh->slot[c->index].heap_used;
}

static void local_report_failure(comm *c, const char *msg) {
    comm_local_shared *sh = c->impl;
    local_slot *s = &sh->slot[c->index];
    if (atomic_load_explicit(&s->msg_ready, memory_order_acquire)) return;
    copy_line(s->msg, sizeof s->msg, msg);
    atomic_store_explicit(&s->msg_ready, 1, memory_order_release);
}

static void local_abort(comm *c, const char *msg) {
    local_report_failure(c, msg);
    char why[640];
    snprintf(why, sizeof why, "aborted: %s", msg);
    raise_abort(c->impl, c->index, why);
    fflush(NULL);
    _exit(1);
}

static void local_finalize(comm *c) { (void)c; /* the mapping belongs to the supervisor */ }

static const comm_ops local_ops = {
    .name = "local",
    .measures_waits = true,
    .barrier = local_barrier,
    .allgatherv = local_allgatherv,
    .gatherv = local_gatherv,
    .broadcast = local_broadcast,
    .abort = local_abort,
    .report_failure = local_report_failure,
    .finalize = local_finalize,
    .next_arena = local_next_arena,
    .gathered = local_gathered,
    .shared_alloc = local_shared_alloc,
    .shared_left = local_shared_left,
};

int comm_local_create(comm_local_shared **out, int nproc, size_t arena_bytes,
                      calf_error *err) {
    *out = NULL;
    if (nproc < 1 || nproc > 65536)
        return calf_error_set(err, CALF_EINVAL, "comm: cannot run %d local processes", nproc);
    /* Process-shared atomics must not hide a lock in process-private memory. */
    CALF_ASSERT(ATOMIC_INT_LOCK_FREE == 2 && ATOMIC_LONG_LOCK_FREE == 2 &&
                ATOMIC_LLONG_LOCK_FREE == 2);
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) page = 4096;
    size_t head = sizeof(comm_local_shared) + (size_t)nproc * sizeof(local_slot);
    head = (head + (size_t)page - 1) / (size_t)page * (size_t)page;
    /* Gradient sizes are only known after the children parse the config, so reserve a
     * generous address range; MAP_NORESERVE means untouched pages cost nothing. Halve on
     * refusal (strict overcommit, ulimit -v) down to a floor a caller can still use. */
    bool fixed = arena_bytes != 0;
    size_t arena = fixed ? arena_bytes : (size_t)16 << 30;
    const size_t floor_bytes = fixed ? arena_bytes : (size_t)16 << 20;
    for (;;) {
        arena = (arena + (size_t)page - 1) / (size_t)page * (size_t)page;
        if (arena > (SIZE_MAX - head) / 3)
            return calf_error_set(err, CALF_EINVAL, "comm: shared arena of %zu bytes is too large",
                                  arena_bytes);
        size_t total = head + 3 * arena;
        void *p = mmap(NULL, total, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) {
            comm_local_shared *sh = p;
            sh->magic = LOCAL_MAGIC;
            sh->nproc = nproc;
            /* With a core per process, a waiter spins (the ranks step in lockstep, so the
             * wait is usually short and a syscall costs more than it saves); with more
             * processes than cores it soon yields, so the rank it waits for can run. */
            long cpus = sysconf(_SC_NPROCESSORS_ONLN);
            sh->spin_polls = cpus > 0 && nproc <= cpus ? SPIN_POLLS_OWN_CORE : SPIN_POLLS_SHARED;
            sh->map_bytes = total;
            sh->arena_bytes = arena;
            sh->arena_off = head;
            atomic_init(&sh->abort_claim, 0);
            atomic_init(&sh->abort_rank, -1);
            for (int r = 0; r < nproc; r++) {
                atomic_init(&sh->slot[r].arrived, 0);
                atomic_init(&sh->slot[r].gone, 0);
                atomic_init(&sh->slot[r].msg_ready, 0);
            }
            *out = sh;
            return CALF_OK;
        }
        int e = errno;
        if (arena / 2 < floor_bytes || fixed)
            return calf_error_set(err, CALF_ENOMEM,
                                  "comm: cannot map %zu bytes of shared memory for %d "
                                  "processes: %s",
                                  total, nproc, strerror(e));
        arena /= 2;
    }
}

int comm_local_attach(comm_local_shared *sh, int rank, comm **out, calf_error *err) {
    *out = NULL;
    if (!sh || sh->magic != LOCAL_MAGIC)
        return calf_error_set(err, CALF_EINVAL, "comm: local shared region is not initialised");
    if (rank < 0 || rank >= sh->nproc)
        return calf_error_set(err, CALF_EINVAL, "comm: rank %d out of range [0, %d)", rank,
                              sh->nproc);
    comm *c = calf_xcalloc(1, sizeof *c);
    c->ops = &local_ops;
    c->rank = rank;
    c->size = sh->nproc;
    c->index = rank;
    c->timeout_s = 600.0;
    c->seq = atomic_load_explicit(&sh->slot[rank].arrived, memory_order_acquire);
    c->impl = sh;
    *out = c;
    return CALF_OK;
}

void comm_local_mark_exited(comm_local_shared *sh, int rank, bool failed, const char *why) {
    CALF_ASSERT(rank >= 0 && rank < sh->nproc);
    local_slot *s = &sh->slot[rank];
    copy_line(s->why, sizeof s->why, why);
    if (failed) { /* before `gone`, so that waiters blame the failure, not the exit */
        char full[768];
        if (atomic_load_explicit(&s->msg_ready, memory_order_acquire))
            snprintf(full, sizeof full, "%s: %s", why, s->msg);
        else
            snprintf(full, sizeof full, "%s", why);
        raise_abort(sh, rank, full);
    }
    atomic_store_explicit(&s->gone, 1, memory_order_release);
}

void comm_local_failure_message(const comm_local_shared *sh, int rank, char *buf, size_t cap) {
    CALF_ASSERT(rank >= 0 && rank < sh->nproc && cap > 0);
    const local_slot *s = &sh->slot[rank];
    buf[0] = '\0';
    if (atomic_load_explicit(&s->msg_ready, memory_order_acquire)) {
        /* The writer may have been killed mid-copy before publishing; the flag says not. */
        size_t len = strnlen(s->msg, sizeof s->msg - 1);
        if (len >= cap) len = cap - 1;
        memcpy(buf, s->msg, len);
        buf[len] = '\0';
    }
}

size_t comm_local_arena_bytes(const comm_local_shared *sh) { return sh->arena_bytes; }

int comm_local_abort_rank(const comm_local_shared *sh) {
    return atomic_load_explicit(&((comm_local_shared *)sh)->abort_rank, memory_order_acquire);
}

void comm_local_destroy(comm_local_shared *sh) {
    if (!sh) return;
    int rc = munmap(sh, sh->map_bytes);
    CALF_ASSERT(rc == 0);
}
