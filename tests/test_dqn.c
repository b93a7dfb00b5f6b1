/* test_dqn.c: DQN's pieces against their definitions, in double:
 * - the squared and Huber TD losses' gradients against central differences, and the
 *   linear epsilon schedule (CleanRL's linear_schedule) at its ends and between;
 * - three updates driven through the algorithm interface: each Q gradient (Adam's first
 *   moment after the step, 0.9 m_before + 0.1 g) equals central differences of
 *   mean_j (Q(s_j, a_j) - y_j)^2, y_j = r_j + gamma max_a Q'(s'_j, a) of the TARGET
 *   network (r_j when terminated); the target is Q's copy after update 2
 *   (target_update_period 2), unchanged after updates 1 and 3;
 * - the same for a masked env, whose stored next masks block the action with the largest
 *   Q'(s', a): the max in y runs over the valid actions only;
 * - the same with RMSProp (DqnAlgorithm.optimizer = 'rmsprop', centered, alpha 0.9: its
 *   grad_avg is the same 0.9 m + 0.1 g), whose first step is also checked against
 *   rmsprop.h's, and which a config refuses to set while the optimizer is Adam;
 * - epsilon-greedy acting: each env's action is what its own stream gives, a uniform
 *   action when u < epsilon(the job's env steps), else the greedy one;
 * - examples/dqn_minatar_breakout.gin's epsilon (DqnAlgorithm/epsilon as summarize
 *   reports it) at frames of a 5M-frame run: the MinAtar paper's 1.0 to 0.1 over the
 *   100,000 frames after its 5,000 of replay start, and from frame 0 without
 *   DqnAlgorithm.epsilon_decay_after_collect.
 * Each check counts misses, and the test plants mistakes in the reference (a target
 * from the online network, a max that ignores the mask, epsilon that does not decay) to
 * show the same checks catch them. */
#include <stdint.h>

#include "training/algorithm.h"
#include "algorithms/offpolicy_math.h"
#include "algorithms/replay.h"
#include "calf/rng.h"
#include "parallel/comm.h"
#include "numerics/nn.h"
#include "records/events_writer.h"
#include "offpolicy_ref.h"
#include "test_util.h"

enum { E = 2, STEPS = 6, B = 16, OD = 4, NA = 2, H = 8, UPDATES = 3 };
static const double LR = 3e-2, GAMMA = 0.9;
static const uint64_t SEED = 5;

static void losses(void) {
    const float qs[] = {0.3f, -2.5f, 1.7f, 0.9f}, ys[] = {0.1f, 0.4f, 0.2f, 0.9f};
    for (int k = 0; k < 4; k++) {
        double q = qs[k], y = ys[k], h = 1e-4;
        float dq;
        float l = offpolicy_mse_loss(qs[k], ys[k], 0.5f, &dq);
        CHECK_NEAR(l, (q - y) * (q - y), 1e-6);
        double fd = 0.5 * (((q + h - y) * (q + h - y)) - ((q - h - y) * (q - h - y))) / (2 * h);
        CHECK_NEAR(dq, fd, 1e-5);
        /* Huber: quadratic within 1, linear beyond */
        l = offpolicy_huber_loss(qs[k], ys[k], 0.5f, &dq);
        double d = q - y, ad = fabs(d);
        CHECK_NEAR(l, ad <= 1 ? 0.5 * d * d : ad - 0.5, 1e-6);
#define HUBER(x) (fabs(x) <= 1 ? 0.5 * (x) * (x) : fabs(x) - 0.5)
        fd = 0.5 * (HUBER(d + h) - HUBER(d - h)) / (2 * h);
#undef HUBER
        CHECK_NEAR(dq, fd, 1e-5);
    }
    /* CleanRL's linear_schedule(1, 0.05, 100, t) */
    CHECK_NEAR(offpolicy_linear_epsilon(1.0, 0.05, 100, 0), 1.0, 1e-12);
    CHECK_NEAR(offpolicy_linear_epsilon(1.0, 0.05, 100, 50), 0.525, 1e-12);
    CHECK_NEAR(offpolicy_linear_epsilon(1.0, 0.05, 100, 100), 0.05, 1e-12);
    CHECK_NEAR(offpolicy_linear_epsilon(1.0, 0.05, 100, 1000), 0.05, 1e-12);
    CHECK_NEAR(offpolicy_linear_epsilon(1.0, 0.05, 0, 0), 0.05, 1e-12);
    int arg = -1;
    CHECK_NEAR(offpolicy_max_q(3, (const float[]){1.0f, 2.0f, 2.0f}, &arg), 2.0, 0);
    CHECK_INT_EQ(arg, 1); /* ties: the lowest index */
}

