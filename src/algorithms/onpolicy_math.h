/* onpolicy_math.h: the on-policy core's per-env arithmetic (onpolicy.h): generalised
 * advantage estimation over one env's rollout, the minibatch split, and the sums and
 * scale that normalize advantages, for any algorithm on the core (PPO's own loss is
 * ppo_math.h's). Pure functions with the formula in the comment, kept apart from the
 * core's storage so that a test reaches them alone. */
#ifndef CALF_ONPOLICY_MATH_H
#define CALF_ONPOLICY_MATH_H

#include <stddef.h>
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
void onpolicy_gae_advantages(int T,
                             const float *rewards,       /* (T) */
                             const float *values,        /* (T) */
                             const float *next_values,   /* (T) */
                             const uint8_t *terminated,  /* (T) */
                             const uint8_t *ended,       /* (T) */
                             float gamma, float lambda,
                             float *advantages,          /* (T) out */
                             float *returns);            /* (T) out */

/* Chunk m of T items split into M nearly equal chunks: [*off, *off + *len), the first
 * T % M chunks one longer. */
void onpolicy_chunk_range(int T, int M, int m, int *off, int *len);

/* One env's advantage sums over each of the M chunks of its shuffled timesteps (the
 * minibatches without a recurrent core): sums[2m] and sums[2m + 1] the sum and the sum of
 * squares of adv[perm[j] * stride] over j in chunk m of T (onpolicy_chunk_range), in
 * double, j ascending. */
void onpolicy_chunk_sums(int T, int M,
                         const int *perm,    /* (T) the env's shuffle */
                         const float *adv,   /* the env's advantage at step s: adv[s * stride] */
                         size_t stride,
                         double *sums);      /* (M, 2) out */

/* The normalization of n advantages whose sum is s and sum of squares q:
 *   mean = s / n,  var = max(q / n - mean^2, 0) (the population variance),
 *   *mean = (float)mean,  *inv = (float)(1 / (sqrt(var) + 1e-8)),
 * in double, each advantage a then taken as (a - *mean) * *inv in float. The same for the
 * whole batch and for each minibatch (PPOLoss.advantage_normalization_scope). */
void onpolicy_adv_scale(double s, double q, double n, float *mean, float *inv);

#endif
