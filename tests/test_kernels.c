/* test_kernels.c: the kernel variants (numerics/kernels.h). CALF_KERNELS picks one or is
 * refused with a message; the fma and avx512 variants' functions, called by their own
 * names, give the generic variant's bits on every kernel, shape and odd value tried (the
 * nn layers and MLPs, the LSTM and GRU, Adam); and every variant's largest products run
 * on a host thread of a small stack, with and without their scratch, to the same bits. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "calf/rng.h"
#include "numerics/kernels.h"
#include "test_stack.h"
#include "test_util.h"

#ifndef CALF_KERNELS_FMA
#define CALF_KERNELS_FMA 0
#endif

/* Which variant this CPU runs best, as kernels.c decides (libgcc's answers also ask
 * whether the OS saves the registers) */
static int cpu_fma(void) {
#if CALF_KERNELS_FMA
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

static int cpu_avx512(void) {
#if CALF_KERNELS_FMA
    return cpu_fma() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
#else
    return 0;
#endif
}

static void test_choice(void) {
    calf_error err;
    setenv("CALF_KERNELS", "neon", 1);
    CHECK_INT_EQ(kernels_select(&err), CALF_EINVAL);
    CHECK(strstr(err.msg, "CALF_KERNELS=neon: not a kernel variant of this build") != NULL);
    CHECK(strncmp(kernels_describe(), "refused: ", 9) == 0);
    if (CALF_KERNELS_FMA) CHECK(strstr(err.msg, "(it has generic, fma, avx512, or auto)") != NULL);
    if (CALF_KERNELS_FMA && !cpu_avx512()) {
        setenv("CALF_KERNELS", "avx512", 1);
        CHECK_INT_EQ(kernels_select(&err), CALF_EINVAL);
        CHECK(strstr(err.msg, "this CPU lacks AVX-512F or VL") != NULL);
    }
    unsetenv("CALF_KERNELS");
    CHECK_INT_EQ(kernels_select(&err), CALF_OK);
    const char *d = kernels_describe();
    if (cpu_avx512()) CHECK(strncmp(d, "avx512 (", 8) == 0);
    else if (cpu_fma()) CHECK(strncmp(d, "fma (", 5) == 0);
    else CHECK(strncmp(d, "generic (", 9) == 0 || strncmp(d, "native (", 8) == 0);
    /* chosen once: a later CALF_KERNELS is accepted but changes nothing (a
     * -DCALF_NATIVE=ON build's one variant is named native) */
    setenv("CALF_KERNELS", CALF_KERNELS_NATIVE ? "native" : "generic", 1);
    CHECK_INT_EQ(kernels_select(&err), CALF_OK);
    CHECK_STR_EQ(kernels_describe(), d);
    unsetenv("CALF_KERNELS");
}

/* Each variant's functions by their link names, and a table of one variant's, so that
 * every comparison below runs for fma and avx512 alike against generic. */
#define KERNELS_DECLARE(ret, name, params, args) ret name##_generic params;
#define KERNELS_DECLARE_VOID(name, params, args) KERNELS_DECLARE(void, name, params, args)
KERNELS_LIST(KERNELS_DECLARE, KERNELS_DECLARE_VOID)

typedef struct variant {
    const char *name;
#define KERNELS_FIELD(ret, name, params, args) ret(*name) params;
#define KERNELS_FIELD_VOID(name, params, args) void(*name) params;
    KERNELS_LIST(KERNELS_FIELD, KERNELS_FIELD_VOID)
} variant;

#define KERNELS_GENERIC(ret, name, params, args) name##_generic,
#define KERNELS_GENERIC_VOID(name, params, args) name##_generic,
static const variant generic_variant = {"generic",
                                        KERNELS_LIST(KERNELS_GENERIC, KERNELS_GENERIC_VOID)};
#if CALF_KERNELS_FMA
#define KERNELS_DECLARE_X86(ret, name, params, args) ret name##_fma params; ret name##_avx512 params;
#define KERNELS_DECLARE_X86_VOID(name, params, args) KERNELS_DECLARE_X86(void, name, params, args)
KERNELS_LIST(KERNELS_DECLARE_X86, KERNELS_DECLARE_X86_VOID)

#define KERNELS_FMA(ret, name, params, args) name##_fma,
#define KERNELS_FMA_VOID(name, params, args) name##_fma,
static const variant fma_variant = {"fma", KERNELS_LIST(KERNELS_FMA, KERNELS_FMA_VOID)};
#define KERNELS_AVX512(ret, name, params, args) name##_avx512,
#define KERNELS_AVX512_VOID(name, params, args) name##_avx512,
static const variant avx512_variant = {"avx512", KERNELS_LIST(KERNELS_AVX512, KERNELS_AVX512_VOID)};
#endif

static calf_rng g_rng;

/* n floats in [-2, 2), with a few odd ones where odd is asked for: zeros of both signs,
 * subnormals, large values, infinities and NaN (tanh's clamp and pass-through) */
static void fill(float *a, size_t n, int odd) {
    static const float odds[] = {0.0f, -0.0f, 1e-40f, -3e-39f, 9.0f, -40.0f, INFINITY,
                                 -INFINITY, NAN, 7.9053111f, FLT_MIN, 1e30f};
    for (size_t i = 0; i < n; i++) {
        a[i] = -2.0f + 4.0f * calf_rng_uniform_float(&g_rng);
        if (odd && calf_rng_uniform_float(&g_rng) < 0.1f)
            a[i] = odds[(size_t)(calf_rng_uniform_float(&g_rng) * 12) % 12];
    }
}

static float *floats(size_t n) { return nn_alloc_floats(n, NULL); }

static int same(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof *a) == 0;
}

