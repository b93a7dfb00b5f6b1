/* nn.h: the numeric core of calf's policies: flat parameter memory, linear layers,
 * activations, MLP forward/backward, orthogonal init (the optimizer is adam.h).
 * Every kernel computes a row's result independently of the batch it sits in (see
 * "Arithmetic order" below), which is what makes N-process training bit-identical. */
#ifndef CALF_NN_H
#define CALF_NN_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "calf/error.h"
#include "calf/rng.h"

/* Arithmetic order (part of the result, like the seed):
 * - Forward, layer with out >= NN_SMALL_OUT:
 *     y[r][o] = b[o], then for i = 0..in-1 ascending: y[r][o] = madd(x[r][i], W[i][o], y[r][o]).
 * - Forward, layer with out < NN_SMALL_OUT (a value or 2-action head):
 *     s[l] = 0 for 8 lanes; for i ascending: s[i % 8] = madd(x[r][i], W[i][o], s[i % 8]);
 *     y[r][o] = b[o] + (((s0+s1)+(s2+s3)) + ((s4+s5)+(s6+s7))).
 * - dX: dx[r][i] = 0, then for o ascending: dx[r][i] = madd(dy[r][o], W[i][o], dx[r][i]).
 * - dW, db: for r = row_begin.. ascending: dW[i][o] = madd(x[r][i], dy[r][o], dW[i][o]);
 *     db[o] = db[o] + dy[r][o].
 * madd is fmaf, a fused multiply-add (one rounding) on every target: one instruction where
 * the target has FMA (x86-64 with -mfma or -march=native, every aarch64), glibc's exact
 * emulation elsewhere; so it is the same bits for every element, row, batch size and CPU.
 * Kernels block over rows and features only to reuse loads; the blocking never changes
 * the order. */
static inline float nn_madd(float a, float b, float c) { return fmaf(a, b, c); }

#define NN_SMALL_OUT 8

typedef enum { NN_ACT_TANH, NN_ACT_RELU } nn_activation;

#define NN_MAX_LAYERS 8

/* An MLP is a view into a flat parameter array: offsets only, no memory of its own.
 * Layer l has weights W_l (sizes[l], sizes[l+1]) stored row-major (in, out) at
 * w_off[l] and bias (sizes[l+1]) at b_off[l]. Gradients and Adam moments use the same
 * offsets in their own flat arrays. */
typedef struct nn_mlp {
    int num_layers;                /* linear layers, hidden + output */
    int sizes[NN_MAX_LAYERS + 1];  /* sizes[0] = input dim, sizes[num_layers] = output dim */
    nn_activation act;             /* after every hidden layer; the output layer is linear */
    size_t w_off[NN_MAX_LAYERS];   /* offsets into the flat parameter array */
    size_t b_off[NN_MAX_LAYERS];
    size_t offset;                 /* this MLP's span [offset, offset + num_params) */
    size_t num_params;             /* includes alignment padding (always zero) */
} nn_mlp;

/* Lay the MLP out at *cursor and advance it. Each weight matrix starts on a multiple of
 * 16 floats (64 bytes when the array is allocated with nn_alloc_floats); the few
 * padding floats stay zero under Adam because their gradient is always zero. */
void nn_mlp_layout(nn_mlp *m, int in, const int *hidden, int num_hidden, int out,
                   nn_activation act, size_t *cursor);

/* Orthogonal init (PyTorch orthogonal_ semantics on the (out, in) weight): hidden layers
 * get gain hidden_gain (sqrt 2 for tanh/relu PPO), the output layer out_gain (0.01 for
 * a policy head, 1 for a value head); biases 0. Draws only from rng, layer by layer. */
int nn_mlp_init(const nn_mlp *m, float *params, float hidden_gain, float out_gain,
                calf_rng *rng, calf_error *err);

/* w (rows, cols) := gain * Q, where Q has orthonormal columns if rows >= cols, else
 * orthonormal rows: Q from the QR (modified Gram-Schmidt in double, positive diagonal
 * of R) of a Gaussian (max, min) matrix drawn row-major from rng. */
int nn_orthogonal_init(float *w, int rows, int cols, float gain, calf_rng *rng,
                       calf_error *err);