typedef enum { NONE, TARGET_FROM_ONLINE, EPSILON_CONSTANT, MASK_IGNORED } mistake;

typedef struct groups {
    float *q, *target, *m;
    size_t n;
} groups;

static void read_groups(const algorithm_ops *ops, const algorithm *a, groups *g) {
    ckpt_buf b;
    ckpt_reader r;
    calf_error err;
    int64_t updates;
    ref_section_open(ops, a, "DQNU", &b, &r, &err, &updates);
    ref_read_group(&r, "DQNQ", g->q, g->n, true, g->m);
    ref_read_group(&r, "DQNT", g->target, g->n, false, NULL);
    CHECK_INT_EQ(r.status, CALF_OK);
    ckpt_buf_free(&b);
}

typedef struct transitions {
    float obs[E][STEPS][OD], next[E][STEPS][OD], r[E][STEPS];
    int a[E][STEPS];
    uint8_t term[E][STEPS];
    bool masked;                 /* the env masks its actions: next_mask holds them */
    uint8_t next_mask[E][STEPS][NA]; /* the actions valid at next */
} transitions;

typedef struct batch {
    double obs[B][OD], y[B];
    int a[B];
} batch;

static double loss_at(const nn_mlp *q, const float *p, const batch *bt) {
    double loss = 0;
    for (int j = 0; j < B; j++) {
        double v[NA];
        ref_mlp_forward(q, p, bt->obs[j], v);
        loss += (v[bt->a[j]] - bt->y[j]) * (v[bt->a[j]] - bt->y[j]);
    }
    return loss / B;
}

/* rmsprop: also check that update k = 1 (from zero averages) moved each parameter as
 * RMSProp does (rmsprop.h; alpha 0.9, centered, eps EPS_RMS): by -LR g / (sqrt(0.1 g^2 -
 * (0.1 g)^2) + eps), about 3.3 LR where Adam's first step moves it by about LR. */
static const double EPS_RMS = 1e-6;
static int update_misses(const nn_mlp *q, const transitions *tr, int it, int k, const groups *b,
                         const groups *f, mistake planted, bool rmsprop) {
    int env[B];
    int64_t pos[B];
    replay_sample(SEED, it, 0, E, it + 1, B, env, pos);
    batch bt;
    const float *tp = planted == TARGET_FROM_ONLINE ? b->q : b->target;
    for (int j = 0; j < B; j++) {
        int e = env[j], t = (int)pos[j];
        double next[OD], v[NA];
        for (int i = 0; i < OD; i++) bt.obs[j][i] = tr->obs[e][t][i], next[i] = tr->next[e][t][i];
        bt.a[j] = tr->a[e][t];
        ref_mlp_forward(q, tp, next, v);
        double best = -INFINITY; /* over the valid actions at next, when masked */
        for (int i = 0; i < NA; i++)
            if (!tr->masked || planted == MASK_IGNORED || tr->next_mask[e][t][i])
                best = v[i] > best ? v[i] : best;
        bt.y[j] = tr->term[e][t] ? tr->r[e][t] : tr->r[e][t] + GAMMA * best;
    }
    int misses = 0, checked = 0;
    float *p = malloc(b->n * sizeof(float));
    for (size_t i = 0; i < b->n; i++) {
        memcpy(p, b->q, b->n * sizeof(float));
        const float hp = b->q[i] + 1e-4f, hm = b->q[i] - 1e-4f;
        p[i] = hp;
        double lp = loss_at(q, p, &bt);
        p[i] = hm;
        double lm = loss_at(q, p, &bt);
        double g = (lp - lm) / ((double)hp - (double)hm);
        double used = ((double)f->m[i] - 0.9 * (double)b->m[i]) / 0.1;
        if (fabs(g) > 1e-3) checked++;
        if (fabs(used - g) > 2e-3 * (fabs(g) + 1e-2)) misses++;
        if (rmsprop && k == 1) {
            double gu = used, step = -LR * gu / (sqrt(0.1 * gu * gu - 0.01 * gu * gu) + EPS_RMS);
            if (fabs((double)f->q[i] - b->q[i] - step) > 1e-3 * fabs(step) + 1e-6) misses++;
        }
    }
    free(p);
    if (checked < 16) misses++;
    if (k % 2 == 0)
        misses += memcmp(f->target, f->q, b->n * sizeof(float)) != 0; /* a copy */
    else
        misses += memcmp(f->target, b->target, b->n * sizeof(float)) != 0;
    return misses;
}

