/* comm_local.c: the default backend of `calf train --nproc N`: forked workers share one
 * anonymous mapping made before fork (no ports, no files) and synchronise with C11 atomics;
 * a waiter spins briefly, then sleeps on a futex, so that ranks that outnumber the cores
 * leave them to the ranks that work; every wait is bounded and watches the launcher's
 * abort and stop flags, so no failure or Ctrl-C leaves a job hanging. */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "parallel/comm.h"

#include "base/mem.h"

#define LOCAL_MAGIC 0x4c41434f4c464c43ULL /* "CLFLOCAL" */

/* One rank's place in the shared region, on its own cache lines. */
typedef struct local_slot {
    _Alignas(64) _Atomic uint64_t arrived; /* last collective number this rank reached */
    _Atomic int64_t alive_ns;              /* CLOCK_MONOTONIC ns of its last comm_progress */
    _Atomic int gone;                      /* supervisor: the process has exited */
    _Atomic int msg_ready;                 /* msg holds the rank's failure message */
    _Atomic int finished;                  /* the rank's worker function returned */
    char why[128];                         /* supervisor: how it exited */
    char msg[512];                         /* comm_report_failure / comm_abort */
    size_t heap_used;                      /* this rank's view of the shared heap */
} local_slot;

/* The start of the shared mapping; the two payload arenas follow the slots, then the
 * heap of comm_shared_alloc (as large as an arena). */
struct comm_local_shared {
    uint64_t magic;
    int nproc;
    unsigned spin_polls;  /* polls before a waiter yields or sleeps */
    double yield_s;       /* seconds into a wait before it sleeps instead of yielding */
    size_t map_bytes;     /* the whole mapping */
    size_t arena_bytes;   /* each of the two arenas */
    size_t arena_off;     /* arena 0 starts here; arena 1 follows it */
    _Atomic int abort_claim; /* 1 once someone started raising the abort flag */
    _Atomic int abort_rank;  /* -1, or the rank whose failure makes every wait fail */
    _Atomic int64_t stop_at; /* 0, or the CLOCK_MONOTONIC ns from which every wait of an
                              * interrupted job fails (comm_local_stop_after) */
    _Atomic uint32_t exits;  /* ranks marked exited so far */
    _Atomic int started;     /* the supervisor has forked every rank (comm_local_start) */
    char abort_why[768];     /* written before abort_rank is published */
    /* The barrier that ends every collective: one count of arrivals over the whole job.
     * No rank arrives at collective s+1 before all have arrived at s, so all have arrived
     * at s exactly when the count reaches s * nproc; a waiter reads one word, not every
     * rank's slot. */
    _Alignas(64) _Atomic uint64_t arrivals;
    /* The futex sleepers wait on: bumped when a collective completes and on every event
     * a waiter must see (abort, exit, stop), so that a sleeper that read it before
     * checking is never left asleep. */
    _Alignas(64) _Atomic uint32_t wake;
    _Atomic uint32_t sleepers; /* waiters in (or entering) FUTEX_WAIT */
    local_slot slot[];       /* (nproc) */
};

/* Arenas alternate between consecutive collectives: a rank can only write arena
 * (s+2)%2 after every rank has passed collective s+1, i.e. finished reading s. So one
 * barrier per collective suffices. */
static unsigned char *arena_for(comm_local_shared *sh, uint64_t seq) {
    return (unsigned char *)sh + sh->arena_off + (seq & 1) * sh->arena_bytes;
}

static int64_t now_ns(void) {
    struct timespec ts;
    int rc = clock_gettime(CLOCK_MONOTONIC, &ts);
    CALF_ASSERT(rc == 0);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double now_s(void) { return 1e-9 * (double)now_ns(); }

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

static void futex_wake_all(comm_local_shared *sh) {
    /* FUTEX_WAKE on a shared mapping cannot fail but with EFAULT/EINVAL (a bug) */
    long rc = syscall(SYS_futex, (uint32_t *)(void *)&sh->wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    CALF_ASSERT(rc >= 0);
}

/* An event every waiter must see at once: bump the word so that no sleeper misses it. */
static void wake_waiters(comm_local_shared *sh) {
    atomic_fetch_add(&sh->wake, 1);
    futex_wake_all(sh);
}

static void raise_abort(comm_local_shared *sh, int rank, const char *why) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&sh->abort_claim, &expected, 1)) {
        copy_line(sh->abort_why, sizeof sh->abort_why, why);
        atomic_store_explicit(&sh->abort_rank, rank, memory_order_release);
        wake_waiters(sh);
    }
}

