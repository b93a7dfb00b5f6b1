/* net.h: a network built from a spec (an image, a flat input or a Dict's parts, conv
 * layers with ReLU, fc layers, an optional recurrent core, a linear head) out of layer
 * types kept in one table; the algorithms use it as they used nn_mlp: layout at a
 * cursor, init, forward, backward over a row range, a cache. An fc-only spec is exactly
 * an nn_mlp. */
#ifndef CALF_NET_H
#define CALF_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "calf/error.h"
#include "calf/rng.h"
#include "numerics/conv2d.h"
#include "numerics/nn.h"
#include "numerics/rnn.h"

/* Arithmetic order (part of the result, like the seed). A network is its layers in
 * sequence, each layer's order its kernel header's; net adds only these steps:
 * - uint8 input: x = (float)byte * in_scale, one rounding, before the first layer
 *   (in_scale 1 leaves a byte's value as it is, so 0/1 images give the float bits).
 * - A conv layer is conv2d.h's, then ReLU (max(y, 0), as nn_relu) on its output;
 *   backward multiplies dy by (output > 0) before conv2d's backward.
 * - fc layers and the head are one nn_mlp (nn.h's order, its activation after every
 *   layer but the last); a block before a recurrent core also activates its last layer
 *   (backward: nn_activation_backward, then the MLP's).
 * - Flatten is a no-op (conv2d.h: NHWC output rows are already the fc's input rows).
 * - A recurrent core (net_rnn.c's rows) is rnn.h's cell, its order rnn.h's, over T steps
 *   of B rows stored time-major (row t*B + b); the layers before and after it run on all
 *   T*B rows as feed-forward rows do. A row's state is the core's h, then its c (LSTM),
 *   state_size floats; a row whose episode starts at step t has its state zeroed before
 *   that step, and its gradient stops there (rnn.h). A single acting step (net_step) is
 *   the sequence's step with T = 1: the same bits as step t of a longer sequence given the
 *   state that step read.
 * - Gradients: each layer's dW/db chains run over the rows passed, ascending, as its
 *   header says. The three modes: ACCUMULATE continues each chain from grad's value
 *   (nn_mlp_backward, conv2d_backward); SET writes what accumulating onto +0 gives;
 *   ADD writes grad + (what SET gives), one rounding per element: conv layers form the
 *   SET result in scratch, then add.
 * - A Dict's per-key encoder (num_segs > 0; SB3's CombinedExtractor): the input row's
 *   segments in order, each image segment's columns gathered (x * its scale, one
 *   rounding; scale 1 copies) through its own conv stack (conv layers as above) and each
 *   vector segment's columns taken as they are, the results concatenated in segment
 *   order (copies) into the row the fc layers read. Backward: the concatenation's dy
 *   split back (copies); each image segment's conv stack backward as above, its dx times
 *   its scale (one rounding) into its columns, a vector segment's dy copied into its dx
 *   columns. Segments are visited in ascending order in both directions; their
 *   parameters are disjoint, so the order shows in no sum.
 * So a row's output and dx depend on that row alone, and dW on the rows passed and
 * their order: the batch, its split into row ranges and the CPU never show in the bits.
 * An fc-only spec calls nn_mlp for everything: its bits are nn_mlp's. */

#define NET_MAX_CONV 4                  /* conv layers in a spec (the config's tuples) */
#define NET_MAX_IMAGE_PARTS 4           /* a Dict's image parts, each with its conv stack */
#define NET_MAX_SEGS (2 * NET_MAX_IMAGE_PARTS + 1) /* image parts and the runs between */
/* each image part's convs..., fc block, core, fc block + head */
#define NET_MAX_LAYERS (NET_MAX_CONV * NET_MAX_IMAGE_PARTS + 3)

