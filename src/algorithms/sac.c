/* sac.c: Soft Actor-Critic (ALF's SacAlgorithm): twin Q critics with Polyak-averaged
 * targets, automatic entropy tuning, one-step TD from a replay buffer; continuous
 * actions through a tanh-squashed Gaussian actor, discrete ones through softmax(Q/alpha)
 * of the critics (ALF's sac_cart_pole). The replay, the sampling and noise streams, the
 * per-env partial gradients summed in the canonical tree and the work sharing are the
 * off-policy core's (offpolicy.h); this file holds SAC's networks, losses and sampling.
 * The bits never depend on the number of processes or on who computed what. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calf/summary.h"
#include "training/algorithm.h"
#include "algorithms/offpolicy.h"
#include "algorithms/sac_math.h"
#include "base/mem.h"
#include "base/cmath.h"
#include "numerics/action_dist.h"
#include "numerics/net.h"
#include "numerics/param_group.h"

/* Per-env statistics of an iteration's updates, summed over envs in canonical order. */
enum { SS_SAMPLES, SS_CRITIC, SS_ACTOR, SS_ALPHA, SS_ENTROPY, NUM_SAC_STATS };
/* The core's gradient trees: the critic group's; the actor's, then d/d log alpha. */
enum { TREE_CRITIC, TREE_ACTOR };

typedef struct sac {
    offpolicy o;             /* first: the replay, the batch rows, the job's shape */
    /* settings, resolved once */
    float gamma, tau, target_entropy;
    int target_period;
    bool lr_linear;          /* Adam.lr_schedule = 'linear' */
    double actor_lr, critic_lr, alpha_lr; /* as configured: what the schedule scales */
    int64_t total_iterations;/* the run's planned length (the schedule) */
    /* networks: the actor in its group; q1 and q2 at their offsets in the critic group,
     * whose layout the target group copies; log alpha is the alpha group's one float */
    net actor, q1, q2;
    param_group actor_g, critic_g, target_g, alpha_g;
    /* bumped whenever a group's values change, so that passes over unchanged parameters
     * reuse the transposed weights their caches keep (net_forward_v) */
    uint64_t actor_ver, critic_ver, target_ver;
    /* SAC's scratch beside the core's rows (o.rows rows each) */
    float *qin;              /* (rows, od + A) critic input rows */
    float *row_a;            /* (max(A,1)) one row's noise in act, its action gradient in train */
    float *head;             /* (rows, 2A) actor outputs */
    float *anew, *logp, *y;  /* (rows, A), (rows), (rows) */
    float *qa, *qb, *ta, *tb;/* (rows, max(nA, 1)) critic outputs */
    float *dqa, *dqb;        /* (rows, max(nA, 1)) */
    float *dxa, *dxb;        /* (rows, od + A) */
    float *dhead;            /* (rows, 2A) */
    float *dalpha;           /* (rows) each row's d(alpha loss)/d log alpha */
    net_cache actor_cache, qa_cache, qb_cache, ta_cache, tb_cache;
    float *sum;              /* (max(critic n, actor n + 1)) a tree's completed sum */
} sac;

/* A row's two noise vectors: eps for the next action, eps2 for the actor loss's. */
static const float *eps_of(const sac *t, int r) { return t->o.noise + (size_t)r * 2 * t->o.A; }
static const float *eps2_of(const sac *t, int r) { return eps_of(t, r) + t->o.A; }

/* ---- settings ------------------------------------------------------------------- */

static int sac_check(const calf_config *cfg, const calf_env_spec *spec, calf_error *err) {
    int rc = offpolicy_check_action_space(cfg, spec, "SacAlgorithm", false, err);
    if (rc == CALF_OK) rc = offpolicy_check_mlp_only(cfg, "SacAlgorithm", err);
    return rc ? rc : offpolicy_check(cfg, "SacAlgorithm", err);
}

/* ---- setup ---------------------------------------------------------------------- */

static void sac_destroy(algorithm *a);

