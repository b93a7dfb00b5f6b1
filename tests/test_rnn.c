/* test_rnn.c: the LSTM and GRU of src/numerics/rnn.h. Forward values and gradients
 * (parameters, inputs, initial state) against a double-precision reference of PyTorch's
 * equations and its central finite differences, over sequences with episode starts in the
 * middle; planted mistakes run through the same checker and must be rejected; every
 * output bit for bit against a scalar float reference of the documented order; a row
 * alone as in a batch; the acting step as the sequence's step; the gradient modes. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/cmath.h"
#include "calf/rng.h"
#include "numerics/rnn.h"
#include "test_util.h"

static calf_rng g_rng;

static float urand(float lo, float hi) { return lo + (hi - lo) * calf_rng_uniform_float(&g_rng); }

static void fill(float *a, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) a[i] = urand(lo, hi);
}

static bool bits_equal(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof(float)) == 0;
}

static const char *kind_name(rnn_kind k) { return k == RNN_LSTM ? "LSTM" : "GRU"; }

/* ------------------------------------------------------------ one problem */

/* A cell, its parameters, T x B inputs with episode starts, an initial state, and the
 * loss L = sum gy . y + ghT . hT + gcT . cT whose gradient every candidate returns. */
typedef struct {
    rnn_cell cell;
    int T, B;
    size_t np;    /* floats in the parameter array */
    float *params;
    float *x;     /* (T, B, in) */
    uint8_t *start; /* (T, B) */
    float *h0, *c0; /* (B, H) */
    float *gy;    /* (T, B, H) */
    float *ghT, *gcT; /* (B, H) */
} problem;

typedef struct {
    float *y, *hT, *cT; /* forward */
    float *grad;        /* (np), the cell's span written */
    float *dx, *dh0, *dc0;
} result;

static problem problem_make(rnn_kind kind, int in, int H, int T, int B) {
    problem p = {.T = T, .B = B};
    size_t cur = 3; /* an offset, so the layout's alignment is exercised */
    rnn_layout(&p.cell, kind, in, H, &cur);
    p.np = cur;
    size_t TB = (size_t)T * B, BH = (size_t)B * H;
    p.params = nn_alloc_floats(p.np, NULL);
    p.x = nn_alloc_floats(TB * in, NULL);
    p.start = calloc(TB, 1);
    p.h0 = nn_alloc_floats(BH, NULL), p.c0 = nn_alloc_floats(BH, NULL);
    p.gy = nn_alloc_floats(TB * H, NULL);
    p.ghT = nn_alloc_floats(BH, NULL), p.gcT = nn_alloc_floats(BH, NULL);
    const rnn_cell *c = &p.cell;
    size_t G = (size_t)c->gates;
    fill(p.params + c->w_ih_off, (size_t)in * G, -0.5f, 0.5f);
    fill(p.params + c->w_hh_off, (size_t)H * G, -0.5f, 0.5f);
    fill(p.params + c->b_ih_off, G, -0.5f, 0.5f);
    fill(p.params + c->b_hh_off, G, -0.5f, 0.5f);
    fill(p.x, TB * in, -1.0f, 1.0f);
    fill(p.h0, BH, -0.5f, 0.5f);
    if (kind == RNN_LSTM) fill(p.c0, BH, -0.5f, 0.5f);
    fill(p.gy, TB * H, -1.0f, 1.0f);
    fill(p.ghT, BH, -1.0f, 1.0f);
    if (kind == RNN_LSTM) fill(p.gcT, BH, -1.0f, 1.0f);
    return p;
}

static void problem_free(problem *p) {
    free(p->params), free(p->x), free(p->start), free(p->h0), free(p->c0), free(p->gy);
    free(p->ghT), free(p->gcT);
}

static result result_make(const problem *p) {
    size_t TB = (size_t)p->T * p->B, BH = (size_t)p->B * p->cell.hidden;
    result r;
    r.y = nn_alloc_floats(TB * p->cell.hidden, NULL);
    r.hT = nn_alloc_floats(BH, NULL), r.cT = nn_alloc_floats(BH, NULL);
    r.grad = nn_alloc_floats(p->np, NULL);
    r.dx = nn_alloc_floats(TB * p->cell.in, NULL);
    r.dh0 = nn_alloc_floats(BH, NULL), r.dc0 = nn_alloc_floats(BH, NULL);
    return r;
}

static void result_free(result *r) {
    free(r->y), free(r->hT), free(r->cT), free(r->grad), free(r->dx), free(r->dh0), free(r->dc0);
}

/* ------------------------------------------------------------ candidates */

/* The kernels on these params and starts; with leak_backward the backward forgets the
 * starts (the forward's values stay right). */
