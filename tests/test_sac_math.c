/* test_sac_math.c: SAC's per-sample math against its definitions: the squashed Gaussian
 * (values, clamp, saturation) and finite differences of its backward and of the whole
 * actor chain; the TD target, critic, actor and temperature losses; discrete SAC's
 * softmax(Q / alpha) policy, soft value, entropy and losses; the Polyak update. */
#include <float.h>
#include <stdint.h>

#include "algorithms/sac_math.h"
#include "test_util.h"

static const double LOG_2PI = 1.8378770664093454835606594728112;

/* ---- a double reference of the squashed Gaussian, straight from the definition ---- */

static double ref_clamp(double v) { return v < -5.0 ? -5.0 : (v > 2.0 ? 2.0 : v); }

/* action (A) and logp for head (2A) in double; the anchor's expression, (x - mu) / std
 * included, rather than the library's eps shortcut */
static double ref_squash(int A, const double *head, const float *eps, const float *lo,
                         const float *hi, double *action) {
    double lp = 0.0;
    for (int i = 0; i < A; i++) {
        double mu = head[i], ls = ref_clamp(head[A + i]), sd = exp(ls);
        double x = mu + sd * eps[i], y = tanh(x);
        double s = ((double)hi[i] - lo[i]) / 2, b = ((double)hi[i] + lo[i]) / 2;
        if (action) action[i] = s * y + b;
        double z = (x - mu) / sd;
        lp += -0.5 * z * z - ls - 0.5 * LOG_2PI;
        lp -= log(s * (1 - y * y) + 1e-6);
    }
    return lp;
}

static void test_squash_values(void) {
    /* A = 3: bounds [-2, 2] (Pendulum), [0, 1], [-1, 3]; dim 2 saturates */
    const float head[6] = {0.3f, -0.7f, 4.5f, -0.4f, 0.1f, -1.0f};
    const float eps[3] = {0.5f, -1.2f, 0.8f};
    const float lo[3] = {-2.0f, 0.0f, -1.0f}, hi[3] = {2.0f, 1.0f, 3.0f};
    float act[3], logp;
    sac_squashed_sample(3, head, eps, lo, hi, act, &logp);
    /* by hand, dim 0: x = 0.3 + e^-0.4 * 0.5 */
    double x0 = 0.3 + exp(-0.4) * 0.5;
    CHECK_NEAR(act[0], 2.0 * tanh(x0), 1e-6);
    double x1 = -0.7 + exp(0.1) * -1.2;
    CHECK_NEAR(act[1], 0.5 * tanh(x1) + 0.5, 1e-7);
    double x2 = 4.5 + exp(-1.0) * 0.8;
    CHECK_NEAR(act[2], 2.0 * tanh(x2) + 1.0, 1e-6);
    double want = 0.0;
    want += -0.5 * 0.25 + 0.4 - 0.5 * LOG_2PI - log(2.0 * (1 - tanh(x0) * tanh(x0)) + 1e-6);
    want += -0.5 * 1.44 - 0.1 - 0.5 * LOG_2PI - log(0.5 * (1 - tanh(x1) * tanh(x1)) + 1e-6);
    want += -0.5 * 0.64 + 1.0 - 0.5 * LOG_2PI - log(2.0 * (1 - tanh(x2) * tanh(x2)) + 1e-6);
    CHECK_NEAR(logp, want, 1e-5);
    double hd[6];
    for (int i = 0; i < 6; i++) hd[i] = head[i];
    CHECK_NEAR(logp, ref_squash(3, hd, eps, lo, hi, NULL), 1e-5);
    /* logp may be NULL, and the action is the same */
    float act2[3];
    sac_squashed_sample(3, head, eps, lo, hi, act2, NULL);
    CHECK(memcmp(act, act2, sizeof act) == 0);

    /* the clamp: log_std_raw 7 acts as 2, -9 as -5 */
    const float hc[4] = {0.0f, 0.0f, 7.0f, -9.0f}, hc2[4] = {0.0f, 0.0f, 2.0f, -5.0f};
    const float e2[2] = {0.3f, -0.6f}, l2[2] = {-1, -1}, u2[2] = {1, 1};
    float a1[2], a2[2], lp1, lp2;
    sac_squashed_sample(2, hc, e2, l2, u2, a1, &lp1);
    sac_squashed_sample(2, hc2, e2, l2, u2, a2, &lp2);
    CHECK(memcmp(a1, a2, sizeof a1) == 0 && lp1 == lp2);

    /* deep saturation: tanh(x) is 1 in double, the log is log(1e-6), finite */
    const float hs[2] = {40.0f, 0.0f}, es[1] = {0.0f}, ls[1] = {-2.0f}, us[1] = {2.0f};
    float as, lps;
    sac_squashed_sample(1, hs, es, ls, us, &as, &lps);
    CHECK(as == 2.0f);
    CHECK_NEAR(lps, -0.5 * LOG_2PI - log(1e-6), 1e-5);
    CHECK(isfinite(lps));

    /* greedy: scale * tanh(mu) + bias, whatever log_std is */
    float g[3];
    sac_squashed_greedy(3, head, lo, hi, g);
    CHECK_NEAR(g[0], 2.0 * tanh(0.3), 1e-6);
    CHECK_NEAR(g[1], 0.5 * tanh(-0.7) + 0.5, 1e-7);
    CHECK_NEAR(g[2], 2.0 * tanh(4.5) + 1.0, 1e-6);
    /* the same function as the sample with zero noise */
    const float zero[3] = {0, 0, 0};
    sac_squashed_sample(3, head, zero, lo, hi, act2, NULL);
    CHECK(memcmp(g, act2, sizeof g) == 0);
    /* actions stay inside the bounds */
    for (int i = 0; i < 3; i++) CHECK(act[i] >= lo[i] && act[i] <= hi[i]);
}

