/* sac.c: Soft Actor-Critic (ALF's SacAlgorithm): twin Q critics with Polyak-averaged
 * targets, automatic entropy tuning, one-step TD from a replay buffer; continuous
 * actions through a tanh-squashed Gaussian actor, discrete ones through softmax(Q/alpha)
 * of the critics (ALF's sac_cart_pole). Every env's transitions live in a ring owned by
 * the process that steps it (replay.h); each update's samples come from a stream of
 * (seed, iteration, update) and each sample's policy noise from its own stream, so every
 * process computes the same list; the loss terms of an env's samples make one per-env
 * partial gradient, and the partials are summed in the canonical tree over the global env
 * index (docs/DESIGN.md). A process computes its own envs' partials; with --nproc the
 * rings live in the memory the processes share, and a process out of work computes
 * envs of a slower one (work sharing, as PPO's). The bits never depend on the number of
 * processes or on who computed what. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calf/summary.h"
#include "training/algorithm.h"
#include "algorithms/replay.h"
#include "algorithms/sac_math.h"
#include "base/bytes.h"
#include "base/mem.h"
#include "base/memory.h"
#include "base/cmath.h"
#include "numerics/nn.h"
#include "numerics/param_group.h"
#include "parallel/work_share.h"

/* Per-env statistics of an iteration's updates, summed over envs in canonical order. */
enum { SS_SAMPLES, SS_CRITIC, SS_ACTOR, SS_ALPHA, SS_ENTROPY, NUM_SAC_STATS };

/* What a process's envs hold for an update: the rings, and per env the statistics and
 * (discrete actions) the temperature's gradient, which the critic pass leaves for the
 * actor pass. With work sharing every process's lies in shared memory, and any process
 * may compute any env. */
typedef struct sac_view {
    replay rb;               /* the rings (counters copied from the process's own) */
    int begin, count;        /* the envs */
    double *stats;           /* (count, NUM_SAC_STATS) */
    float *da;               /* (count) */
    void *ring;              /* the rings' memory, when sharing */
} sac_view;

typedef struct sac {
    /* the job and the env */
    comm *c;
    int E, begin, count, T;
    int od;                  /* observation size */
    int A;                   /* continuous: action size; discrete: 0 */
    int nA;                  /* discrete: number of actions; continuous: 0 */
    const float *lo, *hi;    /* (A) the env's action bounds (its spec's static arrays) */
    uint64_t seed;
    /* settings, resolved once */
    int B;                   /* TrainerConfig.mini_batch_size */
    int U;                   /* TrainerConfig.num_updates_per_train_iter */
    int64_t initial_collect; /* TrainerConfig.initial_collect_steps */
    float gamma, tau, target_entropy;
    int target_period;
    bool lr_linear;          /* Adam.lr_schedule = 'linear' */
    double actor_lr, critic_lr, alpha_lr; /* as configured: what the schedule scales */
    int64_t total_iterations;/* the run's planned length (the schedule) */
    /* networks: the actor in its group; q1 and q2 at their offsets in the critic group,
     * whose layout the target group copies; log alpha is the alpha group's one float */
    nn_mlp actor, q1, q2;
    param_group actor_g, critic_g, target_g, alpha_g;
    int64_t updates;         /* updates done over the whole run */
    /* bumped whenever a group's values change, so that passes over unchanged parameters
     * reuse the transposed weights their caches keep (nn_mlp_forward_v) */
    uint64_t actor_ver, critic_ver, target_ver;
    calf_rng *act_rng;       /* (count) per-env action streams */
    replay rb;
    /* one update's samples: all B (every process draws the same list), then the rows of
     * this process's, env by env */
    int *s_env;              /* (B) */
    int64_t *s_pos;          /* (B) */
    uint64_t stream;         /* the update's noise stream (replay_stream_index) */
    struct gathered {        /* whose rows the row arrays hold this update (view NULL: none) */
        const struct sac_view *view;
        int first, k, n;
    } rows;
    int *offsets;            /* (E + 1) rows of a group's env e: [offsets[e], offsets[e+1]) */
    int *order;              /* (B) sample index of each row */
    float *obs, *act, *rew, *next; /* (B, od), (B, max(A,1)), (B), (B, od) */
    uint8_t *term;           /* (B) */
    float *eps;              /* (B, A) noise for the next action */
    float *eps2;             /* (B, A) noise for the actor loss's action */
    float *qin;              /* (B, od + A) critic input rows */
    float *row_a;            /* (max(A,1)) one row's noise in act, its action gradient in train */
    float *head;             /* (B, 2A) actor outputs */
    float *anew, *logp, *y;  /* (B, A), (B), (B) */
    float *qa, *qb, *ta, *tb;/* (B, max(nA, 1)) critic outputs */
    float *dqa, *dqb;        /* (B, max(nA, 1)) */
    float *dxa, *dxb;        /* (B, od + A) */
    float *dhead;            /* (B, 2A) */
    float *dalpha;           /* (B) each row's d(alpha loss)/d log alpha */
    nn_cache actor_cache, qa_cache, qb_cache, ta_cache, tb_cache;
    int cache_rows;
    comm_tree critic_tree;   /* critic group's gradient */
    comm_tree actor_tree;    /* the actor's gradient, then d/d log alpha (one more float) */
    float *sum;              /* (max(critic n, actor n + 1)) a tree's completed sum */
    double *stats;           /* (count, NUM_SAC_STATS) = own->stats */
    int64_t iteration;
    /* every process's envs (views[r]; just this one's without sharing) */
    sac_view *views, *own;
    int nviews;
    void *own_mem;           /* own's stats and da when private */
    bool sharing;            /* processes share memory: rings there, work shared */
    work_share share;        /* every process's claim word and envs, when sharing */
    comm_tree critic_steal, actor_steal; /* pieces computed for other processes */
    int64_t shared_envs;     /* env partials this process computed for others */
} sac;

/* ---- settings ------------------------------------------------------------------- */

static nn_activation activation_of(const char *name) {
    return strcmp(name, "relu") == 0 ? NN_ACT_RELU : NN_ACT_TANH;
}

/* PyTorch's default for nn.Linear (and the anchor's): weights and biases uniform in
 * +-1/sqrt(fan_in), drawn layer by layer, weights row-major (in, out), then biases. */
static void fan_in_init(const nn_mlp *m, float *params, calf_rng *rng) {
    for (int l = 0; l < m->num_layers; l++) {
        int in = m->sizes[l], out = m->sizes[l + 1];
        double b = 1.0 / sqrt((double)in);
        for (int k = 0; k < in * out; k++)
            params[m->w_off[l] + (size_t)k] = (float)calf_rng_uniform_range(rng, -b, b);
        for (int k = 0; k < out; k++)
            params[m->b_off[l] + (size_t)k] = (float)calf_rng_uniform_range(rng, -b, b);
    }
}

static int tuple_ints(const calf_config *cfg, calf_binding_id id, int *out) {
    const calf_config_value *v = calf_config_get(cfg, id);
    for (int i = 0; i < v->n; i++) out[i] = (int)v->ti[i];
    return v->n;
}

/* Updates done by the end of `iterations` iterations: learning starts in the first
 * iteration after which the job has taken initial_collect_steps env steps. */
