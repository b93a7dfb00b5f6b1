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

#endif