#if CALF_KERNELS_FMA
/* Every layer kernel on one shape, both variants from the same inputs. */
static void layer_shape(const variant *v, int B, int in, int out) {
    size_t nx = (size_t)B * in, ny = (size_t)B * out, nw = (size_t)in * out;
    float *x = floats(nx), *w = floats(nw), *b = floats(out), *dy = floats(ny);
    float *y1 = floats(ny), *y2 = floats(ny), *dw1 = floats(nw), *dw2 = floats(nw);
    float *db1 = floats(out), *db2 = floats(out), *dx1 = floats(nx), *dx2 = floats(nx);
    float *wt = floats(nw), *wt2 = floats(nw);
    fill(x, nx, 0), fill(w, nw, 0), fill(b, out, 0), fill(dy, ny, 0);
    calf_error err;
    CHECK_INT_EQ(nn_linear_forward_generic(x, w, b, B, in, out, y1, &err), CALF_OK);
    CHECK_INT_EQ(v->nn_linear_forward(x, w, b, B, in, out, y2, &err), CALF_OK);
    CHECK(same(y1, y2, ny));
    void (*const gen[])(const float *, const float *, int, int, int, float *, float *) = {
        nn_linear_backward_params_generic, nn_linear_backward_params_set_generic,
        nn_linear_backward_params_add_generic};
    void (*const var[])(const float *, const float *, int, int, int, float *, float *) = {
        v->nn_linear_backward_params, v->nn_linear_backward_params_set,
        v->nn_linear_backward_params_add};
    for (int mode = 0; mode < 3; mode++) {
        fill(dw1, nw, 0), fill(db1, out, 0);
        memcpy(dw2, dw1, nw * sizeof *dw1), memcpy(db2, db1, out * sizeof *db1);
        gen[mode](x, dy, B, in, out, dw1, db1);
        var[mode](x, dy, B, in, out, dw2, db2);
        CHECK(same(dw1, dw2, nw) && same(db1, db2, (size_t)out));
    }
    nn_transpose_generic(w, in, out, wt);
    v->nn_transpose(w, in, out, wt2);
    CHECK(same(wt, wt2, nw));
    nn_linear_backward_input_generic(dy, wt, B, in, out, dx1);
    v->nn_linear_backward_input(dy, wt, B, in, out, dx2);
    CHECK(same(dx1, dx2, nx));
    float *ptrs[] = {x, w, b, dy, y1, y2, dw1, dw2, db1, db2, wt, wt2, dx1, dx2};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) free(ptrs[i]);
}