/* The layer types, one row each in net.c's table (net_layer_types). */
typedef enum {
    NET_CONV2D, /* conv2d.h + ReLU */
    NET_MLP,    /* nn.h's MLP: fc layers and (last block) the linear head */
    NET_LSTM,   /* recurrent cores (rnn.h): their rows are net_rnn.c's */
    NET_GRU,
    NET_NUM_KINDS
} net_kind;

typedef struct net_conv_spec {
    int filters, kernel, stride, pad;
} net_conv_spec;

/* A segment of a Dict observation's row, for the per-key encoder: an image part (its
 * own conv stack, the spec's conv layers) or a run of vector parts taken flat. */
typedef struct net_seg {
    int offset, size;             /* the input row's columns [offset, offset + size) */
    int h, w, c;                  /* an image part (NHWC, h*w*c == size); all 0: a vector run */
    float scale;                  /* an image part's x * scale as it is gathered (1: a copy;
                                     a uint8 part of a float observation: 1/255 or the
                                     config's uint8_scale) */
    /* set by net_layout: */
    int first, count;             /* an image part's conv layers: layer[first, + count) */
    int col, width;               /* its columns in the concatenation the fc layers read */
} net_seg;

/* What a network is, read from the config (ALF's names: conv_layer_params,
 * fc_layer_params, lstm_hidden_size) and the env spec (obs_shape, obs_dtype). */
typedef struct net_spec {
    int in_dim;                   /* floats per input row */
    int in_h, in_w, in_c;         /* image input (NHWC, in_h*in_w*in_c == in_dim), or all 0 */
    int num_segs;                 /* > 0: a Dict's per-key encoder (in_h 0): seg[] cover
                                     [0, in_dim) in order, at least one an image, and each
                                     image part gets its own stack of the conv layers */
    net_seg seg[NET_MAX_SEGS];
    bool in_u8;                   /* rows come as bytes (net_forward_u8_v), x * in_scale */
    float in_scale;               /* uint8 input's scale (config's, or 1 / obs_high) */
    int num_conv;                 /* conv layers (need an image input or image segments) */
    net_conv_spec conv[NET_MAX_CONV];
    int num_fc;                   /* fc layers after the convs (before the core, if any) */
    int fc[NN_MAX_LAYERS - 1];
    nn_activation act;            /* the fc layers' activation (the convs' is ReLU) */
    net_kind core;                /* NET_LSTM or NET_GRU with core_hidden > 0; else none */
    int core_hidden;              /* the core's state width H (0: no core) */
    bool core_deferred;           /* the core's parameters are laid out by net_layout_core and
                                     drawn by net_init_core, after whatever the caller lays
                                     out between (PPO: after both networks and the log-std,
                                     where its cores lay before they were layers) */
    int num_post_fc;              /* fc layers after the core */
    int post_fc[NN_MAX_LAYERS - 1];
    int out;                      /* the linear head's width */
} net_spec;

/* One layer: a view into the flat parameter array, like nn_mlp and conv2d. */
typedef struct net_layer {
    net_kind kind;
    int in, out;          /* floats per row in and out */
    bool act_out;         /* NET_MLP: its last layer activated too (a block before a core) */
    conv2d conv;          /* NET_CONV2D */
    nn_mlp mlp;           /* NET_MLP */
    rnn_cell cell;        /* NET_LSTM, NET_GRU */
} net_layer;

/* A network: its layers in order, laid out contiguously. */
typedef struct net {
    int num_layers;
    net_layer layer[NET_MAX_LAYERS];
    int in, out;          /* floats per input row, per output row */
    bool in_u8;
    float in_scale;
    nn_activation act;
    int num_segs;         /* a Dict's per-key encoder (the spec's segments, laid out) */
    net_seg seg[NET_MAX_SEGS];
    int trunk;            /* the first layer after the encoder's conv stacks (0: none) */
    int cat;              /* floats per row of the encoder's concatenation */
    size_t state_size;    /* recurrent floats per row (sum of the layers'); 0: feed-forward */
    int core;             /* the recurrent layer's index, or -1 */
    bool core_deferred;   /* its span is net_layout_core's, outside [offset, + num_params) */
    size_t offset;        /* the span net_layout laid out: [offset, offset + num_params) */
    size_t num_params;    /* includes alignment padding (always zero) */
} net;

