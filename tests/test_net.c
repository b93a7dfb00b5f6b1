/* test_net.c: networks as layers (net.h). An fc-only spec is nn_mlp bit for bit (layout,
 * both inits, forward, the three backward modes); conv+fc networks' gradients against
 * finite differences of a double-precision reference; a row's bits alone, in a batch and
 * across row splits and tree adds; uint8 input; recurrent cores (LSTM, GRU, after conv and
 * fc layers or a Dict's encoder) through time against finite differences of a double
 * reference of the sequence, and stepped one row at a time
 * against the sequence; a Dict's per-key encoder (net_config's segments from the parts,
 * its gradients and rows as above). Each checker is also run on planted mistakes (the
 * ReLU's mask skipped, a flatten in PyTorch's NCHW order, ADD done as accumulate, a row
 * reading its neighbour, the byte scale left out, a gate bias applied twice, a state not
 * reset at an episode start, a conv layer's gradient through a core dropped, a Dict's parts concatenated out of order or one part's
 * gradient dropped) and must reject them. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "algorithms/net_config.h"
#include "calf/config.h"
#include "calf/rng.h"
#include "numerics/net.h"
#include "test_util.h"

static calf_rng g_rng;

static void fill(float *a, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) a[i] = lo + (hi - lo) * calf_rng_uniform_float(&g_rng);
}

static bool same_bits(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof(float)) == 0;
}

/* ------------------------------------------------------------ implementations */

typedef void (*forward_fn)(const net *, const float *, const float *, int, net_cache *, float *);
typedef void (*backward_fn)(const net *, const float *, net_cache *, int, int, const float *,
                            float *, float *);

typedef struct {
    const char *name;
    forward_fn forward;
    backward_fn backward;     /* accumulating */
    backward_fn backward_set;
    backward_fn backward_add;
} impl;

static void real_forward(const net *n, const float *p, const float *x, int B, net_cache *c,
                         float *y) {
    net_forward(n, p, x, B, c, y);
}

static const impl REAL = {"net", real_forward, net_backward, net_backward_set, net_backward_add};

/* Mistake: the ReLU after the first conv not differentiated (its mask skipped): the
 * layers' backwards chained by hand, conv2d's called on the raw dy. For specs of one conv
 * layer and the MLP. */
static void mut_nomask_backward(const net *n, const float *p, net_cache *c, int rb, int rn,
                                const float *dy, float *grad, float *dx) {
    CALF_ASSERT(n->num_layers == 2 && n->layer[0].kind == NET_CONV2D);
    float *d = c->d[0];
    nn_mlp_backward(&n->layer[1].mlp, p, &c->lc[1].mlp, rb, rn, dy, grad, d);
    conv2d_backward(&n->layer[0].conv, p, &c->lc[0].conv, rb, rn, d, grad, dx);
}
static const impl NOMASK = {"relu mask skipped", real_forward, mut_nomask_backward, NULL, NULL};

/* Mistake: flatten in PyTorch's (F, OH, OW) order where the fc reads NHWC rows: the
 * forward permutes the conv's output before the MLP; backward is the real one. */
static void mut_nchw_forward(const net *n, const float *p, const float *x, int B, net_cache *c,
                             float *y) {
    CALF_ASSERT(n->num_layers == 2 && n->layer[0].kind == NET_CONV2D);
    net_forward(n, p, x, B, c, y);
    const conv2d *cv = &n->layer[0].conv;
    int P = cv->out_h * cv->out_w, F = cv->filters;
    float *t = malloc((size_t)P * F * sizeof *t);
    CALF_ASSERT(t);
    for (int r = 0; r < B; r++) {
        float *o = c->out[0] + (size_t)r * P * F;
        for (int q = 0; q < P; q++)
            for (int f = 0; f < F; f++) t[(size_t)f * P + q] = o[(size_t)q * F + f];
        memcpy(o, t, (size_t)P * F * sizeof *t);
    }
    free(t);
    nn_mlp_forward(&n->layer[1].mlp, p, c->out[0], B, &c->lc[1].mlp, y);
}
static const impl NCHW = {"flatten in NCHW order", mut_nchw_forward, net_backward, NULL, NULL};

/* Mistake: a tree add done by accumulating onto the left sibling (the chains continue
 * from its values) instead of left + this partial. */
static const impl ADD_AS_ACC = {"add as accumulate", real_forward, net_backward, net_backward_set,
                                net_backward};

/* Mistake: each row reads one float of its neighbour (an input offset off by one). */
static void mut_shift_forward(const net *n, const float *p, const float *x, int B, net_cache *c,
                              float *y) {
    size_t m = (size_t)B * n->in;
    float *s = calloc(m, sizeof *s);
    CALF_ASSERT(s);
    memcpy(s, x + 1, (m - 1) * sizeof *s);
    net_forward(n, p, s, B, c, y);
    free(s);
}
static const impl SHIFT = {"input off by one", mut_shift_forward, net_backward, net_backward_set,
                           net_backward_add};

/* Mistake: a Dict encoder's first two segments concatenated in the wrong order (the
 * forward of a copy of the net whose segments' columns are swapped). */
static void mut_swap_forward(const net *n, const float *p, const float *x, int B, net_cache *c,
                             float *y) {
    CALF_ASSERT(n->num_segs >= 2);
    net m = *n;
    m.seg[1].col = n->seg[0].col;
    m.seg[0].col = n->seg[0].col + n->seg[1].width;
    net_forward(&m, p, x, B, c, y);
}
static const impl SWAP = {"Dict parts concatenated out of order", mut_swap_forward, net_backward,
                          NULL, NULL};

/* Mistake: the backward leaves a Dict encoder's last segment out (its conv stack's
 * gradient, or its dx columns, dropped). */
static void mut_drop_backward(const net *n, const float *p, net_cache *c, int rb, int rn,
                              const float *dy, float *grad, float *dx) {
    net m = *n;
    m.num_segs--;
    if (dx) memset(dx, 0, (size_t)rn * n->in * sizeof *dx);
    net_backward(&m, p, c, rb, rn, dy, grad, dx);
}
static const impl DROP = {"a Dict part's gradient dropped", real_forward, mut_drop_backward, NULL,
                          NULL};

/* ------------------------------------------------------------ the specs */

static net_spec conv_spec(int h, int w, int c, int nconv, const net_conv_spec *conv, int nfc,
                          const int *fc, int out, nn_activation act) {
    net_spec s = net_spec_mlp(h * w * c, fc, nfc, out, act);
    s.in_h = h, s.in_w = w, s.in_c = c;
    s.num_conv = nconv;
    for (int k = 0; k < nconv; k++) s.conv[k] = conv[k];
    return s;
}

/* A Dict's per-key encoder (net_config builds it from the env's parts): the segments
 * given as (h, w, c) with h 0 for a vector run of w floats, each image through nconv
 * convs of its own; scale for the image segments. */
