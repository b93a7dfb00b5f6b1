/* kernels.h: the hot files compiled once per kernel variant (generic x86-64; "fma":
 * x86-64 with AVX2 and FMA; "avx512": the same with AVX-512F and VL), and the run-time
 * choice between them. One list below names
 * every function those files define; kernels.c defines the plain names as calls through
 * the variant this process chose once, so one binary runs on any x86-64 CPU. */
#ifndef CALF_KERNELS_H
#define CALF_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "calf/error.h"
#include "numerics/adam.h"
#include "numerics/conv2d.h"
#include "numerics/nn.h"
#include "numerics/rmsprop.h"
#include "numerics/rnn.h"

/* The files compiled once per variant, under src/: CMakeLists.txt and setup.py read this
 * line. A file added here needs its rows below. */
#define KERNELS_SOURCES "numerics/nn.c numerics/adam.c numerics/rmsprop.c numerics/conv2d.c numerics/rnn.c"

/* Every external function of the files of KERNELS_SOURCES, as
 * X(return type, name, (parameters), (arguments)) rows (V(name, ...) for a void one), a
 * file's rows together. The
 * compiler checks each row against the function's own header; a function missing here is
 * defined once per variant under one name and the link fails on it, a row without its
 * function leaves the variant's name undefined. Only these files are compiled twice: the
 * others run the same code on every CPU. */