static void test_layers(const variant *v) {
    static const int rows[] = {1, 3, 8, 13, 64};
    static const int widths[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 64, 100};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
        for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
            for (size_t o = 0; o < sizeof widths / sizeof widths[0]; o++)
                layer_shape(v, rows[r], widths[i], widths[o]);
    /* the large products: the packed forward (from 131,072 weights and 32 rows; with
     * avx512 32-column strips, a 16-column one and 12-row tiles past them), 2 and 3 rows
     * over wide outputs (an LSTM step), and dW's wide tiles: MinAtar's fc at 64 rows, an
     * LSTM's 512 -> 4 x 128 gates, 1030 -> 144 (144 = 4 x 32 + 16; 6 inputs past the 6-input
     * dW groups), 37 rows (12-row tiles and 1) */
    static const int large[][3] = {{64, 1024, 128}, {33, 512, 512}, {2, 128, 512}, {2, 512, 128},
                                   {3, 128, 200}, {37, 1030, 144}};
    for (size_t k = 0; k < sizeof large / sizeof large[0]; k++)
        layer_shape(v, large[k][0], large[k][1], large[k][2]);
}

static void test_activations(const variant *v) {
    enum { N = 1031 };
    float *x = floats(N), *h = floats(N), *a = floats(N), *b = floats(N);
    fill(x, N, 1);
    nn_tanh_generic(x, a, N), v->nn_tanh(x, b, N);
    CHECK(same(a, b, N));
    for (int i = 0; i < N; i++) {
        float t1 = nn_tanh1_generic(x[i]), t2 = v->nn_tanh1(x[i]);
        CHECK(memcmp(&t1, &t2, sizeof t1) == 0);
    }
    nn_relu_generic(x, a, N), v->nn_relu(x, b, N);
    CHECK(same(a, b, N));
    fill(h, N, 0);
    for (int act = NN_ACT_TANH; act <= NN_ACT_RELU; act++) {
        nn_activation_backward_generic((nn_activation)act, h, x, a, N);
        v->nn_activation_backward((nn_activation)act, h, x, b, N);
        CHECK(same(a, b, N));
        memcpy(a, x, N * sizeof *x), memcpy(b, x, N * sizeof *x);
        nn_activate_generic((nn_activation)act, a, N), v->nn_activate((nn_activation)act, b, N);
        CHECK(same(a, b, N));
    }
    free(x), free(h), free(a), free(b);
}

/* ppo_cartpole's actor (4-64-64-2, tanh), a relu 17-256-256-1 critic and 1030-128-128-6
 * and 1046-128-128-6 relu nets (the fma and avx512 variants' W^T of their first layer in
 * 16-input strips, the generic's a plain transpose; avx512 runs the strips in pairs, and
 * 1046 = 32 x 32 + 16 + 6 leaves one strip and 6 inputs past the pairs): forward, the
 * three backward modes, per-row groups */
