/* test_conv2d.c: the NHWC conv layer. Three checkers, each run on the real kernels and on
 * planted mutants it must reject: gradients against finite differences of a double-
 * precision reference, the kernels' bits against a scalar reference of conv2d.h's order,
 * and a sample's bits alone, in a batch, and across row splits. Also layout and init. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "calf/rng.h"
#include "numerics/conv2d.h"
#include "test_util.h"

static calf_rng g_rng;

static void fill(float *a, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) a[i] = lo + (hi - lo) * calf_rng_uniform_float(&g_rng);
}

/* ------------------------------------------------------------ implementations */

typedef void (*forward_fn)(const conv2d *, const float *, const float *, int, conv2d_cache *,
                           float *);
typedef void (*backward_fn)(const conv2d *, const float *, conv2d_cache *, int, int,
                            const float *, float *, float *);

typedef struct {
    const char *name;
    forward_fn forward;
    backward_fn backward; /* accumulating, as conv2d_backward */
} impl;

/* Scratch the mutants compute with: a changed copy of the parameters or the input. */
enum { MUT_FLOATS = 1 << 16 };
static float g_mut_params[MUT_FLOATS], g_mut_x[MUT_FLOATS];

static size_t wi(const conv2d *l, int kh, int kw, int c, int f) {
    return ((size_t)(kh * l->kernel + kw) * l->in_c + c) * l->filters + f;
}

/* W with kh and kw exchanged: the kernel read as (kw, kh, C, F). */
static void transpose_taps(const conv2d *l, const float *w, float *out) {
    int k = l->kernel;
    for (int kh = 0; kh < k; kh++)
        for (int kw = 0; kw < k; kw++)
            for (int c = 0; c < l->in_c; c++)
                for (int f = 0; f < l->filters; f++) out[wi(l, kw, kh, c, f)] = w[wi(l, kh, kw, c, f)];
}

static void mut_transposed_forward(const conv2d *l, const float *params, const float *x, int B,
                                   conv2d_cache *c, float *y) {
    size_t n = l->offset + l->num_params;
    CALF_ASSERT(n <= MUT_FLOATS);
    memcpy(g_mut_params, params, n * sizeof(float));
    transpose_taps(l, params + l->w_off, g_mut_params + l->w_off);
    conv2d_forward(l, g_mut_params, x, B, c, y);
}

static void mut_transposed_backward(const conv2d *l, const float *params, conv2d_cache *c,
                                    int rb, int rc, const float *dy, float *grad, float *dx) {
    (void)params;
    size_t nw = (size_t)conv2d_patch(l) * l->filters;
    float *dw = grad ? grad + l->w_off : NULL, *old = malloc(nw * sizeof *old);
    CALF_ASSERT(old);
    if (dw) transpose_taps(l, dw, old); /* into the mutant's frame, accumulate, back */
    if (dw) memcpy(dw, old, nw * sizeof *old);
    conv2d_backward(l, g_mut_params, c, rb, rc, dy, grad, dx);
    if (dw) transpose_taps(l, dw, old), memcpy(dw, old, nw * sizeof *old);
    free(old);
}

/* The input one pixel lower than it is: a padding offset off by one row. */
static void mut_pad_forward(const conv2d *l, const float *params, const float *x, int B,
                            conv2d_cache *c, float *y) {
    size_t row = (size_t)l->in_w * l->in_c, per = conv2d_in_size(l);
    CALF_ASSERT(per * (size_t)B <= MUT_FLOATS);
    for (int n = 0; n < B; n++) {
        float *d = g_mut_x + n * per;
        memset(d, 0, row * sizeof(float));
        memcpy(d + row, x + n * per, (per - row) * sizeof(float));
    }
    conv2d_forward(l, params, g_mut_x, B, c, y);
}

/* dW and db summed over the samples in descending order. */
static void mut_order_backward(const conv2d *l, const float *params, conv2d_cache *c, int rb,
                               int rc, const float *dy, float *grad, float *dx) {
    for (int n = rc - 1; n >= 0; n--)
        conv2d_backward(l, params, c, rb + n, 1, dy + n * conv2d_out_size(l), grad, NULL);
    if (dx) conv2d_backward(l, params, c, rb, rc, dy, NULL, dx);
}