static net_spec dict_spec(int nseg, const int (*shape)[3], float scale, int nconv,
                          const net_conv_spec *conv, int nfc, const int *fc, int out,
                          nn_activation act) {
    net_spec s = net_spec_mlp(1, fc, nfc, out, act);
    int at = 0;
    for (int k = 0; k < nseg; k++) {
        const int *sh = shape[k];
        int size = sh[0] ? sh[0] * sh[1] * sh[2] : sh[1];
        s.seg[k] = sh[0] ? (net_seg){.offset = at, .size = size, .h = sh[0], .w = sh[1],
                                     .c = sh[2], .scale = scale}
                         : (net_seg){.offset = at, .size = size, .scale = 1.0f};
        at += size;
    }
    s.num_segs = nseg;
    s.in_dim = at;
    s.num_conv = nconv;
    for (int k = 0; k < nconv; k++) s.conv[k] = conv[k];
    return s;
}

/* ------------------------------------------------------------ double reference */

/* One conv layer + ReLU on one row in double. */
static void ref_conv(const conv2d *c, const double *p, const double *a, double *b) {
    CALF_ASSERT(conv2d_out_size(c) <= 4096);
    for (int oh = 0; oh < c->out_h; oh++)
        for (int ow = 0; ow < c->out_w; ow++)
            for (int f = 0; f < c->filters; f++) {
                double s = p[c->b_off + f];
                for (int kh = 0; kh < c->kernel; kh++)
                    for (int kw = 0; kw < c->kernel; kw++) {
                        int ih = oh * c->stride + kh - c->pad, iw = ow * c->stride + kw - c->pad;
                        if (ih < 0 || iw < 0 || ih >= c->in_h || iw >= c->in_w) continue;
                        for (int ch = 0; ch < c->in_c; ch++)
                            s += a[(ih * c->in_w + iw) * c->in_c + ch] *
                                 p[c->w_off + ((size_t)(kh * c->kernel + kw) * c->in_c + ch) *
                                                  c->filters + f];
                    }
                b[(oh * c->out_w + ow) * c->filters + f] = s > 0 ? s : 0;
            }
}

/* A Dict encoder's concatenation of one row in double, as SB3's CombinedExtractor: each
 * image part (times its scale) through its own convs, the vector runs as they are, in
 * order; without segments the row as it is. Into a (4096), returns its width. */
static int ref_encode(const net *n, const double *p, const double *x, double *a) {
    CALF_ASSERT(n->in <= 4096);
    if (n->num_segs == 0) {
        memcpy(a, x, (size_t)n->in * sizeof *a);
        return n->in;
    }
    int col = 0;
    for (int s = 0; s < n->num_segs; s++) {
        const net_seg *g = &n->seg[s];
        double u[4096], v[4096];
        for (int i = 0; i < g->size; i++) u[i] = x[g->offset + i] * (g->h ? g->scale : 1.0);
        int width = g->size;
        for (int k = g->first; k < g->first + g->count; k++) {
            ref_conv(&n->layer[k].conv, p, u, v);
            width = n->layer[k].out;
            memcpy(u, v, (size_t)width * sizeof *u);
        }
        memcpy(a + col, u, (size_t)width * sizeof *u);
        col += width;
    }
    return col;
}

/* A feed-forward layer (conv + ReLU, or an MLP block, its last layer activated where
 * act_out) on one row in double (tanh exact): a (4096, overwritten) into b. */
static void ref_layer(const net_layer *l, const double *p, double *a, double *b) {
    if (l->kind == NET_CONV2D) {
        ref_conv(&l->conv, p, a, b);
        return;
    }
    const nn_mlp *m = &l->mlp;
    double *in = a, *out = b;
    for (int j = 0; j < m->num_layers; j++) {
        int I = m->sizes[j], O = m->sizes[j + 1];
        for (int o = 0; o < O; o++) {
            double s = p[m->b_off[j] + o];
            for (int i = 0; i < I; i++) s += in[i] * p[m->w_off[j] + (size_t)i * O + o];
            if (j + 1 < m->num_layers || l->act_out)
                s = m->act == NN_ACT_TANH ? tanh(s) : (s > 0 ? s : 0);
            out[o] = s;
        }
        if (j + 1 < m->num_layers) {
            memcpy(in, out, (size_t)O * sizeof *in);
        }
    }
}

/* The network of n on one row in double from float parameters (tanh exact); a Dict
 * encoder's segments as ref_encode. */
static void ref_row(const net *n, const double *p, const double *x, double *y) {
    double a[4096], b[4096];
    ref_encode(n, p, x, a);
    for (int k = n->trunk; k < n->num_layers; k++) {
        const net_layer *l = &n->layer[k];
        ref_layer(l, p, a, b);
        memcpy(a, b, (size_t)l->out * sizeof *a);
    }
    memcpy(y, a, (size_t)n->out * sizeof *y);
}

/* L = sum over rows and outputs of g * y, in double */
static double ref_loss(const net *n, const double *p, const double *x, int B, const double *g) {
    double y[64], L = 0;
    for (int r = 0; r < B; r++) {
        ref_row(n, p, x + (size_t)r * n->in, y);
        for (int o = 0; o < n->out; o++) L += g[(size_t)r * n->out + o] * y[o];
    }
    return L;
}

/* ------------------------------------------------------------ checkers */

/* The forward against the double reference, and the gradients (params and input) of
 * L = sum g * y against its central differences. True when every element agrees within
 * tolerance. */
