/* action_dist.c: categorical and diagonal-Gaussian action distributions (see action_dist.h).
 * Scalar code in double: these run once per sample on a handful of values, so
 * accuracy and simplicity matter more than vector width. */
#include "numerics/action_dist.h"

#include <math.h>
#include <stdbool.h>

#include "calf/error.h"
#include "base/cmath.h"

#define LOG_2PI 1.8378770664093454835606594728112

/* max logit and log-sum-exp of the logits, in double */
static void log_sum_exp(const float *z, int n, double *max_out, double *lse_out) {
    CALF_ASSERT(n >= 1);
    double m = z[0];
    for (int j = 1; j < n; j++)
        if (z[j] > m) m = z[j];
    double s = 0.0;
    for (int j = 0; j < n; j++) s += cm_exp((double)z[j] - m);
    *max_out = m;
    *lse_out = m + cm_log(s);
}

/* entropy -sum p log p given the log-sum-exp; terms with p == 0 contribute 0. The
 * probabilities are kept in p_out (n) when it is not NULL. */
static double entropy_of(const float *z, int n, double lse, double *p_out) {
    double h = 0.0;
    for (int j = 0; j < n; j++) {
        double lp = (double)z[j] - lse;
        double p = cm_exp(lp);
        if (p_out) p_out[j] = p;
        if (p > 0.0) h -= p * lp;
    }
    return h;
}

void dist_categorical_log_softmax(const float *logits, int n, float *logp) {
    double m, lse;
    log_sum_exp(logits, n, &m, &lse);
    for (int j = 0; j < n; j++) logp[j] = (float)((double)logits[j] - lse);
}

float dist_categorical_log_prob(const float *logits, int n, int action) {
    CALF_ASSERT(action >= 0 && action < n);
    double m, lse;
    log_sum_exp(logits, n, &m, &lse);
    return (float)((double)logits[action] - lse);
}

float dist_categorical_entropy(const float *logits, int n) {
    double m, lse;
    log_sum_exp(logits, n, &m, &lse);
    return (float)entropy_of(logits, n, lse, NULL);
}

void dist_categorical_logp_entropy(const float *logits, int n, int action, float *logp,
                                   float *entropy) {
    dist_categorical_eval(logits, n, action, logp, entropy, NULL);
}

void dist_categorical_eval(const float *logits, int n, int action, float *logp, float *entropy,
                           dist_categorical_cache *cache) {
    double m, lse;
    log_sum_exp(logits, n, &m, &lse);
    if (logp) {
        CALF_ASSERT(action >= 0 && action < n);
        *logp = (float)((double)logits[action] - lse);
    }
    bool keep = cache && n <= DIST_CATEGORICAL_CACHE_MAX;
    if (cache) cache->n = 0;
    if (entropy || keep) {
        double h = entropy_of(logits, n, lse, keep ? cache->p : NULL);
        if (entropy) *entropy = (float)h;
        if (keep) {
            cache->n = n;
            cache->lse = lse;
            cache->h = h;
        }
    }
}

int dist_categorical_sample(const float *logits, int n, calf_rng *rng) {
    double m, lse;
    log_sum_exp(logits, n, &m, &lse);
    double total = cm_exp(lse - m); /* sum of exp(z_j - m) */
    double target = calf_rng_uniform_double(rng) * total;
    double c = 0.0;
    int last = 0;
    for (int j = 0; j < n; j++) {
        double w = cm_exp((double)logits[j] - m);
        if (w > 0.0) last = j;
        c += w;
        if (target < c) return j;
    }
    return last; /* rounding left target at the very top: the last possible action */
}

int dist_categorical_mode(const float *logits, int n) {
    CALF_ASSERT(n >= 1);
    int best = 0;
    for (int j = 1; j < n; j++)
        if (logits[j] > logits[best]) best = j;
    return best;
}

void dist_categorical_grad(const float *logits, int n, int action, float c_logp, float c_ent,
                           float *dlogits) {
    dist_categorical_grad_cached(logits, n, action, c_logp, c_ent, NULL, dlogits);
}

void dist_categorical_grad_cached(const float *logits, int n, int action, float c_logp,
                                  float c_ent, const dist_categorical_cache *cache,
                                  float *dlogits) {
    CALF_ASSERT(action >= 0 && action < n);
    double lse, h, probs[DIST_CATEGORICAL_CACHE_MAX];
    const double *pc = NULL;
    if (cache && cache->n == n) { /* the same numbers the lines below would compute */
        lse = cache->lse;
        h = cache->h;
        pc = cache->p;
    } else {
        double m;
        log_sum_exp(logits, n, &m, &lse);
        h = entropy_of(logits, n, lse, n <= DIST_CATEGORICAL_CACHE_MAX ? probs : NULL);
        if (n <= DIST_CATEGORICAL_CACHE_MAX) pc = probs;
    }
    for (int j = 0; j < n; j++) {
        double lp = (double)logits[j] - lse;
        double p = pc ? pc[j] : cm_exp(lp);
        double g = (double)c_logp * ((j == action ? 1.0 : 0.0) - p);
        if (p > 0.0) g -= (double)c_ent * p * (lp + h);
        dlogits[j] = (float)g;
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
