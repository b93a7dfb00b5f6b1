/* conv2d.h: a 2-D convolution layer on NHWC float samples (filters, kernel, stride, zero
 * padding, bias): layout in the flat parameter array, orthogonal init, forward, backward
 * (dX, dW, db), with its arithmetic order written down as nn.h's is. */
#ifndef CALF_CONV2D_H
#define CALF_CONV2D_H

#include <stddef.h>

#include "calf/error.h"
#include "calf/rng.h"
#include "numerics/nn.h"

/* Shapes. A sample is (H, W, C) row-major (NHWC; a batch is (B, H, W, C)); its output is
 * (OH, OW, F) with OH = (H + 2 pad - k) / stride + 1 (floor), OW alike, F = filters.
 * Flatten is a no-op: (B, OH, OW, F) is already (B, OH * OW * F) row-major, so the
 * linear layer after a conv reads its output as it is. (PyTorch flattens NCHW, (F, OH,
 * OW): the fc's input rows come in another order than a PyTorch model's.)
 *
 * Weights W (k, k, C, F) row-major, i.e. the (k*k*C, F) matrix whose row
 * p = (kh * k + kw) * C + c holds tap (kh, kw) of input channel c for every filter:
 * the patch of an output position is contiguous per kernel row in NHWC memory, and the
 * inner loop is a contiguous multiply-add over the filters, as nn.h's (in, out). The
 * PyTorch weight w[f][c][kh][kw] is W[kh][kw][c][f]. Bias b (F).
 *
 * Padded input: P is the sample with `pad` zero pixels on every side, (H + 2 pad,
 * W + 2 pad, C); the patch element p of output position (oh, ow) is
 * P[oh * stride + kh][ow * stride + kw][c]. A padding tap is multiplied like any other
 * (its value is +0), so every output element runs the same chain.
 *
 * Arithmetic order (part of the result, like the seed):
 * - Forward: y[n][oh][ow][f] = b[f], then for p = 0..k*k*C-1 ascending:
 *     y = madd(patch[n][oh][ow][p], W[p][f], y).
 * - dX: dpatch[n][oh][ow][p] = +0, then for f ascending:
 *     dpatch = madd(dy[n][oh][ow][f], W[p][f], dpatch);
 *   dP[n] = +0, then for (oh, ow) ascending (oh outer), for p ascending:
 *     dP[n][oh*stride + kh][ow*stride + kw][c] += dpatch[n][oh][ow][p];
 *   dx[n] is dP[n] without its padding. So each input element adds the positions that
 *   read it in ascending position order.
 * - dW, db: for n = row_begin.. ascending, then (oh, ow) ascending (oh outer):
 *     dW[p][f] = madd(patch[n][oh][ow][p], dy[n][oh][ow][f], dW[p][f]);
 *     db[f] = db[f] + dy[n][oh][ow][f].
 *   (accumulating onto grad, or from +0 for the _set form: the bits of zeroing first.)
 * madd is nn_madd (fmaf). A sample's y and dx depend on that sample alone; dW and db on
 * the rows passed and their order; nothing depends on thread count, batch split or
 * CPU. conv2d.c blocks over positions, patch indices, filters and rows only to reuse
 * loads (a 6-position by 16-filter tile in registers with AVX2 and FMA, scalar code
 * elsewhere); the blocking never changes the order.
 *
 * Init follows CleanRL's ppo_atari `layer_init`: orthogonal with gain sqrt(2) for a
 * hidden conv, bias 0, where PyTorch's orthogonal_ treats the weight as the (F, C*k*k)
 * matrix; nn_orthogonal_init draws it on that view, then it is stored as W above. */

/* A conv layer is a view into the flat parameter array: offsets only. */
typedef struct conv2d {
    int in_h, in_w, in_c;     /* H, W, C of a sample */
    int filters, kernel, stride, pad;
    int out_h, out_w;         /* OH, OW */
    size_t w_off;             /* W (kernel, kernel, in_c, filters), 16-float aligned */
    size_t b_off;             /* b (filters) */
    size_t offset;            /* this layer's span [offset, offset + num_params) */
    size_t num_params;        /* includes alignment padding (always zero) */
} conv2d;