/* Per-layer caches (only the one of the layer's kind is used). */
typedef struct net_layer_cache {
    nn_cache mlp;
    conv2d_cache conv;
    rnn_cache rnn;
    float *st;            /* recurrent: (4, max_B, H) the rows' h0, c0, hT, cT gathered */
} net_layer_cache;

/* Activations of the last forward (kept for backward) and scratch. */
typedef struct net_cache {
    int max_rows;                     /* capacity: max_T * max_B rows */
    int max_T, max_B;                 /* a recurrent network's sequences (1 x max_rows
                                         for net_cache_init) */
    int rows;                         /* rows of the last forward; 0 before any */
    const float *params;              /* params of the last forward */
    float *in;                        /* (max_rows, in): uint8 input as floats */
    float *out[NET_MAX_LAYERS];       /* (max_rows, layer l's out): outputs of every layer
                                         but the last, post-activation; NULL for the last */
    float *d[2];                      /* (max_rows, widest layer): backward's dy/dx */
    float *gsum;                      /* (largest conv layer's params): ADD mode's scratch */
    float *cat;                       /* (max_rows, cat): the encoder's concatenation */
    float *e[3];                      /* (max_rows, widest layer): the encoder's gather
                                         and its conv stacks' dy/dx */
    net_layer_cache lc[NET_MAX_LAYERS];
} net_cache;

typedef enum { NET_GRAD_ACC, NET_GRAD_SET, NET_GRAD_ADD } net_grad_mode;

/* The table: one row per layer type. A layer type is one file's functions plus its row;
 * the network code never looks inside a layer. */
typedef struct net_layer_type {
    const char *name;     /* "conv2d", "mlp", "lstm", "gru": in messages */
    /* Lay l out at *cursor (l's kind fields and in/out already set from the spec):
     * offsets of its parameters in the flat array; CALF_EINVAL naming a bad shape. */
    int (*layout)(net_layer *l, const net_spec *spec, int index, size_t *cursor,
                  calf_error *err);
    /* Recurrent floats per row this layer keeps between steps (h, and c for an LSTM);
     * 0 for a feed-forward layer. */
    size_t (*state_size)(const net_layer *l);
    /* Orthogonal init of l's span; hidden_gain for a hidden layer, out_gain for a head. */
    int (*init)(const net_layer *l, float *params, float hidden_gain, float out_gain,
                calf_rng *rng, calf_error *err);
    /* PyTorch's default init (uniform in +-1/sqrt(fan_in), weights then biases, each
     * layer in storage order): the replay algorithms' (SAC, TD3, DDPG, DQN). */
    void (*init_fan_in)(const net_layer *l, float *params, calf_rng *rng);
    /* Room for max_T steps of max_B rows (a feed-forward layer: max_T * max_B rows). */
    int (*cache_init)(net_layer_cache *c, const net_layer *l, int max_T, int max_B,
                      calf_error *err);
    void (*cache_free)(net_layer_cache *c);
    /* Feed-forward rows: y = layer(x) for B rows, activation included (NULL for a
     * recurrent row, which forward_seq runs). */
    void (*forward)(const net_layer *l, const float *params, uint64_t version,
                    const float *x, int B, net_layer_cache *c, float *y);
    /* Rows [rb, rb + rn) of the last forward: dW/db into grad by mode (grad may be
     * NULL), dx written when not NULL. y is the layer's output of that forward (for the
     * activation's derivative); dy may be overwritten. scratch: gsum of net_cache. A
     * recurrent row takes all the rows of its last forward_seq (backward through time). */
    void (*backward)(const net_layer *l, const float *params, net_layer_cache *c, int rb,
                     int rn, const float *y, float *dy, float *grad, net_grad_mode mode,
                     float *dx, float *scratch);
    /* Export: what `calf export` writes for this layer; NULL: not exportable yet (export
     * refuses the network naming the layer type). */
    const char *export_c;
    /* Recurrent rows (state_size > 0; NULL for feed-forward ones): T steps of B rows,
     * x (T, B, in) and y (T, B, out) time-major, each row's state read from state0 (row
     * b at state0 + b * stride: this layer's part; NULL: zero) and, when stateT is not
     * NULL, the state after the last step written there (it may alias state0); a row
     * with start[t * B + b] set (start may be NULL) is zeroed before step t. */
    void (*forward_seq)(const net_layer *l, const float *params, const float *x,
                        const uint8_t *start, const float *state0, float *stateT,
                        size_t stride, int T, int B, net_layer_cache *c, float *y);
} net_layer_type;

