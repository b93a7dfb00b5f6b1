/* offpolicy.h: what every replay-based algorithm (SAC, TD3, DQN, DDPG) shares, so that
 * each algorithm's file holds only its networks, losses and exploration: the env-keyed
 * replay rings (replay.h) and their move to shared memory under --nproc, the (seed,
 * iteration, update) sampling stream and each sample's noise stream, the pass that folds
 * per-env partial gradients into the canonical tree (work-shared when processes share
 * memory), the per-env action streams, the replay's checkpoint sections and records (any
 * split resumes on any other), the digest, section and histograms of the algorithm's
 * parameter groups, the memory check, and the batch scratch. The bits never
 * depend on the number of processes or on who computed what (docs/DESIGN.md). */
#ifndef CALF_OFFPOLICY_H
#define CALF_OFFPOLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "algorithms/replay.h"
#include "calf/config.h"
#include "calf/env.h"
#include "calf/rng.h"
#include "numerics/adam.h"
#include "numerics/net.h"
#include "numerics/param_group.h"
#include "parallel/work_share.h"
#include "numerics/export_c.h"
#include "training/algorithm.h"

/* What a process's envs hold for an update: the rings, and per env the algorithm's
 * statistics and one float a pass may leave for a later one (SAC's discrete temperature
 * gradient). With work sharing every process's lies in shared memory, and any process
 * may compute any env. */
typedef struct offpolicy_view {
    replay rb;         /* the rings (counters copied from the process's own) */
    int begin, count;  /* the envs */
    double *stats;     /* (count, num_stats) */
    float *env_f;      /* (count) */
    void *ring;        /* the rings' memory, when sharing */
} offpolicy_view;

enum { OFFPOLICY_MAX_TREES = 3, OFFPOLICY_MAX_GROUPS = 4 };

/* One of the algorithm's parameter groups, as the core's digest, checkpoint section and
 * histograms take it (offpolicy_set_groups). */
typedef struct offpolicy_group {
    param_group *g;
    const char *name; /* the histograms' "Params/<name>"; NULL: none */
    bool grads;       /* "Grads/<name>" after it */
    int step_period;  /* Adam steps, as a checkpoint's iteration implies them: one per this
                       * many updates (0: one per update; TD3's delayed actor: policy_delay) */
} offpolicy_group;

typedef struct offpolicy {
    /* the job and the env */
    comm *c;
    int E, begin, count, T;
    int od;                  /* observation size */
    int odt;                 /* its storage in the replay: the spec's obs_dtype */
    int A;                   /* continuous: action size; discrete: 0 */
    int nA;                  /* discrete: number of actions; continuous: 0 */
    int ad;                  /* a stored action's floats: max(A, 1) */
    int md;                  /* a masked env's num_actions (the replay keeps each transition's
                              * next mask); 0: no masks */
    const float *lo, *hi;    /* (A) the env's action bounds (its spec's static arrays) */
    uint64_t seed;
    int B;                   /* TrainerConfig.mini_batch_size */
    int U;                   /* TrainerConfig.num_updates_per_train_iter */
    int64_t initial_collect; /* TrainerConfig.initial_collect_steps */
    int num_stats;           /* the algorithm's statistics per env */
    int noise_dim;           /* standard normals each sample draws from its stream */
    int rows;                /* the scratch rows: max(count, B, 1) */
    calf_rng *act_rng;       /* (count) per-env action streams (CALF_RNG_ACTION) */
    replay rb;
    /* one update's samples: all B (every process draws the same list), then the rows of
     * one group of envs, env by env */
    int *s_env;              /* (B) */
    int64_t *s_pos;          /* (B) */
    uint64_t stream;         /* the update's stream index (replay_stream_index) */
    struct offpolicy_rows {  /* whose rows the row arrays hold this update (view NULL: none) */
        const offpolicy_view *view;
        int first, k, n;
    } gathered;
    int *offsets;            /* (E + 1) rows of a group's env e: [offsets[e], offsets[e+1]) */
    int *order;              /* (B) sample index of each row */
    float *obs, *act, *rew, *next; /* (rows, od), (rows, ad), (rows), (rows, od) */
    uint8_t *term;           /* (rows) */
    uint8_t *next_mask;      /* (rows, md) the actions valid at next; NULL when md is 0 */
    float *noise;            /* (rows, noise_dim) each row's sample noise */
    double *stats;           /* (count, num_stats) = own->stats */
    /* every process's envs (views[r]; just this one's without sharing) */
    offpolicy_view *views, *own;
    int nviews;
    void *own_mem;           /* own's stats and env_f when private */
    bool sharing;            /* processes share memory: rings there, work shared */
    work_share share;        /* every process's claim word and envs, when sharing */
    int ntrees;
    size_t tree_n[OFFPOLICY_MAX_TREES];
    comm_tree tree[OFFPOLICY_MAX_TREES];  /* a pass's gradient, by tree index */
    comm_tree steal[OFFPOLICY_MAX_TREES]; /* pieces computed for other processes */
    int64_t shared_envs;     /* env partials this process computed for others */
    /* the algorithm's parameter groups, in the order of the digest, of its checkpoint
     * section and of the histograms */
    const char *tag;         /* the section's, 4 characters (a string that outlives o) */
    offpolicy_group groups[OFFPOLICY_MAX_GROUPS];
    int ngroups;
    int64_t updates;         /* updates done over the whole run (the algorithm counts them) */
    int64_t iteration;       /* the iteration the last train was of */
} offpolicy;

