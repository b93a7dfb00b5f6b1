/* onpolicy.h: what an on-policy actor-critic algorithm (PPO today) keeps beside its loss
 * and its update, as offpolicy.h is for the replay-based ones: the rollout's storage, one
 * view per process (in memory every process shares when they share it, so that any
 * process can compute any env), laid out alike by every process from a peer's env count,
 * observations kept as floats or as a uint8 env's bytes, each env's recurrent state; the
 * steps that fill it (acting with the actor, keeping what the env returned); the values,
 * each env's GAE advantages and their normalization; observation normalization; the
 * minibatch plan (the split of T timesteps or E env sequences into M chunks, each env's
 * shuffle); the update's gradient summed over every env (work-shared when the ranks share
 * memory, the model then in shared memory with each rank stepping a slice of it); and the
 * rollout's checkpoint section and env records; and the policy acting outside the
 * rollout (ac_policy.h). The algorithm's struct begins with its `onpolicy`, so that the
 * onpolicy_ops_* serve as its algorithm_ops where nothing is its own, and it gives its
 * loss as a pass over a view's envs. */
#ifndef CALF_ONPOLICY_H
#define CALF_ONPOLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "algorithms/ac_model.h"
#include "algorithms/ac_policy.h"
#include "algorithms/ac_recurrent.h"
#include "algorithms/obs_norm.h"
#include "algorithms/onpolicy_math.h"
#include "calf/error.h"
#include "calf/rng.h"
#include "numerics/net.h"
#include "parallel/work_share.h"
#include "records/checkpoint.h"
#include "training/algorithm.h"

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
    /* with recurrent cores only (state_dim > 0, ac_recurrent.h; empty otherwise) */
    uint8_t *start;          /* (T, count) 1 where step t begins an episode */
    float *state0;           /* (count, state_dim) each env's state before step 0 */
    float *val;              /* (T, count) V(obs), computed while acting (without cores,
                              * with the advantages, and only when kept: keep_values) */
    float *cut_val;          /* (T, count) V(final obs) where truncated */
    float *boot_val;         /* (count) V(the observation after the last step) */
} onpolicy_view;

/* Lay out a view of `count` envs of T steps at base (NULL: only measure, v's pointers
 * NULL); returns its bytes. od: observation floats (stored as bytes when u8); ad: a
 * continuous action's floats (at least 1); sd: recurrent state floats per env (0: no
 * cores, no recurrent parts); keep_val: val is laid out without cores too; ai: ints per
 * discrete action; mask_bytes: bytes per step's mask (0: none, v->mask NULL); num_stats:
 * the algorithm's statistics per env. Every rank computes every peer's layout alike from
 * the peer's count. */
size_t onpolicy_view_carve(onpolicy_view *v, unsigned char *base, int begin, int count, int T,
                           int od, int ad, int sd, bool keep_val, bool u8, int ai,
                           int mask_bytes, int num_stats);

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
/* Env e of view v (T steps): GAE advantages and returns (onpolicy_gae_advantages, with
 * gamma and lambda) from g->val and g->next into v->adv and v->ret, and the env's
 * advantage sum and sum of squares (in double, steps ascending) into v->adv_sums. */
void onpolicy_gae_env(onpolicy_gae *g, onpolicy_view *v, int e, int T, float gamma,
                      float lambda);

/* ---- the minibatch plan ---- */

/* (onpolicy_chunk_range, the split of T items into M chunks, is onpolicy_math.h's.) */
/* Minibatches per epoch: the global mini_batch_size, rounded to whole timesteps per env
 * (between 1 and T). */
int onpolicy_minibatches_of(int E, int T, int64_t mini_batch_size);
/* With recurrent cores a minibatch is whole env sequences: the global mini_batch_size
 * rounded to whole envs of T steps (between 1 and E). */
int onpolicy_sequence_minibatches_of(int E, int T, int64_t mini_batch_size);
/* perm = a uniform shuffle of 0..n-1 from rng (Fisher-Yates from the back,
 * calf_rng_below). */
void onpolicy_shuffle(calf_rng *rng, int *perm, int n);

/* ---- the on-policy state an algorithm embeds ---- */

/* How advantages are normalized (onpolicy_adv_scale): not at all, over the iteration's
 * whole batch (in place, by onpolicy_advantages), or over each minibatch by its own
 * statistics (onpolicy_minibatch_scales; the loss applies them). */
