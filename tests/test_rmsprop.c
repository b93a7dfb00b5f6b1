/* test_rmsprop.c: the optimizer of rmsprop.h: its step bit for bit against its documented
 * order (and slices against the whole), against PyTorch's formula computed in double, and
 * against torch.optim.RMSprop's own bits (tests/data/rmsprop/torch.txt, recorded by
 * record.py beside it). Planted mistakes each check must reject run in the test. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calf/rng.h"
#include "numerics/param_group.h"
#include "numerics/rmsprop.h"
#include "test_util.h"

static calf_rng g_rng;

static void fill(float *a, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) a[i] = lo + (hi - lo) * calf_rng_uniform_float(&g_rng);
}

/* A step function under test: rmsprop_step, or one of the planted mistakes below. */
typedef void (*step_fn)(float *p, const float *g, float *m, float *v, size_t n, float neg_lr,
                        float alpha, float one_minus_alpha, float eps, bool centered);

static float flush(float x) { return fabsf(x) < FLT_MIN ? 0.0f : x; }

/* rmsprop.h's order, one element at a time; `mistake` plants one departure:
 * 1 eps inside the root, 2 no fused multiply-adds, 3 centered ignored, 4 alpha and
 * 1 - alpha swapped. */
static int mistake;
static void documented(float *p, const float *g, float *m, float *v, size_t n, float neg_lr,
                       float alpha, float oma, float eps, bool centered) {
    for (size_t i = 0; i < n; i++) {
        float gi = g[i];
        float a = mistake == 4 ? oma : alpha, w = mistake == 4 ? alpha : oma;
        float vi = mistake == 2 ? v[i] * a + (w * gi) * gi : fmaf(w * gi, gi, v[i] * a);
        v[i] = vi = flush(vi);
        float d = vi;
        if (centered && mistake != 3) {
            float mi = mistake == 2 ? m[i] * a + w * gi : fmaf(w, gi, m[i] * a);
            m[i] = mi = flush(mi);
            d = mistake == 2 ? vi - mi * mi : fmaf(-mi, mi, vi);
            if (!(d >= 0.0f)) d = isnan(vi) ? vi : 0.0f;
        }
        float avg = mistake == 1 ? sqrtf(d + eps) : sqrtf(d) + eps;
        p[i] = p[i] + (neg_lr * gi) / avg;
    }
}

static int bits_equal(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof(float)) == 0;
}

/* rmsprop_step against the documented order over n = 37 (four 8-float vectors and a tail,
 * so both code paths), both forms, several steps; and in two slices against whole. */
static void test_documented_order(void) {
    enum { N = 37 };
    for (int centered = 0; centered <= 1; centered++) {
        float p[N], g[N], m[N], v[N], pr[N], mr[N], vr[N], ps[N], ms[N], vs[N];
        fill(p, N, -1, 1);
        fill(m, N, -0.1f, 0.1f);
        fill(v, N, 0.01f, 0.02f); /* v >= m^2, as the averages keep it */
        memcpy(pr, p, sizeof p), memcpy(mr, m, sizeof m), memcpy(vr, v, sizeof v);
        memcpy(ps, p, sizeof p), memcpy(ms, m, sizeof m), memcpy(vs, v, sizeof v);
        mistake = 0;
        for (int t = 0; t < 6; t++) {
            fill(g, N, -2, 2);
            g[3] = 0.0f;
            rmsprop_step(p, g, m, v, N, -2.5e-4f, 0.95f, 0.05f, 0.01f, centered);
            documented(pr, g, mr, vr, N, -2.5e-4f, 0.95f, 0.05f, 0.01f, centered);
            rmsprop_step(ps, g, ms, vs, 13, -2.5e-4f, 0.95f, 0.05f, 0.01f, centered);
            rmsprop_step(ps + 13, g + 13, ms + 13, vs + 13, N - 13, -2.5e-4f, 0.95f, 0.05f,
                         0.01f, centered);
            CHECK(bits_equal(p, pr, N) && bits_equal(v, vr, N));
            CHECK(!centered || bits_equal(m, mr, N));
            CHECK(bits_equal(p, ps, N) && bits_equal(v, vs, N) && bits_equal(m, ms, N));
        }
    }
}

/* The two departures from PyTorch's bits (rmsprop.h): averages under FLT_MIN are +0, and
 * a variance that rounds below 0 is 0, not a NaN. */
