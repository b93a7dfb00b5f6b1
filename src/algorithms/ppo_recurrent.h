/* ppo_recurrent.h: what PPO's update does differently when its networks have a recurrent
 * core (ac_recurrent.h holds the states the rollout acts with): one env's whole sequence
 * recomputed from the state its rollout started with, each sample's clipped loss, and
 * back through time, as that env's partial gradient. */
#ifndef CALF_PPO_RECURRENT_H
#define CALF_PPO_RECURRENT_H

#include <stdbool.h>
#include <stdint.h>

#include "algorithms/ac_model.h"
#include "algorithms/ppo_math.h"
#include "numerics/net.h"

/* The rows PPO's actor-critic reads (ppo.c), the model this update runs on: ALF's
 * ActorDistributionNetwork and ValueNetwork, with their cores. */
extern const ac_model_rows ppo_model_rows;

typedef struct ppo_seq {
    int T;
    const float *obs;       /* (T, obs_dim) what the policy acted on */
    const uint8_t *start;   /* (T) 1 where an episode starts: the state is zeroed first */
    const float *state0;    /* (state_dim) the state before step 0 */
    const int *act;         /* (T) discrete actions */
    const float *u;         /* (T, action_dim) continuous actions, or NULL */
    const float *logp;      /* (T) log-probabilities when acting */
    const float *adv, *ret; /* (T) advantages (normalized when configured) and returns */
    const float *val;       /* (T) the values when acting (read with value clipping only) */
} ppo_seq;

typedef struct ppo_seq_work {
    int max_T;
    net_cache ac, vc;       /* the networks over one sequence (T steps of 1 row) */
    float *head, *dhead;    /* (T, head_dim) */
    float *val, *dval;      /* (T) */
    float *dlogstd;         /* (T, action_dim) */
} ppo_seq_work;

int ppo_seq_work_init(ppo_seq_work *w, const ac_model *md, int max_T, calf_error *err);
void ppo_seq_work_free(ppo_seq_work *w);

/* The env's partial gradient: the networks forward over the sequence from state0
 * (net_forward_seq, resetting where start says), each sample's loss (ppo_sample_loss, with
 * lw), and back through time (net_backward_set / _add), the log-std's rows summed in
 * order. Written over every parameter of the model (add false: grad = partial,
 * the padding untouched) or added to what grad holds (true: grad + partial, the tree's
 * left sibling), as net_backward_set and _add. stats[0..3] += the samples' pg loss, td
 * loss, entropy and clip indicator. version: net_forward_v's for params. */
void ppo_seq_grad(const ac_model *md, const float *params, uint64_t version,
                  ppo_seq_work *w, const ppo_seq *sq, const ppo_loss_weights *lw, float *grad,
                  bool add, double *stats);

#endif
