/* test_action_dist.c: categorical (masked or not), factored categorical and diagonal-Gaussian
 * distributions: values against the definitions, finite-difference checks of every gradient,
 * sampling frequencies and moments, determinism of sampling per stream, and planted mistakes
 * (a masked action sampled, an entropy over every action) that the checks reject. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "calf/rng.h"
#include "numerics/action_dist.h"
#include "test_util.h"

#define LOG_2PI 1.8378770664093454835606594728112

/* c_logp * logp(a) + c_ent * entropy of a categorical, in double from the definition */
static double cat_objective(const double *z, int n, int a, double c_logp, double c_ent) {
    double m = z[0];
    for (int j = 1; j < n; j++) m = z[j] > m ? z[j] : m;
    double s = 0.0;
    for (int j = 0; j < n; j++) s += exp(z[j] - m);
    double lse = m + log(s), h = 0.0;
    for (int j = 0; j < n; j++) h -= exp(z[j] - lse) * (z[j] - lse);
    return c_logp * (z[a] - lse) + c_ent * h;
}

static void test_categorical_values(void) {
    const float z[4] = {1.0f, -0.5f, 2.0f, 0.25f};
    double m = 2.0, s = 0.0;
    for (int j = 0; j < 4; j++) s += exp(z[j] - m);
    double lse = m + log(s);
    float logp[4];
    dist_categorical_log_softmax(z, 4, logp);
    double h = 0.0;
    for (int j = 0; j < 4; j++) {
        CHECK_NEAR(logp[j], z[j] - lse, 1e-6);
        CHECK_NEAR(dist_categorical_log_prob(z, 4, j), z[j] - lse, 1e-6);
        h -= exp(z[j] - lse) * (z[j] - lse);
    }
    CHECK_NEAR(dist_categorical_entropy(z, 4), h, 1e-6);
    float lp, ent;
    dist_categorical_logp_entropy(z, 4, 3, &lp, &ent);
    CHECK_NEAR(lp, z[3] - lse, 1e-6);
    CHECK_NEAR(ent, h, 1e-6);
    CHECK_INT_EQ(dist_categorical_mode(z, 4), 2);
    const float tie[3] = {1.0f, 3.0f, 3.0f};
    CHECK_INT_EQ(dist_categorical_mode(tie, 3), 1);
    /* uniform logits: entropy log n */
    const float u[5] = {0.3f, 0.3f, 0.3f, 0.3f, 0.3f};
    CHECK_NEAR(dist_categorical_entropy(u, 5), log(5.0), 1e-6);
    /* stability: huge logits neither overflow nor lose the small probabilities */
    const float big[3] = {1000.0f, 999.0f, -1000.0f};
    CHECK_NEAR(dist_categorical_log_prob(big, 3, 1), -1.0 - log(1.0 + exp(-1.0)), 1e-5);
    CHECK(isfinite(dist_categorical_entropy(big, 3)));
    /* a -inf logit (masked action) has probability 0, finite entropy and gradient */
    const float masked[3] = {0.0f, -INFINITY, 0.0f};
    CHECK_NEAR(dist_categorical_entropy(masked, 3), log(2.0), 1e-6);
    float d[3];
    dist_categorical_grad(masked, 3, 0, 1.0f, 0.5f, d);
    CHECK(isfinite(d[0]) && d[1] == 0.0f && isfinite(d[2]));
    /* one action: log-prob 0, entropy 0 */
    const float one[1] = {7.0f};
    CHECK_NEAR(dist_categorical_log_prob(one, 1, 0), 0.0, 0.0);
    CHECK_NEAR(dist_categorical_entropy(one, 1), 0.0, 0.0);
}

