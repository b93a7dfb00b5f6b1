/* conv2d.c: the NHWC convolution layer of conv2d.h: layout, init, forward and backward.
 * The kernels work on a zero-padded copy of each sample, in tiles of output positions x
 * filters held in registers; every element still runs the one chain conv2d.h documents. */
#include "numerics/conv2d.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define CONV_AVX2 1
#else
#define CONV_AVX2 0
#endif

#define CONV_INLINE static inline __attribute__((always_inline))

/* Rows per tile: 6 rows x 16 columns is 12 accumulators, 2 weight vectors and a
 * broadcast, within AVX2's 16 registers. */
enum { TILE_ROWS = 6, DW_TILE = 6, DW_CHUNK = 64 };

/* ---------------------------------------------------------------- layout, init */

int conv2d_layout(conv2d *l, int in_h, int in_w, int in_c, int filters, int kernel,
                  int stride, int pad, size_t *cursor, calf_error *err) {
    memset(l, 0, sizeof *l);
    if (in_h <= 0 || in_w <= 0 || in_c <= 0 || filters <= 0 || kernel <= 0 || stride <= 0 ||
        pad < 0 || in_h + 2 * pad < kernel || in_w + 2 * pad < kernel)
        return calf_error_set(err, CALF_EINVAL,
                              "conv2d: input %dx%dx%d with %d filters, kernel %d, stride %d, "
                              "padding %d: sizes and stride must be positive, padding >= 0, "
                              "and the kernel must fit the padded input",
                              in_h, in_w, in_c, filters, kernel, stride, pad);
    *l = (conv2d){.in_h = in_h, .in_w = in_w, .in_c = in_c, .filters = filters,
                  .kernel = kernel, .stride = stride, .pad = pad,
                  .out_h = (in_h + 2 * pad - kernel) / stride + 1,
                  .out_w = (in_w + 2 * pad - kernel) / stride + 1};
    size_t cur = *cursor;
    l->offset = cur;
    cur = (cur + 15) / 16 * 16;
    l->w_off = cur;
    cur += (size_t)conv2d_patch(l) * (size_t)filters;
    l->b_off = cur;
    cur += (size_t)filters;
    l->num_params = cur - l->offset;
    *cursor = cur;
    return CALF_OK;
}

int conv2d_init(const conv2d *l, float *params, float gain, calf_rng *rng, calf_error *err) {
    int F = l->filters, C = l->in_c, k = l->kernel, KP = conv2d_patch(l);
    memset(params + l->offset, 0, l->num_params * sizeof(float));
    float *q = mem_alloc((size_t)F * (size_t)KP * sizeof *q, err); /* (F, C*k*k) */
    if (!q) return CALF_ENOMEM;
    int rc = nn_orthogonal_init(q, F, KP, gain, rng, err);
    if (rc == CALF_OK) {
        float *w = params + l->w_off;
        for (int f = 0; f < F; f++)
            for (int c = 0; c < C; c++)
                for (int kh = 0; kh < k; kh++)
                    for (int kw = 0; kw < k; kw++)
                        w[((size_t)(kh * k + kw) * C + c) * F + f] =
                            q[(size_t)f * KP + (size_t)(c * k + kh) * k + kw];
    }
    free(q);
    return rc;
}

/* ---------------------------------------------------------------- cache */

static int padded_w(const conv2d *l) { return l->in_w + 2 * l->pad; }
static int padded_h(const conv2d *l) { return l->in_h + 2 * l->pad; }
/* Columns of W^T and of the patch gradient: k*k*C rounded up to whole 8-float vectors. */
static int patch_stride(const conv2d *l) { return (conv2d_patch(l) + 7) / 8 * 8; }