/* dX one row off: the crop of the padded gradient misplaced. */
static void mut_dx_backward(const conv2d *l, const float *params, conv2d_cache *c, int rb,
                            int rc, const float *dy, float *grad, float *dx) {
    conv2d_backward(l, params, c, rb, rc, dy, grad, dx);
    if (!dx) return;
    size_t row = (size_t)l->in_w * l->in_c, per = conv2d_in_size(l);
    for (int n = 0; n < rc; n++) {
        float *d = dx + n * per;
        memmove(d, d + row, (per - row) * sizeof(float));
        memset(d + per - row, 0, row * sizeof(float));
    }
}

/* A batch of more than one sample adds the bias last: each value within rounding of
 * the right one, but a sample's bits depend on the batch it sits in. */
static void mut_batch_forward(const conv2d *l, const float *params, const float *x, int B,
                              conv2d_cache *c, float *y) {
    size_t n = l->offset + l->num_params;
    memcpy(g_mut_params, params, n * sizeof(float));
    if (B > 1) memset(g_mut_params + l->b_off, 0, l->filters * sizeof(float));
    conv2d_forward(l, g_mut_params, x, B, c, y);
    if (B > 1)
        for (size_t i = 0; i < (size_t)B * l->out_h * l->out_w; i++)
            for (int f = 0; f < l->filters; f++)
                y[i * l->filters + f] = y[i * l->filters + f] + params[l->b_off + f];
}

static void mut_batch_backward(const conv2d *l, const float *params, conv2d_cache *c, int rb,
                               int rc, const float *dy, float *grad, float *dx) {
    (void)params;
    conv2d_backward(l, g_mut_params, c, rb, rc, dy, grad, dx);
}

static const impl REAL = {"conv2d", conv2d_forward, conv2d_backward};

/* ------------------------------------------------------------ shapes and data */

typedef struct {
    int h, w, c, f, k, s, pad, B;
} shape;

typedef struct {
    shape sh;
    conv2d l;
    size_t np;            /* floats in the flat arrays */
    float *params, *x, *dy;
    conv2d_cache cache;
} problem;

static void problem_make(problem *p, shape sh) {
    memset(p, 0, sizeof *p);
    p->sh = sh;
    size_t cursor = 3; /* not aligned: the layout must align W itself */
    CHECK_INT_EQ(conv2d_layout(&p->l, sh.h, sh.w, sh.c, sh.f, sh.k, sh.s, sh.pad, &cursor, NULL),
                 CALF_OK);
    p->np = cursor;
    p->params = nn_alloc_floats(p->np, NULL);
    p->x = nn_alloc_floats(conv2d_in_size(&p->l) * sh.B, NULL);
    p->dy = nn_alloc_floats(conv2d_out_size(&p->l) * sh.B, NULL);
    CALF_ASSERT(p->params && p->x && p->dy);
    fill(p->params + p->l.w_off, (size_t)conv2d_patch(&p->l) * sh.f, -0.5f, 0.5f);
    fill(p->params + p->l.b_off, sh.f, -0.5f, 0.5f);
    fill(p->x, conv2d_in_size(&p->l) * sh.B, -1.0f, 1.0f);
    fill(p->dy, conv2d_out_size(&p->l) * sh.B, -1.0f, 1.0f);
    CHECK_INT_EQ(conv2d_cache_init(&p->cache, &p->l, sh.B, NULL), CALF_OK);
}

static void problem_free(problem *p) {
    free(p->params), free(p->x), free(p->dy);
    conv2d_cache_free(&p->cache);
}

static void describe(const problem *p, char *buf, size_t cap) {
    const shape *s = &p->sh;
    snprintf(buf, cap, "%dx%dx%d -> %d filters k%d s%d p%d, batch %d", s->h, s->w, s->c, s->f,
             s->k, s->s, s->pad, s->B);
}

