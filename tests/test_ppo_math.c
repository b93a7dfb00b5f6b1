/* test_ppo_math.c: the per-sample PPO loss against its definition in every clipping
 * regime, the value loss with value clipping in each branch of its max, and
 * finite-difference checks of the whole chain from logits (categorical) or mean and
 * log-std (Gaussian) to the loss, and of the clipped value loss. */
#include <stdbool.h>

#include "numerics/action_dist.h"
#include "algorithms/ppo_math.h"
#include "test_util.h"

/* ppo_sample_loss without value clipping, its weights as arguments */
static void sample_loss(float new_logp, float old_logp, float adv, float entropy, float value,
                        float ret, float eps, float td_w, float ent_w, float scale,
                        ppo_sample_result *res) {
    ppo_loss_weights w = {.clip = eps, .td_w = td_w, .ent_w = ent_w, .scale = scale};
    ppo_sample_loss(new_logp, old_logp, adv, entropy, value, 0.0f, ret, &w, res);
}

static void test_sample_loss_values(void) {
    ppo_sample_result res;
    const float eps = 0.2f;
    /* ratio inside the clip range */
    sample_loss(-1.0f, -1.1f, 2.0f, 0.6f, 0.5f, 1.5f, eps, 0.5f, 0.01f, 0.25f, &res);
    double r = exp(0.1);
    CHECK_NEAR(res.ratio, r, 1e-6);
    CHECK_NEAR(res.pg_loss, -r * 2.0, 1e-6);
    CHECK_NEAR(res.td_loss, 0.5 * 0.5 * 1.0, 1e-7);
    CHECK_NEAR(res.loss, -r * 2.0 + 0.25 - 0.01 * 0.6, 1e-6);
    CHECK(res.clipped == 0.0f);
    CHECK_NEAR(res.dlogp, 0.25 * -2.0 * r, 1e-6);
    CHECK_NEAR(res.dvalue, 0.25 * 0.5 * (0.5 - 1.5), 1e-7);
    CHECK_NEAR(res.dentropy, -0.25 * 0.01, 1e-9);
    CHECK_NEAR(res.approx_kl, (r - 1) - 0.1, 1e-7);
    /* A > 0, ratio above 1 + eps: the clipped term is the min, no gradient */
    sample_loss(0.0f, -0.5f, 1.0f, 0.0f, 0.0f, 0.0f, eps, 1.0f, 0.0f, 1.0f, &res);
    CHECK_NEAR(res.pg_loss, -1.2, 1e-6);
    CHECK(res.clipped == 1.0f);
    CHECK(res.dlogp == 0.0f);
    /* A < 0, ratio above 1 + eps: the unclipped term is the min, gradient flows */
    sample_loss(0.0f, -0.5f, -1.0f, 0.0f, 0.0f, 0.0f, eps, 1.0f, 0.0f, 1.0f, &res);
    r = exp(0.5);
    CHECK_NEAR(res.pg_loss, r, 1e-6);
    CHECK(res.clipped == 1.0f);
    CHECK_NEAR(res.dlogp, r, 1e-6);
    /* A < 0, ratio below 1 - eps: clipped, no gradient */
    sample_loss(-0.5f, 0.0f, -1.0f, 0.0f, 0.0f, 0.0f, eps, 1.0f, 0.0f, 1.0f, &res);
    CHECK_NEAR(res.pg_loss, 0.8, 1e-6);
    CHECK(res.dlogp == 0.0f);
    /* A > 0, ratio below 1 - eps: the unclipped term is the min, gradient flows */
    sample_loss(-0.5f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f, eps, 1.0f, 0.0f, 1.0f, &res);
    r = exp(-0.5);
    CHECK_NEAR(res.pg_loss, -r, 1e-6);
    CHECK_NEAR(res.dlogp, -r, 1e-6);
    CHECK(res.clipped == 1.0f);
    /* same logp: ratio exactly 1, no KL */
    sample_loss(-0.7f, -0.7f, 0.3f, 0.0f, 0.0f, 0.0f, eps, 1.0f, 0.0f, 1.0f, &res);
    CHECK(res.ratio == 1.0f && res.approx_kl == 0.0f && res.clipped == 0.0f);
}