#define KERNELS_LIST(X, V)                                                                      \
    /* numerics/nn.c */                                                                         \
    X(float *, nn_alloc_floats_at, (size_t n, calf_error *err, const char *file, int line),     \
      (n, err, file, line))                                                                     \
    V(nn_mlp_layout,                                                                            \
      (nn_mlp *m, int in, const int *hidden, int num_hidden, int out, nn_activation act,        \
       size_t *cursor),                                                                         \
      (m, in, hidden, num_hidden, out, act, cursor))                                            \
    X(int, nn_orthogonal_init,                                                                  \
      (float *w, int rows, int cols, float gain, calf_rng *rng, calf_error *err),               \
      (w, rows, cols, gain, rng, err))                                                          \
    X(int, nn_mlp_init,                                                                         \
      (const nn_mlp *m, float *params, float hidden_gain, float out_gain, calf_rng *rng,        \
       calf_error *err),                                                                        \
      (m, params, hidden_gain, out_gain, rng, err))                                             \
    V(nn_transpose, (const float *w, int rows, int cols, float *wt), (w, rows, cols, wt))       \
    X(int, nn_linear_forward,                                                                   \
      (const float *x, const float *w, const float *b, int B, int in, int out, float *y,        \
       calf_error *err),                                                                        \
      (x, w, b, B, in, out, y, err))                                                            \
    V(nn_linear_backward_params,                                                                \
      (const float *x, const float *dy, int B, int in, int out, float *dw, float *db),          \
      (x, dy, B, in, out, dw, db))                                                              \
    V(nn_linear_backward_params_set,                                                            \
      (const float *x, const float *dy, int B, int in, int out, float *dw, float *db),          \
      (x, dy, B, in, out, dw, db))                                                              \
    V(nn_linear_backward_params_add,                                                            \
      (const float *x, const float *dy, int B, int in, int out, float *dw, float *db),          \
      (x, dy, B, in, out, dw, db))                                                              \
    V(nn_linear_backward_input,                                                                 \
      (const float *dy, const float *wt, int B, int in, int out, float *dx),                    \
      (dy, wt, B, in, out, dx))                                                                 \
    V(nn_wt_pack, (const float *w, int in, int out, float *wt), (w, in, out, wt))               \
    V(nn_linear_backward_input_wt,                                                              \
      (const float *dy, const float *wt, int B, int in, int out, float *dx),                    \
      (dy, wt, B, in, out, dx))                                                                 \
    X(float, nn_tanh1, (float x), (x))                                                          \
    V(nn_tanh, (const float *x, float *y, size_t n), (x, y, n))                                 \
    V(nn_relu, (const float *x, float *y, size_t n), (x, y, n))                                 \
    V(nn_activate, (nn_activation act, float *x, size_t n), (act, x, n))                        \
    V(nn_activation_backward,                                                                   \
      (nn_activation act, const float *h, const float *dh, float *dz, size_t n),                \
      (act, h, dh, dz, n))                                                                      \
    X(int, nn_cache_init, (nn_cache *c, const nn_mlp *m, int max_rows, calf_error *err),        \
      (c, m, max_rows, err))                                                                    \
    V(nn_cache_free, (nn_cache *c), (c))                                                        \
    V(nn_mlp_forward_v,                                                                         \
      (const nn_mlp *m, const float *params, uint64_t version, const float *x, int B,           \
       nn_cache *c, float *y),                                                                  \
      (m, params, version, x, B, c, y))                                                         \
    V(nn_mlp_forward,                                                                           \
      (const nn_mlp *m, const float *params, const float *x, int B, nn_cache *c, float *y),     \
      (m, params, x, B, c, y))                                                                  \
    V(nn_mlp_backward,                                                                          \
      (const nn_mlp *m, const float *params, nn_cache *c, int row_begin, int row_count,         \
       const float *dy, float *grad, float *dx),                                                \
      (m, params, c, row_begin, row_count, dy, grad, dx))                                       \
    V(nn_mlp_backward_set,                                                                      \
      (const nn_mlp *m, const float *params, nn_cache *c, int row_begin, int row_count,         \
       const float *dy, float *grad, float *dx),                                                \
      (m, params, c, row_begin, row_count, dy, grad, dx))                                       \
    V(nn_mlp_backward_add,                                                                      \
      (const nn_mlp *m, const float *params, nn_cache *c, int row_begin, int row_count,         \
       const float *dy, float *grad, float *dx),                                                \
      (m, params, c, row_begin, row_count, dy, grad, dx))                                       \
    /* numerics/adam.c */                                                                       \
    V(adam_step,                                                                                \
      (float *params, const float *grad, float *m, float *v, size_t n, int64_t step,            \
       float lr, float beta1, float beta2, float eps),                                          \
      (params, grad, m, v, n, step, lr, beta1, beta2, eps))                                     \
    X(double, adam_sum_sq, (const float *x, size_t n), (x, n))                                  \
    X(double, adam_norm_of_chunks, (const double *chunk_sq, size_t chunks), (chunk_sq, chunks)) \
    X(double, adam_global_norm, (const float *grad, size_t n), (grad, n))                       \
    X(float, adam_clip_coef, (double norm, double max_norm), (norm, max_norm))                  \
    V(adam_scale, (float *x, size_t n, float c), (x, n, c))                                     \
    X(float, adam_lr_linear_at, (double lr, int64_t k, int64_t N), (lr, k, N))                  \
    /* numerics/rmsprop.c */                                                                    \
    V(rmsprop_step,                                                                             \
      (float *params, const float *grad, float *m, float *v, size_t n, float neg_lr,            \
       float alpha, float one_minus_alpha, float eps, bool centered),                           \
      (params, grad, m, v, n, neg_lr, alpha, one_minus_alpha, eps, centered))                  \
    /* numerics/conv2d.c */                                                                     \
    X(int, conv2d_layout,                                                                       \
      (conv2d *l, int in_h, int in_w, int in_c, int filters, int kernel, int stride, int pad,   \
       size_t *cursor, calf_error *err),                                                        \
      (l, in_h, in_w, in_c, filters, kernel, stride, pad, cursor, err))                         \
    X(int, conv2d_init, (const conv2d *l, float *params, float gain, calf_rng *rng,             \
                         calf_error *err),                                                      \
      (l, params, gain, rng, err))                                                              \
    X(int, conv2d_cache_init, (conv2d_cache *c, const conv2d *l, int max_rows, calf_error *err), \
      (c, l, max_rows, err))                                                                    \
    V(conv2d_cache_free, (conv2d_cache *c), (c))                                                \
    V(conv2d_forward,                                                                           \
      (const conv2d *l, const float *params, const float *x, int B, conv2d_cache *c, float *y), \
      (l, params, x, B, c, y))                                                                  \
    V(conv2d_backward,                                                                          \
      (const conv2d *l, const float *params, conv2d_cache *c, int row_begin, int row_count,     \
       const float *dy, float *grad, float *dx),                                                \
      (l, params, c, row_begin, row_count, dy, grad, dx))                                       \
    V(conv2d_backward_set,                                                                      \
      (const conv2d *l, const float *params, conv2d_cache *c, int row_begin, int row_count,     \
       const float *dy, float *grad, float *dx),                                                \
      (l, params, c, row_begin, row_count, dy, grad, dx))                                       \
    /* numerics/rnn.c */                                                                        \
    V(rnn_layout, (rnn_cell *cell, rnn_kind kind, int in, int hidden, size_t *cursor),          \
      (cell, kind, in, hidden, cursor))                                                         \
    X(int, rnn_init, (const rnn_cell *cell, float *params, calf_rng *rng, calf_error *err),     \
      (cell, params, rng, err))                                                                 \
    X(int, rnn_cache_init,                                                                      \
      (rnn_cache *cache, const rnn_cell *cell, int max_T, int max_B, calf_error *err),          \
      (cache, cell, max_T, max_B, err))                                                         \
    V(rnn_cache_free, (rnn_cache *cache), (cache))                                              \
    V(rnn_forward,                                                                              \
      (const rnn_cell *cell, const float *params, rnn_cache *cache, const float *x,             \
       const uint8_t *episode_start, const float *h0, const float *c0, int T, int B, float *y,  \
       float *hT, float *cT),                                                                   \
      (cell, params, cache, x, episode_start, h0, c0, T, B, y, hT, cT))                         \
    V(rnn_step,                                                                                 \
      (const rnn_cell *cell, const float *params, rnn_cache *cache, const float *x,             \
       const uint8_t *episode_start, int B, float *h, float *c),                                \
      (cell, params, cache, x, episode_start, B, h, c))                                         \
    V(rnn_backward,                                                                             \
      (const rnn_cell *cell, const float *params, rnn_cache *cache, const float *dy,            \
       const float *dhT, const float *dcT, float *grad, rnn_grad_mode mode, float *dx,          \
       float *dh0, float *dc0),                                                                 \
      (cell, params, cache, dy, dhT, dcT, grad, mode, dx, dh0, dc0))