/* The input value at padded coordinates (ih, iw) of sample n, channel c: 0 in the pad. */
static double in_at_d(const conv2d *l, const double *x, int n, int ih, int iw, int c) {
    ih -= l->pad, iw -= l->pad;
    if (ih < 0 || iw < 0 || ih >= l->in_h || iw >= l->in_w) return 0.0;
    return x[n * conv2d_in_size(l) + ((size_t)ih * l->in_w + iw) * l->in_c + c];
}

/* L = sum y * dy, y the convolution in double. */
static double loss_d(const conv2d *l, const double *w, const double *b, const double *x,
                     const float *dy, int B) {
    double L = 0.0;
    int k = l->kernel;
    for (int n = 0; n < B; n++)
        for (int oh = 0; oh < l->out_h; oh++)
            for (int ow = 0; ow < l->out_w; ow++)
                for (int f = 0; f < l->filters; f++) {
                    double y = b[f];
                    for (int kh = 0; kh < k; kh++)
                        for (int kw = 0; kw < k; kw++)
                            for (int c = 0; c < l->in_c; c++)
                                y += in_at_d(l, x, n, oh * l->stride + kh, ow * l->stride + kw, c) *
                                     w[wi(l, kh, kw, c, f)];
                    L += y * dy[(((size_t)n * l->out_h + oh) * l->out_w + ow) * l->filters + f];
                }
    return L;
}

static double *to_double(const float *a, size_t n) {
    double *d = malloc(n * sizeof *d);
    CALF_ASSERT(d);
    for (size_t i = 0; i < n; i++) d[i] = a[i];
    return d;
}

/* Largest |g - fd| / (1 + |fd|) over up to 150 evenly spread entries of v, where fd is
 * the central difference of loss_d in v[i] and g the kernel's gradient. */
static double fd_worst(const problem *p, double *w, double *b, double *x, double *v, size_t n,
                       const float *g) {
    const double h = 1e-3;
    size_t count = n < 150 ? n : 150;
    double worst = 0.0;
    for (size_t t = 0; t < count; t++) {
        size_t i = t * n / count;
        double keep = v[i];
        v[i] = keep + h;
        double lp = loss_d(&p->l, w, b, x, p->dy, p->sh.B);
        v[i] = keep - h;
        double lm = loss_d(&p->l, w, b, x, p->dy, p->sh.B);
        v[i] = keep;
        double fd = (lp - lm) / (2 * h), e = fabs(g[i] - fd) / (1.0 + fabs(fd));
        if (e > worst) worst = e;
    }
    return worst;
}

/* ------------------------------------------------------------ checker 1: gradients */

/* The output against the double forward, and dX, dW, db (from one accumulating backward
 * onto zeros) against finite differences of L = sum y dy in double. */
static bool check_fd(const impl *im, shape sh, bool verbose) {
    problem p;
    problem_make(&p, sh);
    const conv2d *l = &p.l;
    size_t nw = (size_t)conv2d_patch(l) * l->filters, nx = conv2d_in_size(l) * sh.B;
    size_t ny = conv2d_out_size(l) * sh.B;
    float *y = malloc(ny * sizeof *y), *grad = nn_alloc_floats(p.np, NULL);
    float *dx = malloc(nx * sizeof *dx);
    CALF_ASSERT(y && grad && dx);
    im->forward(l, p.params, p.x, sh.B, &p.cache, y);
    im->backward(l, p.params, &p.cache, 0, sh.B, p.dy, grad, dx);
    double *w = to_double(p.params + l->w_off, nw), *b = to_double(p.params + l->b_off, sh.f);
    double *x = to_double(p.x, nx);
    /* the forward: y against the derivative of L in dy, i.e. the double y itself */
    double worst_y = 0.0;
    for (size_t i = 0; i < ny; i++) {
        float keep = p.dy[i];
        p.dy[i] = 0.0f;
        double l0 = loss_d(l, w, b, x, p.dy, sh.B);
        p.dy[i] = 1.0f;
        double yd = loss_d(l, w, b, x, p.dy, sh.B) - l0;
        p.dy[i] = keep;
        double e = fabs(y[i] - yd) / (1.0 + fabs(yd));
        if (e > worst_y) worst_y = e;
        if (i >= 40) break; /* the first positions of sample 0 reach every tap and pad */
    }
    double ex = fd_worst(&p, w, b, x, x, nx, dx);
    double ew = fd_worst(&p, w, b, x, w, nw, grad + l->w_off);
    double eb = fd_worst(&p, w, b, x, b, sh.f, grad + l->b_off);
    const double tol = 1e-4;
    bool ok = worst_y <= tol && ex <= tol && ew <= tol && eb <= tol;
    if (verbose || !ok) {
        char d[128];
        describe(&p, d, sizeof d);
        printf("  fd     %-22s %-44s y %.1e dX %.1e dW %.1e db %.1e (tol %.0e): %s\n", im->name, d,
               worst_y, ex, ew, eb, tol, ok ? "pass" : "REJECT");
    }
    free(y), free(grad), free(dx), free(w), free(b), free(x);
    problem_free(&p);
    return ok;
}

