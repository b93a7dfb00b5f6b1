/* rnn.h: recurrent cells for calf's policies: an LSTM and a GRU with PyTorch's equations,
 * forward over T steps of B independent sequences with per-row resets at episode starts,
 * backward through time, and the single step an acting policy takes. Parameters are
 * offsets into the flat array nn.h's MLPs live in; every result has a written order. */
#ifndef CALF_RNN_H
#define CALF_RNN_H

#include <stddef.h>
#include <stdint.h>

#include "calf/error.h"
#include "calf/rng.h"
#include "numerics/nn.h"

/* The cells (PyTorch's nn.LSTM / nn.GRU, one layer; sigma the logistic function):
 *   LSTM, gates in the order i, f, g, o:
 *     a = x W_ih + b_ih + h W_hh + b_hh                  (4H columns: i | f | g | o)
 *     i = sigma(a_i)  f = sigma(a_f)  g = tanh(a_g)  o = sigma(a_o)
 *     c' = f c + i g          h' = o tanh(c')
 *   GRU, gates in the order r, z, n (b_hh's n part inside the r product, as PyTorch):
 *     ax = x W_ih + b_ih      ah = h W_hh + b_hh          (3H columns: r | z | n)
 *     r = sigma(ax_r + ah_r)  z = sigma(ax_z + ah_z)  n = tanh(ax_n + r ah_n)
 *     h' = (1 - z) n + z h
 * Before step t, a row b with episode_start[t][b] set has its state zeroed (h, and c for
 * the LSTM), as CleanRL's ppo_atari_lstm does with h = (1 - done) h; its gradient does
 * not flow back across that step.
 *
 * Arithmetic order (part of the result, like the seed):
 * - Products: ax = nn_linear_forward(x, W_ih, b_ih) over all T x B rows in one call,
 *   ah = nn_linear_forward(h, W_hh, b_hh) per step: each element b then madd over the
 *   inputs ascending (nn.h), so a row's bits never depend on the rows beside it.
 * - tanh is nn_tanh (nn.h, calf's own float tanh: fixed fused multiply-adds, no libm);
 *   sigma(v) = madd(0.5, tanh(0.5 v), 0.5), 0.5 v exact. Below, madd is nn_madd (fmaf),
 *   every other operation one IEEE float operation in the grouping written.
 * - LSTM: a = ax + ah; c' = madd(f, c, i * g); h' = o * tanh(c').
 *   GRU: a_rz = ax_rz + ah_rz; n = tanh(madd(r, ah_n, ax_n)); h' = madd(z, h - n, n).
 * - Backward at step t (T-1 down to 0), per row and unit, with dh the carried gradient
 *   of h_t (dh_T given, else 0) and dc likewise:
 *     dh = dh + dy[t]   (skipped where dy is NULL)
 *     LSTM: u = tanh(c_t); dcs = madd(dh * o, 1 - u * u, dc);
 *           d_i = (dcs * g) * (i * (1 - i));  d_f = (dcs * c) * (f * (1 - f));  (c: the c read)
 *           d_g = (dcs * i) * (1 - g * g);    d_o = (dh * u) * (o * (1 - o));
 *           dc = dcs * f;  the hidden-side gate gradient equals the input side's.
 *     GRU:  d_n = (dh * (1 - z)) * (1 - n * n);  d_z = (dh * (h - n)) * (z * (1 - z));
 *           d_r = (d_n * ah_n) * (r * (1 - r));
 *           input side (d_r, d_z, d_n), hidden side (d_r, d_z, d_n * r).
 *     dh = (hidden-side gradient) W_hh^T by nn_linear_backward_input (0, then madd over
 *     the gate columns ascending); GRU then dh = madd(dh_t, z, that).
 *     A row reset before step t gets dh = dc = 0 here (exact zeros, not a product).
 *   The gradient of the initial state is what is carried out of step 0.
 * - Parameter gradients, after the time loop, one chain per element over the T x B rows
 *   in the order (t ascending, then b ascending), as nn_linear_backward_params:
 *   dW_ih from x and the input-side gate gradients, dW_hh from the state each step read
 *   (after its reset) and the hidden-side ones, db_ih and db_hh their column sums.
 *   dX = (input-side gradients) W_ih^T, nn_linear_backward_input over all T x B rows.
 * rnn.c cuts the wide products into column panels and the weight gradients into row
 * chunks (continuing the chains) to stay in cache; neither changes an element's chain.
 * Nothing depends on threads, the batch split or the CPU: fmaf is one rounding
 * everywhere, and tanh is calf's. */

typedef enum { RNN_LSTM, RNN_GRU } rnn_kind;

/* A cell is a view into a flat parameter array, as nn_mlp: offsets only. Weights are
 * stored (in, out) row-major like nn_mlp's, i.e. PyTorch's weight_ih_l0 (G, in)
 * transposed; column q H + j is unit j of gate q in the order above. */
typedef struct rnn_cell {
    rnn_kind kind;
    int in;            /* input features */
    int hidden;        /* H, the state's width (>= 3: G >= NN_SMALL_OUT, so every gate
                          product takes nn.h's row-wise order) */
    int gates;         /* G: 4 H (LSTM) or 3 H (GRU) */
    size_t w_ih_off;   /* W_ih (in, G) */
    size_t w_hh_off;   /* W_hh (H, G) */
    size_t b_ih_off;   /* b_ih (G) */
    size_t b_hh_off;   /* b_hh (G) */
    size_t offset;     /* this cell's span [offset, offset + num_params) */
    size_t num_params; /* includes alignment padding (always zero) */
} rnn_cell;