static void test_mlps(const variant *v) {
    static const struct { int in, hidden, out, act; } nets[] = {{4, 64, 2, NN_ACT_TANH},
                                                               {17, 256, 1, NN_ACT_RELU},
                                                               {1030, 128, 6, NN_ACT_RELU},
                                                               {1046, 128, 6, NN_ACT_RELU}};
    for (size_t k = 0; k < sizeof nets / sizeof nets[0]; k++) {
        enum { B = 37 };
        nn_mlp m;
        size_t cursor = 0;
        int hidden[2] = {nets[k].hidden, nets[k].hidden};
        nn_mlp_layout_generic(&m, nets[k].in, hidden, 2, nets[k].out, (nn_activation)nets[k].act,
                              &cursor);
        float *p = floats(cursor), *g1 = floats(cursor), *g2 = floats(cursor);
        calf_rng rng;
        calf_rng_seed(&rng, 7, 0, 0);
        CHECK_INT_EQ(nn_mlp_init_generic(&m, p, 1.4142135f, 0.01f, &rng, NULL), CALF_OK);
        float *x = floats((size_t)B * nets[k].in), *dy = floats((size_t)B * nets[k].out);
        float *y1 = floats((size_t)B * nets[k].out), *y2 = floats((size_t)B * nets[k].out);
        float *dx1 = floats((size_t)B * nets[k].in), *dx2 = floats((size_t)B * nets[k].in);
        fill(x, (size_t)B * nets[k].in, 0), fill(dy, (size_t)B * nets[k].out, 0);
        nn_cache c1, c2;
        CHECK_INT_EQ(nn_cache_init_generic(&c1, &m, B, NULL), CALF_OK);
        CHECK_INT_EQ(v->nn_cache_init(&c2, &m, B, NULL), CALF_OK);
        nn_mlp_forward_generic(&m, p, x, B, &c1, y1);
        v->nn_mlp_forward(&m, p, x, B, &c2, y2);
        CHECK(same(y1, y2, (size_t)B * nets[k].out));
        memset(g1, 0, cursor * sizeof *g1), memset(g2, 0, cursor * sizeof *g2);
        nn_mlp_backward_set_generic(&m, p, &c1, 0, 13, dy, g1, dx1);
        v->nn_mlp_backward_set(&m, p, &c2, 0, 13, dy, g2, dx2);
        nn_mlp_backward_add_generic(&m, p, &c1, 13, 11, dy + 13 * nets[k].out, g1, NULL);
        v->nn_mlp_backward_add(&m, p, &c2, 13, 11, dy + 13 * nets[k].out, g2, NULL);
        nn_mlp_backward_generic(&m, p, &c1, 24, 13, dy + 24 * nets[k].out, g1, dx1);
        v->nn_mlp_backward(&m, p, &c2, 24, 13, dy + 24 * nets[k].out, g2, dx2);
        CHECK(same(g1, g2, cursor));
        CHECK(same(dx1, dx2, (size_t)13 * nets[k].in));
        nn_cache_free_generic(&c1), v->nn_cache_free(&c2);
        float *ptrs[] = {p, g1, g2, x, dy, y1, y2, dx1, dx2};
        for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) free(ptrs[i]);
    }
}

/* The LSTM and GRU of rnn.c: forward with resets, the step, and backward in each mode,
 * on a small cell and on one wide enough for rnn.c's column panels (G, in >= 73) and
 * long enough for its weight-gradient chunks (T B > 65,536 / (in + G) rows). */
static void rnn_case(const variant *v, rnn_kind kind, int in, int H, int T, int B) {
    rnn_cell cell;
    size_t cursor = 0;
    rnn_layout_generic(&cell, kind, in, H, &cursor);
    int lstm = kind == RNN_LSTM;
    size_t TB = (size_t)T * B, BH = (size_t)B * H;
    float *p = floats(cursor), *g1 = floats(cursor), *g2 = floats(cursor);
    float *x = floats(TB * in), *dy = floats(TB * H), *y1 = floats(TB * H), *y2 = floats(TB * H);
    float *dx1 = floats(TB * in), *dx2 = floats(TB * in), *s0 = floats(4 * BH);
    float *s1 = floats(4 * BH), *s2 = floats(4 * BH);
    uint8_t *start = calloc(TB, 1);
    calf_rng rng;
    calf_rng_seed(&rng, 11, 0, 0);
    CHECK_INT_EQ(rnn_init_generic(&cell, p, &rng, NULL), CALF_OK);
    fill(p + cell.b_ih_off, (size_t)cell.gates, 0), fill(p + cell.b_hh_off, (size_t)cell.gates, 0);
    fill(x, TB * in, 0), fill(dy, TB * H, 0), fill(s0, 4 * BH, 0);
    for (size_t e = 0; e < TB; e++) start[e] = e % 7 == 3;
    rnn_cache c1, c2;
    CHECK_INT_EQ(rnn_cache_init_generic(&c1, &cell, T, B, NULL), CALF_OK);
    CHECK_INT_EQ(v->rnn_cache_init(&c2, &cell, T, B, NULL), CALF_OK);
    /* s: h0, c0, then hT, cT; later dhT, dcT and dh0, dc0 */
    rnn_forward_generic(&cell, p, &c1, x, start, s0, lstm ? s0 + BH : NULL, T, B, y1, s1,
                        lstm ? s1 + BH : NULL);
    v->rnn_forward(&cell, p, &c2, x, start, s0, lstm ? s0 + BH : NULL, T, B, y2, s2,
                    lstm ? s2 + BH : NULL);
    CHECK(same(y1, y2, TB * H) && same(s1, s2, (lstm ? 2 : 1) * BH));
    for (int mode = RNN_GRAD_ACC; mode <= RNN_GRAD_ADD; mode++) {
        fill(g1, cursor, 0);
        memcpy(g2, g1, cursor * sizeof *g1);
        rnn_backward_generic(&cell, p, &c1, dy, s0 + 2 * BH, lstm ? s0 + 3 * BH : NULL, g1,
                             (rnn_grad_mode)mode, dx1, s1, lstm ? s1 + BH : NULL);
        v->rnn_backward(&cell, p, &c2, dy, s0 + 2 * BH, lstm ? s0 + 3 * BH : NULL, g2,
                         (rnn_grad_mode)mode, dx2, s2, lstm ? s2 + BH : NULL);
        CHECK(same(g1, g2, cursor) && same(dx1, dx2, TB * in));
        CHECK(same(s1, s2, (lstm ? 2 : 1) * BH));
    }
    memcpy(s1, s0, 2 * BH * sizeof *s0), memcpy(s2, s0, 2 * BH * sizeof *s0);
    rnn_step_generic(&cell, p, &c1, x, start + 3, B, s1, lstm ? s1 + BH : NULL);
    v->rnn_step(&cell, p, &c2, x, start + 3, B, s2, lstm ? s2 + BH : NULL);
    CHECK(same(s1, s2, (lstm ? 2 : 1) * BH));
    rnn_cache_free_generic(&c1), v->rnn_cache_free(&c2);
    float *ptrs[] = {p, g1, g2, x, dy, y1, y2, dx1, dx2, s0, s1, s2};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) free(ptrs[i]);
    free(start);
}

