/* td3.c: TD3 (Fujimoto et al. 2018, as CleanRL's td3_continuous_action): a deterministic
 * tanh actor, twin critics trained towards r + gamma min(Q1', Q2')(s', a') with target
 * policy smoothing, the actor and the Polyak-averaged targets updated every policy_delay
 * critic updates, Gaussian exploration from per-env streams. The replay, sampling,
 * per-env partials and work sharing are the off-policy core's (offpolicy.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calf/summary.h"
#include "training/algorithm.h"
#include "algorithms/offpolicy.h"
#include "algorithms/offpolicy_math.h"
#include "base/mem.h"
#include "numerics/nn.h"
#include "numerics/param_group.h"

/* Per-env statistics of an iteration's updates. */
enum { TS_SAMPLES, TS_CRITIC, TS_Q, TS_ACTOR_SAMPLES, TS_ACTOR, NUM_TD3_STATS };
enum { TREE_CRITIC, TREE_ACTOR };

typedef struct td3 {
    offpolicy o;
    float gamma, tau, policy_noise, noise_clip, expl_noise;
    int policy_delay;
    nn_mlp actor, q1, q2;
    /* the actor and its target; q1 and q2 in the critic group, whose layout the critic
     * target copies */
    param_group actor_g, actor_target_g, critic_g, critic_target_g;
    int64_t updates;          /* critic updates over the whole run */
    uint64_t actor_ver, critic_ver, target_ver; /* nn_mlp_forward_v's cache keys */
    float *x;                 /* (rows, A) actor outputs */
    float *anew;              /* (rows, A) actions */
    float *qin;               /* (rows, od + A) */
    float *qa, *qb, *y;       /* (rows) */
    float *dqa, *dqb;         /* (rows) */
    float *dxa;               /* (rows, od + A) */
    float *dx;                /* (rows, A) */
    float *row_a;             /* (A) */
    nn_cache actor_cache, qa_cache, qb_cache;
    nn_cache target_actor_cache, ta_cache, tb_cache; /* the targets' (their own transposes) */
    float *sum;               /* (actor n) */
    int64_t iteration;
} td3;

static int td3_check(const calf_config *cfg, const calf_env_spec *spec, calf_error *err) {
    if (spec->action_dim == 0) {
        const char *env_at = cfg->origin[CALF_CFG_ENV_NAME];
        return calf_error_set(err, CALF_EINVAL,
                              "%s: Td3Algorithm needs continuous actions; %s (create_environment."
                              "env_name%s%s) has %d discrete ones",
                              offpolicy_where(cfg, CALF_CFG_ALGORITHM_CTOR), spec->name,
                              env_at[0] ? ", set at " : ", its default", env_at, spec->num_actions);
    }
    return offpolicy_check(cfg, "Td3Algorithm", err);
}

static void td3_destroy(algorithm *a);

