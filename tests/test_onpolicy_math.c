/* test_onpolicy_math.c: the on-policy core's GAE (onpolicy_math.h) against
 * hand-computed values (termination, truncation, the rollout's end) and its limits
 * (lambda = 1: the discounted return; lambda = 0: one-step TD errors). */
#include <string.h>

#include "algorithms/onpolicy_math.h"
#include "test_util.h"

static void test_gae_hand(void) {
    /* T = 5: step 1 terminates, step 3 is truncated, step 4 is the rollout's end */
    const float r[5] = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f};
    const float v[5] = {0.5f, 1.0f, 2.0f, 0.25f, 1.5f};
    const float nv[5] = {1.0f, 99.0f, 0.25f, 4.0f, 2.0f}; /* nv[1] ignored: terminated */
    const uint8_t term[5] = {0, 1, 0, 0, 0};
    const uint8_t ended[5] = {0, 1, 0, 1, 0};
    const float g = 0.9f, l = 0.8f;
    float adv[5], ret[5];
    onpolicy_gae_advantages(5, r, v, nv, term, ended, g, l, adv, ret);
    double G = g, GL = (double)g * l;
    /* by hand, backwards */
    double d4 = 3.0 + G * 2.0 - 1.5;   /* bootstrap from the value after the last step */
    double a4 = d4;
    double d3 = -1.0 + G * 4.0 - 0.25; /* truncated: bootstrap from the final obs, cut */
    double a3 = d3;
    double d2 = 0.5 + G * 0.25 - 2.0;
    double a2 = d2 + GL * a3;
    double d1 = 2.0 + 0.0 - 1.0;       /* terminated: no bootstrap, cut */
    double a1 = d1;
    double d0 = 1.0 + G * 1.0 - 0.5;
    double a0 = d0 + GL * a1;
    const double want[5] = {a0, a1, a2, a3, a4};
    for (int t = 0; t < 5; t++) {
        CHECK_NEAR(adv[t], want[t], 1e-6);
        CHECK_NEAR(ret[t], want[t] + v[t], 1e-6);
    }
    CHECK_NEAR(adv[2], (0.5 + 0.9 * 0.25 - 2.0) + 0.72 * (-1.0 + 3.6 - 0.25), 1e-6);
    /* deterministic, and T = 0 is a no-op */
    float adv2[5], ret2[5];
    onpolicy_gae_advantages(5, r, v, nv, term, ended, g, l, adv2, ret2);
    CHECK(memcmp(adv, adv2, sizeof adv) == 0 && memcmp(ret, ret2, sizeof ret) == 0);
    onpolicy_gae_advantages(0, r, v, nv, term, ended, g, l, adv2, ret2);
}

static void test_gae_limits(void) {
    /* lambda = 1, no episode ends: advantage = discounted return - value */
    enum { T = 6 };
    float r[T], v[T], nv[T], adv[T], ret[T];
    uint8_t term[T] = {0}, ended[T] = {0};
    for (int t = 0; t < T; t++) {
        r[t] = (float)(t + 1);
        v[t] = 0.1f * (float)t;
    }
    for (int t = 0; t < T; t++) nv[t] = t + 1 < T ? v[t + 1] : 5.0f;
    onpolicy_gae_advantages(T, r, v, nv, term, ended, 0.99f, 1.0f, adv, ret);
    for (int t = 0; t < T; t++) {
        double G = 0.0, disc = 1.0;
        for (int k = t; k < T; k++) G += disc * r[k], disc *= 0.99f;
        G += disc * 5.0;
        CHECK_NEAR(ret[t], G, 1e-4);
    }
    /* lambda = 0: one-step TD errors */
    onpolicy_gae_advantages(T, r, v, nv, term, ended, 0.99f, 0.0f, adv, ret);
    for (int t = 0; t < T; t++) CHECK_NEAR(adv[t], r[t] + 0.99f * (double)nv[t] - v[t], 1e-5);
}

int main(void) {
    test_gae_hand();
    test_gae_limits();
    return test_report("test_onpolicy_math");
}
