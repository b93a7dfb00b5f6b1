/* ppo_math.h: the per-sample arithmetic of PPO: one sample's clipped-surrogate + value +
 * entropy loss with its gradients, so the trainer can backprop env by env (the advantages
 * it takes are the on-policy core's GAE, onpolicy_math.h). */
#ifndef CALF_PPO_MATH_H
#define CALF_PPO_MATH_H

/* PPOLoss's weights, and the scale the gradients are of. */
typedef struct ppo_loss_weights {
    float clip;       /* importance_ratio_clipping: the ratio's eps */
    float value_clip; /* value_clipping: the value's move from the rollout's (0: off) */
    float td_w;       /* td_loss_weight */
    float ent_w;      /* entropy_regularization */
    float scale;      /* 1 / samples in the minibatch */
} ppo_loss_weights;

/* One sample's PPO loss. The values are per sample and unscaled (sum them and divide
 * by the sample count for a mean); the gradients are of scale * loss. */
typedef struct ppo_sample_result {
    float pg_loss;   /* -min(r A, clip(r, 1-eps, 1+eps) A), r = exp(new_logp - old_logp) */
    float td_loss;   /* td_loss_weight * 0.5 (value - return)^2; with value_clip c > 0,
                      * td_loss_weight * 0.5 max((value - return)^2, (vc - return)^2),
                      * vc = old_value + clip(value - old_value, -c, c) (CleanRL's
                      * clip_vloss, gymnax-blines') */
    float loss;      /* pg_loss + td_loss - entropy_regularization * entropy */
    float ratio;     /* r */
    float clipped;   /* 1 when |r - 1| > eps (the clip-fraction indicator), else 0 */
    float approx_kl; /* (r - 1) - log r, a non-negative estimate of KL(old || new) */
    float dlogp;     /* d(scale * loss) / d new_logp */
    float dentropy;  /* d(scale * loss) / d entropy = -scale * entropy_regularization */
    float dvalue;    /* d(scale * loss) / d value */
} ppo_sample_result;

/* adv is the (already normalised, if enabled) advantage; old_value the value the rollout
 * computed (read only when w->value_clip > 0). Where the surrogate's min is a tie, or r
 * sits on a clip bound, the gradient is the unclipped one (PyTorch's convention for min
 * and clamp), and so is the value loss's where its max is a tie or value - old_value sits
 * on a clip bound. With value_clip 0 the value loss is computed exactly as before the
 * option existed. */
void ppo_sample_loss(float new_logp, float old_logp, float adv, float entropy, float value,
                     float old_value, float ret, const ppo_loss_weights *w,
                     ppo_sample_result *out);

#endif
