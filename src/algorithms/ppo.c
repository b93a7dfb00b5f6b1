/* ppo.c: PPO (ALF's PPOAlgorithm): an actor-critic trained on each iteration's rollout
 * with GAE advantages and clipped-ratio minibatch epochs. Every random stream and every
 * sum is defined over the global env index, so the bits never depend on how many
 * processes ran it. The rollout (its storage, the steps that fill it, the advantages,
 * observation normalization, the minibatch plan, the work-shared sum of each minibatch's
 * gradient and the optimiser's slices, the rollout's checkpoint records) is the on-policy
 * core's (onpolicy.h), the model the actor-critic's (ac_model.h) and acting outside the
 * rollout its policy's (ac_policy.h); this file holds what is PPO's own: its config, its
 * clipped loss (each env's partial gradient of a minibatch), its epochs of minibatches,
 * the update and its statistics. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calf/summary.h"
#include "training/algorithm.h"
#include "base/mem.h"
#include "algorithms/ac_model.h"
#include "algorithms/onpolicy.h"
#include "algorithms/ppo_math.h"
#include "algorithms/ppo_recurrent.h"
#include "parallel/work_share.h"

/* Per-env loss statistics summed over the iteration, then over envs in canonical order. */
enum { ST_PG, ST_TD, ST_ENT, ST_CLIP, NUM_STATS };

/* The PPO settings, resolved once from the config. */
typedef struct ppo_params {
    float gamma, lambda;        /* PPOLoss.gamma, td_lambda */
    float clip, td_w, ent_w;    /* PPOLoss.importance_ratio_clipping, td_loss_weight,
                                 * entropy_regularization */
    float value_clip;           /* PPOLoss.value_clipping (0: off) */
    onpolicy_adv_norm adv_norm; /* PPOLoss.normalize_advantages and its
                                 * advantage_normalization_scope */
    float lr, beta1, beta2, eps;
    double lr_d;                /* Adam.lr as configured, what a schedule scales */
    bool lr_linear;             /* Adam.lr_schedule = 'linear' */
    double max_norm;            /* Adam.gradient_clipping (0: none) */
    int epochs;                 /* TrainerConfig.num_updates_per_train_iter */
} ppo_params;

typedef struct ppo {
    onpolicy op;             /* first: the core's ops take the struct as it. The rollout:
                              * its storage, advantages, normalization, plan, gradient sum
                              * and records (its E, T, count, views, caches, the model's
                              * slices, ...), and the policy acting outside it */
    ppo_params p;
    int64_t total_iterations;/* the run's planned length (the linear schedule) */
    ac_model md;
    uint64_t params_version; /* bumped whenever md.params change (net_forward_v) */

    /* minibatch, op.cache_rows rows (the actor's in op.head) */
    float *vout;             /* (cache_rows) */
    float *rows_in;          /* (cache_rows, obs_dim) */
    float *dhead;            /* (cache_rows, head_dim) */
    float *dval;             /* (cache_rows) */
    float *dlogstd;          /* (cache_rows, action_dim) */
    double grad_norm_sum;
    int num_updates;
    int64_t iteration;       /* the iteration being trained (for messages) */
    /* recurrent cores (ppo_recurrent.h): one sequence's update scratch */
    ppo_seq_work seq;
    float *sq_obs, *sq_u, *sq_logp, *sq_adv, *sq_ret, *sq_val; /* (T, ...) one env's sequence */
    int *sq_act;             /* (T) */
    uint8_t *sq_start;       /* (T) */
} ppo;
_Static_assert(offsetof(ppo, op) == 0, "onpolicy's ops take a ppo as its onpolicy");

const ac_model_rows ppo_model_rows = {
    .actor = {CALF_CFG_ACTOR_CONV_LAYERS, CALF_CFG_ACTOR_LAYERS, CALF_CFG_ACTOR_ACTIVATION,
              CFG_PPO_ACTOR_LSTM, CFG_PPO_ACTOR_GRU, CFG_PPO_ACTOR_PRE_FC},
    .value = {CALF_CFG_VALUE_CONV_LAYERS, CALF_CFG_VALUE_LAYERS, CALF_CFG_VALUE_ACTIVATION,
              CFG_PPO_VALUE_LSTM, CFG_PPO_VALUE_GRU, CFG_PPO_VALUE_PRE_FC},
    .init_log_std = CALF_CFG_INIT_LOG_STD,
};

