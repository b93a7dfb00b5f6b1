/* test_onpolicy_math.c: the on-policy core's GAE (onpolicy_math.h) against
 * hand-computed values (termination, truncation, the rollout's end) and its limits
 * (lambda = 1: the discounted return; lambda = 0: one-step TD errors); and advantages
 * normalized per minibatch from each env's chunk sums against each minibatch's samples
 * gathered and normalized here. */
#include <stdbool.h>
#include <string.h>

#include "algorithms/onpolicy_math.h"
#include "calf/rng.h"
#include "test_util.h"

static void test_gae_hand(void) {
    /* T = 5: step 1 terminates, step 3 is truncated, step 4 is the rollout's end */
    const float r[5] = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f};
    const float v[5] = {0.5f, 1.0f, 2.0f, 0.25f, 1.5f};
    const float nv[5] = {1.0f, 99.0f, 0.25f, 4.0f, 2.0f}; /* nv[1] ignored: terminated */
    const uint8_t term[5] = {0, 1, 0, 0, 0};
    const uint8_t ended[5] = {0, 1, 0, 1, 0};
    const float g = 0.9f, l = 0.8f;
    float adv[5], ret[5];
    onpolicy_gae_advantages(5, r, v, nv, term, ended, g, l, adv, ret);
    double G = g, GL = (double)g * l;
    /* by hand, backwards */
    double d4 = 3.0 + G * 2.0 - 1.5;   /* bootstrap from the value after the last step */
    double a4 = d4;
    double d3 = -1.0 + G * 4.0 - 0.25; /* truncated: bootstrap from the final obs, cut */
    double a3 = d3;
    double d2 = 0.5 + G * 0.25 - 2.0;
    double a2 = d2 + GL * a3;
    double d1 = 2.0 + 0.0 - 1.0;       /* terminated: no bootstrap, cut */
    double a1 = d1;
    double d0 = 1.0 + G * 1.0 - 0.5;
    double a0 = d0 + GL * a1;
    const double want[5] = {a0, a1, a2, a3, a4};
    for (int t = 0; t < 5; t++) {
        CHECK_NEAR(adv[t], want[t], 1e-6);
        CHECK_NEAR(ret[t], want[t] + v[t], 1e-6);
    }
    CHECK_NEAR(adv[2], (0.5 + 0.9 * 0.25 - 2.0) + 0.72 * (-1.0 + 3.6 - 0.25), 1e-6);
    /* deterministic, and T = 0 is a no-op */
    float adv2[5], ret2[5];
    onpolicy_gae_advantages(5, r, v, nv, term, ended, g, l, adv2, ret2);
    CHECK(memcmp(adv, adv2, sizeof adv) == 0 && memcmp(ret, ret2, sizeof ret) == 0);
    onpolicy_gae_advantages(0, r, v, nv, term, ended, g, l, adv2, ret2);
}

static void test_gae_limits(void) {
    /* lambda = 1, no episode ends: advantage = discounted return - value */
    enum { T = 6 };
    float r[T], v[T], nv[T], adv[T], ret[T];
    uint8_t term[T] = {0}, ended[T] = {0};
    for (int t = 0; t < T; t++) {
        r[t] = (float)(t + 1);
        v[t] = 0.1f * (float)t;
    }
    for (int t = 0; t < T; t++) nv[t] = t + 1 < T ? v[t + 1] : 5.0f;
    onpolicy_gae_advantages(T, r, v, nv, term, ended, 0.99f, 1.0f, adv, ret);
    for (int t = 0; t < T; t++) {
        double G = 0.0, disc = 1.0;
        for (int k = t; k < T; k++) G += disc * r[k], disc *= 0.99f;
        G += disc * 5.0;
        CHECK_NEAR(ret[t], G, 1e-4);
    }
    /* lambda = 0: one-step TD errors */
    onpolicy_gae_advantages(T, r, v, nv, term, ended, 0.99f, 0.0f, adv, ret);
    for (int t = 0; t < T; t++) CHECK_NEAR(adv[t], r[t] + 0.99f * (double)nv[t] - v[t], 1e-5);
}

/* E envs of T steps, time-major (t * E + e) as the rollout keeps them, each env's steps
 * shuffled, split into M minibatches of chunks of every env's shuffle; each minibatch's
 * normalization from the envs' onpolicy_chunk_sums added up and onpolicy_adv_scale, against
 * the minibatch's samples gathered and normalized here in double (two passes, population
 * std). Returns the largest difference of a normalized advantage; the planted mistakes
 * (sample_std: n - 1 in the reference, as torch.std; shift: the sums taken over the next
 * timestep of each shuffle) must move it. */