static int64_t updates_after(const sac *t, int64_t iterations) {
    int64_t per_iter = (int64_t)t->E * t->T;
    int64_t first = t->initial_collect > 0 ? (t->initial_collect + per_iter - 1) / per_iter - 1 : 0;
    return iterations > first ? (iterations - first) * t->U : 0;
}

/* The run's env steps, when its length is known from the config (0: unbounded). */
static int64_t run_env_steps(const calf_config *cfg) {
    int64_t per_iter = calf_config_int(cfg, CALF_CFG_NUM_ENVS) * calf_config_int(cfg, CALF_CFG_UNROLL_LENGTH);
    int64_t iters = calf_config_int(cfg, CALF_CFG_NUM_ITERATIONS);
    int64_t steps = calf_config_int(cfg, CALF_CFG_NUM_ENV_STEPS);
    int64_t by_iters = iters > 0 && iters <= INT64_MAX / per_iter ? iters * per_iter : 0;
    if (steps > 0 && (by_iters == 0 || steps < by_iters)) return steps;
    return by_iters;
}

static const char *where(const calf_config *cfg, calf_binding_id id) {
    const char *o = cfg->origin[id];
    return o[0] ? o : "config";
}

static int sac_check(const calf_config *cfg, const calf_env_spec *spec, calf_error *err) {
    (void)spec;
    int64_t mbl = calf_config_int(cfg, CALF_CFG_MINI_BATCH_LENGTH);
    int64_t len = calf_config_int(cfg, CALF_CFG_REPLAY_BUFFER_LENGTH);
    if (mbl > len) { /* either line may be the one to change: name both */
        const char *len_at = cfg->origin[CALF_CFG_REPLAY_BUFFER_LENGTH];
        return calf_error_set(err, CALF_EINVAL,
                              "%s: TrainerConfig.mini_batch_length = %lld is larger than the replay "
                              "buffer (TrainerConfig.replay_buffer_length = %lld%s%s)",
                              where(cfg, CALF_CFG_MINI_BATCH_LENGTH), (long long)mbl, (long long)len,
                              len_at[0] ? ", set at " : ", its default", len_at);
    }
    if (mbl != 2)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: SacAlgorithm learns from one-step TD: TrainerConfig."
                              "mini_batch_length must be 2, got %lld",
                              where(cfg, CALF_CFG_MINI_BATCH_LENGTH), (long long)mbl);
    int64_t collect = calf_config_int(cfg, CALF_CFG_INITIAL_COLLECT_STEPS);
    int64_t run = run_env_steps(cfg);
    if (run > 0 && collect >= run)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: TrainerConfig.initial_collect_steps = %lld is not below the run's "
                              "%lld env steps: it would never learn",
                              where(cfg, CALF_CFG_INITIAL_COLLECT_STEPS), (long long)collect,
                              (long long)run);
    if (calf_config_int(cfg, CALF_CFG_MINI_BATCH_SIZE) > (1 << 20))
        return calf_error_set(err, CALF_EINVAL, "%s: SacAlgorithm takes at most %d samples per update",
                              where(cfg, CALF_CFG_MINI_BATCH_SIZE), 1 << 20);
    /* Not yet for SAC: its replay would hold observations normalized by the statistics
     * of their time. */
    if (calf_config_bool(cfg, CALF_CFG_NORMALIZE_OBS))
        return calf_error_set(err, CALF_EINVAL,
                              "%s: TrainerConfig.normalize_observations: SacAlgorithm does not "
                              "normalize observations (PPOAlgorithm does)",
                              where(cfg, CALF_CFG_NORMALIZE_OBS));
    return CALF_OK;
}

/* The rings are allocated whole at the start but filled as the run goes: one larger
 * than the machine would only fail hours in, when the kernel ends the process. This
 * refuses what cannot fit at all; it does not count the moment of a --nproc resume when
 * a process holds its loaded rings twice (sac_start copies them to shared memory). */
static int sac_check_memory(const calf_config *cfg, const calf_env_spec *spec, int envs,
                            uint64_t memory, const char *limit, calf_error *err) {
    int64_t cap = calf_config_int(cfg, CALF_CFG_REPLAY_BUFFER_LENGTH);
    int ad = spec->action_dim > 0 ? spec->action_dim : 1;
    size_t need = replay_bytes(envs, cap, spec->obs_dim, ad);
    if (need != 0 && (uint64_t)need <= memory) return CALF_OK;
    char want[32] = "more than a size_t holds", have[32];
    if (need) memory_format((double)need, want, sizeof want);
    memory_format((double)memory, have, sizeof have);
    return calf_error_set(err, CALF_EINVAL,
                          "%s: TrainerConfig.replay_buffer_length = %lld: the replay buffer needs %s "
                          "for the %d env%s on one machine, more than the %s of %s",
                          where(cfg, CALF_CFG_REPLAY_BUFFER_LENGTH), (long long)cap, want, envs,
                          envs == 1 ? "" : "s", have, limit);
}

/* ---- setup ---------------------------------------------------------------------- */

static void sac_destroy(algorithm *a);

/* Lay out a view of `count` envs at mem (NULL: only measure, v's pointers NULL) and
 * return its bytes, SIZE_MAX if they do not fit in a size_t: statistics, da and, with
 * `rings`, the replay rings. A view in shared memory has rings; a private
 * view's rings are the process's own (t->rb). Every process lays out every peer's view
 * alike from the peer's count. */
static size_t view_carve(sac_view *v, const sac *t, unsigned char *mem, int begin, int count,
                         bool rings) {
    size_t off = 0;
    v->stats = comm_carve(mem, &off, (size_t)count * NUM_SAC_STATS * sizeof(double));
    v->da = comm_carve(mem, &off, (size_t)count * sizeof(float));
    if (mem) {
        v->begin = begin;
        v->count = count;
    }
    if (!rings) return off;
    size_t ring = replay_bytes(count, t->rb.capacity, t->od, t->rb.act_dim);
    if (ring == 0 || ring > SIZE_MAX - off) return SIZE_MAX;
    if (mem) {
        v->ring = mem + off;
        replay_init(&v->rb, t->E, begin, count, t->rb.capacity, t->od, t->rb.act_dim, v->ring);
    }
    return off + ring;
}