static void run_kernels(const problem *p, const float *params, const uint8_t *start,
                        bool leak_backward, result *o) {
    bool lstm = p->cell.kind == RNN_LSTM;
    rnn_cache k;
    CHECK_INT_EQ(rnn_cache_init(&k, &p->cell, p->T, p->B, NULL), CALF_OK);
    rnn_forward(&p->cell, params, &k, p->x, start, p->h0, lstm ? p->c0 : NULL, p->T, p->B,
                o->y, o->hT, lstm ? o->cT : NULL);
    if (leak_backward) memset(k.start, 0, (size_t)p->T * p->B);
    rnn_backward(&p->cell, params, &k, p->gy, p->ghT, lstm ? p->gcT : NULL, o->grad,
                 RNN_GRAD_SET, o->dx, o->dh0, lstm ? o->dc0 : NULL);
    rnn_cache_free(&k);
}

static void cand_real(const problem *p, result *o) { run_kernels(p, p->params, p->start, false, o); }

/* Mutants: the mistake planted at the kernels' interface, the gradient mapped back to
 * the true parameters wherever the mistake is a relabelling, so a mutant is what a cell
 * with that bug, forward and backward consistent, would return. */
typedef void (*param_map)(const rnn_cell *c, float *params);

/* each gate's H x H block of W_hh transposed (an involution) */
static void map_transpose_whh(const rnn_cell *c, float *w) {
    int H = c->hidden, G = c->gates;
    float *m = w + c->w_hh_off;
    for (int q = 0; q < G / H; q++)
        for (int i = 0; i < H; i++)
            for (int j = i + 1; j < H; j++) {
                float *a = m + (size_t)i * G + q * H + j, *b = m + (size_t)j * G + q * H + i;
                float t = *a;
                *a = *b, *b = t;
            }
}

/* the first two gates' columns swapped (LSTM i <-> f, GRU r <-> z) in all four blocks */
static void map_swap_gates(const rnn_cell *c, float *w) {
    int H = c->hidden, G = c->gates;
    struct {
        size_t off;
        int rows;
    } blocks[] = {{c->w_ih_off, c->in}, {c->w_hh_off, H}, {c->b_ih_off, 1}, {c->b_hh_off, 1}};
    for (int k = 0; k < 4; k++)
        for (int r = 0; r < blocks[k].rows; r++)
            for (int j = 0; j < H; j++) {
                float *row = w + blocks[k].off + (size_t)r * G;
                float t = row[j];
                row[j] = row[H + j], row[H + j] = t;
            }
}

static void run_mapped(const problem *p, param_map map, result *o) {
    float *q = nn_alloc_floats(p->np, NULL);
    memcpy(q, p->params, p->np * sizeof *q);
    map(&p->cell, q);
    run_kernels(p, q, p->start, false, o);
    map(&p->cell, o->grad);
    free(q);
}

static void mut_transpose_whh(const problem *p, result *o) { run_mapped(p, map_transpose_whh, o); }
static void mut_swap_gates(const problem *p, result *o) { run_mapped(p, map_swap_gates, o); }

/* the LSTM's forget-gate bias added twice: a_f = ... + 2 b_ih_f; d/db_ih_f doubles */
static void mut_forget_bias_twice(const problem *p, result *o) {
    const rnn_cell *c = &p->cell;
    int H = c->hidden;
    float *q = nn_alloc_floats(p->np, NULL);
    memcpy(q, p->params, p->np * sizeof *q);
    for (int j = 0; j < H; j++) q[c->b_ih_off + H + j] *= 2.0f;
    run_kernels(p, q, p->start, false, o);
    for (int j = 0; j < H; j++) o->grad[c->b_ih_off + H + j] *= 2.0f;
    free(q);
}

static void mut_no_reset_forward(const problem *p, result *o) { run_kernels(p, p->params, NULL, false, o); }
static void mut_no_reset_backward(const problem *p, result *o) { run_kernels(p, p->params, p->start, true, o); }

/* right forward, the W_hh gradient's gate blocks transposed: only the gradient is wrong */
static void mut_transposed_dwhh(const problem *p, result *o) {
    run_kernels(p, p->params, p->start, false, o);
    map_transpose_whh(&p->cell, o->grad);
}

/* ------------------------------------------------------------ double reference */

static double sigmoid_d(double v) { return 1.0 / (1.0 + cm_exp(-v)); }

/* PyTorch's equations in double, straight from the definitions (rnn.h's comment). The
 * variables are one vector: the cell's span of params, then x, h0, c0, at the offsets
 * of var_layout. Returns L; y, hT, cT (double) when not NULL. */
typedef struct {
    size_t p, x, h0, c0, n; /* offsets of the parts, total */
} var_layout;

static var_layout vars_of(const problem *p) {
    var_layout v;
    size_t BH = (size_t)p->B * p->cell.hidden;
    v.p = 0;
    v.x = p->np;
    v.h0 = v.x + (size_t)p->T * p->B * p->cell.in;
    v.c0 = v.h0 + BH;
    v.n = v.c0 + BH;
    return v;
}

