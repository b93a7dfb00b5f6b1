/* test_cmath.c: calf's exp, log, sin, cos, expm1, tanh and integer power hold the accuracy
 * cmath.h states, measured in ulps of the double result against long double libm (64-bit
 * mantissa on x86-64: 2^-11 ulp of a double), over dense sweeps and random points of the
 * ranges calf uses and of the whole line, and give C99's special values. */
#include <float.h>
#include <stdint.h>

#include "base/cmath.h"
#include "test_util.h"

static uint64_t mix_state = 0x9e3779b97f4a7c15ULL;

/* splitmix64: the test's own stream, so that the points never change */
static uint64_t next_u64(void) {
    uint64_t z = (mix_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double uniform(double lo, double hi) {
    return lo + (hi - lo) * ((double)(next_u64() >> 11) * 0x1p-53);
}

/* |got - want| in ulps of the double nearest want (subnormals: of 2^-1074) */
static double ulp_error(double got, long double want) {
    if (isnan(got) && isnan(want)) return 0;
    if (isinf(want) || isinf(got)) return got == want ? 0 : INFINITY;
    long double a = fabsl(want);
    int e;
    frexpl(a, &e); /* a = f 2^e, f in [0.5, 1) */
    if (e < -1021) e = -1021;
    long double ulp = ldexpl(1.0L, e - 53);
    if (a > (long double)DBL_MAX) ulp = ldexpl(1.0L, 1024 - 53);
    return (double)(fabsl((long double)got - want) / ulp);
}

typedef struct fn {
    const char *name;
    double (*calf)(double);
    long double (*ref)(long double);
    double (*libm)(double);
    double bound; /* stated max ulp error */
} fn;

typedef struct stats {
    double max_ulp, at;
    long differ_from_libm, points;
} stats;

static void measure(const fn *f, double x, stats *s) {
    double got = f->calf(x);
    double e = ulp_error(got, f->ref((long double)x));
    if (e > s->max_ulp || isnan(e)) {
        s->max_ulp = isnan(e) ? INFINITY : e;
        s->at = x;
    }
    double lm = f->libm(x);
    if (memcmp(&got, &lm, sizeof got) != 0) s->differ_from_libm++;
    s->points++;
}

/* n points evenly over [lo, hi], then n uniform random ones */
static void sweep(const fn *f, double lo, double hi, long n, stats *s) {
    for (long i = 0; i <= n; i++) measure(f, lo + (hi - lo) * ((double)i / (double)n), s);
    for (long i = 0; i < n; i++) measure(f, uniform(lo, hi), s);
}

/* n random bit patterns with biased exponent in [elo, ehi], either sign */
static void sweep_bits(const fn *f, int elo, int ehi, long n, stats *s) {
    for (long i = 0; i < n; i++) {
        uint64_t r = next_u64();
        uint64_t ex = (uint64_t)(elo + (int)(r % (uint64_t)(ehi - elo + 1)));
        uint64_t u = (next_u64() & 0x800fffffffffffffULL) | (ex << 52);
        double x;
        memcpy(&x, &u, sizeof x);
        measure(f, x, s);
    }
}

static void report(const fn *f, const char *range, const stats *s) {
    printf("  %-6s %-26s max %.3f ulp at %.17g; %ld of %ld differ from libm's\n", f->name,
           range, s->max_ulp, s->at, s->differ_from_libm, s->points);
    if (!(s->max_ulp < f->bound))
        fprintf(stderr, "%s on %s: %.3f ulp at %a, stated bound %.1f\n", f->name, range,
                s->max_ulp, s->at, f->bound);
    CHECK(s->max_ulp < f->bound);
}

static void check_range(const fn *f, const char *range, double lo, double hi, long n) {
    stats s = {0, 0, 0, 0};
    sweep(f, lo, hi, n, &s);
    report(f, range, &s);
}

static void check_bits(const fn *f, const char *range, int elo, int ehi, long n) {
    stats s = {0, 0, 0, 0};
    sweep_bits(f, elo, ehi, n, &s);
    report(f, range, &s);
}

static long double ref_expm1(long double x) { return expm1l(x); }

static void test_accuracy(void) {
    const fn fexp = {"exp", cm_exp, expl, exp, 1.0};
    const fn flog = {"log", cm_log, logl, log, 1.0};
    const fn fsin = {"sin", cm_sin, sinl, sin, 1.0};
    const fn fcos = {"cos", cm_cos, cosl, cos, 1.0};
    const fn fem1 = {"expm1", cm_expm1, ref_expm1, expm1, 1.0};
    const fn ftanh = {"tanh", cm_tanh, tanhl, tanh, 2.5};
    const long n = 200000;
    /* exp: the log-softmax's and the Gaussian's arguments, then the whole finite range */
    check_range(&fexp, "[-40, 40]", -40, 40, n);
    check_range(&fexp, "[-745.1, 709.7]", -745.1, 709.78, n);
    check_bits(&fexp, "|x| in [2^-60, 2^9]", 1023 - 60, 1023 + 8, n);
    /* log: probabilities, SAC's 1 - y^2 + eps, Box-Muller's uniform, then everything */
    check_range(&flog, "(0, 4]", 1e-300, 4, n);
    check_range(&flog, "[0.5, 2]", 0.5, 2, n);
    check_range(&flog, "[1 - 2^-20, 1 + 2^-20]", 1 - 0x1p-20, 1 + 0x1p-20, n);
    stats s = {0, 0, 0, 0};
    for (long i = 0; i < n; i++) { /* positive: all exponents, subnormals included */
        uint64_t u = next_u64() & 0x7fefffffffffffffULL;
        double x;
        memcpy(&x, &u, sizeof x);
        measure(&flog, x, &s);
    }
    report(&flog, "all positive doubles", &s);
    /* sin, cos: the envs' angles (pendulum's grows), Box-Muller's [0, 2 pi), then large */
    const fn *trig[2] = {&fsin, &fcos};
    for (int t = 0; t < 2; t++) {
        check_range(trig[t], "[-2 pi, 2 pi]", -6.283185307179586, 6.283185307179586, n);
        check_range(trig[t], "[-1000, 1000]", -1000, 1000, n);
        check_bits(trig[t], "|x| in [2^-30, 2^20]", 1023 - 30, 1023 + 20, n);
        check_bits(trig[t], "|x| in [2^20, 2^1023]", 1023 + 20, 2046, n / 4);
    }
    /* expm1 and tanh: SAC's pre-squash values, then every exponent */
    check_range(&fem1, "[-40, 40]", -40, 40, n);
    check_bits(&fem1, "|x| in [2^-60, 2^9]", 1023 - 60, 1023 + 8, n);
    check_range(&ftanh, "[-25, 25]", -25, 25, n);
    check_range(&ftanh, "[-1, 1]", -1, 1, n);
    check_bits(&ftanh, "|x| in [2^-60, 2^5]", 1023 - 60, 1023 + 5, n);
}

/* sin and cos next to multiples of pi/2, where the reduction cancels most: the doubles
 * nearest k pi/2 and their neighbours */
static void test_near_pio2(void) {
    const fn fsin = {"sin", cm_sin, sinl, sin, 1.0};
    const fn fcos = {"cos", cm_cos, cosl, cos, 1.0};
    stats ss = {0, 0, 0, 0}, sc = {0, 0, 0, 0};
    for (long k = -20000; k <= 20000; k++) {
        double x = (double)((long double)k * 1.5707963267948966192313216916397514L);
        for (int d = -2; d <= 2; d++) {
            double y = x;
            for (int j = 0; j < (d < 0 ? -d : d); j++) y = nextafter(y, d < 0 ? -INFINITY : INFINITY);
            measure(&fsin, y, &ss);
            measure(&fcos, y, &sc);
        }
    }
    /* 6381956970095103 2^797 is the double closest to a multiple of pi/2 (Kahan,
     * McDonald: within 2^-61 of one), the hardest case for any reduction */
    double hard = ldexp(6381956970095103.0, 797);
    measure(&fsin, hard, &ss);
    measure(&fcos, hard, &sc);
    report(&fsin, "near k pi/2", &ss);
    report(&fcos, "near k pi/2", &sc);
}

static void test_powi(void) {
    double worst = 0, at_x = 0;
    long at_n = 0;
    /* Adam's bias corrections: beta^step for the usual betas, steps 1..2e5 */
    const double betas[4] = {0.9, 0.99, 0.999, 0.9999};
    for (int b = 0; b < 4; b++)
        for (long t = 1; t <= 200000; t += (t < 1000 ? 1 : 37)) {
            long double want = powl((long double)betas[b], (long double)t);
            if (want < 0x1p-900L) break; /* the stated range ends there */
            double e = ulp_error(cm_powi(betas[b], t), want);
            if (e > worst) worst = e, at_x = betas[b], at_n = t;
        }
    /* random bases and exponents, either sign, results within range */
    for (long i = 0; i < 200000; i++) {
        double x = uniform(0.25, 4.0) * (next_u64() & 1 ? -1 : 1);
        int64_t n = (int64_t)(next_u64() % 600) - 300;
        long double want = powl((long double)x, (long double)n);
        double e = ulp_error(cm_powi(x, n), want);
        if (e > worst) worst = e, at_x = x, at_n = (long)n;
    }
    printf("  powi   Adam's betas, random x^n     max %.3f ulp at %.17g^%ld\n", worst, at_x, at_n);
    CHECK(worst < 1.0);
    CHECK(cm_powi(2.0, 10) == 1024.0);
    CHECK(cm_powi(-2.0, 3) == -8.0);
    CHECK(cm_powi(2.0, -3) == 0.125);
    CHECK(cm_powi(0.5, 1074) == 0x1p-1074);
    CHECK(cm_powi(0.5, 1075) == 0.0);
    CHECK(cm_powi(10.0, 400) == INFINITY);
    CHECK(cm_powi(0.0, 3) == 0.0 && cm_powi(0.0, -1) == INFINITY);
    CHECK(signbit(cm_powi(-0.0, 3)) && cm_powi(-0.0, -1) == -INFINITY);
    CHECK(cm_powi(INFINITY, 2) == INFINITY && cm_powi(-INFINITY, 3) == -INFINITY);
    CHECK(cm_powi(INFINITY, -2) == 0.0);
    CHECK(cm_powi(NAN, 0) == 1.0 && isnan(cm_powi(NAN, 2)));
    CHECK(cm_powi(0.3, 1) == 0.3);
}

static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static void test_special_values(void) {
    const double nan = NAN, inf = INFINITY, tiny = 0x1p-1074;
    CHECK(isnan(cm_exp(nan)) && isnan(cm_log(nan)) && isnan(cm_sin(nan)) &&
          isnan(cm_cos(nan)) && isnan(cm_tanh(nan)) && isnan(cm_expm1(nan)));
    CHECK(cm_exp(inf) == inf && same_bits(cm_exp(-inf), 0.0));
    CHECK(cm_exp(0.0) == 1.0 && cm_exp(-0.0) == 1.0 && cm_exp(tiny) == 1.0);
    CHECK(cm_exp(709.79) == inf && cm_exp(-745.2) == 0.0);
    CHECK(cm_exp(-745.1) == 0x1p-1074);
    CHECK(cm_log(inf) == inf && isnan(cm_log(-inf)) && isnan(cm_log(-1.0)));
    CHECK(cm_log(0.0) == -inf && cm_log(-0.0) == -inf);
    CHECK(same_bits(cm_log(1.0), 0.0));
    CHECK(cm_log(tiny) == log(tiny) && cm_log(DBL_MAX) == log(DBL_MAX));
    CHECK(isnan(cm_sin(inf)) && isnan(cm_sin(-inf)) && isnan(cm_cos(inf)));
    CHECK(same_bits(cm_sin(-0.0), -0.0) && same_bits(cm_sin(0.0), 0.0));
    CHECK(cm_cos(0.0) == 1.0 && cm_cos(-0.0) == 1.0);
    CHECK(same_bits(cm_sin(-tiny), -tiny) && cm_cos(tiny) == 1.0);
    CHECK(same_bits(cm_tanh(-0.0), -0.0) && same_bits(cm_expm1(-0.0), -0.0));
    CHECK(cm_tanh(inf) == 1.0 && cm_tanh(-inf) == -1.0 && cm_tanh(30.0) == 1.0);
    CHECK(same_bits(cm_tanh(-tiny), -tiny) && same_bits(cm_expm1(tiny), tiny));
    CHECK(cm_expm1(inf) == inf && cm_expm1(-inf) == -1.0 && cm_expm1(710.0) == inf);
}

/* The bits themselves: an FNV-1a digest of every function's results over a fixed set of
 * points, the same on every CPU and build (recorded on x86-64 with and without FMA and
 * on aarch64 under qemu). A change to cmath.c that moves any bit shows here. */
#define CMATH_RESULTS_FNV 0x2ef6d8195cff2c25ULL

static void test_digest(void) {
    double (*const f[6])(double) = {cm_exp, cm_log, cm_sin, cm_cos, cm_expm1, cm_tanh};
    uint64_t h = 0xcbf29ce484222325ULL, saved = mix_state;
    mix_state = 12345;
    for (int i = 0; i < 60000; i++) {
        uint64_t u = next_u64();
        double x, y;
        memcpy(&x, &u, sizeof x);
        int k = i % 7;
        if (k < 6) y = f[k](i % 2 ? x : uniform(-50, 50));
        else y = cm_powi(uniform(0.5, 1.0), (int64_t)(u % 100000));
        if (isnan(y)) y = NAN; /* a NaN's payload is the CPU's (x86 sets the sign) */
        unsigned char b[8];
        memcpy(b, &y, sizeof b);
        for (int j = 0; j < 8; j++) h = (h ^ b[j]) * 0x100000001b3ULL;
    }
    mix_state = saved;
    printf("  digest of the results: 0x%016llxULL\n", (unsigned long long)h);
    CHECK(h == CMATH_RESULTS_FNV);
}

int main(void) {
    test_digest();
    test_special_values();
    test_accuracy();
    test_near_pio2();
    test_powi();
    return test_report("test_cmath");
}
