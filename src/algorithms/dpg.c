/* dpg.c: the deterministic policy gradient algorithms, a tanh actor and Q critics on the
 * off-policy core (offpolicy.h; the replay, sampling, per-env partials and work sharing
 * are its). DDPG (ALF's DdpgAlgorithm): one critic towards r + gamma Q'(s', mu'(s')),
 * Polyak targets every target_update_period updates, Ornstein-Uhlenbeck (each env's
 * state in its checkpoint record) or Gaussian exploration. TD3 (Fujimoto et al. 2018, as
 * CleanRL's td3_continuous_action) is DDPG with its three changes: twin critics and the
 * min of their targets, target policy smoothing, and the actor and targets updated every
 * policy_delay critic updates. Exploration draws come from the per-env action streams. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calf/summary.h"
#include "training/algorithm.h"
#include "algorithms/offpolicy.h"
#include "algorithms/offpolicy_math.h"
#include "base/bytes.h"
#include "base/mem.h"
#include "numerics/net.h"
#include "numerics/param_group.h"

/* Per-env statistics of an iteration's updates. */
enum { TS_SAMPLES, TS_CRITIC, TS_Q, TS_ACTOR_SAMPLES, TS_ACTOR, NUM_TD3_STATS };
enum { TREE_CRITIC, TREE_ACTOR };

/* What tells the two apart. */
typedef struct flavor {
    const char *name;          /* the registry's */
    const char *tags[5];       /* checkpoint: counter, actor, actor target, critics, targets */
    bool td3;                  /* twin critics, target smoothing, policy delay */
} flavor;
static const flavor TD3 = {"Td3Algorithm", {"TD3U", "TD3A", "TD3B", "TD3Q", "TD3T"}, true};
static const flavor DDPG = {"DdpgAlgorithm", {"DDPU", "DDPA", "DDPB", "DDPQ", "DDPT"}, false};

typedef struct dpg {
    offpolicy o;              /* first: the core's ops take the struct as it */
    const flavor *f;
    float gamma, tau, policy_noise, noise_clip;
    float noise_std;          /* exploration: Gaussian std or the OU kick's, of the range's half */
    bool ou;                  /* Ornstein-Uhlenbeck exploration (DDPG's default) */
    float ou_damping;
    int policy_delay;         /* TD3: actor and targets every this many critic updates */
    int target_period;        /* DDPG: the targets every this many updates */
    int ncritics;             /* 2 for TD3, 1 for DDPG */
    bool lr_linear;           /* Adam.lr_schedule = 'linear' */
    double actor_lr, critic_lr; /* as configured: what the schedule scales */
    int64_t total_iterations; /* the run's planned length (the schedule) */
    float *ou_x;              /* (count, A) each env's OU state */
    net actor, q1, q2;
    /* the actor and its target; q1 and q2 in the critic group, whose layout the critic
     * target copies */
    param_group actor_g, actor_target_g, critic_g, critic_target_g;
    uint64_t actor_ver, critic_ver, target_ver; /* net_forward_v's cache keys */
    float *x;                 /* (rows, A) actor outputs */
    float *anew;              /* (rows, A) actions */
    float *qin;               /* (rows, od + A) */
    float *qa, *qb, *y;       /* (rows) */
    float *dqa, *dqb;         /* (rows) */
    float *dxa;               /* (rows, od + A) */
    float *dx;                /* (rows, A) */
    float *row_a;             /* (A) */
    net_cache actor_cache, qa_cache, qb_cache;
    net_cache target_actor_cache, ta_cache, tb_cache; /* the targets' (their own transposes) */
    float *sum;               /* (actor n) */
} dpg;

static int dpg_check(const flavor *f, const calf_config *cfg, const calf_env_spec *spec,
                     calf_error *err) {
    if (spec->action_dim == 0) {
        const char *env_at = cfg->origin[CALF_CFG_ENV_NAME];
        return calf_error_set(err, CALF_EINVAL,
                              "%s: %s needs continuous actions; %s (create_environment."
                              "env_name%s%s) has %d discrete ones",
                              config_where(cfg, CALF_CFG_ALGORITHM_CTOR), f->name, spec->name,
                              env_at[0] ? ", set at " : ", its default", env_at, spec->num_actions);
    }
    int rc = offpolicy_check_mlp_only(cfg, f->name, err);
    return rc ? rc : offpolicy_check(cfg, f->name, err);
}