static void ppo_destroy(algorithm *a);

/* PPO's config, resolved once. */
static ppo_params ppo_params_of(const calf_config *cfg) {
    const config_value *betas = config_get(cfg, CALF_CFG_ADAM_BETAS);
    bool per_mb = strcmp(calf_config_string(cfg, CFG_PPO_ADV_NORM_SCOPE), "minibatch") == 0;
    return (ppo_params){
        .gamma = (float)calf_config_float(cfg, CFG_PPO_GAMMA),
        .lambda = (float)calf_config_float(cfg, CFG_PPO_TD_LAMBDA),
        .clip = (float)calf_config_float(cfg, CFG_PPO_RATIO_CLIPPING),
        .td_w = (float)calf_config_float(cfg, CFG_PPO_TD_LOSS_WEIGHT),
        .ent_w = (float)calf_config_float(cfg, CFG_PPO_ENTROPY_REG),
        .value_clip = (float)calf_config_float(cfg, CFG_PPO_VALUE_CLIPPING),
        .adv_norm = !calf_config_bool(cfg, CFG_PPO_NORMALIZE_ADVANTAGES) ? ONPOLICY_ADV_RAW
                    : per_mb                                            ? ONPOLICY_ADV_MINIBATCH
                                                                        : ONPOLICY_ADV_BATCH,
        .lr = (float)calf_config_float(cfg, CALF_CFG_ADAM_LR),
        .lr_d = calf_config_float(cfg, CALF_CFG_ADAM_LR),
        .lr_linear = strcmp(calf_config_string(cfg, CALF_CFG_LR_SCHEDULE), "linear") == 0,
        .beta1 = (float)betas->tf[0],
        .beta2 = (float)betas->tf[1],
        .eps = (float)calf_config_float(cfg, CALF_CFG_ADAM_EPS),
        .max_norm = calf_config_float(cfg, CALF_CFG_GRADIENT_CLIPPING),
        .epochs = (int)calf_config_int(cfg, CALF_CFG_NUM_UPDATES),
    };
}

/* What recurrent cores add to the update: one env's sequence and its scratch. */
static int recurrent_init(ppo *t, calf_error *err) {
    const ac_model *md = &t->md;
    int T = t->op.T, od = md->obs_dim, ad = md->action_dim > 0 ? md->action_dim : 1;
    int rc = ppo_seq_work_init(&t->seq, md, T, err);
    if (rc) return rc;
    size_t Tn = (size_t)T;
    if (!(t->sq_obs = mem_calloc(Tn * (size_t)od, sizeof(float), err)) ||
        !(t->sq_u = mem_calloc(Tn * (size_t)ad, sizeof(float), err)) ||
        !(t->sq_logp = mem_calloc(Tn, sizeof(float), err)) ||
        !(t->sq_adv = mem_calloc(Tn, sizeof(float), err)) ||
        !(t->sq_ret = mem_calloc(Tn, sizeof(float), err)) ||
        !(t->sq_val = mem_calloc(Tn, sizeof(float), err)) ||
        !(t->sq_act = mem_calloc(Tn, sizeof(int), err)) ||
        !(t->sq_start = mem_calloc(Tn, 1, err)))
        return CALF_ENOMEM;
    return CALF_OK;
}