static int sac_init(algorithm *a, const algo_setup *s, calf_error *err) {
    sac *t = (sac *)a;
    const calf_config *cfg = s->cfg;
    const calf_env_spec *spec = s->spec;
    offpolicy *o = &t->o;
    int A0 = spec->action_dim;
    int rc = offpolicy_init(o, s, NUM_SAC_STATS, 2 * A0, err);
    if (rc) return rc; /* sac_destroy frees what was made, here and below */
    t->gamma = (float)calf_config_float(cfg, CALF_CFG_TD_GAMMA);
    t->tau = (float)calf_config_float(cfg, CFG_SAC_TAU);
    t->target_period = (int)calf_config_int(cfg, CFG_SAC_TARGET_PERIOD);
    /* None: -|A| (ALF's default) for continuous actions; for discrete ones a fraction of
     * the uniform policy's entropy log(n), low enough that the greedy action can win */
    if (!calf_config_is_none(cfg, CFG_SAC_TARGET_ENTROPY))
        t->target_entropy = (float)calf_config_float(cfg, CFG_SAC_TARGET_ENTROPY);
    else
        t->target_entropy = o->A > 0 ? -(float)o->A : (float)(0.3 * cm_log((double)o->nA));
    t->actor_lr = calf_config_float(cfg, CALF_CFG_ACTOR_LR);
    t->critic_lr = calf_config_float(cfg, CALF_CFG_CRITIC_LR);
    t->alpha_lr = calf_config_float(cfg, CALF_CFG_ALPHA_LR);
    t->lr_linear = strcmp(calf_config_string(cfg, CALF_CFG_LR_SCHEDULE), "linear") == 0;
    t->total_iterations = s->total_iterations;

    /* networks */
    size_t cursor = 0;
    if (o->A > 0 && (rc = offpolicy_net(&t->actor, cfg, CALF_CFG_SAC_ACTOR_LAYERS,
                                        CALF_CFG_SAC_ACTOR_ACTIVATION, o->od, 2 * o->A, &cursor,
                                        err)))
        return rc;
    rc = param_group_init(&t->actor_g, "SACA", cursor, true, offpolicy_adam(cfg, t->actor_lr), err);
    if (rc) return rc;
    cursor = 0;
    int qin = o->A > 0 ? o->od + o->A : o->od, qout = o->A > 0 ? 1 : o->nA;
    if ((rc = offpolicy_net(&t->q1, cfg, CALF_CFG_SAC_CRITIC_LAYERS, CALF_CFG_SAC_CRITIC_ACTIVATION,
                            qin, qout, &cursor, err)) ||
        (rc = offpolicy_net(&t->q2, cfg, CALF_CFG_SAC_CRITIC_LAYERS, CALF_CFG_SAC_CRITIC_ACTIVATION,
                            qin, qout, &cursor, err)))
        return rc;
    if ((rc = param_group_init(&t->critic_g, "SACQ", cursor, true,
                               offpolicy_adam(cfg, t->critic_lr), err)) ||
        (rc = param_group_init(&t->target_g, "SACT", cursor, false, offpolicy_adam(cfg, 0), err)) ||
        (rc = param_group_init(&t->alpha_g, "SACL", 1, true, offpolicy_adam(cfg, t->alpha_lr), err)))
        return rc;
    /* "SACU": the updates done, the four groups, then the replay counters */
    const offpolicy_group groups[] = {
        {.g = &t->actor_g, .name = o->A > 0 ? "actor" : NULL}, /* discrete: no actor */
        {.g = &t->critic_g, .name = "critic", .grads = true},
        {.g = &t->target_g},
        {.g = &t->alpha_g},
    };
    offpolicy_set_groups(o, "SACU", groups, 4);
    /* init from the (seed, 0, CALF_RNG_INIT) stream: actor, then q1, q2 */
    calf_rng rng;
    calf_rng_seed(&rng, s->seed, 0, CALF_RNG_INIT);
    if (o->A > 0) net_init_fan_in(&t->actor, t->actor_g.params, &rng);
    net_init_fan_in(&t->q1, t->critic_g.params, &rng);
    net_init_fan_in(&t->q2, t->critic_g.params, &rng);
    memcpy(t->target_g.params, t->critic_g.params, t->critic_g.n * sizeof(float));
    t->alpha_g.params[0] = (float)calf_config_float(cfg, CFG_SAC_INITIAL_LOG_ALPHA);
    t->actor_ver = t->critic_ver = t->target_ver = 1;

    /* caches and scratch: a rollout step's rows or an update's, whichever is more */
    int rows = o->rows;
    if ((o->A > 0 && (rc = net_cache_init(&t->actor_cache, &t->actor, rows, err))) ||
        (rc = net_cache_init(&t->qa_cache, &t->q1, rows, err)) ||
        (rc = net_cache_init(&t->qb_cache, &t->q2, rows, err)) ||
        (rc = net_cache_init(&t->ta_cache, &t->q1, rows, err)) ||
        (rc = net_cache_init(&t->tb_cache, &t->q2, rows, err)))
        return rc;
    size_t R = (size_t)rows, ad = (size_t)o->ad, qo = (size_t)qout, qi = (size_t)qin;
    struct {
        float **p;
        size_t n;
    } bufs[] = {
        {&t->qin, R * qi},      {&t->head, R * 2 * ad}, {&t->anew, R * ad}, {&t->logp, R},
        {&t->y, R},             {&t->qa, R * qo},       {&t->qb, R * qo},   {&t->ta, R * qo},
        {&t->tb, R * qo},       {&t->dqa, R * qo},      {&t->dqb, R * qo},  {&t->dxa, R * qi},
        {&t->dxb, R * qi},      {&t->dhead, R * 2 * ad}, {&t->dalpha, R},   {&t->row_a, ad},
    };
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++)
        if (!(*bufs[k].p = mem_calloc(bufs[k].n, sizeof(float), err))) return CALF_ENOMEM;
    if (o->count == 0) return CALF_OK; /* acting only (calf play) */

    size_t sum_n = t->critic_g.n > t->actor_g.n + 1 ? t->critic_g.n : t->actor_g.n + 1;
    if (!(t->sum = mem_calloc(sum_n, sizeof(float), err))) return CALF_ENOMEM;
    if ((rc = offpolicy_add_tree(o, t->critic_g.n, err)) ||
        (rc = offpolicy_add_tree(o, t->actor_g.n + 1, err)))
        return rc;
    return CALF_OK;
}