/* Zeroed float array aligned to 64 bytes, for flat parameter/gradient/moment arrays.
 * Caller owns it; release with free(). NULL with CALF_ENOMEM in err (err may be NULL)
 * when memory runs out, naming the caller's line. */
#define nn_alloc_floats(n, err) nn_alloc_floats_at((n), (err), __FILE__, __LINE__)
float *nn_alloc_floats_at(size_t n, calf_error *err, const char *file, int line);

/* Activations of the last forward (kept for backward) plus backward scratch space. */
typedef struct nn_cache {
    int max_rows;                     /* capacity */
    int rows;                         /* rows of the last forward; 0 before any */
    int num_layers;
    int sizes[NN_MAX_LAYERS + 1];
    float *act[NN_MAX_LAYERS + 1];    /* act[l]: (max_rows, sizes[l]); act[0] a copy of
                                         the input, act[num_layers] the output, others
                                         post-activation */
    float *wt[NN_MAX_LAYERS];         /* (sizes[l+1], sizes[l]) transposed weights; a
                                         large layer's in 16-input strips (nn.c, wt_pack) */
    unsigned wt_valid;                /* bit l: wt[l] matches params of the last forward */
    uint64_t version;                 /* caller's version of those params (0: none) */
    const float *params;              /* params of the last forward (checked by backward) */
    float *scratch[2];                /* (max_rows, max width): backward buffers */
    float *small;                     /* (max in * out of layers with out < NN_SMALL_OUT) */
} nn_cache;

/* Allocate activations for up to max_rows rows of m: CALF_ENOMEM when memory runs out
 * (then nn_cache_free frees what was made). nn_cache_free(NULL) is safe. */
int nn_cache_init(nn_cache *c, const nn_mlp *m, int max_rows, calf_error *err);
void nn_cache_free(nn_cache *c);

/* y = MLP(x) for B <= c->max_rows rows; keeps the activations in c for backward.
 * y may be NULL (the output stays readable at c->act[num_layers]). */
void nn_mlp_forward(const nn_mlp *m, const float *params,
                    const float *x, /* (B, in) */
                    int B, nn_cache *c,
                    float *y);      /* (B, out) */

/* The same, for callers that run several forwards on unchanged parameters (a minibatch
 * in groups of rows): a nonzero version equal to the last forward's, with the same
 * params pointer, promises the values did not change, so the transposed weights kept
 * for backward are reused. Bump the version whenever the parameters change. */
void nn_mlp_forward_v(const nn_mlp *m, const float *params, uint64_t version,
                      const float *x, /* (B, in) */
                      int B, nn_cache *c,
                      float *y);      /* (B, out) */

/* Backprop rows [row_begin, row_begin + row_count) of the last forward. ACCUMULATES
 * (+=) dL/dparams into grad (the flat gradient array, at m's offsets), rows in
 * ascending order; writes (=) dL/dx into dx when dx is not NULL. params must be the
 * array the last forward used, unchanged since: the transposed weights dX needs are
 * computed from it by the first backward after each forward and reused by the rest,
 * so the trainer needs no sync call after a parameter update. grad may be NULL: only dx
 * is wanted (e.g. SAC's actor loss through a critic it does not train). */
void nn_mlp_backward(const nn_mlp *m, const float *params, nn_cache *c,
                     int row_begin, int row_count,
                     const float *dy, /* (row_count, out) */
                     float *grad,     /* flat gradient array, += at m's offsets */
                     float *dx);      /* (row_count, in), or NULL */
/* The same, but WRITES (=) dL/dparams over m's weight and bias ranges of grad: the bits
 * of zeroing them and accumulating, without the extra pass over memory. The alignment
 * padding between layers is not touched. */
void nn_mlp_backward_set(const nn_mlp *m, const float *params, nn_cache *c,
                         int row_begin, int row_count,
                         const float *dy, /* (row_count, out) */
                         float *grad,     /* flat gradient array, = at m's offsets */
                         float *dx);      /* (row_count, in), or NULL */
/* grad = grad + g over the same ranges, where g is what nn_mlp_backward_set would write:
 * the canonical tree's left + right with these rows' partial as the right operand, done
 * in the kernel instead of in a separate pass over a written-out partial. */