static int td3_check(const calf_config *cfg, const calf_env_spec *spec, calf_error *err) {
    return dpg_check(&TD3, cfg, spec, err);
}

static int ddpg_check(const calf_config *cfg, const calf_env_spec *spec, calf_error *err) {
    return dpg_check(&DDPG, cfg, spec, err);
}

static void dpg_destroy(algorithm *a);

static int dpg_init(algorithm *a, const algo_setup *s, calf_error *err) {
    dpg *t = (dpg *)a;
    const flavor *f = t->f;
    const calf_config *cfg = s->cfg;
    offpolicy *o = &t->o;
    CALF_ASSERT(s->spec->action_dim > 0); /* dpg_check refuses discrete envs */
    /* TD3's samples draw their target smoothing noise */
    int rc = offpolicy_init(o, s, NUM_TD3_STATS, f->td3 ? s->spec->action_dim : 0, err);
    if (rc) return rc;
    t->gamma = (float)calf_config_float(cfg, CALF_CFG_TD_GAMMA);
    if (f->td3) {
        t->tau = (float)calf_config_float(cfg, CFG_TD3_TAU);
        t->policy_delay = (int)calf_config_int(cfg, CFG_TD3_POLICY_DELAY);
        t->target_period = 1;
        t->policy_noise = (float)calf_config_float(cfg, CFG_TD3_POLICY_NOISE);
        t->noise_clip = (float)calf_config_float(cfg, CFG_TD3_NOISE_CLIP);
        t->noise_std = (float)calf_config_float(cfg, CFG_TD3_EXPLORATION_NOISE);
        t->ncritics = 2;
    } else {
        t->tau = (float)calf_config_float(cfg, CFG_DDPG_TAU);
        t->policy_delay = 1;
        t->target_period = (int)calf_config_int(cfg, CFG_DDPG_TARGET_PERIOD);
        t->noise_std = (float)calf_config_float(cfg, CFG_DDPG_OU_STDDEV);
        t->ou = strcmp(calf_config_string(cfg, CFG_DDPG_NOISE), "ou") == 0;
        t->ou_damping = (float)calf_config_float(cfg, CFG_DDPG_OU_DAMPING);
        t->ncritics = 1;
    }

    int od = o->od, A = o->A;
    size_t cursor = 0;
    rc = offpolicy_net(&t->actor, cfg, CALF_CFG_SAC_ACTOR_LAYERS, CALF_CFG_SAC_ACTOR_ACTIVATION,
                       od, A, &cursor, err);
    if (rc) return rc;
    t->actor_lr = calf_config_float(cfg, CALF_CFG_ACTOR_LR);
    t->critic_lr = calf_config_float(cfg, CALF_CFG_CRITIC_LR);
    t->lr_linear = strcmp(calf_config_string(cfg, CALF_CFG_LR_SCHEDULE), "linear") == 0;
    t->total_iterations = s->total_iterations;
    adam_conf actor_opt = offpolicy_adam(cfg, t->actor_lr);
    adam_conf critic_opt = offpolicy_adam(cfg, t->critic_lr);
    if ((rc = param_group_init(&t->actor_g, f->tags[1], cursor, true, actor_opt, err)) ||
        (rc = param_group_init(&t->actor_target_g, f->tags[2], cursor, false, actor_opt, err)))
        return rc;
    cursor = 0;
    if ((rc = offpolicy_net(&t->q1, cfg, CALF_CFG_SAC_CRITIC_LAYERS, CALF_CFG_SAC_CRITIC_ACTIVATION,
                            od + A, 1, &cursor, err)) ||
        (t->ncritics == 2 &&
         (rc = offpolicy_net(&t->q2, cfg, CALF_CFG_SAC_CRITIC_LAYERS,
                             CALF_CFG_SAC_CRITIC_ACTIVATION, od + A, 1, &cursor, err))))
        return rc;
    if ((rc = param_group_init(&t->critic_g, f->tags[3], cursor, true, critic_opt, err)) ||
        (rc = param_group_init(&t->critic_target_g, f->tags[4], cursor, false, critic_opt, err)))
        return rc;
    /* the flavor's counter tag ("TD3U", "DDPU"): the critic updates done, the four groups,
     * then the replay counters */
    const offpolicy_group groups[] = {
        {.g = &t->actor_g, .name = "actor", .step_period = t->policy_delay}, /* TD3: delayed */
        {.g = &t->actor_target_g},
        {.g = &t->critic_g, .name = "critic", .grads = true},
        {.g = &t->critic_target_g},
    };
    offpolicy_set_groups(o, f->tags[0], groups, 4);
    /* init from the (seed, 0, CALF_RNG_INIT) stream: actor, then q1 (and q2) */
    calf_rng rng;
    calf_rng_seed(&rng, s->seed, 0, CALF_RNG_INIT);
    net_init_fan_in(&t->actor, t->actor_g.params, &rng);
    net_init_fan_in(&t->q1, t->critic_g.params, &rng);
    if (t->ncritics == 2) net_init_fan_in(&t->q2, t->critic_g.params, &rng);
    memcpy(t->actor_target_g.params, t->actor_g.params, t->actor_g.n * sizeof(float));
    memcpy(t->critic_target_g.params, t->critic_g.params, t->critic_g.n * sizeof(float));
    t->actor_ver = t->critic_ver = t->target_ver = 1;

    int rows = o->rows;
    if ((rc = net_cache_init(&t->actor_cache, &t->actor, rows, err)) ||
        (rc = net_cache_init(&t->qa_cache, &t->q1, rows, err)) ||
        (rc = net_cache_init(&t->target_actor_cache, &t->actor, rows, err)) ||
        (rc = net_cache_init(&t->ta_cache, &t->q1, rows, err)))
        return rc;
    if (t->ncritics == 2 && ((rc = net_cache_init(&t->qb_cache, &t->q2, rows, err)) ||
                             (rc = net_cache_init(&t->tb_cache, &t->q2, rows, err))))
        return rc;
    size_t R = (size_t)rows, qi = (size_t)(od + A), ad = (size_t)A;
    struct {
        float **p;
        size_t n;
    } bufs[] = {
        {&t->x, R * ad},   {&t->anew, R * ad}, {&t->qin, R * qi}, {&t->qa, R},
        {&t->qb, R},      {&t->y, R},        {&t->dqa, R},      {&t->dqb, R},
        {&t->dxa, R * qi}, {&t->dx, R * ad},  {&t->row_a, ad},
    };
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++)
        if (!(*bufs[k].p = mem_calloc(bufs[k].n, sizeof(float), err))) return CALF_ENOMEM;
    if (o->count == 0) return CALF_OK; /* acting only */
    if (!(t->sum = mem_calloc(t->actor_g.n, sizeof(float), err)) ||
        !(t->ou_x = mem_calloc(ad * (size_t)o->count, sizeof(float), err)))
        return CALF_ENOMEM;
    if ((rc = offpolicy_add_tree(o, t->critic_g.n, err)) ||
        (rc = offpolicy_add_tree(o, t->actor_g.n, err)))
        return rc;
    return CALF_OK;
}