static bool check_fd(const impl *im, const net_spec *spec, int B, bool verbose) {
    net n;
    size_t cursor = 3; /* not at 0: offsets are honoured */
    calf_error err;
    CALF_ASSERT(net_layout(&n, spec, &cursor, &err) == CALF_OK);
    size_t P = cursor;
    float *p = calloc(P, sizeof *p), *grad = calloc(P, sizeof *grad);
    float *x = malloc((size_t)B * n.in * sizeof *x), *dx = malloc((size_t)B * n.in * sizeof *dx);
    float *y = malloc((size_t)B * n.out * sizeof *y), *g = malloc((size_t)B * n.out * sizeof *g);
    double *pd = malloc(P * sizeof *pd), *xd = malloc((size_t)B * n.in * sizeof *xd);
    double *gd = malloc((size_t)B * n.out * sizeof *gd);
    CALF_ASSERT(p && grad && x && dx && y && g && pd && xd && gd);
    calf_rng rng;
    calf_rng_seed(&rng, 5, 0, 0);
    CALF_ASSERT(net_init(&n, p, 1.3f, 0.7f, &rng, &err) == CALF_OK);
    /* biases away from zero so few ReLUs sit at their kink */
    for (size_t i = 3; i < P; i++) p[i] += 0.05f * (calf_rng_uniform_float(&g_rng) - 0.5f);
    fill(x, (size_t)B * n.in, -1, 1);
    fill(g, (size_t)B * n.out, -1, 1);
    net_cache c;
    CALF_ASSERT(net_cache_init(&c, &n, B, &err) == CALF_OK);
    im->forward(&n, p, x, B, &c, y);
    im->backward(&n, p, &c, 0, B, g, grad, dx);
    for (size_t i = 0; i < P; i++) pd[i] = p[i];
    for (size_t i = 0; i < (size_t)B * n.in; i++) xd[i] = x[i];
    for (size_t i = 0; i < (size_t)B * n.out; i++) gd[i] = g[i];
    bool ok = true;
    const double h = 1e-6;
    int bad = 0;
    for (int r = 0; r < B; r++) { /* the forward itself, against the reference */
        double yr[64];
        ref_row(&n, pd, xd + (size_t)r * n.in, yr);
        for (int o = 0; o < n.out; o++)
            if (fabs(yr[o] - y[(size_t)r * n.out + o]) > 1e-4 + 1e-4 * fabs(yr[o])) {
                if (verbose && bad++ < 5)
                    fprintf(stderr, "  %s: y[%d][%d] %.9g, reference %.9g\n", im->name, r, o,
                            (double)y[(size_t)r * n.out + o], yr[o]);
                ok = false;
            }
    }
    for (size_t i = n.offset; i < n.offset + n.num_params; i++) {
        double keep = pd[i];
        pd[i] = keep + h;
        double lp = ref_loss(&n, pd, xd, B, gd);
        pd[i] = keep - h;
        double lm = ref_loss(&n, pd, xd, B, gd);
        pd[i] = keep;
        double num = (lp - lm) / (2 * h);
        if (fabs(num - grad[i]) > 2e-3 + 2e-3 * fabs(num)) {
            if (verbose && bad++ < 5)
                fprintf(stderr, "  %s: dparam[%zu] %.9g, finite differences %.9g\n", im->name, i,
                        (double)grad[i], num);
            ok = false;
        }
    }
    for (size_t i = 0; i < (size_t)B * n.in; i++) {
        double keep = xd[i];
        xd[i] = keep + h;
        double lp = ref_loss(&n, pd, xd, B, gd);
        xd[i] = keep - h;
        double lm = ref_loss(&n, pd, xd, B, gd);
        xd[i] = keep;
        double num = (lp - lm) / (2 * h);
        if (fabs(num - dx[i]) > 2e-3 + 2e-3 * fabs(num)) {
            if (verbose && bad++ < 5)
                fprintf(stderr, "  %s: dx[%zu] %.9g, finite differences %.9g\n", im->name, i,
                        (double)dx[i], num);
            ok = false;
        }
    }
    net_cache_free(&c);
    free(p), free(grad), free(x), free(dx), free(y), free(g), free(pd), free(xd), free(gd);
    return ok;
}

/* A row's bits: alone, in a batch of B, and its gradient chains over a row split:
 * forward of each row alone == its row of the batch; ACCUMULATE over [0, a) then [a, B)
 * == over [0, B); SET over [0, a), then ADD of [a, B) == SET of [0, a) + SET of [a, B)
 * elementwise; dx of a range == those rows of dx over [0, B). */
static bool check_rows(const impl *im, const net_spec *spec, int B) {
    net n;
    size_t cursor = 0;
    calf_error err;
    CALF_ASSERT(net_layout(&n, spec, &cursor, &err) == CALF_OK);
    size_t P = cursor, X = (size_t)B * n.in, Y = (size_t)B * n.out;
    float *p = calloc(P, sizeof *p), *x = malloc(X * sizeof *x), *y = malloc(Y * sizeof *y);
    float *y1 = malloc(n.out * sizeof *y1), *dy = malloc(Y * sizeof *dy);
    float *g1 = calloc(P, sizeof *g1), *g2 = calloc(P, sizeof *g2), *g3 = calloc(P, sizeof *g3);
    float *dx = malloc(X * sizeof *dx), *dx2 = malloc(X * sizeof *dx2);
    CALF_ASSERT(p && x && y && y1 && dy && g1 && g2 && g3 && dx && dx2);
    calf_rng rng;
    calf_rng_seed(&rng, 9, 0, 0);
    CALF_ASSERT(net_init(&n, p, 1.4f, 1.0f, &rng, &err) == CALF_OK);
    fill(x, X, -1, 1);
    fill(dy, Y, -1, 1);
    net_cache c, c1;
    CALF_ASSERT(net_cache_init(&c, &n, B, &err) == CALF_OK);
    CALF_ASSERT(net_cache_init(&c1, &n, 1, &err) == CALF_OK);
    bool ok = true;
    im->forward(&n, p, x, B, &c, y);
    for (int r = 0; r < B; r++) {
        im->forward(&n, p, x + (size_t)r * n.in, 1, &c1, y1);
        ok = ok && same_bits(y1, y + (size_t)r * n.out, n.out);
    }
    im->forward(&n, p, x, B, &c, y);
    int a = B / 3 + 1;
    /* accumulate: one range vs two */
    fill(g1, P, -1, 1);
    memcpy(g2, g1, P * sizeof *g1);
    im->backward(&n, p, &c, 0, B, dy, g1, dx);
    im->backward(&n, p, &c, 0, a, dy, g2, dx2);
    im->backward(&n, p, &c, a, B - a, dy + (size_t)a * n.out, g2, dx2 + (size_t)a * n.in);
    ok = ok && same_bits(g1, g2, P) && same_bits(dx, dx2, X);
    /* set + add vs the sum of two sets */
    if (im->backward_set) {
        im->backward_set(&n, p, &c, 0, a, dy, g1, NULL);
        memset(g3, 0, P * sizeof *g3);
        im->backward_set(&n, p, &c, a, B - a, dy + (size_t)a * n.out, g3, NULL);
        for (size_t i = 0; i < P; i++) g3[i] = g1[i] + g3[i];
        im->backward_add(&n, p, &c, a, B - a, dy + (size_t)a * n.out, g1, NULL);
        ok = ok && same_bits(g1, g3, P);
        /* set == accumulate onto +0 */
        memset(g2, 0, P * sizeof *g2);
        im->backward(&n, p, &c, 0, B, dy, g2, NULL);
        fill(g1, P, -1, 1);
        im->backward_set(&n, p, &c, 0, B, dy, g1, NULL);
        for (int k = 0; k < n.num_layers; k++) { /* padding between layers is not written */
            const net_layer *l = &n.layer[k];
            if (l->kind == NET_CONV2D) {
                size_t nw = (size_t)conv2d_patch(&l->conv) * l->conv.filters;
                ok = ok && same_bits(g1 + l->conv.w_off, g2 + l->conv.w_off, nw) &&
                     same_bits(g1 + l->conv.b_off, g2 + l->conv.b_off, l->conv.filters);
            } else {
                const nn_mlp *m = &l->mlp;
                for (int j = 0; j < m->num_layers; j++)
                    ok = ok &&
                         same_bits(g1 + m->w_off[j], g2 + m->w_off[j],
                                   (size_t)m->sizes[j] * m->sizes[j + 1]) &&
                         same_bits(g1 + m->b_off[j], g2 + m->b_off[j], m->sizes[j + 1]);
            }
        }
    }
    net_cache_free(&c);
    net_cache_free(&c1);
    free(p), free(x), free(y), free(y1), free(dy), free(g1), free(g2), free(g3), free(dx), free(dx2);
    return ok;
}