/* scale * loss of a categorical policy with logits z, in double from the definition */
static double cat_chain_loss(const double *z, int n, int a, float old_logp, float adv,
                             float eps, float ent_w, float scale) {
    double m = z[0];
    for (int j = 1; j < n; j++) m = z[j] > m ? z[j] : m;
    double s = 0.0;
    for (int j = 0; j < n; j++) s += exp(z[j] - m);
    double lse = m + log(s), h = 0.0;
    for (int j = 0; j < n; j++) h -= exp(z[j] - lse) * (z[j] - lse);
    double r = exp((z[a] - lse) - old_logp);
    double rc = r < 1 - eps ? 1 - eps : (r > 1 + eps ? 1 + eps : r);
    double pg = -fmin(r * adv, rc * adv);
    return scale * (pg - ent_w * h);
}

static void test_chain_categorical_fd(void) {
    const float z[3] = {0.3f, -0.4f, 1.1f};
    const float eps = 0.2f, ent_w = 0.05f, scale = 0.125f;
    /* (old_logp offset, advantage): ratio inside the clip range; outside it with the
     * unclipped term the min (gradient flows); outside it clipped (no pg gradient) */
    const float cases[][2] = {{0.05f, 1.5f}, {-0.1f, -0.8f}, {0.6f, 1.0f}, {-0.6f, -1.0f},
                              {-0.6f, 1.0f}, {0.6f, -1.0f}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int a = 2;
        float logp, ent;
        dist_categorical_logp_entropy(z, 3, a, &logp, &ent);
        float old_logp = logp + cases[c][0], adv = cases[c][1];
        ppo_sample_result res;
        sample_loss(logp, old_logp, adv, ent, 0.0f, 0.0f, eps, 1.0f, ent_w, scale, &res);
        float g[3];
        dist_categorical_grad(z, 3, a, res.dlogp, res.dentropy, g);
        double zd[3];
        for (int j = 0; j < 3; j++) {
            for (int k = 0; k < 3; k++) zd[k] = z[k];
            const double h = 1e-6;
            zd[j] = z[j] + h;
            double fp = cat_chain_loss(zd, 3, a, old_logp, adv, eps, ent_w, scale);
            zd[j] = z[j] - h;
            double fm = cat_chain_loss(zd, 3, a, old_logp, adv, eps, ent_w, scale);
            double fd = (fp - fm) / (2 * h);
            CHECK_NEAR(g[j], fd, 1e-6 + 1e-4 * fabs(fd));
        }
        /* and the loss itself matches the definition */
        for (int k = 0; k < 3; k++) zd[k] = z[k];
        CHECK_NEAR(scale * res.loss, cat_chain_loss(zd, 3, a, old_logp, adv, eps, ent_w, scale),
                   1e-6);
    }
    /* the value head: d(scale * td_loss)/d value by finite differences */
    ppo_sample_result p, m;
    const float v = 0.7f, ret = -0.2f, w = 0.5f, h = 1e-3f;
    ppo_sample_result res;
    sample_loss(0.0f, 0.0f, 0.0f, 0.0f, v, ret, eps, w, 0.0f, scale, &res);
    sample_loss(0.0f, 0.0f, 0.0f, 0.0f, v + h, ret, eps, w, 0.0f, scale, &p);
    sample_loss(0.0f, 0.0f, 0.0f, 0.0f, v - h, ret, eps, w, 0.0f, scale, &m);
    double fd = scale * ((double)p.td_loss - m.td_loss) / ((double)(v + h) - (double)(v - h));
    CHECK_NEAR(res.dvalue, fd, 1e-6);
}

