/* ac_model.h: the actor-critic an on-policy algorithm (PPO) trains: a policy network
 * (logits of a categorical, masked or not, or of a factored categorical for MultiDiscrete,
 * or the means of a diagonal Gaussian with a state-independent log-std) and a value
 * network (net.h: MLPs, or conv layers first), laid out in one flat parameter array with
 * gradients and Adam moments beside it; nothing in it is PPO's own. */
#ifndef CALF_AC_MODEL_H
#define CALF_AC_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "calf/config.h"
#include "calf/env.h"
#include "calf/rng.h"
#include "numerics/action_dist.h"
#include "numerics/net.h"
#include "numerics/nn.h"
#include "numerics/param_group.h"

typedef struct ac_model {
    int obs_dim;
    int num_actions;        /* discrete: number of actions (MultiDiscrete: the sum of nvec);
                             * 0 when continuous */
    int num_action_dims;    /* MultiDiscrete: sub-actions; 0 otherwise */
    const int *nvec;        /* (num_action_dims) MultiDiscrete sizes (the spec's array) */
    int action_ints;        /* ints per action: num_action_dims, or 1 */
    bool masked;            /* the env masks its actions: rows come with a mask */
    int action_dim;         /* continuous: action size; 0 when discrete */
    int head_dim;           /* actor output size: num_actions or action_dim */
    net actor, value;       /* separate networks, each from its own config rows (ac_net_rows) */
    size_t log_std_off;     /* continuous: (action_dim) log-stds; unused when discrete */
    /* Recurrent cores (ActorDistributionNetwork.lstm_hidden_size or gru_hidden_size, and
     * ValueNetwork's): an LSTM or GRU layer in each net after its conv and pre_fc layers,
     * before its fc layers (net.h); each core's parameters laid out after the log-std and
     * drawn after both networks (net_layout_core, net_init_core), so that without cores
     * every offset and draw is a feed-forward config's, and with them a config of the time
     * cores were not layers yet keeps its bytes. */
    int state_dim;          /* floats of one env's recurrent state: the actor's state row
                             * (its core's h, and c), then the value's; 0 without cores */
    param_group g;          /* "PRMS": every parameter, the summed gradient of one update,
                             * Adam's moments, settings and step count (PPO steps it with
                             * param_group_step_slice, a slice per process when shared) */
} ac_model;

/* The config rows one network reads, named by the algorithm that owns them (the model
 * knows no algorithm's rows): its conv_layer_params, fc_layer_params and activation
 * (net_config.h's), and a recurrent core's lstm_hidden_size and gru_hidden_size (INT
 * rows, 0: no core) with the pre_fc_layer_params (an INT_TUPLE row) before it. */
typedef struct ac_net_rows {
    calf_binding_id conv, fc, act, lstm, gru, pre_fc;
} ac_net_rows;
/* The whole model's rows: each network's, and the Gaussian's initial log-std (a FLOAT
 * row; read for continuous actions only). */
typedef struct ac_model_rows {
    ac_net_rows actor, value;
    calf_binding_id init_log_std;
} ac_model_rows;

/* Lay out the networks the config's rows ask for, for an env with spec; all arrays
 * zeroed; the group steps with opt (PPO sets opt.lr each iteration, by its schedule).
 * CALF_ENOMEM when memory runs out (ac_model_free frees what was made); CALF_EINVAL
 * naming the line of a network the env's observation cannot feed (conv layers on a flat
 * vector). */
int ac_model_init(ac_model *md, const calf_config *cfg, const ac_model_rows *rows,
                  const calf_env_spec *spec, adam_conf opt, calf_error *err);
/* For algorithm_ops.check, CALF_EINVAL naming the line that asked for a model that
 * cannot be: a network's core both an LSTM and a GRU, or of fewer than 3 units (rnn.h);
 * pre_fc layers without a core; networks that cannot be built on spec's observation
 * (conv layers need an image). */
int ac_model_check(const calf_config *cfg, const ac_model_rows *rows, const calf_env_spec *spec,
                   calf_error *err);
/* Orthogonal init from the (seed, 0, CALF_RNG_INIT) stream; log-std from rows'
 * init_log_std. CALF_ENOMEM when the init's scratch cannot be allocated. */
int ac_model_init_params(ac_model *md, const calf_config *cfg, const ac_model_rows *rows,
                         uint64_t seed, calf_error *err);
void ac_model_free(ac_model *md);
/* The model's arrays in memory the caller owns (param_group_use). */
void ac_model_use_state(ac_model *md, float *params, float *m, float *v, float *grad);

/* Per-row policy math on an actor output row (head_dim floats). mask: the row's
 * (num_actions) valid actions, or NULL (all valid; the unmasked bits); invalid actions
 * have probability 0 (action_dist.h). action: action_ints ints. */
/* Sample an action from the row's distribution with rng; returns its log-prob.
 * Discrete: action; continuous: u (action_dim, unclipped). */
float ac_model_sample(const ac_model *md, const float *params, const float *head,
                      const uint8_t *mask, calf_rng *rng, int *action, float *u);
/* The greedy action (mode). */
void ac_model_mode(const ac_model *md, const float *head, const uint8_t *mask, int *action,
                   float *u);
/* Log-prob and entropy of an action under the row's distribution. cache (may be NULL)
 * keeps what the row's ac_model_dist_backward can reuse. */
void ac_model_logp_entropy(const ac_model *md, const float *params, const float *head,
                           const uint8_t *mask, const int *action, const float *u, float *logp,
                           float *entropy, dist_categorical_cache *cache);
/* Gradient of (c_logp * logp(action) + c_ent * entropy) w.r.t. the head row (written to
 * dhead) and, for continuous actions, this row's log-std gradient WRITTEN to dlog_std
 * (action_dim); the caller sums rows in a fixed order. cache: what ac_model_logp_entropy
 * left for this row, or NULL. */
void ac_model_dist_backward(const ac_model *md, const float *params, const float *head,
                            const uint8_t *mask, const int *action, const float *u, float c_logp,
                            float c_ent, const dist_categorical_cache *cache, float *dhead,
                            float *dlog_std);

/* 64-bit digest of parameters and Adam moments (to prove ranks agree). */
uint64_t ac_model_digest(const ac_model *md);
/* The summaries' histograms at step: "Params/actor", "Params/value", then "Grads/actor",
 * "Grads/value" (the last update's summed gradient). */
void ac_model_histograms(const ac_model *md, int64_t step);

#endif