int conv2d_cache_init(conv2d_cache *c, const conv2d *l, int max_rows, calf_error *err) {
    CALF_ASSERT(max_rows > 0);
    memset(c, 0, sizeof *c);
    int C = l->in_c, k = l->kernel, s = l->stride, Wp = padded_w(l);
    int npos = l->out_h * l->out_w, KP = conv2d_patch(l);
    c->max_rows = max_rows;
    c->padded_size = (size_t)padded_h(l) * (size_t)Wp * (size_t)C;
    size_t padded_n = c->padded_size * (size_t)max_rows;
    if (padded_n / (size_t)max_rows != c->padded_size) {
        calf_error_set(err, CALF_ENOMEM, "conv2d: %d samples of %zu floats do not fit memory",
                       max_rows, c->padded_size);
        return CALF_ENOMEM;
    }
    c->padded = nn_alloc_floats(padded_n, err);
    size_t KPp = (size_t)patch_stride(l);
    c->wt = c->padded ? nn_alloc_floats(KPp * (size_t)l->filters, err) : NULL;
    c->dpatch = c->wt ? nn_alloc_floats((size_t)npos * KPp, err) : NULL;
    c->dpad = c->dpatch ? nn_alloc_floats(c->padded_size, err) : NULL;
    c->pos_off = c->dpad ? mem_alloc((size_t)npos * sizeof(int), err) : NULL;
    c->patch_off = c->pos_off ? mem_alloc((size_t)KP * sizeof(int), err) : NULL;
    if (!c->patch_off) {
        conv2d_cache_free(c);
        return CALF_ENOMEM;
    }
    for (int oh = 0; oh < l->out_h; oh++)
        for (int ow = 0; ow < l->out_w; ow++)
            c->pos_off[oh * l->out_w + ow] = ((oh * s) * Wp + ow * s) * C;
    for (int kh = 0; kh < k; kh++)
        for (int j = 0; j < k * C; j++) c->patch_off[kh * k * C + j] = kh * Wp * C + j;
    return CALF_OK;
}

void conv2d_cache_free(conv2d_cache *c) {
    if (!c) return;
    free(c->padded), free(c->wt), free(c->dpatch), free(c->dpad);
    free(c->pos_off), free(c->patch_off);
    memset(c, 0, sizeof *c);
}

/* ---------------------------------------------------------------- the product kernel */

/* For each of R rows r and columns n < N: y = init[n] (+0 when init is NULL), then for
 * segment s ascending, j < seglen ascending:
 *   y = madd(xp[r][seg_off[s] + j], w[(s * seglen + j) * ldw + n], y),
 * stored at yp[r][n]. The forward is this with a row per output position (xp its patch,
 * a segment per kernel row), dX's patch gradient with a row per position of dy (one
 * segment of F) and w = W^T. */
typedef struct {
    const int *seg_off;
    int nseg, seglen;
    const float *w;
    int ldw;
    const float *init;
} chain_spec;

static void scalar_rows(int R, const float *const *xp, const chain_spec *cs, int n_begin,
                        int n_end, float *const *yp) {
    for (int r = 0; r < R; r++) {
        for (int n = n_begin; n < n_end; n++) {
            float acc = cs->init ? cs->init[n] : 0.0f;
            const float *w = cs->w + n;
            for (int s = 0; s < cs->nseg; s++) {
                const float *x = xp[r] + cs->seg_off[s];
                for (int j = 0; j < cs->seglen; j++, w += cs->ldw) acc = nn_madd(x[j], *w, acc);
            }
            yp[r][n] = acc;
        }
    }
}

#if CONV_AVX2
CONV_INLINE void rows_tile(int RT, int NV, const float *const *xp, const chain_spec *cs, int n0,
                           float *const *yp) {
    __m256 acc[TILE_ROWS][2];
    for (int r = 0; r < RT; r++)
        for (int v = 0; v < NV; v++)
            acc[r][v] = cs->init ? _mm256_loadu_ps(cs->init + n0 + 8 * v) : _mm256_setzero_ps();
    const float *w = cs->w + n0;
    for (int s = 0; s < cs->nseg; s++) {
        const float *x[TILE_ROWS];
        for (int r = 0; r < RT; r++) x[r] = xp[r] + cs->seg_off[s];
        for (int j = 0; j < cs->seglen; j++, w += cs->ldw) {
            __m256 wv[2];
            for (int v = 0; v < NV; v++) wv[v] = _mm256_loadu_ps(w + 8 * v);
            for (int r = 0; r < RT; r++) {
                __m256 xb = _mm256_broadcast_ss(x[r] + j);
                for (int v = 0; v < NV; v++) acc[r][v] = _mm256_fmadd_ps(xb, wv[v], acc[r][v]);
            }
        }
    }
    for (int r = 0; r < RT; r++)
        for (int v = 0; v < NV; v++) _mm256_storeu_ps(yp[r] + n0 + 8 * v, acc[r][v]);
}