/* The flavor is the init's: offpolicy_create zeroes the struct, so init tells the two
 * apart by the function it was called through. */
static int td3_init(algorithm *a, const algo_setup *s, calf_error *err) {
    ((dpg *)a)->f = &TD3;
    return dpg_init(a, s, err);
}

static int ddpg_init(algorithm *a, const algo_setup *s, calf_error *err) {
    ((dpg *)a)->f = &DDPG;
    return dpg_init(a, s, err);
}

static int td3_create(const algo_setup *s, algorithm **out, calf_error *err) {
    return offpolicy_create(sizeof(dpg), td3_init, dpg_destroy, s, out, err);
}

static int ddpg_create(const algo_setup *s, algorithm **out, calf_error *err) {
    return offpolicy_create(sizeof(dpg), ddpg_init, dpg_destroy, s, out, err);
}

static void dpg_destroy(algorithm *a) {
    dpg *t = (dpg *)a;
    if (!t) return;
    offpolicy_free(&t->o);
    param_group_free(&t->actor_g);
    param_group_free(&t->actor_target_g);
    param_group_free(&t->critic_g);
    param_group_free(&t->critic_target_g);
    net_cache_free(&t->actor_cache);
    net_cache_free(&t->qa_cache);
    net_cache_free(&t->qb_cache);
    net_cache_free(&t->target_actor_cache);
    net_cache_free(&t->ta_cache);
    net_cache_free(&t->tb_cache);
    void *bufs[] = {t->x, t->anew, t->qin, t->qa, t->qb, t->y, t->dqa, t->dqb,
                    t->dxa, t->dx, t->row_a, t->sum, t->ou_x};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(t);
}