/* The rows of the recurrent kinds, defined in net_rnn.c. */
extern const net_layer_type net_lstm_type, net_gru_type;

/* The row of kind k. */
const net_layer_type *net_layer_type_of(net_kind k);

/* Lay out the network spec asks for at *cursor and advance it: conv layers (each
 * conv2d + ReLU; with segments, each image segment's stack in segment order), then
 * (no core) one MLP of the fc layers and the head, or (a core) an MLP of the fc layers
 * with its last activated, the core, and an MLP of post_fc and the head. CALF_EINVAL with a message for a spec that cannot be built (convs without an
 * image input, a kernel larger than its input, a core whose type is not built in). An
 * fc-only spec is nn_mlp_layout's layout exactly. */
int net_layout(net *n, const net_spec *spec, size_t *cursor, calf_error *err);

/* Lay out the core of a network whose spec had core_deferred at *cursor and advance it
 * (nothing for a network without one). */
int net_layout_core(net *n, size_t *cursor, calf_error *err);

/* A spec from an MLP's arguments (nn_mlp_layout's), for fc-only callers and tests. */
net_spec net_spec_mlp(int in, const int *hidden, int num_hidden, int out, nn_activation act);

/* Orthogonal init (PyTorch orthogonal_ semantics, as nn_mlp_init): hidden layers
 * (convs, fc layers, the block before a core) with hidden_gain, the head with out_gain;
 * biases 0; layer by layer from rng. fc-only: nn_mlp_init's draws exactly. */
int net_init(const net *n, float *params, float hidden_gain, float out_gain, calf_rng *rng,
             calf_error *err);
/* A deferred core's init (rnn_init: CleanRL's ppo_atari_lstm, orthogonal with gain 1,
 * biases 0), which net_init leaves out; nothing for a network without one. A core laid
 * out with the rest is drawn by net_init in its place among the layers. */
int net_init_core(const net *n, float *params, calf_rng *rng, calf_error *err);
/* PyTorch's default init (the replay algorithms'): every layer (the encoder's conv stacks
 * first, in segment order) uniform in +-1/sqrt(fan_in), fan_in = in (fc) or k*k*C
 * (conv), weights in storage order then biases, layer by layer.
 * fc-only: an nn_mlp's layers in turn, each its weights (in, out) row-major, then its
 * biases. */
void net_init_fan_in(const net *n, float *params, calf_rng *rng);

/* Allocate for up to max_rows rows: CALF_ENOMEM when memory runs out (net_cache_free
 * frees what was made). net_cache_free(NULL) is safe. */
int net_cache_init(net_cache *c, const net *n, int max_rows, calf_error *err);
/* The same for sequences of up to max_T steps of max_B rows (net_forward_seq). */
int net_cache_init_seq(net_cache *c, const net *n, int max_T, int max_B, calf_error *err);
void net_cache_free(net_cache *c);

