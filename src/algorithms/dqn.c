/* dqn.c: DQN (Mnih et al. 2015, as CleanRL's dqn.py): one Q network trained towards
 * r + gamma max_a Q'(s', a) of a target network that copies it (or moves tau of the way)
 * every target_update_period updates (a over the actions valid at s' in a masked env),
 * with the squared or Huber TD loss, by Adam or RMSProp (the MinAtar paper's);
 * epsilon-greedy acting whose epsilon falls linearly over a fraction of the run's env
 * steps (from the first, or from the end of the initial collection), each env's draws
 * from its own stream. Discrete actions only. The replay,
 * sampling, per-env partials and work sharing are the off-policy core's (offpolicy.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calf/summary.h"
#include "training/algorithm.h"
#include "algorithms/offpolicy.h"
#include "algorithms/offpolicy_math.h"
#include "base/mem.h"
#include "algorithms/net_config.h"
#include "numerics/action_dist.h"
#include "numerics/net.h"
#include "numerics/param_group.h"

enum { DS_SAMPLES, DS_LOSS, DS_Q, NUM_DQN_STATS };
enum { TREE_Q };

typedef struct dqn {
    offpolicy o;              /* first: the core's ops take the struct as it */
    float gamma, tau;
    int target_period;
    bool huber;
    bool lr_linear;           /* Adam.lr_schedule = 'linear' (Adam's or RMSProp's lr) */
    double lr;                /* as configured: what the schedule scales */
    int64_t total_iterations; /* the run's planned length (the schedule) */
    double start_eps, end_eps;
    int64_t decay_steps;      /* env steps of the job over which epsilon falls */
    int64_t decay_start;      /* the job's env steps before it starts to fall */
    double epsilon;           /* the last act's */
    bool masked;              /* the env masks its actions */
    net q;                    /* the Q network (q and target_g share its layout) */
    param_group q_g, target_g;
    uint64_t q_ver, target_ver;
    float *qv, *tv, *dq;      /* (rows, nA) */
    float *y;                 /* (rows) */
    net_cache q_cache, t_cache;
} dqn;

static int dqn_check(const calf_config *cfg, const calf_env_spec *spec, calf_error *err) {
    if (spec->action_dim > 0) {
        const char *env_at = cfg->origin[CALF_CFG_ENV_NAME];
        return calf_error_set(err, CALF_EINVAL,
                              "%s: DqnAlgorithm needs discrete actions; %s (create_environment."
                              "env_name%s%s) has continuous ones (%d dims)",
                              config_where(cfg, CALF_CFG_ALGORITHM_CTOR), spec->name,
                              env_at[0] ? ", set at " : ", its default", env_at, spec->action_dim);
    }
    int rc = offpolicy_check_action_space(cfg, spec, "DqnAlgorithm", true, err);
    if (rc) return rc;
    if (calf_config_float(cfg, CFG_DQN_EXPLORATION_FRACTION) > 0 && offpolicy_run_env_steps(cfg) == 0)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: DqnAlgorithm.exploration_fraction is a fraction of the run's env "
                              "steps, but the run has no length: set TrainerConfig.num_iterations or "
                              "num_env_steps",
                              config_where(cfg, CFG_DQN_EXPLORATION_FRACTION));
    /* RMSprop.* set for a run that steps with Adam would be silently unused */
    static const int rmsprop_rows[] = {CFG_DQN_RMSPROP_LR, CFG_DQN_RMSPROP_ALPHA,
                                       CFG_DQN_RMSPROP_EPS, CFG_DQN_RMSPROP_CENTERED};
    if (strcmp(calf_config_string(cfg, CFG_DQN_OPTIMIZER), "rmsprop") != 0)
        for (size_t k = 0; k < sizeof rmsprop_rows / sizeof rmsprop_rows[0]; k++)
            if (cfg->origin[rmsprop_rows[k]][0])
                return calf_error_set(err, CALF_EINVAL,
                                      "%s: %s is set, but DqnAlgorithm.optimizer is 'adam': set "
                                      "DqnAlgorithm.optimizer = 'rmsprop' to use it",
                                      config_where(cfg, (calf_binding_id)rmsprop_rows[k]),
                                      calf_binding_name((calf_binding_id)rmsprop_rows[k]));
    net_obs obs = net_obs_of(spec);
    rc = net_config_check(cfg, CFG_DQN_Q_CONV_LAYERS, CFG_DQN_Q_LAYERS, CFG_DQN_Q_ACTIVATION,
                          &obs, spec->num_actions, err);
    return rc ? rc : offpolicy_check(cfg, "DqnAlgorithm", err);
}