/* ---- acting --------------------------------------------------------------------- */

static void dpg_act(algorithm *a, int64_t iteration, int s, const float *obs,
                    const uint8_t *mask, int *act, float *u) {
    dpg *t = (dpg *)a;
    offpolicy *o = &t->o;
    int A = o->A;
    if (offpolicy_act_random(o, iteration, s, mask, act, u)) return;
    net_forward(&t->actor, t->actor_g.params, obs, o->count, &t->actor_cache, t->x);
    for (int e = 0; e < o->count; e++) {
        float *noise = t->row_a;
        offpolicy_tanh_action(A, t->x + (size_t)e * A, o->lo, o->hi, t->anew);
        if (t->ou) { /* the env's OU state moves one step; the noise is that state */
            float *x = t->ou_x + (size_t)e * A;
            for (int i = 0; i < A; i++) noise[i] = (float)calf_rng_normal(&o->act_rng[e]);
            offpolicy_ou_step(A, x, noise, t->ou_damping, t->noise_std);
            for (int i = 0; i < A; i++)
                noise[i] = (float)((double)x[i] * 0.5 * ((double)o->hi[i] - (double)o->lo[i]));
        } else { /* CleanRL: normal(0, action_scale * exploration_noise) */
            for (int i = 0; i < A; i++)
                noise[i] = (float)(calf_rng_normal(&o->act_rng[e]) * 0.5 *
                                   ((double)o->hi[i] - (double)o->lo[i]) * (double)t->noise_std);
        }
        act[e] = 0;
        offpolicy_explore(A, t->anew, noise, o->lo, o->hi, u + (size_t)e * A);
    }
}

static void dpg_greedy(algorithm *a, const float *obs, const uint8_t *mask, int rows,
                       int *act, float *u) {
    (void)mask; /* continuous actions only */
    dpg *t = (dpg *)a;
    const offpolicy *o = &t->o;
    for (int r0 = 0; r0 < rows; r0 += o->rows) {
        int b = rows - r0 < o->rows ? rows - r0 : o->rows;
        net_forward(&t->actor, t->actor_g.params, obs + (size_t)r0 * o->od, b, &t->actor_cache,
                    t->x);
        for (int k = 0; k < b; k++) {
            act[r0 + k] = 0;
            offpolicy_tanh_action(o->A, t->x + (size_t)k * o->A, o->lo, o->hi,
                                  u + (size_t)(r0 + k) * o->A);
        }
    }
}

/* What dpg_greedy computes: the actor's output squashed onto the bounds. */
static int dpg_export_c(const algorithm *a, export_c *x, calf_error *err) {
    const dpg *t = (const dpg *)a;
    return offpolicy_export_tanh_actor(x, &t->actor, t->actor_g.params, t->o.A, t->o.A,
                                       "pre-tanh actions", t->o.lo, t->o.hi, err);
}

/* ---- one update ------------------------------------------------------------------- */

/* The critics' pass: TD3, y = r + gamma min(Q1', Q2')(s', a') with a' the target actor's
 * action at s' smoothed by the sample's noise, then (Q1(s, a) - y)^2 + (Q2(s, a) - y)^2;
 * DDPG, y = r + gamma Q1'(s', mu'(s')) and (Q1(s, a) - y)^2. The mean over the job's
 * batch; each env's partial into tree. */