static int sac_create(const algo_setup *s, algorithm **out, calf_error *err) {
    return offpolicy_create(sizeof(sac), sac_init, sac_destroy, s, out, err);
}

static void sac_destroy(algorithm *a) {
    sac *t = (sac *)a;
    if (!t) return;
    offpolicy_free(&t->o);
    param_group_free(&t->actor_g);
    param_group_free(&t->critic_g);
    param_group_free(&t->target_g);
    param_group_free(&t->alpha_g);
    net_cache_free(&t->actor_cache);
    net_cache_free(&t->qa_cache);
    net_cache_free(&t->qb_cache);
    net_cache_free(&t->ta_cache);
    net_cache_free(&t->tb_cache);
    void *bufs[] = {t->qin, t->head, t->anew, t->logp, t->y, t->qa, t->qb, t->ta, t->tb,
                    t->dqa, t->dqb, t->dxa, t->dxb, t->dhead, t->dalpha, t->sum, t->row_a};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(t);
}

/* ---- acting --------------------------------------------------------------------- */

/* min(q1, q2) of discrete critic rows (n each) into out. */
static void min_rows(const float *qa, const float *qb, int rows, int n, float *out) {
    for (size_t i = 0; i < (size_t)rows * n; i++) out[i] = qa[i] < qb[i] ? qa[i] : qb[i];
}

static float alpha_of(const sac *t) { return (float)cm_exp((double)t->alpha_g.params[0]); }