/* ------------------------------------------------------------ checker 2: the order */

/* conv2d.h's order, one element at a time. */
static float in_at(const conv2d *l, const float *x, int n, int ih, int iw, int c) {
    ih -= l->pad, iw -= l->pad;
    if (ih < 0 || iw < 0 || ih >= l->in_h || iw >= l->in_w) return 0.0f;
    return x[n * conv2d_in_size(l) + ((size_t)ih * l->in_w + iw) * l->in_c + c];
}

static void ref_forward(const conv2d *l, const float *params, const float *x, int B, float *y) {
    int k = l->kernel, F = l->filters;
    const float *w = params + l->w_off, *b = params + l->b_off;
    for (int n = 0; n < B; n++)
        for (int oh = 0; oh < l->out_h; oh++)
            for (int ow = 0; ow < l->out_w; ow++)
                for (int f = 0; f < F; f++) {
                    float acc = b[f];
                    for (int kh = 0; kh < k; kh++)
                        for (int kw = 0; kw < k; kw++)
                            for (int c = 0; c < l->in_c; c++)
                                acc = nn_madd(in_at(l, x, n, oh * l->stride + kh, ow * l->stride + kw, c),
                                              w[wi(l, kh, kw, c, f)], acc);
                    y[(((size_t)n * l->out_h + oh) * l->out_w + ow) * F + f] = acc;
                }
}

static void ref_backward(const conv2d *l, const float *params, const float *x, int B,
                         const float *dy, float *grad, float *dx) {
    int k = l->kernel, F = l->filters, C = l->in_c, s = l->stride;
    int Hp = l->in_h + 2 * l->pad, Wp = l->in_w + 2 * l->pad;
    const float *w = params + l->w_off;
    float *dw = grad + l->w_off, *db = grad + l->b_off;
    float *dP = malloc((size_t)Hp * Wp * C * sizeof *dP);
    CALF_ASSERT(dP);
    for (int n = 0; n < B; n++) {
        for (int i = 0; i < Hp * Wp * C; i++) dP[i] = 0.0f;
        for (int oh = 0; oh < l->out_h; oh++)
            for (int ow = 0; ow < l->out_w; ow++) {
                const float *d = dy + (((size_t)n * l->out_h + oh) * l->out_w + ow) * F;
                for (int kh = 0; kh < k; kh++)
                    for (int kw = 0; kw < k; kw++)
                        for (int c = 0; c < C; c++) {
                            float xv = in_at(l, x, n, oh * s + kh, ow * s + kw, c), g = 0.0f;
                            for (int f = 0; f < F; f++) {
                                dw[wi(l, kh, kw, c, f)] = nn_madd(xv, d[f], dw[wi(l, kh, kw, c, f)]);
                                g = nn_madd(d[f], w[wi(l, kh, kw, c, f)], g);
                            }
                            float *t = dP + ((size_t)(oh * s + kh) * Wp + ow * s + kw) * C + c;
                            *t = *t + g;
                        }
                for (int f = 0; f < F; f++) db[f] = db[f] + d[f];
            }
        for (int h = 0; h < l->in_h; h++)
            for (int ww = 0; ww < l->in_w; ww++)
                for (int c = 0; c < C; c++)
                    dx[n * conv2d_in_size(l) + ((size_t)h * l->in_w + ww) * C + c] =
                        dP[((size_t)(h + l->pad) * Wp + ww + l->pad) * C + c];
    }
    free(dP);
}

