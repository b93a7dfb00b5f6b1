/* rnn.c: the LSTM and GRU cells of rnn.h: the gate products through nn.h's linear
 * kernels (all steps' input products in one call, the hidden products step by step),
 * the gate arithmetic elementwise in the order rnn.h writes down, and backward through
 * time that keeps every gate gradient so the weight gradients are one call each. */
#include "numerics/rnn.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

/* The column panels and row blocks of panel_product, the gradient chunks of params_grad. */
enum { PANEL = 64, PANEL_ROWS = 192, CHUNK_FLOATS = 65536 };

static size_t align16(size_t n) { return (n + 15) / 16 * 16; }

void rnn_layout(rnn_cell *cell, rnn_kind kind, int in, int hidden, size_t *cursor) {
    CALF_ASSERT(kind == RNN_LSTM || kind == RNN_GRU);
    CALF_ASSERT(in > 0 && hidden >= 3);
    memset(cell, 0, sizeof *cell);
    cell->kind = kind;
    cell->in = in;
    cell->hidden = hidden;
    cell->gates = (kind == RNN_LSTM ? 4 : 3) * hidden;
    size_t G = (size_t)cell->gates, cur = *cursor;
    cell->offset = cur;
    cell->w_ih_off = cur = align16(cur);
    cur += (size_t)in * G;
    cell->w_hh_off = cur = align16(cur);
    cur += (size_t)hidden * G;
    cell->b_ih_off = cur = align16(cur);
    cur += G;
    cell->b_hh_off = cur = align16(cur);
    cur += G;
    cell->num_params = cur - cell->offset;
    *cursor = cur;
}

int rnn_init(const rnn_cell *cell, float *params, calf_rng *rng, calf_error *err) {
    memset(params + cell->offset, 0, cell->num_params * sizeof(float));
    int rc = nn_orthogonal_init(params + cell->w_ih_off, cell->in, cell->gates, 1.0f, rng, err);
    if (rc) return rc;
    return nn_orthogonal_init(params + cell->w_hh_off, cell->hidden, cell->gates, 1.0f, rng, err);
}

int rnn_cache_init(rnn_cache *c, const rnn_cell *cell, int max_T, int max_B, calf_error *err) {
    CALF_ASSERT(max_T > 0 && max_B > 0);
    memset(c, 0, sizeof *c);
    c->kind = cell->kind;
    c->in = cell->in;
    c->hidden = cell->hidden;
    c->gates = cell->gates;
    c->max_T = max_T;
    c->max_B = max_B;
    size_t rows = (size_t)max_T * (size_t)max_B, H = (size_t)cell->hidden;
    size_t G = (size_t)cell->gates, in = (size_t)cell->in;
    struct {
        float **p;
        size_t n;
    } bufs[] = {
        {&c->x, rows * in},     {&c->hprev, rows * H}, {&c->act, rows * G},
        {&c->aux, rows * H},    {&c->ax, rows * G},    {&c->ah, (size_t)max_B * G},
        {&c->h, (size_t)max_B * H}, {&c->c, (size_t)max_B * H}, {&c->dh, (size_t)max_B * H},
        {&c->dc, (size_t)max_B * H}, {&c->tmp, (size_t)max_B * H}, {&c->wt_ih, G * in},
        {&c->wt_hh, G * H},
        /* panels of W_ih or its transpose, or ADD's chains of a gradient block */
        {&c->pack, (in > H ? in : H) * G + G},
        {&c->pout, (size_t)PANEL_ROWS * (PANEL + NN_SMALL_OUT)},
        {&c->cprev, cell->kind == RNN_LSTM ? rows * H : 0},
        {&c->dgh, cell->kind == RNN_GRU ? rows * G : 0},
    };
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++) {
        if (bufs[k].n == 0) continue;
        if (!(*bufs[k].p = nn_alloc_floats(bufs[k].n, err))) return CALF_ENOMEM;
    }
    if (!(c->start = mem_alloc(rows, err))) return CALF_ENOMEM;
    return CALF_OK;
}

void rnn_cache_free(rnn_cache *c) {
    if (!c) return;
    float *bufs[] = {c->x,  c->hprev, c->cprev, c->act, c->aux, c->ax,    c->dgh,  c->ah,
                     c->h,  c->c,     c->dh,    c->dc,  c->tmp, c->wt_ih, c->wt_hh, c->pack, c->pout};
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++) free(bufs[k]);
    free(c->start);
    memset(c, 0, sizeof *c);
}

