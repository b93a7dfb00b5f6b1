/* action_dist.h: the action distributions of calf's policies: a categorical over logits
 * (discrete actions) and a diagonal Gaussian with a state-independent log-std
 * (continuous actions). Sampling, log-prob, entropy, mode, and the gradients PPO needs.
 * All per row, computed in double internally, so a row's results depend on it alone. */
#ifndef CALF_ACTION_DIST_H
#define CALF_ACTION_DIST_H

#include "calf/rng.h"

/* ---- categorical over n >= 1 logits (log-softmax with the max subtracted) ---- */

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
