/* ppo_math.c: the per-sample PPO loss (see ppo_math.h). Scalars only, in double
 * internally, so the results depend on the inputs alone. */
#include "algorithms/ppo_math.h"

#include <math.h>

#include "base/cmath.h"

void ppo_sample_loss(float new_logp, float old_logp, float adv, float entropy, float value,
                     float old_value, float ret, const ppo_loss_weights *w,
                     ppo_sample_result *out) {
    double A = adv, eps = w->clip, scale = w->scale, td_w = w->td_w;
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
    double td = td_w * 0.5 * diff * diff, dtd = diff; /* dtd: d td / d value / td_w */
    if (w->value_clip > 0) {
        /* the clipped prediction's error dc = vc - R: where its square is the larger, the
         * loss is its, whose derivative in v is dc while v - v_old is inside [-c, c] (then
         * vc = v and the terms are equal, so this branch is not taken), else 0 */
        double c = w->value_clip, move = (double)value - (double)old_value;
        double mc = move < -c ? -c : (move > c ? c : move);
        double dc = (double)old_value + mc - (double)ret;
        if (dc * dc > diff * diff) {
            td = td_w * 0.5 * dc * dc;
            dtd = (move >= -c && move <= c) ? dc : 0.0;
        }
    }
    out->pg_loss = (float)pg;
    out->td_loss = (float)td;
    out->loss = (float)(pg + td - (double)w->ent_w * (double)entropy);
    out->ratio = (float)r;
    out->clipped = fabs(r - 1.0) > eps ? 1.0f : 0.0f;
    out->approx_kl = (float)((r - 1.0) - log_r);
    out->dlogp = (float)(scale * dpg);
    out->dentropy = (float)(-scale * (double)w->ent_w);
    out->dvalue = (float)(scale * td_w * dtd);
}
