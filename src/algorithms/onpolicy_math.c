/* onpolicy_math.c: GAE (see onpolicy_math.h). Scalars only, in double internally, so
 * the results depend on the inputs alone. */
#include "algorithms/onpolicy_math.h"

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
