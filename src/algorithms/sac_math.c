/* sac_math.c: SAC's per-sample losses, squashed-Gaussian policy and Polyak update (see
 * sac_math.h). Scalar code in double over a handful of values per row, like action_dist.c:
 * accuracy and a fixed order matter more here than vector width. */
#include "algorithms/sac_math.h"
#include "algorithms/offpolicy_math.h"

#include <math.h>

#include "calf/error.h"
#include "base/cmath.h"

#define LOG_2PI 1.8378770664093454835606594728112

static double clamp_log_std(float raw) {
    double v = raw;
    if (v < (double)SAC_LOG_STD_MIN) return SAC_LOG_STD_MIN;
    if (v > (double)SAC_LOG_STD_MAX) return SAC_LOG_STD_MAX;
    return v;
}

/* One dim of the squashed sample, everything the backward needs too. */
typedef struct squash_dim {
    double log_std, std, y, scale, bias;
} squash_dim;

static squash_dim squash_eval(float mu, float log_std_raw, float eps, float lo, float hi) {
    squash_dim d;
    d.log_std = clamp_log_std(log_std_raw);
    d.std = cm_exp(d.log_std);
    d.y = cm_tanh((double)mu + d.std * (double)eps);
    offpolicy_squash_affine(lo, hi, &d.scale, &d.bias);
    return d;
}

void sac_squashed_sample(int A, const float *head, const float *eps, const float *lo,
                         const float *hi, float *action, float *logp) {
    CALF_ASSERT(A >= 1);
    double lp = 0.0;
    for (int i = 0; i < A; i++) {
        squash_dim d = squash_eval(head[i], head[A + i], eps[i], lo[i], hi[i]);
        action[i] = (float)(d.scale * d.y + d.bias);
        double e = eps[i];
        lp += (-0.5 * e * e - d.log_std - 0.5 * LOG_2PI) -
              cm_log(d.scale * (1.0 - d.y * d.y) + SAC_SQUASH_EPS);
    }
    if (logp) *logp = (float)lp;
}

void sac_squashed_greedy(int A, const float *head, const float *lo, const float *hi,
                         float *action) {
    CALF_ASSERT(A >= 1);
    for (int i = 0; i < A; i++) {
        double scale, bias;
        offpolicy_squash_affine(lo[i], hi[i], &scale, &bias);
        action[i] = (float)(scale * cm_tanh((double)head[i]) + bias);
    }
}

void sac_squashed_backward(int A, const float *head, const float *eps, const float *lo,
                           const float *hi, const float *daction, float dlogp, float *dhead) {
    CALF_ASSERT(A >= 1);
    const double gl = dlogp;
    for (int i = 0; i < A; i++) {
        squash_dim d = squash_eval(head[i], head[A + i], eps[i], lo[i], hi[i]);
        double sech2 = 1.0 - d.y * d.y;
        double jac = d.scale * sech2; /* d action / d x */
        double dx = (double)daction[i] * jac + gl * 2.0 * d.scale * d.y * sech2 /
                                                   (jac + SAC_SQUASH_EPS);
        double raw = head[A + i];
        int pass = raw >= (double)SAC_LOG_STD_MIN && raw <= (double)SAC_LOG_STD_MAX;
        dhead[i] = (float)dx;
        dhead[A + i] = pass ? (float)(dx * d.std * (double)eps[i] - gl) : 0.0f;
    }
}

float sac_td_target(float reward, float gamma, uint8_t terminated, float q1_next,
                    float q2_next, float alpha, float logp_next) {
    if (terminated) return reward;
    double qmin = q1_next <= q2_next ? q1_next : q2_next;
    double v = qmin - (double)alpha * (double)logp_next;
    return (float)((double)reward + (double)gamma * v);
}

float sac_td_target_value(float reward, float gamma, uint8_t terminated, float next_value) {
    return offpolicy_td_target(reward, gamma, terminated, next_value);
}