static int trainer_init(ppo *t, const algo_setup *s, calf_error *err) {
    const calf_config *cfg = s->cfg;
    t->p = ppo_params_of(cfg);
    t->params_version = 1;
    adam_conf opt = {.lr = t->p.lr, .beta1 = t->p.beta1, .beta2 = t->p.beta2, .eps = t->p.eps,
                     .max_norm = t->p.max_norm};
    t->total_iterations = s->total_iterations;
    int rc = ac_model_init(&t->md, cfg, &ppo_model_rows, s->spec, opt, err);
    if (rc == CALF_OK) rc = ac_model_init_params(&t->md, cfg, &ppo_model_rows, s->seed, err);
    if (rc) return rc;
    onpolicy_conf cf = {
        .gamma = t->p.gamma,
        .lambda = t->p.lambda,
        .adv_norm = t->p.adv_norm,
        .keep_values = t->p.value_clip > 0,
        .num_stats = NUM_STATS,
    };
    if ((rc = onpolicy_init(&t->op, s, &t->md, &cf, err))) return rc;
    int n = t->op.count, od = t->md.obs_dim, hd = t->md.head_dim;
    int ad = t->md.action_dim > 0 ? t->md.action_dim : 1;
    if (n == 0) return CALF_OK; /* acting only (calf play) */
    if (t->md.state_dim && (rc = recurrent_init(t, err))) return rc;
    size_t rows = (size_t)t->op.cache_rows;
    if (!(t->vout = mem_calloc(rows, sizeof(float), err)) ||
        !(t->rows_in = mem_calloc(rows * (size_t)od, sizeof(float), err)) ||
        !(t->dhead = mem_calloc(rows * (size_t)hd, sizeof(float), err)) ||
        !(t->dval = mem_calloc(rows, sizeof(float), err)) ||
        !(t->dlogstd = mem_calloc(rows * (size_t)ad, sizeof(float), err)))
        return CALF_ENOMEM;
    return CALF_OK;
}

/* ---- PPO update --------------------------------------------------------------- */

/* One minibatch of an epoch: timesteps [off, off+len) of every env's shuffle, or with
 * recurrent cores the envs of plan chunk mb; its loss weights; and, with advantages
 * normalized per minibatch, its mean and inverse std (onpolicy_minibatch_scales). */
typedef struct minibatch_ctx {
    ppo *t;
    int mb, off, len;
    ppo_loss_weights w;
    bool adv_norm;
    float adv_mean, adv_inv;
} minibatch_ctx;

/* The advantage the loss takes: as the rollout's advantages hold it (normalized over the
 * batch, or not at all), or normalized by the minibatch's statistics, in float as
 * onpolicy_advantages normalizes the batch. */
static float adv_of(const minibatch_ctx *m, float adv) {
    return m->adv_norm ? (adv - m->adv_mean) * m->adv_inv : adv;
}

/* With recurrent cores, minibatch m->mb of this epoch's plan (t->op.mb_of): envs [first,
 * first+cnt) of view v that are in it give their whole sequence's partial gradient
 * (ppo_seq_grad, from the state their rollout started with), the others a zero partial,
 * so the tree over every env sums the minibatch's envs in env order, on any split. */
static void minibatch_sequences(const minibatch_ctx *m, const onpolicy_view *v, int first,
                                int cnt, comm_tree *tree) {
    ppo *t = m->t;
    ac_model *md = &t->md;
    int T = t->op.T, vn = v->count, od = md->obs_dim, ad = md->action_dim, mb = m->mb;
    int adim = ad > 0 ? ad : 1;
    bool keep_val = m->w.value_clip > 0;
    for (int e = first; e < first + cnt; e++) {
        float *left = comm_tree_left_sibling(tree);
        if (t->op.mb_of[v->begin + e] != mb) {
            /* a zero partial: the left sibling as it is (x + 0 is x: no partial is -0), or
             * a zeroed leaf */
            if (left) {
                comm_tree_push_into_left(tree);
            } else {
                comm_tree_leaf(tree);
                comm_tree_push(tree);
            }
            continue;
        }
        for (int s = 0; s < T; s++) {
            size_t i = (size_t)s * vn + (size_t)e;
            onpolicy_obs_rows(&t->op, v->obs, v->obs8, i, 1, t->sq_obs + (size_t)s * od);
            if (ad) memcpy(t->sq_u + (size_t)s * ad, v->u + i * adim, (size_t)ad * sizeof(float));
            t->sq_start[s] = v->start[i];
            t->sq_act[s] = v->act[i];
            t->sq_logp[s] = v->logp[i];
            t->sq_adv[s] = adv_of(m, v->adv[i]);
            t->sq_ret[s] = v->ret[i];
            if (keep_val) t->sq_val[s] = v->val[i];
        }
        ppo_seq sq = {.T = T, .obs = t->sq_obs, .start = t->sq_start,
                      .state0 = v->state0 + (size_t)e * md->state_dim, .act = t->sq_act,
                      .u = ad ? t->sq_u : NULL, .logp = t->sq_logp, .adv = t->sq_adv,
                      .ret = t->sq_ret, .val = t->sq_val};
        float *leaf = left ? left : comm_tree_leaf_raw(tree);
        ppo_seq_grad(md, md->g.params, t->params_version, &t->seq, &sq, &m->w, leaf, left != NULL,
                     v->stats + (size_t)e * NUM_STATS);
        if (left) comm_tree_push_into_left(tree);
        else comm_tree_push(tree);
    }
}