/* Four columns, in 128-bit registers: the same chain per element. */
CONV_INLINE void rows_tile4(int RT, const float *const *xp, const chain_spec *cs, int n0,
                            float *const *yp) {
    __m128 acc[TILE_ROWS];
    for (int r = 0; r < RT; r++) acc[r] = cs->init ? _mm_loadu_ps(cs->init + n0) : _mm_setzero_ps();
    const float *w = cs->w + n0;
    for (int s = 0; s < cs->nseg; s++) {
        const float *x[TILE_ROWS];
        for (int r = 0; r < RT; r++) x[r] = xp[r] + cs->seg_off[s];
        for (int j = 0; j < cs->seglen; j++, w += cs->ldw) {
            __m128 wv = _mm_loadu_ps(w);
            for (int r = 0; r < RT; r++)
                acc[r] = _mm_fmadd_ps(_mm_broadcast_ss(x[r] + j), wv, acc[r]);
        }
    }
    for (int r = 0; r < RT; r++) _mm_storeu_ps(yp[r] + n0, acc[r]);
}

CONV_INLINE void rows_block(int RT, const float *const *xp, const chain_spec *cs, int N,
                            float *const *yp) {
    int n = 0;
    for (; n + 16 <= N; n += 16) rows_tile(RT, 2, xp, cs, n, yp);
    for (; n + 8 <= N; n += 8) rows_tile(RT, 1, xp, cs, n, yp);
    if (n + 4 <= N) {
        rows_tile4(RT, xp, cs, n, yp);
        n += 4;
    }
    if (n < N) scalar_rows(RT, xp, cs, n, N, yp);
}
#endif

/* One tile of R <= TILE_ROWS rows over all N columns. */
static void rows_any(int R, const float *const *xp, const chain_spec *cs, int N,
                     float *const *yp) {
#if CONV_AVX2
    switch (R) { /* constant row counts, so each tile's loops unroll into registers */
    case 6: rows_block(6, xp, cs, N, yp); break;
    case 5: rows_block(5, xp, cs, N, yp); break;
    case 4: rows_block(4, xp, cs, N, yp); break;
    case 3: rows_block(3, xp, cs, N, yp); break;
    case 2: rows_block(2, xp, cs, N, yp); break;
    default: rows_block(1, xp, cs, N, yp); break;
    }
#else
    scalar_rows(R, xp, cs, 0, N, yp);
#endif
}

/* ---------------------------------------------------------------- forward */

void conv2d_forward(const conv2d *l, const float *params, const float *x, int B,
                    conv2d_cache *c, float *y) {
    CALF_ASSERT(B >= 0 && B <= c->max_rows);
    int C = l->in_c, F = l->filters, k = l->kernel, Wp = padded_w(l);
    int npos = l->out_h * l->out_w;
    size_t row = (size_t)l->in_w * C, in_size = conv2d_in_size(l);
    for (int n = 0; n < B; n++) {
        float *p = c->padded + (size_t)n * c->padded_size + ((size_t)l->pad * Wp + l->pad) * C;
        for (int h = 0; h < l->in_h; h++)
            memcpy(p + (size_t)h * Wp * C, x + (size_t)n * in_size + h * row, row * sizeof(float));
    }
    int seg_off[64];
    CALF_ASSERT(k <= 64);
    for (int kh = 0; kh < k; kh++) seg_off[kh] = kh * Wp * C;
    chain_spec cs = {.seg_off = seg_off, .nseg = k, .seglen = k * C, .w = params + l->w_off,
                     .ldw = F, .init = params + l->b_off};
    /* rows are (sample, position) pairs in order; a tile may span two samples */
    size_t total = (size_t)B * (size_t)npos;
    for (size_t g = 0; g < total; g += TILE_ROWS) {
        int R = total - g < TILE_ROWS ? (int)(total - g) : TILE_ROWS;
        const float *xp[TILE_ROWS];
        float *yp[TILE_ROWS];
        for (int r = 0; r < R; r++) {
            size_t n = (g + r) / (size_t)npos, pos = (g + r) % (size_t)npos;
            xp[r] = c->padded + n * c->padded_size + c->pos_off[pos];
            yp[r] = y + (g + r) * (size_t)F;
        }
        rows_any(R, xp, &cs, F, yp);
    }
    c->rows = B;
    c->params = params;
}

