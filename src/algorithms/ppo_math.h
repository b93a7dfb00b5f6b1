/* ppo_math.h: the per-env and per-sample arithmetic of PPO: generalised advantage
 * estimation over one env's rollout, and one sample's clipped-surrogate + value +
 * entropy loss with its gradients, so the trainer can backprop env by env. */
#ifndef CALF_PPO_MATH_H
#define CALF_PPO_MATH_H

#include <stdint.h>

/* GAE (Schulman et al. 2016) for one env over T steps, computed in double, backwards:
 *   next = terminated[t] ? 0 : next_values[t]
 *   delta_t = rewards[t] + gamma * next - values[t]
 *   adv_t = delta_t + (ended[t] ? 0 : gamma * lambda * adv_{t+1}),  adv_T = 0
 *   returns[t] = adv_t + values[t]
 * values[t] = V(obs_t); next_values[t] = V(observation after step t): the episode's
 * final observation where it was truncated, values[t+1] inside an episode, and for
 * t = T-1 the value of the observation after the last step (ignored where
 * terminated). ended[t] = terminated or truncated: either cuts the chain; only
 * termination drops the bootstrap. */
void ppo_gae(int T,
             const float *rewards,       /* (T) */
             const float *values,        /* (T) */
             const float *next_values,   /* (T) */
             const uint8_t *terminated,  /* (T) */
             const uint8_t *ended,       /* (T) */
             float gamma, float lambda,
             float *advantages,          /* (T) out */
             float *returns);            /* (T) out */

/* One sample's PPO loss. The values are per sample and unscaled (sum them and divide
 * by the sample count for a mean); the gradients are of scale * loss. */
typedef struct ppo_sample_result {
    float pg_loss;   /* -min(r A, clip(r, 1-eps, 1+eps) A), r = exp(new_logp - old_logp) */
    float td_loss;   /* td_loss_weight * 0.5 (value - return)^2 */
    float loss;      /* pg_loss + td_loss - entropy_regularization * entropy */
    float ratio;     /* r */
    float clipped;   /* 1 when |r - 1| > eps (the clip-fraction indicator), else 0 */
    float approx_kl; /* (r - 1) - log r, a non-negative estimate of KL(old || new) */
    float dlogp;     /* d(scale * loss) / d new_logp */
    float dentropy;  /* d(scale * loss) / d entropy = -scale * entropy_regularization */
    float dvalue;    /* d(scale * loss) / d value */
} ppo_sample_result;

/* adv is the (already normalised, if enabled) advantage; scale is typically
 * 1 / minibatch size. Where the surrogate's min is a tie, or r sits on a clip bound,
 * the gradient is the unclipped one (PyTorch's convention for min and clamp). */
void ppo_sample_loss(float new_logp, float old_logp, float adv, float entropy, float value,
                     float ret, float clip_eps, float td_loss_weight,
                     float entropy_regularization, float scale, ppo_sample_result *out);

#endif
