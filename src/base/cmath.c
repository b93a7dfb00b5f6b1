/* cmath.c: calf's exp, log, sin, cos, tanh and integer power (see cmath.h). The
 * algorithms and minimax coefficients are fdlibm's (Sun Microsystems, 1993: "Permission
 * to use, copy, modify, and distribute this software is freely granted, provided that
 * this notice is preserved"), the large-argument reduction Payne-Hanek's; every line is
 * plain double arithmetic, so the order written is the order run. */
#include "base/cmath.h"

#include <string.h>

#include "base/cmath_tanh.inc"

#define CM_INF calf_of_bits(0x7ff0000000000000ULL)
#define CM_NAN calf_of_bits(0x7ff8000000000000ULL)
#define CM_ABS_MASK 0x7fffffffffffffffULL

double cm_expm1(double x) { return calf_expm1d(x); }
double cm_tanh(double x) { return calf_tanhd(x); }

/* ---- exp ------------------------------------------------------------------------ */

/* x = k ln2 + r, |r| <= ln2 / 2 (ln2 split so that k ln2_hi is exact), then
 * exp(r) = 1 + r + r c / (2 - c), c = r - r^2 P(r^2), and y 2^k put in the exponent. */
double cm_exp(double x) {
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    const double inv_ln2 = 1.44269504088896338700e+00;
    const double p1 = 1.66666666666666019037e-01, p2 = -2.77777777770155933842e-03,
                 p3 = 6.61375632143793436117e-05, p4 = -1.65339022054652515390e-06,
                 p5 = 4.13813679705723846039e-08;
    uint64_t ax = calf_bits_of(x) & CM_ABS_MASK;
    if (ax > 0x7ff0000000000000ULL) return x + x;
    if (x > 7.09782712893383973096e+02) return CM_INF;
    if (x < -7.45133219101941108420e+02) return 0.0;
    if (ax < 0x3e30000000000000ULL) return 1.0 + x; /* |x| < 2^-28 */
    double hi = x, lo = 0.0;
    int k = 0;
    if (ax > 0x3fd62e42fefa39efULL) { /* |x| > ln2 / 2 */
        k = (int)(inv_ln2 * x + (x < 0 ? -0.5 : 0.5));
        double t = k;
        hi = x - t * ln2_hi;
        lo = t * ln2_lo;
    }
    double r = hi - lo;
    double t = r * r;
    double c = r - t * (p1 + t * (p2 + t * (p3 + t * (p4 + t * p5))));
    double y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi);
    if (k == 0) return y;
    if (k >= -1021) {
        if (k == 1024) return y * 2.0 * 0x1p1023;
        return y * calf_of_bits((uint64_t)(0x3ff + k) << 52);
    }
    /* a subnormal result: one rounding, in the last multiplication */
    return y * calf_of_bits((uint64_t)(0x3ff + k + 1000) << 52) * 0x1p-1000;
}

/* ---- log ------------------------------------------------------------------------ */

/* x = 2^k (1 + f) with 1 + f in [sqrt(2)/2, sqrt(2)); s = f / (2 + f) and
 * log(1 + f) = f - s (f - R(s^2)) = f - (f^2/2 - s (f^2/2 + R)), R fdlibm's Lg series,
 * the second form where f is large enough for f^2/2 to carry the cancellation. */
double cm_log(double x) {
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    const double lg1 = 6.666666666666735130e-01, lg2 = 3.999999999940941908e-01,
                 lg3 = 2.857142874366239149e-01, lg4 = 2.222219843214978396e-01,
                 lg5 = 1.818357216161805012e-01, lg6 = 1.531383769920937332e-01,
                 lg7 = 1.479819860511658591e-01;
    uint64_t u = calf_bits_of(x);
    int k = 0;
    if (u >= 0x7ff0000000000000ULL) { /* negative, inf or NaN */
        if ((u & CM_ABS_MASK) > 0x7ff0000000000000ULL) return x + x;
        if (u == 0x7ff0000000000000ULL) return x;
        if ((u & CM_ABS_MASK) == 0) return -CM_INF;
        return CM_NAN;
    }
    if (u == 0) return -CM_INF;
    if (u < 0x0010000000000000ULL) { /* subnormal: scale into the normal range first */
        x *= 0x1p54;
        u = calf_bits_of(x);
        k = -54;
    }
    uint32_t hx = (uint32_t)(u >> 32);
    k += (int)(hx >> 20) - 1023;
    hx &= 0x000fffff;
    uint32_t i = (hx + 0x95f64) & 0x100000; /* the mantissa is above sqrt(2): halve */
    u = ((uint64_t)(hx | (i ^ 0x3ff00000)) << 32) | (u & 0xffffffffULL);
    k += (int)(i >> 20);
    double f = calf_of_bits(u) - 1.0;
    double dk = k;
    if (f == 0.0) return dk * ln2_hi + dk * ln2_lo;
    double s = f / (2.0 + f);
    double z = s * s;
    double w = z * z;
    double t1 = w * (lg2 + w * (lg4 + w * lg6));
    double t2 = z * (lg1 + w * (lg3 + w * (lg5 + w * lg7)));
    double r = t2 + t1;
    int large = ((int32_t)(hx - 0x6147a) | (int32_t)(0x6b851 - hx)) > 0;
    if (large) {
        double hfsq = 0.5 * f * f;
        return dk * ln2_hi - ((hfsq - (s * (hfsq + r) + dk * ln2_lo)) - f);
    }
    return dk * ln2_hi - ((s * (f - r) - dk * ln2_lo) - f);
}