typedef enum onpolicy_adv_norm {
    ONPOLICY_ADV_RAW,
    ONPOLICY_ADV_BATCH,
    ONPOLICY_ADV_MINIBATCH
} onpolicy_adv_norm;

/* What the algorithm decides for the core: its loss's discount and GAE lambda, how
 * advantages are normalized, whether every step's value V(obs) is kept in the views
 * without a recurrent core too (its loss reads them: value clipping), and its statistics
 * per env (kept in the views). */
typedef struct onpolicy_conf {
    float gamma, lambda;
    onpolicy_adv_norm adv_norm;
    bool keep_values;
    int num_stats;
} onpolicy_conf;

/* Pieces a rank takes from others in one minibatch that are published where they lie
 * (each needs its own set of tree buffers in shared memory); any further piece is
 * copied. Most minibatches see one or two. */
enum { ONPOLICY_STEAL_SETS = 3 };

typedef struct onpolicy {
    /* the job, the env and the model acted with */
    comm *c;
    int E, begin, count;     /* global envs; this process owns [begin, begin+count) */
    int T;                   /* unroll length */
    uint64_t seed;
    ac_model *md;            /* the algorithm's actor-critic (its arrays move to shared memory
                              * at onpolicy_start when the model is shared) */
    onpolicy_conf cf;
    bool u8;                 /* the env's obs_dtype is CALF_DTYPE_U8: the rollout keeps bytes */
    /* observation normalization (TrainerConfig.normalize_observations): the rollout, the
     * advantages and the update only ever see normalized observations; the statistics
     * change once per iteration, at its end (onpolicy_merge_obs_norm) */
    bool normalize_obs;
    obs_norm onorm;
    double *norm_acc;        /* (count, OBS_NORM_ACC(obs_dim)) this iteration's per-env sums */
    /* acting outside the rollout (evaluation, play, a policy handle, export) with md,
     * on observations normalized by onorm when normalizing */
    ac_policy pol;
    /* the minibatch plan */
    int64_t mini_batch_size; /* as configured, for the layout line in config.gin */
    int M;                   /* minibatches per epoch */
    calf_rng *act_rng;       /* (count) per-env action streams */
    calf_rng *shuf_rng;      /* (count) per-env minibatch streams */
    int *plan, *mb_of;       /* recurrent: (E) the epoch's order of envs; each env's minibatch */
    /* advantages normalized per minibatch (ONPOLICY_ADV_MINIBATCH): this epoch's */
    double *mb_sums;         /* (count, M, 2) each env's sums in each minibatch */
    double *mb_tot;          /* (M, 2) and over every env */
    float *mb_mean, *mb_inv; /* (M) each minibatch's onpolicy_adv_scale */
    /* the rollout, time-major: index (t * count + e), in views[own] (shared memory when
     * sharing) */
    onpolicy_view *views;    /* (size) every rank's when sharing, else just this one's */
    onpolicy_view *own;
    void *view_mem;          /* own view's memory when private (else the comm's) */
    bool sharing;            /* ranks share memory: work sharing after the rollout */
    work_share share;        /* every rank's claim word and envs, when sharing; its rounds:
                              * the advantages, then each of the update's minibatches */
    int group_envs;          /* envs per forward pass in the update */
    /* the networks' caches, shared by acting, the advantages and the update: cache_rows
     * rows, a minibatch's or one timestep of every env */
    int cache_rows;
    net_cache a_cache, v_cache;
    float *head;             /* (cache_rows, head_dim) the actor's rows */
    float *act_in;           /* (count, obs_dim) what the policy acts on, when the rollout
                                keeps bytes (else it acts on the kept floats); after acting,
                                a recurrent value's look-ahead rows */
    /* advantages, adv_group envs at a time */
    int adv_group;           /* envs per pass through the value net for advantages */
    float *grp_obs;          /* (adv_group * (T + 1), obs_dim) */
    float *grp_val;          /* (adv_group * (T + 1)) each env's T values, then bootstraps */
    float *grp_next;         /* (adv_group * (T + 1)) the value after each step */
    int *grp_trunc;          /* (adv_group * (T + 1)) the group's steps cut by the time limit */
    float *grp_cut_val;      /* (adv_group * (T + 1)) V(final obs) of those */
    onpolicy_gae gae;        /* one env's rollout for GAE */
    int64_t shared_adv_envs; /* envs whose advantages this rank computed for other ranks */
    /* recurrent cores (ac_recurrent.h): every env's state while acting and whether its
     * next step begins an episode; the acting scratch */
    ac_rec_state rstate;     /* (count) */
    uint8_t *next_start;     /* (count) */
    ac_rec_act ract;
    /* the update's gradient: each minibatch's sum over every env */
    comm_tree tree;
    comm_tree steal_shared[ONPOLICY_STEAL_SETS]; /* pieces taken from other ranks, by
                                                    reference */
    comm_tree steal_tree;    /* and beyond ONPOLICY_STEAL_SETS of them, private */
    bool shared_model;       /* sharing, and the model lives in shared memory where each
                              * rank completes and steps a slice (PRIVATE_MODEL_MAX) */
    /* sharing: one model for all ranks, in shared memory; each rank clips and steps its
     * slice [opt_lo, opt_hi) of it, the slice of the gradient it completes */
    size_t opt_lo, opt_hi;
    unsigned char *shared_state; /* rank 0's region: params, m, v, then norm_parts */
    double *norm_parts;      /* (chunks of ADAM_NORM_CHUNK) squared gradient of each */
    int64_t shared_envs;     /* env partials this rank folded for other ranks */
    /* of comm.wait_s, what the update's three collectives per minibatch waited: for the
     * gradient's pieces, for its norm, for the other ranks' optimiser steps */
    double wait_grad_s, wait_norm_s, wait_step_s;
} onpolicy;