/* A CartPole config for DQN: E envs, initial collection `collect` steps, a run of
 * `iterations` (the schedule's length). */
static algorithm *make(const algorithm_ops *ops, calf_config *cfg, comm *c, int collect,
                       int iterations, bool rmsprop, bool masked) {
    const calf_env_class *cls = calf_env_find("CartPole-v1");
    calf_env_spec spec = cls->spec; /* masked: as an env with a mask would say */
    spec.action_mask = masked;
    config_init(cfg);
    char text[1024];
    snprintf(text, sizeof text,
             "TrainerConfig.algorithm_ctor = @DqnAlgorithm\n"
             "create_environment.env_name = 'CartPole-v1'\n"
             "create_environment.num_parallel_environments = %d\n"
             "TrainerConfig.unroll_length = 1\n"
             "TrainerConfig.num_iterations = %d\n"
             "TrainerConfig.num_updates_per_train_iter = 1\n"
             "TrainerConfig.mini_batch_size = %d\n"
             "TrainerConfig.initial_collect_steps = %d\n"
             "TrainerConfig.replay_buffer_length = 100\n"
             "q/QNetwork.fc_layer_params = (%d, %d)\n"
             "critic/Adam.lr = %g\n"
             "Adam.eps = 1e-8\n"
             "DqnAlgorithm.target_update_period = 2\n"
             "DqnAlgorithm.exploration_fraction = 0.5\n"
             "OneStepTDLoss.gamma = %g\n"
             "%s",
             E, iterations, B, collect, H, H, LR, GAMMA,
             rmsprop ? "DqnAlgorithm.optimizer = 'rmsprop'\nRMSprop.lr = 3e-2\n"
                       "RMSprop.alpha = 0.9\nRMSprop.eps = 1e-6\nRMSprop.centered = True\n"
                     : "");
    calf_error err;
    CHECK_INT_EQ(calf_config_parse_string(cfg, text, "test", &err), CALF_OK);
    CHECK_INT_EQ(ops->check(cfg, &spec, &err), CALF_OK);
    algo_setup s = {.cfg = cfg, .spec = &spec, .c = c, .E = E, .begin = 0, .count = E,
                    .T = 1, .seed = SEED, .total_iterations = iterations};
    algorithm *a = NULL;
    CHECK_INT_EQ(ops->create(&s, &a, &err), CALF_OK);
    return a;
}

static void transition(int e, int t, bool terminated, transitions *tr) {
    for (int i = 0; i < OD; i++) {
        tr->obs[e][t][i] = (float)sin(1.3 * e + 0.7 * t + 0.9 * i);
        tr->next[e][t][i] = (float)cos(0.4 * e + 1.1 * t + 0.5 * i);
    }
    tr->a[e][t] = (e + t) % NA;
    tr->r[e][t] = (float)(1.0 - 0.5 * cos(0.8 * e + t));
    tr->term[e][t] = terminated;
}

/* masked: each transition's next mask blocks the action whose Q' (of the initial
 * network, the target of updates 1 and 2) at next is the largest, so a target that
 * ignored the mask would take exactly the value it must not. */