/* ---- sin and cos ---------------------------------------------------------------- */

/* sin(x + y) and cos(x + y) on |x + y| <= pi/4, y the tail of the reduced argument. */
static double sin_kernel(double x, double y) {
    const double s1 = -1.66666666666666324348e-01, s2 = 8.33333333332248946124e-03,
                 s3 = -1.98412698298579493134e-04, s4 = 2.75573137070700676789e-06,
                 s5 = -2.50507602534068634195e-08, s6 = 1.58969099521155010221e-10;
    double z = x * x;
    double w = z * z;
    double r = s2 + z * (s3 + z * s4) + z * w * (s5 + z * s6);
    double v = z * x;
    return x - ((z * (0.5 * y - v * r) - y) - v * s1);
}

static double cos_kernel(double x, double y) {
    const double c1 = 4.16666666666666019037e-02, c2 = -1.38888888888741095749e-03,
                 c3 = 2.48015872894767294178e-05, c4 = -2.75573143513906633035e-07,
                 c5 = 2.08757232129817482790e-09, c6 = -1.13596475577881948265e-11;
    double z = x * x;
    double w = z * z;
    double r = z * (c1 + z * (c2 + z * c3)) + w * w * (c4 + z * (c5 + z * c6));
    double hz = 0.5 * z;
    double v = 1.0 - hz;
    return v + (((1.0 - v) - hz) + (z * r - x * y));
}

/* The bits of 2/pi, most significant first: bit 64 j + b of the table (b = 0 the word's
 * top bit) has weight 2^(63 - 64 j - b); the first word is zero, so a window may start
 * before the binary point. 1,280 bits: enough for any finite double. */
static const uint64_t two_over_pi[21] = {
    0x0000000000000000ULL, 0xa2f9836e4e441529ULL, 0xfc2757d1f534ddc0ULL,
    0xdb6295993c439041ULL, 0xfe5163abdebbc561ULL, 0xb7246e3a424dd2e0ULL,
    0x06492eea09d1921cULL, 0xfe1deb1cb129a73eULL, 0xe88235f52ebb4484ULL,
    0xe99c7026b45f7e41ULL, 0x3991d639835339f4ULL, 0x9c845f8bbdf9283bULL,
    0x1ff897ffde05980fULL, 0xef2f118b5a0a6d1fULL, 0x6d367ecf27cb09b7ULL,
    0x4f463f669e5fea2dULL, 0x7527bac7ebe5f17bULL, 0x3d0739f78a5292eaULL,
    0x6bfb5fb11f8d5d08ULL, 0x56033046fc7b6babULL, 0xf0cfbc209af4361dULL,
};

/* a b = p + e exactly (Dekker's product: Veltkamp splits, no fused operation). Both
 * operands below 2^995 in magnitude, so that the split cannot overflow. */
static void two_prod(double a, double b, double *p, double *e) {
    const double split = 134217729.0; /* 2^27 + 1 */
    double ta = split * a, tb = split * b;
    double ah = ta - (ta - a), al = a - ah;
    double bh = tb - (tb - b), bl = b - bh;
    *p = a * b;
    *e = ((ah * bh - *p) + ah * bl + al * bh) + al * bl;
}

/* Payne-Hanek for |x| >= 2^20 pi/2 (finite): x = m 2^s with m a 53-bit integer, and
 * x 2/pi mod 4 from m times the 192 bits of 2/pi whose weights matter (those from 2^(1-s)
 * down), exact integer arithmetic; then the fraction times pi/2 in double-double. */
