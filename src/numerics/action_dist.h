/* action_dist.h: the action distributions of calf's policies: a categorical over logits
 * (discrete actions, optionally masked), a factored categorical (MultiDiscrete: one
 * categorical per sub-action) and a diagonal Gaussian with a state-independent log-std
 * (continuous actions). Sampling, log-prob, entropy, mode, and the gradients PPO needs.
 * All per row, computed in double internally, so a row's results depend on it alone. */
#ifndef CALF_ACTION_DIST_H
#define CALF_ACTION_DIST_H

#include <stdint.h>

#include "calf/rng.h"

/* ---- categorical over n >= 1 logits (log-softmax with the max subtracted) ----
 *
 * Arithmetic order (every function below, per row, in double, rounded to float once):
 *   m = the largest logit (j ascending, the first on ties); s = sum_j exp(z_j - m),
 *   j ascending from 0.0; lse = m + log(s); logp_j = z_j - lse; p_j = exp(logp_j);
 *   entropy h = -sum_j p_j logp_j, j ascending, terms with p_j == 0 left out.
 * exp and log are calf's own (base/cmath.h), so every CPU gives the same bits.
 *
 * Masks: the _masked forms take mask (n) bytes, nonzero for a valid action, at least one
 * valid. An invalid action is as if its logit were -inf, whatever the logit holds (a
 * NaN too): it is left out of m, s and h, its probability is exactly 0, it is never
 * sampled nor the mode, its log-prob is not asked for (asserted), and its gradient is
 * exactly +0. With one valid action: logp 0, entropy 0, gradient 0, no NaN. mask NULL
 * means all valid, and gives the bits of the unmasked functions (which are the masked
 * ones with NULL); so does a mask of all ones. */

/* logp[j] = log softmax(logits)[j]. */
void dist_categorical_log_softmax(const float *logits, /* (n) */
                                  int n, float *logp /* (n) */);
float dist_categorical_log_prob(const float *logits, /* (n) */ int n, int action);
/* -sum_j p_j log p_j */
float dist_categorical_entropy(const float *logits, /* (n) */ int n);
/* Both at once (one pass over the softmax); either pointer may be NULL. */
void dist_categorical_logp_entropy(const float *logits, int n, int action, float *logp,
                                   float *entropy);
/* What evaluating a row leaves for its gradient (log-sum-exp, entropy, probabilities),
 * so that the gradient recomputes no exp or log: the same numbers, the same bits. */
enum { DIST_CATEGORICAL_CACHE_MAX = 16 };
typedef struct dist_categorical_cache {
    int n; /* logits cached; 0: none (more than DIST_CATEGORICAL_CACHE_MAX) */
    double lse, h;
    double p[DIST_CATEGORICAL_CACHE_MAX];
} dist_categorical_cache;
/* dist_categorical_logp_entropy that also fills cache (may be NULL). */
void dist_categorical_eval(const float *logits, int n, int action, float *logp, float *entropy,
                           dist_categorical_cache *cache);
/* One uniform draw from rng, inverted through the cumulative probabilities. */
int dist_categorical_sample(const float *logits, int n, calf_rng *rng);
/* argmax, the lowest index on ties. */
int dist_categorical_mode(const float *logits, int n);
/* dlogits (n, written) = d(c_logp * logp(action) + c_ent * entropy) / d logits:
 *   c_logp * ([j == action] - p_j) - c_ent * p_j * (log p_j + entropy). */
void dist_categorical_grad(const float *logits, /* (n) */
                           int n, int action, float c_logp, float c_ent,
                           float *dlogits); /* (n) */
/* The same, using what dist_categorical_eval cached for these logits (cache may be NULL
 * or hold another n: then it is recomputed). */
void dist_categorical_grad_cached(const float *logits, int n, int action, float c_logp,
                                  float c_ent, const dist_categorical_cache *cache,
                                  float *dlogits);

/* The masked forms (mask (n) or NULL, see above). The cache of a masked row holds p_j = 0
 * for the invalid actions. */
void dist_categorical_eval_masked(const float *logits, /* (n) */
                                  const uint8_t *mask, /* (n) or NULL */
                                  int n, int action, float *logp, float *entropy,
                                  dist_categorical_cache *cache);