static void updates_case(bool terminated, bool rmsprop, bool masked) {
    const algorithm_ops *ops = algorithm_find("DqnAlgorithm");
    CHECK(ops != NULL);
    if (!ops) return;
    comm *c = NULL;
    CHECK_INT_EQ(comm_single(&c, NULL), CALF_OK);
    calf_config cfg;
    int first = STEPS - UPDATES;
    algorithm *a = make(ops, &cfg, c, E * (first + 1), 100, rmsprop, masked);
    if (!a) return;
    nn_mlp q;
    int hidden[2] = {H, H};
    size_t n = 0;
    nn_mlp_layout(&q, OD, hidden, 2, NA, NN_ACT_RELU, &n);
    groups snap[UPDATES + 1];
    for (int k = 0; k <= UPDATES; k++) snap[k] = (groups){calloc(n, 4), calloc(n, 4), calloc(n, 4), n};
    transitions tr = {.masked = masked};
    calf_error err;
    read_groups(ops, a, &snap[0]); /* the initial networks (read again before update 1) */
    int blocked_best = 0;
    for (int t = 0; t < STEPS; t++) {
        float o[E * OD], rew[E], nx[E * OD];
        int act[E];
        uint8_t te[E], trunc[E] = {0}, nm[E * NA];
        for (int e = 0; e < E; e++) {
            transition(e, t, terminated, &tr);
            memcpy(o + e * OD, tr.obs[e][t], sizeof tr.obs[e][t]);
            memcpy(nx + e * OD, tr.next[e][t], sizeof tr.next[e][t]);
            rew[e] = tr.r[e][t];
            te[e] = tr.term[e][t];
            double next[OD], v[NA];
            for (int i = 0; i < OD; i++) next[i] = tr.next[e][t][i];
            ref_mlp_forward(&q, snap[0].target, next, v);
            int best = v[1] > v[0];
            for (int i = 0; i < NA; i++) nm[e * NA + i] = tr.next_mask[e][t][i] = i != best;
            blocked_best += v[best] > v[1 - best];
        }
        int sampled[E];
        ops->act(a, t, 0, o, NULL, sampled, NULL);
        for (int e = 0; e < E; e++) {
            CHECK(sampled[e] >= 0 && sampled[e] < NA);
            act[e] = tr.a[e][t];
        }
        algo_step st = {.s = 0, .obs = o, .act = act, .reward = rew, .terminated = te,
                        .truncated = trunc, .final_obs = nx, .next_obs = nx,
                        .next_mask = masked ? nm : NULL};
        ops->observe(a, &st);
        if (t == first) read_groups(ops, a, &snap[0]);
        CHECK_INT_EQ(ops->train(a, t, &err), CALF_OK);
        if (t >= first) read_groups(ops, a, &snap[t - first + 1]);
    }
    for (int k = 1; k <= UPDATES; k++) {
        int misses =
            update_misses(&q, &tr, first + k - 1, k, &snap[k - 1], &snap[k], NONE, rmsprop);
        if (misses)
            fprintf(stderr, "terminated=%d rmsprop=%d masked=%d, update %d: %d misses\n",
                    terminated, rmsprop, masked, k, misses);
        CHECK_INT_EQ(misses, 0);
    }
    /* the RMSProp check rejects Adam's first step */
    if (!rmsprop)
        CHECK(update_misses(&q, &tr, first, 1, &snap[0], &snap[1], NONE, true) > 0);
    /* update 2 is the first whose target differs from the online network */
    if (!terminated)
        CHECK(update_misses(&q, &tr, first + 1, 2, &snap[1], &snap[2], TARGET_FROM_ONLINE, false) >
              0);
    if (masked && !terminated) {
        /* the blocked action's Q' was the larger one (strictly) at every next state, so
         * a max over all actions is another target: the same check rejects it */
        CHECK_INT_EQ(blocked_best, E * STEPS);
        CHECK(update_misses(&q, &tr, first, 1, &snap[0], &snap[1], MASK_IGNORED, rmsprop) > 0);
    }
    for (int k = 0; k <= UPDATES; k++) free(snap[k].q), free(snap[k].target), free(snap[k].m);
    ops->destroy(a);
    comm_finalize(c);
}

/* act over a run of 40 iterations of 2 envs (epsilon 1 -> 0.05 over the first 40 env
 * steps), against each env's stream; returns the steps whose actions differ from the
 * reference's, and counts the greedy picks the reference made into *greedy. */