/* scale * loss of a Gaussian policy, in double */
static double gauss_chain_loss(const double *mu, const double *ls, const float *a, int d,
                               float old_logp, float adv, float eps, float ent_w, float scale) {
    const double log_2pi = 1.8378770664093454835606594728112;
    double lp = 0.0, h = 0.0;
    for (int i = 0; i < d; i++) {
        double z = (a[i] - mu[i]) / exp(ls[i]);
        lp += -0.5 * z * z - ls[i] - 0.5 * log_2pi;
        h += 0.5 + 0.5 * log_2pi + ls[i];
    }
    double r = exp(lp - old_logp);
    double rc = r < 1 - eps ? 1 - eps : (r > 1 + eps ? 1 + eps : r);
    return scale * (-fmin(r * adv, rc * adv) - ent_w * h);
}

static void test_chain_gaussian_fd(void) {
    const float mu[2] = {0.1f, -0.3f}, ls[2] = {-0.2f, 0.4f}, a[2] = {0.35f, -1.0f};
    const float eps = 0.2f, ent_w = 0.01f, scale = 0.5f;
    const float cases[][2] = {{0.1f, 0.9f}, {-0.05f, -1.3f}, {0.5f, 2.0f}, {-0.5f, 2.0f}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        float logp = dist_gaussian_log_prob(mu, ls, 2, a);
        float ent = dist_gaussian_entropy(ls, 2);
        float old_logp = logp + cases[c][0], adv = cases[c][1];
        ppo_sample_result res;
        sample_loss(logp, old_logp, adv, ent, 0.0f, 0.0f, eps, 1.0f, ent_w, scale, &res);
        float dmu[2], dls[2] = {0, 0};
        dist_gaussian_grad(mu, ls, 2, a, res.dlogp, res.dentropy, dmu, dls);
        double mud[2] = {mu[0], mu[1]}, lsd[2] = {ls[0], ls[1]};
        for (int i = 0; i < 2; i++) {
            const double h = 1e-6;
            double save = mud[i];
            mud[i] = save + h;
            double fp = gauss_chain_loss(mud, lsd, a, 2, old_logp, adv, eps, ent_w, scale);
            mud[i] = save - h;
            double fm = gauss_chain_loss(mud, lsd, a, 2, old_logp, adv, eps, ent_w, scale);
            mud[i] = save;
            double fd = (fp - fm) / (2 * h);
            CHECK_NEAR(dmu[i], fd, 1e-6 + 1e-4 * fabs(fd));
            save = lsd[i];
            lsd[i] = save + h;
            fp = gauss_chain_loss(mud, lsd, a, 2, old_logp, adv, eps, ent_w, scale);
            lsd[i] = save - h;
            fm = gauss_chain_loss(mud, lsd, a, 2, old_logp, adv, eps, ent_w, scale);
            lsd[i] = save;
            fd = (fp - fm) / (2 * h);
            CHECK_NEAR(dls[i], fd, 1e-6 + 1e-4 * fabs(fd));
        }
    }
}

/* scale * td_w * 0.5 max((v - R)^2, (vc - R)^2), vc = v_old + clip(v - v_old, -c, c): the
 * clipped value loss in double, from CleanRL's clip_vloss */
static double vclip_loss(double v, double v_old, double ret, double c, double td_w,
                         double scale) {
    double vc = v_old + fmin(fmax(v - v_old, -c), c);
    return scale * td_w * 0.5 * fmax((v - ret) * (v - ret), (vc - ret) * (vc - ret));
}

