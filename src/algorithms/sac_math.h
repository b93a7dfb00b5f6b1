/* sac_math.h: the per-sample arithmetic of Soft Actor-Critic (Haarnoja et al. 2018, as
 * ALF's SacAlgorithm arranges it): the tanh-squashed Gaussian policy with its
 * reparameterised backward, the critic, actor and temperature losses, discrete SAC's
 * policy softmax(Q / alpha), and the Polyak update of target networks. Pure functions;
 * each row's result depends on that row's inputs alone, never on the batch around it. */
#ifndef CALF_SAC_MATH_H
#define CALF_SAC_MATH_H

#include <stddef.h>
#include <stdint.h>

/* Arithmetic (part of the result, like the seed): every function below widens its float
 * inputs to double, evaluates the formula in its comment in double with calf's cm_exp,
 * cm_log and cm_tanh (base/cmath.h; double ones: near saturation 1 - y^2 needs more than a float y holds),
 * sums over action dimensions or actions in ascending index order into one double
 * accumulator, and rounds each output to float once, at the end. No function keeps
 * state, reads a global or draws a random number: the caller supplies the noise. */

/* ---- tanh-squashed diagonal Gaussian over A dims, scaled to [lo, hi] per dim ----
 *
 * A policy head row holds 2A floats: mu[0..A) then log_std_raw[0..A). Per dim i:
 *   log_std_i = clamp(log_std_raw_i, SAC_LOG_STD_MIN, SAC_LOG_STD_MAX)   (the anchor's
 *               clamp; ALF clips the same way inside clipped_exp)
 *   std_i = exp(log_std_i),  x_i = mu_i + std_i * eps_i,  y_i = tanh(x_i)
 *   scale_i = (hi_i - lo_i) / 2,  bias_i = (hi_i + lo_i) / 2,  action_i = scale_i y_i + bias_i
 *               (offpolicy_squash_affine, offpolicy_math.h)
 *   logp = sum_i [ (-0.5 eps_i^2 - log_std_i - 0.5 log(2 pi))
 *                  - log(scale_i (1 - y_i^2) + SAC_SQUASH_EPS) ]
 * eps are standard normals the caller draws; (x - mu) / std is written as eps itself.
 * The sum adds the bracket of dim 0, then dim 1, ... into one double. The 1e-6 inside
 * the log keeps it finite at saturation (the PyTorch anchor's form; ALF's StableTanh
 * has no epsilon). tanh here is cm_tanh, in double, for sampling, greedy actions and
 * backward alike. */
#define SAC_LOG_STD_MIN (-5.0f)
#define SAC_LOG_STD_MAX 2.0f
#define SAC_SQUASH_EPS 1e-6

/* action (A) and logp (may be NULL) of the reparameterised sample with noise eps. */
void sac_squashed_sample(int A,
                         const float *head,   /* (2A): mu, then log_std_raw */
                         const float *eps,    /* (A) standard normals */
                         const float *lo,     /* (A) action lower bounds */
                         const float *hi,     /* (A) action upper bounds */
                         float *action,       /* (A) out */
                         float *logp);        /* (1) out, or NULL */
/* The greedy action: action_i = (float)(scale_i tanh(mu_i) + bias_i), tanh cm_tanh,
 * in double. */
void sac_squashed_greedy(int A, const float *head, /* (2A) */
                         const float *lo, const float *hi, /* (A) each */
                         float *action);                    /* (A) out */
/* Backward of L(action, logp) through the sample above with eps held fixed:
 *   dL/dx_i = daction_i scale_i (1 - y_i^2)
 *           + dlogp * 2 scale_i y_i (1 - y_i^2) / (scale_i (1 - y_i^2) + SAC_SQUASH_EPS)
 *   dhead[i]     = dL/dmu_i = dL/dx_i
 *   dhead[A + i] = dL/dlog_std_raw_i = dL/dx_i std_i eps_i - dlogp
 *                  where SAC_LOG_STD_MIN <= log_std_raw_i <= SAC_LOG_STD_MAX, else 0
 *                  (PyTorch's clamp: the bounds themselves pass the gradient).
 * dhead is WRITTEN; it is the dy of the policy network's output layer. */
void sac_squashed_backward(int A,
                           const float *head,    /* (2A) */
                           const float *eps,     /* (A) */
                           const float *lo, const float *hi, /* (A) each */
                           const float *daction, /* (A) dL/daction */
                           float dlogp,          /* dL/dlogp */
                           float *dhead);        /* (2A) out */

/* ---- critic ----
 * TD target of one sample (no gradient flows into it):
 *   y = r + gamma * (min(q1_next, q2_next) - alpha * logp_next)   if not terminated
 *   y = r                                                         if terminated
 * (a terminated step drops the bootstrap entirely, so an inf or NaN there cannot leak
 * in; a truncated one bootstraps from the true next observation). q*_next are the
 * target critics at (next_obs, a'), a' and logp_next a fresh sample at next_obs. */
