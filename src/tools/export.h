/* export.h: `calf export`: a trained policy's greedy action as one C99 file that needs
 * only a C compiler and libm. An algorithm describes its greedy policy through
 * algorithm_ops.export_c: the networks it runs (export_c_mlp) and the body of
 * calf_policy_act (export_c_body). This module writes the file around them: the
 * policy's sizes as macros, the weights as hex floats, and calf's own arithmetic
 * (nn_madd fused or not as this build has it, nn_tanh's approximation, the summation
 * order src/numerics/nn.h writes down), so the file computes calf's greedy bit for bit. */
#ifndef CALF_EXPORT_H
#define CALF_EXPORT_H

#include <stdbool.h>

#include "calf/error.h"
#include "numerics/net.h"
#include "numerics/nn.h"

typedef struct export_c export_c;

/* Network m, whose parameters lie at m's offsets in the flat array params, as
 *   static void NAME_forward(const float *x, float *y)   x (sizes[0]), y (sizes[L])
 * computing nn_mlp_forward's bits for one row. NAME is a C identifier, unique. */
void export_c_mlp(export_c *x, const char *name, const nn_mlp *m, const float *params);

/* Network n (net.h) as NAME_forward, the same signature, computing net_forward_v's bits
 * for one row: conv layers (conv2d.h's chain, ReLU), then the MLP (export_c_mlp's); for
 * an observation of bytes given as floats, x * in_scale first. CALF_EINVAL naming the
 * layer type when n has one calf export cannot write yet (net_unexportable). */
int export_c_net(export_c *x, const char *name, const net *n, const float *params,
                 calf_error *err);

/* Append printf-style text to calf_policy_act's body. Its arguments are `obs`
 * (CALF_POLICY_OBS_DIM) and `action`; the body ends in a return. */
void export_c_body(export_c *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The body's ending for a discrete policy: the index of the largest of the n floats in
 * the array named v, the lowest on ties (strict >, as dist_categorical_mode and
 * sac_discrete_greedy pick it), written to action[0] as a float and returned. */
void export_c_argmax_return(export_c *x, const char *v, int n);
/* The same among the valid actions of an env with a mask: the body then also has `mask`
 * (n bytes, nonzero valid; NULL: all valid), and the lowest valid index that holds the
 * largest value is returned (dist_categorical_mode_masked). */
void export_c_masked_argmax_return(export_c *x, const char *v, int n);
/* MultiDiscrete: each of the D slices of v (nvec[d] floats each, in turn) its argmax
 * (among the valid ones of `mask` when masked), written to action[d] as a float; returns
 * 0 (dist_multi_mode). */
void export_c_multi_argmax_return(export_c *x, const char *v, const int *nvec, int D,
                                  bool masked);

/* A float (with an f suffix) or a double as C source that reads back as exactly that
 * value: C99 hex, "%a". Writes into buf (at least EXPORT_C_NUM bytes), returns buf. */
enum { EXPORT_C_NUM = 48 };
const char *export_c_float(float v, char *buf);
const char *export_c_double(double v, char *buf);

#endif