static bool same_bits(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof(float)) == 0;
}

/* y, dW, db and dX bit for bit against the reference order, dW and db accumulated onto
 * nonzero values (as a second minibatch's rows would be). */
static bool check_order(const impl *im, shape sh, bool verbose) {
    problem p;
    problem_make(&p, sh);
    const conv2d *l = &p.l;
    size_t nx = conv2d_in_size(l) * sh.B, ny = conv2d_out_size(l) * sh.B;
    float *y = malloc(ny * sizeof *y), *yr = malloc(ny * sizeof *yr);
    float *g = nn_alloc_floats(p.np, NULL), *gr = nn_alloc_floats(p.np, NULL);
    float *dx = malloc(nx * sizeof *dx), *dxr = malloc(nx * sizeof *dxr);
    CALF_ASSERT(y && yr && g && gr && dx && dxr);
    fill(g + l->w_off, l->b_off + sh.f - l->w_off, -1.0f, 1.0f);
    memcpy(gr, g, p.np * sizeof *g);
    im->forward(l, p.params, p.x, sh.B, &p.cache, y);
    im->backward(l, p.params, &p.cache, 0, sh.B, p.dy, g, dx);
    ref_forward(l, p.params, p.x, sh.B, yr);
    ref_backward(l, p.params, p.x, sh.B, p.dy, gr, dxr);
    bool oy = same_bits(y, yr, ny), odx = same_bits(dx, dxr, nx);
    bool odw = same_bits(g + l->w_off, gr + l->w_off, (size_t)conv2d_patch(l) * sh.f);
    bool odb = same_bits(g + l->b_off, gr + l->b_off, sh.f);
    bool ok = oy && odx && odw && odb;
    if (verbose || !ok) {
        char d[128];
        describe(&p, d, sizeof d);
        printf("  order  %-22s %-44s bits of y %s, dX %s, dW %s, db %s: %s\n", im->name, d,
               oy ? "=" : "DIFFER", odx ? "=" : "DIFFER", odw ? "=" : "DIFFER",
               odb ? "=" : "DIFFER", ok ? "pass" : "REJECT");
    }
    free(y), free(yr), free(g), free(gr), free(dx), free(dxr);
    problem_free(&p);
    return ok;
}

/* ------------------------------------------------------------ checker 3: the batch */

/* Each sample's y and dX computed alone equal its rows of the whole batch; dW and db
 * over the batch equal those over [0, a) then [a, B) for every split a, and the _set
 * form equals zeroing then accumulating. */
static bool check_batch(const impl *im, shape sh, bool verbose) {
    problem p;
    problem_make(&p, sh);
    const conv2d *l = &p.l;
    size_t in = conv2d_in_size(l), out = conv2d_out_size(l);
    size_t nx = in * sh.B, ny = out * sh.B, nwb = l->b_off + sh.f - l->w_off;
    float *y = malloc(ny * sizeof *y), *y1 = malloc(out * sizeof *y1);
    float *dx = malloc(nx * sizeof *dx), *dx1 = malloc(in * sizeof *dx1);
    float *g = nn_alloc_floats(p.np, NULL), *gs = nn_alloc_floats(p.np, NULL);
    CALF_ASSERT(y && y1 && dx && dx1 && g && gs);
    im->forward(l, p.params, p.x, sh.B, &p.cache, y);
    im->backward(l, p.params, &p.cache, 0, sh.B, p.dy, g, dx);
    bool oy = true, odx = true, osplit = true;
    for (int n = 0; n < sh.B; n++) {
        im->forward(l, p.params, p.x + n * in, 1, &p.cache, y1);
        im->backward(l, p.params, &p.cache, 0, 1, p.dy + n * out, NULL, dx1);
        oy = oy && same_bits(y1, y + n * out, out);
        odx = odx && same_bits(dx1, dx + n * in, in);
    }
    im->forward(l, p.params, p.x, sh.B, &p.cache, y);
    for (int a = 0; a <= sh.B; a++) {
        memset(gs, 0, p.np * sizeof *gs);
        im->backward(l, p.params, &p.cache, 0, a, p.dy, gs, NULL);
        im->backward(l, p.params, &p.cache, a, sh.B - a, p.dy + a * out, gs, NULL);
        osplit = osplit && same_bits(gs + l->w_off, g + l->w_off, nwb);
    }
    /* the _set form, over garbage, only for the real kernels (mutants accumulate) */
    bool oset = true;
    if (im->backward == conv2d_backward) {
        fill(gs, p.np, -9.0f, 9.0f);
        conv2d_backward_set(l, p.params, &p.cache, 0, sh.B, p.dy, gs, NULL);
        oset = same_bits(gs + l->w_off, g + l->w_off, (size_t)conv2d_patch(l) * sh.f) &&
               same_bits(gs + l->b_off, g + l->b_off, sh.f);
    }
    bool ok = oy && odx && osplit && oset;
    if (verbose || !ok) {
        char d[128];
        describe(&p, d, sizeof d);
        printf("  batch  %-22s %-44s alone vs batched y %s, dX %s; dW,db at every split %s; "
               "_set %s: %s\n",
               im->name, d, oy ? "=" : "DIFFER", odx ? "=" : "DIFFER", osplit ? "=" : "DIFFER",
               oset ? "=" : "DIFFER", ok ? "pass" : "REJECT");
    }
    free(y), free(y1), free(dx), free(dx1), free(g), free(gs);
    problem_free(&p);
    return ok;
}