/* sum_i ga_i action_i + gl logp in double */
static double squash_probe(int A, const double *head, const float *eps, const float *lo,
                           const float *hi, const float *ga, float gl) {
    double act[8];
    double lp = ref_squash(A, head, eps, lo, hi, act);
    double s = gl * lp;
    for (int i = 0; i < A; i++) s += ga[i] * act[i];
    return s;
}

static void check_squash_fd(int A, const float *head, const float *eps, const float *lo,
                            const float *hi, const float *ga, float gl) {
    float dh[8];
    sac_squashed_backward(A, head, eps, lo, hi, ga, gl, dh);
    double hd[8];
    for (int j = 0; j < 2 * A; j++) hd[j] = head[j];
    for (int j = 0; j < 2 * A; j++) {
        const double h = 1e-6;
        double save = hd[j];
        hd[j] = save + h;
        double fp = squash_probe(A, hd, eps, lo, hi, ga, gl);
        hd[j] = save - h;
        double fm = squash_probe(A, hd, eps, lo, hi, ga, gl);
        hd[j] = save;
        double fd = (fp - fm) / (2 * h);
        CHECK_NEAR(dh[j], fd, 1e-5 + 1e-4 * fabs(fd));
    }
}

static void test_squash_backward_fd(void) {
    const float lo[3] = {-2.0f, 0.0f, -1.0f}, hi[3] = {2.0f, 1.0f, 3.0f};
    const float eps[3] = {0.5f, -1.2f, 0.8f};
    const float ga[3] = {0.7f, -1.3f, 0.4f};
    /* interior log-stds; one dim near saturation */
    const float h1[6] = {0.3f, -0.7f, 2.5f, -0.4f, 0.1f, -1.0f};
    check_squash_fd(3, h1, eps, lo, hi, ga, 0.6f);
    check_squash_fd(3, h1, eps, lo, hi, ga, -2.0f);
    check_squash_fd(3, h1, eps, lo, hi, ga, 0.0f);
    const float gz[3] = {0, 0, 0};
    check_squash_fd(3, h1, eps, lo, hi, gz, 1.0f); /* logp alone */
    /* clamped dims: log_std_raw 3 and -6 get no gradient (and FD agrees: flat there) */
    const float h2[6] = {-0.2f, 0.9f, 0.0f, 3.0f, -6.0f, 1.5f};
    check_squash_fd(3, h2, eps, lo, hi, ga, 0.8f);
    float dh[6];
    sac_squashed_backward(3, h2, eps, lo, hi, ga, 0.8f, dh);
    CHECK(dh[3] == 0.0f && dh[4] == 0.0f && dh[5] != 0.0f);
    /* on a bound the gradient passes (PyTorch's clamp): the same as just inside it */
    const float h3[2] = {0.1f, 2.0f}, h4[2] = {0.1f, 2.0f - 1e-7f};
    const float e1[1] = {0.3f}, l1[1] = {-2.0f}, u1[1] = {2.0f}, g1[1] = {1.0f};
    float d3[2], d4[2];
    sac_squashed_backward(1, h3, e1, l1, u1, g1, 0.5f, d3);
    sac_squashed_backward(1, h4, e1, l1, u1, g1, 0.5f, d4);
    CHECK(d3[1] != 0.0f);
    CHECK_NEAR(d3[1], d4[1], 1e-5);
    /* the logp-only gradient of log_std_raw by hand: d/dls (-ls) = -1 plus the squash term */
    const float h5[2] = {0.0f, -1.0f}, e5[1] = {0.0f};
    sac_squashed_backward(1, h5, e5, l1, u1, gz, 1.0f, d4);
    CHECK_NEAR(d4[1], -1.0, 1e-7); /* eps = 0: x does not depend on log_std */
    CHECK_NEAR(d4[0], 0.0, 1e-7);  /* y = 0: the log term is flat in x */
}