/* The core for s's envs acting with md (laid out, its parameters not needed yet),
 * normalization and the minibatch size read from s->cfg. With s->count 0 (acting only:
 * calf play) only the statistics and the acting scratch are made. Collective when
 * s->count > 0 (the shared views). CALF_ENOMEM when memory runs out (onpolicy_free
 * frees what was made; a zeroed op frees as a no-op). */
int onpolicy_init(onpolicy *op, const algo_setup *s, ac_model *md, const onpolicy_conf *cf,
                  calf_error *err);
void onpolicy_free(onpolicy *op);
/* algorithm_ops.start: with a shared model, from here on all ranks use one model in shared
 * memory, with rank 0's values. Collective. */
int onpolicy_start(onpolicy *op, calf_error *err);

/* algorithm_ops.act: sample every env's action at step s (into act, u) from obs (count,
 * obs_dim) and the env's masks, keeping what the update needs of it. */
void onpolicy_act(onpolicy *op, int s, const float *obs, const uint8_t *mask, int *act,
                  float *u);
/* algorithm_ops.observe: keep the step's rewards, ends and what the advantages need. */
void onpolicy_observe(onpolicy *op, const algo_step *st);

/* rows consecutive observations of a rollout array from row i, as the networks take
 * them, into y (rows, obs_dim): a float array's (already normalized) or a byte array's
 * (f NULL) converted and normalized. */
void onpolicy_obs_rows(const onpolicy *op, const float *f, const uint8_t *b, size_t i, int rows,
                       float *y);

/* Every env's values (kept in the views with keep_values), advantages and returns,
 * normalised over the whole batch when configured (ONPOLICY_ADV_BATCH). Collective. */
int onpolicy_advantages(onpolicy *op, calf_error *err);
/* Epoch `epoch` of iteration `iteration`'s minibatch plan: each env's shuffle (into the
 * own view's perm), or with recurrent cores the epoch's order of whole env sequences. */
void onpolicy_plan_epoch(onpolicy *op, int64_t iteration, int epoch);
/* With ONPOLICY_ADV_MINIBATCH (else a no-op), after onpolicy_plan_epoch: each of the
 * epoch's minibatches' mean and inverse std (onpolicy_adv_scale, into mb_mean and mb_inv)
 * over its advantages, every env's: each env's sums per minibatch (onpolicy_chunk_sums of
 * its shuffle; with recurrent cores its whole sequence's, in its minibatch's slot, zeros
 * in the others), added over the envs in canonical order (comm_tree_sum_f64), so the
 * bits do not depend on the number of processes. Collective. */
int onpolicy_minibatch_scales(onpolicy *op, calf_error *err);
/* The iteration's observations into the running statistics (when normalizing; else a
 * no-op). Collective. */
int onpolicy_merge_obs_norm(onpolicy *op, calf_error *err);

/* ---- the update ---- */