float sac_critic_loss(float q, float target, float scale, float *dq) {
    double diff = (double)q - (double)target;
    *dq = (float)((double)scale * diff);
    return (float)(0.5 * diff * diff);
}

void sac_actor_loss(float logp, float q1, float q2, float alpha, float scale,
                    sac_actor_result *out) {
    int first = q1 <= q2;
    double qmin = first ? q1 : q2;
    out->loss = (float)((double)alpha * (double)logp - qmin);
    out->dlogp = (float)((double)scale * (double)alpha);
    out->dq1 = first ? -scale : 0.0f;
    out->dq2 = first ? 0.0f : -scale;
}

float sac_alpha_loss(float log_alpha, float logp, float target_entropy, float scale,
                     float *dlog_alpha) {
    double s = (double)logp + (double)target_entropy;
    *dlog_alpha = (float)(-(double)scale * s);
    return (float)(-(double)log_alpha * s);
}

/* lse of z = q / alpha, in double. */
static double discrete_lse(int n, const float *q, double alpha) {
    CALF_ASSERT(n >= 1 && alpha > 0.0);
    double m = (double)q[0] / alpha;
    for (int a = 1; a < n; a++) {
        double z = (double)q[a] / alpha;
        if (z > m) m = z;
    }
    double s = 0.0;
    for (int a = 0; a < n; a++) s += cm_exp((double)q[a] / alpha - m);
    return m + cm_log(s);
}

void sac_discrete_policy(int n, const float *q, float alpha, float *probs, float *logp) {
    const double al = alpha;
    double lse = discrete_lse(n, q, al);
    for (int a = 0; a < n; a++) {
        double lp = (double)q[a] / al - lse;
        if (logp) logp[a] = (float)lp;
        if (probs) probs[a] = (float)cm_exp(lp);
    }
}

float sac_discrete_entropy(int n, const float *q, float alpha) {
    const double al = alpha;
    double lse = discrete_lse(n, q, al), h = 0.0;
    for (int a = 0; a < n; a++) {
        double lp = (double)q[a] / al - lse;
        double p = cm_exp(lp);
        if (p > 0.0) h -= p * lp;
    }
    return (float)h;
}

float sac_discrete_next_value(int n, const float *q, float alpha, const float *q1t,
                              const float *q2t) {
    const double al = alpha;
    double lse = discrete_lse(n, q, al), v = 0.0;
    for (int a = 0; a < n; a++) {
        double lp = (double)q[a] / al - lse;
        double p = cm_exp(lp);
        double qmin = q1t[a] <= q2t[a] ? q1t[a] : q2t[a];
        /* a zero-probability action adds nothing (and cannot turn an inf target into NaN) */
        if (p > 0.0) v += p * (qmin - al * lp);
    }
    return (float)v;
}

float sac_discrete_critic_loss(int n, const float *q, int action, float target, float scale,
                               float *dq) {
    CALF_ASSERT(action >= 0 && action < n);
    for (int a = 0; a < n; a++) dq[a] = 0.0f;
    return sac_critic_loss(q[action], target, scale, &dq[action]);
}

float sac_discrete_alpha_loss(float log_alpha, float entropy, float target_entropy,
                              float scale, float *dlog_alpha) {
    double s = -(double)entropy + (double)target_entropy;
    *dlog_alpha = (float)(-(double)scale * s);
    return (float)(-(double)log_alpha * s);
}

int sac_discrete_sample(int n, const float *q, float alpha, double u) {
    const double al = alpha;
    double lse = discrete_lse(n, q, al), c = 0.0;
    for (int a = 0; a < n; a++) {
        c += cm_exp((double)q[a] / al - lse);
        if (u < c) return a;
    }
    return n - 1;
}

int sac_discrete_greedy(int n, const float *q) {
    CALF_ASSERT(n >= 1);
    int best = 0;
    for (int a = 1; a < n; a++)
        if (q[a] > q[best]) best = a;
    return best;
}

void sac_polyak_update(float *target, const float *param, size_t n, float tau) {
    offpolicy_polyak_update(target, param, n, tau);
}