/* ------------------------------------------------------------ the tests */

static const shape SHAPES[] = {
    /* h  w  c   f  k  s pad B */
    {5, 5, 1, 1, 1, 1, 0, 1},     /* the smallest: a 1x1 kernel on one channel */
    {6, 5, 3, 4, 3, 1, 1, 2},     /* four filters: one 128-bit column run */
    {7, 7, 2, 8, 3, 2, 0, 3},     /* stride 2 */
    {6, 7, 5, 13, 2, 2, 1, 4},    /* 8 + 4 + 1 filters, kernel 2, stride 2 with padding */
    {8, 8, 8, 16, 3, 1, 0, 5},    /* a full 16-filter tile, 8 channels */
    {9, 9, 4, 20, 3, 2, 1, 5},    /* 16 + 4 filters */
    {10, 10, 7, 16, 3, 1, 1, 3},  /* MinAtar's conv (Breakout: 4 channels; here 7) */
    {4, 6, 6, 3, 1, 2, 1, 2},     /* 1x1 kernel, stride 2, a padding-only border */
};
enum { NSHAPES = sizeof SHAPES / sizeof SHAPES[0] };

static void test_real(void) {
    printf("real kernels, every shape:\n");
    for (int i = 0; i < NSHAPES; i++) {
        CHECK(check_fd(&REAL, SHAPES[i], true));
        CHECK(check_order(&REAL, SHAPES[i], true));
        CHECK(check_batch(&REAL, SHAPES[i], true));
    }
}

static void test_mutants(void) {
    printf("planted mutants, each must be rejected:\n");
    const shape m = {6, 7, 3, 16, 3, 1, 1, 3}, s2 = {7, 7, 2, 8, 3, 2, 0, 3};
    const impl transposed = {"transposed kernel", mut_transposed_forward, mut_transposed_backward};
    const impl pad = {"padding off by a row", mut_pad_forward, conv2d_backward};
    const impl order = {"dW samples descending", conv2d_forward, mut_order_backward};
    const impl dxoff = {"dX crop off by a row", conv2d_forward, mut_dx_backward};
    const impl batch = {"bias last in a batch", mut_batch_forward, mut_batch_backward};
    CHECK(!check_fd(&transposed, m, true));
    CHECK(!check_fd(&transposed, s2, true));
    CHECK(!check_order(&transposed, m, true));
    CHECK(!check_fd(&pad, m, true));
    CHECK(!check_fd(&pad, s2, true));
    CHECK(!check_fd(&dxoff, m, true));
    /* within rounding of the right values, so only the bitwise checker can catch it */
    CHECK(check_fd(&order, m, true));
    CHECK(!check_order(&order, m, true));
    CHECK(check_fd(&batch, m, true));
    CHECK(!check_batch(&batch, m, true));
    CHECK(!check_order(&batch, m, true));
}