static int rem_pio2_large(double x, double *y0, double *y1) {
    uint64_t u = calf_bits_of(x);
    int s = (int)((u >> 52) & 0x7ff) - 1075;
    uint64_t m = (u & 0x000fffffffffffffULL) | 0x0010000000000000ULL;
    int off = s - 1 + 63; /* table bit of weight 2^(1 - s) */
    int w = off / 64, sh = off % 64;
    uint64_t t[3];
    for (int j = 0; j < 3; j++)
        t[j] = sh ? (two_over_pi[w + j] << sh) | (two_over_pi[w + j + 1] >> (64 - sh))
                  : two_over_pi[w + j];
    /* r = m t mod 2^192, weight of its lowest bit 2^-190 */
    unsigned __int128 p2 = (unsigned __int128)m * t[2];
    unsigned __int128 p1 = (unsigned __int128)m * t[1] + (uint64_t)(p2 >> 64);
    uint64_t r2 = (uint64_t)p2, r1 = (uint64_t)p1;
    uint64_t r0 = m * t[0] + (uint64_t)(p1 >> 64);
    int n = (int)(r0 >> 62);
    r0 &= 0x3fffffffffffffffULL; /* the fraction, in [0, 1): 190 bits */
    int neg = 0;
    if (r0 >> 61) { /* fraction >= 1/2: take fraction - 1 */
        n++;
        neg = 1;
        r2 = ~r2 + 1;
        r1 = ~r1 + (r2 == 0);
        r0 = (~r0 + (r1 == 0 && r2 == 0)) & 0x3fffffffffffffffULL;
    }
    /* normalize the 192-bit word r0:r1:r2 so that its top bit is set */
    int lz = 0;
    while (r0 == 0 && lz < 128) {
        r0 = r1;
        r1 = r2;
        r2 = 0;
        lz += 64;
    }
    if (r0 == 0) { /* x a multiple of pi/2 to 190 bits: none is, but say what it would give */
        *y0 = *y1 = 0.0;
        return x < 0 ? -n : n;
    }
    int z = __builtin_clzll(r0);
    if (z) {
        r0 = (r0 << z) | (r1 >> (64 - z));
        r1 = (r1 << z) | (r2 >> (64 - z));
    }
    lz += z;
    /* value = (r0 2^64 + r1) 2^(-126 - lz), to 128 bits */
    double hi = (double)(r0 >> 11) * calf_of_bits((uint64_t)(1023 - 51 - lz) << 52);
    double lo = (double)((r0 << 53) | (r1 >> 11)) * calf_of_bits((uint64_t)(1023 - 115 - lz) << 52);
    const double pio2_hi = 1.57079632679489655800e+00, pio2_lo = 6.12323399573676603587e-17;
    double ph, pe;
    two_prod(hi, pio2_hi, &ph, &pe);
    double tail = pe + (hi * pio2_lo + lo * pio2_hi);
    double a = ph + tail;
    double b = tail - (a - ph);
    if (neg) {
        a = -a;
        b = -b;
    }
    if (x < 0) {
        *y0 = -a;
        *y1 = -b;
        return -n;
    }
    *y0 = a;
    *y1 = b;
    return n;
}

/* x - n pi/2 = y0 + y1 with |y0 + y1| <= pi/4 (about), returns n (mod 4 is what counts).
 * Below 2^20 pi/2: Cody-Waite, pi/2 in three 33-bit pieces and their tails, as many
 * as the cancellation needs (fdlibm's medium case). */
static int rem_pio2(double x, double *y0, double *y1) {
    const double inv_pio2 = 6.36619772367581382433e-01;
    const double pio2_1 = 1.57079632673412561417e+00, pio2_1t = 6.07710050650619224932e-11;
    const double pio2_2 = 6.07710050630396597660e-11, pio2_2t = 2.02226624879595063154e-21;
    const double pio2_3 = 2.02226624871116645580e-21, pio2_3t = 8.47842766036889956997e-32;
    uint64_t ax = calf_bits_of(x) & CM_ABS_MASK;
    if (ax >= 0x413921fb00000000ULL) return rem_pio2_large(x, y0, y1);
    /* round x 2/pi to an integer: adding 1.5 2^52 leaves no fraction bits */
    double fn = (x * inv_pio2 + 0x1.8p52) - 0x1.8p52;
    int n = (int)fn;
    double r = x - fn * pio2_1;
    double w = fn * pio2_1t;
    int ex = (int)(ax >> 52);
    *y0 = r - w;
    if (ex - (int)((calf_bits_of(*y0) >> 52) & 0x7ff) > 16) { /* cancelled: next piece */
        double t = r;
        w = fn * pio2_2;
        r = t - w;
        w = fn * pio2_2t - ((t - r) - w);
        *y0 = r - w;
        if (ex - (int)((calf_bits_of(*y0) >> 52) & 0x7ff) > 49) {
            t = r;
            w = fn * pio2_3;
            r = t - w;
            w = fn * pio2_3t - ((t - r) - w);
            *y0 = r - w;
        }
    }
    *y1 = (r - *y0) - w;
    return n;
}