static void test_departures(void) {
    float p[9], g[9] = {0}, m[9], v[9];
    for (int i = 0; i < 9; i++) p[i] = 1, m[i] = 1e-38f, v[i] = 1e-38f;
    rmsprop_step(p, g, m, v, 9, -0.1f, 0.5f, 0.5f, 0.01f, true);
    for (int i = 0; i < 9; i++) CHECK(v[i] == 0.0f && m[i] == 0.0f && !signbit(m[i]) && p[i] == 1);
    /* m^2 > v (only rounding can do that): a finite step, as if d were 0 */
    for (int i = 0; i < 9; i++) p[i] = 1, g[i] = 1e-3f, m[i] = 0.5f, v[i] = 0.2f;
    rmsprop_step(p, g, m, v, 9, -0.1f, 0.9f, 0.1f, 0.01f, true);
    for (int i = 0; i < 9; i++) CHECK_NEAR(p[i], 1.0 - 0.1 * 1e-3 / 0.01, 1e-6);
}

/* PyTorch's RMSprop formula in double from the same float state, one step:
 * v' = alpha v + (1 - alpha) g^2; m' = alpha m + (1 - alpha) g;
 * p' = p - lr g / (sqrt(v' - m'^2) + eps) (centered; sqrt(v') + eps otherwise). Whether
 * `step` lands within a few float roundings of it, over many steps of random states. */
static int agrees_with_double(step_fn step, bool centered, double lr, double alpha, double eps) {
    enum { N = 29 };
    float p[N], g[N], m[N], v[N];
    fill(p, N, -1, 1);
    memset(m, 0, sizeof m), memset(v, 0, sizeof v);
    int ok = 1;
    for (int t = 0; t < 40; t++) {
        fill(g, N, -1, 1);
        for (int i = 0; i < N; i++) g[i] *= (i % 3 == 0) ? 1e-3f : (i % 3 == 1) ? 1.0f : 20.0f;
        double pd[N], md[N], vd[N], m_scale[N];
        for (int i = 0; i < N; i++) {
            m_scale[i] = alpha * fabs(m[i]) + (1 - alpha) * fabs(g[i]); /* m's terms cancel */
            vd[i] = alpha * v[i] + (1 - alpha) * (double)g[i] * g[i];
            md[i] = alpha * m[i] + (1 - alpha) * (double)g[i];
            double d = centered ? vd[i] - md[i] * md[i] : vd[i];
            pd[i] = p[i] - lr * g[i] / (sqrt(d > 0 ? d : 0) + eps);
        }
        step(p, g, m, v, N, (float)-lr, (float)alpha, (float)(1 - alpha), (float)eps, centered);
        for (int i = 0; i < N; i++) {
            /* p moves by at most lr / (1 - alpha)^(1/2) a step: judge p's error against the
             * step it took, with room for the float state's own roundings */
            double moved = fabs(pd[i] - p[i]) , step_size = fabs(lr * g[i] / (sqrt(vd[i]) + eps));
            ok &= fabs(vd[i] - v[i]) <= 1e-6 * vd[i] + 1e-30;
            ok &= !centered || fabs(md[i] - m[i]) <= 1e-6 * m_scale[i] + 1e-30;
            ok &= moved <= 1e-3 * step_size + 4 * FLT_EPSILON * fabs(pd[i]);
        }
    }
    return ok;
}

static void test_double_reference(void) {
    /* the MinAtar paper's setting, PyTorch's defaults, and an eps that dominates */
    CHECK(agrees_with_double(rmsprop_step, true, 2.5e-4, 0.95, 0.01));
    CHECK(agrees_with_double(rmsprop_step, false, 1e-2, 0.99, 1e-8));
    CHECK(agrees_with_double(rmsprop_step, true, 1e-3, 0.9, 1.0));
    /* planted mistakes the reference must reject */
    for (mistake = 1; mistake <= 4; mistake++) {
        if (mistake == 2) continue; /* fused or not is within the roundings: torch's bits tell */
        int ok = agrees_with_double(documented, true, 2.5e-4, 0.95, 0.01) &&
                 agrees_with_double(documented, true, 1e-3, 0.9, 1e-6);
        printf("mistake %d against the double reference: %s\n", mistake,
               ok ? "ACCEPTED (bad)" : "rejected");
        CHECK(!ok);
    }
    mistake = 0;
    CHECK(agrees_with_double(documented, true, 2.5e-4, 0.95, 0.01));
}

/* ---- torch.optim.RMSprop's own bits ------------------------------------------------- */

enum { MAXN = 64 };

static int read_words(FILE *f, const char *tag, float *out, int n) {
    char got[8];
    if (fscanf(f, "%7s", got) != 1 || strcmp(got, tag) != 0) return 0;
    for (int i = 0; i < n; i++) {
        unsigned w;
        if (fscanf(f, "%x", &w) != 1) return 0;
        uint32_t u = w;
        memcpy(&out[i], &u, sizeof u);
    }
    return 1;
}