static void sac_act(algorithm *a, int64_t iteration, int s, const float *obs,
                    const uint8_t *mask, int *act, float *u) {
    sac *t = (sac *)a;
    offpolicy *o = &t->o;
    int n = o->count, A = o->A;
    if (offpolicy_act_random(o, iteration, s, mask, act, u)) return;
    if (A > 0) {
        net_forward(&t->actor, t->actor_g.params, obs, n, &t->actor_cache, t->head);
        for (int e = 0; e < n; e++) {
            float *eps = t->row_a;
            for (int i = 0; i < A; i++) eps[i] = (float)calf_rng_normal(&o->act_rng[e]);
            act[e] = 0;
            sac_squashed_sample(A, t->head + (size_t)e * 2 * A, eps, o->lo, o->hi,
                                u + (size_t)e * A, NULL);
        }
        return;
    }
    net_forward(&t->q1, t->critic_g.params, obs, n, &t->qa_cache, t->qa);
    net_forward(&t->q2, t->critic_g.params, obs, n, &t->qb_cache, t->qb);
    min_rows(t->qa, t->qb, n, o->nA, t->ta);
    float alpha = alpha_of(t);
    for (int e = 0; e < n; e++)
        act[e] = sac_discrete_sample(o->nA, t->ta + (size_t)e * o->nA, alpha,
                                     calf_rng_uniform_double(&o->act_rng[e]));
}

/* Greedy actions (rng NULL), or actions drawn as sac_act draws them (row r from rng[r]):
 * continuous, the squashed Gaussian; discrete, softmax(min(Q1, Q2) / alpha), among the
 * valid actions of a caller's mask (logits min Q / alpha). */
static void act_rows(sac *t, const float *obs, const uint8_t *mask, int rows, calf_rng *rng,
                     int *act, float *u) {
    /* sac_check refuses masked envs; a caller's mask (calf_policy) holds */
    const offpolicy *o = &t->o;
    for (int r0 = 0; r0 < rows; r0 += o->rows) {
        int b = rows - r0 < o->rows ? rows - r0 : o->rows;
        const float *x = obs + (size_t)r0 * o->od;
        if (o->A > 0) {
            net_forward(&t->actor, t->actor_g.params, x, b, &t->actor_cache, t->head);
            for (int k = 0; k < b; k++) {
                const float *h = t->head + (size_t)k * 2 * o->A;
                float *uk = u + (size_t)(r0 + k) * o->A;
                act[r0 + k] = 0;
                if (!rng) {
                    sac_squashed_greedy(o->A, h, o->lo, o->hi, uk);
                    continue;
                }
                float *eps = t->row_a;
                for (int i = 0; i < o->A; i++) eps[i] = (float)calf_rng_normal(&rng[r0 + k]);
                sac_squashed_sample(o->A, h, eps, o->lo, o->hi, uk, NULL);
            }
            continue;
        }
        net_forward(&t->q1, t->critic_g.params, x, b, &t->qa_cache, t->qa);
        net_forward(&t->q2, t->critic_g.params, x, b, &t->qb_cache, t->qb);
        min_rows(t->qa, t->qb, b, o->nA, t->ta);
        float alpha = alpha_of(t);
        for (int k = 0; k < b; k++) {
            float *q = t->ta + (size_t)k * o->nA;
            const uint8_t *m = mask ? mask + (size_t)(r0 + k) * o->nA : NULL;
            if (!rng) {
                act[r0 + k] = m ? dist_categorical_mode_masked(q, m, o->nA)
                                : sac_discrete_greedy(o->nA, q);
            } else if (!m) {
                act[r0 + k] = sac_discrete_sample(o->nA, q, alpha,
                                                  calf_rng_uniform_double(&rng[r0 + k]));
            } else {
                for (int j = 0; j < o->nA; j++) q[j] /= alpha;
                act[r0 + k] = dist_categorical_sample_masked(q, m, o->nA, &rng[r0 + k]);
            }
        }
    }
}

static void sac_greedy(algorithm *a, const float *obs, const uint8_t *mask, int rows,
                       int *act, float *u) {
    act_rows((sac *)a, obs, mask, rows, NULL, act, u);
}

static void sac_sample(algorithm *a, const float *obs, const uint8_t *mask, int rows,
                       calf_rng *rng, int *act, float *u) {
    act_rows((sac *)a, obs, mask, rows, rng, act, u);
}

