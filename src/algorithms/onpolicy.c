/* onpolicy.c: the on-policy core (onpolicy.h): the rollout's storage and the steps that
 * fill it, the values and advantages, observation normalization, the minibatch plan, the
 * update's work-shared gradient and optimiser slices, the rollout's checkpoint records,
 * and the algorithm_ops an algorithm takes as they are, moved out of ppo.c as they were,
 * so that another on-policy algorithm reuses them with PPO's bits. */
#include "algorithms/onpolicy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/onpolicy_math.h"
#include "base/bytes.h"
#include "base/mem.h"
#include "parallel/comm.h"

size_t onpolicy_view_carve(onpolicy_view *v, unsigned char *base, int begin, int count, int T,
                           int od, int ad, int sd, bool keep_val, bool u8, int ai,
                           int mask_bytes, int num_stats) {
    size_t off = 0, nt = (size_t)count * (size_t)T;
    size_t of = u8 ? 0 : sizeof(float), ob = u8 ? 1 : 0; /* bytes of a float, a byte value */
    v->obs = comm_carve(base, &off, nt * (size_t)od * of);
    v->obs8 = comm_carve(base, &off, nt * (size_t)od * ob);
    v->trunc_obs8 = comm_carve(base, &off, nt * (size_t)od * ob);
    v->boot_obs8 = comm_carve(base, &off, (size_t)count * (size_t)od * ob);
    v->act = comm_carve(base, &off, nt * (size_t)ai * sizeof(int));
    v->u = comm_carve(base, &off, nt * (size_t)ad * sizeof(float));
    v->logp = comm_carve(base, &off, nt * sizeof(float));
    v->adv = comm_carve(base, &off, nt * sizeof(float));
    v->ret = comm_carve(base, &off, nt * sizeof(float));
    v->rew = comm_carve(base, &off, nt * sizeof(float));
    v->term = comm_carve(base, &off, nt);
    v->trunc = comm_carve(base, &off, nt);
    v->trunc_obs = comm_carve(base, &off, nt * (size_t)od * of);
    v->boot_obs = comm_carve(base, &off, (size_t)count * (size_t)od * of);
    v->adv_sums = comm_carve(base, &off, (size_t)count * 2 * sizeof(double));
    v->perm = comm_carve(base, &off, nt * sizeof(int));
    v->stats = comm_carve(base, &off, (size_t)count * (size_t)num_stats * sizeof(double));
    size_t rec = sd > 0 ? 1 : 0; /* the recurrent parts: none without cores */
    v->start = comm_carve(base, &off, rec * nt);
    v->state0 = comm_carve(base, &off, (size_t)count * (size_t)sd * sizeof(float));
    v->val = comm_carve(base, &off, (rec || keep_val ? 1 : 0) * nt * sizeof(float));
    v->cut_val = comm_carve(base, &off, rec * nt * sizeof(float));
    v->boot_val = comm_carve(base, &off, rec * (size_t)count * sizeof(float));
    v->mask = comm_carve(base, &off, nt * (size_t)mask_bytes);
    if (!mask_bytes) v->mask = NULL;
    if (base) {
        v->begin = begin;
        v->count = count;
    }
    return off;
}

/* ---- advantages ---- */

int onpolicy_gae_init(onpolicy_gae *g, int T, calf_error *err) {
    float **f[] = {&g->rew, &g->val, &g->next, &g->adv, &g->ret};
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++)
        if (!(*f[k] = mem_calloc((size_t)T, sizeof(float), err))) return CALF_ENOMEM;
    if (!(g->term = mem_calloc((size_t)T, 1, err)) || !(g->ended = mem_calloc((size_t)T, 1, err)))
        return CALF_ENOMEM;
    return CALF_OK;
}

void onpolicy_gae_free(onpolicy_gae *g) {
    void *bufs[] = {g->rew, g->val, g->next, g->adv, g->ret, g->term, g->ended};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    memset(g, 0, sizeof *g);
}

void onpolicy_gae_env(onpolicy_gae *g, onpolicy_view *v, int e, int T, float gamma,
                      float lambda) {
    int vn = v->count;
    for (int s = 0; s < T; s++) {
        size_t i = (size_t)s * vn + (size_t)e;
        g->rew[s] = v->rew[i];
        g->term[s] = v->term[i];
        g->ended[s] = (uint8_t)(v->term[i] | v->trunc[i]);
    }
    onpolicy_gae_advantages(T, g->rew, g->val, g->next, g->term, g->ended, gamma, lambda, g->adv,
                            g->ret);
    double *sums = v->adv_sums + 2 * (size_t)e;
    sums[0] = sums[1] = 0;
    for (int s = 0; s < T; s++) {
        size_t i = (size_t)s * vn + (size_t)e;
        v->adv[i] = g->adv[s];
        v->ret[i] = g->ret[s];
        sums[0] += g->adv[s];
        sums[1] += (double)g->adv[s] * g->adv[s];
    }
}

/* ---- the minibatch plan ---- */

int onpolicy_minibatches_of(int E, int T, int64_t mini_batch_size) {
    int64_t M = ((int64_t)E * T + mini_batch_size - 1) / mini_batch_size;
    if (M < 1) M = 1;
    if (M > T) M = T;
    return (int)M;
}

int onpolicy_sequence_minibatches_of(int E, int T, int64_t mini_batch_size) {
    int64_t M = ((int64_t)E * T + mini_batch_size - 1) / mini_batch_size;
    if (M < 1) M = 1;
    if (M > E) M = E;
    return (int)M;
}