static void test_value_clipping(void) {
    const float td_w = 0.5f, scale = 0.25f, c = 0.2f;
    ppo_loss_weights w = {.clip = 0.2f, .value_clip = c, .td_w = td_w, .scale = scale};
    /* (v, v_old, R, which branch, d loss / d v by hand) */
    static const struct { float v, v_old, ret; double td, dv; } cases[] = {
        /* the unclipped error is the larger: the plain gradient (v - R) */
        {1.0f, 0.5f, 0.0f, 0.5 * 0.5 * 1.0, 0.25 * 0.5 * 1.0},
        /* v moved by 1.0 up, vc = 0.2 is further from R = 0.9: the clipped term, whose
         * value does not move with v: no gradient */
        {1.0f, 0.0f, 0.9f, 0.5 * 0.5 * (0.2 - 0.9) * (0.2 - 0.9), 0.0},
        /* the same below: vc = v_old - c = -0.2 is further from R = -0.8 than v = -1.0 */
        {-1.0f, 0.0f, -0.8f, 0.5 * 0.5 * 0.36, 0.0},
        /* v inside [v_old - c, v_old + c]: vc = v, one term, the plain gradient */
        {0.6f, 0.5f, 0.0f, 0.5 * 0.5 * 0.36, 0.25 * 0.5 * 0.6},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ppo_sample_result res;
        ppo_sample_loss(0.0f, 0.0f, 0.0f, 0.0f, cases[k].v, cases[k].v_old, cases[k].ret, &w,
                        &res);
        CHECK_NEAR(res.td_loss, cases[k].td, 1e-6);
        CHECK_NEAR(res.dvalue, cases[k].dv, 1e-7);
        CHECK_NEAR(res.loss, cases[k].td, 1e-6);
        /* and by central differences of the definition, in double */
        const double h = 1e-5, v = cases[k].v;
        double fd = (vclip_loss(v + h, cases[k].v_old, cases[k].ret, c, td_w, scale) -
                     vclip_loss(v - h, cases[k].v_old, cases[k].ret, c, td_w, scale)) / (2 * h);
        CHECK_NEAR(res.dvalue, fd, 1e-6);
        CHECK_NEAR(scale * res.td_loss,
                   vclip_loss(v, cases[k].v_old, cases[k].ret, c, td_w, scale), 1e-7);
    }
    /* a grid of v around v_old = 0.3 with R = 0.1 and R = 0.9: every branch, against
     * central differences (points within 1e-3 of a kink skipped) */
    int compared = 0;
    for (int ri = 0; ri < 2; ri++)
        for (int i = -40; i <= 40; i++) {
            float v_old = 0.3f, ret = ri ? 0.9f : 0.1f, v = v_old + 0.0251f * (float)i;
            double kinks[] = {v_old - c, v_old + c, 2.0 * ret - ((double)v_old + c),
                              2.0 * ret - ((double)v_old - c)};
            bool near = false;
            for (size_t q = 0; q < sizeof kinks / sizeof kinks[0]; q++)
                near |= fabs((double)v - kinks[q]) < 1e-3;
            if (near) continue;
            ppo_sample_result res;
            ppo_sample_loss(0.0f, 0.0f, 0.0f, 0.0f, v, v_old, ret, &w, &res);
            const double h = 1e-6;
            double fd = (vclip_loss((double)v + h, v_old, ret, c, td_w, scale) -
                         vclip_loss((double)v - h, v_old, ret, c, td_w, scale)) / (2 * h);
            CHECK_NEAR(res.dvalue, fd, 1e-6);
            compared++;
        }
    CHECK(compared > 150);
    /* value_clip 0: the old value is not read, and the loss is the unclipped one to the
     * bit */
    w.value_clip = 0.0f;
    ppo_sample_result a, b;
    ppo_sample_loss(0.0f, 0.0f, 0.0f, 0.0f, 0.7f, 123.0f, -0.2f, &w, &a);
    sample_loss(0.0f, 0.0f, 0.0f, 0.0f, 0.7f, -0.2f, 0.2f, td_w, 0.0f, scale, &b);
    double diff = 0.7f - (double)-0.2f;
    CHECK(a.td_loss == (float)((double)td_w * 0.5 * diff * diff));
    CHECK(a.dvalue == b.dvalue && a.td_loss == b.td_loss);
}

int main(void) {
    test_sample_loss_values();
    test_value_clipping();
    test_chain_categorical_fd();
    test_chain_gaussian_fd();
    return test_report("test_ppo_math");
}