/* ------------------------------------------------------------ tests */

/* PyTorch's default for nn.Linear, written out as the replay algorithms drew it before
 * their networks were nets: each layer's weights (in, out) row-major, then its biases,
 * uniform in +-1/sqrt(in) from one stream. */
static void fan_in_reference(const nn_mlp *m, float *params, calf_rng *rng) {
    for (int l = 0; l < m->num_layers; l++) {
        int in = m->sizes[l], out = m->sizes[l + 1];
        double b = 1.0 / sqrt((double)in);
        for (int k = 0; k < in * out; k++)
            params[m->w_off[l] + (size_t)k] = (float)calf_rng_uniform_range(rng, -b, b);
        for (int k = 0; k < out; k++)
            params[m->b_off[l] + (size_t)k] = (float)calf_rng_uniform_range(rng, -b, b);
    }
}

static const net_conv_spec CONV_A[] = {{4, 3, 1, 1}, {5, 2, 2, 0}};
static const net_conv_spec CONV_B[] = {{6, 3, 1, 0}};

static void test_fc_only_is_nn_mlp(void) {
    const int hidden[] = {12, 7};
    for (int act = 0; act < 2; act++)
        for (int nh = 0; nh <= 2; nh++)
            for (int out = 1; out <= 9; out += 8) {
                nn_activation a = act ? NN_ACT_RELU : NN_ACT_TANH;
                nn_mlp m;
                net n;
                size_t cm = 5, cn = 5;
                nn_mlp_layout(&m, 6, hidden, nh, out, a, &cm);
                net_spec s = net_spec_mlp(6, hidden, nh, out, a);
                calf_error err;
                CHECK_INT_EQ(net_layout(&n, &s, &cn, &err), CALF_OK);
                CHECK_INT_EQ(cn, cm);
                const nn_mlp *v = net_as_mlp(&n);
                CHECK(v != NULL && memcmp(v, &m, sizeof m) == 0);
                CHECK(n.offset == m.offset && n.num_params == m.num_params && n.state_size == 0);
                size_t P = cm;
                float *pm = calloc(P, sizeof *pm), *pn = calloc(P, sizeof *pn);
                calf_rng r1, r2;
                calf_rng_seed(&r1, 3, 0, 1), calf_rng_seed(&r2, 3, 0, 1);
                CHECK_INT_EQ(nn_mlp_init(&m, pm, 1.41f, 0.01f, &r1, &err), CALF_OK);
                CHECK_INT_EQ(net_init(&n, pn, 1.41f, 0.01f, &r2, &err), CALF_OK);
                CHECK(same_bits(pm, pn, P));
                calf_rng_seed(&r1, 4, 0, 1), calf_rng_seed(&r2, 4, 0, 1);
                fan_in_reference(&m, pm, &r1);
                net_init_fan_in(&n, pn, &r2);
                CHECK(same_bits(pm, pn, P));
                int B = 11;
                float x[11 * 6], ym[11 * 9], yn[11 * 9], dy[11 * 9], dxm[11 * 6], dxn[11 * 6];
                fill(x, sizeof x / sizeof *x, -2, 2);
                fill(dy, sizeof dy / sizeof *dy, -1, 1);
                nn_cache cmc;
                net_cache cnc;
                CHECK_INT_EQ(nn_cache_init(&cmc, &m, B, &err), CALF_OK);
                CHECK_INT_EQ(net_cache_init(&cnc, &n, B, &err), CALF_OK);
                nn_mlp_forward(&m, pm, x, B, &cmc, ym);
                net_forward(&n, pn, x, B, &cnc, yn);
                CHECK(same_bits(ym, yn, (size_t)B * out));
                CHECK(same_bits(net_output(&n, &cnc), yn, (size_t)B * out));
                float *gm = calloc(P, sizeof *gm), *gn = calloc(P, sizeof *gn);
                fill(gm, P, -1, 1);
                memcpy(gn, gm, P * sizeof *gm);
                nn_mlp_backward(&m, pm, &cmc, 2, 7, dy, gm, dxm);
                net_backward(&n, pn, &cnc, 2, 7, dy, gn, dxn);
                CHECK(same_bits(gm, gn, P) && same_bits(dxm, dxn, 7 * 6));
                nn_mlp_backward_set(&m, pm, &cmc, 0, 5, dy, gm, NULL);
                net_backward_set(&n, pn, &cnc, 0, 5, dy, gn, NULL);
                CHECK(same_bits(gm, gn, P));
                nn_mlp_backward_add(&m, pm, &cmc, 5, 6, dy + 5 * out, gm, dxm);
                net_backward_add(&n, pn, &cnc, 5, 6, dy + 5 * out, gn, dxn);
                CHECK(same_bits(gm, gn, P) && same_bits(dxm, dxn, 6 * 6));
                nn_cache_free(&cmc);
                net_cache_free(&cnc);
                free(pm), free(pn), free(gm), free(gn);
            }
}

static void test_finite_differences(void) {
    const int fc1[] = {7}, fc2[] = {5, 6};
    net_spec s1 = conv_spec(6, 5, 3, 2, CONV_A, 1, fc1, 3, NN_ACT_TANH);
    net_spec s2 = conv_spec(5, 5, 2, 1, CONV_B, 2, fc2, 9, NN_ACT_RELU);
    net_spec s3 = conv_spec(4, 6, 2, 1, CONV_B, 0, NULL, 1, NN_ACT_TANH);
    CHECK(check_fd(&REAL, &s1, 3, true));
    CHECK(check_fd(&REAL, &s2, 2, true));
    CHECK(check_fd(&REAL, &s3, 4, true));
    /* the planted mistakes are caught */
    CHECK(!check_fd(&NOMASK, &s2, 2, false));
    CHECK(!check_fd(&NCHW, &s2, 2, false));
}

static void test_rows(void) {
    const int fc1[] = {7}, fc2[] = {5, 6};
    net_spec s1 = conv_spec(6, 5, 3, 2, CONV_A, 1, fc1, 3, NN_ACT_TANH);
    net_spec s2 = conv_spec(5, 5, 2, 1, CONV_B, 2, fc2, 9, NN_ACT_RELU);
    net_spec s3 = net_spec_mlp(10, fc2, 2, 4, NN_ACT_TANH);
    CHECK(check_rows(&REAL, &s1, 13));
    CHECK(check_rows(&REAL, &s2, 7));
    CHECK(check_rows(&REAL, &s3, 9));
    CHECK(!check_rows(&ADD_AS_ACC, &s1, 13));
    CHECK(!check_rows(&SHIFT, &s2, 7));
}