static void critic_pass(void *ctx, const offpolicy_view *v, int first, int k, comm_tree *tree) {
    dpg *t = ctx;
    offpolicy *o = &t->o;
    int od = o->od, A = o->A;
    int n = offpolicy_gather(o, v, first, k);
    float scale = 1.0f / (float)o->B;
    const float *cp = t->critic_g.params, *tp = t->critic_target_g.params;
    net_forward_v(&t->actor, t->actor_target_g.params, t->target_ver, o->next, n,
                  &t->target_actor_cache, t->x);
    bool twin = t->ncritics == 2;
    for (int r = 0; r < n; r++) {
        float *an = t->anew + (size_t)r * A;
        offpolicy_tanh_action(A, t->x + (size_t)r * A, o->lo, o->hi, an);
        if (t->f->td3)
            offpolicy_smoothed_action(A, an, o->noise + (size_t)r * A, t->policy_noise,
                                      t->noise_clip, o->lo, o->hi, an);
    }
    offpolicy_join_rows(o->next, od, t->anew, A, n, t->qin);
    net_forward_v(&t->q1, tp, t->target_ver, t->qin, n, &t->ta_cache, t->qa);
    if (twin) net_forward_v(&t->q2, tp, t->target_ver, t->qin, n, &t->tb_cache, t->qb);
    for (int r = 0; r < n; r++) {
        float m = !twin || t->qa[r] <= t->qb[r] ? t->qa[r] : t->qb[r];
        t->y[r] = offpolicy_td_target(o->rew[r], t->gamma, o->term[r], m);
    }
    offpolicy_join_rows(o->obs, od, o->act, A, n, t->qin);
    net_forward_v(&t->q1, cp, t->critic_ver, t->qin, n, &t->qa_cache, t->qa);
    if (twin) net_forward_v(&t->q2, cp, t->critic_ver, t->qin, n, &t->qb_cache, t->qb);
    for (int e = 0; e < k; e++) {
        double *st = v->stats + (size_t)(first + e) * NUM_TD3_STATS;
        for (int r = o->offsets[e]; r < o->offsets[e + 1]; r++) {
            float la = offpolicy_mse_loss(t->qa[r], t->y[r], scale, &t->dqa[r]);
            st[TS_SAMPLES] += 1;
            if (twin) {
                float lb = offpolicy_mse_loss(t->qb[r], t->y[r], scale, &t->dqb[r]);
                st[TS_CRITIC] += (double)la + lb;
            } else {
                st[TS_CRITIC] += la;
            }
            st[TS_Q] += t->qa[r];
        }
    }
    for (int e = 0; e < k; e++) {
        int r0 = o->offsets[e], cnt = o->offsets[e + 1] - r0;
        float *leaf = comm_tree_leaf(tree);
        net_backward(&t->q1, cp, &t->qa_cache, r0, cnt, t->dqa + r0, leaf, NULL);
        if (twin) net_backward(&t->q2, cp, &t->qb_cache, r0, cnt, t->dqb + r0, leaf, NULL);
        comm_tree_push(tree);
    }
}

/* The actor's pass (after the critics' step): -Q1(s, pi(s)), the mean over the batch,
 * through the stepped critic's action input into the actor; each env's partial. */
static void actor_pass(void *ctx, const offpolicy_view *v, int first, int k, comm_tree *tree) {
    dpg *t = ctx;
    offpolicy *o = &t->o;
    int od = o->od, A = o->A, qi = od + A;
    int n = offpolicy_gather(o, v, first, k);
    float scale = 1.0f / (float)o->B;
    const float *cp = t->critic_g.params;
    net_forward_v(&t->actor, t->actor_g.params, t->actor_ver, o->obs, n, &t->actor_cache, t->x);
    for (int r = 0; r < n; r++)
        offpolicy_tanh_action(A, t->x + (size_t)r * A, o->lo, o->hi, t->anew + (size_t)r * A);
    offpolicy_join_rows(o->obs, od, t->anew, A, n, t->qin);
    net_forward_v(&t->q1, cp, t->critic_ver, t->qin, n, &t->qa_cache, t->qa);
    for (int e = 0; e < k; e++) {
        double *st = v->stats + (size_t)(first + e) * NUM_TD3_STATS;
        for (int r = o->offsets[e]; r < o->offsets[e + 1]; r++) {
            t->dqa[r] = -scale;
            st[TS_ACTOR_SAMPLES] += 1;
            st[TS_ACTOR] -= t->qa[r];
        }
    }
    net_backward(&t->q1, cp, &t->qa_cache, 0, n, t->dqa, NULL, t->dxa);
    for (int r = 0; r < n; r++)
        offpolicy_tanh_action_backward(A, t->x + (size_t)r * A, o->lo, o->hi,
                                       t->dxa + (size_t)r * qi + od, t->dx + (size_t)r * A);
    for (int e = 0; e < k; e++) {
        int r0 = o->offsets[e], cnt = o->offsets[e + 1] - r0;
        float *leaf = comm_tree_leaf(tree);
        net_backward(&t->actor, t->actor_g.params, &t->actor_cache, r0, cnt,
                     t->dx + (size_t)r0 * A, leaf, NULL);
        comm_tree_push(tree);
    }
}

