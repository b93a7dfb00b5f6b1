/* test_adam.c: the optimizer (adam.h): Adam's step bit for bit against its documented
 * formula, the chunked global norm against its definition (ranks holding whole chunks get
 * one process's bits), clipping, and the linear learning-rate schedule. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "calf/rng.h"
#include "numerics/adam.h"
#include "test_util.h"

static calf_rng g_rng;

static void fill(float *a, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) a[i] = lo + (hi - lo) * calf_rng_uniform_float(&g_rng);
}

static int bits_equal(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof(float)) == 0;
}

/* adam.h: a new moment under FLT_MIN in magnitude is +0 */
static float flush(float x) { return fabsf(x) < FLT_MIN ? 0.0f : x; }

static void test_adam(void) {
    enum { N = 37 };
    float p[N], g[N], m[N], v[N], pr[N], mr[N], vr[N];
    fill(p, N, -1, 1);
    fill(m, N, -0.1f, 0.1f);
    fill(v, N, 0, 0.01f);
    memcpy(pr, p, sizeof p);
    memcpy(mr, m, sizeof m);
    memcpy(vr, v, sizeof v);
    const float lr = 3e-4f, b1 = 0.9f, b2 = 0.999f, eps = 1e-7f;
    for (int64_t t = 1; t <= 5; t++) {
        fill(g, N, -2, 2);
        adam_step(p, g, m, v, N, t, lr, b1, b2, eps);
        /* the documented formula, element by element in float */
        double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
        float step_size = (float)(lr / bc1), bc2s = (float)sqrt(bc2);
        for (int i = 0; i < N; i++) {
            mr[i] = flush(b1 * mr[i] + (1.0f - b1) * g[i]);
            vr[i] = flush(b2 * vr[i] + (1.0f - b2) * (g[i] * g[i]));
            pr[i] = pr[i] - step_size * (mr[i] / (sqrtf(vr[i]) / bc2s + eps));
        }
        CHECK(bits_equal(p, pr, N));
        CHECK(bits_equal(m, mr, N));
        CHECK(bits_equal(v, vr, N));
    }
    /* first step from zero moments moves each parameter by about lr against its gradient */
    float q[3] = {1, 1, 1}, gq[3] = {0.5f, -3, 1e-3f}, mq[3] = {0}, vq[3] = {0};
    adam_step(q, gq, mq, vq, 3, 1, 0.01f, 0.9f, 0.999f, 1e-8f);
    CHECK_NEAR(q[0], 0.99, 1e-6);
    CHECK_NEAR(q[1], 1.01, 1e-6);
    CHECK_NEAR(q[2], 0.99, 1e-5);
}

/* The moments of a weight whose gradient stays 0 decay by b1 and b2 a step; they reach
 * +0 where they would go under FLT_MIN and never hold a subnormal, in the vector lanes and
 * the scalar tail alike (37 elements: 32 + 5 with AVX2), and the parameter then stays put.
 * Element 3 starts subnormal (a checkpoint written before the flush), element 5 is NaN. */
static void test_adam_flush(void) {
    enum { N = 37 };
    float p[N], g[N], m[N], v[N];
    for (int i = 0; i < N; i++) {
        p[i] = 0.25f;
        g[i] = 0.0f;
        m[i] = (i % 2 ? -1e-30f : 1e-30f) * (float)(1 + i);
        v[i] = 1e-34f * (float)(1 + i);
    }
    m[3] = FLT_MIN / 4;
    v[3] = FLT_MIN / 8;
    m[5] = NAN;
    int subnormal = 0, m_zero_at = 0, v_zero_at = 0;
    for (int64_t t = 1; t <= 1000; t++) {
        adam_step(p, g, m, v, N, t, 3e-4f, 0.9f, 0.999f, 1e-8f);
        for (int i = 0; i < N; i++) {
            if (i == 5) continue;
            subnormal += fpclassify(m[i]) == FP_SUBNORMAL || fpclassify(v[i]) == FP_SUBNORMAL;
            subnormal += signbit(m[i]) && m[i] == 0.0f; /* the flush gives +0, never -0 */
        }
        if (!m_zero_at && m[36] == 0.0f) m_zero_at = (int)t;
        if (!v_zero_at && v[36] == 0.0f) v_zero_at = (int)t;
        if (t == 1) CHECK(m[3] == 0.0f && v[3] == 0.0f && p[3] == 0.25f);
    }
    CHECK_INT_EQ(subnormal, 0);
    /* 37e-30 * 0.9^t first falls under FLT_MIN (1.18e-38) at t = 208; 37e-34 * 0.999^t
     * would take 12,654 steps, so v is still normal */
    CHECK_INT_EQ(m_zero_at, 208);
    CHECK_INT_EQ(v_zero_at, 0);
    CHECK(v[36] > FLT_MIN);
    CHECK(isnan(m[5]) && isnan(p[5]));
    int moved = 0;
    for (int i = 0; i < N; i++) moved += i != 5 && fabsf(p[i] - 0.25f) > 1e-6f;
    CHECK_INT_EQ(moved, 0);
}