/* Forward, per-sample loss and per-env backward for envs [first, first+cnt) of view v
 * (indices within v) on timesteps [off, off+len) of their shuffles, each env's partial
 * gradient folded into tree in env order. The envs' loss statistics are added to v's.
 * The result depends only on the parameters and v's data, not on who runs it. */
static void minibatch_envs(const minibatch_ctx *m, const onpolicy_view *v, int first, int cnt,
                           comm_tree *tree) {
    ppo *t = m->t;
    if (t->md.state_dim) {
        minibatch_sequences(m, v, first, cnt, tree);
        return;
    }
    int off = m->off, len = m->len;
    const ppo_loss_weights *w = &m->w;
    ac_model *md = &t->md;
    int T = t->op.T, vn = v->count, od = md->obs_dim, hd = md->head_dim, ad = md->action_dim;
    int adim = ad > 0 ? ad : 1;
    for (int g0 = first; g0 < first + cnt; g0 += t->op.group_envs) {
        int g = first + cnt - g0 < t->op.group_envs ? first + cnt - g0 : t->op.group_envs;
        int rows = g * len;
        /* rows grouped by env: env g0+k's timesteps are rows [k*len, (k+1)*len) */
        for (int k = 0; k < g; k++)
            for (int j = 0; j < len; j++) {
                size_t i = (size_t)v->perm[(size_t)(g0 + k) * T + off + j] * vn + (size_t)(g0 + k);
                onpolicy_obs_rows(&t->op, v->obs, v->obs8, i, 1, t->rows_in + ((size_t)k * len + j) * od);
            }
        net_forward_v(&md->actor, md->g.params, t->params_version, t->rows_in, rows,
                         &t->op.a_cache, t->op.head);
        net_forward_v(&md->value, md->g.params, t->params_version, t->rows_in, rows,
                         &t->op.v_cache, t->vout);
        for (int k = 0; k < g; k++) {
            int e = g0 + k;
            double *st = v->stats + (size_t)e * NUM_STATS;
            for (int j = 0; j < len; j++) {
                int r = k * len + j;
                size_t i = (size_t)v->perm[(size_t)e * T + off + j] * vn + (size_t)e;
                const float *h = t->op.head + (size_t)r * hd;
                const float *u = ad ? v->u + i * adim : NULL;
                const uint8_t *mk = v->mask ? v->mask + i * md->num_actions : NULL;
                const int *act = v->act + i * md->action_ints;
                float logp, ent;
                dist_categorical_cache dc;
                ac_model_logp_entropy(md, md->g.params, h, mk, act, u, &logp, &ent, &dc);
                ppo_sample_result res;
                ppo_sample_loss(logp, v->logp[i], adv_of(m, v->adv[i]), ent, t->vout[r],
                                w->value_clip > 0 ? v->val[i] : 0.0f, v->ret[i], w, &res);
                ac_model_dist_backward(md, md->g.params, h, mk, act, u, res.dlogp, res.dentropy,
                                       &dc, t->dhead + (size_t)r * hd,
                                       ad ? t->dlogstd + (size_t)r * ad : NULL);
                t->dval[r] = res.dvalue;
                st[ST_PG] += res.pg_loss;
                st[ST_TD] += res.td_loss;
                st[ST_ENT] += ent;
                st[ST_CLIP] += res.clipped;
            }
        }
        /* Each env's partial overwrites every parameter of the model (the rest of the
         * leaf is padding, which stays zero), so a leaf needs no clearing; and an env
         * whose left sibling is on the tree's stack is added into it by the kernels. */
        for (int k = 0; k < g; k++) {
            int r0 = k * len;
            float *left = comm_tree_left_sibling(tree);
            float *leaf = left ? left : comm_tree_leaf_raw(tree);
            if (left) {
                net_backward_add(&md->actor, md->g.params, &t->op.a_cache, r0, len,
                                    t->dhead + (size_t)r0 * hd, leaf, NULL);
                net_backward_add(&md->value, md->g.params, &t->op.v_cache, r0, len, t->dval + r0,
                                    leaf, NULL);
            } else {
                net_backward_set(&md->actor, md->g.params, &t->op.a_cache, r0, len,
                                    t->dhead + (size_t)r0 * hd, leaf, NULL);
                net_backward_set(&md->value, md->g.params, &t->op.v_cache, r0, len, t->dval + r0,
                                    leaf, NULL);
            }
            for (int a = 0; a < ad; a++) {
                float sum = 0.0f;
                for (int j = 0; j < len; j++) sum = sum + t->dlogstd[(size_t)(r0 + j) * ad + a];
                float *p = leaf + md->log_std_off + a;
                *p = left ? *p + sum : sum;
            }
            if (left) comm_tree_push_into_left(tree);
            else comm_tree_push(tree);
        }
    }
}