static void test_categorical_grad_fd(void) {
    calf_rng rng;
    calf_rng_seed(&rng, 9, 0, CALF_RNG_ACTION);
    const float coefs[][2] = {{1.0f, 0.0f}, {0.0f, 1.0f}, {-0.7f, 0.3f}, {2.0f, -1.5f}};
    for (int n = 1; n <= 6; n++) {
        for (size_t c = 0; c < sizeof coefs / sizeof coefs[0]; c++) {
            float z[6];
            double zd[6];
            for (int j = 0; j < n; j++) z[j] = (float)calf_rng_uniform_range(&rng, -3, 3);
            int a = (int)calf_rng_below(&rng, (uint32_t)n);
            float g[6];
            dist_categorical_grad(z, n, a, coefs[c][0], coefs[c][1], g);
            double sum = 0.0;
            for (int j = 0; j < n; j++) {
                for (int k = 0; k < n; k++) zd[k] = z[k];
                const double h = 1e-6;
                zd[j] = z[j] + h;
                double fp = cat_objective(zd, n, a, coefs[c][0], coefs[c][1]);
                zd[j] = z[j] - h;
                double fm = cat_objective(zd, n, a, coefs[c][0], coefs[c][1]);
                double fd = (fp - fm) / (2 * h);
                CHECK_NEAR(g[j], fd, 1e-6 + 1e-5 * fabs(fd));
                sum += g[j];
            }
            /* softmax is shift-invariant, so the gradient sums to zero */
            CHECK_NEAR(sum, 0.0, 1e-6);
        }
    }
}

/* dist_categorical_eval + _grad_cached give the bits of logp_entropy + grad, for n up to
 * the cache size and beyond it (then nothing is cached), and a cache of another n is
 * not used. */
static void test_categorical_cache(void) {
    calf_rng rng;
    calf_rng_seed(&rng, 11, 0, CALF_RNG_ACTION);
    const int ns[] = {1, 2, 3, 7, DIST_CATEGORICAL_CACHE_MAX, DIST_CATEGORICAL_CACHE_MAX + 1, 40};
    int same = 1;
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
        int n = ns[t];
        for (int rep = 0; rep < 50; rep++) {
            float z[40], g0[40], g1[40], g2[40];
            for (int j = 0; j < n; j++) z[j] = (float)calf_rng_uniform_range(&rng, -30, 30);
            if (rep % 5 == 0) z[0] = -1e30f; /* a probability that underflows to 0 */
            int a = (int)calf_rng_below(&rng, (uint32_t)n);
            float lp0, e0, lp1, e1;
            dist_categorical_logp_entropy(z, n, a, &lp0, &e0);
            dist_categorical_cache cache;
            dist_categorical_eval(z, n, a, &lp1, &e1, &cache);
            same &= memcmp(&lp0, &lp1, 4) == 0 && memcmp(&e0, &e1, 4) == 0;
            CHECK_INT_EQ(cache.n, n <= DIST_CATEGORICAL_CACHE_MAX ? n : 0);
            dist_categorical_grad(z, n, a, 0.8f, -0.01f, g0);
            dist_categorical_grad_cached(z, n, a, 0.8f, -0.01f, &cache, g1);
            same &= memcmp(g0, g1, (size_t)n * 4) == 0;
            cache.n = n + 1; /* stale: must be ignored */
            cache.lse = 12345.0;
            dist_categorical_grad_cached(z, n, a, 0.8f, -0.01f, &cache, g2);
            same &= memcmp(g0, g2, (size_t)n * 4) == 0;
        }
    }
    CHECK(same);
}