/* A wait spins for spin_polls polls, then yields the core until yield_s after it began,
 * then sleeps on the futex until the collective completes or something happens that it
 * must see. With a core per process the ranks step in lockstep and a wait is usually
 * shorter than a futex round trip, so it spins (~tens of microseconds), and a longer one
 * (a peer that lost its core to another program for a while) yields, keeping the core
 * awake: on a virtual machine a core that goes idle can take long to wake, and sleeping
 * there made --nproc 2 slower on a loaded machine. With more processes than cores the
 * rank it waits for most likely needs this core, so it sleeps almost at once. Sleeps are
 * cut at SLEEP_MAX_S to check the collective's timeout; every event that ends a wait
 * early wakes sleepers. */
enum { SPIN_POLLS_OWN_CORE = 20000, SPIN_POLLS_SHARED = 100 };
static const double YIELD_S_OWN_CORE = 0.02;
static const double SLEEP_MAX_S = 1.0;

/* Sleep until `wake` moves from seen, a signal, or secs. */
static void sleep_on_wake(comm_local_shared *sh, uint32_t seen, double secs) {
    struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
    /* A waker bumps `wake`, then reads sleepers; a sleeper counts itself, then the kernel
     * reads `wake` (all seq_cst; the syscall is a full barrier): either the waker sees the
     * sleeper and wakes it, or the kernel sees the new value and returns at once. */
    atomic_fetch_add(&sh->sleepers, 1);
    long rc = syscall(SYS_futex, (uint32_t *)(void *)&sh->wake, FUTEX_WAIT, seen, &ts, NULL, 0);
    int e = errno;
    atomic_fetch_sub(&sh->sleepers, 1);
    CALF_ASSERT(rc == 0 || e == EAGAIN || e == EINTR || e == ETIMEDOUT);
}

static int aborted(const comm *c, int ab, uint64_t seq, calf_error *err) {
    const comm_local_shared *sh = c->impl;
    return calf_error_set(err, CALF_ECOMM,
                          "comm: rank %d failed (%s); rank %d stopped waiting in collective #%llu",
                          ab, sh->abort_why, c->rank, (unsigned long long)seq);
}

/* A rank that has exited without arriving at seq (the first), or -1. */
static int vanished_rank(const comm_local_shared *sh, uint64_t seq) {
    for (int r = 0; r < sh->nproc; r++)
        if (atomic_load_explicit(&sh->slot[r].gone, memory_order_acquire) &&
            atomic_load_explicit(&sh->slot[r].arrived, memory_order_acquire) < seq)
            return r;
    return -1;
}

/* The last sign of life of rank r while this rank waited since `since` (ns): its last
 * comm_progress, or the start of the wait if that was earlier. */
static int64_t alive_since(const comm_local_shared *sh, int r, int64_t since) {
    int64_t a = atomic_load_explicit(&sh->slot[r].alive_ns, memory_order_relaxed);
    return a > since ? a : since;
}

/* At t (ns), after waiting since `since`: the oldest sign of life among the ranks that
 * have not arrived at seq. The wait times out once that is timeout_s old. */
static int64_t oldest_alive(const comm *c, uint64_t seq, int64_t since) {
    const comm_local_shared *sh = c->impl;
    int64_t oldest = INT64_MAX;
    for (int r = 0; r < sh->nproc; r++) {
        if (atomic_load_explicit(&sh->slot[r].arrived, memory_order_acquire) >= seq) continue;
        int64_t a = alive_since(sh, r, since);
        if (a < oldest) oldest = a;
    }
    return oldest == INT64_MAX ? since : oldest;
}