/* minibatch_envs as an onpolicy_grad_pass: one minibatch's envs of a view. */
static void minibatch_pass(void *ctx, const onpolicy_view *v, int first, int count,
                           comm_tree *tree) {
    minibatch_envs(ctx, v, first, count, tree);
}

static int update(ppo *t, calf_error *err) {
    ac_model *md = &t->md;
    int T = t->op.T;
    bool per_mb = t->p.adv_norm == ONPOLICY_ADV_MINIBATCH;
    for (int epoch = 0; epoch < t->p.epochs; epoch++) {
        onpolicy_plan_epoch(&t->op, t->iteration, epoch);
        int rc = onpolicy_minibatch_scales(&t->op, err);
        if (rc) return rc;
        for (int mb = 0; mb < t->op.M; mb++) {
            minibatch_ctx m = {.t = t, .mb = mb,
                               .w = {.clip = t->p.clip, .value_clip = t->p.value_clip,
                                     .td_w = t->p.td_w, .ent_w = t->p.ent_w},
                               .adv_norm = per_mb,
                               .adv_mean = per_mb ? t->op.mb_mean[mb] : 0.0f,
                               .adv_inv = per_mb ? t->op.mb_inv[mb] : 1.0f};
            if (md->state_dim) {
                /* minibatch mb: len whole env sequences (minibatch_sequences) */
                onpolicy_chunk_range(t->op.E, t->op.M, mb, &m.off, &m.len);
                m.w.scale = 1.0f / ((float)m.len * (float)T);
            } else {
                onpolicy_chunk_range(T, t->op.M, mb, &m.off, &m.len);
                m.w.scale = 1.0f / ((float)t->op.E * (float)m.len);
            }
            double norm;
            rc = onpolicy_gradient(&t->op, minibatch_pass, &m, err);
            if (rc == CALF_OK) rc = onpolicy_step(&t->op, t->iteration, &norm, err);
            if (rc) return rc;
            t->grad_norm_sum += norm;
            t->num_updates++;
            t->params_version++; /* onpolicy_step stepped the parameters */
        }
    }
    return CALF_OK;
}


/* ---- the algorithm's table ------------------------------------------------------ */

/* Iteration k of the run's N: the linear schedule's lr, else the configured one. */
static float lr_at(const ppo_params *p, int64_t k, int64_t N) {
    return p->lr_linear ? adam_lr_linear_at(p->lr_d, k, N) : p->lr;
}

static int ppo_train(algorithm *a, int64_t iteration, calf_error *err) {
    ppo *t = (ppo *)a;
    t->iteration = iteration;
    t->md.g.opt.lr = lr_at(&t->p, iteration, t->total_iterations);
    memset(t->op.own->stats, 0, (size_t)t->op.count * NUM_STATS * sizeof(double));
    t->grad_norm_sum = 0;
    t->num_updates = 0;
    int rc = onpolicy_advantages(&t->op, err);
    if (rc == CALF_OK) rc = update(t, err);
    if (rc == CALF_OK) rc = onpolicy_merge_obs_norm(&t->op, err);
    return rc;
}