/* Clipping as one process does it (the trainer's update with a single slice): the norm,
 * then every element scaled by its factor. Returns the norm before clipping. */
static double clip_whole(float *g, size_t n, double max_norm) {
    double norm = adam_global_norm(g, n);
    adam_scale(g, n, adam_clip_coef(norm, max_norm));
    return norm;
}

/* The norm is defined over chunks of ADAM_NORM_CHUNK: ranks that each hold whole chunks of
 * the gradient sum theirs and get one process's bits. */
static void test_norm_chunks(void) {
    enum { N = 3 * ADAM_NORM_CHUNK + 77 };
    float *g = malloc(N * sizeof *g);
    fill(g, N, -3, 3);
    /* the documented definition, written out: lanes i % 8 within each chunk, the lanes
     * combined (0+4)+(2+6) + (1+5)+(3+7), the chunks added in order */
    double parts[4], ref = 0.0;
    for (int c = 0; c < 4; c++) {
        size_t at = (size_t)c * ADAM_NORM_CHUNK, len = N - at < ADAM_NORM_CHUNK ? N - at : ADAM_NORM_CHUNK;
        double lane[8] = {0};
        for (size_t i = 0; i < len; i++) lane[i % 8] += (double)g[at + i] * (double)g[at + i];
        double chunk = ((lane[0] + lane[4]) + (lane[2] + lane[6])) +
                       ((lane[1] + lane[5]) + (lane[3] + lane[7]));
        parts[c] = adam_sum_sq(g + at, len);
        CHECK(memcmp(&parts[c], &chunk, sizeof chunk) == 0);
        ref += chunk;
    }
    ref = sqrt(ref);
    double whole = adam_global_norm(g, N), split = adam_norm_of_chunks(parts, 4);
    CHECK(memcmp(&whole, &ref, sizeof ref) == 0);
    CHECK(memcmp(&split, &ref, sizeof ref) == 0);
    /* clipping is the norm's factor applied element by element: any slice alike */
    float *h = malloc(N * sizeof *h);
    memcpy(h, g, N * sizeof *h);
    double norm = clip_whole(g, N, 1.0);
    float cf = adam_clip_coef(norm, 1.0);
    CHECK(cf < 1.0f);
    adam_scale(h, ADAM_NORM_CHUNK, cf);
    adam_scale(h + ADAM_NORM_CHUNK, N - ADAM_NORM_CHUNK, cf);
    CHECK(bits_equal(g, h, N));
    CHECK(adam_clip_coef(norm, 0.0) == 1.0f && adam_clip_coef(0.5, 1.0) == 1.0f);
    free(h);
    free(g);
}

static void test_clip(void) {
    float g[10] = {3, 4, 0, 0, 0, 0, 0, 0, 0, 0};
    CHECK_NEAR(adam_global_norm(g, 10), 5.0, 1e-12);
    CHECK_NEAR(clip_whole(g, 10, 0.0), 5.0, 1e-12); /* disabled */
    CHECK(g[0] == 3 && g[1] == 4);
    CHECK_NEAR(clip_whole(g, 10, 10.0), 5.0, 1e-12); /* below the limit */
    CHECK(g[0] == 3 && g[1] == 4);
    CHECK_NEAR(clip_whole(g, 10, 1.0), 5.0, 1e-12);
    CHECK_NEAR(g[0], 0.6, 1e-6);
    CHECK_NEAR(g[1], 0.8, 1e-6);
    CHECK_NEAR(adam_global_norm(g, 10), 1.0, 1e-6);
    /* the sum is in double: many small terms are not lost */
    enum { M = 1 << 20 };
    float *big = malloc(M * sizeof *big);
    for (int i = 0; i < M; i++) big[i] = 1e-3f;
    CHECK_NEAR(adam_global_norm(big, M), sqrt((double)M) * 1e-3f, 1e-9);
    free(big);
}

/* lr * (1 - k / N) in double, rounded once; 0 from N on and when N is unknown. */
static void test_lr_linear(void) {
    CHECK(adam_lr_linear_at(1e-3, 0, 10) == 1e-3f);
    CHECK(adam_lr_linear_at(1e-3, 3, 10) == (float)(1e-3 * (1.0 - 3.0 / 10.0)));
    CHECK(adam_lr_linear_at(1e-3, 10, 10) == 0.0f);
    CHECK(adam_lr_linear_at(1e-3, 11, 10) == 0.0f);
    CHECK(adam_lr_linear_at(1e-3, 0, 0) == 0.0f);
}

int main(void) {
    calf_rng_seed(&g_rng, 2024, 0, CALF_RNG_INIT);
    test_adam();
    test_adam_flush();
    test_norm_chunks();
    test_clip();
    test_lr_linear();
    return test_report("test_adam");
}