static void dqn_destroy(algorithm *a);

static int dqn_init(algorithm *a, const algo_setup *s, calf_error *err) {
    dqn *t = (dqn *)a;
    const calf_config *cfg = s->cfg;
    offpolicy *o = &t->o;
    CALF_ASSERT(s->spec->num_actions > 0); /* dqn_check refuses continuous envs */
    int rc = offpolicy_init(o, s, NUM_DQN_STATS, 0, err);
    if (rc) return rc;
    t->gamma = (float)calf_config_float(cfg, CALF_CFG_TD_GAMMA);
    t->tau = (float)calf_config_float(cfg, CFG_DQN_TAU);
    t->target_period = (int)calf_config_int(cfg, CFG_DQN_TARGET_PERIOD);
    t->huber = strcmp(calf_config_string(cfg, CFG_DQN_TD_LOSS), "huber") == 0;
    t->start_eps = calf_config_float(cfg, CFG_DQN_START_EPSILON);
    t->end_eps = calf_config_float(cfg, CFG_DQN_END_EPSILON);
    t->decay_steps = (int64_t)(calf_config_float(cfg, CFG_DQN_EXPLORATION_FRACTION) *
                               (double)offpolicy_run_env_steps(cfg));
    t->decay_start = calf_config_bool(cfg, CFG_DQN_DECAY_AFTER_COLLECT) ? o->initial_collect : 0;
    t->epsilon = t->start_eps;
    t->masked = s->spec->action_mask != 0;

    net_obs obs = net_obs_of(s->spec);
    net_spec qs;
    size_t cursor = 0;
    if ((rc = net_config_spec(cfg, CFG_DQN_Q_CONV_LAYERS, CFG_DQN_Q_LAYERS, CFG_DQN_Q_ACTIVATION,
                              &obs, o->nA, &qs, err)) ||
        (rc = net_layout(&t->q, &qs, &cursor, err)))
        return rc;
    adam_conf opt = offpolicy_adam(cfg, calf_config_float(cfg, CALF_CFG_CRITIC_LR));
    if (strcmp(calf_config_string(cfg, CFG_DQN_OPTIMIZER), "rmsprop") == 0) {
        double alpha = calf_config_float(cfg, CFG_DQN_RMSPROP_ALPHA);
        opt.kind = OPTIM_RMSPROP;
        opt.lr = (float)calf_config_float(cfg, CFG_DQN_RMSPROP_LR);
        opt.eps = (float)calf_config_float(cfg, CFG_DQN_RMSPROP_EPS);
        opt.alpha = (float)alpha;
        opt.one_minus_alpha = (float)(1.0 - alpha); /* rmsprop.h: as PyTorch rounds it */
        opt.centered = calf_config_bool(cfg, CFG_DQN_RMSPROP_CENTERED);
    }
    t->lr = calf_config_float(cfg, opt.kind == OPTIM_RMSPROP ? CFG_DQN_RMSPROP_LR : CALF_CFG_CRITIC_LR);
    t->lr_linear = strcmp(calf_config_string(cfg, CALF_CFG_LR_SCHEDULE), "linear") == 0;
    t->total_iterations = s->total_iterations;
    if ((rc = param_group_init(&t->q_g, "DQNQ", cursor, true, opt, err)) ||
        (rc = param_group_init(&t->target_g, "DQNT", cursor, false, opt, err)))
        return rc;
    /* "DQNU": the updates done, the two groups, then the replay counters */
    const offpolicy_group groups[] = {
        {.g = &t->q_g, .name = "q", .grads = true},
        {.g = &t->target_g},
    };
    offpolicy_set_groups(o, "DQNU", groups, 2);
    calf_rng rng;
    calf_rng_seed(&rng, s->seed, 0, CALF_RNG_INIT);
    net_init_fan_in(&t->q, t->q_g.params, &rng);
    memcpy(t->target_g.params, t->q_g.params, t->q_g.n * sizeof(float));
    t->q_ver = t->target_ver = 1;

    int rows = o->rows;
    if ((rc = net_cache_init(&t->q_cache, &t->q, rows, err)) ||
        (rc = net_cache_init(&t->t_cache, &t->q, rows, err)))
        return rc;
    size_t R = (size_t)rows, nA = (size_t)o->nA;
    if (!(t->qv = mem_calloc(R * nA, sizeof(float), err)) ||
        !(t->tv = mem_calloc(R * nA, sizeof(float), err)) ||
        !(t->dq = mem_calloc(R * nA, sizeof(float), err)) ||
        !(t->y = mem_calloc(R, sizeof(float), err)))
        return CALF_ENOMEM;
    if (o->count == 0) return CALF_OK; /* acting only */
    return offpolicy_add_tree(o, t->q_g.n, err);
}