void onpolicy_shuffle(calf_rng *rng, int *perm, int T) {
    for (int i = 0; i < T; i++) perm[i] = i;
    for (int i = T - 1; i > 0; i--) {
        int j = (int)calf_rng_below(rng, (uint32_t)(i + 1));
        int tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
}

/* ---- the on-policy state ---- */

/* Envs per pass through the value net for advantages without sharing: rows enough for
 * long passes, and a bounded copy of the rollout's observations. */
enum { ADV_GROUP_ENVS = 64 };

/* Models of at most this many floats are not shared: with work sharing every rank
 * completes the whole summed gradient and steps its own copy (the same bits everywhere:
 * the same tree, adam_global_norm, the same Adam step), which makes each minibatch one
 * collective instead of three (the gradient; not its norm and the optimiser step). For
 * such models the repeated work (completing ~10^4 floats from a few blocks, one Adam
 * step) costs microseconds, less than two meetings of the ranks; on ppo_halfcheetah's
 * 320 minibatches of 64 samples per iteration the meetings were the cost of --nproc 2
 * (bench/README.md, "MuJoCo training"). Larger models keep the split completion. */
enum { PRIVATE_MODEL_MAX = 65536 };

/* A rank's slice of the gradient holds whole norm chunks (see grad_norm). */
_Static_assert(COMM_SLICE_ELEMS % ADAM_NORM_CHUNK == 0, "slices must hold whole norm chunks");

/* The model every rank steps a slice of when sharing, in rank 0's region: params, m, v,
 * then each norm chunk's squared gradient (the gradient itself is where the split sum
 * lands). shared_state_at(md, SHARED_END) is the region's size. */
enum { SHARED_PARAMS, SHARED_M, SHARED_V, SHARED_NORM_PARTS, SHARED_END };
static size_t shared_state_at(const ac_model *md, int part) {
    size_t vec = comm_round64(md->g.n * sizeof(float));
    size_t chunks = (md->g.n + ADAM_NORM_CHUNK - 1) / ADAM_NORM_CHUNK;
    return part <= SHARED_NORM_PARTS ? (size_t)part * vec : 3 * vec + chunks * sizeof(double);
}

/* A rank's view in shared memory (work_share_layout). */
static size_t share_carve(void *view, unsigned char *base, int begin, int count, void *ctx) {
    const onpolicy *op = ctx;
    const ac_model *md = op->md;
    int ad = md->action_dim > 0 ? md->action_dim : 1;
    return onpolicy_view_carve(view, base, begin, count, op->T, md->obs_dim, ad, md->state_dim,
                               op->cf.keep_values, op->u8, md->action_ints,
                               md->masked ? md->num_actions : 0, op->cf.num_stats);
}

/* Every rank's rollout in memory all ranks share (when the backend has it and the piece
 * sum fits its arena: the same answer everywhere), else this rank's own, private. */
static int views_init(onpolicy *op, calf_error *err) {
    comm *c = op->c;
    const ac_model *md = op->md;
    int P = comm_size(c), T = op->T, od = md->obs_dim;
    int ad = md->action_dim > 0 ? md->action_dim : 1;
    /* Everything sharing puts in shared memory, every rank's, must fit in what is left of
     * it (all decide alike); else each rank keeps its rollout to itself, as without shared
     * memory: the views, the model, and every rank's tree buffers. */
    work_share_layout lay = {sizeof(onpolicy_view), share_carve, op};
    size_t state = comm_round64(shared_state_at(md, SHARED_END));
    size_t trees = comm_round64(comm_tree_shared_bytes(op->E, md->g.n, ONPOLICY_STEAL_SETS));
    size_t extra = trees > (SIZE_MAX - state) / (size_t)P ? SIZE_MAX : state + (size_t)P * trees;
    op->sharing = comm_tree_pieces_supported(c, op->E, md->g.n) &&
                  work_share_fits(c, op->E, extra, &lay);
    if (!op->sharing) {
        onpolicy_view scratch;
        int ai = md->action_ints, mb = md->masked ? md->num_actions : 0;
        bool kv = op->cf.keep_values;
        size_t bytes = onpolicy_view_carve(&scratch, NULL, op->begin, op->count, T, od, ad,
                                           md->state_dim, kv, op->u8, ai, mb, op->cf.num_stats);
        if (!(op->views = mem_calloc(1, sizeof *op->views, err)) ||
            !(op->view_mem = mem_calloc(1, bytes, err)))
            return CALF_ENOMEM; /* onpolicy_free frees what was made */
        onpolicy_view_carve(&op->views[0], op->view_mem, op->begin, op->count, T, od, ad,
                            md->state_dim, kv, op->u8, ai, mb, op->cf.num_stats);
        op->own = &op->views[0];
        return CALF_OK;
    }
    /* what this rank needs before work_share_init's collective */
    if (!(op->views = mem_calloc((size_t)P, sizeof *op->views, err))) return CALF_ENOMEM;
    op->own = &op->views[c->index];
    int rc = comm_tree_init(&op->steal_tree, md->g.n, op->E, 0, 0, err);
    if (rc == CALF_OK) rc = work_share_init(&op->share, c, op->E, &lay, op->views, err);
    return rc;
}

/* The update's trees and, sharing a model larger than PRIVATE_MODEL_MAX, its region in
 * shared memory and this rank's slice of it (collective). */
static int gradient_init(onpolicy *op, calf_error *err) {
    comm *c = op->c;
    size_t n = op->md->g.n;
    int rc = comm_tree_init(&op->tree, n, op->E, op->begin, op->count, err);
    if (rc) return rc;
    op->opt_lo = 0;
    op->opt_hi = n;
    /* sharing: the other ranks read this rank's blocks where they are folded, its own
     * envs' and the first ones it takes from others */
    op->shared_model = op->sharing && n > PRIVATE_MODEL_MAX;
    if (!op->shared_model) return CALF_OK;
    /* what can be, before the collectives */
    void **all = mem_calloc((size_t)c->size, sizeof *all, err);
    if (!all) return CALF_ENOMEM;
    for (int i = 0; rc == CALF_OK && i < ONPOLICY_STEAL_SETS; i++)
        rc = comm_tree_init(&op->steal_shared[i], n, op->E, 0, 0, err);
    if (rc == CALF_OK) rc = comm_tree_share_buffers(c, &op->tree, ONPOLICY_STEAL_SETS, err);
    for (int i = 0; rc == CALF_OK && i < ONPOLICY_STEAL_SETS; i++)
        rc = comm_tree_share_set(&op->steal_shared[i], &op->tree, i + 1, err);
    if (rc == CALF_OK)
        rc = comm_shared_alloc(c, c->index == 0 ? shared_state_at(op->md, SHARED_END) : 0, all,
                               err);
    if (rc == CALF_OK) {
        op->shared_state = all[0];
        op->norm_parts = (double *)(void *)(op->shared_state +
                                            shared_state_at(op->md, SHARED_NORM_PARTS));
        comm_slice(c, n, &op->opt_lo, &op->opt_hi);
    }
    free(all);
    return rc;
}

/* What recurrent cores add: every env's state (zero, each env about to start an episode),
 * the acting scratch, and the epoch's plan of whole env sequences (every rank draws the
 * same). */
static int recurrent_init(onpolicy *op, calf_error *err) {
    const ac_model *md = op->md;
    int n = op->count;
    int rc = ac_rec_act_init(&op->ract, md, err);
    if (rc || n == 0) return rc; /* acting only (calf play) */
    if ((rc = ac_rec_state_init(&op->rstate, md, n, err))) return rc;
    size_t E = (size_t)op->E;
    if (!(op->next_start = mem_calloc((size_t)n, 1, err)) ||
        !(op->plan = mem_calloc(E, sizeof(int), err)) ||
        !(op->mb_of = mem_calloc(E, sizeof(int), err)))
        return CALF_ENOMEM;
    memset(op->next_start, 1, (size_t)n);
    return CALF_OK;
}

int onpolicy_init(onpolicy *op, const algo_setup *s, ac_model *md, const onpolicy_conf *cf,
                  calf_error *err) {
    const calf_config *cfg = s->cfg;
    op->c = s->c;
    op->E = s->E;
    op->T = s->T;
    op->begin = s->begin;
    op->count = s->count;
    op->seed = s->seed;
    op->md = md;
    op->cf = *cf;
    op->u8 = s->spec->obs_dtype == CALF_DTYPE_U8;
    op->normalize_obs = calf_config_bool(cfg, CALF_CFG_NORMALIZE_OBS);
    op->mini_batch_size = calf_config_int(cfg, CALF_CFG_MINI_BATCH_SIZE);
    op->M = md->state_dim ? onpolicy_sequence_minibatches_of(op->E, op->T, op->mini_batch_size)
                          : onpolicy_minibatches_of(op->E, op->T, op->mini_batch_size);
    int rc = md->state_dim ? recurrent_init(op, err) : CALF_OK;
    if (rc == CALF_OK && op->normalize_obs)
        rc = obs_norm_init(&op->onorm, md->obs_dim,
                           (float)calf_config_float(cfg, CALF_CFG_OBS_CLIPPING), err);
    if (rc == CALF_OK)
        rc = ac_policy_init(&op->pol, md, op->normalize_obs ? &op->onorm : NULL, err);
    if (rc || op->count == 0) return rc; /* count 0: acting only (calf play) */
    int n = op->count, T = op->T, od = md->obs_dim, hd = md->head_dim;
    if (op->normalize_obs &&
        !(op->norm_acc = mem_calloc((size_t)n * OBS_NORM_ACC(od), sizeof(double), err)))
        return CALF_ENOMEM;
    if (op->u8 && !(op->act_in = mem_calloc((size_t)n * od, sizeof(float), err)))
        return CALF_ENOMEM;
    if ((rc = views_init(op, err))) return rc;
    /* Without sharing a minibatch's rows go through the nets in one pass; with it, a few
     * envs at a time, so that another rank can take what is left. */
    op->group_envs = op->sharing ? WORK_SHARE_GROUP_ENVS : (n > 0 ? n : 1);
    int max_chunk = (T + op->M - 1) / op->M;
    int cache_envs = n > op->group_envs ? n : op->group_envs;
    op->cache_rows = cache_envs * max_chunk; /* >= n: a minibatch, or one timestep of every env */
    if ((rc = net_cache_init(&op->a_cache, &md->actor, op->cache_rows, err)) ||
        (rc = net_cache_init(&op->v_cache, &md->value, op->cache_rows, err)))
        return rc;
    if (!(op->act_rng = mem_calloc((size_t)n, sizeof *op->act_rng, err)) ||
        !(op->shuf_rng = mem_calloc((size_t)n, sizeof *op->shuf_rng, err)))
        return CALF_ENOMEM;
    for (int e = 0; e < n; e++) {
        calf_rng_seed(&op->act_rng[e], s->seed, (uint64_t)(op->begin + e), CALF_RNG_ACTION);
        calf_rng_seed(&op->shuf_rng[e], s->seed, (uint64_t)(op->begin + e), CALF_RNG_SHUFFLE);
    }
    /* advantages: sharing, a few envs at a time (what is left stays fine grained for
     * others to take); alone, many, for long passes through the value net */
    int alone = n < 1 ? 1 : n < ADV_GROUP_ENVS ? n : ADV_GROUP_ENVS;
    op->adv_group = op->sharing ? WORK_SHARE_GROUP_ENVS : alone;
    size_t grp_rows = (size_t)op->adv_group * (size_t)(T + 1);
    if (!(op->grp_obs = mem_calloc(grp_rows * (size_t)od, sizeof(float), err)) ||
        !(op->grp_val = mem_calloc(grp_rows, sizeof(float), err)) ||
        !(op->grp_next = mem_calloc(grp_rows, sizeof(float), err)) ||
        !(op->grp_trunc = mem_calloc(grp_rows, sizeof(int), err)) ||
        !(op->grp_cut_val = mem_calloc(grp_rows, sizeof(float), err)) ||
        !(op->head = mem_calloc((size_t)op->cache_rows * (size_t)hd, sizeof(float), err)))
        return CALF_ENOMEM;
    if ((rc = onpolicy_gae_init(&op->gae, T, err))) return rc;
    size_t M = (size_t)op->M;
    if (op->cf.adv_norm == ONPOLICY_ADV_MINIBATCH &&
        (!(op->mb_sums = mem_calloc((size_t)n * M * 2, sizeof(double), err)) ||
         !(op->mb_tot = mem_calloc(M * 2, sizeof(double), err)) ||
         !(op->mb_mean = mem_calloc(M, sizeof(float), err)) ||
         !(op->mb_inv = mem_calloc(M, sizeof(float), err))))
        return CALF_ENOMEM;
    return gradient_init(op, err);
}

/* Sharing: from here on all ranks use one model in shared memory, with rank 0's values
 * (all hold the same: they initialised it alike or loaded the same checkpoint), and
 * the gradient is the vector the split sum lands in. */
int onpolicy_start(onpolicy *op, calf_error *err) {
    if (!op->shared_model) return CALF_OK;
    ac_model *md = op->md;
    size_t n = md->g.n;
    float *params = (float *)(void *)(op->shared_state + shared_state_at(md, SHARED_PARAMS));
    float *m = (float *)(void *)(op->shared_state + shared_state_at(md, SHARED_M));
    float *v = (float *)(void *)(op->shared_state + shared_state_at(md, SHARED_V));
    if (op->c->index == 0) {
        memcpy(params, md->g.params, n * sizeof(float));
        memcpy(m, md->g.m, n * sizeof(float));
        memcpy(v, md->g.v, n * sizeof(float));
    }
    int rc = comm_barrier(op->c, err);
    if (rc == CALF_OK) ac_model_use_state(md, params, m, v, comm_tree_shared_sum(&op->tree));
    return rc;
}

void onpolicy_free(onpolicy *op) {
    ac_policy_free(&op->pol);
    ac_rec_state_free(&op->rstate);
    ac_rec_act_free(&op->ract);
    onpolicy_gae_free(&op->gae);
    net_cache_free(&op->a_cache);
    net_cache_free(&op->v_cache);
    obs_norm_free(&op->onorm);
    work_share_free(&op->share);
    comm_tree_free(&op->tree);
    comm_tree_free(&op->steal_tree);
    for (int i = 0; i < ONPOLICY_STEAL_SETS; i++) comm_tree_free(&op->steal_shared[i]);
    void *bufs[] = {op->act_rng, op->shuf_rng, op->view_mem, op->views, op->head,
                    op->grp_obs, op->grp_val, op->grp_next, op->grp_trunc, op->grp_cut_val,
                    op->norm_acc, op->next_start, op->plan, op->mb_of, op->act_in,
                    op->mb_sums, op->mb_tot, op->mb_mean, op->mb_inv};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    memset(op, 0, sizeof *op);
}

/* ---- observations kept as bytes ---------------------------------------------
 * With a CALF_DTYPE_U8 env the rollout keeps each observation as the env's bytes, a
 * quarter of the floats' memory: x as (uint8_t)x, exact for the integers 0..255 such an
 * env writes (vec_env checks them). They are turned back into the floats the networks
 * take where they are read, (float)b, normalized when configured: the statistics stay
 * fixed through the iteration, so that is the same floats a float rollout keeps. */

/* rows observations (rows * obs_dim floats) as bytes */
static void obs_to_bytes(const onpolicy *op, const float *x, int rows, uint8_t *b) {
    size_t n = (size_t)rows * (size_t)op->md->obs_dim;
    for (size_t k = 0; k < n; k++) b[k] = (uint8_t)x[k];
}

/* rows observations from row i of a step's floats x as bytes: the block's own bytes b
 * when the trainer keeps them (the same values), else x narrowed */
static void step_bytes(const onpolicy *op, const float *x, const uint8_t *b, size_t i, int rows,
                       uint8_t *out) {
    size_t od = (size_t)op->md->obs_dim;
    if (b) memcpy(out, b + i * od, (size_t)rows * od);
    else obs_to_bytes(op, x + i * od, rows, out);
}

void onpolicy_obs_rows(const onpolicy *op, const float *f, const uint8_t *b, size_t i, int rows,
                       float *y) {
    size_t od = (size_t)op->md->obs_dim, n = (size_t)rows * od;
    if (!op->u8) {
        memcpy(y, f + i * od, n * sizeof(float));
        return;
    }
    for (size_t k = 0; k < n; k++) y[k] = (float)b[i * od + k];
    if (op->normalize_obs) obs_norm_apply(&op->onorm, y, rows, y);
}

/* Observations as the networks take them: normalized when configured. */
static void obs_in(const onpolicy *op, const float *x, /* (rows, obs_dim) */ int rows,
                   float *y /* (rows, obs_dim) */) {
    if (op->normalize_obs) obs_norm_apply(&op->onorm, x, rows, y);
    else memcpy(y, x, (size_t)rows * (size_t)op->md->obs_dim * sizeof(float));
}

/* ---- the rollout's steps ---- */

/* Recurrent cores: every env's state steps on x (after the reset of an env whose episode
 * starts here), the actor's rows into op->head and the values kept for the advantages; at
 * step 0 the states the update will start from. */
static void act_recurrent(onpolicy *op, int s, const float *x /* (count, obs_dim) */) {
    const ac_model *md = op->md;
    int n = op->count, sd = md->state_dim;
    size_t base = (size_t)s * n;
    if (s == 0)
        for (int e = 0; e < n; e++)
            ac_rec_state_get(&op->rstate, md, e, op->own->state0 + (size_t)e * sd);
    uint8_t *start = op->own->start + base;
    memcpy(start, op->next_start, (size_t)n);
    ac_rec_step(md, md->g.params, &op->rstate, x, start, n, &op->a_cache, op->head,
                &op->v_cache, op->own->val + base);
}

void onpolicy_act(onpolicy *op, int s, const float *obs, const uint8_t *mask, int *act,
                  float *u) {
    const ac_model *md = op->md;
    onpolicy_view *v = op->own;
    int n = op->count, od = md->obs_dim, hd = md->head_dim, ad = md->action_dim;
    size_t base = (size_t)s * n;
    /* (n, obs_dim) what the policy acts on: kept, or made from the bytes kept */
    float *x = op->u8 ? op->act_in : v->obs + base * od;
    if (op->normalize_obs) {
        size_t acc = OBS_NORM_ACC(od);
        if (s == 0) memset(op->norm_acc, 0, (size_t)n * acc * sizeof(double));
        for (int e = 0; e < n; e++)
            obs_norm_accumulate(&op->onorm, obs + (size_t)e * od, op->norm_acc + (size_t)e * acc);
    }
    if (op->u8) {
        obs_to_bytes(op, obs, n, v->obs8 + base * od);
        onpolicy_obs_rows(op, NULL, v->obs8, base, n, x);
    } else if (op->normalize_obs) {
        obs_norm_apply(&op->onorm, obs, n, x);
    } else {
        memcpy(x, obs, (size_t)n * od * sizeof(float));
    }
    if (md->state_dim) act_recurrent(op, s, x);
    else net_forward(&md->actor, md->g.params, x, n, &op->a_cache, op->head);
    int ai = md->action_ints, nA = md->num_actions;
    uint8_t *mk = NULL; /* (n, nA) this step's masks, kept for the update */
    if (md->masked) {
        mk = v->mask + base * nA;
        memcpy(mk, mask, (size_t)n * nA);
    }
    for (int e = 0; e < n; e++) {
        size_t i = base + (size_t)e;
        v->logp[i] = ac_model_sample(md, md->g.params, op->head + (size_t)e * hd,
                                     mk ? mk + (size_t)e * nA : NULL, &op->act_rng[e],
                                     &v->act[i * ai], ad ? v->u + i * ad : NULL);
    }
    memcpy(act, v->act + base * ai, (size_t)n * ai * sizeof(int));
    if (ad) memcpy(u, v->u + base * ad, (size_t)n * ad * sizeof(float));
}

/* Recurrent cores: which envs start an episode at the next step, and the values that
 * look one observation ahead of an env's state (V(final obs) where truncated; at the last
 * step, V(next obs) to bootstrap), as the advantages need them. */
static void observe_recurrent(onpolicy *op, const algo_step *st) {
    const ac_model *md = op->md;
    onpolicy_view *v = op->own;
    int n = op->count, od = md->obs_dim;
    size_t base = (size_t)st->s * n;
    /* the observations as the value net takes them (made from the bytes kept, in act_in,
     * which this step's acting is done with) */
    float *x = op->act_in;
    for (int e = 0; e < n; e++) {
        size_t i = base + (size_t)e;
        if (st->truncated[e]) {
            const float *xe = op->u8 ? x : v->trunc_obs + i * od;
            if (op->u8) onpolicy_obs_rows(op, v->trunc_obs, v->trunc_obs8, i, 1, x);
            v->cut_val[i] = ac_rec_peek_value(md, md->g.params, &op->ract, &op->rstate, e, xe,
                                              false, &op->v_cache);
        }
        op->next_start[e] = (uint8_t)(st->terminated[e] | st->truncated[e]);
    }
    if (st->s == op->T - 1) {
        if (op->u8) onpolicy_obs_rows(op, v->boot_obs, v->boot_obs8, 0, n, x);
        const float *xb = op->u8 ? x : v->boot_obs;
        for (int e = 0; e < n; e++)
            v->boot_val[e] = ac_rec_peek_value(md, md->g.params, &op->ract, &op->rstate, e,
                                               xb + (size_t)e * od, op->next_start[e],
                                               &op->v_cache);
    }
}

void onpolicy_observe(onpolicy *op, const algo_step *st) {
    onpolicy_view *v = op->own;
    int n = op->count, od = op->md->obs_dim;
    size_t base = (size_t)st->s * n;
    memcpy(v->rew + base, st->reward, (size_t)n * sizeof(float));
    memcpy(v->term + base, st->terminated, (size_t)n);
    memcpy(v->trunc + base, st->truncated, (size_t)n);
    for (int e = 0; e < n; e++)
        if (st->truncated[e] && op->u8)
            step_bytes(op, st->final_obs, st->final_obs8, (size_t)e, 1,
                       v->trunc_obs8 + (base + (size_t)e) * od);
        else if (st->truncated[e])
            obs_in(op, st->final_obs + (size_t)e * od, 1, v->trunc_obs + (base + (size_t)e) * od);
    /* what the advantages need besides: the observation each env's next step would see */
    if (st->s == op->T - 1 && op->u8)
        step_bytes(op, st->next_obs, st->next_obs8, 0, n, v->boot_obs8);
    else if (st->s == op->T - 1) obs_in(op, st->next_obs, n, v->boot_obs);
    if (op->md->state_dim) observe_recurrent(op, st);
}

/* ---- the values and advantages ---- */

/* values of `rows` observations (rows may exceed the cache: done in slices) */
static void value_of(onpolicy *op, const float *x, /* (rows, obs_dim) */ int rows,
                     float *out /* (rows) */) {
    const ac_model *md = op->md;
    int od = md->obs_dim;
    for (int r0 = 0; r0 < rows; r0 += op->cache_rows) {
        int b = rows - r0 < op->cache_rows ? rows - r0 : op->cache_rows;
        net_forward(&md->value, md->g.params, x + (size_t)r0 * od, b, &op->v_cache, out + r0);
    }
}

/* Values, GAE advantages and returns, and the advantage sums of envs [first, first+cnt)
 * of view v (cnt <= adv_group): V(obs) of every step, V(obs after the last step) to
 * bootstrap, and V(final obs) where an episode was cut by the time limit. Every value is
 * a row of its own through the net, so the bits depend neither on the grouping nor on
 * which rank runs it. */
static void advantages_group(onpolicy *op, onpolicy_view *v, int first, int cnt) {
    CALF_ASSERT(cnt >= 0 && cnt <= op->adv_group);
    int T = op->T, vn = v->count, od = op->md->obs_dim;
    /* rows k*T + s: env first+k at step s; rows cnt*T + k: its bootstrap observation */
    for (int k = 0; k < cnt; k++)
        for (int s = 0; s < T; s++)
            onpolicy_obs_rows(op, v->obs, v->obs8, (size_t)s * vn + (size_t)(first + k), 1,
                              op->grp_obs + ((size_t)k * T + s) * od);
    onpolicy_obs_rows(op, v->boot_obs, v->boot_obs8, (size_t)first, cnt,
                      op->grp_obs + (size_t)cnt * T * od);
    value_of(op, op->grp_obs, cnt * (T + 1), op->grp_val);
    int cut = 0;
    for (int k = 0; k < cnt; k++)
        for (int s = 0; s < T; s++) {
            size_t r = (size_t)k * T + s, i = (size_t)s * vn + (size_t)(first + k);
            op->grp_next[r] = s + 1 < T ? op->grp_val[r + 1] : op->grp_val[(size_t)cnt * T + k];
            if (v->trunc[i]) {
                onpolicy_obs_rows(op, v->trunc_obs, v->trunc_obs8, i, 1,
                                  op->grp_obs + (size_t)cut * od);
                op->grp_trunc[cut++] = (int)r;
            }
        }
    if (cut > 0) {
        value_of(op, op->grp_obs, cut, op->grp_cut_val);
        for (int j = 0; j < cut; j++) op->grp_next[op->grp_trunc[j]] = op->grp_cut_val[j];
    }
    for (int k = 0; k < cnt; k++) {
        int e = first + k;
        for (int s = 0; s < T; s++) {
            size_t r = (size_t)k * T + s;
            op->gae.val[s] = op->grp_val[r];
            op->gae.next[s] = op->grp_next[r];
            if (op->cf.keep_values) v->val[(size_t)s * vn + (size_t)e] = op->grp_val[r];
        }
        onpolicy_gae_env(&op->gae, v, e, op->T, op->cf.gamma, op->cf.lambda);
    }
}

/* The same with recurrent cores, from the values computed while acting (each env's state
 * carried along: a row can no longer go through the net on its own). */
static void advantages_stored(onpolicy *op, onpolicy_view *v, int first, int cnt) {
    int T = op->T, vn = v->count;
    for (int e = first; e < first + cnt; e++) {
        for (int s = 0; s < T; s++) {
            size_t i = (size_t)s * vn + (size_t)e;
            op->gae.val[s] = v->val[i];
            op->gae.next[s] = v->trunc[i] ? v->cut_val[i]
                              : s + 1 < T ? v->val[i + (size_t)vn]
                                          : v->boot_val[e];
        }
        onpolicy_gae_env(&op->gae, v, e, op->T, op->cf.gamma, op->cf.lambda);
    }
}

/* The same for envs [first, first+cnt) of v, adv_group at a time. */
static void advantages_envs(onpolicy *op, onpolicy_view *v, int first, int cnt) {
    if (op->md->state_dim) {
        advantages_stored(op, v, first, cnt);
        return;
    }
    for (int g = first; g < first + cnt; g += op->adv_group)
        advantages_group(op, v, g,
                         first + cnt - g < op->adv_group ? first + cnt - g : op->adv_group);
}

/* Sharing, a rank that is done with its own envs takes the back half of what a slower
 * rank has left, so a rank that finished its rollout first does not just wait. */
int onpolicy_advantages(onpolicy *op, calf_error *err) {
    int n = op->count, T = op->T, rc;
    if (!op->sharing) {
        advantages_envs(op, op->own, 0, n);
    } else {
        /* a slow rank's nap is longer than in a minibatch: the others first finish
         * their own advantages */
        work_round r;
        work_share_open(&op->share, &r, 1000 * 1000);
        int first, k, rank;
        while ((k = work_share_own(&r, &first)) > 0) advantages_envs(op, op->own, first, k);
        while ((k = work_share_other(&r, &rank, &first)) > 0) {
            advantages_envs(op, &op->views[rank], first, k);
            op->shared_adv_envs += k;
        }
        /* everyone's advantages are in place before any are summed, normalised or read */
        if ((rc = comm_barrier(op->c, err))) return rc;
    }
    if (op->cf.adv_norm != ONPOLICY_ADV_BATCH) return CALF_OK;
    /* whole-batch mean and (population) std, summed over envs in canonical order */
    double tot[2];
    rc = comm_tree_sum_f64(op->c, op->E, op->begin, n, op->own->adv_sums, 2, tot, err);
    if (rc) return rc;
    float fmean, inv;
    onpolicy_adv_scale(tot[0], tot[1], (double)op->E * T, &fmean, &inv);
    float *adv = op->own->adv;
    for (size_t i = 0; i < (size_t)n * T; i++) adv[i] = (adv[i] - fmean) * inv;
    return CALF_OK;
}

/* With recurrent cores, an epoch's minibatches are whole env sequences: the E envs
 * shuffled by the (seed, iteration << 20 | epoch, CALF_RNG_PLAN) stream, minibatch m the
 * m-th of M nearly equal chunks of that order. Every rank draws the same plan, so it does
 * not depend on the number of processes. */
void onpolicy_plan_epoch(onpolicy *op, int64_t iteration, int epoch) {
    int T = op->T;
    if (!op->md->state_dim) {
        for (int e = 0; e < op->count; e++)
            onpolicy_shuffle(&op->shuf_rng[e], op->own->perm + (size_t)e * T, T);
        return;
    }
    calf_rng r;
    calf_rng_seed(&r, op->seed, ((uint64_t)iteration << 20) | (uint64_t)epoch, CALF_RNG_PLAN);
    onpolicy_shuffle(&r, op->plan, op->E);
    for (int m = 0; m < op->M; m++) {
        int off, len;
        onpolicy_chunk_range(op->E, op->M, m, &off, &len);
        for (int j = off; j < off + len; j++) op->mb_of[op->plan[j]] = m;
    }
}

int onpolicy_minibatch_scales(onpolicy *op, calf_error *err) {
    if (op->cf.adv_norm != ONPOLICY_ADV_MINIBATCH) return CALF_OK;
    int n = op->count, T = op->T, M = op->M;
    const onpolicy_view *v = op->own;
    for (int e = 0; e < n; e++) {
        double *sums = op->mb_sums + (size_t)e * M * 2;
        if (!op->md->state_dim) {
            onpolicy_chunk_sums(T, M, v->perm + (size_t)e * T, v->adv + e, (size_t)n, sums);
            continue;
        }
        /* whole sequences: the env's sums (onpolicy_gae_env's) are its minibatch's part */
        memset(sums, 0, (size_t)M * 2 * sizeof(double));
        int m = op->mb_of[op->begin + e];
        sums[2 * m] = v->adv_sums[2 * (size_t)e];
        sums[2 * m + 1] = v->adv_sums[2 * (size_t)e + 1];
    }
    int rc = comm_tree_sum_f64(op->c, op->E, op->begin, n, op->mb_sums, (size_t)M * 2,
                               op->mb_tot, err);
    if (rc) return rc;
    double all = 0; /* the minibatches' samples, which make up the batch */
    for (int m = 0; m < M; m++) {
        int off, len;
        onpolicy_chunk_range(op->md->state_dim ? op->E : T, M, m, &off, &len);
        double samples = op->md->state_dim ? (double)len * T : (double)op->E * len;
        onpolicy_adv_scale(op->mb_tot[2 * m], op->mb_tot[2 * m + 1], samples, &op->mb_mean[m],
                           &op->mb_inv[m]);
        all += samples;
    }
    CALF_ASSERT(all == (double)op->E * T);
    return CALF_OK;
}

/* Each env's sums, added over envs in canonical order, are merged once (collective). */
int onpolicy_merge_obs_norm(onpolicy *op, calf_error *err) {
    if (!op->normalize_obs) return CALF_OK;
    size_t acc = OBS_NORM_ACC(op->md->obs_dim);
    double *sum = mem_calloc(acc, sizeof(double), err);
    if (!sum) return CALF_ENOMEM; /* before the collective */
    int rc = comm_tree_sum_f64(op->c, op->E, op->begin, op->count, op->norm_acc, acc, sum, err);
    if (rc == CALF_OK) obs_norm_merge(&op->onorm, (int64_t)op->E * op->T, sum);
    free(sum);
    return rc;
}

/* ---- the update ---- */

/* onpolicy_gradient's pass as a work_share_pass: one minibatch's envs of a rank's view. */
typedef struct grad_ctx {
    const onpolicy *op;
    onpolicy_grad_pass pass;
    void *ctx;
} grad_ctx;

static void grad_pass(void *ctx, int rank, int first, int count, comm_tree *tree) {
    const grad_ctx *g = ctx;
    g->pass(g->ctx, &g->op->views[rank], first, count, tree);
}

static int gradient(onpolicy *op, onpolicy_grad_pass pass, void *ctx, calf_error *err) {
    ac_model *md = op->md;
    if (!op->sharing) {
        pass(ctx, op->own, 0, op->count, &op->tree);
        return comm_tree_allreduce(op->c, &op->tree, md->g.grad, err);
    }
    comm_tree_pieces pieces;
    grad_ctx g = {op, pass, ctx};
    work_share_trees trees = {&op->tree, op->steal_shared,
                              op->shared_model ? ONPOLICY_STEAL_SETS : 0, &op->steal_tree};
    int rc = work_share_sum_round(&op->share, &pieces, md->g.n, &trees, 200 * 1000, grad_pass,
                                  &g, &op->shared_envs, err);
    if (rc) return rc;
    /* a private model: the whole sum on every rank, one collective */
    if (!op->shared_model) return comm_tree_pieces_sum(op->c, &pieces, md->g.grad, err);
    float *sum;
    rc = comm_tree_pieces_fold(op->c, &pieces, &sum, err);
    CALF_ASSERT(rc != CALF_OK || sum == md->g.grad);
    return rc;
}

int onpolicy_gradient(onpolicy *op, onpolicy_grad_pass pass, void *ctx, calf_error *err) {
    double waited = op->c->wait_s;
    int rc = gradient(op, pass, ctx, err);
    op->wait_grad_s += op->c->wait_s - waited;
    return rc;
}

/* The norm of the whole gradient (adam_global_norm's bits). Sharing, each rank sums the
 * norm chunks of its slice and, after a barrier, all add every chunk's in order. */
static int grad_norm(onpolicy *op, double *norm, calf_error *err) {
    ac_model *md = op->md;
    size_t n = md->g.n, chunks = (n + ADAM_NORM_CHUNK - 1) / ADAM_NORM_CHUNK;
    if (!op->shared_model) {
        *norm = adam_global_norm(md->g.grad, n);
        return CALF_OK;
    }
    for (size_t at = op->opt_lo; at < op->opt_hi; at += ADAM_NORM_CHUNK) {
        size_t len = op->opt_hi - at < ADAM_NORM_CHUNK ? op->opt_hi - at : ADAM_NORM_CHUNK;
        op->norm_parts[at / ADAM_NORM_CHUNK] = adam_sum_sq(md->g.grad + at, len);
    }
    int rc = comm_barrier(op->c, err);
    if (rc == CALF_OK) *norm = adam_norm_of_chunks(op->norm_parts, chunks);
    return rc;
}

int onpolicy_step(onpolicy *op, int64_t iteration, double *norm, calf_error *err) {
    double waited = op->c->wait_s;
    int rc = grad_norm(op, norm, err);
    if (rc) return rc;
    op->wait_norm_s += op->c->wait_s - waited;
    if (!isfinite(*norm))
        return calf_error_set(err, CALF_EIO,
                              "iteration %lld: the gradient is not finite (training "
                              "diverged); try a smaller Adam.lr or Adam.gradient_clipping",
                              (long long)iteration + 1);
    /* clip and step this rank's slice (all of it without sharing) */
    param_group_step_slice(&op->md->g, op->opt_lo, op->opt_hi, *norm);
    /* the next forward pass reads every rank's slice */
    waited = op->c->wait_s;
    if (op->shared_model && (rc = comm_barrier(op->c, err))) return rc;
    op->wait_step_s += op->c->wait_s - waited;
    return CALF_OK;
}

/* Time in collectives until all had arrived, most of it in the update's three per
 * minibatch. */
void onpolicy_report(const onpolicy *op, double run_s, char *text, size_t cap) {
    const comm *c = op->c;
    size_t off = 0;
    text[0] = '\0';
    if (op->sharing)
        off += (size_t)snprintf(text, cap,
                                "work sharing: this rank folded %lld env partials and computed "
                                "the advantages of %lld envs of other ranks\n",
                                (long long)op->shared_envs, (long long)op->shared_adv_envs);
    if (off < cap && comm_size(c) > 1 && c->ops->measures_waits)
        snprintf(text + off, cap - off,
                 "waited %.3f s in collectives for other ranks (%.1f%% of %.3f s): %.3f s "
                 "for the gradient, %.3f s for its norm, %.3f s for the optimiser step\n",
                 c->wait_s, run_s > 0 ? 100.0 * c->wait_s / run_s : 0.0, run_s, op->wait_grad_s,
                 op->wait_norm_s, op->wait_step_s);
}

/* ---- checkpoint ---- */

bool onpolicy_mul_fits(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0 || (b > 0 && a > INT64_MAX / b)) return false;
    *out = a * b;
    return true;
}

