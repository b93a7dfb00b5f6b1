/* onpolicy_math.h: the on-policy core's per-env arithmetic (onpolicy.h): generalised
 * advantage estimation over one env's rollout, for any algorithm on the core (PPO's own
 * loss is ppo_math.h's). A pure function with the formula in the comment, kept apart
 * from the core's storage so that a test reaches it alone. */
#ifndef CALF_ONPOLICY_MATH_H
#define CALF_ONPOLICY_MATH_H

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

#endif
