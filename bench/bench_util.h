/* bench_util.h: the clock and the median every bench shares (header-only). */
#ifndef CALF_BENCH_UTIL_H
#define CALF_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double bench_now(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline double bench_now_us(void) { return 1e6 * bench_now(); }

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v (n values) in place and returns its q-quantile (0.5: the median). */
static inline double bench_quantile(double *v, int n, double q) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[(int)(q * (n - 1))];
}

/* FLOPs (two per multiply-add) of the MLP calls of one SAC or TD3 update (TD3: averaged
 * over its policy delay of 2) on one env's batch of B rows: actor obs-h-h-head (SAC's
 * head is mean and log std, 2 act; TD3's act), critics (obs+act)-h-h-1. Critic pass: the
 * (target) actor forward, two target and two online critics forward, two backwards to
 * the parameters (dW everywhere, dX above the first layer). Actor pass: the actor and
 * the critics it goes through (SAC two, TD3 one) forward, dX through them, the actor's
 * dW and dX above its first layer. bench_nn times exactly these calls. */
static inline double bench_update_flop(int obs, int act, int h, int B, int td3) {
    double head = td3 ? act : 2 * act;
    double af = obs * h + (double)h * h + h * head, a_in = (double)obs * h;
    double cf = (obs + act) * h + (double)h * h + h, c_in = (double)(obs + act) * h;
    double critic = af + 4 * cf + 2 * (2 * cf - c_in);
    double actor = af + (td3 ? 1 : 2) * 2 * cf + (2 * af - a_in);
    return 2.0 * B * (critic + (td3 ? 0.5 : 1.0) * actor);
}

#endif