static int td3_init(td3 *t, const algo_setup *s, calf_error *err) {
    const calf_config *cfg = s->cfg;
    offpolicy *o = &t->o;
    CALF_ASSERT(s->spec->action_dim > 0); /* td3_check refuses discrete envs */
    int rc = offpolicy_init(o, s, NUM_TD3_STATS, s->spec->action_dim, err);
    if (rc) return rc;
    t->gamma = (float)calf_config_float(cfg, CALF_CFG_TD_GAMMA);
    t->tau = (float)calf_config_float(cfg, CFG_TD3_TAU);
    t->policy_delay = (int)calf_config_int(cfg, CFG_TD3_POLICY_DELAY);
    t->policy_noise = (float)calf_config_float(cfg, CFG_TD3_POLICY_NOISE);
    t->noise_clip = (float)calf_config_float(cfg, CFG_TD3_NOISE_CLIP);
    t->expl_noise = (float)calf_config_float(cfg, CFG_TD3_EXPLORATION_NOISE);

    int ah[CALF_CFG_MAX_TUPLE], ch[CALF_CFG_MAX_TUPLE];
    int na = offpolicy_tuple_ints(cfg, CALF_CFG_SAC_ACTOR_LAYERS, ah);
    int nc = offpolicy_tuple_ints(cfg, CALF_CFG_SAC_CRITIC_LAYERS, ch);
    CALF_ASSERT(na < NN_MAX_LAYERS && nc < NN_MAX_LAYERS);
    int od = o->od, A = o->A;
    size_t cursor = 0;
    nn_mlp_layout(&t->actor, od, ah, na, A,
                  offpolicy_activation(calf_config_string(cfg, CALF_CFG_SAC_ACTOR_ACTIVATION)),
                  &cursor);
    adam_conf actor_opt = offpolicy_adam(cfg, calf_config_float(cfg, CALF_CFG_ACTOR_LR));
    adam_conf critic_opt = offpolicy_adam(cfg, calf_config_float(cfg, CALF_CFG_CRITIC_LR));
    if ((rc = param_group_init(&t->actor_g, "TD3A", cursor, true, actor_opt, err)) ||
        (rc = param_group_init(&t->actor_target_g, "TD3B", cursor, false, actor_opt, err)))
        return rc;
    cursor = 0;
    nn_activation cact = offpolicy_activation(calf_config_string(cfg, CALF_CFG_SAC_CRITIC_ACTIVATION));
    nn_mlp_layout(&t->q1, od + A, ch, nc, 1, cact, &cursor);
    nn_mlp_layout(&t->q2, od + A, ch, nc, 1, cact, &cursor);
    if ((rc = param_group_init(&t->critic_g, "TD3Q", cursor, true, critic_opt, err)) ||
        (rc = param_group_init(&t->critic_target_g, "TD3T", cursor, false, critic_opt, err)))
        return rc;
    /* init from the (seed, 0, CALF_RNG_INIT) stream: actor, then q1, q2 */
    calf_rng rng;
    calf_rng_seed(&rng, s->seed, 0, CALF_RNG_INIT);
    offpolicy_fan_in_init(&t->actor, t->actor_g.params, &rng);
    offpolicy_fan_in_init(&t->q1, t->critic_g.params, &rng);
    offpolicy_fan_in_init(&t->q2, t->critic_g.params, &rng);
    memcpy(t->actor_target_g.params, t->actor_g.params, t->actor_g.n * sizeof(float));
    memcpy(t->critic_target_g.params, t->critic_g.params, t->critic_g.n * sizeof(float));
    t->actor_ver = t->critic_ver = t->target_ver = 1;

    int rows = o->rows;
    if ((rc = nn_cache_init(&t->actor_cache, &t->actor, rows, err)) ||
        (rc = nn_cache_init(&t->qa_cache, &t->q1, rows, err)) ||
        (rc = nn_cache_init(&t->qb_cache, &t->q2, rows, err)) ||
        (rc = nn_cache_init(&t->target_actor_cache, &t->actor, rows, err)) ||
        (rc = nn_cache_init(&t->ta_cache, &t->q1, rows, err)) ||
        (rc = nn_cache_init(&t->tb_cache, &t->q2, rows, err)))
        return rc;
    size_t R = (size_t)rows, qi = (size_t)(od + A), a = (size_t)A;
    struct {
        float **p;
        size_t n;
    } bufs[] = {
        {&t->x, R * a},   {&t->anew, R * a}, {&t->qin, R * qi}, {&t->qa, R},
        {&t->qb, R},      {&t->y, R},        {&t->dqa, R},      {&t->dqb, R},
        {&t->dxa, R * qi}, {&t->dx, R * a},  {&t->row_a, a},
    };
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++)
        if (!(*bufs[k].p = mem_calloc(bufs[k].n, sizeof(float), err))) return CALF_ENOMEM;
    if (o->count == 0) return CALF_OK; /* acting only */
    if (!(t->sum = mem_calloc(t->actor_g.n, sizeof(float), err))) return CALF_ENOMEM;
    if ((rc = offpolicy_add_tree(o, t->critic_g.n, err)) ||
        (rc = offpolicy_add_tree(o, t->actor_g.n, err)))
        return rc;
    return CALF_OK;
}