/* What sac_greedy computes: continuous, the actor's mean squashed onto the bounds
 * (sac_squashed_greedy: cm_tanh in double, written out as calf_tanhd); discrete, the argmax of min(Q1, Q2) of
 * the online critics (min_rows, sac_discrete_greedy). */
static int sac_export_c(const algorithm *a, export_c *x, calf_error *err) {
    const sac *t = (const sac *)a;
    if (t->o.A > 0)
        return offpolicy_export_tanh_actor(x, &t->actor, t->actor_g.params, t->o.A, 2 * t->o.A,
                                           "means, then log-stds", t->o.lo, t->o.hi, err);
    int rc;
    if ((rc = export_c_net(x, "q1", &t->q1, t->critic_g.params, err)) ||
        (rc = export_c_net(x, "q2", &t->q2, t->critic_g.params, err)))
        return rc;
    export_c_body_floats(x, t->o.nA, NULL, "qa", "qb", "q", NULL);
    export_c_body(x,
                  "    q1_forward(obs, qa);\n"
                  "    q2_forward(obs, qb);\n"
                  "    for (int j = 0; j < %d; j++) q[j] = qa[j] < qb[j] ? qa[j] : qb[j];\n",
                  t->o.nA);
    export_c_argmax_return(x, "q", t->o.nA);
    return CALF_OK;
}


/* ---- one update ------------------------------------------------------------------- */

/* The critics' pass over envs [first, first + k) of v: targets y = r + gamma (soft value
 * of next_obs under the target critics), the loss 0.5 (q - y)^2 of each critic (the mean
 * over the job's batch), each env's statistics into v, and each env's partial gradient
 * folded into tree. Discrete actions: the temperature's loss too, from the critics before
 * their step, its gradient left in v->env_f for the actor pass. */
