/* export_c.h: the writer behind `calf export`: a trained policy's greedy action as C99
 * that needs only a C compiler and libm. An algorithm describes its greedy policy through
 * algorithm_ops.export_c: the networks it runs (export_c_net, export_c_mlp) and the body of
 * calf_policy_act (export_c_body; calf_policy_step with a row's state for a recurrent one). This module writes the weights as hex floats and calf's
 * own arithmetic (nn_madd fused or not as this build has it, nn_tanh's approximation, the
 * summation order src/numerics/nn.h writes down), so the file computes calf's greedy bit for
 * bit; tools/export.c puts the run's head on it. */
#ifndef CALF_EXPORT_C_H
#define CALF_EXPORT_C_H

#include <stdbool.h>

#include "base/bytes.h"
#include "calf/error.h"
#include "numerics/net.h"
#include "numerics/nn.h"

/* The writer: what an algorithm's export_c (training/algorithm.h) adds to, one per file.
 * Running out of memory is sticky: the calls below return nothing, export_c_write says. */
typedef struct export_c export_c;

/* An empty writer, owned by the caller (export_c_free); NULL with err set when out of
 * memory. */
export_c *export_c_new(calf_error *err);
void export_c_free(export_c *x); /* NULL: nothing */

/* Network m, whose parameters lie at m's offsets in the flat array params, as
 *   static void NAME_forward(const float *x, float *y)   x (sizes[0]), y (sizes[L])
 * computing nn_mlp_forward's bits for one row. NAME is a C identifier, unique. */
void export_c_mlp(export_c *x, const char *name, const nn_mlp *m, const float *params);

/* Network n (net.h) as NAME_forward, the same signature, computing net_forward_v's bits
 * for one row: conv layers (conv2d.h's chain, ReLU), then the MLP (export_c_mlp's); for
 * an observation of bytes given as floats, x * in_scale first; a Dict's per-key encoder
 * (net.h's segments: each image part through its own conv stack, vector parts copied,
 * concatenated in segment order) before the fc layers. A network with a recurrent
 * core (n->state_size > 0) is written instead as
 *   static void NAME_step(float *state, const float *x, float *y)
 * computing net_step's bits for one row: its layers in turn, the core (rnn.h's LSTM or
 * GRU step) reading and writing state (n->state_size floats: h, then c for an LSTM,
 * net.h's layout); the file then has that state (export_c_state_size), the body gets
 * `state` and export_c_write writes calf_policy_step and calf_policy_reset in place of
 * calf_policy_act. One network with a core a file. CALF_EINVAL naming the layer type
 * when n has one calf export cannot write yet (net_unexportable). */
int export_c_net(export_c *x, const char *name, const net *n, const float *params,
                 calf_error *err);
/* Floats of state a row of the file's policy carries: the recurrent network's
 * state_size; 0 when no network written has a core. */
int export_c_state_size(const export_c *x);
/* Bytes of arrays one call of the file's policy declares, at most: the networks' scratch
 * (conv outputs, hidden layers, gates, the encoder's concatenation) and the body's arrays
 * (export_c_body_floats'). The file keeps its scratch on the calling thread's stack, never
 * in static storage, so threads may call it at once. */
size_t export_c_stack_bytes(const export_c *x);

/* Append printf-style text to calf_policy_act's body. Its arguments are `obs`
 * (CALF_POLICY_OBS_DIM) and `action` (and `state`, for a policy with memory: the body of
 * calf_policy_step); the body ends in a return. The body's automatic arrays are declared
 * with export_c_body_floats, not in this text, so that export_c_stack_bytes counts them;
 * static const tables may be written here. */
void export_c_body(export_c *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Declare automatic arrays of n floats each in the body, one for each name up to the NULL
 * that ends the list, on one line: `    float A[n], B[n];`, followed by comment as a C
 * comment when it is not NULL; their bytes are counted in export_c_stack_bytes. */
void export_c_body_floats(export_c *x, int n, const char *comment, ...)
    __attribute__((sentinel));

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

/* printf-style text appended to b (running out of memory sticky in b->failed): the same
 * words the writer uses, for the file's head. */
void export_c_printf(bytes_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The file after its opening comment and macros, appended to out: the arithmetic the
 * networks call (calf_madd; calf_tanh, calf_relu, calf_conv2d, calf_lstm, calf_gru as
 * they are used; cm_tanh's source when the body calls calf_tanhd), the networks, and
 * calf_policy_act around the body; for a masked env, calf_policy_act_masked around the
 * body and calf_policy_act calling it with no mask. A policy with memory: the same named
 * calf_policy_step(_masked), each taking `float *state` first, and
 * calf_policy_reset(state) zeroing a row's state. CALF_ENOMEM when x or out ran out of
 * memory, naming what (the checkpoint's path). */
int export_c_write(const export_c *x, bool masked, bytes_buf *out, const char *what,
                   calf_error *err);

#endif