void onpolicy_save(const onpolicy *op, ckpt_buf *b) {
    if (op->normalize_obs) obs_norm_save(&op->onorm, b);
}

int onpolicy_load(onpolicy *op, ckpt_reader *r, int64_t iteration, calf_error *err) {
    if (!op->normalize_obs) return CALF_OK;
    /* every env adds T observations per iteration */
    int64_t want;
    if (!onpolicy_mul_fits(iteration, (int64_t)op->E * op->T, &want))
        return calf_error_set(err, CALF_EINVAL,
                              "%s: counters do not match iteration %lld of this config", r->name,
                              (long long)iteration);
    return obs_norm_load(&op->onorm, r, want, err);
}

size_t onpolicy_env_record_size(const onpolicy *op) {
    int sd = op->md->state_dim;
    return 2 * BYTES_RNG + (sd ? 1 + 4 * (size_t)sd : 0);
}

static int get_rng(const unsigned char *p, calf_rng *r, const char *name, int env, calf_error *err) {
    if (!bytes_get_rng(p, r))
        return calf_error_set(err, CALF_EINVAL, "%s: env %d has an all-zero random stream", name, env);
    return CALF_OK;
}

void onpolicy_save_env(const onpolicy *op, int e, unsigned char *rec) {
    bytes_put_rng(rec, &op->act_rng[e]);
    bytes_put_rng(rec + BYTES_RNG, &op->shuf_rng[e]);
    if (op->md->state_dim) {
        rec[2 * BYTES_RNG] = op->next_start[e];
        ac_rec_state_put(&op->rstate, op->md, e, rec + 2 * BYTES_RNG + 1);
    }
}