/* ---- the actor chain: scale * (alpha logp - min(q1, q2)) with quadratic critics ---- */

static const double QC1[2][3] = {{0.8, -0.3, 0.2}, {-0.5, 0.6, -0.1}}; /* a^2, a, 1 */
static const double QC2[2][3] = {{-0.4, 0.9, 0.5}, {0.3, -0.2, 0.05}};

static double qf(const double c[2][3], const double *a) {
    double s = 0.0;
    for (int i = 0; i < 2; i++) s += c[i][0] * a[i] * a[i] + c[i][1] * a[i] + c[i][2];
    return s;
}

static double actor_chain(const double *head, const float *eps, const float *lo,
                          const float *hi, double alpha, double scale) {
    double a[2];
    double lp = ref_squash(2, head, eps, lo, hi, a);
    double q1 = qf(QC1, a), q2 = qf(QC2, a);
    return scale * (alpha * lp - fmin(q1, q2));
}

static void test_actor_chain_fd(void) {
    const float lo[2] = {-2.0f, -1.0f}, hi[2] = {2.0f, 1.0f};
    const float alpha = 0.2f, scale = 0.25f;
    const float heads[][4] = {{0.3f, -0.5f, -0.4f, 0.2f}, {-1.1f, 0.7f, 0.5f, -1.5f},
                              {0.0f, 0.2f, 2.5f, -7.0f}};
    const float eps[2] = {0.6f, -0.9f};
    int which_min[2] = {0, 0};
    for (size_t c = 0; c < sizeof heads / sizeof heads[0]; c++) {
        const float *head = heads[c];
        float act[2], logp;
        sac_squashed_sample(2, head, eps, lo, hi, act, &logp);
        double ad[2] = {act[0], act[1]};
        float q1 = (float)qf(QC1, ad), q2 = (float)qf(QC2, ad);
        sac_actor_result res;
        sac_actor_loss(logp, q1, q2, alpha, scale, &res);
        CHECK_NEAR(res.loss, alpha * (double)logp - fmin(q1, q2), 1e-6);
        which_min[q1 <= q2 ? 0 : 1]++;
        /* dL/da through whichever critic is the min */
        float da[2];
        for (int i = 0; i < 2; i++)
            da[i] = (float)(res.dq1 * (2 * QC1[i][0] * ad[i] + QC1[i][1]) +
                            res.dq2 * (2 * QC2[i][0] * ad[i] + QC2[i][1]));
        float dh[4];
        sac_squashed_backward(2, head, eps, lo, hi, da, res.dlogp, dh);
        double hd[4];
        for (int j = 0; j < 4; j++) hd[j] = head[j];
        for (int j = 0; j < 4; j++) {
            const double h = 1e-6;
            double save = hd[j];
            hd[j] = save + h;
            double fp = actor_chain(hd, eps, lo, hi, alpha, scale);
            hd[j] = save - h;
            double fm = actor_chain(hd, eps, lo, hi, alpha, scale);
            hd[j] = save;
            double fd = (fp - fm) / (2 * h);
            CHECK_NEAR(dh[j], fd, 1e-5 + 1e-4 * fabs(fd));
        }
    }
    /* the cases exercise both critics as the min */
    CHECK(which_min[0] > 0 && which_min[1] > 0);
}