/* ---- settings ---- */

/* The checks every one-step replay algorithm makes of a config, its messages naming
 * `name` (e.g. "SacAlgorithm") and the binding's file:line: mini_batch_length 2 and not
 * above the buffer, initial_collect_steps below the run's env steps, at most 2^20 samples
 * per update, no observation normalization. CALF_EINVAL. */
int offpolicy_check(const calf_config *cfg, const char *name, calf_error *err);
/* For the algorithms whose networks are MLPs only (SAC, TD3, DDPG): a config that sets
 * conv layers (ActorDistributionNetwork.conv_layer_params, ValueNetwork.conv_layer_params)
 * is refused naming its line and `name`. CALF_EINVAL. */
int offpolicy_check_mlp_only(const calf_config *cfg, const char *name, calf_error *err);
/* The action spaces a replay algorithm `name` cannot train, refused naming the binding
 * that chose it (CALF_EINVAL): MultiDiscrete always, an action mask unless masks_ok. */
int offpolicy_check_action_space(const calf_config *cfg, const calf_env_spec *spec,
                                 const char *name, bool masks_ok, calf_error *err);
/* algorithm_ops.check_memory for the replay rings of `envs` envs. */
int offpolicy_check_memory(const calf_config *cfg, const calf_env_spec *spec, int envs,
                           uint64_t memory, const char *limit, calf_error *err);
/* The run's env steps when its length is known from the config (0: unbounded). */
int64_t offpolicy_run_env_steps(const calf_config *cfg);

/* ---- networks ---- */

/* The network an algorithm asks for, laid out at *cursor: `in` inputs, the fc layers of
 * the tuple row fc_id with the activation of row act_id ('relu', else tanh), a linear
 * head of `out` (net_spec_mlp: an nn_mlp's layout, draws and bits). CALF_EINVAL from
 * net_layout. Its init is net_init_fan_in, PyTorch's default for nn.Linear. */
int offpolicy_net(net *n, const calf_config *cfg, calf_binding_id fc_id, calf_binding_id act_id,
                  int in, int out, size_t *cursor, calf_error *err);
/* The config's Adam (betas, eps, gradient clipping) with learning rate lr. */
adam_conf offpolicy_adam(const calf_config *cfg, double lr);

/* `calf export` of a tanh actor: the actor network (as "actor"), whose first A outputs x
 * of a head of `head` floats (`what`: a comment saying what they are) map onto the bounds
 * as scale * tanh(x) + bias (offpolicy_squash_affine; cm_tanh in double, calf_tanhd there).
 * export_c_net's errors. */