static void check_cache(const rnn_cell *cell, const rnn_cache *c, int T, int B) {
    CALF_ASSERT(c->kind == cell->kind && c->in == cell->in && c->hidden == cell->hidden);
    CALF_ASSERT(T >= 0 && T <= c->max_T && B >= 0 && B <= c->max_B);
}

/* ---------------------------------------------------------------- products */

/* Rows per call of the weight-gradient kernel: nn's dW tile streams every row of dy once
 * per six inputs, so a call over all T x B rows streams dy from memory dozens of times;
 * chunks whose x and dy rows together fit in half of L2 (CHUNK_FLOATS: 256 KiB) stream
 * them from there (at 512 -> 128, 64 rows: 122 -> 58 ms with the panels below). Each
 * chunk continues the previous one's chains (ACC), so the bits are those of one call
 * over all rows. */
static int grad_chunk_rows(int in, int out) {
    int rows = CHUNK_FLOATS / (in + out);
    return rows < 32 ? 32 : rows;
}

/* dw, db by mode over R rows, in chunks (see grad_chunk_rows); ADD builds the SET chain
 * in scratch (in * out + out floats) and adds it once. */
static void params_grad(const float *x, const float *dy, int R, int in, int out, float *dw,
                        float *db, rnn_grad_mode mode, float *scratch) {
    float *w = mode == RNN_GRAD_ADD ? scratch : dw;
    float *b = mode == RNN_GRAD_ADD ? scratch + (size_t)in * out : db;
    int chunk = grad_chunk_rows(in, out);
    for (int r0 = 0; r0 < R; r0 += chunk) {
        int n = R - r0 < chunk ? R - r0 : chunk;
        const float *xr = x + (size_t)r0 * in, *dr = dy + (size_t)r0 * out;
        if (r0 == 0 && mode != RNN_GRAD_ACC) nn_linear_backward_params_set(xr, dr, n, in, out, w, b);
        else nn_linear_backward_params(xr, dr, n, in, out, w, b);
    }
    if (mode != RNN_GRAD_ADD) return;
    for (size_t e = 0; e < (size_t)in * out; e++) dw[e] = dw[e] + w[e];
    for (int e = 0; e < out; e++) db[e] = db[e] + b[e];
}

/* y (R, N) = x (R, K) w (K, N): with init, nn_linear_forward's order (init then madd
 * over k ascending), without, nn_linear_backward_input's (from 0). A wide w is cut into
 * panels of about PANEL columns, each packed contiguous (128 KiB at K = 512, L2-sized)
 * and run over blocks of PANEL_ROWS rows, so every block reads its panel from L2 where a
 * single call reads all of w from memory for every six rows. Each element's chain is
 * the single call's (no panel narrower than NN_SMALL_OUT, whose forward order differs).
 * pack: K * N floats; out: PANEL_ROWS * (PANEL + NN_SMALL_OUT) floats (rnn_cache's). */
static int panel_width(int N, int n0) {
    return N - n0 < PANEL + NN_SMALL_OUT ? N - n0 : PANEL;
}

static void product(const float *x, const float *w, const float *init, int R, int K, int N,
                    float *y) {
    if (init) {
        int rc = nn_linear_forward(x, w, init, R, K, N, y, NULL); /* N >= NN_SMALL_OUT */
        CALF_ASSERT(rc == CALF_OK);
    } else {
        nn_linear_backward_input(x, w, R, N, K, y);
    }
}

static void panel_product(const float *x, const float *w, const float *init, int R, int K,
                          int N, float *y, float *pack, float *out) {
    CALF_ASSERT(!init || N >= NN_SMALL_OUT);
    if (N < PANEL + NN_SMALL_OUT) {
        product(x, w, init, R, K, N, y);
        return;
    }
    for (int n0 = 0, nc; n0 < N; n0 += nc) {
        nc = panel_width(N, n0);
        for (int k = 0; k < K; k++)
            memcpy(pack + (size_t)K * n0 + (size_t)k * nc, w + (size_t)k * N + n0,
                   (size_t)nc * sizeof(float));
    }
    for (int r0 = 0; r0 < R; r0 += PANEL_ROWS) {
        int rn = R - r0 < PANEL_ROWS ? R - r0 : PANEL_ROWS;
        for (int n0 = 0, nc; n0 < N; n0 += nc) {
            nc = panel_width(N, n0);
            product(x + (size_t)r0 * K, pack + (size_t)K * n0, init ? init + n0 : NULL, rn, K,
                    nc, out);
            for (int r = 0; r < rn; r++)
                memcpy(y + (size_t)(r0 + r) * N + n0, out + (size_t)r * nc,
                       (size_t)nc * sizeof(float));
        }
    }
}

/* ---------------------------------------------------------------- one step's gates */