static int acting_misses(mistake planted, int *greedy) {
    const algorithm_ops *ops = algorithm_find("DqnAlgorithm");
    comm *c = NULL;
    CHECK_INT_EQ(comm_single(&c, NULL), CALF_OK);
    calf_config cfg;
    algorithm *a = make(ops, &cfg, c, 0, 40, false, false);
    if (!a) return -1;
    calf_rng rng[E];
    for (int e = 0; e < E; e++) calf_rng_seed(&rng[e], SEED, (uint64_t)e, CALF_RNG_ACTION);
    int misses = 0;
    *greedy = 0;
    for (int it = 0; it < 40; it++) {
        float o[E * OD];
        for (int i = 0; i < E * OD; i++) o[i] = (float)sin(0.3 * it + 1.7 * i);
        int act[E], best[E];
        ops->act(a, it, 0, o, NULL, act, NULL);
        ops->greedy(a, o, NULL, E, best, NULL);
        double eps = planted == EPSILON_CONSTANT
                         ? 1.0
                         : offpolicy_linear_epsilon(1.0, 0.05, 40, (int64_t)it * E);
        for (int e = 0; e < E; e++) {
            int want;
            if (calf_rng_uniform_double(&rng[e]) < eps) {
                want = (int)calf_rng_below(&rng[e], NA);
            } else {
                want = best[e];
                ++*greedy;
            }
            misses += act[e] != want;
        }
    }
    ops->destroy(a);
    comm_finalize(c);
    return misses;
}

static void acting(void) {
    int greedy = 0;
    CHECK_INT_EQ(acting_misses(NONE, &greedy), 0);
    CHECK(greedy >= 10); /* the schedule reached the greedy actions */
    /* epsilon not decaying: the reference draws a second number where act did not */
    CHECK(acting_misses(EPSILON_CONSTANT, &greedy) > 0);
}

static void keep_epsilon(void *arg, const char *tag, double value) {
    if (strcmp(tag, "DqnAlgorithm/epsilon") == 0) *(double *)arg = value;
}

/* The example's epsilon at frame f (acting at iteration f: one env, one step each),
 * DqnAlgorithm.epsilon_decay_after_collect set to after_collect; the replay shrunk, which
 * the schedule does not read. */