static void test_rnns(const variant *v) {
    rnn_case(v, RNN_LSTM, 5, 7, 6, 3);
    rnn_case(v, RNN_GRU, 5, 7, 6, 3);
    rnn_case(v, RNN_LSTM, 80, 20, 30, 14);
    rnn_case(v, RNN_GRU, 100, 26, 30, 14);
}

static void test_adam(const variant *v) {
    enum { N = 1003 };
    float *p1 = floats(N), *m1 = floats(N), *v1 = floats(N), *g = floats(N);
    float *p2 = floats(N), *m2 = floats(N), *v2 = floats(N);
    fill(p1, N, 0);
    memcpy(p2, p1, N * sizeof *p1);
    for (int64_t t = 1; t <= 4; t++) {
        fill(g, N, 0);
        g[t] = 1e-30f; /* moments below FLT_MIN flush to +0 */
        adam_step_generic(p1, g, m1, v1, N, t, 3e-4f, 0.9f, 0.999f, 1e-7f);
        v->adam_step(p2, g, m2, v2, N, t, 3e-4f, 0.9f, 0.999f, 1e-7f);
        CHECK(same(p1, p2, N) && same(m1, m2, N) && same(v1, v2, N));
        double n1 = adam_global_norm_generic(g, N), n2 = v->adam_global_norm(g, N);
        CHECK(memcmp(&n1, &n2, sizeof n1) == 0);
        n1 = adam_sum_sq_generic(g, ADAM_NORM_CHUNK), n2 = v->adam_sum_sq(g, ADAM_NORM_CHUNK);
        CHECK(memcmp(&n1, &n2, sizeof n1) == 0);
        adam_scale_generic(p1, N, 0.75f), v->adam_scale(p2, N, 0.75f);
        CHECK(same(p1, p2, N));
    }
    float *ptrs[] = {p1, m1, v1, g, p2, m2, v2};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) free(ptrs[i]);
}

static void test_variant(const variant *v) {
    calf_rng_seed(&g_rng, 39, 0, 0);
    test_layers(v);
    test_activations(v);
    test_mlps(v);
    test_rnns(v);
    test_adam(v);
}
#endif

/* ---- a host's thread of a small stack ---------------------------------------------------
 * calf's C API and Python module run the kernels on their host's threads, whose stacks can
 * be 64 KiB (musl's default is 128 KiB). The fc of MinAtar's networks (1024 -> 128) at 64
 * and 1,024 rows takes the packed forward and dX (160 KiB of scratch with avx512) and dW's
 * chunks: run on such a thread, every variant must give the main thread's bytes; and with
 * its scratch refused (aligned_alloc failing on that thread, where the link wraps it), the
 * paths that need none must give them too. */