static double ref_loss(const problem *p, const double *v, double *y, double *hT, double *cT) {
    const rnn_cell *c = &p->cell;
    var_layout L = vars_of(p);
    int H = c->hidden, G = c->gates, in = c->in;
    const double *Wih = v + c->w_ih_off, *Whh = v + c->w_hh_off, *bih = v + c->b_ih_off,
                 *bhh = v + c->b_hh_off;
    double loss = 0.0;
    double *h = malloc(sizeof(double) * H), *cc = malloc(sizeof(double) * H);
    double *ax = malloc(sizeof(double) * G), *ah = malloc(sizeof(double) * G);
    for (int b = 0; b < p->B; b++) {
        for (int j = 0; j < H; j++) {
            h[j] = v[L.h0 + (size_t)b * H + j];
            cc[j] = c->kind == RNN_LSTM ? v[L.c0 + (size_t)b * H + j] : 0.0;
        }
        for (int t = 0; t < p->T; t++) {
            if (p->start[(size_t)t * p->B + b])
                for (int j = 0; j < H; j++) h[j] = cc[j] = 0.0;
            const double *xr = v + L.x + ((size_t)t * p->B + b) * in;
            for (int o = 0; o < G; o++) {
                ax[o] = bih[o];
                ah[o] = bhh[o];
                for (int i = 0; i < in; i++) ax[o] += xr[i] * Wih[(size_t)i * G + o];
                for (int j = 0; j < H; j++) ah[o] += h[j] * Whh[(size_t)j * G + o];
            }
            for (int j = 0; j < H; j++) {
                if (c->kind == RNN_LSTM) {
                    double ig = sigmoid_d(ax[j] + ah[j]);
                    double fg = sigmoid_d(ax[H + j] + ah[H + j]);
                    double gg = cm_tanh(ax[2 * H + j] + ah[2 * H + j]);
                    double og = sigmoid_d(ax[3 * H + j] + ah[3 * H + j]);
                    cc[j] = fg * cc[j] + ig * gg;
                    ax[j] = og * cm_tanh(cc[j]); /* the new h, kept apart until all j */
                } else {
                    double r = sigmoid_d(ax[j] + ah[j]);
                    double z = sigmoid_d(ax[H + j] + ah[H + j]);
                    double n = cm_tanh(ax[2 * H + j] + r * ah[2 * H + j]);
                    ax[j] = (1.0 - z) * n + z * h[j];
                }
            }
            for (int j = 0; j < H; j++) {
                h[j] = ax[j];
                size_t e = ((size_t)t * p->B + b) * H + j;
                loss += (double)p->gy[e] * h[j];
                if (y) y[e] = h[j];
            }
        }
        for (int j = 0; j < H; j++) {
            size_t e = (size_t)b * H + j;
            loss += (double)p->ghT[e] * h[j];
            if (c->kind == RNN_LSTM) loss += (double)p->gcT[e] * cc[j];
            if (hT) hT[e] = h[j];
            if (cT) cT[e] = cc[j];
        }
    }
    free(h), free(cc), free(ax), free(ah);
    return loss;
}

/* ------------------------------------------------------------ the checker */

typedef struct {
    double fwd;      /* max |candidate - reference| over y, hT, cT */
    double grad;     /* worst block's max |candidate - fd| / max |fd| */
    const char *worst; /* that block's name */
} verdict;

enum { FWD_TOL_E6 = 10, GRAD_TOL_E4 = 1 }; /* 1e-5 absolute, 1e-4 of the block's scale */

static bool accepted(verdict v) { return v.fwd <= FWD_TOL_E6 * 1e-6 && v.grad <= GRAD_TOL_E4 * 1e-4; }

/* One block of the gradient: candidate a (n floats) against fd (n doubles). */
static void grade_block(verdict *v, const char *name, const float *a, const double *fd, size_t n) {
    double scale = 0.0, err = 0.0;
    for (size_t e = 0; e < n; e++) {
        if (fabs(fd[e]) > scale) scale = fabs(fd[e]);
        double d = fabs((double)a[e] - fd[e]);
        if (d > err) err = d;
    }
    double rel = err / (scale > 1e-6 ? scale : 1e-6);
    if (rel > v->grad) v->grad = rel, v->worst = name;
}