/* Name the ranks that have not arrived at seq and showed no sign of life for timeout_s. */
static int timed_out(const comm *c, uint64_t seq, int64_t since, int64_t t, calf_error *err) {
    const comm_local_shared *sh = c->impl;
    char list[256] = "";
    size_t used = 0;
    int missing = 0;
    for (int r = 0; r < sh->nproc; r++) {
        if (atomic_load_explicit(&sh->slot[r].arrived, memory_order_acquire) >= seq) continue;
        if (1e-9 * (double)(t - alive_since(sh, r, since)) < c->timeout_s) continue;
        if (missing++ < 16 && used < sizeof list) {
            int w = snprintf(list + used, sizeof list - used, "%s%d", missing > 1 ? ", " : "", r);
            if (w > 0) used += (size_t)w;
        }
    }
    return calf_error_set(err, CALF_ECOMM,
                          "comm: collective #%llu timed out after %.3g s on rank %d waiting for "
                          "rank%s %s%s",
                          (unsigned long long)seq, c->timeout_s, c->rank, missing > 1 ? "s" : "",
                          list, missing > 16 ? ", ..." : "");
}

static int wait_all(comm *c, uint64_t seq, calf_error *err) {
    comm_local_shared *sh = c->impl;
    const uint64_t target = seq * (uint64_t)sh->nproc;
    unsigned polls = 0;
    uint32_t exits_seen = 0;
    double waiting_since = -1.0; /* the clock at the first poll that found a rank missing */
    int64_t since_ns = 0;        /* the same in ns, for signs of life */
    for (;;) {
        uint32_t seen = atomic_load_explicit(&sh->wake, memory_order_acquire);
        if (atomic_load_explicit(&sh->arrivals, memory_order_acquire) >= target) {
            if (waiting_since >= 0) c->wait_s += now_s() - waiting_since;
            return CALF_OK;
        }
        if (waiting_since < 0) {
            since_ns = now_ns();
            waiting_since = 1e-9 * (double)since_ns;
        }
        /* before the exits: a rank that left an interrupted job has not vanished */
        int64_t stop_at = atomic_load_explicit(&sh->stop_at, memory_order_acquire);
        if (stop_at != 0 && now_ns() >= stop_at)
            return calf_error_set(err, CALF_EINTR,
                                  "comm: the job was interrupted; rank %d stopped waiting in "
                                  "collective #%llu",
                                  c->rank, (unsigned long long)seq);
        int ab = atomic_load_explicit(&sh->abort_rank, memory_order_acquire);
        if (ab >= 0) return aborted(c, ab, seq, err);
        uint32_t exits = atomic_load_explicit(&sh->exits, memory_order_acquire);
        if (exits != exits_seen) { /* rare: look at every rank once per exit seen */
            exits_seen = exits;
            int gone = vanished_rank(sh, seq);
            if (gone >= 0) {
                /* A failed rank's abort is published before its gone flag: blame the cause. */
                ab = atomic_load_explicit(&sh->abort_rank, memory_order_acquire);
                if (ab >= 0) return aborted(c, ab, seq, err);
                return calf_error_set(err, CALF_ECOMM,
                                      "comm: rank %d vanished (%s) before collective #%llu; "
                                      "rank %d stopped waiting",
                                      gone, sh->slot[gone].why, (unsigned long long)seq, c->rank);
            }
            continue;
        }
        if (++polls < sh->spin_polls) {
            cpu_relax();
            continue;
        }
        int64_t t_ns = now_ns();
        double t = 1e-9 * (double)t_ns, left = c->timeout_s - (t - waiting_since);
        if (left < 0) { /* a rank that has not arrived but still works extends the wait */
            int64_t oldest = oldest_alive(c, seq, since_ns);
            left = c->timeout_s - 1e-9 * (double)(t_ns - oldest);
            if (left < 0) return timed_out(c, seq, since_ns, t_ns, err);
        }
        if (t - waiting_since < sh->yield_s) {
            sched_yield();
            continue;
        }
        double nap = left < SLEEP_MAX_S ? left : SLEEP_MAX_S;
        if (stop_at != 0 && 1e-9 * (double)stop_at - t < nap) nap = 1e-9 * (double)stop_at - t;
        sleep_on_wake(sh, seen, nap > 0 ? nap : 0);
    }
}