#ifdef CALF_TEST_WRAP_ALLOC
void *__real_aligned_alloc(size_t align, size_t n);
static _Thread_local bool refuse_alloc; /* set on the thread whose scratch is refused */
static _Thread_local int refused;       /* how many it refused */

void *__wrap_aligned_alloc(size_t align, size_t n) {
    if (refuse_alloc) {
        refused++;
        return NULL;
    }
    return __real_aligned_alloc(align, n);
}
#endif

enum { FC_IN = 1024, FC_OUT = 128, FC_MAX_ROWS = 1024 };

/* One run of every kernel on the fc's inputs, into its own outputs. */
typedef struct fc_run {
    const variant *v;
    int B;
    const float *x, *w, *b, *dy, *wt, *dw0, *db0; /* inputs; wt: W^T, row-major */
    float *y, *dw[3], *db[3], *dx, *wtp, *dx_wt;  /* outputs */
    int rc;                                       /* the forward's status */
    bool refuse;                                  /* refuse this thread's scratch */
    int refused;                                  /* allocations refused */
} fc_run;

static void *fc_kernels_run(void *arg) {
    fc_run *r = arg;
    size_t nw = (size_t)FC_IN * FC_OUT;
#ifdef CALF_TEST_WRAP_ALLOC
    refuse_alloc = r->refuse;
#endif
    /* what a run must write, unwritten (NaN bits) so that a skipped write shows */
    memset(r->y, 0xff, (size_t)r->B * FC_OUT * sizeof(float));
    memset(r->dx, 0xff, (size_t)r->B * FC_IN * sizeof(float));
    memset(r->dx_wt, 0xff, (size_t)r->B * FC_IN * sizeof(float));
    memset(r->wtp, 0xff, nw * sizeof(float));
    calf_error err;
    const variant *v = r->v;
    r->rc = v->nn_linear_forward(r->x, r->w, r->b, r->B, FC_IN, FC_OUT, r->y, &err);
    void (*const params[])(const float *, const float *, int, int, int, float *, float *) = {
        v->nn_linear_backward_params, v->nn_linear_backward_params_set,
        v->nn_linear_backward_params_add};
    for (int mode = 0; mode < 3; mode++) {
        memcpy(r->dw[mode], r->dw0, nw * sizeof(float));
        memcpy(r->db[mode], r->db0, FC_OUT * sizeof(float));
        params[mode](r->x, r->dy, r->B, FC_IN, FC_OUT, r->dw[mode], r->db[mode]);
    }
    v->nn_linear_backward_input(r->dy, r->wt, r->B, FC_IN, FC_OUT, r->dx);
    v->nn_wt_pack(r->w, FC_IN, FC_OUT, r->wtp);
    v->nn_linear_backward_input_wt(r->dy, r->wtp, r->B, FC_IN, FC_OUT, r->dx_wt);
#ifdef CALF_TEST_WRAP_ALLOC
    refuse_alloc = false;
    r->refused = refused;
#endif
    return NULL;
}

static void fc_run_outputs(fc_run *r, bool alloc) {
    size_t ny = (size_t)FC_MAX_ROWS * FC_OUT, nx = (size_t)FC_MAX_ROWS * FC_IN;
    size_t nw = (size_t)FC_IN * FC_OUT;
    float **outs[] = {&r->y, &r->dw[0], &r->dw[1], &r->dw[2], &r->db[0], &r->db[1], &r->db[2],
                      &r->dx, &r->wtp, &r->dx_wt};
    size_t sizes[] = {ny, nw, nw, nw, FC_OUT, FC_OUT, FC_OUT, nx, nw, nx};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        if (alloc) *outs[i] = floats(sizes[i]);
        else free(*outs[i]);
    }
}