static verdict check_candidate(const problem *p, void (*cand)(const problem *, result *)) {
    const rnn_cell *c = &p->cell;
    bool lstm = c->kind == RNN_LSTM;
    int H = c->hidden, B = p->B, T = p->T;
    size_t BH = (size_t)B * H, TB = (size_t)T * B;
    var_layout L = vars_of(p);
    double *v = malloc(sizeof(double) * L.n), *fd = malloc(sizeof(double) * L.n);
    double *y = malloc(sizeof(double) * TB * H), *hT = malloc(sizeof(double) * BH),
           *cT = malloc(sizeof(double) * BH);
    for (size_t e = 0; e < p->np; e++) v[e] = p->params[e];
    for (size_t e = 0; e < TB * c->in; e++) v[L.x + e] = p->x[e];
    for (size_t e = 0; e < BH; e++) v[L.h0 + e] = p->h0[e], v[L.c0 + e] = p->c0[e];
    ref_loss(p, v, y, hT, cT);
    const double eps = 1e-5;
    for (size_t e = 0; e < L.n; e++) {
        double keep = v[e];
        v[e] = keep + eps;
        double lp = ref_loss(p, v, NULL, NULL, NULL);
        v[e] = keep - eps;
        double lm = ref_loss(p, v, NULL, NULL, NULL);
        v[e] = keep;
        fd[e] = (lp - lm) / (2.0 * eps);
    }
    result o = result_make(p);
    cand(p, &o);
    verdict out = {0.0, 0.0, "none"};
    for (size_t e = 0; e < TB * H; e++) out.fwd = fmax(out.fwd, fabs((double)o.y[e] - y[e]));
    for (size_t e = 0; e < BH; e++) {
        out.fwd = fmax(out.fwd, fabs((double)o.hT[e] - hT[e]));
        if (lstm) out.fwd = fmax(out.fwd, fabs((double)o.cT[e] - cT[e]));
    }
    size_t G = (size_t)c->gates;
    grade_block(&out, "W_ih", o.grad + c->w_ih_off, fd + c->w_ih_off, (size_t)c->in * G);
    grade_block(&out, "W_hh", o.grad + c->w_hh_off, fd + c->w_hh_off, (size_t)H * G);
    grade_block(&out, "b_ih", o.grad + c->b_ih_off, fd + c->b_ih_off, G);
    grade_block(&out, "b_hh", o.grad + c->b_hh_off, fd + c->b_hh_off, G);
    grade_block(&out, "x", o.dx, fd + L.x, TB * c->in);
    grade_block(&out, "h0", o.dh0, fd + L.h0, BH);
    if (lstm) grade_block(&out, "c0", o.dc0, fd + L.c0, BH);
    result_free(&o);
    free(v), free(fd), free(y), free(hT), free(cT);
    return out;
}

static void report(const problem *p, const char *name, verdict v) {
    printf("  %-4s %-34s forward max|y-ref| %.2e, gradient worst %-4s %.2e -> %s\n",
           kind_name(p->cell.kind), name, v.fwd, v.worst, v.grad,
           accepted(v) ? "accepted" : "REJECTED");
}

/* T = 6, B = 3: row 0 starts an episode at t = 2, row 1 at t = 4, row 2 at t = 0 (its
 * initial state unused: its gradient must come out 0). H = 7 puts the gate columns
 * (28, 21) over 16-, 8- and 4-wide tiles and single columns. */
static void test_fd_and_mutants(rnn_kind kind) {
    problem p = problem_make(kind, 5, 7, 6, 3);
    p.start[2 * 3 + 0] = 1;
    p.start[4 * 3 + 1] = 1;
    p.start[0 * 3 + 2] = 1;
    printf("%s, in 5, hidden 7, T 6, B 3, episode starts at (t 2, row 0), (t 4, row 1), "
           "(t 0, row 2): candidates against the double reference and its central differences "
           "(eps 1e-5); accepted when forward <= %.0e and every block's gradient <= %.0e of "
           "its scale\n",
           kind_name(kind), FWD_TOL_E6 * 1e-6, GRAD_TOL_E4 * 1e-4);
    verdict v = check_candidate(&p, cand_real);
    report(&p, "the kernels", v);
    CHECK(accepted(v));
    /* row 2 reset at t = 0: nothing reaches its initial state */
    {
        result o = result_make(&p);
        cand_real(&p, &o);
        for (int j = 0; j < p.cell.hidden; j++) {
            CHECK(o.dh0[2 * p.cell.hidden + j] == 0.0f);
            if (kind == RNN_LSTM) CHECK(o.dc0[2 * p.cell.hidden + j] == 0.0f);
        }
        result_free(&o);
    }
    struct {
        const char *name;
        void (*fn)(const problem *, result *);
        bool lstm_only;
    } mutants[] = {
        {"mutant: forget-gate bias twice", mut_forget_bias_twice, true},
        {"mutant: no reset (forward)", mut_no_reset_forward, false},
        {"mutant: no reset (backward only)", mut_no_reset_backward, false},
        {"mutant: W_hh transposed", mut_transpose_whh, false},
        {"mutant: dW_hh transposed (backward)", mut_transposed_dwhh, false},
        {"mutant: gates 0 and 1 swapped", mut_swap_gates, false},
    };
    for (size_t m = 0; m < sizeof mutants / sizeof mutants[0]; m++) {
        if (mutants[m].lstm_only && kind != RNN_LSTM) continue;
        verdict w = check_candidate(&p, mutants[m].fn);
        report(&p, mutants[m].name, w);
        CHECK(!accepted(w));
    }
    problem_free(&p);
}

/* ------------------------------------------------------------ the documented order */

static float sig_f(float v) { return nn_madd(0.5f, nn_tanh1(0.5f * v), 0.5f); }

/* A planted mistake for the order check: the new state with two roundings, not fused
 * (LSTM c' = f c + i g, GRU h' = (1 - z) n + z h): the same math, other bits. */
