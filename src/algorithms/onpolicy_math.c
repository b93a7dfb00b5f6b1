/* onpolicy_math.c: GAE, the minibatch split and the advantages' normalization (see
 * onpolicy_math.h). Scalars only, in double internally, so the results depend on the
 * inputs alone. */
#include "algorithms/onpolicy_math.h"

#include <math.h>

#include "calf/error.h"

void onpolicy_gae_advantages(int T, const float *rewards, const float *values,
                             const float *next_values, const uint8_t *terminated,
                             const uint8_t *ended, float gamma, float lambda, float *advantages,
                             float *returns) {
    CALF_ASSERT(T >= 0);
    const double g = gamma, gl = (double)gamma * (double)lambda;
    double last = 0.0; /* adv_{t+1} */
    for (int t = T - 1; t >= 0; t--) {
        double next = terminated[t] ? 0.0 : (double)next_values[t];
        double delta = (double)rewards[t] + g * next - (double)values[t];
        double adv = delta + (ended[t] ? 0.0 : gl * last);
        advantages[t] = (float)adv;
        returns[t] = (float)(adv + (double)values[t]);
        last = adv;
    }
}

void onpolicy_chunk_range(int T, int M, int m, int *off, int *len) {
    int base = T / M, extra = T % M;
    *off = m * base + (m < extra ? m : extra);
    *len = base + (m < extra ? 1 : 0);
}

void onpolicy_chunk_sums(int T, int M, const int *perm, const float *adv, size_t stride,
                         double *sums) {
    for (int m = 0; m < M; m++) {
        int off, len;
        onpolicy_chunk_range(T, M, m, &off, &len);
        double s = 0, q = 0;
        for (int j = off; j < off + len; j++) {
            float a = adv[(size_t)perm[j] * stride];
            s += a;
            q += (double)a * a;
        }
        sums[2 * m] = s;
        sums[2 * m + 1] = q;
    }
}

void onpolicy_adv_scale(double s, double q, double n, float *mean, float *inv) {
    double mu = s / n;
    double var = q / n - mu * mu;
    *mean = (float)mu;
    *inv = (float)(1.0 / (sqrt(var > 0 ? var : 0) + 1e-8));
}