static void test_categorical_sample(void) {
    const float z[4] = {0.5f, -1.0f, 1.5f, 0.0f};
    double m = 1.5, s = 0.0, p[4];
    for (int j = 0; j < 4; j++) s += exp(z[j] - m);
    for (int j = 0; j < 4; j++) p[j] = exp(z[j] - m) / s;
    calf_rng rng;
    calf_rng_seed(&rng, 1, 3, CALF_RNG_ACTION);
    enum { N = 200000 };
    int count[4] = {0}, bad = 0;
    for (int i = 0; i < N; i++) {
        int a = dist_categorical_sample(z, 4, &rng);
        if (a >= 0 && a < 4) count[a]++;
        else bad++;
    }
    CHECK_INT_EQ(bad, 0);
    for (int j = 0; j < 4; j++) {
        double sd = sqrt(p[j] * (1 - p[j]) / N);
        CHECK_NEAR((double)count[j] / N, p[j], 5 * sd);
    }
    /* same stream, same actions; one uniform per draw */
    calf_rng r1, r2;
    calf_rng_seed(&r1, 5, 1, CALF_RNG_ACTION);
    calf_rng_seed(&r2, 5, 1, CALF_RNG_ACTION);
    int same = 1;
    for (int i = 0; i < 1000; i++)
        if (dist_categorical_sample(z, 4, &r1) != dist_categorical_sample(z, 4, &r2)) same = 0;
    CHECK(same);
    calf_rng_seed(&r1, 5, 1, CALF_RNG_ACTION);
    calf_rng_seed(&r2, 5, 1, CALF_RNG_ACTION);
    (void)dist_categorical_sample(z, 4, &r1);
    (void)calf_rng_next(&r2);
    CHECK(calf_rng_next(&r1) == calf_rng_next(&r2));
    /* a masked action is never drawn */
    const float masked[3] = {0.0f, -INFINITY, 0.0f};
    int hit = 0;
    for (int i = 0; i < 10000; i++) hit += dist_categorical_sample(masked, 3, &r1) == 1;
    CHECK_INT_EQ(hit, 0);
}


/* ---- masked categorical ---- */

/* c_logp * logp(a) + c_ent * entropy over the valid actions only, in double from the
 * definition (invalid logits are never read) */
static double masked_objective(const double *z, const uint8_t *mask, int n, int a,
                               double c_logp, double c_ent) {
    double m = -INFINITY;
    for (int j = 0; j < n; j++)
        if (mask[j] && z[j] > m) m = z[j];
    double s = 0.0;
    for (int j = 0; j < n; j++)
        if (mask[j]) s += exp(z[j] - m);
    double lse = m + log(s), h = 0.0;
    for (int j = 0; j < n; j++)
        if (mask[j]) h -= exp(z[j] - lse) * (z[j] - lse);
    return c_logp * (z[a] - lse) + c_ent * h;
}

/* What the checks below test: an entropy and a sampler of a masked row. */
typedef float (*entropy_fn)(const float *z, const uint8_t *mask, int n);
typedef int (*sample_fn)(const float *z, const uint8_t *mask, int n, calf_rng *rng);

static float real_entropy(const float *z, const uint8_t *mask, int n) {
    float h;
    dist_categorical_eval_masked(z, mask, n, 0, NULL, &h, NULL);
    return h;
}
static float mutant_entropy_all(const float *z, const uint8_t *mask, int n) {
    (void)mask; /* planted mistake: the entropy over every action */
    return dist_categorical_entropy(z, n);
}
static int real_sample(const float *z, const uint8_t *mask, int n, calf_rng *rng) {
    return dist_categorical_sample_masked(z, mask, n, rng);
}
static int mutant_sample_unmasked(const float *z, const uint8_t *mask, int n, calf_rng *rng) {
    (void)mask; /* planted mistake: the mask ignored when sampling */
    return dist_categorical_sample(z, n, rng);
}

/* Whether fn's entropy is the definition's over the valid actions, on rows whose masked
 * logits are the largest (so leaving them in shows). */
static bool entropy_checks(entropy_fn fn) {
    calf_rng rng;
    calf_rng_seed(&rng, 21, 0, CALF_RNG_ACTION);
    bool ok = true;
    for (int rep = 0; rep < 200; rep++) {
        int n = 2 + (int)calf_rng_below(&rng, 9);
        float z[10];
        double zd[10];
        uint8_t mask[10];
        int valid = 0;
        for (int j = 0; j < n; j++) {
            z[j] = (float)calf_rng_uniform_range(&rng, -3, 3);
            zd[j] = z[j];
            mask[j] = calf_rng_below(&rng, 3) != 0;
            valid += mask[j];
        }
        if (valid == 0) mask[0] = 1;
        for (int j = 0; j < n; j++)
            if (!mask[j]) z[j] = 5.0f; /* an invalid action that would dominate */
        double want = masked_objective(zd, mask, n, n - 1, 0.0, 1.0);
        float got = fn(z, mask, n);
        ok &= isfinite(got) && fabs(got - want) <= 1e-6 + 1e-6 * fabs(want);
    }
    return ok;
}