static double minibatch_norm_mismatch(int E, int T, int M, bool sample_std, int shift) {
    float *adv = malloc(sizeof(float) * (size_t)E * T);
    int *perm = malloc(sizeof(int) * (size_t)E * T), *moved = malloc(sizeof(int) * (size_t)T);
    double *sums = malloc(sizeof(double) * 2 * (size_t)M), *tot = calloc(2 * (size_t)M, sizeof(double));
    calf_rng r;
    calf_rng_seed(&r, 5, 0, 0);
    for (int i = 0; i < E * T; i++)
        adv[i] = (float)calf_rng_uniform_range(&r, -3.0, 5.0) * (i % 3 ? 1.0f : 4.0f);
    for (int e = 0; e < E; e++) {
        int *p = perm + (size_t)e * T;
        for (int t = 0; t < T; t++) p[t] = t;
        for (int t = T - 1; t > 0; t--) {
            int j = (int)calf_rng_below(&r, (uint32_t)(t + 1)), keep = p[t];
            p[t] = p[j];
            p[j] = keep;
        }
        for (int t = 0; t < T; t++) moved[t] = p[(t + shift) % T];
        onpolicy_chunk_sums(T, M, moved, adv + e, (size_t)E, sums);
        for (int k = 0; k < 2 * M; k++) tot[k] += sums[k];
    }
    double worst = 0;
    for (int m = 0; m < M; m++) {
        int off, len;
        onpolicy_chunk_range(T, M, m, &off, &len);
        float mean, inv;
        onpolicy_adv_scale(tot[2 * m], tot[2 * m + 1], (double)E * len, &mean, &inv);
        double s = 0, q = 0, n = (double)E * len, ns = 0, nq = 0;
        for (int e = 0; e < E; e++)
            for (int j = off; j < off + len; j++) s += adv[(size_t)perm[e * T + j] * E + e];
        double mu = s / n;
        for (int e = 0; e < E; e++)
            for (int j = off; j < off + len; j++) {
                double d = adv[(size_t)perm[e * T + j] * E + e] - mu;
                q += d * d;
            }
        double sd = sqrt(q / (sample_std ? n - 1 : n));
        for (int e = 0; e < E; e++)
            for (int j = off; j < off + len; j++) {
                float a = adv[(size_t)perm[e * T + j] * E + e];
                float got = (a - mean) * inv; /* as the loss applies it */
                double want = (a - mu) / (sd + 1e-8);
                worst = fmax(worst, fabs(got - want));
                ns += got;
                nq += (double)got * got;
            }
        /* the minibatch comes out at mean 0 and std 1 */
        if (!sample_std && !shift) {
            CHECK_NEAR(ns / n, 0.0, 1e-6);
            CHECK_NEAR(sqrt(nq / n - (ns / n) * (ns / n)), 1.0, 1e-5);
        }
    }
    free(adv);
    free(perm);
    free(moved);
    free(sums);
    free(tot);
    return worst;
}

static void test_minibatch_normalization(void) {
    /* 7 envs of 30 steps in 4 minibatches (8, 8, 7, 7 steps of each env) */
    double e = minibatch_norm_mismatch(7, 30, 4, false, 0);
    CHECK(e < 2e-5);
    double planted_std = minibatch_norm_mismatch(7, 30, 4, true, 0);
    double planted_shift = minibatch_norm_mismatch(7, 30, 4, false, 1);
    CHECK(planted_std > 1e-3 && planted_shift > 1e-3);
    /* one minibatch: the whole batch's normalization */
    CHECK(minibatch_norm_mismatch(3, 5, 1, false, 0) < 2e-5);
    printf("per-minibatch advantages within %.2g of the reference (bound 2e-5); planted: "
           "sample std %.2g, chunks shifted %.2g\n", e, planted_std, planted_shift);
    /* a minibatch of equal advantages: std 0, every advantage 0 after */
    float mean, inv;
    onpolicy_adv_scale(4 * 2.5, 4 * 6.25, 4, &mean, &inv);
    CHECK(mean == 2.5f && (2.5f - mean) * inv == 0.0f);
}

int main(void) {
    test_gae_hand();
    test_gae_limits();
    test_minibatch_normalization();
    return test_report("test_onpolicy_math");
}