static int dqn_create(const algo_setup *s, algorithm **out, calf_error *err) {
    return offpolicy_create(sizeof(dqn), dqn_init, dqn_destroy, s, out, err);
}

static void dqn_destroy(algorithm *a) {
    dqn *t = (dqn *)a;
    if (!t) return;
    offpolicy_free(&t->o);
    param_group_free(&t->q_g);
    param_group_free(&t->target_g);
    net_cache_free(&t->q_cache);
    net_cache_free(&t->t_cache);
    free(t->qv);
    free(t->tv);
    free(t->dq);
    free(t->y);
    free(t);
}

/* ---- acting --------------------------------------------------------------------- */

/* Each env: u uniform in [0, 1) from its stream; u < epsilon: a uniform action from the
 * same stream, else the greedy one; both among the valid actions when the env masks them
 * (dist_masked_uniform, dist_categorical_mode_masked: the argmax of offpolicy_max_q, the
 * lowest index on ties, when nothing is masked). epsilon is the schedule's at the job's
 * env steps before this step, less decay_start (the MinAtar paper's t - replay_start_size;
 * acting comes here only from the end of the initial collection on, so never below 0). */
static void dqn_act(algorithm *a, int64_t iteration, int s, const float *obs,
                    const uint8_t *mask, int *act, float *u) {
    dqn *t = (dqn *)a;
    offpolicy *o = &t->o;
    if (offpolicy_act_random(o, iteration, s, mask, act, u)) return;
    int64_t steps_before = (iteration * o->T + s) * (int64_t)o->E;
    t->epsilon = offpolicy_linear_epsilon(t->start_eps, t->end_eps, t->decay_steps,
                                          steps_before - t->decay_start);
    net_forward(&t->q, t->q_g.params, obs, o->count, &t->q_cache, t->qv);
    for (int e = 0; e < o->count; e++) {
        const uint8_t *m = mask ? mask + (size_t)e * o->nA : NULL;
        if (calf_rng_uniform_double(&o->act_rng[e]) < t->epsilon)
            act[e] = dist_masked_uniform(m, o->nA, &o->act_rng[e]);
        else
            act[e] = dist_categorical_mode_masked(t->qv + (size_t)e * o->nA, m, o->nA);
    }
}

static void dqn_greedy(algorithm *a, const float *obs, const uint8_t *mask, int rows,
                       int *act, float *u) {
    (void)u;
    dqn *t = (dqn *)a;
    const offpolicy *o = &t->o;
    for (int r0 = 0; r0 < rows; r0 += o->rows) {
        int b = rows - r0 < o->rows ? rows - r0 : o->rows;
        net_forward(&t->q, t->q_g.params, obs + (size_t)r0 * o->od, b, &t->q_cache, t->qv);
        for (int k = 0; k < b; k++)
            act[r0 + k] = dist_categorical_mode_masked(
                t->qv + (size_t)k * o->nA, mask ? mask + (size_t)(r0 + k) * o->nA : NULL, o->nA);
    }
}