/* sigma(v) = madd(0.5, tanh(0.5 v), 0.5): halve, one tanh pass, then this. */
static void halve(float *restrict a, int n) {
    for (int k = 0; k < n; k++) a[k] = 0.5f * a[k];
}

static void sigmoid_finish(float *restrict a, int n) {
    for (int k = 0; k < n; k++) a[k] = nn_madd(0.5f, a[k], 0.5f);
}

/* Step t of B rows: ax (B, G) the input products, ah (B, G) the hidden ones, hp and cp
 * (B, H) the state read; writes act (B, G), aux (B, H) and the new state h, c. */
static void lstm_gates(int B, int H, const float *restrict ax, const float *restrict ah,
                       const float *restrict cp, float *restrict act, float *restrict aux,
                       float *restrict h, float *restrict c) {
    int G = 4 * H;
    for (int b = 0; b < B; b++) {
        const float *xr = ax + (size_t)b * G, *hr = ah + (size_t)b * G;
        float *a = act + (size_t)b * G;
        for (int k = 0; k < G; k++) a[k] = xr[k] + hr[k];
        halve(a, 2 * H);         /* i, f */
        halve(a + 3 * H, H);     /* o */
        nn_tanh(a, a, (size_t)G);
        sigmoid_finish(a, 2 * H);
        sigmoid_finish(a + 3 * H, H);
        const float *ig = a, *fg = a + H, *gg = a + 2 * H, *og = a + 3 * H;
        const float *cr = cp + (size_t)b * H;
        float *cn = c + (size_t)b * H, *u = aux + (size_t)b * H, *hn = h + (size_t)b * H;
        for (int j = 0; j < H; j++) cn[j] = nn_madd(fg[j], cr[j], ig[j] * gg[j]);
        nn_tanh(cn, u, (size_t)H);
        for (int j = 0; j < H; j++) hn[j] = og[j] * u[j];
    }
}

/* The GRU's step: aux keeps ah_n for backward; hp is the state read, h the new one (they
 * may not alias). */
static void gru_gates(int B, int H, const float *restrict ax, const float *restrict ah,
                      const float *restrict hp, float *restrict act, float *restrict aux,
                      float *restrict h) {
    int G = 3 * H;
    for (int b = 0; b < B; b++) {
        const float *xr = ax + (size_t)b * G, *hr = ah + (size_t)b * G;
        float *a = act + (size_t)b * G;
        for (int k = 0; k < 2 * H; k++) a[k] = 0.5f * (xr[k] + hr[k]);
        nn_tanh(a, a, (size_t)(2 * H));
        sigmoid_finish(a, 2 * H);
        const float *r = a, *z = a + H;
        float *n = a + 2 * H, *ahn = aux + (size_t)b * H;
        for (int j = 0; j < H; j++) {
            ahn[j] = hr[2 * H + j];
            n[j] = nn_madd(r[j], hr[2 * H + j], xr[2 * H + j]);
        }
        nn_tanh(n, n, (size_t)H);
        const float *hr0 = hp + (size_t)b * H;
        float *hn = h + (size_t)b * H;
        for (int j = 0; j < H; j++) hn[j] = nn_madd(z[j], hr0[j] - n[j], n[j]);
    }
}

/* dst = the state src after the resets of start (B rows of H): exact zeros or copies. */
static void reset_rows(const float *src, const uint8_t *start, int B, int H, float *dst) {
    for (int b = 0; b < B; b++) {
        float *d = dst + (size_t)b * H;
        if (start && start[b]) memset(d, 0, (size_t)H * sizeof *d);
        else if (src) memmove(d, src + (size_t)b * H, (size_t)H * sizeof *d);
        else memset(d, 0, (size_t)H * sizeof *d);
    }
}

/* One step from the input products ax (B, G): reads the state h, c of the cache's
 * running buffers (or h0/c0 given), keeps the reset state in hp/cp and the gates in act
 * and aux, and leaves the new state in the running buffers. */
static void step(const rnn_cell *cell, const float *params, rnn_cache *k, const float *ax,
                 const uint8_t *start, int B, const float *hin, const float *cin, float *hp,
                 float *cp, float *act, float *aux) {
    int H = cell->hidden, G = cell->gates;
    reset_rows(hin, start, B, H, hp);
    /* out = G >= 9 >= NN_SMALL_OUT: the row-wise kernel, which allocates nothing */
    int rc = nn_linear_forward(hp, params + cell->w_hh_off, params + cell->b_hh_off, B, H, G,
                               k->ah, NULL);
    CALF_ASSERT(rc == CALF_OK);
    if (cell->kind == RNN_LSTM) {
        reset_rows(cin, start, B, H, cp);
        lstm_gates(B, H, ax, k->ah, cp, act, aux, k->h, k->c);
    } else {
        gru_gates(B, H, ax, k->ah, hp, act, aux, k->h);
    }
}

