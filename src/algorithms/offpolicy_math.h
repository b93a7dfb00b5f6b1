/* offpolicy_math.h: the per-sample arithmetic the replay-based algorithms share or own
 * beside SAC's (sac_math.h, which builds on this): the affine map of tanh onto the action
 * bounds, the one-step TD target, Polyak and hard target updates, the squared and Huber
 * TD losses, TD3's and DDPG's deterministic tanh actor and TD3's target policy smoothing,
 * DQN's linear epsilon schedule, and DDPG's Ornstein-Uhlenbeck noise. Pure functions
 * with the formula in the comment; the caller supplies every random draw. */
#ifndef CALF_OFFPOLICY_MATH_H
#define CALF_OFFPOLICY_MATH_H

#include <stddef.h>
#include <stdint.h>

/* Arithmetic: float inputs widened to double, the formula evaluated in double (cm_tanh for
 * tanh), each output rounded to float once, unless a comment says otherwise. */

/* The affine map of tanh's (-1, 1) onto [lo, hi] that every squashed or tanh action
 * takes (SAC's, TD3's, DDPG's):
 *   scale = (hi - lo) * 0.5, bias = (hi + lo) * 0.5, in double from the float bounds. */
void offpolicy_squash_affine(float lo, float hi, double *scale, double *bias);

/* The one-step TD target (no gradient flows into it):
 *   y = r + (terminated ? 0 : gamma * next_value)
 * A terminated step drops the bootstrap entirely, so an inf or NaN there cannot leak in. */
float offpolicy_td_target(float reward, float gamma, uint8_t terminated, float next_value);

/* Polyak averaging over n flat floats, element by element in float:
 *   target[i] = (1 - tau) * target[i] + tau * param[i]
 * (1 - tau) rounded to float once; the two products each rounded, then added (no fused
 * multiply-add: the build compiles with -ffp-contract=off). */
void offpolicy_polyak_update(float *target,      /* (n) */
                             const float *param, /* (n) */
                             size_t n, float tau);

/* A target network's update: a copy where tau is 1 (a hard update, DQN's), else
 * offpolicy_polyak_update. */
void offpolicy_target_update(float *target, const float *param, size_t n, float tau);

/* The TD losses of one prediction q against its target y, d = q - y (returned unscaled:
 * sum and divide for a mean), and *dq = scale * d(loss)/dq:
 *   squared (PyTorch's mse_loss, CleanRL's): d^2,             dq = scale * 2 d
 *   Huber (smooth_l1_loss, delta 1):  0.5 d^2 where |d| <= 1, dq = scale * d
 *                                     |d| - 0.5 elsewhere,    dq = scale * sign(d) */
float offpolicy_mse_loss(float q, float target, float scale, float *dq);
float offpolicy_huber_loss(float q, float target, float scale, float *dq);

/* ---- deterministic actors (TD3, DDPG) ----
 * The actor's output row x (A) maps onto the bounds as CleanRL's Actor does:
 *   action_i = scale_i tanh(x_i) + bias_i,  scale_i = (hi_i - lo_i) / 2, bias_i = (hi_i + lo_i) / 2
 * (offpolicy_squash_affine's scale and bias, as SAC's greedy action takes them). */
void offpolicy_tanh_action(int A, const float *x, /* (A) */
                           const float *lo, const float *hi, /* (A) each */
                           float *action);                    /* (A) out */
/* Backward of L(action) through it: dx_i = daction_i scale_i (1 - tanh(x_i)^2). WRITES dx. */
void offpolicy_tanh_action_backward(int A, const float *x, const float *lo, const float *hi,
                                    const float *daction, /* (A) */
                                    float *dx);           /* (A) out */
/* Exploration around a deterministic action (TD3 and DDPG): per dim
 *   out_i = clamp(action_i + noise_i, lo_i, hi_i)
 * with noise already scaled (CleanRL: normal(0, scale_i * exploration_noise)). */
void offpolicy_explore(int A, const float *action, const float *noise, const float *lo,
                       const float *hi, float *out);
/* TD3's target policy smoothing (Fujimoto et al. 2018, CleanRL's td3_continuous_action):
 *   a'_i = clamp(target_action_i + clamp(eps_i * policy_noise, -noise_clip, noise_clip)
 *                * scale_i, lo_i, hi_i)
 * eps standard normals (the sample's own stream). */
void offpolicy_smoothed_action(int A, const float *target_action, const float *eps,
                               float policy_noise, float noise_clip, const float *lo,
                               const float *hi, float *out);

/* ---- DQN ----
 * CleanRL's linear_schedule: epsilon at env step t (the job's, counted from 0) of a decay
 * over `duration` steps from start to end, then end:
 *   slope = (end - start) / duration;  eps = max(slope * t + start, end)
 * (duration <= 0: end at once). In double. */
double offpolicy_linear_epsilon(double start, double end, int64_t duration, int64_t t);
/* max_a q_a over n actions (n >= 1) and its lowest index on ties (*arg, may be NULL). */
float offpolicy_max_q(int n, const float *q /* (n) */, int *arg);

/* ---- DDPG ----
 * One step of Ornstein-Uhlenbeck noise per dim (ALF's OUProcess, after tf_agents'):
 *   x_i = (1 - damping) x_i + stddev n_i
 * n standard normals. In float: (1 - damping) rounded once, the two products each
 * rounded, then added. */
void offpolicy_ou_step(int A, float *x, /* (A) in/out */ const float *n, float damping,
                       float stddev);

#endif
