/* comm_test_util.h: what the tests of parallel/ share: leaves whose sum changes bits in
 * any order but the canonical one, the tree written recursively as docs/DESIGN.md defines
 * it, and a harness that forks P ranks on the local backend and supervises them. */
#ifndef CALF_COMM_TEST_UTIL_H
#define CALF_COMM_TEST_UTIL_H

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "calf/rng.h"
#include "parallel/comm.h"
#include "test_util.h"

/* ---- data and the reference sum ------------------------------------------------------ */

/* Values spanning ~12 decades with both signs, so that summing in any other order than the
 * canonical one changes bits. */
static inline float wild_float(calf_rng *r) {
    float m = 1.0f + calf_rng_uniform_float(r);
    int e = (int)calf_rng_below(r, 41) - 20;
    float v = ldexpf(m, e);
    return (calf_rng_next(r) & 1) ? -v : v;
}

/* Leaf i's vector depends only on (seed, i): any process can rebuild any env's partial. */
static inline void fill_leaf(float *v, size_t n, uint64_t seed, int i) {
    calf_rng r;
    calf_rng_seed(&r, seed, (uint64_t)i, CALF_RNG_SHUFFLE);
    for (size_t k = 0; k < n; k++) v[k] = wild_float(&r);
}

static inline void fill_leaf_f64(double *v, size_t n, uint64_t seed, int i) {
    calf_rng r;
    calf_rng_seed(&r, seed, (uint64_t)i, CALF_RNG_EVAL);
    for (size_t k = 0; k < n; k++) v[k] = ldexp(1.0 + calf_rng_uniform_double(&r),
                                                (int)calf_rng_below(&r, 81) - 40) *
                                          ((calf_rng_next(&r) & 1) ? -1.0 : 1.0);
}

static inline int ceil_log2_int(int E) {
    int L = 0;
    while ((1 << L) < E) L++;
    return L;
}

/* The tree exactly as docs/DESIGN.md defines it, written recursively and independently of the
 * binary-counter implementation. leaves is (E, n). */
static inline void ref_node(const float *leaves, int E, size_t n, int j, long k, float *out) {
    long lo = k << j;
    if (j == 0) {
        memcpy(out, leaves + (size_t)lo * n, n * sizeof *out);
        return;
    }
    ref_node(leaves, E, n, j - 1, 2 * k, out);
    if (lo + (1L << (j - 1)) >= E) return; /* right half wholly beyond E */
    float *right = malloc(n * sizeof *right);
    ref_node(leaves, E, n, j - 1, 2 * k + 1, right);
    for (size_t i = 0; i < n; i++) out[i] = out[i] + right[i];
    free(right);
}

static inline void ref_sum(const float *leaves, int E, size_t n, float *out) {
    ref_node(leaves, E, n, ceil_log2_int(E), 0, out);
}

static inline void ref_node_f64(const double *leaves, int E, size_t n, int j, long k, double *out) {
    long lo = k << j;
    if (j == 0) {
        memcpy(out, leaves + (size_t)lo * n, n * sizeof *out);
        return;
    }
    ref_node_f64(leaves, E, n, j - 1, 2 * k, out);
    if (lo + (1L << (j - 1)) >= E) return;
    double *right = malloc(n * sizeof *right);
    ref_node_f64(leaves, E, n, j - 1, 2 * k + 1, right);
    for (size_t i = 0; i < n; i++) out[i] = out[i] + right[i];
    free(right);
}

/* Trainer's split: contiguous, in rank order, sizes differing by at most one. */
static inline void even_split(int E, int P, int r, int *begin, int *count) {
    int base = E / P, rem = E % P;
    *count = base + (r < rem);
    *begin = r * base + (r < rem ? r : rem);
}

/* ---- real processes on the local backend -------------------------------------------- */

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* What children report back to the test process, in a page shared across fork. */
typedef struct report {
    char msg[8][1024];
    double elapsed[8];
    double at[8];           /* now_s() when a rank's wait ended, or it set a deadline */
    int rc[8];
    int lent[8], copied[8]; /* rank_share: pieces taken by reference, and copied */
    _Atomic int done[8];    /* a rank has reported (the others may wait for it) */
    _Atomic int taken;      /* rank_share: envs other ranks took from the slow one */
} report;