/* ---------------------------------------------------------------- backward */

/* dw[p][f] for p in [p0, p0 + KT), f in [f0, f0 + 8 NV): continue each chain over the
 * R rows (xr[r]: row r's patch, dy row r at dy + r F) from what dw holds, or from +0
 * when zero is set. */
static void scalar_dw(int R, const float *const *xr, const int *patch_off, const float *dy,
                      int F, int p0, int p1, int f0, int f1, float *dw, int zero) {
    for (int p = p0; p < p1; p++) {
        for (int f = f0; f < f1; f++) {
            float acc = zero ? 0.0f : dw[(size_t)p * F + f];
            for (int r = 0; r < R; r++)
                acc = nn_madd(xr[r][patch_off[p]], dy[(size_t)r * F + f], acc);
            dw[(size_t)p * F + f] = acc;
        }
    }
}

#if CONV_AVX2
CONV_INLINE void dw_tile(int KT, int NV, int R, const float *const *xr, const int *patch_off,
                         const float *dy, int F, int p0, int f0, float *dw, int zero) {
    __m256 acc[DW_TILE][2];
    int off[DW_TILE];
    for (int kk = 0; kk < KT; kk++) {
        off[kk] = patch_off[p0 + kk];
        for (int v = 0; v < NV; v++)
            acc[kk][v] = zero ? _mm256_setzero_ps()
                              : _mm256_loadu_ps(dw + (size_t)(p0 + kk) * F + f0 + 8 * v);
    }
    for (int r = 0; r < R; r++) {
        __m256 dv[2];
        for (int v = 0; v < NV; v++) dv[v] = _mm256_loadu_ps(dy + (size_t)r * F + f0 + 8 * v);
        for (int kk = 0; kk < KT; kk++) {
            __m256 xb = _mm256_broadcast_ss(xr[r] + off[kk]);
            for (int v = 0; v < NV; v++) acc[kk][v] = _mm256_fmadd_ps(xb, dv[v], acc[kk][v]);
        }
    }
    for (int kk = 0; kk < KT; kk++)
        for (int v = 0; v < NV; v++)
            _mm256_storeu_ps(dw + (size_t)(p0 + kk) * F + f0 + 8 * v, acc[kk][v]);
}

CONV_INLINE void dw_cols(int KT, int R, const float *const *xr, const int *patch_off,
                         const float *dy, int F, int p0, float *dw, int zero) {
    int f = 0;
    for (; f + 16 <= F; f += 16) dw_tile(KT, 2, R, xr, patch_off, dy, F, p0, f, dw, zero);
    for (; f + 8 <= F; f += 8) dw_tile(KT, 1, R, xr, patch_off, dy, F, p0, f, dw, zero);
    if (f < F) scalar_dw(R, xr, patch_off, dy, F, p0, p0 + KT, f, F, dw, zero);
}
#endif

/* The dW chains over R <= DW_CHUNK rows, every patch index. */
static void dw_rows(int R, const float *const *xr, const int *patch_off, int KP,
                    const float *dy, int F, float *dw, int zero) {
#if CONV_AVX2
    int p = 0;
    for (; p + DW_TILE <= KP; p += DW_TILE) dw_cols(DW_TILE, R, xr, patch_off, dy, F, p, dw, zero);
    for (; p + 2 <= KP; p += 2) dw_cols(2, R, xr, patch_off, dy, F, p, dw, zero);
    if (p < KP) dw_cols(1, R, xr, patch_off, dy, F, p, dw, zero);
#else
    scalar_dw(R, xr, patch_off, dy, F, 0, KP, 0, F, dw, zero);
#endif
}

/* d[i] = d[i] + s[i]: one add per element, no fusing (-ffp-contract=off), vectorized. */
static void add_into(float *restrict d, const float *restrict s, int n) {
    for (int i = 0; i < n; i++) d[i] = d[i] + s[i];
}