static int td3_create(const algo_setup *s, algorithm **out, calf_error *err) {
    td3 *t = mem_calloc(1, sizeof *t, err);
    *out = (algorithm *)t;
    if (!t) return CALF_ENOMEM;
    int rc = td3_init(t, s, err);
    if (rc) {
        td3_destroy((algorithm *)t);
        t = NULL;
    }
    *out = (algorithm *)t;
    return rc;
}

static void td3_destroy(algorithm *a) {
    td3 *t = (td3 *)a;
    if (!t) return;
    offpolicy_free(&t->o);
    param_group_free(&t->actor_g);
    param_group_free(&t->actor_target_g);
    param_group_free(&t->critic_g);
    param_group_free(&t->critic_target_g);
    nn_cache_free(&t->actor_cache);
    nn_cache_free(&t->qa_cache);
    nn_cache_free(&t->qb_cache);
    nn_cache_free(&t->target_actor_cache);
    nn_cache_free(&t->ta_cache);
    nn_cache_free(&t->tb_cache);
    void *bufs[] = {t->x, t->anew, t->qin, t->qa, t->qb, t->y, t->dqa, t->dqb,
                    t->dxa, t->dx, t->row_a, t->sum};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(t);
}

static int td3_start(algorithm *a, calf_error *err) { return offpolicy_start(&((td3 *)a)->o, err); }

/* ---- acting --------------------------------------------------------------------- */

static void td3_act(algorithm *a, int64_t iteration, int s, const float *obs, int *act,
                    float *u) {
    td3 *t = (td3 *)a;
    offpolicy *o = &t->o;
    int A = o->A;
    if (offpolicy_act_random(o, iteration, s, act, u)) return;
    nn_mlp_forward(&t->actor, t->actor_g.params, obs, o->count, &t->actor_cache, t->x);
    for (int e = 0; e < o->count; e++) {
        float *noise = t->row_a;
        offpolicy_tanh_action(A, t->x + (size_t)e * A, o->lo, o->hi, t->anew);
        for (int i = 0; i < A; i++) /* CleanRL: normal(0, action_scale * exploration_noise) */
            noise[i] = (float)(calf_rng_normal(&o->act_rng[e]) * 0.5 *
                               ((double)o->hi[i] - (double)o->lo[i]) * (double)t->expl_noise);
        act[e] = 0;
        offpolicy_explore(A, t->anew, noise, o->lo, o->hi, u + (size_t)e * A);
    }
}

static void td3_observe(algorithm *a, const algo_step *st) { offpolicy_observe(&((td3 *)a)->o, st); }

static void td3_greedy(algorithm *a, const float *obs, int rows, int *act, float *u) {
    td3 *t = (td3 *)a;
    const offpolicy *o = &t->o;
    for (int r0 = 0; r0 < rows; r0 += o->rows) {
        int b = rows - r0 < o->rows ? rows - r0 : o->rows;
        nn_mlp_forward(&t->actor, t->actor_g.params, obs + (size_t)r0 * o->od, b, &t->actor_cache,
                       t->x);
        for (int k = 0; k < b; k++) {
            act[r0 + k] = 0;
            offpolicy_tanh_action(o->A, t->x + (size_t)k * o->A, o->lo, o->hi,
                                  u + (size_t)(r0 + k) * o->A);
        }
    }
}

/* What td3_greedy computes: the actor's output squashed onto the bounds. */
static int td3_export_c(const algorithm *a, export_c *x, calf_error *err) {
    (void)err;
    const td3 *t = (const td3 *)a;
    offpolicy_export_tanh_actor(x, &t->actor, t->actor_g.params, t->o.A, t->o.A,
                                "pre-tanh actions", t->o.lo, t->o.hi);
    return CALF_OK;
}

/* ---- one update ------------------------------------------------------------------- */

/* Critic input rows (obs | action). */
static void join_rows(const float *x, int od, const float *u, int A, int rows, float *out) {
    for (int r = 0; r < rows; r++) {
        memcpy(out + (size_t)r * (od + A), x + (size_t)r * od, (size_t)od * sizeof(float));
        memcpy(out + (size_t)r * (od + A) + od, u + (size_t)r * A, (size_t)A * sizeof(float));
    }
}