static void example_epsilon(bool after_collect, const int64_t *frames, double *eps, int n) {
    const calf_env_class *cls = calf_env_find("MinAtar/Breakout-v0");
    const algorithm_ops *ops = algorithm_find("DqnAlgorithm");
    CHECK(cls != NULL && ops != NULL);
    if (!cls || !ops) return;
    calf_config cfg;
    config_init(&cfg);
    calf_error err;
    CHECK_INT_EQ(calf_config_parse_file(&cfg, CALF_SOURCE_DIR "/examples/dqn_minatar_breakout.gin",
                                        &err), CALF_OK);
    CHECK_INT_EQ(calf_config_apply_param(&cfg, "TrainerConfig.replay_buffer_length=64", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_apply_param(&cfg, after_collect
                                                   ? "DqnAlgorithm.epsilon_decay_after_collect=True"
                                                   : "DqnAlgorithm.epsilon_decay_after_collect=False",
                                         &err), CALF_OK);
    CHECK_INT_EQ(ops->check(&cfg, &cls->spec, &err), CALF_OK);
    comm *c = NULL;
    CHECK_INT_EQ(comm_single(&c, NULL), CALF_OK);
    algo_setup s = {.cfg = &cfg, .spec = &cls->spec, .c = c, .E = 1, .begin = 0, .count = 1,
                    .T = 1, .seed = SEED, .total_iterations = 5000000};
    algorithm *a = NULL;
    CHECK_INT_EQ(ops->create(&s, &a, &err), CALF_OK);
    if (!a) {
        comm_finalize(c);
        return;
    }
    float *obs = calloc((size_t)cls->spec.obs_dim, sizeof(float)); /* an empty board */
    for (int k = 0; k < n; k++) {
        int act;
        ops->act(a, frames[k], 0, obs, NULL, &act, NULL);
        eps[k] = -1;
        summary_listen(keep_epsilon, &eps[k]);
        CHECK_INT_EQ(ops->summarize(a, frames[k] + 1, false, &err), CALF_OK);
        summary_listen(NULL, NULL);
    }
    free(obs);
    ops->destroy(a);
    comm_finalize(c);
}

static void example_schedule(void) {
    enum { NF = 8 };
    static const int64_t frames[NF] = {0, 4999, 5000, 30000, 55000, 104999, 105000, 4999999};
    double eps[NF], from0[NF];
    example_epsilon(true, frames, eps, NF);
    example_epsilon(false, frames, from0, NF);
    for (int k = 0; k < NF; k++) {
        /* MinAtar's dqn.py: random actions while t < 5,000; then epsilon =
         * (0.1 - 1.0) / 100,000 * (t - 5,000) + 1.0 until t - 5,000 reaches 100,000 */
        int64_t t = frames[k] - 5000;
        double paper = t < 0 ? 1.0 : t >= 100000 ? 0.1 : -0.9 / 100000 * (double)t + 1.0;
        CHECK_NEAR(eps[k], paper, 1e-12);
        /* without the setting, the decay counts from frame 0 (CleanRL's, SB3's) */
        double clean = frames[k] < 5000 ? 1.0 /* collecting: epsilon not yet used */
                       : frames[k] >= 100000 ? 0.1 : -0.9 / 100000 * (double)frames[k] + 1.0;
        CHECK_NEAR(from0[k], clean, 1e-12);
    }
    CHECK_NEAR(eps[2], 1.0, 0);      /* frame 5,000: the paper's 1.0 (0.957 before) */
    CHECK_NEAR(eps[4], 0.55, 1e-12); /* half way */
    /* planted: the schedule from frame 0 is caught by the paper's check (0.73 vs 0.775) */
    CHECK(fabs(from0[3] - eps[3]) > 1e-3);
}

/* A continuous env is refused before anything is built, naming where. */
static void refuses_continuous(void) {
    const calf_env_class *cls = calf_env_find("Pendulum-v1");
    calf_config cfg;
    config_init(&cfg);
    calf_error err;
    CHECK_INT_EQ(calf_config_parse_string(&cfg,
                                          "TrainerConfig.algorithm_ctor = @DqnAlgorithm\n"
                                          "create_environment.env_name = 'Pendulum-v1'\n",
                                          "t.gin", &err), CALF_OK);
    const algorithm_ops *ops = algorithm_find("DqnAlgorithm");
    CHECK_INT_EQ(ops->check(&cfg, &cls->spec, &err), CALF_EINVAL);
    CHECK_STR_EQ(err.msg, "t.gin:1: DqnAlgorithm needs discrete actions; Pendulum-v1 "
                          "(create_environment.env_name, set at t.gin:2) has continuous ones (1 dims)");
}

/* RMSprop.* set while DqnAlgorithm.optimizer is Adam would change nothing: refused. */
static void refuses_unused_rmsprop(void) {
    const calf_env_class *cls = calf_env_find("CartPole-v1");
    calf_config cfg;
    config_init(&cfg);
    calf_error err;
    CHECK_INT_EQ(calf_config_parse_string(&cfg,
                                          "TrainerConfig.algorithm_ctor = @DqnAlgorithm\n"
                                          "TrainerConfig.num_env_steps = 100000\n"
                                          "RMSprop.alpha = 0.95\n",
                                          "t.gin", &err), CALF_OK);
    const algorithm_ops *ops = algorithm_find("DqnAlgorithm");
    CHECK_INT_EQ(ops->check(&cfg, &cls->spec, &err), CALF_EINVAL);
    CHECK_STR_EQ(err.msg, "t.gin:3: RMSprop.alpha is set, but DqnAlgorithm.optimizer is 'adam': "
                          "set DqnAlgorithm.optimizer = 'rmsprop' to use it");
    CHECK_INT_EQ(calf_config_apply_param(&cfg, "DqnAlgorithm.optimizer='rmsprop'", &err), CALF_OK);
    CHECK_INT_EQ(ops->check(&cfg, &cls->spec, &err), CALF_OK);
}

int main(void) {
    losses();
    updates_case(false, false, false);
    updates_case(true, false, false);
    updates_case(false, true, false);
    updates_case(false, false, true);
    acting();
    example_schedule();
    refuses_continuous();
    refuses_unused_rmsprop();
    return test_report("test_dqn");
}