/* Steps every setting of torch.txt with `step` (one_minus_alpha rounded as given by
 * `oma_in_float`: 1.0f - alpha instead of from double), and counts the floats of p, v and
 * m whose bits differ from torch's; -1 when the file cannot be read. */
static long torch_mismatches(step_fn step, int oma_in_float) {
    FILE *f = fopen(CALF_SOURCE_DIR "/tests/data/rmsprop/torch.txt", "r");
    if (!f) return -1;
    int c;
    while ((c = fgetc(f)) == '#')
        while ((c = fgetc(f)) != '\n' && c != EOF) {}
    ungetc(c, f);
    int n, steps;
    long bad = 0;
    if (fscanf(f, "%d %d", &n, &steps) != 2 || n < 1 || n > MAXN) bad = -1;
    char word[16];
    double lr, alpha, eps;
    int centered;
    while (bad >= 0 && fscanf(f, "%15s %lf %lf %lf %d", word, &lr, &alpha, &eps, &centered) == 5) {
        float p[MAXN], g[MAXN], m[MAXN] = {0}, v[MAXN] = {0}, tp[MAXN], tv[MAXN], tm[MAXN];
        if (strcmp(word, "setting") != 0 || !read_words(f, "p0", p, n)) {
            bad = -1;
            break;
        }
        float oma = oma_in_float ? 1.0f - (float)alpha : (float)(1.0 - alpha);
        for (int t = 0; t < steps; t++) {
            if (!read_words(f, "g", g, n) || !read_words(f, "p", tp, n) ||
                !read_words(f, "v", tv, n) || !read_words(f, "m", tm, n)) {
                bad = -1;
                break;
            }
            step(p, g, m, v, (size_t)n, -(float)lr, (float)alpha, oma, (float)eps, centered != 0);
            for (int i = 0; i < n; i++) {
                bad += memcmp(&p[i], &tp[i], 4) != 0;
                bad += memcmp(&v[i], &tv[i], 4) != 0;
                bad += centered && memcmp(&m[i], &tm[i], 4) != 0;
            }
            /* go on from torch's state, so one difference is counted once */
            memcpy(p, tp, sizeof p), memcpy(v, tv, sizeof v), memcpy(m, tm, sizeof m);
        }
    }
    fclose(f);
    return bad;
}

static void test_torch_bits(void) {
    CHECK_INT_EQ(torch_mismatches(rmsprop_step, 0), 0);
    mistake = 0;
    CHECK_INT_EQ(torch_mismatches(documented, 0), 0);
    /* planted: torch's bits tell the fused order and the rounding of 1 - alpha */
    long unfused, oma_float;
    mistake = 2;
    unfused = torch_mismatches(documented, 0);
    mistake = 0;
    oma_float = torch_mismatches(documented, 1);
    printf("torch's bits: unfused order %ld floats off, 1.0f - alpha %ld off\n", unfused, oma_float);
    CHECK(unfused > 0 && oma_float > 0);
}

/* A parameter group set to RMSProp steps with it: its m and v are grad_avg and
 * square_avg, and the step count and clipping are as for Adam. */
static void test_param_group(void) {
    adam_conf opt = {.lr = 2.5e-4f, .eps = 0.01f, .kind = OPTIM_RMSPROP, .alpha = 0.95f,
                     .one_minus_alpha = 0.05f, .centered = true, .max_norm = 1.0};
    param_group g;
    CHECK_INT_EQ(param_group_init(&g, "TEST", 11, true, opt, NULL), 0);
    float p[11], m[11] = {0}, v[11] = {0}, grad[11];
    for (int i = 0; i < 11; i++) {
        g.params[i] = p[i] = 0.1f * (float)i;
        g.grad[i] = grad[i] = 1.0f - 0.2f * (float)i; /* norm > 1: clipped */
    }
    adam_scale(grad, 11, adam_clip_coef(adam_global_norm(grad, 11), 1.0));
    rmsprop_step(p, grad, m, v, 11, -2.5e-4f, 0.95f, 0.05f, 0.01f, true);
    CHECK(param_group_step(&g));
    CHECK_INT_EQ(g.step, 1);
    CHECK(bits_equal(g.params, p, 11) && bits_equal(g.m, m, 11) && bits_equal(g.v, v, 11));
    param_group_free(&g);
}

int main(void) {
    calf_rng_seed(&g_rng, 37, 0, CALF_RNG_INIT);
    test_documented_order();
    test_departures();
    test_double_reference();
    test_torch_bits();
    test_param_group();
    return test_report("test_rmsprop");
}