static void backward(const conv2d *l, const float *params, conv2d_cache *c, int row_begin,
                     int row_count, const float *dy, float *grad, float *dx, int set) {
    CALF_ASSERT(c->params == params);
    CALF_ASSERT(row_begin >= 0 && row_count >= 0 && row_begin + row_count <= c->rows);
    int F = l->filters, KP = conv2d_patch(l), npos = l->out_h * l->out_w;
    if (grad) {
        float *dw = grad + l->w_off, *db = grad + l->b_off;
        if (set) {
            for (int f = 0; f < F; f++) db[f] = 0.0f;
            if (row_count == 0) memset(dw, 0, (size_t)KP * F * sizeof(float));
        }
        /* rows (sample, position) ascending, in chunks that keep their patches and dy
         * in cache; a chain stored to dw and loaded back keeps its bits */
        size_t total = (size_t)row_count * (size_t)npos;
        for (size_t g = 0; g < total; g += DW_CHUNK) {
            int R = total - g < DW_CHUNK ? (int)(total - g) : DW_CHUNK;
            const float *xr[DW_CHUNK];
            for (int r = 0; r < R; r++) {
                size_t n = (size_t)row_begin + (g + r) / (size_t)npos;
                xr[r] = c->padded + n * c->padded_size + c->pos_off[(g + r) % (size_t)npos];
            }
            const float *d = dy + g * (size_t)F;
            dw_rows(R, xr, c->patch_off, KP, d, F, dw, set && g == 0);
            for (int r = 0; r < R; r++)
                for (int f = 0; f < F; f++) db[f] = db[f] + d[(size_t)r * F + f];
        }
    }
    if (dx) {
        int C = l->in_c, Wp = padded_w(l), k = l->kernel, kC = k * C, KPp = patch_stride(l);
        /* W^T with its rows padded to KPp columns (zeros), so that the patch gradient's
         * tiles cover whole vectors; the extra columns are computed and never read */
        const float *w = params + l->w_off;
        for (int f = 0; f < F; f++)
            for (int p = 0; p < KP; p++) c->wt[(size_t)f * KPp + p] = w[(size_t)p * F + f];
        const int seg0 = 0;
        chain_spec cs = {.seg_off = &seg0, .nseg = 1, .seglen = F, .w = c->wt, .ldw = KPp,
                         .init = NULL};
        size_t in_size = conv2d_in_size(l), row = (size_t)l->in_w * C;
        for (int n = 0; n < row_count; n++) {
            const float *dyn = dy + (size_t)n * npos * F;
            for (int g = 0; g < npos; g += TILE_ROWS) {
                int R = npos - g < TILE_ROWS ? npos - g : TILE_ROWS;
                const float *xp[TILE_ROWS];
                float *yp[TILE_ROWS];
                for (int r = 0; r < R; r++) {
                    xp[r] = dyn + (size_t)(g + r) * F;
                    yp[r] = c->dpatch + (size_t)(g + r) * KPp;
                }
                rows_any(R, xp, &cs, KPp, yp);
            }
            memset(c->dpad, 0, c->padded_size * sizeof(float));
            /* a kernel row of a patch is k*C contiguous floats of the padded sample */
            for (int pos = 0; pos < npos; pos++)
                for (int kh = 0; kh < k; kh++)
                    add_into(c->dpad + c->pos_off[pos] + (size_t)kh * Wp * C,
                             c->dpatch + (size_t)pos * KPp + (size_t)kh * kC, kC);
            const float *src = c->dpad + ((size_t)l->pad * Wp + l->pad) * C;
            for (int h = 0; h < l->in_h; h++)
                memcpy(dx + (size_t)n * in_size + h * row, src + (size_t)h * Wp * C,
                       row * sizeof(float));
        }
    }
}

void conv2d_backward(const conv2d *l, const float *params, conv2d_cache *c, int row_begin,
                     int row_count, const float *dy, float *grad, float *dx) {
    backward(l, params, c, row_begin, row_count, dy, grad, dx, 0);
}

void conv2d_backward_set(const conv2d *l, const float *params, conv2d_cache *c,
                         int row_begin, int row_count, const float *dy, float *grad,
                         float *dx) {
    backward(l, params, c, row_begin, row_count, dy, grad, dx, 1);
}
