/* net_rnn.c: the LSTM and GRU rows of net's layer table (net.h): a recurrent core as a
 * layer, rnn.h's cell over (T, B) sequences, each row's state (h, then c for an LSTM)
 * gathered from and written back to the network's per-row state. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "numerics/net.h"

static rnn_kind cell_kind(const net_layer *l) {
    return l->kind == NET_LSTM ? RNN_LSTM : RNN_GRU;
}

static int rnn_row_layout(net_layer *l, const net_spec *spec, int index, size_t *cursor,
                          calf_error *err) {
    (void)spec, (void)index;
    if (l->in <= 0 || l->out < 3) /* rnn.h: G >= NN_SMALL_OUT */
        return calf_error_set(err, CALF_EINVAL,
                              "network: a recurrent core of %d units on %d inputs (at least 3 "
                              "units)", l->out, l->in);
    rnn_layout(&l->cell, cell_kind(l), l->in, l->out, cursor);
    return CALF_OK;
}

static size_t rnn_row_state_size(const net_layer *l) {
    return (size_t)(l->kind == NET_LSTM ? 2 : 1) * (size_t)l->out;
}

/* CleanRL's ppo_atari_lstm: orthogonal weights with gain 1, zero biases (the gains the
 * network passes are the MLPs'). */
static int rnn_row_init(const net_layer *l, float *params, float hidden_gain, float out_gain,
                        calf_rng *rng, calf_error *err) {
    (void)hidden_gain, (void)out_gain;
    return rnn_init(&l->cell, params, rng, err);
}

/* PyTorch's nn.LSTM / nn.GRU default: every parameter uniform in +-1/sqrt(H), drawn in
 * its order (weight_ih (G, in), weight_hh (G, H), bias_ih, bias_hh, each row-major in
 * PyTorch's layout, stored transposed here). */
static void rnn_row_init_fan_in(const net_layer *l, float *params, calf_rng *rng) {
    const rnn_cell *c = &l->cell;
    double b = 1.0 / sqrt((double)c->hidden);
    int G = c->gates;
    for (int g = 0; g < G; g++)
        for (int i = 0; i < c->in; i++)
            params[c->w_ih_off + (size_t)i * G + g] = (float)calf_rng_uniform_range(rng, -b, b);
    for (int g = 0; g < G; g++)
        for (int i = 0; i < c->hidden; i++)
            params[c->w_hh_off + (size_t)i * G + g] = (float)calf_rng_uniform_range(rng, -b, b);
    for (int g = 0; g < G; g++) params[c->b_ih_off + g] = (float)calf_rng_uniform_range(rng, -b, b);
    for (int g = 0; g < G; g++) params[c->b_hh_off + g] = (float)calf_rng_uniform_range(rng, -b, b);
}

static int rnn_row_cache_init(net_layer_cache *c, const net_layer *l, int max_T, int max_B,
                              calf_error *err) {
    int rc = rnn_cache_init(&c->rnn, &l->cell, max_T, max_B, err);
    if (rc == CALF_OK && !(c->st = nn_alloc_floats(4 * (size_t)max_B * (size_t)l->out, err)))
        rc = CALF_ENOMEM;
    return rc;
}

static void rnn_row_cache_free(net_layer_cache *c) {
    rnn_cache_free(&c->rnn);
    free(c->st);
    c->st = NULL;
}

/* Rows' states of stride floats (this layer's h, then c) to the cell's (B, H) planes and
 * back: exact copies. */
static void gather(const float *state, size_t stride, int B, int H, bool lstm, float *h,
                   float *c) {
    for (int b = 0; b < B; b++) {
        const float *s = state + (size_t)b * stride;
        memcpy(h + (size_t)b * H, s, (size_t)H * sizeof(float));
        if (lstm) memcpy(c + (size_t)b * H, s + H, (size_t)H * sizeof(float));
    }
}

static void scatter(const float *h, const float *c, int B, int H, bool lstm, size_t stride,
                    float *state) {
    for (int b = 0; b < B; b++) {
        float *s = state + (size_t)b * stride;
        memcpy(s, h + (size_t)b * H, (size_t)H * sizeof(float));
        if (lstm) memcpy(s + H, c + (size_t)b * H, (size_t)H * sizeof(float));
    }
}

static void rnn_row_forward_seq(const net_layer *l, const float *params, const float *x,
                                const uint8_t *start, const float *state0, float *stateT,
                                size_t stride, int T, int B, net_layer_cache *c, float *y) {
    int H = l->out;
    bool lstm = l->kind == NET_LSTM;
    size_t BH = (size_t)B * (size_t)H;
    float *h0 = c->st, *c0 = h0 + BH, *hT = c0 + BH, *cT = hT + BH;
    if (state0) gather(state0, stride, B, H, lstm, h0, c0);
    rnn_forward(&l->cell, params, &c->rnn, x, start, state0 ? h0 : NULL,
                state0 && lstm ? c0 : NULL, T, B, y, stateT ? hT : NULL,
                stateT && lstm ? cT : NULL);
    if (stateT) scatter(hT, cT, B, H, lstm, stride, stateT);
}

/* Backward through time over every row of the last forward_seq; no gradient leaves
 * through the rows' first states (the rollout's are data). */
static void rnn_row_backward(const net_layer *l, const float *params, net_layer_cache *c,
                             int rb, int rn, const float *y, float *dy, float *grad,
                             net_grad_mode mode, float *dx, float *scratch) {
    (void)y, (void)scratch;
    CALF_ASSERT(rb == 0 && rn == c->rnn.T * c->rnn.B);
    rnn_grad_mode m = mode == NET_GRAD_SET ? RNN_GRAD_SET
                      : mode == NET_GRAD_ADD ? RNN_GRAD_ADD
                                             : RNN_GRAD_ACC;
    rnn_backward(&l->cell, params, &c->rnn, dy, NULL, NULL, grad, m, dx, NULL, NULL);
}

/* The LSTM's and the GRU's rows differ only in their names (and the exported C's cell
 * function): the cell reads its kind from the layer (cell_kind). */
#define RNN_ROW_TYPE(row_name, export_name)     \
    {                                           \
        .name = row_name,                       \
        .layout = rnn_row_layout,               \
        .state_size = rnn_row_state_size,       \
        .init = rnn_row_init,                   \
        .init_fan_in = rnn_row_init_fan_in,     \
        .cache_init = rnn_row_cache_init,       \
        .cache_free = rnn_row_cache_free,       \
        .forward = NULL,                        \
        .backward = rnn_row_backward,           \
        .export_c = export_name,                \
        .forward_seq = rnn_row_forward_seq,     \
    }

const net_layer_type net_lstm_type = RNN_ROW_TYPE("lstm", "calf_lstm");
const net_layer_type net_gru_type = RNN_ROW_TYPE("gru", "calf_gru");