int onpolicy_load_env(onpolicy *op, int e, const unsigned char *rec, const char *name,
                      calf_error *err) {
    int rc = get_rng(rec, &op->act_rng[e], name, op->begin + e, err);
    if (rc == CALF_OK) rc = get_rng(rec + BYTES_RNG, &op->shuf_rng[e], name, op->begin + e, err);
    if (rc == CALF_OK && op->md->state_dim) {
        const unsigned char *r = rec + 2 * BYTES_RNG;
        if (r[0] > 1 || !ac_rec_state_load(&op->rstate, op->md, e, r + 1))
            return calf_error_set(err, CALF_EINVAL,
                                  "%s: env %d's recurrent state is damaged (%s)", name,
                                  op->begin + e, r[0] > 1 ? "an episode-start flag not 0 or 1"
                                                          : "a value that is not finite");
        op->next_start[e] = r[0];
    }
    return rc;
}

/* ---- algorithm_ops of an algorithm whose struct begins with its onpolicy ---------- */

int onpolicy_ops_start(algorithm *a, calf_error *err) { return onpolicy_start((onpolicy *)a, err); }

void onpolicy_ops_act(algorithm *a, int64_t iteration, int s, const float *obs,
                      const uint8_t *mask, int *act, float *u) {
    (void)iteration;
    onpolicy_act((onpolicy *)a, s, obs, mask, act, u);
}