/* ---- critic, actor and temperature losses ---- */

static void test_td_target(void) {
    /* r + gamma (min(q1', q2') - alpha logp') */
    float y = sac_td_target(1.5f, 0.99f, 0, 2.0f, 1.25f, 0.2f, -0.8f);
    CHECK_NEAR(y, 1.5 + 0.99f * (1.25 + 0.2f * 0.8f), 1e-6);
    y = sac_td_target(1.5f, 0.99f, 0, 0.5f, 1.25f, 0.2f, -0.8f); /* q1' is the min */
    CHECK_NEAR(y, 1.5 + 0.99f * (0.5 + 0.2f * 0.8f), 1e-6);
    /* terminated: the reward alone, even against an infinite or NaN bootstrap */
    CHECK(sac_td_target(-3.0f, 0.99f, 1, INFINITY, NAN, 0.2f, NAN) == -3.0f);
    CHECK(sac_td_target_value(-3.0f, 0.99f, 1, NAN) == -3.0f);
    CHECK_NEAR(sac_td_target_value(0.5f, 0.9f, 0, 2.0f), 0.5 + 0.9f * 2.0, 1e-6);
    /* the anchor's target: r + gamma (min - alpha logp) with alpha = exp(0) = 1 */
    CHECK_NEAR(sac_td_target(-4.0f, 0.99f, 0, -30.0f, -31.0f, 1.0f, 0.7f),
               -4.0 + 0.99f * (-31.0 - 0.7f), 1e-4);
}

static void test_critic_loss(void) {
    float dq;
    float l = sac_critic_loss(2.5f, 1.0f, 0.125f, &dq);
    CHECK_NEAR(l, 0.5 * 1.5 * 1.5, 1e-7);
    CHECK_NEAR(dq, 0.125 * 1.5, 1e-8);
    /* d(scale * loss)/dq by finite differences */
    const float q = -0.7f, y = 0.45f, s = 0.5f, h = 1e-2f; /* exact for a quadratic */
    float dummy;
    double fp = sac_critic_loss(q + h, y, s, &dummy), fm = sac_critic_loss(q - h, y, s, &dummy);
    double fd = s * (fp - fm) / ((double)(q + h) - (double)(q - h));
    sac_critic_loss(q, y, s, &dq);
    CHECK_NEAR(dq, fd, 1e-5);
    CHECK(sac_critic_loss(1.0f, 1.0f, 1.0f, &dq) == 0.0f && dq == 0.0f);
}

static void test_actor_loss(void) {
    sac_actor_result r;
    sac_actor_loss(-1.5f, 3.0f, 2.0f, 0.2f, 0.5f, &r);
    CHECK_NEAR(r.loss, 0.2f * -1.5 - 2.0, 1e-6);
    CHECK_NEAR(r.dlogp, 0.5 * 0.2f, 1e-8);
    CHECK(r.dq1 == 0.0f && r.dq2 == -0.5f);
    sac_actor_loss(-1.5f, 1.0f, 2.0f, 0.2f, 0.5f, &r);
    CHECK(r.dq1 == -0.5f && r.dq2 == 0.0f);
    CHECK_NEAR(r.loss, 0.2f * -1.5 - 1.0, 1e-6);
    /* a tie goes to q1 */
    sac_actor_loss(0.0f, 2.0f, 2.0f, 1.0f, 1.0f, &r);
    CHECK(r.dq1 == -1.0f && r.dq2 == 0.0f);
    /* finite differences in logp and in the min critic */
    const double h = 1e-3;
    sac_actor_result p, m;
    sac_actor_loss(0.3f, -1.0f, 0.5f, 0.7f, 0.25f, &r);
    sac_actor_loss((float)(0.3 + h), -1.0f, 0.5f, 0.7f, 0.25f, &p);
    sac_actor_loss((float)(0.3 - h), -1.0f, 0.5f, 0.7f, 0.25f, &m);
    double fd = 0.25 * ((double)p.loss - m.loss) / ((double)(float)(0.3 + h) - (float)(0.3 - h));
    CHECK_NEAR(r.dlogp, fd, 1e-5);
    sac_actor_loss(0.3f, (float)(-1.0 + h), 0.5f, 0.7f, 0.25f, &p);
    sac_actor_loss(0.3f, (float)(-1.0 - h), 0.5f, 0.7f, 0.25f, &m);
    fd = 0.25 * ((double)p.loss - m.loss) / ((double)(float)(-1.0 + h) - (float)(-1.0 - h));
    CHECK_NEAR(r.dq1, fd, 1e-5);
    CHECK(r.dq2 == 0.0f);
}