/* Whether two runs wrote the same bytes. */
static bool fc_same(const fc_run *a, const fc_run *b) {
    size_t ny = (size_t)a->B * FC_OUT, nx = (size_t)a->B * FC_IN, nw = (size_t)FC_IN * FC_OUT;
    bool ok = a->rc == b->rc && same(a->y, b->y, ny) && same(a->dx, b->dx, nx) &&
              same(a->wtp, b->wtp, nw) && same(a->dx_wt, b->dx_wt, nx);
    for (int mode = 0; mode < 3; mode++)
        ok = ok && same(a->dw[mode], b->dw[mode], nw) && same(a->db[mode], b->db[mode], FC_OUT);
    return ok;
}

/* The small stack: 64 KiB (the old packed forward's 160 KiB, or fma's 64 KiB beside the
 * thread's own, overflowed it). A sanitized or unoptimized build gives every inlined
 * tile's registers a frame slot of their own (gemm_rows alone: 157 KiB with avx512 under
 * ASan at -O3, 243 KiB at -O0; 0.6 KiB optimized), so there 384 KiB: the bytes and the
 * path without scratch are still checked, and at -O0 the old 160 KiB still overflows. */
#define SMALL_STACK (TEST_LARGE_FRAMES ? 384 * 1024 : 64 * 1024)

static void test_small_stack(void) {
    const variant *variants[] = {&generic_variant,
#if CALF_KERNELS_FMA
                                 cpu_fma() ? &fma_variant : NULL,
                                 cpu_avx512() ? &avx512_variant : NULL
#endif
    };
    size_t nx = (size_t)FC_MAX_ROWS * FC_IN, nw = (size_t)FC_IN * FC_OUT;
    float *x = floats(nx), *w = floats(nw), *b = floats(FC_OUT);
    float *dy = floats((size_t)FC_MAX_ROWS * FC_OUT), *wt = floats(nw), *dw0 = floats(nw);
    float *db0 = floats(FC_OUT);
    calf_rng_seed(&g_rng, 36, 0, 0);
    fill(x, nx, 0), fill(w, nw, 0), fill(b, FC_OUT, 0), fill(dy, (size_t)FC_MAX_ROWS * FC_OUT, 0);
    fill(dw0, nw, 0), fill(db0, FC_OUT, 0);
    nn_transpose_generic(w, FC_IN, FC_OUT, wt);
    static const int rows[] = {64, FC_MAX_ROWS};
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        const variant *k = variants[v];
        if (!k) continue;
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            fc_run main_run = {.v = k, .B = rows[i], .x = x, .w = w, .b = b, .dy = dy,
                               .wt = wt, .dw0 = dw0, .db0 = db0};
            fc_run small = main_run;
            fc_run_outputs(&main_run, true), fc_run_outputs(&small, true);
            fc_kernels_run(&main_run);
            CHECK_INT_EQ(main_run.rc, CALF_OK);
            bool ok = test_on_stack(SMALL_STACK, fc_kernels_run, &small) &&
                      fc_same(&main_run, &small);
            CHECK(ok);
            if (!ok)
                fprintf(stderr, "test_kernels: %s at %d rows on a %d KiB stack\n", k->name, rows[i],
                        SMALL_STACK / 1024);
#ifdef CALF_TEST_WRAP_ALLOC
            /* the scratch refused: the row tiles and dw_all_k, the same chains (the generic
             * variant asks for none) */
            small.refuse = true;
            ok = test_on_stack(SMALL_STACK, fc_kernels_run, &small) &&
                 fc_same(&main_run, &small);
            CHECK(ok);
            if (strcmp(k->name, "generic") != 0) CHECK(small.refused > 0);
            else CHECK_INT_EQ(small.refused, 0);
            if (!ok)
                fprintf(stderr, "test_kernels: %s at %d rows without scratch\n", k->name, rows[i]);
#endif
            fc_run_outputs(&main_run, false), fc_run_outputs(&small, false);
        }
    }
    float *ptrs[] = {x, w, b, dy, wt, dw0, db0};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) free(ptrs[i]);
}

int main(void) {
    test_choice();
    test_small_stack();
#if CALF_KERNELS_FMA
    if (cpu_fma()) test_variant(&fma_variant);
    else fprintf(stderr, "test_kernels: this CPU runs no fma variant; compared nothing\n");
    if (cpu_avx512()) test_variant(&avx512_variant);
    else fprintf(stderr, "test_kernels: this CPU runs no avx512 variant; not compared\n");
#endif
    return test_report("test_kernels");
}