/* Lay the layer out at *cursor (W on a multiple of 16 floats, as nn_mlp_layout) and
 * advance it. CALF_EINVAL, naming the shape, when a size or the stride is not
 * positive, the padding is negative, or the kernel does not fit the padded input. */
int conv2d_layout(conv2d *l, int in_h, int in_w, int in_c, int filters, int kernel,
                  int stride, int pad, size_t *cursor, calf_error *err);

static inline size_t conv2d_in_size(const conv2d *l) {  /* floats per input sample */
    return (size_t)l->in_h * (size_t)l->in_w * (size_t)l->in_c;
}
static inline size_t conv2d_out_size(const conv2d *l) { /* floats per output sample */
    return (size_t)l->out_h * (size_t)l->out_w * (size_t)l->filters;
}
static inline int conv2d_patch(const conv2d *l) {       /* k*k*C: rows of W */
    return l->kernel * l->kernel * l->in_c;
}

/* W := orthogonal with gain (nn_orthogonal_init on the (F, C*k*k) view, PyTorch's
 * flattening), b := 0; zeroes the layer's span first. Draws only from rng. */
int conv2d_init(const conv2d *l, float *params, float gain, calf_rng *rng, calf_error *err);

/* The padded inputs of the last forward (kept for backward) and scratch. */
typedef struct conv2d_cache {
    int max_rows;          /* capacity, in samples */
    int rows;              /* samples of the last forward; 0 before any */
    size_t padded_size;    /* floats per padded sample */
    float *padded;         /* (max_rows, H + 2 pad, W + 2 pad, C); the border stays 0 */
    float *wt;             /* (F, k*k*C rounded up to 8): W transposed, for dX */
    float *dpatch;         /* (OH*OW, the same): one sample's patch gradient */
    float *dpad;           /* (H + 2 pad, W + 2 pad, C): one sample's dP */
    int *pos_off;          /* (OH*OW): offset of a position's patch in a padded sample */
    int *patch_off;        /* (k*k*C): offset of patch element p from its position's */
    const float *params;   /* params of the last forward (checked by backward) */
} conv2d_cache;

/* Allocate for up to max_rows samples of l: CALF_ENOMEM when memory runs out (then
 * conv2d_cache_free frees what was made). conv2d_cache_free(NULL) is safe. */
int conv2d_cache_init(conv2d_cache *c, const conv2d *l, int max_rows, calf_error *err);
void conv2d_cache_free(conv2d_cache *c);

/* y = conv(x) + b for B <= c->max_rows samples; keeps the padded input in c. */
void conv2d_forward(const conv2d *l, const float *params,
                    const float *x, /* (B, H, W, C) */
                    int B, conv2d_cache *c,
                    float *y);      /* (B, OH, OW, F) */

/* Backprop samples [row_begin, row_begin + row_count) of the last forward. ACCUMULATES
 * (+=) dL/dW and dL/db into grad at l's offsets, samples in ascending order (so two
 * calls on [0, a) and [a, B) give the bits of one on [0, B)); writes (=) dL/dx into dx
 * when dx is not NULL (a first layer on observations needs none). params must be the
 * array the last forward used. grad may be NULL: only dx is wanted. */
void conv2d_backward(const conv2d *l, const float *params, conv2d_cache *c,
                     int row_begin, int row_count,
                     const float *dy, /* (row_count, OH, OW, F) */
                     float *grad,     /* flat gradient array, += at l's offsets */
                     float *dx);      /* (row_count, H, W, C), or NULL */
/* The same, but WRITES (=) dL/dW and dL/db: the bits of zeroing them, then
 * conv2d_backward, without the extra pass over memory. */
void conv2d_backward_set(const conv2d *l, const float *params, conv2d_cache *c,
                         int row_begin, int row_count,
                         const float *dy, /* (row_count, OH, OW, F) */
                         float *grad,     /* flat gradient array, = at l's offsets */
                         float *dx);      /* (row_count, H, W, C), or NULL */

#endif