/* Whether fn never draws an invalid action and draws the valid ones with the
 * renormalised probabilities. */
static bool sampler_checks(sample_fn fn) {
    const float z[5] = {0.5f, 3.0f, 1.5f, 0.0f, 2.5f};
    const uint8_t mask[5] = {1, 0, 1, 1, 0};
    double m = 1.5, s = 0.0, p[5] = {0};
    for (int j = 0; j < 5; j++)
        if (mask[j]) s += exp(z[j] - m);
    for (int j = 0; j < 5; j++)
        if (mask[j]) p[j] = exp(z[j] - m) / s;
    calf_rng rng;
    calf_rng_seed(&rng, 1, 4, CALF_RNG_ACTION);
    enum { N = 100000 };
    int count[5] = {0};
    bool ok = true;
    for (int i = 0; i < N; i++) {
        int a = fn(z, mask, 5, &rng);
        if (a < 0 || a >= 5 || !mask[a]) ok = false;
        else count[a]++;
    }
    for (int j = 0; j < 5; j++)
        ok &= fabs((double)count[j] / N - p[j]) <= 5 * sqrt(p[j] * (1 - p[j]) / N);
    return ok;
}

static void test_masked_values(void) {
    CHECK(entropy_checks(real_entropy));
    CHECK(!entropy_checks(mutant_entropy_all)); /* the planted mistake is caught */
    CHECK(sampler_checks(real_sample));
    CHECK(!sampler_checks(mutant_sample_unmasked));
    /* an invalid logit never counts, whatever it holds: the max, +inf, NaN */
    const float z[4] = {1.0f, 1e30f, 2.0f, 0.25f};
    const float zi[4] = {1.0f, INFINITY, 2.0f, 0.25f};
    const float zn[4] = {1.0f, NAN, 2.0f, 0.25f};
    const uint8_t mask[4] = {1, 0, 1, 1};
    const double zd[4] = {1.0, 0, 2.0, 0.25};
    const float *rows[3] = {z, zi, zn};
    for (int r = 0; r < 3; r++) {
        float lp, h;
        dist_categorical_cache cache;
        dist_categorical_eval_masked(rows[r], mask, 4, 2, &lp, &h, &cache);
        CHECK_NEAR(lp, masked_objective(zd, mask, 4, 2, 1, 0), 1e-6);
        CHECK_NEAR(h, masked_objective(zd, mask, 4, 2, 0, 1), 1e-6);
        CHECK(cache.n == 4 && cache.p[1] == 0.0); /* probability exactly 0 */
        CHECK_INT_EQ(dist_categorical_mode_masked(rows[r], mask, 4), 2);
        float g[4];
        dist_categorical_grad_masked(rows[r], mask, 4, 0, 0.7f, -0.2f, &cache, g);
        uint32_t bits;
        memcpy(&bits, &g[1], 4);
        CHECK(bits == 0u); /* +0, not -0, not NaN */
        CHECK(isfinite(g[0]) && isfinite(g[2]) && isfinite(g[3]));
    }
    /* the mode's ties: the lowest valid index */
    const float tie[4] = {3.0f, 3.0f, 1.0f, 3.0f};
    const uint8_t m0[4] = {0, 1, 1, 1};
    CHECK_INT_EQ(dist_categorical_mode_masked(tie, m0, 4), 1);
    /* all but one invalid: logp 0, entropy 0, gradient 0, no NaN, that action always */
    const float wild[4] = {NAN, -INFINITY, 1e30f, 7.0f};
    const uint8_t one[4] = {0, 0, 0, 1};
    float lp, h, g[4];
    dist_categorical_eval_masked(wild, one, 4, 3, &lp, &h, NULL);
    CHECK(lp == 0.0f && h == 0.0f);
    for (size_t c = 0; c < 2; c++) {
        dist_categorical_cache cache;
        dist_categorical_eval_masked(wild, one, 4, 3, NULL, NULL, c ? &cache : NULL);
        dist_categorical_grad_masked(wild, one, 4, 3, 1.3f, 0.4f, c ? &cache : NULL, g);
        for (int j = 0; j < 4; j++) CHECK(g[j] == 0.0f);
    }
    calf_rng rng;
    calf_rng_seed(&rng, 3, 0, CALF_RNG_ACTION);
    int other = 0;
    for (int i = 0; i < 1000; i++) other += dist_categorical_sample_masked(wild, one, 4, &rng) != 3;
    CHECK_INT_EQ(other, 0);
    CHECK_INT_EQ(dist_categorical_mode_masked(wild, one, 4), 3);
}