static bool g_ord_unfused;

/* rnn.h's order written out one element at a time: forward keeps the state read, the
 * gates and aux per (t, b) as the kernels do, then backward. Outputs as result. */
static void ord_run(const problem *p, result *o) {
    const rnn_cell *c = &p->cell;
    bool lstm = c->kind == RNN_LSTM;
    int H = c->hidden, G = c->gates, in = c->in, T = p->T, B = p->B;
    size_t TB = (size_t)T * B;
    const float *Wih = p->params + c->w_ih_off, *Whh = p->params + c->w_hh_off,
                *bih = p->params + c->b_ih_off, *bhh = p->params + c->b_hh_off;
    float *hp = calloc(TB * H, 4), *cp = calloc(TB * H, 4), *act = calloc(TB * G, 4);
    float *aux = calloc(TB * H, 4), *dgx = calloc(TB * G, 4), *dgh = calloc(TB * G, 4);
    float *ax = calloc(G, 4), *ah = calloc(G, 4);
    for (int b = 0; b < B; b++) {
        float *h = calloc(H, 4), *cc = calloc(H, 4);
        for (int j = 0; j < H; j++) h[j] = p->h0[b * H + j], cc[j] = lstm ? p->c0[b * H + j] : 0;
        for (int t = 0; t < T; t++) {
            size_t r = (size_t)t * B + b;
            if (p->start[r])
                for (int j = 0; j < H; j++) h[j] = cc[j] = 0.0f;
            for (int j = 0; j < H; j++) hp[r * H + j] = h[j], cp[r * H + j] = cc[j];
            for (int q = 0; q < G; q++) {
                ax[q] = bih[q], ah[q] = bhh[q];
                for (int i = 0; i < in; i++) ax[q] = nn_madd(p->x[r * in + i], Wih[(size_t)i * G + q], ax[q]);
                for (int j = 0; j < H; j++) ah[q] = nn_madd(h[j], Whh[(size_t)j * G + q], ah[q]);
            }
            float *a = act + r * G;
            for (int j = 0; j < H; j++) {
                if (lstm) {
                    a[j] = sig_f(ax[j] + ah[j]);
                    a[H + j] = sig_f(ax[H + j] + ah[H + j]);
                    a[2 * H + j] = nn_tanh1(ax[2 * H + j] + ah[2 * H + j]);
                    a[3 * H + j] = sig_f(ax[3 * H + j] + ah[3 * H + j]);
                    cc[j] = g_ord_unfused ? a[H + j] * cc[j] + a[j] * a[2 * H + j]
                                          : nn_madd(a[H + j], cc[j], a[j] * a[2 * H + j]);
                    aux[r * H + j] = nn_tanh1(cc[j]);
                    h[j] = a[3 * H + j] * aux[r * H + j];
                } else {
                    a[j] = sig_f(ax[j] + ah[j]);
                    a[H + j] = sig_f(ax[H + j] + ah[H + j]);
                    aux[r * H + j] = ah[2 * H + j];
                    a[2 * H + j] = nn_tanh1(nn_madd(a[j], ah[2 * H + j], ax[2 * H + j]));
                }
            }
            if (!lstm)
                for (int j = 0; j < H; j++)
                    h[j] = g_ord_unfused ? (1.0f - a[H + j]) * a[2 * H + j] + a[H + j] * h[j]
                                         : nn_madd(a[H + j], h[j] - a[2 * H + j], a[2 * H + j]);
            for (int j = 0; j < H; j++) o->y[r * H + j] = h[j];
        }
        for (int j = 0; j < H; j++) o->hT[b * H + j] = h[j], o->cT[b * H + j] = cc[j];
        /* backward of this row: rows are independent until the weight sums */
        float *dh = calloc(H, 4), *dc = calloc(H, 4), *nd = calloc(H, 4);
        for (int j = 0; j < H; j++) dh[j] = p->ghT[b * H + j], dc[j] = lstm ? p->gcT[b * H + j] : 0;
        for (int t = T - 1; t >= 0; t--) {
            size_t r = (size_t)t * B + b;
            const float *a = act + r * G, *u = aux + r * H;
            float *gx = dgx + r * G, *gh = dgh + r * G;
            for (int j = 0; j < H; j++) dh[j] = dh[j] + p->gy[r * H + j];
            for (int j = 0; j < H; j++) {
                if (lstm) {
                    float ig = a[j], fg = a[H + j], gg = a[2 * H + j], og = a[3 * H + j];
                    float dcs = nn_madd(dh[j] * og, 1.0f - u[j] * u[j], dc[j]);
                    gx[j] = (dcs * gg) * (ig * (1.0f - ig));
                    gx[H + j] = (dcs * cp[r * H + j]) * (fg * (1.0f - fg));
                    gx[2 * H + j] = (dcs * ig) * (1.0f - gg * gg);
                    gx[3 * H + j] = (dh[j] * u[j]) * (og * (1.0f - og));
                    dc[j] = dcs * fg;
                    for (int q = 0; q < 4; q++) gh[q * H + j] = gx[q * H + j];
                } else {
                    float rg = a[j], z = a[H + j], n = a[2 * H + j];
                    float dn = (dh[j] * (1.0f - z)) * (1.0f - n * n);
                    float dz = (dh[j] * (hp[r * H + j] - n)) * (z * (1.0f - z));
                    float dr = (dn * u[j]) * (rg * (1.0f - rg));
                    gx[j] = gh[j] = dr;
                    gx[H + j] = gh[H + j] = dz;
                    gx[2 * H + j] = dn;
                    gh[2 * H + j] = dn * rg;
                }
            }
            for (int i = 0; i < H; i++) {
                float s = 0.0f;
                for (int q = 0; q < G; q++) s = nn_madd(gh[q], Whh[(size_t)i * G + q], s);
                nd[i] = lstm ? s : nn_madd(dh[i], a[H + i], s);
            }
            for (int j = 0; j < H; j++) {
                dh[j] = p->start[r] ? 0.0f : nd[j];
                if (p->start[r]) dc[j] = 0.0f;
            }
        }
        for (int j = 0; j < H; j++) o->dh0[b * H + j] = dh[j], o->dc0[b * H + j] = dc[j];
        free(h), free(cc), free(dh), free(dc), free(nd);
    }
    /* parameter gradients: chains over rows (t, b) ascending, from +0 (SET) */
    memset(o->grad, 0, p->np * sizeof(float));
    for (int q = 0; q < G; q++) {
        for (int i = 0; i < in; i++) {
            float s = 0.0f;
            for (size_t r = 0; r < TB; r++) s = nn_madd(p->x[r * in + i], dgx[r * G + q], s);
            o->grad[c->w_ih_off + (size_t)i * G + q] = s;
        }
        for (int j = 0; j < H; j++) {
            float s = 0.0f;
            for (size_t r = 0; r < TB; r++) s = nn_madd(hp[r * H + j], dgh[r * G + q], s);
            o->grad[c->w_hh_off + (size_t)j * G + q] = s;
        }
        float s = 0.0f, u = 0.0f;
        for (size_t r = 0; r < TB; r++) s = s + dgx[r * G + q], u = u + dgh[r * G + q];
        o->grad[c->b_ih_off + q] = s;
        o->grad[c->b_hh_off + q] = u;
    }
    for (size_t r = 0; r < TB; r++)
        for (int i = 0; i < in; i++) {
            float s = 0.0f;
            for (int q = 0; q < G; q++) s = nn_madd(dgx[r * G + q], Wih[(size_t)i * G + q], s);
            o->dx[r * in + i] = s;
        }
    free(hp), free(cp), free(act), free(aux), free(dgx), free(dgh), free(ax), free(ah);
}