/* Arrive at the next collective and wait for everyone. */
static int local_sync(comm *c, calf_error *err) {
    comm_local_shared *sh = c->impl;
    /* After a failed wait the count no longer tells collectives apart (this rank's next
     * arrival could stand in for a missing rank's): fail at once, as the first did. */
    if (c->broken)
        return calf_error_set(err, CALF_ECOMM,
                              "comm: rank %d cannot join collective #%llu: an earlier one failed",
                              c->rank, (unsigned long long)(c->seq + 1));
    uint64_t seq = c->seq + 1;
    atomic_store_explicit(&sh->slot[c->index].arrived, seq, memory_order_release);
    c->seq = seq;
    /* seq_cst: the last arrival reads every earlier one (a release sequence), and its
     * bump of `wake` is ordered before its read of sleepers (see sleep_on_wake) */
    uint64_t before = atomic_fetch_add(&sh->arrivals, 1);
    if (before + 1 == seq * (uint64_t)sh->nproc) {
        atomic_fetch_add(&sh->wake, 1);
        if (atomic_load(&sh->sleepers)) futex_wake_all(sh);
    }
    int rc = wait_all(c, seq, err);
    if (rc != CALF_OK) c->broken = true;
    return rc;
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

static void local_progress(comm *c) {
    comm_local_shared *sh = c->impl;
    atomic_store_explicit(&sh->slot[c->index].alive_ns, now_ns(), memory_order_relaxed);
}

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
    .progress = local_progress,
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
            /* see SPIN_POLLS_OWN_CORE */
            long cpus = sysconf(_SC_NPROCESSORS_ONLN);
            bool own_core = cpus > 0 && nproc <= cpus;
            sh->spin_polls = own_core ? SPIN_POLLS_OWN_CORE : SPIN_POLLS_SHARED;
            sh->yield_s = own_core ? YIELD_S_OWN_CORE : 0.0;
            sh->map_bytes = total;
            sh->arena_bytes = arena;
            sh->arena_off = head;
            atomic_init(&sh->abort_claim, 0);
            atomic_init(&sh->abort_rank, -1);
            atomic_init(&sh->stop_at, 0);
            atomic_init(&sh->started, 0);
            atomic_init(&sh->exits, 0);
            atomic_init(&sh->arrivals, 0);
            atomic_init(&sh->wake, 0);
            atomic_init(&sh->sleepers, 0);
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
    comm *c = mem_calloc(1, sizeof *c, err);
    if (!c) return CALF_ENOMEM;
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
    atomic_fetch_add(&sh->exits, 1);
    wake_waiters(sh);
}

void comm_local_mark_finished(comm *c) {
    comm_local_shared *sh = c->impl;
    atomic_store_explicit(&sh->slot[c->rank].finished, 1, memory_order_release);
}

bool comm_local_finished(const comm_local_shared *sh, int rank) {
    CALF_ASSERT(rank >= 0 && rank < sh->nproc);
    return atomic_load_explicit(&((comm_local_shared *)sh)->slot[rank].finished,
                                memory_order_acquire) != 0;
}

void comm_local_start(comm_local_shared *sh) {
    atomic_store_explicit(&sh->started, 1, memory_order_release);
    wake_waiters(sh);
}

void comm_local_await_start(comm *c) {
    comm_local_shared *sh = c->impl;
    for (;;) {
        uint32_t seen = atomic_load_explicit(&sh->wake, memory_order_acquire);
        if (atomic_load_explicit(&sh->started, memory_order_acquire)) return;
        sleep_on_wake(sh, seen, SLEEP_MAX_S);
    }
}

void comm_local_stop_after(comm_local_shared *sh, double secs) {
    CALF_ASSERT(secs >= 0);
    int64_t at = now_ns() + (int64_t)(secs * 1e9);
    atomic_store_explicit(&sh->stop_at, at > 0 ? at : 1, memory_order_release);
    wake_waiters(sh); /* sleepers shorten their naps to the deadline */
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