/* uint8 input: bytes * scale, the same bits as the floats it makes; floats holding byte
 * values give the same bits too (evaluation passes floats). */
static bool check_u8(bool planted) {
    const int fc[] = {8};
    net_spec s = conv_spec(5, 4, 3, 1, CONV_B, 1, fc, 4, NN_ACT_RELU);
    net_spec su = s;
    su.in_u8 = true;
    su.in_scale = 1.0f / 255.0f;
    net n, nu;
    size_t c1 = 0, c2 = 0;
    calf_error err;
    CALF_ASSERT(net_layout(&n, &s, &c1, &err) == CALF_OK && net_layout(&nu, &su, &c2, &err) == CALF_OK);
    CALF_ASSERT(c1 == c2);
    int B = 6;
    size_t X = (size_t)B * n.in;
    float *p = calloc(c1, sizeof *p), *xf = malloc(X * sizeof *xf), *xb = malloc(X * sizeof *xb);
    float y[6 * 4], yu[6 * 4], yb[6 * 4];
    uint8_t *b = malloc(X);
    calf_rng rng;
    calf_rng_seed(&rng, 2, 0, 0);
    CALF_ASSERT(net_init(&n, p, 1.4f, 1.0f, &rng, &err) == CALF_OK);
    for (size_t i = 0; i < X; i++) {
        b[i] = (uint8_t)calf_rng_below(&g_rng, 256);
        xb[i] = (float)b[i];
        xf[i] = (float)b[i] * su.in_scale;
    }
    net_cache c, cu;
    CALF_ASSERT(net_cache_init(&c, &n, B, &err) == CALF_OK && net_cache_init(&cu, &nu, B, &err) == CALF_OK);
    net_forward(&n, p, xf, B, &c, y);
    if (planted) net_forward(&n, p, xb, B, &c, yu); /* the scale left out */
    else net_forward_u8_v(&nu, p, 0, b, B, &cu, yu);
    net_forward(&nu, p, xb, B, &cu, yb);
    bool ok = same_bits(y, yu, sizeof y / sizeof *y) && same_bits(y, yb, sizeof y / sizeof *y);
    net_cache_free(&c), net_cache_free(&cu);
    free(p), free(xf), free(xb), free(b);
    return ok;
}

/* A Dict's per-key encoder: gradients against finite differences (a vector run between
 * two images of their own conv stacks, one scaled; an image then a vector before an
 * LSTM-free trunk), rows alone and over splits, the layout (each image's stack in order,
 * then the trunk on the concatenation), and the planted mistakes caught. */
static void test_dict_encoder(void) {
    static const int three[][3] = {{4, 3, 2}, {0, 3, 0}, {3, 3, 1}};
    static const int two[][3] = {{5, 4, 2}, {0, 2, 0}};
    static const int vec_first[][3] = {{0, 2, 0}, {4, 4, 1}};
    const int fc1[] = {6}, fc2[] = {5, 4};
    net_spec s1 = dict_spec(3, three, 0.25f, 1, CONV_B + 0, 1, fc1, 3, NN_ACT_TANH);
    s1.conv[0].kernel = 2; /* 6 filters 2x2 on 4x3 and on 3x3 */
    net_spec s2 = dict_spec(2, two, 1.0f, 2, CONV_A, 2, fc2, 4, NN_ACT_RELU);
    net_spec s3 = dict_spec(2, vec_first, 1.0f, 1, CONV_B, 0, NULL, 2, NN_ACT_TANH);
    CHECK(check_fd(&REAL, &s1, 3, true));
    CHECK(check_fd(&REAL, &s2, 2, true));
    CHECK(check_fd(&REAL, &s3, 3, true));
    CHECK(check_rows(&REAL, &s1, 9));
    CHECK(check_rows(&REAL, &s2, 7));
    CHECK(!check_fd(&SWAP, &s2, 2, false));
    CHECK(!check_fd(&SWAP, &s3, 2, false));
    CHECK(!check_fd(&DROP, &s1, 2, false)); /* the second image's convs */
    CHECK(!check_fd(&DROP, &s2, 2, false)); /* the vector's dx */
    net n;
    size_t cur = 0;
    calf_error err;
    CHECK_INT_EQ(net_layout(&n, &s2, &cur, &err), CALF_OK);
    /* the image's two convs (5x4 -> 5x4x4 -> 2x2x5), then the MLP on 20 + 2 floats */
    CHECK(n.num_layers == 3 && n.trunk == 2 && n.cat == 22 && n.seg[0].first == 0 &&
          n.seg[0].count == 2 && n.seg[1].col == 20 && n.layer[2].in == 22);
    CHECK(net_as_mlp(&n) == NULL && net_unexportable(&n) == NULL); /* calf export writes it */
    /* refused: no image segment, or segments that do not cover the input */
    static const int vectors[][3] = {{0, 2, 0}, {0, 3, 0}};
    net_spec v = dict_spec(2, vectors, 1.0f, 1, CONV_B, 0, NULL, 2, NN_ACT_TANH);
    CHECK_INT_EQ(net_layout(&n, &v, &cur, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "0 image parts") != NULL);
    net_spec gap = s2;
    gap.seg[1].offset++;
    CHECK_INT_EQ(net_layout(&n, &gap, &cur, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "segment 1 (columns 41 + 2") != NULL);
}

/* net_config's encoder from a Dict's parts: adjacent vector parts one segment, each
 * image part a segment with its own conv stack (a uint8 one of a float observation
 * scaled by 1/255), in the parts' order; more than NET_MAX_IMAGE_PARTS images refused
 * naming the row's line, as is a kernel that does not fit a part. */