static int sac_init(sac *t, const algo_setup *s, calf_error *err) {
    const calf_config *cfg = s->cfg;
    const calf_env_spec *spec = s->spec;
    t->c = s->c;
    t->E = s->E;
    t->begin = s->begin;
    t->count = s->count;
    t->T = s->T;
    t->seed = s->seed;
    t->od = spec->obs_dim;
    t->A = spec->action_dim;
    t->nA = spec->num_actions;
    t->lo = spec->action_low;
    t->hi = spec->action_high;
    t->B = (int)calf_config_int(cfg, CALF_CFG_MINI_BATCH_SIZE);
    t->U = (int)calf_config_int(cfg, CALF_CFG_NUM_UPDATES);
    t->initial_collect = calf_config_int(cfg, CALF_CFG_INITIAL_COLLECT_STEPS);
    t->gamma = (float)calf_config_float(cfg, CALF_CFG_TD_GAMMA);
    t->tau = (float)calf_config_float(cfg, CFG_SAC_TAU);
    t->target_period = (int)calf_config_int(cfg, CFG_SAC_TARGET_PERIOD);
    /* None: -|A| (ALF's default) for continuous actions; for discrete ones a fraction of
     * the uniform policy's entropy log(n), low enough that the greedy action can win */
    if (!calf_config_is_none(cfg, CFG_SAC_TARGET_ENTROPY))
        t->target_entropy = (float)calf_config_float(cfg, CFG_SAC_TARGET_ENTROPY);
    else
        t->target_entropy = t->A > 0 ? -(float)t->A : (float)(0.3 * cm_log((double)t->nA));
    const calf_config_value *betas = calf_config_get(cfg, CALF_CFG_ADAM_BETAS);
    adam_conf opt = {.beta1 = (float)betas->tf[0], .beta2 = (float)betas->tf[1],
                     .eps = (float)calf_config_float(cfg, CALF_CFG_ADAM_EPS),
                     .max_norm = calf_config_float(cfg, CALF_CFG_GRADIENT_CLIPPING)};
    adam_conf actor_opt = opt, critic_opt = opt, alpha_opt = opt;
    t->actor_lr = calf_config_float(cfg, CALF_CFG_ACTOR_LR);
    t->critic_lr = calf_config_float(cfg, CALF_CFG_CRITIC_LR);
    t->alpha_lr = calf_config_float(cfg, CALF_CFG_ALPHA_LR);
    t->lr_linear = strcmp(calf_config_string(cfg, CALF_CFG_LR_SCHEDULE), "linear") == 0;
    t->total_iterations = s->total_iterations;
    actor_opt.lr = (float)t->actor_lr;
    critic_opt.lr = (float)t->critic_lr;
    alpha_opt.lr = (float)t->alpha_lr;

    /* networks */
    int ah[CALF_CFG_MAX_TUPLE], ch[CALF_CFG_MAX_TUPLE];
    int na = tuple_ints(cfg, CALF_CFG_SAC_ACTOR_LAYERS, ah);
    int nc = tuple_ints(cfg, CALF_CFG_SAC_CRITIC_LAYERS, ch);
    CALF_ASSERT(na < NN_MAX_LAYERS && nc < NN_MAX_LAYERS);
    size_t cursor = 0;
    if (t->A > 0)
        nn_mlp_layout(&t->actor, t->od, ah, na, 2 * t->A,
                      activation_of(calf_config_string(cfg, CALF_CFG_SAC_ACTOR_ACTIVATION)), &cursor);
    int rc = param_group_init(&t->actor_g, "SACA", cursor, true, actor_opt, err);
    if (rc) return rc; /* sac_destroy frees what was made, here and below */
    cursor = 0;
    int qin = t->A > 0 ? t->od + t->A : t->od, qout = t->A > 0 ? 1 : t->nA;
    nn_activation cact = activation_of(calf_config_string(cfg, CALF_CFG_SAC_CRITIC_ACTIVATION));
    nn_mlp_layout(&t->q1, qin, ch, nc, qout, cact, &cursor);
    nn_mlp_layout(&t->q2, qin, ch, nc, qout, cact, &cursor);
    if ((rc = param_group_init(&t->critic_g, "SACQ", cursor, true, critic_opt, err)) ||
        (rc = param_group_init(&t->target_g, "SACT", cursor, false, opt, err)) ||
        (rc = param_group_init(&t->alpha_g, "SACL", 1, true, alpha_opt, err)))
        return rc;
    /* init from the (seed, 0, CALF_RNG_INIT) stream: actor, then q1, q2 */
    calf_rng rng;
    calf_rng_seed(&rng, s->seed, 0, CALF_RNG_INIT);
    if (t->A > 0) fan_in_init(&t->actor, t->actor_g.params, &rng);
    fan_in_init(&t->q1, t->critic_g.params, &rng);
    fan_in_init(&t->q2, t->critic_g.params, &rng);
    memcpy(t->target_g.params, t->critic_g.params, t->critic_g.n * sizeof(float));
    t->alpha_g.params[0] = (float)calf_config_float(cfg, CFG_SAC_INITIAL_LOG_ALPHA);
    t->actor_ver = t->critic_ver = t->target_ver = 1;

    /* caches: a rollout step's rows or an update's, whichever is more */
    int B = t->B;
    t->cache_rows = t->count > B ? t->count : B;
    if (t->cache_rows < 1) t->cache_rows = 1;
    int rows = t->cache_rows;
    if ((t->A > 0 && (rc = nn_cache_init(&t->actor_cache, &t->actor, rows, err))) ||
        (rc = nn_cache_init(&t->qa_cache, &t->q1, rows, err)) ||
        (rc = nn_cache_init(&t->qb_cache, &t->q2, rows, err)) ||
        (rc = nn_cache_init(&t->ta_cache, &t->q1, rows, err)) ||
        (rc = nn_cache_init(&t->tb_cache, &t->q2, rows, err)))
        return rc;
    size_t R = (size_t)rows, od = (size_t)t->od, A = (size_t)t->A;
    size_t ad = A > 0 ? A : 1, qo = (size_t)qout, qi = (size_t)qin;
    struct {
        void **p;
        size_t n, size;
    } bufs[] = {
        {(void **)&t->obs, R * od, sizeof(float)},   {(void **)&t->next, R * od, sizeof(float)},
        {(void **)&t->act, R * ad, sizeof(float)},   {(void **)&t->rew, R, sizeof(float)},
        {(void **)&t->term, R, 1},                   {(void **)&t->eps, R * ad, sizeof(float)},
        {(void **)&t->eps2, R * ad, sizeof(float)},  {(void **)&t->qin, R * qi, sizeof(float)},
        {(void **)&t->head, R * 2 * ad, sizeof(float)}, {(void **)&t->anew, R * ad, sizeof(float)},
        {(void **)&t->logp, R, sizeof(float)},       {(void **)&t->y, R, sizeof(float)},
        {(void **)&t->qa, R * qo, sizeof(float)},    {(void **)&t->qb, R * qo, sizeof(float)},
        {(void **)&t->ta, R * qo, sizeof(float)},    {(void **)&t->tb, R * qo, sizeof(float)},
        {(void **)&t->dqa, R * qo, sizeof(float)},   {(void **)&t->dqb, R * qo, sizeof(float)},
        {(void **)&t->dxa, R * qi, sizeof(float)},   {(void **)&t->dxb, R * qi, sizeof(float)},
        {(void **)&t->dhead, R * 2 * ad, sizeof(float)}, {(void **)&t->dalpha, R, sizeof(float)},
        {(void **)&t->row_a, ad, sizeof(float)},
    };
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++)
        if (!(*bufs[k].p = mem_calloc(bufs[k].n, bufs[k].size, err))) return CALF_ENOMEM;
    if (t->count == 0) return CALF_OK; /* acting only (calf play) */

    size_t sum_n = t->critic_g.n > t->actor_g.n + 1 ? t->critic_g.n : t->actor_g.n + 1;
    if (!(t->s_env = mem_calloc((size_t)B, sizeof(int), err)) ||
        !(t->s_pos = mem_calloc((size_t)B, sizeof(int64_t), err)) ||
        !(t->order = mem_calloc((size_t)B, sizeof(int), err)) ||
        !(t->offsets = mem_calloc((size_t)t->E + 1, sizeof(int), err)) ||
        !(t->act_rng = mem_calloc((size_t)t->count, sizeof *t->act_rng, err)) ||
        !(t->sum = mem_calloc(sum_n, sizeof(float), err)))
        return CALF_ENOMEM;
    for (int e = 0; e < t->count; e++)
        calf_rng_seed(&t->act_rng[e], s->seed, (uint64_t)(t->begin + e), CALF_RNG_ACTION);
    if ((rc = comm_tree_init(&t->critic_tree, t->critic_g.n, t->E, t->begin, t->count, err)) ||
        (rc = comm_tree_init(&t->actor_tree, t->actor_g.n + 1, t->E, t->begin, t->count, err)))
        return rc;
    int64_t cap = calf_config_int(cfg, CALF_CFG_REPLAY_BUFFER_LENGTH);
    rc = replay_create(&t->rb, t->E, t->begin, t->count, cap, t->od, (int)ad, err);
    if (rc) return rc;
    /* this process's view, private until sac_start finds memory to share */
    t->nviews = 1;
    if (!(t->views = mem_calloc(1, sizeof *t->views, err))) return CALF_ENOMEM;
    t->own = &t->views[0];
    t->own_mem = mem_calloc(1, view_carve(t->own, t, NULL, t->begin, t->count, false), err);
    if (!t->own_mem) return CALF_ENOMEM;
    view_carve(t->own, t, t->own_mem, t->begin, t->count, false);
    t->own->rb = t->rb; /* its rings; update() copies the counters */
    t->stats = t->own->stats;
    return CALF_OK;
}