void rnn_forward(const rnn_cell *cell, const float *params, rnn_cache *k, const float *x,
                 const uint8_t *episode_start, const float *h0, const float *c0, int T, int B,
                 float *y, float *hT, float *cT) {
    check_cache(cell, k, T, B);
    CALF_ASSERT(cell->kind == RNN_LSTM || (c0 == NULL && cT == NULL));
    int H = cell->hidden, G = cell->gates, in = cell->in;
    size_t TB = (size_t)T * (size_t)B;
    k->T = T;
    k->B = B;
    k->params = params;
    if (TB == 0) return;
    memcpy(k->x, x, TB * (size_t)in * sizeof(float));
    if (episode_start) memcpy(k->start, episode_start, TB);
    else memset(k->start, 0, TB);
    panel_product(x, params + cell->w_ih_off, params + cell->b_ih_off, (int)TB, in, G, k->ax,
                  k->pack, k->pout);
    for (int t = 0; t < T; t++) {
        size_t r0 = (size_t)t * B;
        step(cell, params, k, k->ax + r0 * G, k->start + r0, B, t ? k->h : h0, t ? k->c : c0,
             k->hprev + r0 * H, k->cprev ? k->cprev + r0 * H : NULL, k->act + r0 * G,
             k->aux + r0 * H);
        if (y) memcpy(y + r0 * H, k->h, (size_t)B * H * sizeof(float));
    }
    if (hT) memcpy(hT, k->h, (size_t)B * H * sizeof(float));
    if (cT) memcpy(cT, k->c, (size_t)B * H * sizeof(float));
}

void rnn_step(const rnn_cell *cell, const float *params, rnn_cache *k, const float *x,
              const uint8_t *episode_start, int B, float *h, float *c) {
    check_cache(cell, k, 1, B);
    CALF_ASSERT((cell->kind == RNN_LSTM) == (c != NULL));
    int H = cell->hidden, G = cell->gates;
    k->T = 0; /* the step overwrites what a forward kept */
    if (B == 0) return;
    int rc = nn_linear_forward(x, params + cell->w_ih_off, params + cell->b_ih_off, B, cell->in,
                               G, k->ax, NULL);
    CALF_ASSERT(rc == CALF_OK);
    step(cell, params, k, k->ax, episode_start, B, h, c, k->hprev, k->cprev, k->act, k->aux);
    memcpy(h, k->h, (size_t)B * H * sizeof(float));
    if (c) memcpy(c, k->c, (size_t)B * H * sizeof(float));
}

/* ---------------------------------------------------------------- backward */

/* Step t's gate gradients for B rows from dh (carried + dy, B x H) and dc (LSTM): writes
 * the input-side ones into dax (B, G) and the new dc (before the reset). */
static void lstm_back(int B, int H, const float *restrict act, const float *restrict aux,
                      const float *restrict cp, const float *restrict dh,
                      float *restrict dc, float *restrict dax) {
    int G = 4 * H;
    for (int b = 0; b < B; b++) {
        const float *a = act + (size_t)b * G, *u = aux + (size_t)b * H;
        const float *ig = a, *fg = a + H, *gg = a + 2 * H, *og = a + 3 * H;
        const float *c = cp + (size_t)b * H, *d = dh + (size_t)b * H;
        float *dcr = dc + (size_t)b * H, *g = dax + (size_t)b * G;
        for (int j = 0; j < H; j++) {
            float dcs = nn_madd(d[j] * og[j], 1.0f - u[j] * u[j], dcr[j]);
            g[j] = (dcs * gg[j]) * (ig[j] * (1.0f - ig[j]));
            g[H + j] = (dcs * c[j]) * (fg[j] * (1.0f - fg[j]));
            g[2 * H + j] = (dcs * ig[j]) * (1.0f - gg[j] * gg[j]);
            g[3 * H + j] = (d[j] * u[j]) * (og[j] * (1.0f - og[j]));
            dcr[j] = dcs * fg[j];
        }
    }
}