static void test_dict_config(void) {
    calf_error err;
    calf_config *cfg = calf_config_new(&err);
    CALF_ASSERT(cfg);
    CHECK_INT_EQ(calf_config_parse_string(cfg,
                                          "ActorDistributionNetwork.conv_layer_params = "
                                          "((3, 2, 1),)\n",
                                          "t.gin", &err),
                 CALF_OK);
    static const calf_obs_part parts[] = {
        {"a", {2, 0, 0}, CALF_DTYPE_F32, 0},     {"b", {3, 0, 0}, CALF_DTYPE_U8, 2},
        {"img", {4, 4, 2}, CALF_DTYPE_U8, 5},    {"c", {1, 0, 0}, CALF_DTYPE_F32, 37},
        {"map", {3, 3, 1}, CALF_DTYPE_F32, 38}, {"d", {1, 0, 0}, CALF_DTYPE_F32, 47},
    };
    net_obs obs = {.dim = 48, .num_parts = 6, .parts = parts};
    net_spec s;
    CHECK_INT_EQ(net_config_spec(cfg, CALF_CFG_ACTOR_CONV_LAYERS, CALF_CFG_ACTOR_LAYERS,
                                 CALF_CFG_ACTOR_ACTIVATION, &obs, 3, &s, &err),
                 CALF_OK);
    CHECK(s.num_segs == 5 && s.seg[0].offset == 0 && s.seg[0].size == 5 && s.seg[0].h == 0 &&
          s.seg[1].offset == 5 && s.seg[1].h == 4 && s.seg[1].scale == (float)(1.0 / 255) &&
          s.seg[2].offset == 37 && s.seg[2].size == 1 && s.seg[3].h == 3 &&
          s.seg[3].scale == 1.0f && s.seg[4].h == 0 && s.seg[4].size == 1);
    net n;
    size_t cur = 0;
    CHECK_INT_EQ(net_layout(&n, &s, &cur, &err), CALF_OK);
    CHECK(n.cat == 5 + 3 * 3 * 3 + 1 + 2 * 2 * 3 + 1 && n.trunk == 2);
    /* five images */
    calf_obs_part five[5];
    for (int k = 0; k < 5; k++)
        five[k] = (calf_obs_part){k ? "i" : "j", {2, 2, 1}, CALF_DTYPE_F32, 4 * k};
    obs = (net_obs){.dim = 20, .num_parts = 5, .parts = five};
    CHECK_INT_EQ(net_config_spec(cfg, CALF_CFG_ACTOR_CONV_LAYERS, CALF_CFG_ACTOR_LAYERS,
                                 CALF_CFG_ACTOR_ACTIVATION, &obs, 3, &s, &err),
                 CALF_EINVAL);
    CHECK(strstr(err.msg, "t.gin:1: ActorDistributionNetwork.conv_layer_params on a Dict "
                          "observation of 5 image parts, more than the 4") != NULL);
    /* a 4x4 kernel fits 'img' but not the 3x3 'map' */
    CHECK_INT_EQ(calf_config_parse_string(cfg,
                                          "ActorDistributionNetwork.conv_layer_params = "
                                          "((3, 4, 1),)\n",
                                          "u.gin", &err),
                 CALF_OK);
    obs = (net_obs){.dim = 48, .num_parts = 6, .parts = parts};
    CHECK_INT_EQ(net_config_spec(cfg, CALF_CFG_ACTOR_CONV_LAYERS, CALF_CFG_ACTOR_LAYERS,
                                 CALF_CFG_ACTOR_ACTIVATION, &obs, 3, &s, &err),
                 CALF_EINVAL);
    CHECK(strstr(err.msg, "u.gin:1: ActorDistributionNetwork.conv_layer_params: layer 1's "
                          "kernel 4 does not fit its 3x3 input (padding 0) on the Dict's "
                          "part 'map'") != NULL);
    calf_config_free(cfg);
}

static void test_u8(void) {
    CHECK(check_u8(false));
    CHECK(!check_u8(true));
}

static void test_refusals(void) {
    net n;
    size_t cur = 0;
    calf_error err;
    const int fc[] = {4};
    net_spec flat = net_spec_mlp(12, fc, 1, 2, NN_ACT_TANH);
    flat.num_conv = 1;
    flat.conv[0] = CONV_B[0];
    CHECK_INT_EQ(net_layout(&n, &flat, &cur, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "image observation") != NULL);
    net_spec big = conv_spec(2, 2, 3, 1, CONV_B, 1, fc, 2, NN_ACT_TANH); /* kernel 3 on 2x2 */
    CHECK_INT_EQ(net_layout(&n, &big, &cur, &err), CALF_EINVAL);
    net_spec core = net_spec_mlp(12, fc, 1, 2, NN_ACT_TANH);
    core.core = NET_LSTM;
    core.core_hidden = 8;
    core.core_hidden = 2; /* rnn.h: at least 3 units */
    CHECK_INT_EQ(net_layout(&n, &core, &cur, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "at least 3 units") != NULL);
    /* the table: every row complete, a feed-forward or a sequence forward */
    for (int k = 0; k < NET_NUM_KINDS; k++) {
        const net_layer_type *t = net_layer_type_of((net_kind)k);
        if (!t) continue;
        CHECK(t->name && t->layout && t->state_size && t->init && t->init_fan_in && t->cache_init &&
              t->cache_free && (t->forward != NULL) != (t->forward_seq != NULL) && t->backward);
    }
    net_spec s = conv_spec(6, 5, 3, 2, CONV_A, 0, NULL, 3, NN_ACT_TANH);
    cur = 0;
    CHECK_INT_EQ(net_layout(&n, &s, &cur, &err), CALF_OK);
    CHECK(net_as_mlp(&n) == NULL);
    CHECK(net_unexportable(&n) == NULL); /* calf export writes conv layers */
}

/* ------------------------------------------------------------ recurrent cores */

/* conv -> fc -> core -> fc -> head (CleanRL's ppo_atari_lstm shape, small), a flat
 * input -> fc -> core -> fc -> head, or a Dict (a vector, a 3x3x2 image through its conv,
 * a vector; the image scaled by 0.5) encoded per key -> fc -> core -> fc -> head; RT steps
 * of RB rows with episode starts. */
enum { RT = 5, RB = 2 };
enum { REC_FLAT, REC_CONV, REC_DICT };
static const net_conv_spec CONV_R[] = {{3, 2, 1, 0}};
static const int DICT_R[][3] = {{0, 2, 0}, {3, 3, 2}, {0, 1, 0}};

typedef struct rec_case {
    net n;
    size_t np;
    float *p, *x, *s0, *w; /* params; (RT, RB, in); (RB, S); (RT * RB, out) */
    uint8_t start[RT * RB];
    net_cache c;
} rec_case;

static void rec_init(rec_case *r, net_kind core, int input, bool deferred) {
    static const int pre[] = {6};
    net_spec s = input == REC_CONV ? conv_spec(4, 4, 2, 1, CONV_R, 1, pre, 2, NN_ACT_TANH)
                 : input == REC_DICT ? dict_spec(3, DICT_R, 0.5f, 1, CONV_R, 1, pre, 2, NN_ACT_TANH)
                                     : net_spec_mlp(5, pre, 1, 2, NN_ACT_RELU);
    s.core = core;
    s.core_hidden = 4;
    s.num_post_fc = 1;
    s.post_fc[0] = 5;
    s.core_deferred = deferred;
    calf_error err;
    size_t cur = 0;
    memset(r, 0, sizeof *r);
    CHECK_INT_EQ(net_layout(&r->n, &s, &cur, &err), CALF_OK);
    size_t ff_end = cur;
    CHECK_INT_EQ(net_layout_core(&r->n, &cur, &err), CALF_OK);
    const rnn_cell *cell = &r->n.layer[r->n.core].cell;
    /* a deferred core lies after the rest; otherwise inside the network's span */
    CHECK(deferred ? cell->offset == ff_end && r->n.num_params == ff_end
                   : cell->offset + cell->num_params <= r->n.num_params);
    CHECK_INT_EQ((int)r->n.state_size, (core == NET_LSTM ? 2 : 1) * 4);
    r->np = cur;
    size_t in = (size_t)r->n.in, S = r->n.state_size;
    r->p = calloc(cur, sizeof(float));
    r->x = malloc(RT * RB * in * sizeof(float));
    r->s0 = malloc(RB * S * sizeof(float));
    r->w = malloc(RT * RB * (size_t)r->n.out * sizeof(float));
    CALF_ASSERT(r->p && r->x && r->s0 && r->w);
    /* every parameter spread, biases too, so that each one matters (the forget gate's
     * bias among them) */
    fill(r->p, cur, -0.6f, 0.6f);
    fill(r->x, RT * RB * in, -1.0f, 1.0f);
    fill(r->s0, RB * S, -0.8f, 0.8f);
    fill(r->w, RT * RB * (size_t)r->n.out, -1.0f, 1.0f);
    static const uint8_t start[RT * RB] = {0, 1, 0, 0, 1, 0, 0, 1, 0, 0}; /* (t, b) */
    memcpy(r->start, start, sizeof start);
    CHECK_INT_EQ(net_cache_init_seq(&r->c, &r->n, RT, RB, &err), CALF_OK);
}