static int compare_results(const problem *p, const result *a, const result *b, bool grads) {
    size_t TB = (size_t)p->T * p->B, BH = (size_t)p->B * p->cell.hidden;
    bool lstm = p->cell.kind == RNN_LSTM;
    int bad = 0;
    bad += !bits_equal(a->y, b->y, TB * p->cell.hidden);
    bad += !bits_equal(a->hT, b->hT, BH);
    if (lstm) bad += !bits_equal(a->cT, b->cT, BH);
    bad += !bits_equal(a->dx, b->dx, TB * p->cell.in);
    bad += !bits_equal(a->dh0, b->dh0, BH);
    if (lstm) bad += !bits_equal(a->dc0, b->dc0, BH);
    if (grads) bad += !bits_equal(a->grad, b->grad, p->np);
    return bad;
}

/* Shapes over the tilings: gate widths 4H and 3H of 20 -> 80, 60 (16-wide tiles and a
 * 4-wide rest), 3 -> 12, 9 (8 + 4, 8 + 1), 33 -> 132, 99; B over the row blocks (6, 8,
 * 4, 1 rows; 13 = 6 + 6 + 1). The last, (150, 50, 24, 20), takes rnn.c's column panels
 * (gates 200 and 150, dX's 150 inputs: 64-column panels and the rest), row blocks (480 rows) and
 * weight-gradient chunks (187 and 218 rows for dW_ih, 262 and 327 for dW_hh). */