/* ---- work sharing ----------------------------------------------------------------- */


/* A process's view in shared memory, rings and all (work_share_layout). */
static size_t share_carve(void *view, unsigned char *base, int begin, int count, void *ctx) {
    return view_carve(view, ctx, base, begin, count, true);
}

/* Collective, before the first iteration (after a checkpoint filled the rings): where the
 * processes share memory with room for every process's rings, move them there, so that
 * any process can compute any env's partials (shared_pass). Else nothing changes. */
static int sac_start(algorithm *a, calf_error *err) {
    sac *t = (sac *)a;
    comm *c = t->c;
    int P = comm_size(c);
    work_share_layout lay = {sizeof(sac_view), share_carve, t};
    if (!comm_tree_pieces_supported(c, t->E, t->critic_g.n) ||
        !comm_tree_pieces_supported(c, t->E, t->actor_g.n + 1) ||
        !work_share_fits(c, t->E, 0, &lay))
        return CALF_OK;
    /* what this process needs, before the collective */
    sac_view *views = mem_calloc((size_t)P, sizeof *views, err);
    if (!views) return CALF_ENOMEM;
    int rc = comm_tree_init(&t->critic_steal, t->critic_g.n, t->E, 0, 0, err);
    if (rc == CALF_OK) rc = comm_tree_init(&t->actor_steal, t->actor_g.n + 1, t->E, 0, 0, err);
    if (rc == CALF_OK) rc = work_share_init(&t->share, c, t->E, &lay, views, err);
    if (rc) {
        free(views); /* the steal trees and the share: sac_destroy */
        return rc;
    }
    sac_view *own = &views[c->index];
    /* the rings, stored transitions and all, then the counters */
    memcpy(own->ring, t->rb.owned, replay_bytes(t->count, t->rb.capacity, t->od, t->rb.act_dim));
    own->rb.stored = t->rb.stored;
    own->rb.next_slot = t->rb.next_slot;
    memset(own->stats, 0, (size_t)t->count * NUM_SAC_STATS * sizeof(double));
    replay_free(&t->rb);
    t->rb = own->rb;
    free(t->own_mem);
    t->own_mem = NULL;
    free(t->views);
    t->views = views;
    t->nviews = P;
    t->own = own;
    t->stats = own->stats;
    t->sharing = true;
    return CALF_OK;
}

static int sac_create(const algo_setup *s, algorithm **out, calf_error *err) {
    sac *t = mem_calloc(1, sizeof *t, err);
    *out = (algorithm *)t;
    if (!t) return CALF_ENOMEM;
    int rc = sac_init(t, s, err);
    if (rc) {
        sac_destroy((algorithm *)t);
        t = NULL;
    }
    *out = (algorithm *)t;
    return rc;
}

static void sac_destroy(algorithm *a) {
    sac *t = (sac *)a;
    if (!t) return;
    param_group_free(&t->actor_g);
    param_group_free(&t->critic_g);
    param_group_free(&t->target_g);
    param_group_free(&t->alpha_g);
    replay_free(&t->rb);
    nn_cache_free(&t->actor_cache);
    nn_cache_free(&t->qa_cache);
    nn_cache_free(&t->qb_cache);
    nn_cache_free(&t->ta_cache);
    nn_cache_free(&t->tb_cache);
    comm_tree_free(&t->critic_tree);
    comm_tree_free(&t->actor_tree);
    comm_tree_free(&t->critic_steal);
    comm_tree_free(&t->actor_steal);
    work_share_free(&t->share);
    void *bufs[] = {t->act_rng, t->s_env, t->s_pos, t->order, t->offsets, t->obs, t->next,
                    t->act, t->rew, t->term, t->eps, t->eps2, t->qin, t->head, t->anew,
                    t->logp, t->y, t->qa, t->qb, t->ta, t->tb, t->dqa, t->dqb, t->dxa,
                    t->dxb, t->dhead, t->dalpha, t->sum, t->own_mem, t->views, t->row_a};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(t);
}

/* ---- acting --------------------------------------------------------------------- */

/* min(q1, q2) of discrete critic rows (n each) into out. */
static void min_rows(const float *qa, const float *qb, int rows, int n, float *out) {
    for (size_t i = 0; i < (size_t)rows * n; i++) out[i] = qa[i] < qb[i] ? qa[i] : qb[i];
}

static float alpha_of(const sac *t) { return (float)cm_exp((double)t->alpha_g.params[0]); }

static void sac_act(algorithm *a, int64_t iteration, int s, const float *obs, int *act,
                    float *u) {
    sac *t = (sac *)a;
    int n = t->count, A = t->A;
    int64_t steps_before = (iteration * t->T + s) * (int64_t)t->E;
    if (steps_before < t->initial_collect) {
        /* uniform random actions from each env's own stream */
        for (int e = 0; e < n; e++) {
            if (A == 0) act[e] = (int)calf_rng_below(&t->act_rng[e], (uint32_t)t->nA);
            for (int i = 0; i < A; i++)
                u[(size_t)e * A + i] = (float)calf_rng_uniform_range(&t->act_rng[e], t->lo[i], t->hi[i]);
        }
        return;
    }
    if (A > 0) {
        nn_mlp_forward(&t->actor, t->actor_g.params, obs, n, &t->actor_cache, t->head);
        for (int e = 0; e < n; e++) {
            float *eps = t->row_a;
            for (int i = 0; i < A; i++) eps[i] = (float)calf_rng_normal(&t->act_rng[e]);
            act[e] = 0;
            sac_squashed_sample(A, t->head + (size_t)e * 2 * A, eps, t->lo, t->hi,
                                u + (size_t)e * A, NULL);
        }
        return;
    }
    nn_mlp_forward(&t->q1, t->critic_g.params, obs, n, &t->qa_cache, t->qa);
    nn_mlp_forward(&t->q2, t->critic_g.params, obs, n, &t->qb_cache, t->qb);
    min_rows(t->qa, t->qb, n, t->nA, t->ta);
    float alpha = alpha_of(t);
    for (int e = 0; e < n; e++)
        act[e] = sac_discrete_sample(t->nA, t->ta + (size_t)e * t->nA, alpha,
                                     calf_rng_uniform_double(&t->act_rng[e]));
}

