/* action_dist.c: categorical (masked or not), factored categorical and diagonal-Gaussian
 * action distributions (see action_dist.h).
 * Scalar code in double: these run once per sample on a handful of values, so
 * accuracy and simplicity matter more than vector width. */
#include "numerics/action_dist.h"

#include <math.h>
#include <stdbool.h>

#include "calf/error.h"
#include "base/cmath.h"

#define LOG_2PI 1.8378770664093454835606594728112

/* Whether action j is valid under mask (NULL: all are). */
#define VALID(mask, j) (!(mask) || (mask)[j])

/* max logit and log-sum-exp of the valid logits, in double */
static void log_sum_exp(const float *z, const uint8_t *mask, int n, double *max_out,
                        double *lse_out) {
    CALF_ASSERT(n >= 1);
    int j0 = 0;
    while (j0 < n && !VALID(mask, j0)) j0++;
    CALF_ASSERT(j0 < n); /* at least one valid action */
    double m = z[j0];
    for (int j = j0 + 1; j < n; j++)
        if (VALID(mask, j) && z[j] > m) m = z[j];
    double s = 0.0;
    for (int j = 0; j < n; j++)
        if (VALID(mask, j)) s += cm_exp((double)z[j] - m);
    *max_out = m;
    *lse_out = m + cm_log(s);
}

/* entropy -sum p log p given the log-sum-exp; terms with p == 0 (and invalid actions)
 * contribute 0. The probabilities are kept in p_out (n) when it is not NULL (0 for the
 * invalid ones). */
static double entropy_of(const float *z, const uint8_t *mask, int n, double lse,
                         double *p_out) {
    double h = 0.0;
    for (int j = 0; j < n; j++) {
        if (!VALID(mask, j)) {
            if (p_out) p_out[j] = 0.0;
            continue;
        }
        double lp = (double)z[j] - lse;
        double p = cm_exp(lp);
        if (p_out) p_out[j] = p;
        if (p > 0.0) h -= p * lp;
    }
    return h;
}

void dist_categorical_log_softmax(const float *logits, int n, float *logp) {
    double m, lse;
    log_sum_exp(logits, NULL, n, &m, &lse);
    for (int j = 0; j < n; j++) logp[j] = (float)((double)logits[j] - lse);
}

float dist_categorical_log_prob(const float *logits, int n, int action) {
    CALF_ASSERT(action >= 0 && action < n);
    double m, lse;
    log_sum_exp(logits, NULL, n, &m, &lse);
    return (float)((double)logits[action] - lse);
}

float dist_categorical_entropy(const float *logits, int n) {
    double m, lse;
    log_sum_exp(logits, NULL, n, &m, &lse);
    return (float)entropy_of(logits, NULL, n, lse, NULL);
}

void dist_categorical_logp_entropy(const float *logits, int n, int action, float *logp,
                                   float *entropy) {
    dist_categorical_eval_masked(logits, NULL, n, action, logp, entropy, NULL);
}

void dist_categorical_eval(const float *logits, int n, int action, float *logp, float *entropy,
                           dist_categorical_cache *cache) {
    dist_categorical_eval_masked(logits, NULL, n, action, logp, entropy, cache);
}

/* One row in double: logp of action (when logp_out), entropy (when h_out), and the cache. */
static void eval_row(const float *logits, const uint8_t *mask, int n, int action,
                     double *logp_out, double *h_out, dist_categorical_cache *cache) {
    double m, lse;
    log_sum_exp(logits, mask, n, &m, &lse);
    if (logp_out) {
        CALF_ASSERT(action >= 0 && action < n && VALID(mask, action));
        *logp_out = (double)logits[action] - lse;
    }
    bool keep = cache && n <= DIST_CATEGORICAL_CACHE_MAX;
    if (cache) cache->n = 0;
    if (h_out || keep) {
        double h = entropy_of(logits, mask, n, lse, keep ? cache->p : NULL);
        if (h_out) *h_out = h;
        if (keep) {
            cache->n = n;
            cache->lse = lse;
            cache->h = h;
        }
    }
}

