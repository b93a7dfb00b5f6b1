/* bench_util.h: the clock, the median and the core's FMA peaks (8 and 16 floats wide) the
 * benches share (header-only). */
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
/* 12 independent FMA chains in registers (more than the FMA units' latency times their
 * count, so the loop runs at their throughput), R "ymm" (8 wide) or "zmm" (16 wide), XOR
 * an instruction that zeroes such a register. The loop is written in assembly, so it is
 * the same whatever the build's flags (the portable build measures the peaks its fma and
 * avx512 kernels run against): in C, gcc 12 once kept the chains in registers and,
 * inlined into bench_conv, moved them through the stack every iteration (a "peak" of 38
 * GFLOP/s on a core whose kernels ran at 77). */
#define BENCH_PEAK_ZERO2(XOR, R, a, b) \
    XOR " %%" R #a ", %%" R #a ", %%" R #a "\n\t" XOR " %%" R #b ", %%" R #b ", %%" R #b "\n\t"
#define BENCH_PEAK_FMA2(R, a, b) \
    "vfmadd213ps %%" R "13, %%" R "12, %%" R #a "\n\tvfmadd213ps %%" R "13, %%" R "12, %%" R #b "\n\t"
#define BENCH_PEAK_LOOP(R, XOR)                                                                 \
    "vbroadcastss %[m], %%" R "12\n\t"                                                          \
    "vbroadcastss %[c], %%" R "13\n\t" BENCH_PEAK_ZERO2(XOR, R, 0, 1)                          \
    BENCH_PEAK_ZERO2(XOR, R, 2, 3) BENCH_PEAK_ZERO2(XOR, R, 4, 5) BENCH_PEAK_ZERO2(XOR, R, 6, 7) \
    BENCH_PEAK_ZERO2(XOR, R, 8, 9) BENCH_PEAK_ZERO2(XOR, R, 10, 11)                             \
    "1:\n\t" BENCH_PEAK_FMA2(R, 0, 1) BENCH_PEAK_FMA2(R, 2, 3) BENCH_PEAK_FMA2(R, 4, 5)         \
    BENCH_PEAK_FMA2(R, 6, 7) BENCH_PEAK_FMA2(R, 8, 9) BENCH_PEAK_FMA2(R, 10, 11)                 \
    "dec %[n]\n\t"                                                                              \
    "jnz 1b\n\t"                                                                                \
    "vzeroupper"

/* The best of `repeats` timings of the loop `width` floats wide (8 or 16), in FLOP/s; the
 * caller has checked that the CPU runs it. */
static inline double bench_fma_peak_run(int repeats, int width) {
    const long iters = 4 * 1000 * 1000;
    double best = 0.0;
    for (int r = 0; r < repeats; r++) {
        float m = bench_peak_m, c = bench_peak_c;
        long n = iters;
        double t0 = bench_cpu_now();
        if (width == 16)
            __asm__ volatile(BENCH_PEAK_LOOP("zmm", "vpxord")
                             : [n] "+r"(n)
                             : [m] "m"(m), [c] "m"(c)
                             : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
                               "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "cc");
        else
            __asm__ volatile(BENCH_PEAK_LOOP("ymm", "vxorps")
                             : [n] "+r"(n)
                             : [m] "m"(m), [c] "m"(c)
                             : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
                               "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "cc");
        double dt = bench_cpu_now() - t0;
        double rate = 12.0 * width * 2 * (double)iters / dt;
        if (rate > best) best = rate;
    }
    return best;
}
#endif

/* This core's 16-wide (AVX-512) FMA peak in FLOP/s, as bench_fma_peak: the peak the avx512
 * kernel variant runs against (twice the 8-wide one on a core with two full 512-bit FMA
 * units, level with it on one that splits 512-bit work in halves); 0 on a CPU without
 * AVX-512F (or another architecture). */
static inline double bench_fma_peak16(int repeats) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return bench_fma_peak_run(repeats, 16);
#endif
    (void)repeats;
    return 0.0;
}

/* This core's single-precision FMA peak in FLOP/s, the best of `repeats` timings; 0 on a
 * CPU without AVX2 and FMA (or another architecture), where no peak is stated. */
static inline double bench_fma_peak(int repeats) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return bench_fma_peak_run(repeats, 8);
#endif
    (void)repeats;
    return 0.0;
}

#endif