static void sac_observe(algorithm *a, const algo_step *st) {
    sac *t = (sac *)a;
    const float *act = st->u;
    if (t->A == 0) {
        for (int e = 0; e < t->count; e++) t->act[e] = (float)st->act[e];
        act = t->act;
    }
    replay_add_step(&t->rb, st->obs, act, st->reward, st->terminated, st->final_obs);
}

static void sac_greedy(algorithm *a, const float *obs, int rows, int *act, float *u) {
    sac *t = (sac *)a;
    for (int r0 = 0; r0 < rows; r0 += t->cache_rows) {
        int b = rows - r0 < t->cache_rows ? rows - r0 : t->cache_rows;
        const float *x = obs + (size_t)r0 * t->od;
        if (t->A > 0) {
            nn_mlp_forward(&t->actor, t->actor_g.params, x, b, &t->actor_cache, t->head);
            for (int k = 0; k < b; k++) {
                act[r0 + k] = 0;
                sac_squashed_greedy(t->A, t->head + (size_t)k * 2 * t->A, t->lo, t->hi,
                                    u + (size_t)(r0 + k) * t->A);
            }
            continue;
        }
        nn_mlp_forward(&t->q1, t->critic_g.params, x, b, &t->qa_cache, t->qa);
        nn_mlp_forward(&t->q2, t->critic_g.params, x, b, &t->qb_cache, t->qb);
        min_rows(t->qa, t->qb, b, t->nA, t->ta);
        for (int k = 0; k < b; k++) act[r0 + k] = sac_discrete_greedy(t->nA, t->ta + (size_t)k * t->nA);
    }
}

/* What sac_greedy computes: continuous, the actor's mean squashed onto the bounds
 * (sac_squashed_greedy: cm_tanh in double, written out as calf_tanhd); discrete, the argmax of min(Q1, Q2) of
 * the online critics (min_rows, sac_discrete_greedy). */
static int sac_export_c(const algorithm *a, export_c *x, calf_error *err) {
    (void)err;
    const sac *t = (const sac *)a;
    if (t->A > 0) {
        char num[EXPORT_C_NUM];
        export_c_mlp(x, "actor", &t->actor, t->actor_g.params);
        for (int side = 0; side < 2; side++) {
            export_c_body(x, "    static const double %s[%d] = {", side ? "bias" : "scale", t->A);
            for (int i = 0; i < t->A; i++) {
                double scale, bias;
                sac_squash_affine(t->lo[i], t->hi[i], &scale, &bias);
                export_c_body(x, "%s%s", i ? ", " : "", export_c_double(side ? bias : scale, num));
            }
            export_c_body(x, "};\n");
        }
        export_c_body(x,
                      "    float head[%d]; /* means, then log-stds */\n"
                      "    actor_forward(obs, head);\n"
                      "    for (int i = 0; i < %d; i++) action[i] = (float)(scale[i] * calf_tanhd((double)head[i]) + bias[i]);\n"
                      "    return 0;\n",
                      2 * t->A, t->A);
        return CALF_OK;
    }
    export_c_mlp(x, "q1", &t->q1, t->critic_g.params);
    export_c_mlp(x, "q2", &t->q2, t->critic_g.params);
    export_c_body(x,
                  "    float qa[%d], qb[%d], q[%d];\n"
                  "    q1_forward(obs, qa);\n"
                  "    q2_forward(obs, qb);\n"
                  "    for (int j = 0; j < %d; j++) q[j] = qa[j] < qb[j] ? qa[j] : qb[j];\n",
                  t->nA, t->nA, t->nA, t->nA);
    export_c_argmax_return(x, "q", t->nA);
    return CALF_OK;
}

/* ---- one update ------------------------------------------------------------------- */

/* Critic input rows (obs | action) of `rows` rows. */
static void join_rows(const float *x, int od, const float *u, int A, int rows, float *out) {
    for (int r = 0; r < rows; r++) {
        memcpy(out + (size_t)r * (od + A), x + (size_t)r * od, (size_t)od * sizeof(float));
        memcpy(out + (size_t)r * (od + A) + od, u + (size_t)r * A, (size_t)A * sizeof(float));
    }
}

/* The noise of sample j of the update: its own stream, so any process draws it alike. */
static void sample_noise(const sac *t, uint64_t stream, int j, float *eps, float *eps2) {
    calf_rng r;
    calf_rng_seed(&r, t->seed, stream * 0x9E3779B97F4A7C15ULL + (uint64_t)j, CALF_RNG_NOISE);
    for (int i = 0; i < t->A; i++) eps[i] = (float)calf_rng_normal(&r);
    for (int i = 0; i < t->A; i++) eps2[i] = (float)calf_rng_normal(&r);
}

/* This update's rows of envs [first, first + k) of view v: their samples (env by env,
 * within an env in sample order), transitions and noise into the row arrays, each env's
 * rows in [offsets[e], offsets[e + 1]). Returns the number of rows. */
static int gather_rows(sac *t, const sac_view *v, int first, int k) {
    /* the actor pass over the group the critic pass just gathered (always, without
     * sharing) finds its rows still there: the passes write only other arrays */
    if (t->rows.view == v && t->rows.first == first && t->rows.k == k) return t->rows.n;
    int n = replay_select_owned(t->B, t->s_env, v->begin + first, k, t->offsets, t->order);
    replay_gather(&v->rb, n, t->order, t->s_env, t->s_pos, t->obs, t->act, t->rew, t->term,
                  t->next);
    int ad = t->A > 0 ? t->A : 1;
    for (int r = 0; r < n; r++)
        sample_noise(t, t->stream, t->order[r], t->eps + (size_t)r * ad, t->eps2 + (size_t)r * ad);
    t->rows = (struct gathered){v, first, k, n};
    return n;
}

/* The critics' pass over envs [first, first + k) of v: targets y = r + gamma (soft value
 * of next_obs under the target critics), the loss 0.5 (q - y)^2 of each critic (the mean
 * over the job's batch), each env's statistics into v, and each env's partial gradient
 * folded into tree. Discrete actions: the temperature's loss too, from the critics before
 * their step, its gradient left in v->da for the actor pass. */
