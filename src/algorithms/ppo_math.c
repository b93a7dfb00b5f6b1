/* ppo_math.c: the per-sample PPO loss (see ppo_math.h). Scalars only, in double
 * internally, so the results depend on the inputs alone. */
#include "algorithms/ppo_math.h"

#include <math.h>

#include "base/cmath.h"

void ppo_sample_loss(float new_logp, float old_logp, float adv, float entropy, float value,
                     float ret, float clip_eps, float td_loss_weight,
                     float entropy_regularization, float scale, ppo_sample_result *out) {
    double A = adv, eps = clip_eps;
    double log_r = (double)new_logp - (double)old_logp;
    double r = cm_exp(log_r);
    double lo = 1.0 - eps, hi = 1.0 + eps;
    double rc = r < lo ? lo : (r > hi ? hi : r);
    double s1 = r * A, s2 = rc * A;
    double pg = -(s1 < s2 ? s1 : s2);
    /* d pg / d log r = -A r whenever the unclipped surrogate is the one selected, or the
     * clipped one still depends on r (r inside [lo, hi]); otherwise 0. */
    int pass = s1 <= s2 || (r >= lo && r <= hi);
    double dpg = pass ? -A * r : 0.0;
    double diff = (double)value - (double)ret;
    double td = (double)td_loss_weight * 0.5 * diff * diff;
    out->pg_loss = (float)pg;
    out->td_loss = (float)td;
    out->loss = (float)(pg + td - (double)entropy_regularization * (double)entropy);
    out->ratio = (float)r;
    out->clipped = fabs(r - 1.0) > eps ? 1.0f : 0.0f;
    out->approx_kl = (float)((r - 1.0) - log_r);
    out->dlogp = (float)((double)scale * dpg);
    out->dentropy = (float)(-(double)scale * (double)entropy_regularization);
    out->dvalue = (float)((double)scale * (double)td_loss_weight * diff);
}