static void test_alpha_loss(void) {
    float g;
    /* -log_alpha (logp + target_entropy) */
    float l = sac_alpha_loss(0.3f, -0.4f, -1.0f, 0.5f, &g);
    CHECK_NEAR(l, -0.3f * (-0.4f - 1.0), 1e-6);
    CHECK_NEAR(g, -0.5 * (-0.4f - 1.0), 1e-7);
    /* the anchor: alo = -(log_alpha * (lp - 1)) with target entropy -1 */
    l = sac_alpha_loss(-0.25f, 2.0f, -1.0f, 1.0f, &g);
    CHECK_NEAR(l, -(-0.25 * (2.0 - 1.0)), 1e-7);
    CHECK_NEAR(g, -(2.0 - 1.0), 1e-7);
    /* finite differences in log_alpha */
    const float la = 0.1f, lp = 0.8f, te = -2.0f, s = 0.125f, h = 1e-2f;
    float gp, gm;
    sac_alpha_loss(la, lp, te, s, &g);
    double fd = s * ((double)sac_alpha_loss(la + h, lp, te, s, &gp) -
                     sac_alpha_loss(la - h, lp, te, s, &gm)) /
                ((double)(la + h) - (double)(la - h));
    CHECK_NEAR(g, fd, 1e-5);
    /* entropy (-logp) below the target: a descent step raises alpha; above it, lowers */
    sac_alpha_loss(0.0f, 3.0f, -1.0f, 1.0f, &g);
    CHECK(g < 0.0f);
    sac_alpha_loss(0.0f, -3.0f, -1.0f, 1.0f, &g);
    CHECK(g > 0.0f);
}

/* ---- discrete SAC ---- */

static void test_discrete_policy(void) {
    const float q[4] = {1.0f, 2.5f, -0.5f, 2.0f};
    const float alpha = 0.5f;
    float p[4], lp[4];
    sac_discrete_policy(4, q, alpha, p, lp);
    double z[4], s = 0.0;
    for (int a = 0; a < 4; a++) s += exp(z[a] = q[a] / 0.5);
    double psum = 0.0, h = 0.0;
    for (int a = 0; a < 4; a++) {
        CHECK_NEAR(p[a], exp(z[a]) / s, 1e-7);
        CHECK_NEAR(lp[a], z[a] - log(s), 1e-6);
        psum += p[a];
        h -= exp(z[a]) / s * (z[a] - log(s));
    }
    CHECK_NEAR(psum, 1.0, 1e-6);
    CHECK_NEAR(sac_discrete_entropy(4, q, alpha), h, 1e-6);
    /* either output may be NULL, with the same bits in the other */
    float p2[4], lp2[4];
    sac_discrete_policy(4, q, alpha, p2, NULL);
    sac_discrete_policy(4, q, alpha, NULL, lp2);
    CHECK(memcmp(p, p2, sizeof p) == 0 && memcmp(lp, lp2, sizeof lp) == 0);
    /* stable: huge Q over a tiny alpha (exp would overflow without the max) */
    const float big[3] = {1000.0f, 999.0f, -1000.0f};
    sac_discrete_policy(3, big, 0.01f, p, lp);
    CHECK(isfinite(lp[0]) && isfinite(lp[1]) && isfinite(lp[2]));
    CHECK_NEAR(p[0], 1.0, 1e-7);
    CHECK_NEAR(lp[1], -100.0, 1e-3);
    CHECK(p[2] == 0.0f);
    CHECK(isfinite(sac_discrete_entropy(3, big, 0.01f)));
    /* uniform Q: uniform policy, entropy log n */
    const float flat[5] = {0.3f, 0.3f, 0.3f, 0.3f, 0.3f};
    CHECK_NEAR(sac_discrete_entropy(5, flat, 0.7f), log(5.0), 1e-6);
    /* alpha large: near uniform; small: near greedy */
    CHECK_NEAR(sac_discrete_entropy(4, q, 1e4f), log(4.0), 1e-6);
    CHECK(sac_discrete_entropy(4, q, 1e-3f) < 1e-6);
}

