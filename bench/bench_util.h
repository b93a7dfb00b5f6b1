/* bench_util.h: the clock, the median and the core's FMA peak the benches share
 * (header-only). */
#ifndef CALF_BENCH_UTIL_H
#define CALF_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

/* CPU seconds of this thread: on a shared machine a core's throughput is what is asked,
 * not how long other processes kept us waiting. */
static inline double bench_cpu_now(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#if defined(__x86_64__)
static volatile float bench_peak_m = 0.999999f, bench_peak_c = 1e-7f;
static volatile float bench_peak_sink;

/* 12 independent 8-wide FMA chains in registers (more than the FMA units' latency times
 * their count, so the loop runs at their throughput), compiled for AVX2+FMA whatever the
 * build's flags: the portable build measures the peak its fma kernels run against. */
__attribute__((target("avx2,fma"))) static inline double bench_fma_peak_avx2(int repeats) {
    const long iters = 4 * 1000 * 1000;
    double best = 0.0;
    for (int r = 0; r < repeats; r++) {
        __m256 m = _mm256_set1_ps(bench_peak_m), c = _mm256_set1_ps(bench_peak_c);
        __m256 a0 = _mm256_set1_ps(0.0f), a1 = _mm256_set1_ps(1.0f), a2 = _mm256_set1_ps(2.0f),
               a3 = _mm256_set1_ps(3.0f), a4 = _mm256_set1_ps(4.0f), a5 = _mm256_set1_ps(5.0f),
               a6 = _mm256_set1_ps(6.0f), a7 = _mm256_set1_ps(7.0f), a8 = _mm256_set1_ps(8.0f),
               a9 = _mm256_set1_ps(9.0f), a10 = _mm256_set1_ps(10.0f), a11 = _mm256_set1_ps(11.0f);
        double t0 = bench_cpu_now();
        for (long i = 0; i < iters; i++) {
            a0 = _mm256_fmadd_ps(a0, m, c), a1 = _mm256_fmadd_ps(a1, m, c);
            a2 = _mm256_fmadd_ps(a2, m, c), a3 = _mm256_fmadd_ps(a3, m, c);
            a4 = _mm256_fmadd_ps(a4, m, c), a5 = _mm256_fmadd_ps(a5, m, c);
            a6 = _mm256_fmadd_ps(a6, m, c), a7 = _mm256_fmadd_ps(a7, m, c);
            a8 = _mm256_fmadd_ps(a8, m, c), a9 = _mm256_fmadd_ps(a9, m, c);
            a10 = _mm256_fmadd_ps(a10, m, c), a11 = _mm256_fmadd_ps(a11, m, c);
            /* registers only: the compiler may neither drop nor fold the chains */
            __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5));
            __asm__ volatile("" : "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9), "+x"(a10), "+x"(a11));
        }
        double dt = bench_cpu_now() - t0;
        __m256 sum = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                   _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
        sum = _mm256_add_ps(sum, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
        float v[8];
        _mm256_storeu_ps(v, sum);
        bench_peak_sink = v[0];
        double rate = 12.0 * 8 * 2 * (double)iters / dt;
        if (rate > best) best = rate;
    }
    return best;
}
#endif

/* This core's single-precision FMA peak in FLOP/s, the best of `repeats` timings; 0 on a
 * CPU without AVX2 and FMA (or another architecture), where no peak is stated. */
static inline double bench_fma_peak(int repeats) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return bench_fma_peak_avx2(repeats);
#endif
    (void)repeats;
    return 0.0;
}

#endif