/* What dqn_greedy computes: the argmax of Q (among the valid actions of a masked env), the
 * lowest index on ties. */
static int dqn_export_c(const algorithm *a, export_c *x, calf_error *err) {
    const dqn *t = (const dqn *)a;
    int rc = export_c_net(x, "q", &t->q, t->q_g.params, err);
    if (rc) return rc;
    export_c_body_floats(x, t->o.nA, NULL, "v", NULL);
    export_c_body(x, "    q_forward(obs, v);\n");
    if (t->masked) export_c_masked_argmax_return(x, "v", t->o.nA);
    else export_c_argmax_return(x, "v", t->o.nA);
    return CALF_OK;
}

/* ---- one update ------------------------------------------------------------------- */

/* y = r + gamma max_a Q'(s', a) of the target network, the max over the actions valid at
 * s' when the env masks them (the mask stored with the transition: an invalid action's Q'
 * is what the network makes of an action never taken there, and may well be the largest),
 * the TD loss of Q(s, a_taken) (the mean over the job's batch); each env's partial into
 * tree. */
static void q_pass(void *ctx, const offpolicy_view *v, int first, int k, comm_tree *tree) {
    dqn *t = ctx;
    offpolicy *o = &t->o;
    int nA = o->nA;
    int n = offpolicy_gather(o, v, first, k);
    float scale = 1.0f / (float)o->B;
    net_forward_v(&t->q, t->target_g.params, t->target_ver, o->next, n, &t->t_cache, t->tv);
    for (int r = 0; r < n; r++) {
        const float *tv = t->tv + (size_t)r * nA;
        const uint8_t *valid = o->next_mask ? o->next_mask + (size_t)r * nA : NULL;
        float next = valid ? tv[dist_categorical_mode_masked(tv, valid, nA)]
                           : offpolicy_max_q(nA, tv, NULL);
        t->y[r] = offpolicy_td_target(o->rew[r], t->gamma, o->term[r], next);
    }
    net_forward_v(&t->q, t->q_g.params, t->q_ver, o->obs, n, &t->q_cache, t->qv);
    memset(t->dq, 0, (size_t)n * nA * sizeof(float));
    for (int e = 0; e < k; e++) {
        double *st = v->stats + (size_t)(first + e) * NUM_DQN_STATS;
        for (int r = o->offsets[e]; r < o->offsets[e + 1]; r++) {
            size_t i = (size_t)r * nA + (size_t)o->act[r];
            float loss = t->huber ? offpolicy_huber_loss(t->qv[i], t->y[r], scale, &t->dq[i])
                                  : offpolicy_mse_loss(t->qv[i], t->y[r], scale, &t->dq[i]);
            st[DS_SAMPLES] += 1;
            st[DS_LOSS] += loss;
            st[DS_Q] += t->qv[i];
        }
    }
    for (int e = 0; e < k; e++) {
        int r0 = o->offsets[e], cnt = o->offsets[e + 1] - r0;
        float *leaf = comm_tree_leaf(tree);
        net_backward(&t->q, t->q_g.params, &t->q_cache, r0, cnt, t->dq + (size_t)r0 * nA, leaf,
                        NULL);
        comm_tree_push(tree);
    }
}

static int update(void *ctx, int u, calf_error *err) {
    dqn *t = ctx;
    offpolicy *o = &t->o;
    offpolicy_sample(o, o->iteration, u);
    int rc = offpolicy_pass(o, TREE_Q, q_pass, t, t->q_g.grad, err);
    if (rc) return rc;
    if (!param_group_step(&t->q_g))
        return calf_error_set(err, CALF_EIO,
                              "iteration %lld: the Q gradient is not finite (training diverged); try "
                              "a smaller learning rate (critic/Adam.lr)",
                              (long long)t->o.iteration + 1);
    t->q_ver++;
    t->o.updates++;
    if (t->o.updates % t->target_period == 0) {
        offpolicy_target_update(t->target_g.params, t->q_g.params, t->q_g.n, t->tau);
        t->target_ver++;
    }
    return CALF_OK;
}