static void critic_pass(sac *t, const sac_view *v, int first, int k, comm_tree *tree) {
    int od = t->od, A = t->A, nA = t->nA;
    int n = gather_rows(t, v, first, k);
    float alpha = alpha_of(t), log_alpha = t->alpha_g.params[0];
    float scale = 1.0f / (float)t->B;
    const float *cp = t->critic_g.params, *tp = t->target_g.params;

    if (A > 0) {
        nn_mlp_forward_v(&t->actor, t->actor_g.params, t->actor_ver, t->next, n, &t->actor_cache,
                         t->head);
        for (int r = 0; r < n; r++)
            sac_squashed_sample(A, t->head + (size_t)r * 2 * A, t->eps + (size_t)r * A, t->lo,
                                t->hi, t->anew + (size_t)r * A, &t->logp[r]);
        join_rows(t->next, od, t->anew, A, n, t->qin);
        nn_mlp_forward_v(&t->q1, tp, t->target_ver, t->qin, n, &t->ta_cache, t->ta);
        nn_mlp_forward_v(&t->q2, tp, t->target_ver, t->qin, n, &t->tb_cache, t->tb);
        for (int r = 0; r < n; r++)
            t->y[r] = sac_td_target(t->rew[r], t->gamma, t->term[r], t->ta[r], t->tb[r], alpha,
                                    t->logp[r]);
    } else {
        nn_mlp_forward_v(&t->q1, cp, t->critic_ver, t->next, n, &t->qa_cache, t->qa);
        nn_mlp_forward_v(&t->q2, cp, t->critic_ver, t->next, n, &t->qb_cache, t->qb);
        min_rows(t->qa, t->qb, n, nA, t->dqa); /* the policy row at next_obs */
        nn_mlp_forward_v(&t->q1, tp, t->target_ver, t->next, n, &t->ta_cache, t->ta);
        nn_mlp_forward_v(&t->q2, tp, t->target_ver, t->next, n, &t->tb_cache, t->tb);
        for (int r = 0; r < n; r++) {
            size_t o = (size_t)r * nA;
            float val = sac_discrete_next_value(nA, t->dqa + o, alpha, t->ta + o, t->tb + o);
            t->y[r] = sac_td_target_value(t->rew[r], t->gamma, t->term[r], val);
        }
    }

    const float *qx = t->obs;
    if (A > 0) {
        join_rows(t->obs, od, t->act, A, n, t->qin);
        qx = t->qin;
    }
    nn_mlp_forward_v(&t->q1, cp, t->critic_ver, qx, n, &t->qa_cache, t->qa);
    nn_mlp_forward_v(&t->q2, cp, t->critic_ver, qx, n, &t->qb_cache, t->qb);
    for (int e = 0; e < k; e++) {
        double *st = v->stats + (size_t)(first + e) * NUM_SAC_STATS;
        float da = 0.0f;
        for (int r = t->offsets[e]; r < t->offsets[e + 1]; r++) {
            float la, lb;
            if (A > 0) {
                la = sac_critic_loss(t->qa[r], t->y[r], scale, &t->dqa[r]);
                lb = sac_critic_loss(t->qb[r], t->y[r], scale, &t->dqb[r]);
            } else {
                size_t o = (size_t)r * nA;
                int action = (int)t->act[r];
                la = sac_discrete_critic_loss(nA, t->qa + o, action, t->y[r], scale, t->dqa + o);
                lb = sac_discrete_critic_loss(nA, t->qb + o, action, t->y[r], scale, t->dqb + o);
                /* the temperature's loss at obs, from the critics before their step (the
                 * targets' rows are done with: y is formed) */
                min_rows(t->qa + o, t->qb + o, 1, nA, t->ta + o);
                float h = sac_discrete_entropy(nA, t->ta + o, alpha);
                st[SS_ALPHA] += sac_discrete_alpha_loss(log_alpha, h, t->target_entropy, scale,
                                                        &t->dalpha[r]);
                st[SS_ENTROPY] += h;
                da = da + t->dalpha[r];
            }
            st[SS_SAMPLES] += 1;
            st[SS_CRITIC] += (double)la + lb;
        }
        if (A == 0) v->da[first + e] = da;
    }

    int qo = A > 0 ? 1 : nA;
    for (int e = 0; e < k; e++) {
        int r0 = t->offsets[e], cnt = t->offsets[e + 1] - r0;
        float *leaf = comm_tree_leaf(tree);
        nn_mlp_backward(&t->q1, cp, &t->qa_cache, r0, cnt, t->dqa + (size_t)r0 * qo, leaf, NULL);
        nn_mlp_backward(&t->q2, cp, &t->qb_cache, r0, cnt, t->dqb + (size_t)r0 * qo, leaf, NULL);
        comm_tree_push(tree);
    }
}

/* The actor's pass over envs [first, first + k) of v (after the critics' step):
 * continuous, alpha logp - min(q1, q2) at a fresh action through the stepped critics
 * and the temperature's loss -log_alpha (logp + target_entropy); each env's partial, the
 * actor's gradient then d/d log alpha (one more float), folded into tree. */
static void actor_pass(sac *t, const sac_view *v, int first, int k, comm_tree *tree) {
    int od = t->od, A = t->A, qi = A > 0 ? od + A : od;
    size_t an = t->actor_g.n;
    int n = gather_rows(t, v, first, k);
    float alpha = alpha_of(t), log_alpha = t->alpha_g.params[0];
    float scale = 1.0f / (float)t->B;
    const float *cp = t->critic_g.params;
    if (A > 0) {
        nn_mlp_forward_v(&t->actor, t->actor_g.params, t->actor_ver, t->obs, n, &t->actor_cache,
                         t->head);
        for (int r = 0; r < n; r++)
            sac_squashed_sample(A, t->head + (size_t)r * 2 * A, t->eps2 + (size_t)r * A, t->lo,
                                t->hi, t->anew + (size_t)r * A, &t->logp[r]);
        join_rows(t->obs, od, t->anew, A, n, t->qin);
        nn_mlp_forward_v(&t->q1, cp, t->critic_ver, t->qin, n, &t->qa_cache, t->qa);
        nn_mlp_forward_v(&t->q2, cp, t->critic_ver, t->qin, n, &t->qb_cache, t->qb);
        for (int e = 0; e < k; e++) {
            double *st = v->stats + (size_t)(first + e) * NUM_SAC_STATS;
            for (int r = t->offsets[e]; r < t->offsets[e + 1]; r++) {
                sac_actor_result res;
                sac_actor_loss(t->logp[r], t->qa[r], t->qb[r], alpha, scale, &res);
                t->dqa[r] = res.dq1;
                t->dqb[r] = res.dq2;
                st[SS_ACTOR] += res.loss;
                st[SS_ALPHA] += sac_alpha_loss(log_alpha, t->logp[r], t->target_entropy, scale,
                                               &t->dalpha[r]);
                st[SS_ENTROPY] -= t->logp[r];
            }
        }
        nn_mlp_backward(&t->q1, cp, &t->qa_cache, 0, n, t->dqa, NULL, t->dxa);
        nn_mlp_backward(&t->q2, cp, &t->qb_cache, 0, n, t->dqb, NULL, t->dxb);
        for (int r = 0; r < n; r++) {
            float *da = t->row_a;
            const float *xa = t->dxa + (size_t)r * qi + od, *xb = t->dxb + (size_t)r * qi + od;
            for (int i = 0; i < A; i++) da[i] = xa[i] + xb[i];
            sac_squashed_backward(A, t->head + (size_t)r * 2 * A, t->eps2 + (size_t)r * A, t->lo,
                                  t->hi, da, scale * alpha, t->dhead + (size_t)r * 2 * A);
        }
    }
    for (int e = 0; e < k; e++) {
        int r0 = t->offsets[e], cnt = t->offsets[e + 1] - r0;
        float *leaf = comm_tree_leaf(tree);
        float da = 0.0f;
        if (A > 0) {
            nn_mlp_backward(&t->actor, t->actor_g.params, &t->actor_cache, r0, cnt,
                            t->dhead + (size_t)r0 * 2 * A, leaf, NULL);
            for (int r = r0; r < r0 + cnt; r++) da = da + t->dalpha[r];
        } else {
            da = v->da[first + e];
        }
        leaf[an] = da;
        comm_tree_push(tree);
    }
}