static void test_order(rnn_kind kind) {
    const int shapes[][4] = {{37, 20, 5, 13}, {4, 3, 7, 2}, {64, 33, 3, 9}, {11, 16, 4, 1},
                             {150, 50, 24, 20}};
    int bad = 0, n = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        problem p = problem_make(kind, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3]);
        for (size_t r = 0; r < (size_t)p.T * p.B; r++) p.start[r] = calf_rng_uniform_float(&g_rng) < 0.2f;
        result k = result_make(&p), ref = result_make(&p);
        cand_real(&p, &k);
        ord_run(&p, &ref);
        int d = compare_results(&p, &k, &ref, true);
        CHECK_INT_EQ(d, 0);
        bad += d, n++;
        result_free(&k), result_free(&ref);
        problem_free(&p);
    }
    printf("%s: kernels against the scalar reference of rnn.h's order, %d shapes (in, H, T, B) "
           "= (37,20,5,13) (4,3,7,2) (64,33,3,9) (11,16,4,1) (150,50,24,20), random starts: y, "
           "hT, cT, dx, dh0, dc0 and every parameter gradient bit for bit: %d differing\n",
           kind_name(kind), n, bad);
    /* the same check must see a reference one rounding away */
    problem p = problem_make(kind, 37, 20, 5, 13);
    result k = result_make(&p), ref = result_make(&p);
    cand_real(&p, &k);
    g_ord_unfused = true;
    ord_run(&p, &ref);
    g_ord_unfused = false;
    int d = compare_results(&p, &k, &ref, true);
    CHECK(d > 0);
    printf("%s: mutant: the reference's new state unfused (two roundings): %d outputs differ "
           "-> %s\n", kind_name(kind), d, d ? "REJECTED" : "accepted");
    result_free(&k), result_free(&ref);
    problem_free(&p);
}

/* Row b alone (B = 1) gives the bits it gives inside the batch: outputs and input
 * gradients. Then the acting step, fed the states one after another, gives y[t] and
 * the final c bit for bit. in 150, H 40: the sequence's products go through rnn.c's
 * column panels (gates 160, inputs 150), the step's through one call. */
static void test_rows_and_step(rnn_kind kind) {
    bool lstm = kind == RNN_LSTM;
    problem p = problem_make(kind, 150, 40, 5, 13);
    for (size_t r = 0; r < (size_t)p.T * p.B; r++) p.start[r] = calf_rng_uniform_float(&g_rng) < 0.2f;
    int H = p.cell.hidden, in = p.cell.in, T = p.T, B = p.B;
    result all = result_make(&p);
    cand_real(&p, &all);
    int bad_rows = 0;
    for (int b = 0; b < B; b++) {
        problem q = problem_make(kind, in, H, T, 1);
        memcpy(q.params, p.params, p.np * sizeof(float));
        for (int t = 0; t < T; t++) {
            memcpy(q.x + (size_t)t * in, p.x + ((size_t)t * B + b) * in, (size_t)in * 4);
            memcpy(q.gy + (size_t)t * H, p.gy + ((size_t)t * B + b) * H, (size_t)H * 4);
            q.start[t] = p.start[(size_t)t * B + b];
        }
        memcpy(q.h0, p.h0 + (size_t)b * H, (size_t)H * 4);
        memcpy(q.c0, p.c0 + (size_t)b * H, (size_t)H * 4);
        memcpy(q.ghT, p.ghT + (size_t)b * H, (size_t)H * 4);
        memcpy(q.gcT, p.gcT + (size_t)b * H, (size_t)H * 4);
        result one = result_make(&q);
        cand_real(&q, &one);
        for (int t = 0; t < T; t++) {
            bad_rows += !bits_equal(one.y + (size_t)t * H, all.y + ((size_t)t * B + b) * H, (size_t)H);
            bad_rows += !bits_equal(one.dx + (size_t)t * in, all.dx + ((size_t)t * B + b) * in, (size_t)in);
        }
        bad_rows += !bits_equal(one.hT, all.hT + (size_t)b * H, (size_t)H);
        bad_rows += !bits_equal(one.dh0, all.dh0 + (size_t)b * H, (size_t)H);
        if (lstm) {
            bad_rows += !bits_equal(one.cT, all.cT + (size_t)b * H, (size_t)H);
            bad_rows += !bits_equal(one.dc0, all.dc0 + (size_t)b * H, (size_t)H);
        }
        result_free(&one);
        problem_free(&q);
    }
    CHECK_INT_EQ(bad_rows, 0);
    printf("%s: each of 13 rows alone (B = 1) against inside the batch: y, hT, cT, dx, dh0, "
           "dc0 bit for bit: %d differing\n", kind_name(kind), bad_rows);

    rnn_cache k;
    CHECK_INT_EQ(rnn_cache_init(&k, &p.cell, 1, B, NULL), CALF_OK);
    float *h = nn_alloc_floats((size_t)B * H, NULL), *c = nn_alloc_floats((size_t)B * H, NULL);
    memcpy(h, p.h0, (size_t)B * H * 4);
    memcpy(c, p.c0, (size_t)B * H * 4);
    int bad_steps = 0;
    for (int t = 0; t < T; t++) {
        rnn_step(&p.cell, p.params, &k, p.x + (size_t)t * B * in, p.start + (size_t)t * B, B, h,
                 lstm ? c : NULL);
        bad_steps += !bits_equal(h, all.y + (size_t)t * B * H, (size_t)B * H);
    }
    if (lstm) bad_steps += !bits_equal(c, all.cT, (size_t)B * H);
    CHECK_INT_EQ(bad_steps, 0);
    printf("%s: rnn_step over the 5 steps against the sequence forward: h per step and the "
           "final c bit for bit: %d differing\n", kind_name(kind), bad_steps);
    /* a planted mistake the step check must see: one step skipping the reset */
    memcpy(h, p.h0, (size_t)B * H * 4);
    memcpy(c, p.c0, (size_t)B * H * 4);
    int seen = 0;
    for (int t = 0; t < T; t++) {
        rnn_step(&p.cell, p.params, &k, p.x + (size_t)t * B * in, NULL, B, h, lstm ? c : NULL);
        seen += !bits_equal(h, all.y + (size_t)t * B * H, (size_t)B * H);
    }
    CHECK(seen > 0);
    printf("%s: mutant: steps without their episode starts: %d of %d steps differ -> %s\n",
           kind_name(kind), seen, T, seen ? "REJECTED" : "accepted");
    free(h), free(c);
    rnn_cache_free(&k);
    result_free(&all);
    problem_free(&p);
}