static void critic_pass(void *ctx, const offpolicy_view *v, int first, int k, comm_tree *tree) {
    sac *t = ctx;
    offpolicy *o = &t->o;
    int od = o->od, A = o->A, nA = o->nA;
    int n = offpolicy_gather(o, v, first, k);
    float alpha = alpha_of(t), log_alpha = t->alpha_g.params[0];
    float scale = 1.0f / (float)o->B;
    const float *cp = t->critic_g.params, *tp = t->target_g.params;

    if (A > 0) {
        net_forward_v(&t->actor, t->actor_g.params, t->actor_ver, o->next, n, &t->actor_cache,
                      t->head);
        for (int r = 0; r < n; r++)
            sac_squashed_sample(A, t->head + (size_t)r * 2 * A, eps_of(t, r), o->lo, o->hi,
                                t->anew + (size_t)r * A, &t->logp[r]);
        offpolicy_join_rows(o->next, od, t->anew, A, n, t->qin);
        net_forward_v(&t->q1, tp, t->target_ver, t->qin, n, &t->ta_cache, t->ta);
        net_forward_v(&t->q2, tp, t->target_ver, t->qin, n, &t->tb_cache, t->tb);
        for (int r = 0; r < n; r++)
            t->y[r] = sac_td_target(o->rew[r], t->gamma, o->term[r], t->ta[r], t->tb[r], alpha,
                                    t->logp[r]);
    } else {
        net_forward_v(&t->q1, cp, t->critic_ver, o->next, n, &t->qa_cache, t->qa);
        net_forward_v(&t->q2, cp, t->critic_ver, o->next, n, &t->qb_cache, t->qb);
        min_rows(t->qa, t->qb, n, nA, t->dqa); /* the policy row at next_obs */
        net_forward_v(&t->q1, tp, t->target_ver, o->next, n, &t->ta_cache, t->ta);
        net_forward_v(&t->q2, tp, t->target_ver, o->next, n, &t->tb_cache, t->tb);
        for (int r = 0; r < n; r++) {
            size_t off = (size_t)r * nA;
            float val = sac_discrete_next_value(nA, t->dqa + off, alpha, t->ta + off, t->tb + off);
            t->y[r] = sac_td_target_value(o->rew[r], t->gamma, o->term[r], val);
        }
    }

    const float *qx = o->obs;
    if (A > 0) {
        offpolicy_join_rows(o->obs, od, o->act, A, n, t->qin);
        qx = t->qin;
    }
    net_forward_v(&t->q1, cp, t->critic_ver, qx, n, &t->qa_cache, t->qa);
    net_forward_v(&t->q2, cp, t->critic_ver, qx, n, &t->qb_cache, t->qb);
    for (int e = 0; e < k; e++) {
        double *st = v->stats + (size_t)(first + e) * NUM_SAC_STATS;
        float da = 0.0f;
        for (int r = o->offsets[e]; r < o->offsets[e + 1]; r++) {
            float la, lb;
            if (A > 0) {
                la = sac_critic_loss(t->qa[r], t->y[r], scale, &t->dqa[r]);
                lb = sac_critic_loss(t->qb[r], t->y[r], scale, &t->dqb[r]);
            } else {
                size_t off = (size_t)r * nA;
                int action = (int)o->act[r];
                la = sac_discrete_critic_loss(nA, t->qa + off, action, t->y[r], scale, t->dqa + off);
                lb = sac_discrete_critic_loss(nA, t->qb + off, action, t->y[r], scale, t->dqb + off);
                /* the temperature's loss at obs, from the critics before their step (the
                 * targets' rows are done with: y is formed) */
                min_rows(t->qa + off, t->qb + off, 1, nA, t->ta + off);
                float h = sac_discrete_entropy(nA, t->ta + off, alpha);
                st[SS_ALPHA] += sac_discrete_alpha_loss(log_alpha, h, t->target_entropy, scale,
                                                        &t->dalpha[r]);
                st[SS_ENTROPY] += h;
                da = da + t->dalpha[r];
            }
            st[SS_SAMPLES] += 1;
            st[SS_CRITIC] += (double)la + lb;
        }
        if (A == 0) v->env_f[first + e] = da;
    }

    int qo = A > 0 ? 1 : nA;
    for (int e = 0; e < k; e++) {
        int r0 = o->offsets[e], cnt = o->offsets[e + 1] - r0;
        float *leaf = comm_tree_leaf(tree);
        net_backward(&t->q1, cp, &t->qa_cache, r0, cnt, t->dqa + (size_t)r0 * qo, leaf, NULL);
        net_backward(&t->q2, cp, &t->qb_cache, r0, cnt, t->dqb + (size_t)r0 * qo, leaf, NULL);
        comm_tree_push(tree);
    }
}

/* The actor's pass over envs [first, first + k) of v (after the critics' step):
 * continuous, alpha logp - min(q1, q2) at a fresh action through the stepped critics
 * and the temperature's loss -log_alpha (logp + target_entropy); each env's partial, the
 * actor's gradient then d/d log alpha (one more float), folded into tree. */