static void test_masked_grad_fd(void) {
    calf_rng rng;
    calf_rng_seed(&rng, 19, 0, CALF_RNG_ACTION);
    const float coefs[][2] = {{1.0f, 0.0f}, {0.0f, 1.0f}, {-0.7f, 0.3f}, {2.0f, -1.5f}};
    for (int n = 1; n <= 8; n++)
        for (size_t c = 0; c < sizeof coefs / sizeof coefs[0]; c++)
            for (int rep = 0; rep < 4; rep++) {
                float z[8], g[8];
                double zd[8];
                uint8_t mask[8];
                for (int j = 0; j < n; j++) {
                    z[j] = (float)calf_rng_uniform_range(&rng, -3, 3);
                    mask[j] = calf_rng_below(&rng, 2) != 0;
                }
                int a = (int)calf_rng_below(&rng, (uint32_t)n);
                mask[a] = 1;
                for (int j = 0; j < n; j++) zd[j] = z[j];
                dist_categorical_grad_masked(z, mask, n, a, coefs[c][0], coefs[c][1], NULL, g);
                for (int j = 0; j < n; j++) {
                    if (!mask[j]) {
                        CHECK(g[j] == 0.0f);
                        continue;
                    }
                    const double h = 1e-6;
                    zd[j] = z[j] + h;
                    double fp = masked_objective(zd, mask, n, a, coefs[c][0], coefs[c][1]);
                    zd[j] = z[j] - h;
                    double fm = masked_objective(zd, mask, n, a, coefs[c][0], coefs[c][1]);
                    zd[j] = z[j];
                    double fd = (fp - fm) / (2 * h);
                    CHECK_NEAR(g[j], fd, 1e-6 + 1e-5 * fabs(fd));
                }
            }
}

/* A mask of all ones, and NULL, give the unmasked functions' bits. */
static void test_mask_ones_bits(void) {
    calf_rng rng;
    calf_rng_seed(&rng, 23, 0, CALF_RNG_ACTION);
    uint8_t ones[40];
    memset(ones, 1, sizeof ones);
    bool same = true;
    for (int rep = 0; rep < 300; rep++) {
        int n = 1 + (int)calf_rng_below(&rng, 40);
        float z[40], g0[40], g1[40];
        for (int j = 0; j < n; j++) z[j] = (float)calf_rng_uniform_range(&rng, -30, 30);
        int a = (int)calf_rng_below(&rng, (uint32_t)n);
        float lp0, h0, lp1, h1;
        dist_categorical_cache c0, c1;
        dist_categorical_eval(z, n, a, &lp0, &h0, &c0);
        dist_categorical_eval_masked(z, ones, n, a, &lp1, &h1, &c1);
        same &= memcmp(&lp0, &lp1, 4) == 0 && memcmp(&h0, &h1, 4) == 0;
        dist_categorical_grad_cached(z, n, a, 0.8f, -0.01f, &c0, g0);
        dist_categorical_grad_masked(z, ones, n, a, 0.8f, -0.01f, &c1, g1);
        same &= memcmp(g0, g1, (size_t)n * 4) == 0;
        same &= dist_categorical_mode(z, n) == dist_categorical_mode_masked(z, ones, n);
        calf_rng r0 = rng, r1 = rng;
        same &= dist_categorical_sample(z, n, &r0) == dist_categorical_sample_masked(z, ones, n, &r1);
        same &= memcmp(&r0, &r1, sizeof r0) == 0;
        r0 = rng, r1 = rng;
        same &= (int)calf_rng_below(&r0, (uint32_t)n) == dist_masked_uniform(NULL, n, &r1);
    }
    CHECK(same);
}