static int diverged(const dpg *t, const char *what, calf_error *err) {
    return calf_error_set(err, CALF_EIO,
                          "iteration %lld: the %s gradient is not finite (training diverged); try "
                          "smaller learning rates (actor/Adam.lr, critic/Adam.lr)",
                          (long long)t->o.iteration + 1, what);
}

/* Whether the critic update numbered `updates` (1-based over the run) is followed by the
 * actor's (TD3's delay, CleanRL's global_step % policy_frequency == 0; DDPG: always), and
 * by the targets' (TD3: with the actor; DDPG: every target_update_period updates). */
static bool actor_due(const dpg *t, int64_t updates) { return updates % t->policy_delay == 0; }
static bool targets_due(const dpg *t, int64_t updates) {
    return actor_due(t, updates) && updates % t->target_period == 0;
}

static int update(void *ctx, int u, calf_error *err) {
    dpg *t = ctx;
    offpolicy *o = &t->o;
    offpolicy_sample(o, o->iteration, u);
    int rc = offpolicy_pass(o, TREE_CRITIC, critic_pass, t, t->critic_g.grad, err);
    if (rc) return rc;
    if (!param_group_step(&t->critic_g)) return diverged(t, "critic", err);
    t->critic_ver++;
    t->o.updates++;
    if (!actor_due(t, t->o.updates)) return CALF_OK;
    rc = offpolicy_pass(o, TREE_ACTOR, actor_pass, t, t->actor_g.grad, err);
    if (rc) return rc;
    if (!param_group_step(&t->actor_g)) return diverged(t, "actor", err);
    t->actor_ver++;
    if (!targets_due(t, t->o.updates)) return CALF_OK;
    offpolicy_polyak_update(t->actor_target_g.params, t->actor_g.params, t->actor_g.n, t->tau);
    offpolicy_polyak_update(t->critic_target_g.params, t->critic_g.params, t->critic_g.n, t->tau);
    t->target_ver++;
    return CALF_OK;
}

static int dpg_train(algorithm *a, int64_t iteration, calf_error *err) {
    dpg *t = (dpg *)a;
    if (t->lr_linear) { /* the two optimizers' lr for this iteration, from the iteration */
        t->actor_g.opt.lr = adam_lr_linear_at(t->actor_lr, iteration, t->total_iterations);
        t->critic_g.opt.lr = adam_lr_linear_at(t->critic_lr, iteration, t->total_iterations);
    }
    return offpolicy_train(&t->o, iteration, update, a, err);
}

/* ---- summaries, digest, checkpoints ---------------------------------------------- */

static int dpg_summarize(algorithm *a, int64_t step, bool histograms, calf_error *err) {
    dpg *t = (dpg *)a;
    double g[NUM_TD3_STATS];
    int rc = offpolicy_sum_stats(&t->o, g, err);
    if (rc) return rc;
    char tag[64];
    const char *loss = t->f->td3 ? "Td3Loss" : "DdpgLoss";
    if (t->lr_linear) { /* the lr the last train used */
        calf_summary_scalar("Optimizer/actor_learning_rate", step, t->actor_g.opt.lr);
        calf_summary_scalar("Optimizer/critic_learning_rate", step, t->critic_g.opt.lr);
    }
    if (g[TS_SAMPLES] > 0) {
        snprintf(tag, sizeof tag, "%s/critic_loss", loss);
        calf_summary_scalar(tag, step, g[TS_CRITIC] / g[TS_SAMPLES]);
        snprintf(tag, sizeof tag, "%s/q1", t->f->name);
        calf_summary_scalar(tag, step, g[TS_Q] / g[TS_SAMPLES]);
    }
    if (g[TS_ACTOR_SAMPLES] > 0) {
        snprintf(tag, sizeof tag, "%s/actor_loss", loss);
        calf_summary_scalar(tag, step, g[TS_ACTOR] / g[TS_ACTOR_SAMPLES]);
    }
    if (histograms) offpolicy_histograms(&t->o, step);
    return CALF_OK;
}