/* The critics' pass: y = r + gamma min(Q1', Q2')(s', a') with a' the target actor's action
 * at s' smoothed by the sample's noise, then (Q1(s, a) - y)^2 + (Q2(s, a) - y)^2, the
 * mean over the job's batch; each env's partial into tree. */
static void critic_pass(void *ctx, const offpolicy_view *v, int first, int k, comm_tree *tree) {
    td3 *t = ctx;
    offpolicy *o = &t->o;
    int od = o->od, A = o->A;
    int n = offpolicy_gather(o, v, first, k);
    float scale = 1.0f / (float)o->B;
    const float *cp = t->critic_g.params, *tp = t->critic_target_g.params;
    nn_mlp_forward_v(&t->actor, t->actor_target_g.params, t->target_ver, o->next, n,
                     &t->target_actor_cache, t->x);
    for (int r = 0; r < n; r++) {
        float *an = t->anew + (size_t)r * A;
        offpolicy_tanh_action(A, t->x + (size_t)r * A, o->lo, o->hi, an);
        offpolicy_smoothed_action(A, an, o->noise + (size_t)r * A, t->policy_noise,
                                  t->noise_clip, o->lo, o->hi, an);
    }
    join_rows(o->next, od, t->anew, A, n, t->qin);
    nn_mlp_forward_v(&t->q1, tp, t->target_ver, t->qin, n, &t->ta_cache, t->qa);
    nn_mlp_forward_v(&t->q2, tp, t->target_ver, t->qin, n, &t->tb_cache, t->qb);
    for (int r = 0; r < n; r++) {
        float m = t->qa[r] <= t->qb[r] ? t->qa[r] : t->qb[r];
        t->y[r] = offpolicy_td_target(o->rew[r], t->gamma, o->term[r], m);
    }
    join_rows(o->obs, od, o->act, A, n, t->qin);
    nn_mlp_forward_v(&t->q1, cp, t->critic_ver, t->qin, n, &t->qa_cache, t->qa);
    nn_mlp_forward_v(&t->q2, cp, t->critic_ver, t->qin, n, &t->qb_cache, t->qb);
    for (int e = 0; e < k; e++) {
        double *st = v->stats + (size_t)(first + e) * NUM_TD3_STATS;
        for (int r = o->offsets[e]; r < o->offsets[e + 1]; r++) {
            float la = offpolicy_mse_loss(t->qa[r], t->y[r], scale, &t->dqa[r]);
            float lb = offpolicy_mse_loss(t->qb[r], t->y[r], scale, &t->dqb[r]);
            st[TS_SAMPLES] += 1;
            st[TS_CRITIC] += (double)la + lb;
            st[TS_Q] += t->qa[r];
        }
    }
    for (int e = 0; e < k; e++) {
        int r0 = o->offsets[e], cnt = o->offsets[e + 1] - r0;
        float *leaf = comm_tree_leaf(tree);
        nn_mlp_backward(&t->q1, cp, &t->qa_cache, r0, cnt, t->dqa + r0, leaf, NULL);
        nn_mlp_backward(&t->q2, cp, &t->qb_cache, r0, cnt, t->dqb + r0, leaf, NULL);
        comm_tree_push(tree);
    }
}

/* The actor's pass (after the critics' step): -Q1(s, pi(s)), the mean over the batch,
 * through the stepped critic's action input into the actor; each env's partial. */