static void actor_pass(void *ctx, const offpolicy_view *v, int first, int k, comm_tree *tree) {
    sac *t = ctx;
    offpolicy *o = &t->o;
    int od = o->od, A = o->A, qi = A > 0 ? od + A : od;
    size_t an = t->actor_g.n;
    int n = offpolicy_gather(o, v, first, k);
    float alpha = alpha_of(t), log_alpha = t->alpha_g.params[0];
    float scale = 1.0f / (float)o->B;
    const float *cp = t->critic_g.params;
    if (A > 0) {
        net_forward_v(&t->actor, t->actor_g.params, t->actor_ver, o->obs, n, &t->actor_cache,
                      t->head);
        for (int r = 0; r < n; r++)
            sac_squashed_sample(A, t->head + (size_t)r * 2 * A, eps2_of(t, r), o->lo, o->hi,
                                t->anew + (size_t)r * A, &t->logp[r]);
        offpolicy_join_rows(o->obs, od, t->anew, A, n, t->qin);
        net_forward_v(&t->q1, cp, t->critic_ver, t->qin, n, &t->qa_cache, t->qa);
        net_forward_v(&t->q2, cp, t->critic_ver, t->qin, n, &t->qb_cache, t->qb);
        for (int e = 0; e < k; e++) {
            double *st = v->stats + (size_t)(first + e) * NUM_SAC_STATS;
            for (int r = o->offsets[e]; r < o->offsets[e + 1]; r++) {
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
        net_backward(&t->q1, cp, &t->qa_cache, 0, n, t->dqa, NULL, t->dxa);
        net_backward(&t->q2, cp, &t->qb_cache, 0, n, t->dqb, NULL, t->dxb);
        for (int r = 0; r < n; r++) {
            float *da = t->row_a;
            const float *xa = t->dxa + (size_t)r * qi + od, *xb = t->dxb + (size_t)r * qi + od;
            for (int i = 0; i < A; i++) da[i] = xa[i] + xb[i];
            sac_squashed_backward(A, t->head + (size_t)r * 2 * A, eps2_of(t, r), o->lo, o->hi, da,
                                  scale * alpha, t->dhead + (size_t)r * 2 * A);
        }
    }
    for (int e = 0; e < k; e++) {
        int r0 = o->offsets[e], cnt = o->offsets[e + 1] - r0;
        float *leaf = comm_tree_leaf(tree);
        float da = 0.0f;
        if (A > 0) {
            net_backward(&t->actor, t->actor_g.params, &t->actor_cache, r0, cnt,
                         t->dhead + (size_t)r0 * 2 * A, leaf, NULL);
            for (int r = r0; r < r0 + cnt; r++) da = da + t->dalpha[r];
        } else {
            da = v->env_f[first + e];
        }
        leaf[an] = da;
        comm_tree_push(tree);
    }
}

/* Discrete actions divide the critics by alpha, which must stay above 0 as a float: a
 * log alpha below about -103 makes exp underflow (continuous actions only multiply by it). */
static bool alpha_usable(const sac *t) { return t->o.A > 0 || alpha_of(t) > 0.0f; }

static int diverged(const sac *t, const char *what, calf_error *err) {
    return calf_error_set(err, CALF_EIO,
                          "iteration %lld: the %s gradient is not finite (training diverged); try "
                          "smaller learning rates (actor/Adam.lr, critic/Adam.lr, alpha/Adam.lr)",
                          (long long)t->o.iteration + 1, what);
}

static int update(void *ctx, int u, calf_error *err) {
    sac *t = ctx;
    offpolicy *o = &t->o;
    offpolicy_sample(o, o->iteration, u);
    int rc = offpolicy_pass(o, TREE_CRITIC, critic_pass, t, t->critic_g.grad, err);
    if (rc) return rc;
    if (!param_group_step(&t->critic_g)) return diverged(t, "critic", err);
    t->critic_ver++;
    size_t an = t->actor_g.n;
    rc = offpolicy_pass(o, TREE_ACTOR, actor_pass, t, t->sum, err);
    if (rc) return rc;
    memcpy(t->actor_g.grad, t->sum, an * sizeof(float));
    t->alpha_g.grad[0] = t->sum[an];
    if (o->A > 0 && !param_group_step(&t->actor_g)) return diverged(t, "actor", err);
    t->actor_ver++;
    if (!param_group_step(&t->alpha_g)) return diverged(t, "temperature", err);
    if (!alpha_usable(t))
        return calf_error_set(err, CALF_EIO,
                              "iteration %lld: log alpha fell to %g, where alpha = exp(log alpha) is 0 "
                              "as a float and the discrete policy softmax(Q / alpha) is undefined; "
                              "SacAlgorithm.target_entropy (%g) is below what the policy reaches, or "
                              "alpha/Adam.lr is too large",
                              (long long)t->o.iteration + 1, (double)t->alpha_g.params[0],
                              (double)t->target_entropy);
    if (o->A == 0) t->actor_g.step++; /* no actor: its (empty) optimizer keeps count */

    t->o.updates++;
    if (t->o.updates % t->target_period == 0)
        sac_polyak_update(t->target_g.params, t->critic_g.params, t->critic_g.n, t->tau);
    t->target_ver++;
    return CALF_OK;
}

static int sac_train(algorithm *a, int64_t iteration, calf_error *err) {
    sac *t = (sac *)a;
    if (t->lr_linear) { /* the three optimizers' lr for this iteration, from the iteration */
        t->actor_g.opt.lr = adam_lr_linear_at(t->actor_lr, iteration, t->total_iterations);
        t->critic_g.opt.lr = adam_lr_linear_at(t->critic_lr, iteration, t->total_iterations);
        t->alpha_g.opt.lr = adam_lr_linear_at(t->alpha_lr, iteration, t->total_iterations);
    }
    return offpolicy_train(&t->o, iteration, update, t, err);
}

/* ---- summaries, digest, checkpoints ---------------------------------------------- */

static int sac_summarize(algorithm *a, int64_t step, bool histograms, calf_error *err) {
    sac *t = (sac *)a;
    double g[NUM_SAC_STATS];
    int rc = offpolicy_sum_stats(&t->o, g, err);
    if (rc) return rc;
    calf_summary_scalar("SacAlgorithm/alpha", step, alpha_of(t));
    if (t->lr_linear) { /* the lr the last train used */
        if (t->o.A > 0) calf_summary_scalar("Optimizer/actor_learning_rate", step, t->actor_g.opt.lr);
        calf_summary_scalar("Optimizer/critic_learning_rate", step, t->critic_g.opt.lr);
        calf_summary_scalar("Optimizer/alpha_learning_rate", step, t->alpha_g.opt.lr);
    }
    if (g[SS_SAMPLES] > 0) {
        calf_summary_scalar("SacLoss/critic_loss", step, g[SS_CRITIC] / g[SS_SAMPLES]);
        if (t->o.A > 0) calf_summary_scalar("SacLoss/actor_loss", step, g[SS_ACTOR] / g[SS_SAMPLES]);
        calf_summary_scalar("SacLoss/alpha_loss", step, g[SS_ALPHA] / g[SS_SAMPLES]);
        calf_summary_scalar("SacAlgorithm/entropy", step, g[SS_ENTROPY] / g[SS_SAMPLES]);
    }
    if (histograms) offpolicy_histograms(&t->o, step);
    return CALF_OK;
}

static int sac_load(algorithm *a, ckpt_reader *r, int64_t iteration, calf_error *err) {
    sac *t = (sac *)a;
    int rc = offpolicy_load(&t->o, r, iteration, err);
    if (rc) return rc;
    if (!alpha_usable(t))
        return calf_error_set(err, CALF_EINVAL,
                              "%s: SACL: log alpha %g makes alpha 0, which discrete actions cannot use",
                              r->name, (double)t->alpha_g.params[0]);
    t->actor_ver++, t->critic_ver++, t->target_ver++; /* the values are the checkpoint's */
    return CALF_OK;
}

static void sac_describe(const algorithm *a, char *text, size_t cap) {
    const sac *t = (const sac *)a;
    offpolicy_describe(&t->o, text, cap);
    size_t off = strlen(text);
    if (t->lr_linear && off < cap)
        snprintf(text + off, cap - off,
                 "\nAdam.lr_schedule = 'linear': actor, critic and alpha lr %g, %g and %g at "
                 "iteration 0, down to 0 at iteration %lld",
                 t->actor_lr, t->critic_lr, t->alpha_lr, (long long)t->total_iterations);
}

const algorithm_ops sac_algorithm_ops = {
    .create = sac_create,
    .destroy = sac_destroy,
    .check = sac_check,
    .check_memory = offpolicy_check_memory,
    .start = offpolicy_ops_start,
    .act = sac_act,
    .observe = offpolicy_ops_observe,
    .train = sac_train,
    .greedy = sac_greedy,
    .sample = sac_sample,
    .export_c = sac_export_c,
    .summarize = sac_summarize,
    .digest = offpolicy_ops_digest,
    .save = offpolicy_ops_save,
    .load = sac_load,
    .env_record_size = offpolicy_ops_env_record_size,
    .save_env = offpolicy_ops_save_env,
    .load_env = offpolicy_ops_load_env,
    .describe = sac_describe,
    .report = offpolicy_ops_report,
};