static void gru_back(int B, int H, const float *restrict act, const float *restrict aux,
                     const float *restrict hp, const float *restrict dh, float *restrict dax,
                     float *restrict dgh) {
    int G = 3 * H;
    for (int b = 0; b < B; b++) {
        const float *a = act + (size_t)b * G, *ahn = aux + (size_t)b * H;
        const float *r = a, *z = a + H, *n = a + 2 * H;
        const float *h = hp + (size_t)b * H, *d = dh + (size_t)b * H;
        float *gx = dax + (size_t)b * G, *gh = dgh + (size_t)b * G;
        for (int j = 0; j < H; j++) {
            float dn = (d[j] * (1.0f - z[j])) * (1.0f - n[j] * n[j]);
            float dz = (d[j] * (h[j] - n[j])) * (z[j] * (1.0f - z[j]));
            float dr = (dn * ahn[j]) * (r[j] * (1.0f - r[j]));
            gx[j] = gh[j] = dr;
            gx[H + j] = gh[H + j] = dz;
            gx[2 * H + j] = dn;
            gh[2 * H + j] = dn * r[j];
        }
    }
}

void rnn_backward(const rnn_cell *cell, const float *params, rnn_cache *k, const float *dy,
                  const float *dhT, const float *dcT, float *grad, rnn_grad_mode mode,
                  float *dx, float *dh0, float *dc0) {
    int T = k->T, B = k->B, H = cell->hidden, G = cell->gates, in = cell->in;
    check_cache(cell, k, T, B);
    CALF_ASSERT(params == k->params);
    CALF_ASSERT(cell->kind == RNN_LSTM || (dcT == NULL && dc0 == NULL));
    bool lstm = cell->kind == RNN_LSTM;
    size_t BH = (size_t)B * H, TB = (size_t)T * B;
    if (dhT) memcpy(k->dh, dhT, BH * sizeof(float));
    else memset(k->dh, 0, BH * sizeof(float));
    if (dcT) memcpy(k->dc, dcT, BH * sizeof(float));
    else memset(k->dc, 0, BH * sizeof(float));
    if (T > 0 && B > 0) nn_transpose(params + cell->w_hh_off, H, G, k->wt_hh);
    /* the input products are no longer needed: their buffer takes the input-side gate
     * gradients (the hidden side's too, for the LSTM) */
    float *dax = k->ax, *dgh = lstm ? k->ax : k->dgh;
    for (int t = T - 1; t >= 0; t--) {
        size_t r0 = (size_t)t * B;
        if (dy)
            for (size_t e = 0; e < BH; e++) k->dh[e] = k->dh[e] + dy[r0 * H + e];
        const float *act = k->act + r0 * G, *aux = k->aux + r0 * H;
        if (lstm) {
            lstm_back(B, H, act, aux, k->cprev + r0 * H, k->dh, k->dc, dax + r0 * G);
        } else {
            gru_back(B, H, act, aux, k->hprev + r0 * H, k->dh, dax + r0 * G, dgh + r0 * G);
        }
        nn_linear_backward_input(dgh + r0 * G, k->wt_hh, B, H, G, k->tmp);
        if (!lstm) {
            const float *z = act + H;
            for (int b = 0; b < B; b++)
                for (int j = 0; j < H; j++) {
                    size_t e = (size_t)b * H + j;
                    k->tmp[e] = nn_madd(k->dh[e], z[(size_t)b * G + j], k->tmp[e]);
                }
        }
        memcpy(k->dh, k->tmp, BH * sizeof(float));
        const uint8_t *start = k->start + r0;
        for (int b = 0; b < B; b++)
            if (start[b]) {
                memset(k->dh + (size_t)b * H, 0, (size_t)H * sizeof(float));
                memset(k->dc + (size_t)b * H, 0, (size_t)H * sizeof(float));
            }
    }
    if (dh0) memcpy(dh0, k->dh, BH * sizeof(float));
    if (dc0) memcpy(dc0, k->dc, BH * sizeof(float));
    if (grad && TB > 0) {
        params_grad(k->x, dax, (int)TB, in, G, grad + cell->w_ih_off, grad + cell->b_ih_off, mode,
                    k->pack);
        params_grad(k->hprev, dgh, (int)TB, H, G, grad + cell->w_hh_off, grad + cell->b_hh_off,
                    mode, k->pack);
    } else if (grad && mode == RNN_GRAD_SET) {
        /* no rows: the SET chains are +0 */
        memset(grad + cell->w_ih_off, 0, (size_t)in * G * sizeof(float));
        memset(grad + cell->w_hh_off, 0, (size_t)H * G * sizeof(float));
        memset(grad + cell->b_ih_off, 0, (size_t)G * sizeof(float));
        memset(grad + cell->b_hh_off, 0, (size_t)G * sizeof(float));
    }
    if (dx && TB > 0) {
        nn_transpose(params + cell->w_ih_off, in, G, k->wt_ih);
        panel_product(dax, k->wt_ih, NULL, (int)TB, G, in, dx, k->pack, k->pout);
    }
}