/* SET is ACC onto zeros, ADD is grad + SET (over 480 rows: in weight-gradient chunks);
 * a fresh init is CleanRL's. */
static void test_modes_and_init(rnn_kind kind) {
    bool lstm = kind == RNN_LSTM;
    problem p = problem_make(kind, 150, 50, 24, 20);
    rnn_cache k;
    CHECK_INT_EQ(rnn_cache_init(&k, &p.cell, p.T, p.B, NULL), CALF_OK);
    float *set = nn_alloc_floats(p.np, NULL), *acc = nn_alloc_floats(p.np, NULL);
    float *add = nn_alloc_floats(p.np, NULL), *base = nn_alloc_floats(p.np, NULL);
    fill(set, p.np, -1, 1);
    fill(base, p.np, -1, 1);
    memcpy(add, base, p.np * 4);
    rnn_forward(&p.cell, p.params, &k, p.x, p.start, p.h0, lstm ? p.c0 : NULL, p.T, p.B, NULL,
                NULL, NULL);
    rnn_backward(&p.cell, p.params, &k, p.gy, NULL, NULL, set, RNN_GRAD_SET, NULL, NULL, NULL);
    rnn_backward(&p.cell, p.params, &k, p.gy, NULL, NULL, acc, RNN_GRAD_ACC, NULL, NULL, NULL);
    rnn_backward(&p.cell, p.params, &k, p.gy, NULL, NULL, add, RNN_GRAD_ADD, NULL, NULL, NULL);
    /* acc started from zeros, so it holds the SET chain; rnn's spans only */
    int bad = 0;
    const rnn_cell *c = &p.cell;
    size_t offs[4] = {c->w_ih_off, c->w_hh_off, c->b_ih_off, c->b_hh_off};
    size_t lens[4] = {(size_t)c->in * c->gates, (size_t)c->hidden * c->gates, (size_t)c->gates,
                      (size_t)c->gates};
    for (int b = 0; b < 4; b++)
        for (size_t e = offs[b]; e < offs[b] + lens[b]; e++) {
            bad += memcmp(&set[e], &acc[e], 4) != 0;
            float want = base[e] + set[e];
            bad += memcmp(&add[e], &want, 4) != 0;
        }
    CHECK_INT_EQ(bad, 0);
    printf("%s: gradient modes: SET == ACC onto zeros, ADD == grad + SET, bit for bit: %d "
           "differing\n", kind_name(kind), bad);
    /* init: W_ih^T W_ih-style orthonormality along the short side, zero biases */
    CHECK_INT_EQ(rnn_init(c, p.params, &g_rng, NULL), CALF_OK);
    double worst = 0.0;
    const float *w = p.params + c->w_hh_off; /* (H, G), H < G: orthonormal rows */
    for (int i = 0; i < c->hidden; i++)
        for (int j = 0; j < c->hidden; j++) {
            double d = 0.0;
            for (int q = 0; q < c->gates; q++) d += (double)w[i * c->gates + q] * w[j * c->gates + q];
            worst = fmax(worst, fabs(d - (i == j)));
        }
    CHECK(worst < 1e-5);
    int nonzero = 0;
    for (int q = 0; q < c->gates; q++) nonzero += p.params[c->b_ih_off + q] != 0.0f || p.params[c->b_hh_off + q] != 0.0f;
    CHECK_INT_EQ(nonzero, 0);
    printf("%s: init: W_hh rows orthonormal to %.1e, biases zero (%d nonzero)\n",
           kind_name(kind), worst, nonzero);
    free(set), free(acc), free(add), free(base);
    rnn_cache_free(&k);
    problem_free(&p);
}

int main(void) {
    calf_rng_seed(&g_rng, 36, 0, CALF_RNG_INIT);
    for (int k = 0; k < 2; k++) {
        rnn_kind kind = k == 0 ? RNN_LSTM : RNN_GRU;
        test_fd_and_mutants(kind);
        test_order(kind);
        test_rows_and_step(kind);
        test_modes_and_init(kind);
    }
    return test_report("test_rnn");
}