static void test_masked_uniform(void) {
    const uint8_t mask[6] = {0, 1, 1, 0, 0, 1};
    calf_rng rng;
    calf_rng_seed(&rng, 8, 2, CALF_RNG_ACTION);
    enum { N = 60000 };
    int count[6] = {0};
    for (int i = 0; i < N; i++) {
        calf_rng before = rng;
        int a = dist_masked_uniform(mask, 6, &rng);
        count[a]++;
        calf_rng_next(&before); /* one draw */
        if (i == 0) CHECK(memcmp(&before, &rng, sizeof rng) == 0);
    }
    CHECK(count[0] == 0 && count[3] == 0 && count[4] == 0);
    double sd = sqrt((1.0 / 3) * (2.0 / 3) / N);
    for (int j = 1; j < 6; j++)
        if (mask[j]) CHECK_NEAR((double)count[j] / N, 1.0 / 3, 5 * sd);
}

/* ---- factored categorical ---- */

static double multi_objective(const double *z, const uint8_t *mask, const int *nvec, int D,
                              const int *a, double c_logp, double c_ent) {
    double f = 0.0;
    uint8_t ones[16];
    memset(ones, 1, sizeof ones);
    for (int d = 0, off = 0; d < D; off += nvec[d], d++)
        f += masked_objective(z + off, mask ? mask + off : ones, nvec[d], a[d], c_logp, c_ent);
    return f;
}