/* Lay the cell out at *cursor and advance it; each of the four blocks starts on a
 * multiple of 16 floats, as nn_mlp_layout's weights. */
void rnn_layout(rnn_cell *cell, rnn_kind kind, int in, int hidden, size_t *cursor);

/* CleanRL's ppo_atari_lstm init: orthogonal W_ih then W_hh with gain 1 (each matrix
 * whole, as nn.init.orthogonal_ on PyTorch's (G, in) and (G, H) weights: nn_orthogonal_init
 * on ours), biases 0. Draws only from rng. */
int rnn_init(const rnn_cell *cell, float *params, calf_rng *rng, calf_error *err);

/* What a forward keeps for backward, and the working space of both. */
typedef struct rnn_cache {
    rnn_kind kind;
    int in, hidden, gates;
    int max_T, max_B;  /* capacity */
    int T, B;          /* shape of the last forward; T = 0 when backward has none */
    const float *params; /* params of the last forward (checked by backward) */
    float *x;          /* (max_T, max_B, in): copy of the input */
    uint8_t *start;    /* (max_T, max_B): copy of episode_start (0 where NULL) */
    float *hprev;      /* (max_T, max_B, H): the h each step read, after its reset */
    float *cprev;      /* (max_T, max_B, H): the same for c (LSTM) */
    float *act;        /* (max_T, max_B, G): gates after their activations */
    float *aux;        /* (max_T, max_B, H): LSTM tanh(c_t); GRU ah_n */
    float *ax;         /* (max_T, max_B, G): input products; in backward the input-side
                          gate gradients */
    float *dgh;        /* (max_T, max_B, G): GRU's hidden-side gate gradients */
    float *ah;         /* (max_B, G): a step's hidden products */
    float *h, *c;      /* (max_B, H): running state */
    float *dh, *dc, *tmp; /* (max_B, H): backward's carried gradients */
    float *wt_ih;      /* (G, in): W_ih transposed, made by backward */
    float *wt_hh;      /* (G, H) */
    float *pack;       /* (max(in, H) G + G): packed column panels; ADD mode's chains */
    float *pout;       /* a panel's block of rows */
} rnn_cache;

/* Room for T <= max_T steps of B <= max_B rows. CALF_ENOMEM when memory runs out (then
 * rnn_cache_free frees what was made); rnn_cache_free(NULL) is safe. */
int rnn_cache_init(rnn_cache *cache, const rnn_cell *cell, int max_T, int max_B,
                   calf_error *err);
void rnn_cache_free(rnn_cache *cache);

/* T steps of B sequences, time-major. h0, c0 NULL: zero; c0, cT must be NULL for a GRU
 * and cT may be NULL for an LSTM; episode_start NULL: no resets. Keeps what backward needs
 * in cache. */
void rnn_forward(const rnn_cell *cell, const float *params, rnn_cache *cache,
                 const float *x,               /* (T, B, in) */
                 const uint8_t *episode_start, /* (T, B): zero the state before step t */
                 const float *h0,              /* (B, H) */
                 const float *c0,              /* (B, H), LSTM */
                 int T, int B,
                 float *y,                     /* (T, B, H): h after each step */
                 float *hT,                    /* (B, H): h after the last step, or NULL */
                 float *cT);                   /* (B, H): LSTM's c after it, or NULL */

/* One step for acting: the same bits as step t of rnn_forward given the state that step
 * read. h (and c) are read and overwritten with the new state; episode_start may be NULL.
 * Uses the cache as scratch (max_B >= B) and leaves no forward for backward. */
void rnn_step(const rnn_cell *cell, const float *params, rnn_cache *cache,
              const float *x,               /* (B, in) */
              const uint8_t *episode_start, /* (B) */
              int B,
              float *h,                     /* (B, H), in and out */
              float *c);                    /* (B, H), in and out (LSTM), NULL for GRU */

/* How backward meets the gradient array: ACC adds its chains onto what grad holds (+=),
 * SET writes them (the bits of zeroing first), ADD writes grad + (the SET chain): the
 * three modes of nn_mlp_backward, _set and _add. */
typedef enum { RNN_GRAD_ACC, RNN_GRAD_SET, RNN_GRAD_ADD } rnn_grad_mode;

/* Backward through the last forward. dy, dhT, dcT may be NULL (zero); grad gets the
 * cell's four blocks by mode (NULL: none); dx, dh0, dc0 are written (=) when not NULL.
 * params must be the array the forward used, unchanged. */
void rnn_backward(const rnn_cell *cell, const float *params, rnn_cache *cache,
                  const float *dy,  /* (T, B, H) */
                  const float *dhT, /* (B, H) */
                  const float *dcT, /* (B, H), LSTM */
                  float *grad, rnn_grad_mode mode,
                  float *dx,        /* (T, B, in) */
                  float *dh0,       /* (B, H) */
                  float *dc0);      /* (B, H), LSTM */

#endif