void nn_mlp_backward_add(const nn_mlp *m, const float *params, nn_cache *c,
                         int row_begin, int row_count,
                         const float *dy, /* (row_count, out) */
                         float *grad,     /* flat gradient array, = + at m's offsets */
                         float *dx);      /* (row_count, in), or NULL */

/* Layer kernels (the MLP is built from these; exposed for tests and other heads).
 * y = x W + b, order as above (b may be NULL: zero). With out < NN_SMALL_OUT this one
 * allocates a temporary W^T (the MLP keeps its own): CALF_ENOMEM if it cannot. */
int nn_linear_forward(const float *x, /* (B, in) */
                      const float *w, /* (in, out) */
                      const float *b, /* (out) or NULL */
                      int B, int in, int out,
                      float *y,       /* (B, out) */
                      calf_error *err);
/* dw += x^T dy, db += column sums of dy (db may be NULL), rows ascending. */
void nn_linear_backward_params(const float *x,  /* (B, in) */
                               const float *dy, /* (B, out) */
                               int B, int in, int out,
                               float *dw,       /* (in, out), += */
                               float *db);      /* (out), +=, or NULL */
/* The same as if dw and db were zero first (=, not +=); and dw = dw + (that), db alike. */
void nn_linear_backward_params_set(const float *x, const float *dy, int B, int in, int out,
                                   float *dw, float *db);
void nn_linear_backward_params_add(const float *x, const float *dy, int B, int in, int out,
                                   float *dw, float *db);
/* dx = dy W^T computed as an axpy over wt = W^T. */
void nn_linear_backward_input(const float *dy, /* (B, out) */
                              const float *wt, /* (out, in): W transposed */
                              int B, int in, int out,
                              float *dx);      /* (B, in), written */
/* The W^T an MLP's cache keeps for dX: wt := w (in, out) transposed, or for a large
 * layer (from 131,072 weights and at most 256 outputs, with AVX2) the same floats in
 * 16-input strips (nn.c); and dx = dy W^T through it, in the order of dX above. */
void nn_wt_pack(const float *w, int in, int out, float *wt);
void nn_linear_backward_input_wt(const float *dy, const float *wt, int B, int in, int out,
                                 float *dx);
/* wt (cols, rows) := w (rows, cols) transposed. */
void nn_transpose(const float *w, int rows, int cols, float *wt);

/* tanh to within 2.6e-7 absolute over the whole real line: a clamped
 * rational approximation, branch-free, the same code for every element, saturating at
 * +-(1 - 2.4e-7); NaN propagates. In place is allowed. nn_tanh1 is one element. */
void nn_tanh(const float *x, float *y, size_t n);
float nn_tanh1(float x);
/* Its constants (Eigen's float tanh), here so that `calf export` writes the same ones:
 * x = min(|v|, CLAMP), p = P0, then p = madd(p, x^2, Pk) for k = 1..6, q likewise with
 * Q0..Q3, tanh(v) ~ copysign((x p) / q, v). */
#define NN_TANH_CLAMP 7.90531110763549805f
#define NN_TANH_P0 (-2.76076847742355e-16f)
#define NN_TANH_P1 2.00018790482477e-13f
#define NN_TANH_P2 (-8.60467152213735e-11f)
#define NN_TANH_P3 5.12229709037114e-08f
#define NN_TANH_P4 1.48572235717979e-05f
#define NN_TANH_P5 6.37261928875436e-04f
#define NN_TANH_P6 4.89352455891786e-03f
#define NN_TANH_Q0 1.19825839466702e-06f
#define NN_TANH_Q1 1.18534705686654e-04f
#define NN_TANH_Q2 2.26843463243900e-03f
#define NN_TANH_Q3 4.89352518554385e-03f
void nn_relu(const float *x, float *y, size_t n);
/* In-place activation of n floats. */
void nn_activate(nn_activation act, float *x, size_t n);
/* dz = dh * act'(.) given the activation's output h (tanh: 1 - h^2; relu: h > 0).
 * dz may alias dh. */
void nn_activation_backward(nn_activation act, const float *h, const float *dh,
                            float *dz, size_t n);

#endif