void dist_categorical_eval_masked(const float *logits, const uint8_t *mask, int n, int action,
                                  float *logp, float *entropy, dist_categorical_cache *cache) {
    double lp = 0, h = 0; /* set by eval_row when asked for (initialised for gcc's flow analysis) */
    eval_row(logits, mask, n, action, logp ? &lp : NULL, entropy ? &h : NULL, cache);
    if (logp) *logp = (float)lp;
    if (entropy) *entropy = (float)h;
}

int dist_categorical_sample(const float *logits, int n, calf_rng *rng) {
    return dist_categorical_sample_masked(logits, NULL, n, rng);
}

int dist_categorical_sample_masked(const float *logits, const uint8_t *mask, int n,
                                   calf_rng *rng) {
    double m, lse;
    log_sum_exp(logits, mask, n, &m, &lse);
    double total = cm_exp(lse - m); /* sum of exp(z_j - m) over the valid j */
    double target = calf_rng_uniform_double(rng) * total;
    double c = 0.0;
    int last = -1;
    for (int j = 0; j < n; j++) {
        if (!VALID(mask, j)) continue;
        double w = cm_exp((double)logits[j] - m);
        if (w > 0.0 || last < 0) last = j;
        c += w;
        if (target < c) return j;
    }
    return last; /* rounding left target at the very top: the last possible action */
}

int dist_categorical_mode(const float *logits, int n) {
    return dist_categorical_mode_masked(logits, NULL, n);
}

int dist_categorical_mode_masked(const float *logits, const uint8_t *mask, int n) {
    CALF_ASSERT(n >= 1);
    int best = 0;
    while (best < n && !VALID(mask, best)) best++;
    CALF_ASSERT(best < n); /* at least one valid action */
    for (int j = best + 1; j < n; j++)
        if (VALID(mask, j) && logits[j] > logits[best]) best = j;
    return best;
}

void dist_categorical_grad(const float *logits, int n, int action, float c_logp, float c_ent,
                           float *dlogits) {
    dist_categorical_grad_masked(logits, NULL, n, action, c_logp, c_ent, NULL, dlogits);
}

void dist_categorical_grad_cached(const float *logits, int n, int action, float c_logp,
                                  float c_ent, const dist_categorical_cache *cache,
                                  float *dlogits) {
    dist_categorical_grad_masked(logits, NULL, n, action, c_logp, c_ent, cache, dlogits);
}

void dist_categorical_grad_masked(const float *logits, const uint8_t *mask, int n, int action,
                                  float c_logp, float c_ent, const dist_categorical_cache *cache,
                                  float *dlogits) {
    CALF_ASSERT(action >= 0 && action < n && VALID(mask, action));
    double lse, h, probs[DIST_CATEGORICAL_CACHE_MAX];
    const double *pc = NULL;
    if (cache && cache->n == n) { /* the same numbers the lines below would compute */
        lse = cache->lse;
        h = cache->h;
        pc = cache->p;
    } else {
        double m;
        log_sum_exp(logits, mask, n, &m, &lse);
        h = entropy_of(logits, mask, n, lse, n <= DIST_CATEGORICAL_CACHE_MAX ? probs : NULL);
        if (n <= DIST_CATEGORICAL_CACHE_MAX) pc = probs;
    }
    for (int j = 0; j < n; j++) {
        if (!VALID(mask, j)) {
            dlogits[j] = 0.0f;
            continue;
        }
        double lp = (double)logits[j] - lse;
        double p = pc ? pc[j] : cm_exp(lp);
        double g = (double)c_logp * ((j == action ? 1.0 : 0.0) - p);
        if (p > 0.0) g -= (double)c_ent * p * (lp + h);
        dlogits[j] = (float)g;
    }
}