static void test_multi(void) {
    calf_rng rng;
    calf_rng_seed(&rng, 29, 0, CALF_RNG_ACTION);
    const int nvec[3] = {3, 1, 5};
    enum { D = 3, NZ = 9 };
    CHECK_INT_EQ(dist_multi_size(nvec, D), NZ);
    const float coefs[][2] = {{1.0f, 0.0f}, {0.0f, 1.0f}, {-0.7f, 0.3f}};
    for (int rep = 0; rep < 40; rep++) {
        float z[NZ], g[NZ];
        double zd[NZ];
        uint8_t mask[NZ];
        int a[D];
        bool masked = rep % 2;
        for (int j = 0; j < NZ; j++) {
            z[j] = (float)calf_rng_uniform_range(&rng, -3, 3);
            zd[j] = z[j];
            mask[j] = calf_rng_below(&rng, 2) != 0;
        }
        for (int d = 0, off = 0; d < D; off += nvec[d], d++) {
            a[d] = (int)calf_rng_below(&rng, (uint32_t)nvec[d]);
            mask[off + a[d]] = 1;
        }
        const uint8_t *mk = masked ? mask : NULL;
        float lp, h;
        dist_multi_eval(z, mk, nvec, D, a, &lp, &h);
        CHECK_NEAR(lp, multi_objective(zd, mk, nvec, D, a, 1, 0), 1e-6);
        CHECK_NEAR(h, multi_objective(zd, mk, nvec, D, a, 0, 1), 1e-6);
        for (size_t c = 0; c < sizeof coefs / sizeof coefs[0]; c++) {
            dist_multi_grad(z, mk, nvec, D, a, coefs[c][0], coefs[c][1], g);
            for (int j = 0; j < NZ; j++) {
                if (mk && !mk[j]) {
                    CHECK(g[j] == 0.0f);
                    continue;
                }
                const double hh = 1e-6;
                zd[j] = z[j] + hh;
                double fp = multi_objective(zd, mk, nvec, D, a, coefs[c][0], coefs[c][1]);
                zd[j] = z[j] - hh;
                double fm = multi_objective(zd, mk, nvec, D, a, coefs[c][0], coefs[c][1]);
                zd[j] = z[j];
                double fd = (fp - fm) / (2 * hh);
                CHECK_NEAR(g[j], fd, 1e-6 + 1e-5 * fabs(fd));
            }
        }
        /* sampling: sub-action d is the categorical's draw on its slice, in order d = 0.. */
        calf_rng r0 = rng, r1 = rng;
        int s[D], mode[D];
        dist_multi_sample(z, mk, nvec, D, &r0, s);
        dist_multi_mode(z, mk, nvec, D, mode);
        for (int d = 0, off = 0; d < D; off += nvec[d], d++) {
            CHECK_INT_EQ(s[d], dist_categorical_sample_masked(z + off, mk ? mk + off : NULL,
                                                              nvec[d], &r1));
            CHECK_INT_EQ(mode[d], dist_categorical_mode_masked(z + off, mk ? mk + off : NULL,
                                                               nvec[d]));
            CHECK(!mk || mk[off + s[d]]);
        }
        CHECK(memcmp(&r0, &r1, sizeof r0) == 0);
    }
    /* one sub-action: the categorical's bits */
    bool same = true;
    for (int rep = 0; rep < 100; rep++) {
        int n = 1 + (int)calf_rng_below(&rng, 12);
        float z[12], g0[12], g1[12];
        for (int j = 0; j < n; j++) z[j] = (float)calf_rng_uniform_range(&rng, -20, 20);
        int a = (int)calf_rng_below(&rng, (uint32_t)n);
        float lp0, h0, lp1, h1;
        dist_categorical_logp_entropy(z, n, a, &lp0, &h0);
        dist_multi_eval(z, NULL, &n, 1, &a, &lp1, &h1);
        same &= memcmp(&lp0, &lp1, 4) == 0 && memcmp(&h0, &h1, 4) == 0;
        dist_categorical_grad(z, n, a, 0.5f, 0.01f, g0);
        dist_multi_grad(z, NULL, &n, 1, &a, 0.5f, 0.01f, g1);
        same &= memcmp(g0, g1, (size_t)n * 4) == 0;
    }
    CHECK(same);
}

/* c_logp * logp(a) + c_ent * entropy of a diagonal Gaussian, in double */
static double gauss_objective(const double *mu, const double *ls, const float *a, int d,
                              double c_logp, double c_ent) {
    double lp = 0.0, h = 0.0;
    for (int i = 0; i < d; i++) {
        double z = (a[i] - mu[i]) / exp(ls[i]);
        lp += -0.5 * z * z - ls[i] - 0.5 * LOG_2PI;
        h += 0.5 + 0.5 * LOG_2PI + ls[i];
    }
    return c_logp * lp + c_ent * h;
}