/* One uniform draw u from rng; the first valid j whose cumulative sum of exp(z - m) over
 * valid actions (j ascending) exceeds u * exp(lse - m). */
int dist_categorical_sample_masked(const float *logits, const uint8_t *mask, int n,
                                   calf_rng *rng);
/* argmax over the valid actions, the lowest index on ties (also DQN's greedy over Q). */
int dist_categorical_mode_masked(const float *logits, const uint8_t *mask, int n);
void dist_categorical_grad_masked(const float *logits, const uint8_t *mask, int n, int action,
                                  float c_logp, float c_ent, const dist_categorical_cache *cache,
                                  float *dlogits); /* (n), written */
/* A valid action uniformly: mask NULL, calf_rng_below(rng, n); else k = calf_rng_below(rng,
 * number valid) and the k-th valid action (ascending). One draw either way. (DQN's
 * epsilon draws and the random actions of an initial collection.) */
int dist_masked_uniform(const uint8_t *mask, int n, calf_rng *rng);

/* ---- factored categorical (MultiDiscrete): D >= 1 sub-actions, sub-action d a
 * categorical over nvec[d] >= 1 logits ----
 *
 * The head is the D slices of logits one after the other (sum_d nvec[d] floats), the mask
 * (when not NULL) the D slices of their masks (each slice with a valid action), an action
 * D ints. Arithmetic order: each slice's logp_d and h_d exactly as the categorical's, in
 * double; logp = sum_d logp_d and h = sum_d h_d summed in double from 0.0, d = 0..D-1,
 * rounded to float once. The gradient of slice d is the categorical's gradient of that
 * slice with the same coefficients (the sum's other terms do not depend on it). Sampling
 * draws sub-actions d = 0..D-1, one uniform each from rng; the mode is each slice's. */
int dist_multi_size(const int *nvec, int D); /* sum_d nvec[d]: the head's floats */
void dist_multi_eval(const float *logits, /* (sum nvec) */
                     const uint8_t *mask, /* (sum nvec) or NULL */
                     const int *nvec, int D,
                     const int *action,   /* (D) */
                     float *logp, float *entropy); /* either may be NULL */
void dist_multi_sample(const float *logits, const uint8_t *mask, const int *nvec, int D,
                       calf_rng *rng, int *action); /* (D), written */
void dist_multi_mode(const float *logits, const uint8_t *mask, const int *nvec, int D,
                     int *action);
void dist_multi_grad(const float *logits, const uint8_t *mask, const int *nvec, int D,
                     const int *action, float c_logp, float c_ent,
                     float *dlogits); /* (sum nvec), written */

/* ---- diagonal Gaussian over d dims: mean (d) from the network, log_std (d) ---- */

/* action_i = mean_i + exp(log_std_i) * z_i, z_i standard normal drawn from rng in order
 * i = 0..d-1. */
void dist_gaussian_sample(const float *mean,    /* (d) */
                          const float *log_std, /* (d) */
                          int d, calf_rng *rng,
                          float *action);       /* (d) */
/* sum_i -0.5 ((a_i - mean_i) / std_i)^2 - log_std_i - 0.5 log(2 pi) */
float dist_gaussian_log_prob(const float *mean, const float *log_std, int d,
                             const float *action);
/* sum_i 0.5 + 0.5 log(2 pi) + log_std_i (independent of the mean) */
float dist_gaussian_entropy(const float *log_std, int d);
/* The mode is the mean. */
void dist_gaussian_mode(const float *mean, int d, float *action);
/* Gradient of (c_logp * logp(action) + c_ent * entropy):
 *   dmean (d) is WRITTEN:        c_logp * (a - mean) / std^2
 *   dlog_std (d) is ACCUMULATED: += c_logp * (((a - mean) / std)^2 - 1) + c_ent
 * dmean is a network output gradient (fed to nn_mlp_backward as dy); dlog_std is a
 * parameter gradient, summed over a batch's rows like the MLP's. */
void dist_gaussian_grad(const float *mean,    /* (d) */
                        const float *log_std, /* (d) */
                        int d,
                        const float *action,  /* (d) */
                        float c_logp, float c_ent,
                        float *dmean,         /* (d), written */
                        float *dlog_std);     /* (d), += */

#endif