/* y = net(x) for B <= c->max_rows rows; keeps what backward needs in c. y may be NULL
 * (net_output reads it). version: as nn_mlp_forward_v (nonzero and equal to the last
 * forward's, with the same params: the values did not change); 0 always recomputes.
 * A network with in_u8 takes floats holding byte values here (evaluation, play) and
 * scales them as net_forward_u8_v scales bytes: the same bits. A network with a
 * recurrent core goes through net_forward_seq or net_step instead. */
void net_forward_v(const net *n, const float *params, uint64_t version,
                   const float *x, /* (B, in) */
                   int B, net_cache *c,
                   float *y);      /* (B, out) */
void net_forward(const net *n, const float *params, const float *x, int B, net_cache *c,
                 float *y);
/* The same from bytes (a network whose spec has in_u8): x * in_scale first. */
void net_forward_u8_v(const net *n, const float *params, uint64_t version,
                      const uint8_t *x, /* (B, in) */
                      int B, net_cache *c,
                      float *y);        /* (B, out) */
/* A network with a recurrent core over T steps of B rows (T * B <= c->max_rows, T <=
 * c->max_T, B <= c->max_B), time-major: row b of step t is row t * B + b of x and y.
 * state0: (B, state_size) each row's state before step 0 (NULL: zero); stateT: (B,
 * state_size) written with the state after step T-1 when not NULL (it may be state0).
 * start: (T, B) 1 where a row's episode starts (its state zeroed before that step), or
 * NULL. net_backward and its modes then take rows [0, T * B) and go back through time. A
 * feed-forward network takes this too (state ignored): the bits of net_forward_v. */
void net_forward_seq(const net *n, const float *params, uint64_t version,
                     const float *x,        /* (T, B, in) */
                     const uint8_t *start,  /* (T, B) */
                     const float *state0,   /* (B, state_size) */
                     int T, int B, net_cache *c,
                     float *y,              /* (T, B, out), or NULL */
                     float *stateT);        /* (B, state_size), or NULL */
/* One acting step of B rows: each row's state read from and written back to state
 * (B, state_size), zeroed first where start (B) is set: net_forward_seq with T = 1. */
void net_step(const net *n, const float *params, const float *x, /* (B, in) */
              const uint8_t *start, /* (B), or NULL */
              int B, float *state,  /* (B, state_size) */
              net_cache *c, float *y /* (B, out) */);
/* Zero the state of the rows whose start (B) is set, or of every row when start is NULL:
 * what a reset at an episode's start does. */
void net_state_reset(const net *n, float *state, /* (B, state_size) */ const uint8_t *start,
                     int B);

/* The last forward's output, (c->rows, out). */
const float *net_output(const net *n, const net_cache *c);

/* Backprop rows [row_begin, row_begin + row_count) of the last forward, as
 * nn_mlp_backward / _set / _add: dL/dparams into grad at n's offsets by mode (grad may
 * be NULL: dx only), dL/dx written into dx when not NULL (NULL for a uint8 input).
 * params must be the array the last forward used, unchanged since. */
void net_backward(const net *n, const float *params, net_cache *c, int row_begin,
                  int row_count,
                  const float *dy, /* (row_count, out) */
                  float *grad,     /* flat gradient array, += at n's offsets */
                  float *dx);      /* (row_count, in), or NULL */
void net_backward_set(const net *n, const float *params, net_cache *c, int row_begin,
                      int row_count, const float *dy, float *grad, float *dx);
void net_backward_add(const net *n, const float *params, net_cache *c, int row_begin,
                      int row_count, const float *dy, float *grad, float *dx);

/* The network as one nn_mlp when it is one (fc-only, float or uint8 input): for the
 * exporter and callers that still take an MLP; NULL otherwise. */
const nn_mlp *net_as_mlp(const net *n);
/* The first layer `calf export` cannot write yet (its type's name), or NULL when every
 * layer can be exported. */
const char *net_unexportable(const net *n);

#endif