#define KERNELS_STR2(x) #x
#define KERNELS_STR(x) KERNELS_STR2(x)

#ifdef CALF_KERNEL_VARIANT
/* Compiling a dispatched file for one variant (CMake passes -DCALF_KERNEL_VARIANT=fma and
 * includes this header first): every listed function gets the variant's link name,
 * nn_tanh -> nn_tanh_fma, for its definition and for the file's own calls, which so stay
 * within the variant. The C names, and so the source, are unchanged. */
#define KERNELS_RENAME(ret, name, params, args) \
    ret name params __asm__(KERNELS_STR(__USER_LABEL_PREFIX__) #name "_" \
                            KERNELS_STR(CALF_KERNEL_VARIANT));
#define KERNELS_RENAME_VOID(name, params, args) KERNELS_RENAME(void, name, params, args)
KERNELS_LIST(KERNELS_RENAME, KERNELS_RENAME_VOID)
#undef KERNELS_RENAME
#undef KERNELS_RENAME_VOID
#endif

/* The variant this process runs, chosen once (the first call of either function below, or
 * of a listed function): the one CALF_KERNELS names ("generic", "fma", "avx512"; "auto" or
 * unset: the best this CPU runs). kernels_select returns CALF_EINVAL with a one-line message when
 * CALF_KERNELS names a variant this build lacks or this CPU cannot run; calls that did not
 * check then run the best variant the CPU has (the bits are the same on every variant,
 * only the speed differs). Thread-safe. */
int kernels_select(calf_error *err);
/* The chosen variant, in words for `calf --version` ("fma (x86-64 with AVX2 and FMA, ...)").
 * Static storage. */
const char *kernels_describe(void);

#endif