static int dqn_train(algorithm *a, int64_t iteration, calf_error *err) {
    dqn *t = (dqn *)a;
    if (t->lr_linear) /* the optimizer's lr for this iteration, from the iteration */
        t->q_g.opt.lr = adam_lr_linear_at(t->lr, iteration, t->total_iterations);
    return offpolicy_train(&t->o, iteration, update, a, err);
}

/* ---- summaries, digest, checkpoints ---------------------------------------------- */

static int dqn_summarize(algorithm *a, int64_t step, bool histograms, calf_error *err) {
    dqn *t = (dqn *)a;
    double g[NUM_DQN_STATS];
    int rc = offpolicy_sum_stats(&t->o, g, err);
    if (rc) return rc;
    calf_summary_scalar("DqnAlgorithm/epsilon", step, t->epsilon);
    if (t->lr_linear) calf_summary_scalar("Optimizer/learning_rate", step, t->q_g.opt.lr);
    if (g[DS_SAMPLES] > 0) {
        calf_summary_scalar("DqnLoss/td_loss", step, g[DS_LOSS] / g[DS_SAMPLES]);
        calf_summary_scalar("DqnAlgorithm/q", step, g[DS_Q] / g[DS_SAMPLES]);
    }
    if (histograms) offpolicy_histograms(&t->o, step);
    return CALF_OK;
}

static int dqn_load(algorithm *a, ckpt_reader *r, int64_t iteration, calf_error *err) {
    dqn *t = (dqn *)a;
    int rc = offpolicy_load(&t->o, r, iteration, err);
    t->q_ver++, t->target_ver++;
    return rc;
}

static void dqn_describe(const algorithm *a, char *text, size_t cap) {
    const dqn *t = (const dqn *)a;
    offpolicy_describe(&t->o, text, cap);
    size_t off = strlen(text);
    if (off < cap && t->decay_start > 0)
        snprintf(text + off, cap - off,
                 "\nDqnAlgorithm: epsilon %g down to %g over the %lld env steps after the job's "
                 "first %lld (the initial collection); the target network every %d updates (tau "
                 "%g); %s TD loss",
                 t->start_eps, t->end_eps, (long long)t->decay_steps, (long long)t->decay_start,
                 t->target_period, (double)t->tau, t->huber ? "Huber" : "squared");
    else if (off < cap)
        snprintf(text + off, cap - off,
                 "\nDqnAlgorithm: epsilon %g down to %g over the job's first %lld env steps; the "
                 "target network every %d updates (tau %g); %s TD loss",
                 t->start_eps, t->end_eps, (long long)t->decay_steps, t->target_period,
                 (double)t->tau, t->huber ? "Huber" : "squared");
    off = strlen(text);
    if (t->lr_linear && off < cap)
        snprintf(text + off, cap - off,
                 "\nAdam.lr_schedule = 'linear': lr %g at iteration 0, down to 0 at iteration %lld",
                 t->lr, (long long)t->total_iterations);
}

const algorithm_ops dqn_algorithm_ops = {
    .create = dqn_create,
    .destroy = dqn_destroy,
    .check = dqn_check,
    .check_memory = offpolicy_check_memory,
    .start = offpolicy_ops_start,
    .act = dqn_act,
    .observe = offpolicy_ops_observe,
    .train = dqn_train,
    .greedy = dqn_greedy,
    .export_c = dqn_export_c,
    .summarize = dqn_summarize,
    .digest = offpolicy_ops_digest,
    .save = offpolicy_ops_save,
    .load = dqn_load,
    .env_record_size = offpolicy_ops_env_record_size,
    .save_env = offpolicy_ops_save_env,
    .load_env = offpolicy_ops_load_env,
    .describe = dqn_describe,
    .report = offpolicy_ops_report,
};
