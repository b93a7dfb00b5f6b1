/* offpolicy_math.c: the per-sample arithmetic of offpolicy_math.h, in the order and
 * precision its comments state, so a sample's result depends on its inputs alone. */
#include <string.h>

#include "algorithms/offpolicy_math.h"
#include "base/cmath.h"

void offpolicy_squash_affine(float lo, float hi, double *scale, double *bias) {
    *scale = ((double)hi - (double)lo) * 0.5;
    *bias = ((double)hi + (double)lo) * 0.5;
}

float offpolicy_td_target(float reward, float gamma, uint8_t terminated, float next_value) {
    if (terminated) return reward;
    return (float)((double)reward + (double)gamma * (double)next_value);
}

void offpolicy_polyak_update(float *target, const float *param, size_t n, float tau) {
    const float keep = 1.0f - tau;
    for (size_t i = 0; i < n; i++) {
        float t = keep * target[i];
        float p = tau * param[i];
        target[i] = t + p;
    }
}

void offpolicy_target_update(float *target, const float *param, size_t n, float tau) {
    if (tau == 1.0f)
        memcpy(target, param, n * sizeof(float));
    else
        offpolicy_polyak_update(target, param, n, tau);
}

float offpolicy_mse_loss(float q, float target, float scale, float *dq) {
    double d = (double)q - (double)target;
    *dq = (float)((double)scale * 2.0 * d);
    return (float)(d * d);
}

float offpolicy_huber_loss(float q, float target, float scale, float *dq) {
    double d = (double)q - (double)target;
    double ad = d < 0 ? -d : d;
    if (ad <= 1.0) {
        *dq = (float)((double)scale * d);
        return (float)(0.5 * d * d);
    }
    *dq = (float)(d > 0 ? (double)scale : -(double)scale);
    return (float)(ad - 0.5);
}

void offpolicy_tanh_action(int A, const float *x, const float *lo, const float *hi,
                           float *action) {
    for (int i = 0; i < A; i++) {
        double scale, bias;
        offpolicy_squash_affine(lo[i], hi[i], &scale, &bias);
        action[i] = (float)(scale * cm_tanh((double)x[i]) + bias);
    }
}

void offpolicy_tanh_action_backward(int A, const float *x, const float *lo, const float *hi,
                                    const float *daction, float *dx) {
    for (int i = 0; i < A; i++) {
        double scale, bias;
        offpolicy_squash_affine(lo[i], hi[i], &scale, &bias);
        double y = cm_tanh((double)x[i]);
        dx[i] = (float)((double)daction[i] * scale * (1.0 - y * y));
    }
}

static double clampd(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

void offpolicy_explore(int A, const float *action, const float *noise, const float *lo,
                       const float *hi, float *out) {
    for (int i = 0; i < A; i++)
        out[i] = (float)clampd((double)action[i] + (double)noise[i], lo[i], hi[i]);
}

void offpolicy_smoothed_action(int A, const float *target_action, const float *eps,
                               float policy_noise, float noise_clip, const float *lo,
                               const float *hi, float *out) {
    for (int i = 0; i < A; i++) {
        double scale, bias;
        offpolicy_squash_affine(lo[i], hi[i], &scale, &bias);
        double n = clampd((double)eps[i] * (double)policy_noise, -(double)noise_clip,
                          (double)noise_clip);
        out[i] = (float)clampd((double)target_action[i] + n * scale, lo[i], hi[i]);
    }
}

double offpolicy_linear_epsilon(double start, double end, int64_t duration, int64_t t) {
    if (duration <= 0) return end;
    double slope = (end - start) / (double)duration;
    double e = slope * (double)t + start;
    return e > end ? e : end;
}

float offpolicy_max_q(int n, const float *q, int *arg) {
    int best = 0;
    for (int a = 1; a < n; a++)
        if (q[a] > q[best]) best = a;
    if (arg) *arg = best;
    return q[best];
}

void offpolicy_ou_step(int A, float *x, const float *n, float damping, float stddev) {
    const float keep = 1.0f - damping;
    for (int i = 0; i < A; i++) {
        float held = keep * x[i];
        float kick = stddev * n[i];
        x[i] = held + kick;
    }
}