static void test_layout_init(void) {
    conv2d l;
    size_t cursor = 5;
    CHECK_INT_EQ(conv2d_layout(&l, 10, 10, 4, 16, 3, 1, 0, &cursor, NULL), CALF_OK);
    CHECK_INT_EQ(l.out_h, 8);
    CHECK_INT_EQ(l.out_w, 8);
    CHECK_INT_EQ(l.w_off, 16);
    CHECK_INT_EQ(l.b_off, 16 + 36 * 16);
    CHECK_INT_EQ(cursor, 16 + 36 * 16 + 16);
    CHECK_INT_EQ(l.offset + l.num_params, cursor);
    CHECK_INT_EQ(conv2d_layout(&l, 10, 10, 4, 16, 3, 1, 1, &cursor, NULL), CALF_OK);
    CHECK_INT_EQ(l.out_h * l.out_w, 100);
    CHECK_INT_EQ(conv2d_layout(&l, 7, 7, 2, 8, 3, 2, 0, &cursor, NULL), CALF_OK);
    CHECK_INT_EQ(l.out_h, 3);
    calf_error err = {0};
    size_t before = cursor;
    CHECK_INT_EQ(conv2d_layout(&l, 2, 2, 1, 4, 3, 1, 0, &cursor, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "kernel 3") != NULL);
    CHECK_INT_EQ(conv2d_layout(&l, 5, 5, 1, 4, 3, 0, 0, &cursor, NULL), CALF_EINVAL);
    CHECK_INT_EQ(conv2d_layout(&l, 5, 5, 1, 4, 3, 1, -1, &cursor, NULL), CALF_EINVAL);
    CHECK_INT_EQ(cursor, before);

    /* init: the (F, C*k*k) view PyTorch's orthogonal_ sees, drawn by nn_orthogonal_init,
     * stored as (k, k, C, F); its rows orthonormal times the gain; bias 0 */
    cursor = 0;
    CHECK_INT_EQ(conv2d_layout(&l, 10, 10, 6, 16, 3, 1, 1, &cursor, NULL), CALF_OK);
    float *params = nn_alloc_floats(cursor, NULL), q[16 * 54];
    fill(params, cursor, 1.0f, 2.0f);
    calf_rng r1, r2;
    calf_rng_seed(&r1, 7, 0, CALF_RNG_INIT);
    calf_rng_seed(&r2, 7, 0, CALF_RNG_INIT);
    float gain = sqrtf(2.0f);
    CHECK_INT_EQ(conv2d_init(&l, params, gain, &r1, NULL), CALF_OK);
    CHECK_INT_EQ(nn_orthogonal_init(q, 16, 54, gain, &r2, NULL), CALF_OK);
    int same = 1;
    for (int f = 0; f < 16; f++)
        for (int c = 0; c < 6; c++)
            for (int kh = 0; kh < 3; kh++)
                for (int kw = 0; kw < 3; kw++)
                    same &= params[l.w_off + wi(&l, kh, kw, c, f)] == q[f * 54 + (c * 3 + kh) * 3 + kw];
    CHECK(same);
    double worst = 0.0;
    for (int f = 0; f < 16; f++)
        for (int g2 = 0; g2 < 16; g2++) {
            double d = 0.0;
            for (int pp = 0; pp < 54; pp++)
                d += (double)params[l.w_off + pp * 16 + f] * params[l.w_off + pp * 16 + g2];
            worst = fmax(worst, fabs(d - (f == g2 ? 2.0 : 0.0)));
        }
    CHECK(worst < 1e-5);
    int zero = 1;
    for (int f = 0; f < 16; f++) zero &= params[l.b_off + f] == 0.0f;
    CHECK(zero);
    printf("init: matches nn_orthogonal_init on the (16, 54) view; W^T W = 2 I within %.1e\n",
           worst);
    free(params);
}

int main(void) {
    calf_rng_seed(&g_rng, 36, 0, CALF_RNG_INIT);
    test_layout_init();
    test_real();
    test_mutants();
    return test_report("test_conv2d");
}