double cm_sin(double x) {
    uint64_t ax = calf_bits_of(x) & CM_ABS_MASK;
    if (ax <= 0x3fe921fb54442d18ULL) { /* |x| <= pi/4 */
        if (ax < 0x3e50000000000000ULL) return x; /* |x| < 2^-26: x, zero's sign kept */
        return sin_kernel(x, 0.0);
    }
    if (ax >= 0x7ff0000000000000ULL) return x - x; /* NaN for inf and NaN */
    double y0, y1;
    switch (rem_pio2(x, &y0, &y1) & 3) {
    case 0: return sin_kernel(y0, y1);
    case 1: return cos_kernel(y0, y1);
    case 2: return -sin_kernel(y0, y1);
    default: return -cos_kernel(y0, y1);
    }
}

double cm_cos(double x) {
    uint64_t ax = calf_bits_of(x) & CM_ABS_MASK;
    if (ax <= 0x3fe921fb54442d18ULL) {
        if (ax < 0x3e40000000000000ULL) return 1.0; /* |x| < 2^-27: 1 - x^2/2 rounds to 1 */
        return cos_kernel(x, 0.0);
    }
    if (ax >= 0x7ff0000000000000ULL) return x - x;
    double y0, y1;
    switch (rem_pio2(x, &y0, &y1) & 3) {
    case 0: return cos_kernel(y0, y1);
    case 1: return -sin_kernel(y0, y1);
    case 2: return -cos_kernel(y0, y1);
    default: return sin_kernel(y0, y1);
    }
}

/* ---- integer power -------------------------------------------------------------- */

typedef struct dd {
    double hi, lo;
} dd;

static dd dd_mul(dd a, dd b) {
    double p, e;
    two_prod(a.hi, b.hi, &p, &e);
    e += a.hi * b.lo + a.lo * b.hi;
    dd r;
    r.hi = p + e;
    r.lo = e - (r.hi - p);
    return r;
}

/* Binary powering in double-double (about 104 bits, relative error below n 2^-104),
 * rounded once at the end; 1 / x^|n| for n < 0 by one Newton step on the double-double.
 * A product whose exponent would leave [2^-900, 2^990] (where the split overflows or the
 * tail turns subnormal), and zero, inf and NaN bases, go the plain double way from there
 * on (exact for zero and inf). */
static int dd_fits(double a, double b) {
    int ea = (int)((calf_bits_of(a) >> 52) & 0x7ff) - 1023;
    int eb = (int)((calf_bits_of(b) >> 52) & 0x7ff) - 1023;
    return ea > -1023 && eb > -1023 && ea < 1024 && eb < 1024 && ea + eb >= -900 &&
           ea + eb <= 990;
}

/* hi + lo, but a zero's sign kept */
static double dd_value(dd a) { return a.lo == 0.0 ? a.hi : a.hi + a.lo; }

static dd pow_mul(dd a, dd b, int *exact) {
    if (*exact && dd_fits(a.hi, b.hi)) return dd_mul(a, b);
    *exact = 0;
    dd r = {dd_value(a) * dd_value(b), 0.0};
    return r;
}

double cm_powi(double x, int64_t n) {
    if (n == 0) return 1.0;
    uint64_t e = n < 0 ? 0 - (uint64_t)n : (uint64_t)n;
    int exact = 1;
    dd r = {1.0, 0.0}, b = {x, 0.0};
    for (;;) {
        if (e & 1) r = pow_mul(r, b, &exact);
        e >>= 1;
        if (!e) break;
        b = pow_mul(b, b, &exact);
    }
    if (!exact) return n > 0 ? dd_value(r) : 1.0 / dd_value(r);
    if (n > 0) return r.hi + r.lo;
    /* q = 1 / (hi + lo): q0 = 1 / hi, then q0 + q0 (1 - q0 (hi + lo)) */
    double q0 = 1.0 / r.hi, p, pe;
    if (!dd_fits(q0, r.hi)) return 1.0 / (r.hi + r.lo);
    two_prod(q0, r.hi, &p, &pe);
    double res = (1.0 - p) - pe - q0 * r.lo;
    return q0 + q0 * res;
}