static void test_gaussian(void) {
    const float mu[3] = {0.5f, -1.0f, 2.0f}, ls[3] = {-0.5f, 0.0f, 0.7f};
    const float a[3] = {0.2f, -0.3f, 3.5f};
    double mud[3], lsd[3];
    for (int i = 0; i < 3; i++) mud[i] = mu[i], lsd[i] = ls[i];
    CHECK_NEAR(dist_gaussian_log_prob(mu, ls, 3, a), gauss_objective(mud, lsd, a, 3, 1, 0), 1e-6);
    CHECK_NEAR(dist_gaussian_entropy(ls, 3), gauss_objective(mud, lsd, a, 3, 0, 1), 1e-6);
    /* the standard normal's density at 0 and entropy */
    const float zero[1] = {0.0f};
    CHECK_NEAR(dist_gaussian_log_prob(zero, zero, 1, zero), -0.5 * LOG_2PI, 1e-7);
    CHECK_NEAR(dist_gaussian_entropy(zero, 1), 0.5 * (1.0 + LOG_2PI), 1e-7);
    float mode[3];
    dist_gaussian_mode(mu, 3, mode);
    CHECK(memcmp(mode, mu, sizeof mode) == 0);

    /* gradients: dmean written, dlog_std accumulated */
    const float coefs[][2] = {{1.0f, 0.0f}, {0.0f, 1.0f}, {-0.8f, 0.01f}};
    for (size_t c = 0; c < sizeof coefs / sizeof coefs[0]; c++) {
        float dmu[3] = {99, 99, 99}, dls[3] = {0.25f, 0.25f, 0.25f};
        dist_gaussian_grad(mu, ls, 3, a, coefs[c][0], coefs[c][1], dmu, dls);
        for (int i = 0; i < 3; i++) {
            const double h = 1e-6;
            double save = mud[i];
            mud[i] = save + h;
            double fp = gauss_objective(mud, lsd, a, 3, coefs[c][0], coefs[c][1]);
            mud[i] = save - h;
            double fm = gauss_objective(mud, lsd, a, 3, coefs[c][0], coefs[c][1]);
            mud[i] = save;
            double fd = (fp - fm) / (2 * h);
            CHECK_NEAR(dmu[i], fd, 1e-6 + 1e-5 * fabs(fd));
            save = lsd[i];
            lsd[i] = save + h;
            fp = gauss_objective(mud, lsd, a, 3, coefs[c][0], coefs[c][1]);
            lsd[i] = save - h;
            fm = gauss_objective(mud, lsd, a, 3, coefs[c][0], coefs[c][1]);
            lsd[i] = save;
            fd = (fp - fm) / (2 * h);
            CHECK_NEAR(dls[i] - 0.25f, fd, 1e-6 + 1e-5 * fabs(fd));
        }
    }

    /* sampling: moments, and the same stream gives the same actions */
    calf_rng rng;
    calf_rng_seed(&rng, 2, 7, CALF_RNG_ACTION);
    enum { N = 100000 };
    double s1[3] = {0}, s2[3] = {0};
    for (int k = 0; k < N; k++) {
        float x[3];
        dist_gaussian_sample(mu, ls, 3, &rng, x);
        for (int i = 0; i < 3; i++) s1[i] += x[i], s2[i] += (double)x[i] * x[i];
    }
    for (int i = 0; i < 3; i++) {
        double mean = s1[i] / N, var = s2[i] / N - mean * mean, sd = exp(ls[i]);
        CHECK_NEAR(mean, mu[i], 5 * sd / sqrt(N));
        CHECK_NEAR(sqrt(var), sd, 0.02 * sd);
    }
    calf_rng r1, r2;
    calf_rng_seed(&r1, 4, 0, CALF_RNG_ACTION);
    calf_rng_seed(&r2, 4, 0, CALF_RNG_ACTION);
    float x1[3], x2[3];
    dist_gaussian_sample(mu, ls, 3, &r1, x1);
    dist_gaussian_sample(mu, ls, 3, &r2, x2);
    CHECK(memcmp(x1, x2, sizeof x1) == 0);
    /* component i uses the i-th normal of the stream */
    calf_rng_seed(&r2, 4, 0, CALF_RNG_ACTION);
    double z0 = calf_rng_normal(&r2);
    CHECK(x1[0] == (float)(mu[0] + exp(ls[0]) * z0));
}

int main(void) {
    test_categorical_values();
    test_categorical_grad_fd();
    test_categorical_cache();
    test_categorical_sample();
    test_masked_values();
    test_masked_grad_fd();
    test_mask_ones_bits();
    test_masked_uniform();
    test_multi();
    test_gaussian();
    return test_report("test_action_dist");
}