static void rec_free(rec_case *r) {
    net_cache_free(&r->c);
    free(r->p), free(r->x), free(r->s0), free(r->w);
}

/* The gradient of the sequence loss sum w * y by net_backward_set, from a forward at p
 * with start. */
static void rec_grad(rec_case *r, const float *p, const uint8_t *start, float *g) {
    net_forward_seq(&r->n, p, 0, r->x, start, r->s0, RT, RB, &r->c, NULL, NULL);
    net_backward_set(&r->n, p, &r->c, 0, RT * RB, r->w, g, NULL);
}

static double sigma(double v) { return 1.0 / (1.0 + exp(-v)); }

/* One step of the core (rnn.h's equations, PyTorch's) on one row in double: h (and c, for
 * an LSTM) read and written. */
static void ref_cell(const rnn_cell *cell, const double *p, const double *x, double *h,
                     double *c) {
    int H = cell->hidden, G = cell->gates;
    double ax[64], ah[64];
    CALF_ASSERT(G <= 64);
    for (int q = 0; q < G; q++) {
        ax[q] = p[cell->b_ih_off + (size_t)q];
        ah[q] = p[cell->b_hh_off + (size_t)q];
        for (int i = 0; i < cell->in; i++) ax[q] += x[i] * p[cell->w_ih_off + (size_t)i * G + q];
        for (int j = 0; j < H; j++) ah[q] += h[j] * p[cell->w_hh_off + (size_t)j * G + q];
    }
    for (int j = 0; j < H; j++) {
        if (cell->kind == RNN_LSTM) {
            double i = sigma(ax[j] + ah[j]), f = sigma(ax[H + j] + ah[H + j]);
            double g = tanh(ax[2 * H + j] + ah[2 * H + j]), o = sigma(ax[3 * H + j] + ah[3 * H + j]);
            c[j] = f * c[j] + i * g;
            h[j] = o * tanh(c[j]);
        } else {
            double rg = sigma(ax[j] + ah[j]), z = sigma(ax[H + j] + ah[H + j]);
            double nn = tanh(ax[2 * H + j] + rg * ah[2 * H + j]);
            h[j] = (1 - z) * nn + z * h[j];
        }
    }
}

/* The sequence loss sum w * y of the network in double (the double reference: every
 * layer in double, tanh and the logistic exact), each row's state from s0 and zeroed
 * where start is set. */
static double rec_ref_loss(const rec_case *r, const double *p, const uint8_t *start) {
    const net *n = &r->n;
    size_t in = (size_t)n->in, S = n->state_size;
    double L = 0, x[4096], a[4096], b[4096];
    CALF_ASSERT(in <= 4096 && S <= 64);
    for (int row = 0; row < RB; row++) {
        double st[64];
        for (size_t j = 0; j < S; j++) st[j] = r->s0[(size_t)row * S + j];
        for (int t = 0; t < RT; t++) {
            size_t i = (size_t)t * RB + (size_t)row;
            if (start && start[i]) memset(st, 0, sizeof st);
            for (size_t j = 0; j < in; j++) x[j] = r->x[i * in + j];
            ref_encode(n, p, x, a);
            for (int k = n->trunk; k < n->num_layers; k++) {
                const net_layer *l = &n->layer[k];
                if (k == n->core) {
                    ref_cell(&l->cell, p, a, st, st + l->cell.hidden);
                    memcpy(a, st, (size_t)l->out * sizeof *a);
                    continue;
                }
                ref_layer(l, p, a, b);
                memcpy(a, b, (size_t)l->out * sizeof *a);
            }
            for (int o = 0; o < n->out; o++) L += (double)r->w[i * (size_t)n->out + o] * a[o];
        }
    }
    return L;
}

/* The largest disagreement of g with central differences of the double reference's loss
 * (the true network: its starts, its parameters; step 1e-6 on each parameter as a
 * double), each relative to max(1e-2, |fd|). */
static double rec_mismatch(rec_case *r, const float *g) {
    double worst = 0, *pd = malloc(r->np * sizeof *pd);
    CALF_ASSERT(pd);
    for (size_t k = 0; k < r->np; k++) pd[k] = r->p[k];
    const double h = 1e-6;
    for (size_t k = 0; k < r->np; k++) {
        double keep = pd[k];
        pd[k] = keep + h;
        double up = rec_ref_loss(r, pd, r->start);
        pd[k] = keep - h;
        double down = rec_ref_loss(r, pd, r->start);
        pd[k] = keep;
        double fd = (up - down) / (2 * h);
        double e = fabs((double)g[k] - fd) / fmax(1e-2, fabs(fd));
        if (e > worst) worst = e;
    }
    free(pd);
    return worst;
}

/* The float forward's outputs against the double reference's: the largest difference
 * relative to max(1, |y|). */
static double rec_forward_error(rec_case *r) {
    float y[RT * RB * 8];
    CALF_ASSERT(r->n.out <= 8);
    net_forward_seq(&r->n, r->p, 0, r->x, r->start, r->s0, RT, RB, &r->c, y, NULL);
    double *pd = malloc(r->np * sizeof *pd), worst = 0;
    CALF_ASSERT(pd);
    for (size_t k = 0; k < r->np; k++) pd[k] = r->p[k];
    /* each output alone: the loss with w one-hot, from a saved w */
    size_t m = (size_t)RT * RB * (size_t)r->n.out;
    float *keep = malloc(m * sizeof *keep);
    CALF_ASSERT(keep);
    memcpy(keep, r->w, m * sizeof *keep);
    for (size_t i = 0; i < m; i++) {
        memset(r->w, 0, m * sizeof *r->w);
        r->w[i] = 1.0f;
        double e = fabs(rec_ref_loss(r, pd, r->start) - (double)y[i]) / fmax(1.0, fabs((double)y[i]));
        if (e > worst) worst = e;
    }
    memcpy(r->w, keep, m * sizeof *keep);
    free(keep), free(pd);
    return worst;
}