typedef void (*env_pass)(sac *t, const sac_view *v, int first, int k, comm_tree *tree);

/* An env_pass as a work_share_pass: envs of a process's view. */
typedef struct shared_pass_ctx {
    sac *t;
    env_pass pass;
} shared_pass_ctx;

static void pass_of_view(void *ctx, int rank, int first, int count, comm_tree *tree) {
    const shared_pass_ctx *pc = ctx;
    pc->pass(pc->t, &pc->t->views[rank], first, count, tree);
}

/* One pass over every env of the job, its partials summed in the canonical tree into
 * out (n floats) on every process. Without sharing a process does its own envs. Sharing,
 * it takes its own a few at a time, then the back half of what a slower process has
 * left (steal: a tree of n floats for those); the pieces complete the same tree. */
static int shared_pass(sac *t, env_pass pass, comm_tree *tree, comm_tree *steal, size_t n,
                       float *out, calf_error *err) {
    if (!t->sharing) {
        pass(t, t->own, 0, t->count, tree);
        return comm_tree_allreduce(t->c, tree, out, err);
    }
    comm_tree_pieces pieces;
    shared_pass_ctx pc = {t, pass};
    work_share_trees trees = {tree, NULL, 0, steal};
    int rc = work_share_sum_round(&t->share, &pieces, n, &trees, 500 * 1000, pass_of_view, &pc,
                                  &t->shared_envs, err);
    if (rc) return rc;
    return comm_tree_pieces_sum(t->c, &pieces, out, err);
}

/* Discrete actions divide the critics by alpha, which must stay above 0 as a float: a
 * log alpha below about -103 makes exp underflow (continuous actions only multiply by it). */
static bool alpha_usable(const sac *t) { return t->A > 0 || alpha_of(t) > 0.0f; }

static int diverged(const sac *t, const char *what, calf_error *err) {
    return calf_error_set(err, CALF_EIO,
                          "iteration %lld: the %s gradient is not finite (training diverged); try "
                          "smaller learning rates (actor/Adam.lr, critic/Adam.lr, alpha/Adam.lr)",
                          (long long)t->iteration + 1, what);
}

static int update(sac *t, int u, calf_error *err) {
    replay_sample(t->seed, t->iteration, u, t->E, t->rb.stored, t->B, t->s_env, t->s_pos);
    t->stream = replay_stream_index(t->iteration, u);
    t->rows.view = NULL; /* new samples */
    for (int r = 0; r < t->nviews; r++) { /* envs step in lockstep: one set of counters */
        t->views[r].rb.stored = t->rb.stored;
        t->views[r].rb.next_slot = t->rb.next_slot;
    }
    int rc = shared_pass(t, critic_pass, &t->critic_tree, &t->critic_steal, t->critic_g.n,
                         t->critic_g.grad, err);
    if (rc) return rc;
    if (!param_group_step(&t->critic_g)) return diverged(t, "critic", err);
    t->critic_ver++;
    size_t an = t->actor_g.n;
    rc = shared_pass(t, actor_pass, &t->actor_tree, &t->actor_steal, an + 1, t->sum, err);
    if (rc) return rc;
    memcpy(t->actor_g.grad, t->sum, an * sizeof(float));
    t->alpha_g.grad[0] = t->sum[an];
    if (t->A > 0 && !param_group_step(&t->actor_g)) return diverged(t, "actor", err);
    t->actor_ver++;
    if (!param_group_step(&t->alpha_g)) return diverged(t, "temperature", err);
    if (!alpha_usable(t))
        return calf_error_set(err, CALF_EIO,
                              "iteration %lld: log alpha fell to %g, where alpha = exp(log alpha) is 0 "
                              "as a float and the discrete policy softmax(Q / alpha) is undefined; "
                              "SacAlgorithm.target_entropy (%g) is below what the policy reaches, or "
                              "alpha/Adam.lr is too large",
                              (long long)t->iteration + 1, (double)t->alpha_g.params[0],
                              (double)t->target_entropy);
    if (t->A == 0) t->actor_g.step++; /* no actor: its (empty) optimizer keeps count */

    t->updates++;
    if (t->updates % t->target_period == 0)
        sac_polyak_update(t->target_g.params, t->critic_g.params, t->critic_g.n, t->tau);
    t->target_ver++;
    return CALF_OK;
}

static int sac_train(algorithm *a, int64_t iteration, calf_error *err) {
    sac *t = (sac *)a;
    t->iteration = iteration;
    if (t->lr_linear) { /* the three optimizers' lr for this iteration, from the iteration */
        t->actor_g.opt.lr = adam_lr_linear_at(t->actor_lr, iteration, t->total_iterations);
        t->critic_g.opt.lr = adam_lr_linear_at(t->critic_lr, iteration, t->total_iterations);
        t->alpha_g.opt.lr = adam_lr_linear_at(t->alpha_lr, iteration, t->total_iterations);
    }
    memset(t->stats, 0, (size_t)t->count * NUM_SAC_STATS * sizeof(double));
    if ((iteration + 1) * (int64_t)t->E * t->T < t->initial_collect) return CALF_OK;
    for (int u = 0; u < t->U; u++) {
        int rc = update(t, u, err);
        if (rc) return rc;
    }
    return CALF_OK;
}

/* ---- summaries, digest, checkpoints ---------------------------------------------- */

static int sac_summarize(algorithm *a, int64_t step, bool histograms, calf_error *err) {
    sac *t = (sac *)a;
    double g[NUM_SAC_STATS];
    int rc = comm_tree_sum_f64(t->c, t->E, t->begin, t->count, t->stats, NUM_SAC_STATS, g, err);
    if (rc) return rc;
    calf_summary_scalar("SacAlgorithm/alpha", step, alpha_of(t));
    if (t->lr_linear) { /* the lr the last train used */
        if (t->A > 0) calf_summary_scalar("Optimizer/actor_learning_rate", step, t->actor_g.opt.lr);
        calf_summary_scalar("Optimizer/critic_learning_rate", step, t->critic_g.opt.lr);
        calf_summary_scalar("Optimizer/alpha_learning_rate", step, t->alpha_g.opt.lr);
    }
    if (g[SS_SAMPLES] > 0) {
        calf_summary_scalar("SacLoss/critic_loss", step, g[SS_CRITIC] / g[SS_SAMPLES]);
        if (t->A > 0) calf_summary_scalar("SacLoss/actor_loss", step, g[SS_ACTOR] / g[SS_SAMPLES]);
        calf_summary_scalar("SacLoss/alpha_loss", step, g[SS_ALPHA] / g[SS_SAMPLES]);
        calf_summary_scalar("SacAlgorithm/entropy", step, g[SS_ENTROPY] / g[SS_SAMPLES]);
    }
    if (histograms) {
        if (t->A > 0)
            calf_summary_histogram("Params/actor", step, t->actor_g.params, t->actor_g.n);
        calf_summary_histogram("Params/critic", step, t->critic_g.params, t->critic_g.n);
        calf_summary_histogram("Grads/critic", step, t->critic_g.grad, t->critic_g.n);
    }
    return CALF_OK;
}