static int ppo_summarize(algorithm *a, int64_t step, bool histograms, calf_error *err) {
    ppo *t = (ppo *)a;
    double g[NUM_STATS];
    int rc = comm_tree_sum_f64(t->op.c, t->op.E, t->op.begin, t->op.count, t->op.own->stats,
                               NUM_STATS, g, err);
    if (rc) return rc;
    double samples = (double)t->p.epochs * t->op.E * t->op.T;
    calf_summary_scalar("PPOLoss/pg_loss", step, g[ST_PG] / samples);
    calf_summary_scalar("PPOLoss/td_loss", step, g[ST_TD] / samples);
    calf_summary_scalar("PPOLoss/entropy", step, g[ST_ENT] / samples);
    calf_summary_scalar("PPOLoss/clip_fraction", step, g[ST_CLIP] / samples);
    calf_summary_scalar("Optimizer/grad_norm", step,
                        t->num_updates ? t->grad_norm_sum / t->num_updates : 0);
    if (t->p.lr_linear) calf_summary_scalar("Optimizer/learning_rate", step, t->md.g.opt.lr);
    if (histograms) ac_model_histograms(&t->md, step);
    return CALF_OK;
}

/* ---- checkpoint sections -------------------------------------------------------- */


/* The model's one parameter group, "PRMS" (param_group.h): parameters, Adam's step count and
 * moments; then, when observations are normalized, their statistics, "ONRM" (obs_norm.h,
 * onpolicy_save). */
static void ppo_save(const algorithm *a, ckpt_buf *b) {
    const ppo *t = (const ppo *)a;
    param_group_save(&t->md.g, b);
    onpolicy_save(&t->op, b);
}

static int ppo_load(algorithm *a, ckpt_reader *r, int64_t iteration, calf_error *err) {
    ppo *t = (ppo *)a;
    t->params_version++; /* the parameters are overwritten */
    /* the step count follows from the iteration; an iteration whose count would not fit
     * in 64 bits is a damaged or foreign file too */
    int64_t want;
    if (!onpolicy_mul_fits(iteration, (int64_t)t->p.epochs * t->op.M, &want))
        return calf_error_set(err, CALF_EINVAL,
                              "%s: counters do not match iteration %lld of this config", r->name,
                              (long long)iteration);
    int rc = param_group_load(&t->md.g, r, want, err);
    if (rc == CALF_OK) rc = onpolicy_load(&t->op, r, iteration, err);
    return rc;
}

static void ppo_describe(const algorithm *a, char *text, size_t cap) {
    const ppo *t = (const ppo *)a;
    int off0, len0, offl, lenl;
    onpolicy_chunk_range(t->op.T, t->op.M, 0, &off0, &len0);
    onpolicy_chunk_range(t->op.T, t->op.M, t->op.M - 1, &offl, &lenl);
    if (t->md.state_dim) {
        onpolicy_chunk_range(t->op.E, t->op.M, 0, &off0, &len0);
        onpolicy_chunk_range(t->op.E, t->op.M, t->op.M - 1, &offl, &lenl);
        snprintf(text, cap,
                 "mini_batch_size = %lld: %d minibatches per epoch of whole env sequences (a "
                 "recurrent core), each %d..%d envs x %d steps, the envs drawn per epoch by the "
                 "(seed, iteration, epoch) stream",
                 (long long)t->op.mini_batch_size, t->op.M, lenl, len0, t->op.T);
    } else {
        snprintf(text, cap,
                 "mini_batch_size = %lld: %d minibatches per epoch, each %d..%d timesteps from "
                 "every env (%d..%d samples)",
                 (long long)t->op.mini_batch_size, t->op.M, lenl, len0, t->op.E * lenl, t->op.E * len0);
    }
    size_t off = strlen(text);
    if (t->p.lr_linear && off < cap)
        off += (size_t)snprintf(text + off, cap - off,
                                "\nAdam.lr_schedule = 'linear': lr %g at iteration 0, down to 0 "
                                "at iteration %lld",
                                t->p.lr_d, (long long)t->total_iterations);
    if (t->op.normalize_obs && off < cap)
        snprintf(text + off, cap - off,
                 "\nobservations normalized by the statistics of all iterations before, "
                 "merged once per iteration over %d envs x %d steps",
                 t->op.E, t->op.T);
}