/* Events, not delays, order the ranks of a test: wait (politely) until rank r has
 * reported. run_ranks' hang guard bounds it. */
static inline void await_done(report *rep, int r) {
    while (!atomic_load(&rep->done[r])) nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
}

typedef int (*rank_fn)(comm *c, report *rep, const void *arg);

/* Fork P ranks running fn and supervise them like the launcher (mark exits so waits fail
 * fast), with a hard deadline so a hang fails the test instead of blocking it: beyond
 * any wait a test sets (60 s), so that a slow machine (an emulator, a sanitizer build,
 * a loaded host) is never taken for a hang.
 * statuses: (P) waitpid statuses. Returns the seconds the ranks took in all. */
static inline double run_ranks(int P, size_t arena, double timeout_s, rank_fn fn, report *rep,
                               const void *arg, int *statuses) {
    comm_local_shared *sh = NULL;
    calf_error err;
    calf_error_clear(&err);
    int rc = comm_local_create(&sh, P, arena, &err);
    CHECK_INT_EQ(rc, CALF_OK);
    if (rc != CALF_OK) return 0;
    fflush(NULL);
    pid_t pids[8];
    int done[8] = {0};
    double t0 = now_s();
    for (int r = 0; r < P; r++) {
        pids[r] = fork();
        CHECK(pids[r] >= 0);
        if (pids[r] == 0) {
            test_failures = 0; /* count only this rank's own checks */
            comm *c = NULL;
            if (comm_local_attach(sh, r, &c, &err) != CALF_OK) _exit(90);
            comm_set_timeout(c, timeout_s);
            int code = fn(c, rep, arg);
            comm_finalize(c);
            fflush(NULL);
            _exit(code ? code : (test_failures ? 91 : 0));
        }
    }
    int left = P;
    while (left > 0) {
        for (int r = 0; r < P; r++) {
            if (done[r]) continue;
            pid_t w = waitpid(pids[r], &statuses[r], WNOHANG);
            if (w != pids[r]) continue;
            done[r] = 1;
            left--;
            char why[64];
            if (WIFEXITED(statuses[r]))
                snprintf(why, sizeof why, "exit status %d", WEXITSTATUS(statuses[r]));
            else
                snprintf(why, sizeof why, "killed by signal %d", WTERMSIG(statuses[r]));
            comm_local_mark_exited(sh, r, statuses[r] != 0, why);
        }
        if (left > 0 && now_s() - t0 > 120.0) {
            fprintf(stderr, "run_ranks: ranks hung; killing them\n");
            CHECK(0);
            for (int r = 0; r < P; r++)
                if (!done[r]) kill(pids[r], SIGKILL);
        }
        struct timespec nap = {0, 2000000};
        nanosleep(&nap, NULL);
    }
    comm_local_destroy(sh);
    return now_s() - t0;
}

/* A report every rank can write to (shared across fork); munmap it when done. */
static inline report *report_map(void) {
    report *rep = mmap(NULL, sizeof *rep, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(rep != MAP_FAILED);
    return rep;
}

/* Run P ranks of fn (arena bytes, 0 for the default) that must all exit normally having
 * failed alike: status code in rep->rc and a message containing needle. */
static inline void check_every_rank_fails(int P, size_t arena, rank_fn fn, int code,
                                          const char *needle, const char *what) {
    report *rep = report_map();
    memset(rep, 0, sizeof *rep);
    int st[8];
    run_ranks(P, arena, 10.0, fn, rep, NULL, st);
    for (int r = 0; r < P; r++) {
        CHECK_INT_EQ(st[r], 0);
        CHECK_INT_EQ(rep->rc[r], code);
        CHECK(strstr(rep->msg[r], needle) != NULL);
    }
    printf("%s: %s\n", what, rep->msg[0]);
    munmap(rep, sizeof *rep);
}

#endif