/* The core's gradients through the net against finite differences of the double
 * reference (bound 1e-3; the forward within 1e-5 of it), with two planted mistakes the
 * same check must reject: the forget gate's bias applied twice (the forward the gradient
 * came from read b_ih's f block doubled; an LSTM) or the update gate's (a GRU's z), and
 * the state not reset at an episode start; and (conv or Dict input) the conv layer's
 * gradient, which reaches it back through the core, dropped. Then the modes: ACC onto zeros and SET agree,
 * ADD is grad + SET elementwise. */
static void check_rec_gradient(net_kind core, int input) {
    static const char *inputs[] = {"", "conv + ", "Dict (conv on its image) + "};
    rec_case r;
    rec_init(&r, core, input, core == NET_GRU);
    float *g = calloc(r.np, sizeof(float)), *g2 = calloc(r.np, sizeof(float));
    float *q = malloc(r.np * sizeof(float));
    CALF_ASSERT(g && g2 && q);
    double ey = rec_forward_error(&r);
    CHECK(ey <= 1e-5);
    rec_grad(&r, r.p, r.start, g);
    double e = rec_mismatch(&r, g);
    CHECK(e <= 1e-3);
    /* planted: a gate bias twice (H = 4: gate 1 is LSTM's f, GRU's z) */
    const rnn_cell *cell = &r.n.layer[r.n.core].cell;
    memcpy(q, r.p, r.np * sizeof(float));
    for (int j = 0; j < 4; j++) q[cell->b_ih_off + 4 + (size_t)j] *= 2.0f;
    rec_grad(&r, q, r.start, g2);
    double e_bias = rec_mismatch(&r, g2);
    CHECK(e_bias > 1e-3);
    /* planted: no reset where an episode starts */
    rec_grad(&r, r.p, NULL, g2);
    double e_reset = rec_mismatch(&r, g2);
    CHECK(e_reset > 1e-3);
    /* planted (conv or Dict): the conv layer's gradient, back through the core, dropped */
    double e_conv = 0;
    if (input != REC_FLAT) {
        const conv2d *cv = &r.n.layer[0].conv;
        CALF_ASSERT(r.n.layer[0].kind == NET_CONV2D);
        memcpy(g2, g, r.np * sizeof(float));
        memset(g2 + cv->offset, 0, cv->num_params * sizeof(float));
        e_conv = rec_mismatch(&r, g2);
        CHECK(e_conv > 1e-3);
    }
    /* the modes */
    memset(g2, 0, r.np * sizeof(float));
    net_forward_seq(&r.n, r.p, 0, r.x, r.start, r.s0, RT, RB, &r.c, NULL, NULL);
    net_backward(&r.n, r.p, &r.c, 0, RT * RB, r.w, g2, NULL);
    CHECK(same_bits(g, g2, r.np));
    for (size_t k = 0; k < r.np; k++) q[k] = g2[k] = (float)k * 0.0625f;
    net_forward_seq(&r.n, r.p, 0, r.x, r.start, r.s0, RT, RB, &r.c, NULL, NULL);
    net_backward_add(&r.n, r.p, &r.c, 0, RT * RB, r.w, g2, NULL);
    bool add_ok = true;
    for (size_t k = 0; k < r.np; k++) {
        float want = q[k] + g[k];
        add_ok &= memcmp(&want, &g2[k], sizeof want) == 0;
    }
    CHECK(add_ok);
    printf("%s%s core: forward within %.2g of the double reference (bound 1e-5), gradient "
           "within %.2g of its finite differences (bound 1e-3); planted: gate bias twice %.2g, "
           "no reset %.2g",
           inputs[input], core == NET_LSTM ? "LSTM" : "GRU", ey, e, e_bias, e_reset);
    if (input != REC_FLAT) printf(", conv gradient dropped %.2g", e_conv);
    printf("\n");
    free(g), free(g2), free(q);
    rec_free(&r);
}

/* Acting a step at a time (net_step, each row alone) gives the sequence's bits: every
 * output and the final state. A stepper that ignores the episode starts is rejected. */
static bool rec_steps_agree(rec_case *r, bool use_start) {
    size_t in = (size_t)r->n.in, S = r->n.state_size, out = (size_t)r->n.out;
    float y[RT * RB * 8], sT[RB * 8], st[8], ys[8];
    CALF_ASSERT(S <= 8 && out <= 8);
    net_forward_seq(&r->n, r->p, 0, r->x, r->start, r->s0, RT, RB, &r->c, y, sT);
    net_cache one;
    calf_error err;
    CHECK_INT_EQ(net_cache_init(&one, &r->n, 1, &err), CALF_OK);
    bool same = true;
    for (int b = 0; b < RB; b++) {
        memcpy(st, r->s0 + b * S, S * sizeof(float));
        for (int t = 0; t < RT; t++) {
            size_t i = (size_t)t * RB + (size_t)b;
            net_step(&r->n, r->p, r->x + i * in, use_start ? &r->start[i] : NULL, 1, st, &one, ys);
            same &= same_bits(ys, y + i * out, out);
        }
        same &= same_bits(st, sT + b * S, S);
    }
    net_cache_free(&one);
    return same;
}

static void test_recurrent(void) {
    check_rec_gradient(NET_LSTM, REC_CONV);
    check_rec_gradient(NET_GRU, REC_FLAT);
    check_rec_gradient(NET_LSTM, REC_FLAT);
    for (int k = 0; k < 2; k++) {
        rec_case r;
        rec_init(&r, k ? NET_GRU : NET_LSTM, k == 0 ? REC_CONV : REC_FLAT, false);
        CHECK(rec_steps_agree(&r, true));
        CHECK(!rec_steps_agree(&r, false)); /* planted: no reset while acting */
        /* net_state_reset zeroes the rows asked for, and only them */
        size_t S = r.n.state_size;
        uint8_t which[RB] = {0, 1};
        float keep[8];
        memcpy(keep, r.s0, S * sizeof(float));
        net_state_reset(&r.n, r.s0, which, RB);
        bool zero = true;
        for (size_t j = 0; j < S; j++) zero &= r.s0[S + j] == 0.0f;
        CHECK(zero && same_bits(keep, r.s0, S));
        rec_free(&r);
    }
    /* the rows of the table whose layers keep state have a sequence forward and no other */
    CHECK(net_layer_type_of(NET_LSTM)->forward_seq && !net_layer_type_of(NET_LSTM)->forward);
}

int main(void) {
    calf_rng_seed(&g_rng, 1, 0, 0);
    test_fc_only_is_nn_mlp();
    test_finite_differences();
    test_rows();
    test_u8();
    test_refusals();
    test_recurrent();
    test_dict_config();
    test_dict_encoder(); /* the draws before it are the ones the bounds were set on */
    /* a Dict with an image part through its conv, feeding an LSTM: after the rest, so
     * that their draws stay as they were */
    check_rec_gradient(NET_LSTM, REC_DICT);
    return test_report("test_net");
}