int offpolicy_export_tanh_actor(export_c *x, const net *actor, const float *params, int A,
                                int head, const char *what, const float *lo, const float *hi,
                                calf_error *err);

/* Critic input rows (obs | action) of `rows` rows into out (rows, od + A). */
void offpolicy_join_rows(const float *obs, int od, const float *u, int A, int rows, float *out);

/* ---- lifecycle ---- */

/* The job's shape, the batch settings and the scratch for s (count 0: acting only, with
 * no rings, streams or trees), num_stats statistics per env and noise_dim normals per
 * sample. On error o still needs offpolicy_free. */
int offpolicy_init(offpolicy *o, const algo_setup *s, int num_stats, int noise_dim,
                   calf_error *err);
/* The algorithm's checkpoint section tag and its n parameter groups (copied), once, when
 * init has made them: the digest, the section and the histograms loop over them in this
 * order. */
void offpolicy_set_groups(offpolicy *o, const char *tag, const offpolicy_group *groups, int n);
/* Tree index ntrees, for partials of n floats (at most OFFPOLICY_MAX_TREES; not when
 * acting only). */
int offpolicy_add_tree(offpolicy *o, size_t n, calf_error *err);
/* Collective, before the first iteration (after a checkpoint filled the rings): where the
 * processes share memory with room for every process's rings, move them there, so that
 * any process can compute any env's partials (offpolicy_pass). Else nothing changes. */
int offpolicy_start(offpolicy *o, calf_error *err);
void offpolicy_free(offpolicy *o); /* zeroed o is fine */

/* algorithm_ops.create for an algorithm whose struct (`size` bytes, zeroed) begins with
 * its offpolicy: init fills it (on error destroy frees what init made, and *out is
 * NULL). */
int offpolicy_create(size_t size, int (*init)(algorithm *a, const algo_setup *s, calf_error *err),
                     void (*destroy)(algorithm *a), const algo_setup *s, algorithm **out,
                     calf_error *err);

/* ---- acting ---- */

/* While the job has taken fewer than initial_collect_steps env steps before step s of
 * `iteration`: uniform random actions from each env's stream into act (discrete: among
 * the valid ones of mask (count, nA) when not NULL, dist_masked_uniform) or u
 * (continuous), and true; else false and nothing drawn. */
bool offpolicy_act_random(offpolicy *o, int64_t iteration, int s, const uint8_t *mask, int *act,
                          float *u);
/* The step's transitions into the rings (discrete actions stored as floats). */
void offpolicy_observe(offpolicy *o, const algo_step *st);

/* ---- updates ---- */

/* algorithm_ops.train's frame: iteration `iteration`'s statistics cleared, then, once the
 * job is learning, update(ctx, u) for u = 0 .. U-1, stopping at the first error. */
int offpolicy_train(offpolicy *o, int64_t iteration, int (*update)(void *ctx, int u, calf_error *err),
                    void *ctx, calf_error *err);

/* Whether iteration `iteration` trains: the job has taken initial_collect_steps env steps
 * by its end. */
bool offpolicy_learning(const offpolicy *o, int64_t iteration);
/* Updates done by the end of `iterations` iterations, U per learning iteration. */
int64_t offpolicy_updates_after(const offpolicy *o, int64_t iterations);
/* Zero the statistics of every env of this process (at the start of a train). */
void offpolicy_clear_stats(offpolicy *o);
/* Update u of iteration `iteration`: draw its B samples (replay_sample) and forget the
 * rows gathered for the previous update. */
void offpolicy_sample(offpolicy *o, int64_t iteration, int u);
/* This update's rows of envs [first, first + k) of view v: their samples (env by env,
 * within an env in sample order), transitions and noise (noise_dim normals per row from
 * the sample's own stream, seed and (stream * 0x9E3779B97F4A7C15 + j, CALF_RNG_NOISE)),
 * each env's rows in [offsets[e], offsets[e + 1]). A second call for the same group in
 * the same update finds the rows still there. Returns the number of rows. */