static void actor_pass(void *ctx, const offpolicy_view *v, int first, int k, comm_tree *tree) {
    td3 *t = ctx;
    offpolicy *o = &t->o;
    int od = o->od, A = o->A, qi = od + A;
    int n = offpolicy_gather(o, v, first, k);
    float scale = 1.0f / (float)o->B;
    const float *cp = t->critic_g.params;
    nn_mlp_forward_v(&t->actor, t->actor_g.params, t->actor_ver, o->obs, n, &t->actor_cache, t->x);
    for (int r = 0; r < n; r++)
        offpolicy_tanh_action(A, t->x + (size_t)r * A, o->lo, o->hi, t->anew + (size_t)r * A);
    join_rows(o->obs, od, t->anew, A, n, t->qin);
    nn_mlp_forward_v(&t->q1, cp, t->critic_ver, t->qin, n, &t->qa_cache, t->qa);
    for (int e = 0; e < k; e++) {
        double *st = v->stats + (size_t)(first + e) * NUM_TD3_STATS;
        for (int r = o->offsets[e]; r < o->offsets[e + 1]; r++) {
            t->dqa[r] = -scale;
            st[TS_ACTOR_SAMPLES] += 1;
            st[TS_ACTOR] -= t->qa[r];
        }
    }
    nn_mlp_backward(&t->q1, cp, &t->qa_cache, 0, n, t->dqa, NULL, t->dxa);
    for (int r = 0; r < n; r++)
        offpolicy_tanh_action_backward(A, t->x + (size_t)r * A, o->lo, o->hi,
                                       t->dxa + (size_t)r * qi + od, t->dx + (size_t)r * A);
    for (int e = 0; e < k; e++) {
        int r0 = o->offsets[e], cnt = o->offsets[e + 1] - r0;
        float *leaf = comm_tree_leaf(tree);
        nn_mlp_backward(&t->actor, t->actor_g.params, &t->actor_cache, r0, cnt,
                        t->dx + (size_t)r0 * A, leaf, NULL);
        comm_tree_push(tree);
    }
}

static int diverged(const td3 *t, const char *what, calf_error *err) {
    return calf_error_set(err, CALF_EIO,
                          "iteration %lld: the %s gradient is not finite (training diverged); try "
                          "smaller learning rates (actor/Adam.lr, critic/Adam.lr)",
                          (long long)t->iteration + 1, what);
}

/* Whether the critic update numbered `updates` (1-based over the run) is followed by the
 * actor's and the targets' (CleanRL: global_step % policy_frequency == 0). */
static bool actor_due(const td3 *t, int64_t updates) { return updates % t->policy_delay == 0; }

static int update(td3 *t, int u, calf_error *err) {
    offpolicy *o = &t->o;
    offpolicy_sample(o, t->iteration, u);
    int rc = offpolicy_pass(o, TREE_CRITIC, critic_pass, t, t->critic_g.grad, err);
    if (rc) return rc;
    if (!param_group_step(&t->critic_g)) return diverged(t, "critic", err);
    t->critic_ver++;
    t->updates++;
    if (!actor_due(t, t->updates)) return CALF_OK;
    rc = offpolicy_pass(o, TREE_ACTOR, actor_pass, t, t->actor_g.grad, err);
    if (rc) return rc;
    if (!param_group_step(&t->actor_g)) return diverged(t, "actor", err);
    t->actor_ver++;
    offpolicy_polyak_update(t->actor_target_g.params, t->actor_g.params, t->actor_g.n, t->tau);
    offpolicy_polyak_update(t->critic_target_g.params, t->critic_g.params, t->critic_g.n, t->tau);
    t->target_ver++;
    return CALF_OK;
}

static int td3_train(algorithm *a, int64_t iteration, calf_error *err) {
    td3 *t = (td3 *)a;
    t->iteration = iteration;
    offpolicy_clear_stats(&t->o);
    if (!offpolicy_learning(&t->o, iteration)) return CALF_OK;
    for (int u = 0; u < t->o.U; u++) {
        int rc = update(t, u, err);
        if (rc) return rc;
    }
    return CALF_OK;
}

/* ---- summaries, digest, checkpoints ---------------------------------------------- */

static int td3_summarize(algorithm *a, int64_t step, bool histograms, calf_error *err) {
    td3 *t = (td3 *)a;
    double g[NUM_TD3_STATS];
    int rc = offpolicy_sum_stats(&t->o, g, err);
    if (rc) return rc;
    if (g[TS_SAMPLES] > 0) {
        calf_summary_scalar("Td3Loss/critic_loss", step, g[TS_CRITIC] / g[TS_SAMPLES]);
        calf_summary_scalar("Td3Algorithm/q1", step, g[TS_Q] / g[TS_SAMPLES]);
    }
    if (g[TS_ACTOR_SAMPLES] > 0)
        calf_summary_scalar("Td3Loss/actor_loss", step, g[TS_ACTOR] / g[TS_ACTOR_SAMPLES]);
    if (histograms) {
        calf_summary_histogram("Params/actor", step, t->actor_g.params, t->actor_g.n);
        calf_summary_histogram("Params/critic", step, t->critic_g.params, t->critic_g.n);
        calf_summary_histogram("Grads/critic", step, t->critic_g.grad, t->critic_g.n);
    }
    return CALF_OK;
}