static void test_discrete_next_value(void) {
    const float q[3] = {0.4f, -0.2f, 1.1f};
    const float q1t[3] = {2.0f, 1.0f, -0.5f}, q2t[3] = {1.5f, 1.2f, 0.25f};
    const float alpha = 0.3f;
    double z[3], s = 0.0;
    for (int a = 0; a < 3; a++) s += exp(z[a] = q[a] / 0.3);
    double want = 0.0, h = 0.0;
    for (int a = 0; a < 3; a++) {
        double p = exp(z[a]) / s, lp = z[a] - log(s);
        want += p * (fmin(q1t[a], q2t[a]) - 0.3 * lp);
        h -= p * lp;
    }
    float v = sac_discrete_next_value(3, q, alpha, q1t, q2t);
    CHECK_NEAR(v, want, 1e-6);
    /* = E_pi[min Q'] + alpha H (ALF's target critic plus its entropy reward) */
    double eq = 0.0;
    for (int a = 0; a < 3; a++) eq += exp(z[a]) / s * fmin(q1t[a], q2t[a]);
    CHECK_NEAR(v, eq + 0.3 * h, 1e-6);
    CHECK_NEAR(v, eq + alpha * (double)sac_discrete_entropy(3, q, alpha), 1e-6);
    /* the TD target from it */
    float y = sac_td_target_value(0.5f, 0.99f, 0, v);
    CHECK_NEAR(y, 0.5 + 0.99f * (double)v, 1e-6);
    /* a zero-probability action's infinite target Q does not poison the value */
    const float qz[2] = {0.0f, -1e4f};
    const float t1[2] = {1.0f, -INFINITY}, t2[2] = {1.0f, -INFINITY};
    CHECK_NEAR(sac_discrete_next_value(2, qz, 0.01f, t1, t2), 1.0, 1e-6);
}

static void test_discrete_losses(void) {
    const float q[3] = {0.4f, -0.2f, 1.1f};
    float dq[3] = {9, 9, 9};
    float l = sac_discrete_critic_loss(3, q, 1, 0.8f, 0.25f, dq);
    CHECK_NEAR(l, 0.5 * 1.0 * 1.0, 1e-6);
    CHECK(dq[0] == 0.0f && dq[2] == 0.0f);
    CHECK_NEAR(dq[1], 0.25 * (-0.2f - 0.8f), 1e-7);
    /* finite differences over the whole row: only the taken action's Q moves the loss */
    for (int j = 0; j < 3; j++) {
        float qp[3] = {q[0], q[1], q[2]}, qm[3] = {q[0], q[1], q[2]}, d[3];
        const float h = 1e-3f;
        qp[j] += h;
        qm[j] -= h;
        double fd = 0.25 *
                    ((double)sac_discrete_critic_loss(3, qp, 1, 0.8f, 0.25f, d) -
                     sac_discrete_critic_loss(3, qm, 1, 0.8f, 0.25f, d)) /
                    ((double)qp[j] - (double)qm[j]);
        CHECK_NEAR(dq[j], fd, 1e-5);
    }
    /* temperature: logp replaced by -H */
    float g, g2;
    float la = 0.2f, H = 0.9f, te = 0.5f;
    l = sac_discrete_alpha_loss(la, H, te, 0.5f, &g);
    CHECK_NEAR(l, -0.2f * (-0.9f + 0.5f), 1e-7);
    CHECK_NEAR(g, 0.5 * (0.9f - 0.5f), 1e-7);
    float l2 = sac_alpha_loss(la, -H, te, 0.5f, &g2);
    CHECK(l == l2 && g == g2);
    const float h = 1e-2f;
    float gp;
    double fd = 0.5 *
                ((double)sac_discrete_alpha_loss(la + h, H, te, 0.5f, &gp) -
                 sac_discrete_alpha_loss(la - h, H, te, 0.5f, &gp)) /
                ((double)(la + h) - (double)(la - h));
    CHECK_NEAR(g, fd, 1e-5);
}