int offpolicy_gather(offpolicy *o, const offpolicy_view *v, int first, int k);
/* An algorithm's pass over envs [first, first + k) of v: each env's partial (tree's n
 * floats) folded into tree in env order; the result may depend only on the envs. */
typedef void (*offpolicy_pass_fn)(void *ctx, const offpolicy_view *v, int first, int k,
                                  comm_tree *tree);
/* Collective: one pass over every env of the job into tree `tree`, the partials summed in
 * the canonical tree into out (the tree's n floats) on every process. Without sharing a
 * process does its own envs; sharing, it takes its own a few at a time, then the back
 * half of what a slower process has left; the pieces complete the same tree. */
int offpolicy_pass(offpolicy *o, int tree, offpolicy_pass_fn pass, void *ctx, float *out,
                   calf_error *err);
/* Collective: the statistics of the last train summed over envs in canonical order into
 * g (num_stats). */
int offpolicy_sum_stats(offpolicy *o, double *g, calf_error *err);

/* ---- checkpoints ---- */

/* The algorithm's section (algorithm_ops.save): its tag, the updates done (o->updates),
 * each group (param_group_save) in order, then the replay counters. */
void offpolicy_save(const offpolicy *o, ckpt_buf *b);
/* Read it back, checking it against this config at `iteration`: the updates must be
 * offpolicy_updates_after's, each trained group's step count those updates over its
 * step_period, the counters offpolicy_load_counters's. Sets o->updates. */
int offpolicy_load(offpolicy *o, ckpt_reader *r, int64_t iteration, calf_error *err);
/* The digest of the groups' parameters and moments, in order (algorithm_ops.digest). */
uint64_t offpolicy_digest(const offpolicy *o);
/* The summaries' histograms: "Params/<name>" of each named group, then "Grads/<name>"
 * where it asks for them, group by group. */
void offpolicy_histograms(const offpolicy *o, int64_t step);

/* The replay counters (replay_save_counters). */
void offpolicy_save_counters(const offpolicy *o, ckpt_buf *b);
/* Read them back and check them against `iteration` (the rings hold min(iteration * T,
 * capacity) transitions per env); acting only, skip them. */
int offpolicy_load_counters(offpolicy *o, ckpt_reader *r, int64_t iteration, calf_error *err);
/* Each env's record: its action stream, then its replay ring, oldest first (the rings all
 * hold `stored` transitions, so the records of one checkpoint have one size). */
size_t offpolicy_env_record_size(const offpolicy *o);
void offpolicy_save_env(const offpolicy *o, int e, unsigned char *rec);
int offpolicy_load_env(offpolicy *o, int e, const unsigned char *rec, const char *name,
                       calf_error *err);

/* ---- algorithm_ops that an algorithm whose struct begins with its offpolicy takes as
 * they are: start (offpolicy_start), observe, the digest and the section of its groups,
 * the env records (an algorithm with per-env state of its own wraps these) and the rank
 * log's report (o->updates). ---- */
int offpolicy_ops_start(algorithm *a, calf_error *err);
void offpolicy_ops_observe(algorithm *a, const algo_step *st);
uint64_t offpolicy_ops_digest(const algorithm *a);
void offpolicy_ops_save(const algorithm *a, ckpt_buf *b);
size_t offpolicy_ops_env_record_size(const algorithm *a);
void offpolicy_ops_save_env(const algorithm *a, int e, unsigned char *rec);
int offpolicy_ops_load_env(algorithm *a, int e, const unsigned char *rec, const char *name,
                           calf_error *err);
void offpolicy_ops_report(const algorithm *a, double run_s, char *text, size_t cap);

/* ---- what config.gin's header and the rank log say ---- */
void offpolicy_describe(const offpolicy *o, char *text, size_t cap);
void offpolicy_report(const offpolicy *o, double run_s, char *text, size_t cap);

#endif