static uint64_t td3_digest(const algorithm *a) {
    const td3 *t = (const td3 *)a;
    uint64_t h = 0xcbf29ce484222325ULL;
    h = param_group_digest(&t->actor_g, h);
    h = param_group_digest(&t->actor_target_g, h);
    h = param_group_digest(&t->critic_g, h);
    return param_group_digest(&t->critic_target_g, h);
}

/* "TD3U" the critic updates done, the four groups, then the replay counters. */
static void td3_save(const algorithm *a, ckpt_buf *b) {
    const td3 *t = (const td3 *)a;
    ckpt_put_tag(b, "TD3U");
    ckpt_put_i64(b, t->updates);
    param_group_save(&t->actor_g, b);
    param_group_save(&t->actor_target_g, b);
    param_group_save(&t->critic_g, b);
    param_group_save(&t->critic_target_g, b);
    offpolicy_save_counters(&t->o, b);
}

static int td3_load(algorithm *a, ckpt_reader *r, int64_t iteration, calf_error *err) {
    td3 *t = (td3 *)a;
    int64_t updates = 0, want = offpolicy_updates_after(&t->o, iteration);
    ckpt_get_tag(r, "TD3U");
    ckpt_get_i64(r, &updates);
    if (r->status) return r->status;
    if (updates != want)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: counters do not match iteration %lld of this config", r->name,
                              (long long)iteration);
    int rc = param_group_load(&t->actor_g, r, want / t->policy_delay, err);
    if (rc == CALF_OK) rc = param_group_load(&t->actor_target_g, r, 0, err);
    if (rc == CALF_OK) rc = param_group_load(&t->critic_g, r, want, err);
    if (rc == CALF_OK) rc = param_group_load(&t->critic_target_g, r, 0, err);
    if (rc) return rc;
    t->actor_ver++, t->critic_ver++, t->target_ver++;
    t->updates = updates;
    return offpolicy_load_counters(&t->o, r, iteration, err);
}

static size_t td3_env_record_size(const algorithm *a) {
    return offpolicy_env_record_size(&((const td3 *)a)->o);
}

static void td3_save_env(const algorithm *a, int e, unsigned char *rec) {
    offpolicy_save_env(&((const td3 *)a)->o, e, rec);
}

static int td3_load_env(algorithm *a, int e, const unsigned char *rec, const char *name,
                        calf_error *err) {
    return offpolicy_load_env(&((td3 *)a)->o, e, rec, name, err);
}

static void td3_describe(const algorithm *a, char *text, size_t cap) {
    const td3 *t = (const td3 *)a;
    offpolicy_describe(&t->o, text, cap);
    size_t off = strlen(text);
    if (off < cap)
        snprintf(text + off, cap - off,
                 "\nTd3Algorithm: the actor and the targets every %d critic updates; target "
                 "smoothing noise %g clipped at %g, exploration noise %g (of the action range's half)",
                 t->policy_delay, (double)t->policy_noise, (double)t->noise_clip,
                 (double)t->expl_noise);
}

static void td3_report(const algorithm *a, double run_s, char *text, size_t cap) {
    const td3 *t = (const td3 *)a;
    offpolicy_report(&t->o, t->updates, run_s, text, cap);
}

const algorithm_ops td3_algorithm_ops = {
    .create = td3_create,
    .destroy = td3_destroy,
    .check = td3_check,
    .check_memory = offpolicy_check_memory,
    .start = td3_start,
    .act = td3_act,
    .observe = td3_observe,
    .train = td3_train,
    .greedy = td3_greedy,
    .export_c = td3_export_c,
    .summarize = td3_summarize,
    .digest = td3_digest,
    .save = td3_save,
    .load = td3_load,
    .env_record_size = td3_env_record_size,
    .save_env = td3_save_env,
    .load_env = td3_load_env,
    .describe = td3_describe,
    .report = td3_report,
};