static uint64_t sac_digest(const algorithm *a) {
    const sac *t = (const sac *)a;
    uint64_t h = 0xcbf29ce484222325ULL;
    h = param_group_digest(&t->actor_g, h);
    h = param_group_digest(&t->critic_g, h);
    h = param_group_digest(&t->target_g, h);
    return param_group_digest(&t->alpha_g, h);
}

/* "SACU" the updates done, the four groups, then the replay counters. */
static void sac_save(const algorithm *a, ckpt_buf *b) {
    const sac *t = (const sac *)a;
    ckpt_put_tag(b, "SACU");
    ckpt_put_i64(b, t->updates);
    param_group_save(&t->actor_g, b);
    param_group_save(&t->critic_g, b);
    param_group_save(&t->target_g, b);
    param_group_save(&t->alpha_g, b);
    replay_save_counters(&t->rb, b);
}

static int sac_load(algorithm *a, ckpt_reader *r, int64_t iteration, calf_error *err) {
    sac *t = (sac *)a;
    int64_t updates = 0, want = updates_after(t, iteration);
    ckpt_get_tag(r, "SACU");
    ckpt_get_i64(r, &updates);
    if (r->status) return r->status;
    if (updates != want)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: counters do not match iteration %lld of this config", r->name,
                              (long long)iteration);
    int rc = param_group_load(&t->actor_g, r, want, err);
    if (rc == CALF_OK) rc = param_group_load(&t->critic_g, r, want, err);
    if (rc == CALF_OK) rc = param_group_load(&t->target_g, r, want, err);
    if (rc == CALF_OK) rc = param_group_load(&t->alpha_g, r, want, err);
    if (rc) return rc;
    if (!alpha_usable(t))
        return calf_error_set(err, CALF_EINVAL,
                              "%s: SACL: log alpha %g makes alpha 0, which discrete actions cannot use",
                              r->name, (double)t->alpha_g.params[0]);
    t->actor_ver++, t->critic_ver++, t->target_ver++; /* the values are the checkpoint's */
    t->updates = updates;
    if (t->count == 0) { /* acting only: the replay is not built; skip its counters */
        ckpt_get_tag(r, "RPLC");
        unsigned char skip[8 * 3 + 4 * 2];
        return ckpt_get_bytes(r, skip, sizeof skip);
    }
    if (replay_load_counters(&t->rb, r) != CALF_OK) return r->status;
    /* the counters follow from the iteration too */
    int64_t steps = iteration * t->T;
    int64_t want_stored = steps < t->rb.capacity ? steps : t->rb.capacity;
    if (t->rb.stored != want_stored)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: the replay buffer holds %lld transitions per env, iteration %lld "
                              "implies %lld",
                              r->name, (long long)t->rb.stored, (long long)iteration,
                              (long long)want_stored);
    return CALF_OK;
}

/* Each env's record: its action stream, then its replay ring, oldest first. The rings
 * all hold `stored` transitions, so the records of one checkpoint have one size. */
static size_t ring_record_size(const sac *t) { return replay_env_record_bytes(&t->rb); }

static size_t sac_env_record_size(const algorithm *a) {
    const sac *t = (const sac *)a;
    return BYTES_RNG + ring_record_size(t);
}

static void sac_save_env(const algorithm *a, int e, unsigned char *rec) {
    const sac *t = (const sac *)a;
    bytes_put_rng(rec, &t->act_rng[e]);
    replay_save_env(&t->rb, t->begin + e, rec + BYTES_RNG);
}

static int sac_load_env(algorithm *a, int e, const unsigned char *rec, const char *name,
                        calf_error *err) {
    sac *t = (sac *)a;
    if (!bytes_get_rng(rec, &t->act_rng[e]))
        return calf_error_set(err, CALF_EINVAL, "%s: env %d has an all-zero random stream", name,
                              t->begin + e);
    ckpt_reader r;
    ckpt_reader_init(&r, rec + BYTES_RNG, ring_record_size(t), name, err);
    if (replay_load_env(&t->rb, &r, t->begin + e) != CALF_OK) return r.status;
    return ckpt_reader_finish(&r);
}

static void sac_describe(const algorithm *a, char *text, size_t cap) {
    const sac *t = (const sac *)a;
    char all[32], per[32];
    double per_env = (double)replay_bytes(1, t->rb.capacity, t->od, t->rb.act_dim);
    memory_format(per_env * t->E, all, sizeof all);
    memory_format(per_env, per, sizeof per);
    snprintf(text, cap,
             "replay buffer: %lld transitions per env, %d envs: %s in all (%s per env); each "
             "update samples %d of them uniformly",
             (long long)t->rb.capacity, t->E, all, per, t->B);
    size_t off = strlen(text);
    if (t->lr_linear && off < cap)
        snprintf(text + off, cap - off,
                 "\nAdam.lr_schedule = 'linear': actor, critic and alpha lr %g, %g and %g at "
                 "iteration 0, down to 0 at iteration %lld",
                 t->actor_lr, t->critic_lr, t->alpha_lr, (long long)t->total_iterations);
}

static void sac_report(const algorithm *a, double run_s, char *text, size_t cap) {
    const sac *t = (const sac *)a;
    char mine[32];
    memory_format((double)replay_bytes(t->count, t->rb.capacity, t->od, t->rb.act_dim), mine,
                 sizeof mine);
    snprintf(text, cap,
             "replay: %lld transitions stored per env (capacity %lld, %s on this process); "
             "%lld updates, %.0f updates/s\n",
             (long long)t->rb.stored, (long long)t->rb.capacity, mine, (long long)t->updates,
             run_s > 0 ? (double)t->updates / run_s : 0.0);
    size_t len = strlen(text);
    if (t->sharing && len < cap)
        snprintf(text + len, cap - len,
                 "work sharing: the rings in shared memory; %lld env partials computed for "
                 "other processes\n",
                 (long long)t->shared_envs);
}

const algorithm_ops sac_algorithm_ops = {
    .create = sac_create,
    .destroy = sac_destroy,
    .check = sac_check,
    .check_memory = sac_check_memory,
    .start = sac_start,
    .act = sac_act,
    .observe = sac_observe,
    .train = sac_train,
    .greedy = sac_greedy,
    .export_c = sac_export_c,
    .summarize = sac_summarize,
    .digest = sac_digest,
    .save = sac_save,
    .load = sac_load,
    .env_record_size = sac_env_record_size,
    .save_env = sac_save_env,
    .load_env = sac_load_env,
    .describe = sac_describe,
    .report = sac_report,
};