float sac_td_target(float reward, float gamma, uint8_t terminated, float q1_next,
                    float q2_next, float alpha, float logp_next);
/* The same with the soft next value already formed (discrete SAC's expectation):
 *   y = r + (terminated ? 0 : gamma * next_value) */
float sac_td_target_value(float reward, float gamma, uint8_t terminated, float next_value);
/* One critic's loss 0.5 (q - y)^2 (returned, unscaled: sum and divide for a mean) and
 * *dq = scale * (q - y), the gradient of scale * loss. Call once per critic. */
float sac_critic_loss(float q, float target, float scale, float *dq);

/* ---- actor and temperature ---- */
typedef struct sac_actor_result {
    float loss;  /* alpha * logp - min(q1, q2) (unscaled) */
    float dlogp; /* d(scale * loss)/d logp = scale * alpha */
    float dq1;   /* d(scale * loss)/d q1 = -scale if q1 <= q2 (ties go to q1), else 0 */
    float dq2;   /* -scale if q2 < q1, else 0 */
} sac_actor_result;
/* q1, q2 are the critics at (obs, the sampled action); alpha is a constant here. dq*
 * flow back through that critic to its action input (its parameters are not the actor
 * loss's to change) and on, with dlogp, into sac_squashed_backward. */
void sac_actor_loss(float logp, float q1, float q2, float alpha, float scale,
                    sac_actor_result *out);
/* ALF's temperature loss, -log_alpha * (logp + target_entropy) (returned, unscaled),
 * with logp held constant; *dlog_alpha = -scale * (logp + target_entropy). */
float sac_alpha_loss(float log_alpha, float logp, float target_entropy, float scale,
                     float *dlog_alpha);

/* ---- discrete SAC (ALF's sac_cart_pole: no actor network) ----
 * The policy is pi(a|s) = softmax(q / alpha) over n actions, where q is the row the
 * caller chooses: ALF uses min(Q1, Q2)(s, .) of the online critics. In double:
 *   z_a = q_a / alpha, m = max_a z_a, lse = m + log(sum_a exp(z_a - m)) (a ascending),
 *   log pi_a = z_a - lse, pi_a = exp(log pi_a). alpha > 0. */
void sac_discrete_policy(int n, const float *q, /* (n) */ float alpha,
                         float *probs,          /* (n) out, or NULL */
                         float *logp);          /* (n) out, or NULL */
/* H = -sum_a pi_a log pi_a (a ascending; terms with pi_a == 0 add nothing). */
float sac_discrete_entropy(int n, const float *q, /* (n) */ float alpha);
/* The soft value of the next state, the expectation ALF's entropy reward makes:
 *   V = sum_a pi_a (min(q1t_a, q2t_a) - alpha log pi_a)   (a ascending; a term with
 *       pi_a == 0 adds nothing)
 * with pi = softmax(q / alpha) of the policy row q at s', q1t, q2t the target critics
 * at s'. Feed it to sac_td_target_value. */
float sac_discrete_next_value(int n, const float *q,  /* (n) policy row at s' */
                              float alpha,
                              const float *q1t,       /* (n) */
                              const float *q2t);      /* (n) */
/* One critic's loss at the action taken: 0.5 (q_action - y)^2 (returned, unscaled);
 * dq (n) is WRITTEN: scale * (q_action - y) at the taken action, 0 at the others. */
float sac_discrete_critic_loss(int n, const float *q, /* (n) */ int action, float target,
                               float scale, float *dq /* (n) out */);
/* ALF's discrete temperature loss: logp replaced by -H (its expectation), so
 *   loss = -log_alpha * (-entropy + target_entropy), *dlog_alpha = scale * (entropy -
 * target_entropy), with the entropy held constant. */
float sac_discrete_alpha_loss(float log_alpha, float entropy, float target_entropy,
                              float scale, float *dlog_alpha);
/* Inverse CDF: the first a (ascending) with u < pi_0 + ... + pi_a (running double sum),
 * n - 1 if rounding leaves u above the total. u uniform in [0, 1). */
int sac_discrete_sample(int n, const float *q, /* (n) */ float alpha, double u);
/* argmax_a q_a, the lowest index on ties: the mode of softmax(q / alpha) for any alpha. */
int sac_discrete_greedy(int n, const float *q /* (n) */);

/* ---- target networks ----
 * Polyak averaging over n flat floats, element by element in float:
 *   target[i] = (1 - tau) * target[i] + tau * param[i]
 * (1 - tau) is rounded to float once; the two products are each rounded, then added
 * (no fused multiply-add: the build compiles with -ffp-contract=off). With finite
 * values tau = 1 gives param and tau = 0 keeps target (a zero's sign aside). */
void sac_polyak_update(float *target,      /* (n) */
                       const float *param, /* (n) */
                       size_t n, float tau);

#endif
