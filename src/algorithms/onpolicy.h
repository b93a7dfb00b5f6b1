/* onpolicy.h: what an on-policy algorithm (PPO today) keeps beside its loss, as
 * offpolicy.h is for the replay-based ones: the rollout's storage, one view per process
 * (in memory every process shares when they share it, so that any process can compute any
 * env), laid out alike by every process from a peer's env count; each env's GAE
 * advantages; and the minibatch plan (the split of T timesteps or E env sequences into M
 * chunks, each env's shuffle). */
#ifndef CALF_ONPOLICY_H
#define CALF_ONPOLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "calf/error.h"
#include "calf/rng.h"

/* What the advantages and the update read of one rank's rollout: this process's own, or,
 * when the ranks share memory, a peer's, so that a rank that is ahead can compute some of
 * a slower rank's envs (their values and advantages, their minibatch partials: work
 * sharing; which rank computes an env's share never shows in the bits). Indices are
 * time-major over the rank's envs: t * count + e. */
typedef struct onpolicy_view {
    int begin, count;        /* the rank's envs */
    float *obs;              /* (T, count, obs_dim) */
    /* with a CALF_DTYPE_U8 env the three observation arrays hold the env's bytes instead
     * (obs8, trunc_obs8, boot_obs8; the float ones are then empty) */
    uint8_t *obs8, *trunc_obs8, *boot_obs8;
    int *act;                /* (T, count, action_ints) */
    float *u;                /* (T, count, max(action_dim, 1)) continuous actions, unclipped */
    uint8_t *mask;           /* (T, count, num_actions) the valid actions acted among, when
                              * the env masks them; else NULL */
    float *logp, *adv, *ret; /* (T, count) */
    float *rew;              /* (T, count) */
    uint8_t *term, *trunc;   /* (T, count) */
    float *trunc_obs;        /* (T, count, obs_dim) final observation where truncated */
    float *boot_obs;         /* (count, obs_dim) the observation after the last step */
    double *adv_sums;        /* (count, 2) sum and sum of squares of each env's advantages */
    int *perm;               /* (count, T) this epoch's shuffle of each env's timesteps */
    double *stats;           /* (count, num_stats) the algorithm's per-env statistics */
    /* with recurrent cores only (state_dim > 0, ppo_recurrent.h; empty otherwise) */
    uint8_t *start;          /* (T, count) 1 where step t begins an episode */
    float *state0;           /* (count, state_dim) each env's state before step 0 */
    float *val;              /* (T, count) V(obs), computed while acting */
    float *cut_val;          /* (T, count) V(final obs) where truncated */
    float *boot_val;         /* (count) V(the observation after the last step) */
} onpolicy_view;

/* Lay out a view of `count` envs of T steps at base (NULL: only measure, v's pointers
 * NULL); returns its bytes. od: observation floats (stored as bytes when u8); ad: a
 * continuous action's floats (at least 1); sd: recurrent state floats per env (0: no
 * cores, no recurrent parts); ai: ints per discrete action; mask_bytes: bytes per step's
 * mask (0: none, v->mask NULL); num_stats: the algorithm's statistics per env. Every
 * rank computes every peer's layout alike from the peer's count. */
size_t onpolicy_view_carve(onpolicy_view *v, unsigned char *base, int begin, int count, int T,
                           int od, int ad, int sd, bool u8, int ai, int mask_bytes,
                           int num_stats);

/* ---- advantages ---- */

/* One env's rollout as GAE reads it and what it writes, T floats or bytes each: the
 * algorithm fills val (V(obs) of each step) and next (the value after each step: the
 * final observation's where the episode was truncated), onpolicy_gae_env the rest. */
typedef struct onpolicy_gae {
    float *rew, *val, *next, *adv, *ret; /* (T) */
    uint8_t *term, *ended;               /* (T) */
} onpolicy_gae;
/* CALF_ENOMEM when memory runs out (onpolicy_gae_free frees what was made; a zeroed g
 * frees as a no-op). */
int onpolicy_gae_init(onpolicy_gae *g, int T, calf_error *err);
void onpolicy_gae_free(onpolicy_gae *g);
/* Env e of view v (T steps): GAE advantages and returns (ppo_gae, with gamma and lambda)
 * from g->val and g->next into v->adv and v->ret, and the env's advantage sum and sum of
 * squares (in double, steps ascending) into v->adv_sums. */
void onpolicy_gae_env(onpolicy_gae *g, onpolicy_view *v, int e, int T, float gamma,
                      float lambda);

/* ---- the minibatch plan ---- */

/* Chunk m of T items split into M nearly equal chunks: [*off, *off + *len), the first
 * T % M chunks one longer. */
void onpolicy_chunk_range(int T, int M, int m, int *off, int *len);
/* Minibatches per epoch: the global mini_batch_size, rounded to whole timesteps per env
 * (between 1 and T). */
int onpolicy_minibatches_of(int E, int T, int64_t mini_batch_size);
/* With recurrent cores a minibatch is whole env sequences: the global mini_batch_size
 * rounded to whole envs of T steps (between 1 and E). */
int onpolicy_sequence_minibatches_of(int E, int T, int64_t mini_batch_size);
/* perm = a uniform shuffle of 0..n-1 from rng (Fisher-Yates from the back,
 * calf_rng_below). */
void onpolicy_shuffle(calf_rng *rng, int *perm, int n);

#endif