static void test_discrete_sample_greedy(void) {
    const float q[4] = {1.0f, 2.5f, -0.5f, 2.5f};
    const float alpha = 0.5f;
    float p[4];
    sac_discrete_policy(4, q, alpha, p, NULL);
    /* u just below / at the cumulative bounds */
    double c0 = p[0], c1 = c0 + p[1];
    CHECK_INT_EQ(sac_discrete_sample(4, q, alpha, 0.0), 0);
    CHECK_INT_EQ(sac_discrete_sample(4, q, alpha, c0 * 0.999), 0);
    CHECK_INT_EQ(sac_discrete_sample(4, q, alpha, c0 * 1.001), 1);
    CHECK_INT_EQ(sac_discrete_sample(4, q, alpha, c1 * 1.0001), 2);
    CHECK_INT_EQ(sac_discrete_sample(4, q, alpha, 0.9999999), 3);
    CHECK_INT_EQ(sac_discrete_sample(4, q, alpha, 1.0), 3); /* rounding guard */
    /* the frequencies over a fine grid of u follow pi */
    int count[4] = {0};
    const int N = 100000;
    for (int k = 0; k < N; k++) count[sac_discrete_sample(4, q, alpha, (k + 0.5) / N)]++;
    for (int a = 0; a < 4; a++) CHECK_NEAR(count[a] / (double)N, p[a], 2.0 / N);
    /* greedy: the lowest index on ties */
    CHECK_INT_EQ(sac_discrete_greedy(4, q), 1);
    const float one[1] = {-3.0f};
    CHECK_INT_EQ(sac_discrete_greedy(1, one), 0);
    CHECK_INT_EQ(sac_discrete_sample(1, one, 0.1f, 0.7), 0);
}

/* ---- Polyak ---- */

static void test_polyak(void) {
    enum { N = 37 };
    float t[N], p[N], t0[N];
    for (int i = 0; i < N; i++) {
        t0[i] = t[i] = 0.37f * (float)i - 5.0f;
        p[i] = 1.0f / (float)(i + 1) - 0.3f * (float)(i % 5);
    }
    const float tau = 0.005f;
    sac_polyak_update(t, p, N, tau);
    const float keep = 1.0f - tau;
    for (int i = 0; i < N; i++) {
        volatile float a = keep * t0[i], b = tau * p[i]; /* each product rounded */
        float want = a + b;
        CHECK(t[i] == want);
        CHECK_NEAR(t[i], (1.0 - tau) * t0[i] + (double)tau * p[i], 1e-5);
    }
    /* an element's result depends on it alone: a sub-range gives the same bits */
    float u[N];
    memcpy(u, t0, sizeof u);
    sac_polyak_update(u + 3, p + 3, 11, tau);
    sac_polyak_update(u, p, 3, tau);
    sac_polyak_update(u + 14, p + 14, N - 14, tau);
    CHECK(memcmp(u, t, sizeof u) == 0);
    /* tau = 1: a hard copy; tau = 0: unchanged */
    memcpy(u, t0, sizeof u);
    sac_polyak_update(u, p, N, 1.0f);
    CHECK(memcmp(u, p, sizeof u) == 0);
    memcpy(u, t0, sizeof u);
    sac_polyak_update(u, p, N, 0.0f);
    CHECK(memcmp(u, t0, sizeof u) == 0);
    /* repeated updates converge to the parameters */
    memcpy(u, t0, sizeof u);
    for (int k = 0; k < 3000; k++) sac_polyak_update(u, p, N, 0.01f);
    for (int i = 0; i < N; i++) CHECK_NEAR(u[i], p[i], 1e-4 * (1 + fabs(t0[i])));
    sac_polyak_update(u, p, 0, 0.5f); /* n = 0 is a no-op */
}

int main(void) {
    test_squash_values();
    test_squash_backward_fd();
    test_actor_chain_fd();
    test_td_target();
    test_critic_loss();
    test_actor_loss();
    test_alpha_loss();
    test_discrete_policy();
    test_discrete_next_value();
    test_discrete_losses();
    test_discrete_sample_greedy();
    test_polyak();
    return test_report("test_sac_math");
}
