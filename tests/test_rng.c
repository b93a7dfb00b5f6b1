/* test_rng.c: the per-env random streams. Same (seed, index, purpose) must give the
 * same stream, different triples different ones, and the derived distributions
 * (uniform, below, normal) must have the ranges and moments they promise. */
#include "calf/rng.h"

#include <stdint.h>

#include "test_util.h"

static void test_determinism(void) {
    calf_rng a, b;
    calf_rng_seed(&a, 42, 7, CALF_RNG_DYNAMICS);
    calf_rng_seed(&b, 42, 7, CALF_RNG_DYNAMICS);
    int same = 1;
    for (int i = 0; i < 1000; i++) same &= calf_rng_next(&a) == calf_rng_next(&b);
    CHECK(same);
    /* A copied state continues identically: what checkpoints rely on. */
    calf_rng c = a;
    same = 1;
    for (int i = 0; i < 100; i++) same &= calf_rng_next(&a) == calf_rng_next(&c);
    CHECK(same);
}

static void test_distinct_streams(void) {
    /* Neighbouring triples, including swapped roles of seed and index. */
    const uint64_t triples[][3] = {
        {0, 0, 1}, {0, 0, 2}, {0, 1, 1}, {1, 0, 1}, {1, 1, 1}, {0, 1, 2},
        {1, 0, 2}, {2, 1, 1}, {1, 2, 1}, {0, 0, 3}, {0, 0, 5}, {1234567, 63, 1},
    };
    const int n = (int)(sizeof triples / sizeof triples[0]);
    uint64_t first[12][4];
    for (int t = 0; t < n; t++) {
        calf_rng r;
        calf_rng_seed(&r, triples[t][0], triples[t][1], triples[t][2]);
        for (int k = 0; k < 4; k++) first[t][k] = calf_rng_next(&r);
    }
    int distinct = 1;
    for (int t = 0; t < n; t++)
        for (int u = t + 1; u < n; u++)
            for (int k = 0; k < 4; k++)
                for (int l = 0; l < 4; l++) distinct &= first[t][k] != first[u][l];
    CHECK(distinct);

    /* Streams of consecutive env indices must not be correlated: the fraction of
     * equal bits between matched outputs should be near 1/2. */
    calf_rng r0, r1;
    calf_rng_seed(&r0, 5, 10, CALF_RNG_ACTION);
    calf_rng_seed(&r1, 5, 11, CALF_RNG_ACTION);
    long equal_bits = 0;
    const int draws = 10000;
    for (int i = 0; i < draws; i++)
        equal_bits += 64 - __builtin_popcountll(calf_rng_next(&r0) ^ calf_rng_next(&r1));
    CHECK_NEAR((double)equal_bits / (64.0 * draws), 0.5, 0.01);
}

static void test_uniform(void) {
    calf_rng r;
    calf_rng_seed(&r, 1, 2, CALF_RNG_DYNAMICS);
    const int n = 100000;
    double sum_d = 0, sum_f = 0, sum_sq = 0;
    int in_range = 1;
    double lo_seen = 1, hi_seen = 0;
    for (int i = 0; i < n; i++) {
        double d = calf_rng_uniform_double(&r);
        float f = calf_rng_uniform_float(&r);
        in_range &= d >= 0.0 && d < 1.0 && f >= 0.0f && f < 1.0f;
        sum_d += d;
        sum_f += f;
        sum_sq += d * d;
        if (d < lo_seen) lo_seen = d;
        if (d > hi_seen) hi_seen = d;
    }
    CHECK(in_range);
    /* Mean 1/2 with standard error sqrt(1/12/n) ~ 0.0009: 5 sigma bounds. */
    CHECK_NEAR(sum_d / n, 0.5, 0.0046);
    CHECK_NEAR(sum_f / n, 0.5, 0.0046);
    CHECK_NEAR(sum_sq / n - (sum_d / n) * (sum_d / n), 1.0 / 12.0, 0.002);
    CHECK(lo_seen < 1e-4);
    CHECK(hi_seen > 1 - 1e-4);

    int range_ok = 1;
    for (int i = 0; i < 10000; i++) {
        double x = calf_rng_uniform_range(&r, -0.6, -0.4);
        range_ok &= x >= -0.6 && x < -0.4;
    }
    CHECK(range_ok);
    CHECK_NEAR(calf_rng_uniform_range(&r, 3.0, 3.0), 3.0, 0.0);
}

static void test_below(void) {
    calf_rng r;
    calf_rng_seed(&r, 9, 3, CALF_RNG_ACTION);
    CHECK_INT_EQ(calf_rng_below(&r, 1), 0);

    enum { K = 10 };
    const int n = 100000;
    long counts[K] = {0};
    int in_range = 1;
    for (int i = 0; i < n; i++) {
        uint32_t v = calf_rng_below(&r, K);
        in_range &= v < K;
        if (v < K) counts[v]++;
    }
    CHECK(in_range);
    double chi2 = 0;
    for (int k = 0; k < K; k++) {
        double e = (double)n / K;
        chi2 += (counts[k] - e) * (counts[k] - e) / e;
    }
    /* 9 degrees of freedom: P(chi2 > 33.7) ~ 1e-4, a loose bound that still
     * catches a biased or stuck generator. */
    CHECK(chi2 < 33.7);

    /* A range that is not a power of two and near 2^32 exercises the rejection. */
    uint32_t big = 3000000000u;
    int big_ok = 1, upper_half = 0;
    for (int i = 0; i < 10000; i++) {
        uint32_t v = calf_rng_below(&r, big);
        big_ok &= v < big;
        upper_half += v >= big / 2;
    }
    CHECK(big_ok);
    CHECK_NEAR(upper_half / 10000.0, 0.5, 0.03);

    /* Two actions (CartPole): both occur about equally. */
    int ones = 0;
    for (int i = 0; i < 10000; i++) ones += (int)calf_rng_below(&r, 2);
    CHECK_NEAR(ones / 10000.0, 0.5, 0.03);
}

static void test_normal(void) {
    calf_rng r;
    calf_rng_seed(&r, 3, 0, CALF_RNG_ACTION);
    const int n = 100000;
    double sum = 0, sum_sq = 0, sum4 = 0;
    int finite = 1, beyond3 = 0;
    for (int i = 0; i < n; i++) {
        double z = calf_rng_normal(&r);
        finite &= isfinite(z);
        sum += z;
        sum_sq += z * z;
        sum4 += z * z * z * z;
        beyond3 += fabs(z) > 3.0;
    }
    CHECK(finite);
    double mean = sum / n, var = sum_sq / n - mean * mean;
    /* Standard errors: mean 1/sqrt(n) ~ 0.0032, variance sqrt(2/n) ~ 0.0045. */
    CHECK_NEAR(mean, 0.0, 0.016);
    CHECK_NEAR(var, 1.0, 0.023);
    CHECK_NEAR(sum4 / n, 3.0, 0.1);               /* kurtosis of a Gaussian */
    CHECK_NEAR(beyond3 / (double)n, 0.0027, 0.001); /* tails present, not too heavy */

    /* Determinism of the derived draw too. */
    calf_rng a, b;
    calf_rng_seed(&a, 3, 1, CALF_RNG_ACTION);
    calf_rng_seed(&b, 3, 1, CALF_RNG_ACTION);
    int same = 1;
    for (int i = 0; i < 100; i++) same &= calf_rng_normal(&a) == calf_rng_normal(&b);
    CHECK(same);
}

int main(void) {
    test_determinism();
    test_distinct_streams();
    test_uniform();
    test_below();
    test_normal();
    return test_report("test_rng");
}