static int dpg_load(algorithm *a, ckpt_reader *r, int64_t iteration, calf_error *err) {
    dpg *t = (dpg *)a;
    int rc = offpolicy_load(&t->o, r, iteration, err);
    t->actor_ver++, t->critic_ver++, t->target_ver++;
    return rc;
}

/* Each env's record: the core's (its action stream, its ring), then for DDPG its OU
 * state, A floats as little-endian bit patterns. */
static size_t ou_bytes(const dpg *t) { return t->f->td3 ? 0 : (size_t)t->o.A * 4; }

static size_t dpg_env_record_size(const algorithm *a) {
    const dpg *t = (const dpg *)a;
    return offpolicy_env_record_size(&t->o) + ou_bytes(t);
}

static void dpg_save_env(const algorithm *a, int e, unsigned char *rec) {
    const dpg *t = (const dpg *)a;
    offpolicy_save_env(&t->o, e, rec);
    unsigned char *p = rec + offpolicy_env_record_size(&t->o);
    for (size_t i = 0; i < ou_bytes(t) / 4; i++)
        bytes_put_f32(p + 4 * i, t->ou_x[(size_t)e * t->o.A + i]);
}

static int dpg_load_env(algorithm *a, int e, const unsigned char *rec, const char *name,
                        calf_error *err) {
    dpg *t = (dpg *)a;
    int rc = offpolicy_load_env(&t->o, e, rec, name, err);
    if (rc) return rc;
    const unsigned char *p = rec + offpolicy_env_record_size(&t->o);
    for (size_t i = 0; i < ou_bytes(t) / 4; i++) {
        float x = bytes_get_f32(p + 4 * i);
        if (!isfinite(x))
            return calf_error_set(err, CALF_EINVAL, "%s: env %d's exploration noise is not finite",
                                  name, t->o.begin + e);
        t->ou_x[(size_t)e * t->o.A + i] = x;
    }
    return CALF_OK;
}

static void dpg_describe(const algorithm *a, char *text, size_t cap) {
    const dpg *t = (const dpg *)a;
    offpolicy_describe(&t->o, text, cap);
    size_t off = strlen(text);
    if (off >= cap) return;
    if (t->f->td3)
        snprintf(text + off, cap - off,
                 "\nTd3Algorithm: the actor and the targets every %d critic updates; target "
                 "smoothing noise %g clipped at %g, exploration noise %g (of the action range's half)",
                 t->policy_delay, (double)t->policy_noise, (double)t->noise_clip,
                 (double)t->noise_std);
    else
        snprintf(text + off, cap - off,
                 "\nDdpgAlgorithm: the targets every %d updates (tau %g); %s exploration noise, "
                 "std %g of the action range's half%s",
                 t->target_period, (double)t->tau, t->ou ? "Ornstein-Uhlenbeck" : "Gaussian",
                 (double)t->noise_std, t->ou ? " per step" : "");
    off = strlen(text);
    if (t->lr_linear && off < cap)
        snprintf(text + off, cap - off,
                 "\nAdam.lr_schedule = 'linear': actor and critic lr %g and %g at iteration 0, "
                 "down to 0 at iteration %lld",
                 t->actor_lr, t->critic_lr, (long long)t->total_iterations);
}

#define DPG_OPS(create_fn, check_fn)                                                          \
    {                                                                                         \
        .create = create_fn, .destroy = dpg_destroy, .check = check_fn,                       \
        .check_memory = offpolicy_check_memory, .start = offpolicy_ops_start, .act = dpg_act, \
        .observe = offpolicy_ops_observe, .train = dpg_train, .greedy = dpg_greedy,           \
        .export_c = dpg_export_c, .summarize = dpg_summarize, .digest = offpolicy_ops_digest, \
        .save = offpolicy_ops_save, .load = dpg_load, .env_record_size = dpg_env_record_size, \
        .save_env = dpg_save_env, .load_env = dpg_load_env, .describe = dpg_describe,         \
        .report = offpolicy_ops_report,                                                       \
    }
const algorithm_ops td3_algorithm_ops = DPG_OPS(td3_create, td3_check);
const algorithm_ops ddpg_algorithm_ops = DPG_OPS(ddpg_create, ddpg_check);