int dist_masked_uniform(const uint8_t *mask, int n, calf_rng *rng) {
    CALF_ASSERT(n >= 1);
    if (!mask) return (int)calf_rng_below(rng, (uint32_t)n);
    int valid = 0;
    for (int j = 0; j < n; j++) valid += mask[j] != 0;
    CALF_ASSERT(valid >= 1);
    int k = (int)calf_rng_below(rng, (uint32_t)valid);
    for (int j = 0; j < n; j++)
        if (mask[j] && k-- == 0) return j;
    return -1; /* not reached: k < valid */
}

/* ---- factored categorical ---- */

int dist_multi_size(const int *nvec, int D) {
    int n = 0;
    for (int d = 0; d < D; d++) n += nvec[d];
    return n;
}

void dist_multi_eval(const float *logits, const uint8_t *mask, const int *nvec, int D,
                     const int *action, float *logp, float *entropy) {
    CALF_ASSERT(D >= 1);
    double lp = 0.0, h = 0.0;
    int off = 0;
    for (int d = 0; d < D; d++) {
        double lpd, hd;
        eval_row(logits + off, mask ? mask + off : NULL, nvec[d], logp ? action[d] : 0,
                 logp ? &lpd : NULL, entropy ? &hd : NULL, NULL);
        if (logp) lp += lpd;
        if (entropy) h += hd;
        off += nvec[d];
    }
    if (logp) *logp = (float)lp;
    if (entropy) *entropy = (float)h;
}

void dist_multi_sample(const float *logits, const uint8_t *mask, const int *nvec, int D,
                       calf_rng *rng, int *action) {
    int off = 0;
    for (int d = 0; d < D; d++) {
        action[d] = dist_categorical_sample_masked(logits + off, mask ? mask + off : NULL,
                                                   nvec[d], rng);
        off += nvec[d];
    }
}

void dist_multi_mode(const float *logits, const uint8_t *mask, const int *nvec, int D,
                     int *action) {
    int off = 0;
    for (int d = 0; d < D; d++) {
        action[d] = dist_categorical_mode_masked(logits + off, mask ? mask + off : NULL, nvec[d]);
        off += nvec[d];
    }
}

void dist_multi_grad(const float *logits, const uint8_t *mask, const int *nvec, int D,
                     const int *action, float c_logp, float c_ent, float *dlogits) {
    int off = 0;
    for (int d = 0; d < D; d++) {
        dist_categorical_grad_masked(logits + off, mask ? mask + off : NULL, nvec[d], action[d],
                                     c_logp, c_ent, NULL, dlogits + off);
        off += nvec[d];
    }
}

void dist_gaussian_sample(const float *mean, const float *log_std, int d, calf_rng *rng,
                          float *action) {
    for (int i = 0; i < d; i++) {
        double z = calf_rng_normal(rng);
        action[i] = (float)((double)mean[i] + cm_exp((double)log_std[i]) * z);
    }
}

float dist_gaussian_log_prob(const float *mean, const float *log_std, int d,
                             const float *action) {
    double s = 0.0;
    for (int i = 0; i < d; i++) {
        double z = ((double)action[i] - (double)mean[i]) * cm_exp(-(double)log_std[i]);
        s += -0.5 * z * z - (double)log_std[i] - 0.5 * LOG_2PI;
    }
    return (float)s;
}

float dist_gaussian_entropy(const float *log_std, int d) {
    double s = 0.0;
    for (int i = 0; i < d; i++) s += 0.5 + 0.5 * LOG_2PI + (double)log_std[i];
    return (float)s;
}

void dist_gaussian_mode(const float *mean, int d, float *action) {
    for (int i = 0; i < d; i++) action[i] = mean[i];
}

void dist_gaussian_grad(const float *mean, const float *log_std, int d, const float *action,
                        float c_logp, float c_ent, float *dmean, float *dlog_std) {
    for (int i = 0; i < d; i++) {
        double inv_std = cm_exp(-(double)log_std[i]);
        double z = ((double)action[i] - (double)mean[i]) * inv_std;
        dmean[i] = (float)((double)c_logp * z * inv_std);
        dlog_std[i] += (float)((double)c_logp * (z * z - 1.0) + (double)c_ent);
    }
}