/* Whether the model can be built (ac_model_check), a normalization scope that would do
 * nothing, then what PPO's update cannot train: ppo_recurrent.c's update reads one action
 * per step and no mask. */
static int ppo_check(const calf_config *cfg, const calf_env_spec *spec, calf_error *err) {
    int rc = ac_model_check(cfg, &ppo_model_rows, spec, err);
    if (rc) return rc;
    if (!calf_config_bool(cfg, CFG_PPO_NORMALIZE_ADVANTAGES) &&
        strcmp(calf_config_string(cfg, CFG_PPO_ADV_NORM_SCOPE), "minibatch") == 0)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: %s = 'minibatch' normalizes nothing with %s = False (set "
                              "it True, or drop the scope)",
                              calf_config_origin(cfg, CFG_PPO_ADV_NORM_SCOPE),
                              calf_binding_name(CFG_PPO_ADV_NORM_SCOPE),
                              calf_binding_name(CFG_PPO_NORMALIZE_ADVANTAGES));
    const ac_net_rows *a = &ppo_model_rows.actor;
    int64_t lstm = calf_config_int(cfg, a->lstm), gru = calf_config_int(cfg, a->gru);
    calf_binding_id row = lstm > 0 ? a->lstm : a->gru;
    if ((lstm > 0 || gru > 0) && (spec->action_mask || spec->num_action_dims > 0))
        return calf_error_set(err, CALF_EINVAL,
                              "%s: %s: %s has %s, which PPO with a recurrent core does not "
                              "train yet (unset the core, or use an env without it)",
                              calf_config_origin(cfg, row), calf_binding_name(row), spec->name,
                              spec->action_mask ? "an action mask" : "MultiDiscrete actions");
    return CALF_OK;
}

static int ppo_create(const algo_setup *s, algorithm **out, calf_error *err) {
    ppo *t = mem_calloc(1, sizeof *t, err);
    *out = (algorithm *)t;
    if (!t) return CALF_ENOMEM;
    int rc = trainer_init(t, s, err);
    if (rc) {
        ppo_destroy((algorithm *)t);
        t = NULL;
    }
    *out = (algorithm *)t;
    return rc;
}

static void ppo_destroy(algorithm *a) {
    ppo *t = (ppo *)a;
    if (!t) return;
    onpolicy_free(&t->op);
    ac_model_free(&t->md);
    ppo_seq_work_free(&t->seq);
    void *bufs[] = {t->vout, t->rows_in, t->dhead, t->dval, t->dlogstd, t->sq_obs, t->sq_u,
                    t->sq_logp, t->sq_adv, t->sq_ret, t->sq_val, t->sq_act, t->sq_start};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(t);
}

/* What acts, the digest and the env records are the on-policy core's and its policy's
 * (onpolicy.h's ops); the rest is PPO's own. */
const algorithm_ops ppo_algorithm_ops = {
    .create = ppo_create,
    .destroy = ppo_destroy,
    .check = ppo_check,
    .start = onpolicy_ops_start,
    .act = onpolicy_ops_act,
    .observe = onpolicy_ops_observe,
    .train = ppo_train,
    .greedy = onpolicy_ops_greedy,
    .greedy_memory = onpolicy_ops_greedy_memory,
    .greedy_reset = onpolicy_ops_greedy_reset,
    .sample = onpolicy_ops_sample,
    .greedy_reset_rows = onpolicy_ops_greedy_reset_rows,
    .export_c = onpolicy_ops_export_c,
    .summarize = ppo_summarize,
    .digest = onpolicy_ops_digest,
    .save = ppo_save,
    .load = ppo_load,
    .env_record_size = onpolicy_ops_env_record_size,
    .save_env = onpolicy_ops_save_env,
    .load_env = onpolicy_ops_load_env,
    .describe = ppo_describe,
    .report = onpolicy_ops_report,
};