void onpolicy_ops_observe(algorithm *a, const algo_step *st) { onpolicy_observe((onpolicy *)a, st); }

void onpolicy_ops_greedy(algorithm *a, const float *obs, const uint8_t *mask, int rows, int *act,
                         float *u) {
    ac_policy_act(&((onpolicy *)a)->pol, obs, mask, rows, NULL, act, u);
}

void onpolicy_ops_sample(algorithm *a, const float *obs, const uint8_t *mask, int rows,
                         calf_rng *rng, int *act, float *u) {
    ac_policy_act(&((onpolicy *)a)->pol, obs, mask, rows, rng, act, u);
}

int onpolicy_ops_greedy_memory(const algorithm *a) {
    return ac_policy_memory(&((const onpolicy *)a)->pol);
}

int onpolicy_ops_greedy_reset(algorithm *a, int rows, calf_error *err) {
    return ac_policy_reset(&((onpolicy *)a)->pol, rows, err);
}

void onpolicy_ops_greedy_reset_rows(algorithm *a, const uint8_t *which, int rows) {
    ac_policy_reset_rows(&((onpolicy *)a)->pol, which, rows);
}

int onpolicy_ops_export_c(const algorithm *a, export_c *x, calf_error *err) {
    return ac_policy_export_c(&((const onpolicy *)a)->pol, x, err);
}

uint64_t onpolicy_ops_digest(const algorithm *a) {
    const onpolicy *op = (const onpolicy *)a;
    return op->shared_model ? 0 : ac_model_digest(op->md);
}

size_t onpolicy_ops_env_record_size(const algorithm *a) {
    return onpolicy_env_record_size((const onpolicy *)a);
}

void onpolicy_ops_save_env(const algorithm *a, int e, unsigned char *rec) {
    onpolicy_save_env((const onpolicy *)a, e, rec);
}

int onpolicy_ops_load_env(algorithm *a, int e, const unsigned char *rec, const char *name,
                          calf_error *err) {
    return onpolicy_load_env((onpolicy *)a, e, rec, name, err);
}

void onpolicy_ops_report(const algorithm *a, double run_s, char *text, size_t cap) {
    onpolicy_report((const onpolicy *)a, run_s, text, cap);
}