/* The algorithm's loss over envs [first, first+count) of view v (indices within v): each
 * env's partial gradient folded into tree in env order (comm_tree); the result may depend
 * only on the parameters and v's data, never on the rank that runs it. */
typedef void (*onpolicy_grad_pass)(void *ctx, const onpolicy_view *v, int first, int count,
                                   comm_tree *tree);
/* One minibatch's gradient, summed over every env, into md->g.grad. Without shared memory
 * each rank folds its own envs and the tree is completed across ranks. With it, each rank
 * takes its own envs a group at a time and, once out of them, takes the back half of what
 * a slower rank has left, so no rank idles while another works; the pieces complete the
 * same tree: with a shared model (its own read where they lie) each rank only its slice
 * [opt_lo, opt_hi) of md->g.grad, the sum all ranks share; with a private one, all of it
 * (copied pieces, PRIVATE_MODEL_MAX). Collective. */
int onpolicy_gradient(onpolicy *op, onpolicy_grad_pass pass, void *ctx, calf_error *err);
/* The gradient's norm (adam_global_norm's bits) into *norm, then, when it is finite, this
 * rank's slice of the model clipped and stepped (all of it without a shared model) and,
 * with one, the ranks met so that the next forward reads every slice. A norm that is not
 * finite is CALF_EIO naming iteration (0-based) + 1, nothing stepped. Collective. */
int onpolicy_step(onpolicy *op, int64_t iteration, double *norm, calf_error *err);
/* The rank log's closing lines (algorithm_ops.report): what work sharing did, and what
 * the other ranks cost this one. */
void onpolicy_report(const onpolicy *op, double run_s, char *text, size_t cap);

/* Checkpoint: the "ONRM" section when observations are normalized (obs_norm.h); load
 * checks its count against iteration's. */
void onpolicy_save(const onpolicy *op, ckpt_buf *b);
int onpolicy_load(onpolicy *op, ckpt_reader *r, int64_t iteration, calf_error *err);
/* Each env's record: its action stream, then its shuffle stream; with recurrent cores
 * then whether its next step begins an episode (a byte, 0 or 1) and its state (state_dim
 * float32s, ac_rec_state_put), so a resume on any number of processes continues it. */
size_t onpolicy_env_record_size(const onpolicy *op);
void onpolicy_save_env(const onpolicy *op, int e, unsigned char *rec);
int onpolicy_load_env(onpolicy *op, int e, const unsigned char *rec, const char *name,
                      calf_error *err);

/* ---- algorithm_ops that an algorithm whose struct begins with its onpolicy takes as
 * they are: start, acting in the rollout (act, observe) and outside it (greedy, sample,
 * the greedy rows' state, export: ac_policy.h), the digest, the env records and the rank
 * log's report. ---- */
int onpolicy_ops_start(algorithm *a, calf_error *err);
void onpolicy_ops_act(algorithm *a, int64_t iteration, int s, const float *obs,
                      const uint8_t *mask, int *act, float *u);
void onpolicy_ops_observe(algorithm *a, const algo_step *st);
void onpolicy_ops_greedy(algorithm *a, const float *obs, const uint8_t *mask, int rows, int *act,
                         float *u);
void onpolicy_ops_sample(algorithm *a, const float *obs, const uint8_t *mask, int rows,
                         calf_rng *rng, int *act, float *u);
int onpolicy_ops_greedy_memory(const algorithm *a);
int onpolicy_ops_greedy_reset(algorithm *a, int rows, calf_error *err);
void onpolicy_ops_greedy_reset_rows(algorithm *a, const uint8_t *which, int rows);
int onpolicy_ops_export_c(const algorithm *a, export_c *x, calf_error *err);
/* The model's digest (ac_model_digest); 0 with a shared model, which every rank reads
 * alike, so there is nothing to compare. */
uint64_t onpolicy_ops_digest(const algorithm *a);
size_t onpolicy_ops_env_record_size(const algorithm *a);
void onpolicy_ops_save_env(const algorithm *a, int e, unsigned char *rec);
int onpolicy_ops_load_env(algorithm *a, int e, const unsigned char *rec, const char *name,
                          calf_error *err);
void onpolicy_ops_report(const algorithm *a, double run_s, char *text, size_t cap);

/* *out = a * b for a, b >= 0; false when the product does not fit. */
bool onpolicy_mul_fits(int64_t a, int64_t b, int64_t *out);

#endif
