/* test_dpg.c: TD3's and DDPG's first four updates (src/algorithms/dpg.c), driven through
 * the algorithm interface as the trainer drives them (act, observe, train), checked
 * against what an update must do, with the networks recomputed here in double. Adam's
 * first moment after a step, 0.9 m_before + 0.1 g, gives the gradient g each step used:
 * - every update, the critics' gradient equals central differences of the mean over the
 *   update's samples of (Q1(s_j, a_j) - y_j)^2 (+ (Q2(s_j, a_j) - y_j)^2 for TD3), y_j =
 *   r_j for a terminated transition, else r_j + gamma Q'(s'_j, a'_j) of the TARGET critics
 *   (TD3: the min of both), a'_j the TARGET actor's action at s'_j (TD3: plus
 *   clip(eps_j policy_noise, +-noise_clip) * scale, clipped to the bounds, eps_j the
 *   sample's CALF_RNG_NOISE stream);
 * - TD3 (policy_delay 2): after updates 2 and 4 only, the actor's gradient equals central
 *   differences of mean_j -Q1(s_j, pi(s_j)) through the just-stepped critics and both
 *   targets move tau of the way (in float); after updates 1 and 3 neither moves. DDPG
 *   (target_update_period 2): the actor steps every update, the targets after 2 and 4.
 * - DDPG's Ornstein-Uhlenbeck exploration: each env's noise follows its own process from
 *   its own stream, and the process's state survives a checkpoint.
 * Each check counts its misses, and the test also plants the mistakes an implementation
 * could make in the reference (targets from the online networks, the delay or period off
 * by one, OU noise that forgets its state) to show that the same check then misses: it
 * could catch them. */
#include <stdint.h>

#include "training/algorithm.h"
#include "algorithms/replay.h"
#include "calf/rng.h"
#include "parallel/comm.h"
#include "numerics/nn.h"
#include "offpolicy_ref.h"
#include "test_util.h"

enum { E = 2, STEPS = 6, B = 16, OD = 3, A = 1, H = 8, UPDATES = 4 };
static const double LR = 3e-2, TAU = 0.25, GAMMA = 0.9, POLICY_NOISE = 0.6, NOISE_CLIP = 0.5;
static const uint64_t SEED = 11;

/* The reference's planted mistakes (NONE: the reference as the algorithm must be). */
typedef enum { NONE, TARGET_FROM_ONLINE, DELAY_OFF_BY_ONE, OU_FORGETS } mistake;

/* Which algorithm, and its checkpoint tags. */
typedef struct flavor {
    const char *name;
    const char *tags[5];
    bool td3;
} flavor;
static const flavor TD3 = {"Td3Algorithm", {"TD3U", "TD3A", "TD3B", "TD3Q", "TD3T"}, true};
static const flavor DDPG = {"DdpgAlgorithm", {"DDPU", "DDPA", "DDPB", "DDPQ", "DDPT"}, false};

/* The four groups as the checkpoint section holds them, and the trained ones' first
 * moments (after a step: 0.9 m_before + 0.1 gradient). */
typedef struct groups {
    float *actor, *actor_t, *critic, *critic_t, *actor_m, *critic_m;
    size_t na, nc;
} groups;

static void read_groups(const flavor *fl, const algorithm_ops *ops, const algorithm *a, groups *g) {
    ckpt_buf b;
    ckpt_reader r;
    calf_error err;
    int64_t updates;
    ref_section_open(ops, a, fl->tags[0], &b, &r, &err, &updates);
    ref_read_group(&r, fl->tags[1], g->actor, g->na, true, g->actor_m);
    ref_read_group(&r, fl->tags[2], g->actor_t, g->na, false, NULL);
    ref_read_group(&r, fl->tags[3], g->critic, g->nc, true, g->critic_m);
    ref_read_group(&r, fl->tags[4], g->critic_t, g->nc, false, NULL);
    CHECK_INT_EQ(r.status, CALF_OK);
    ckpt_buf_free(&b);
}

typedef struct nets {
    const flavor *fl;
    nn_mlp actor, q1, q2;
    double lo, hi; /* Pendulum's bounds, -2 and 2 */
} nets;

static double clampd(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The actor's action at o: scale tanh(x) + bias. */
static double action_at(const nets *n, const float *actor, const double *o) {
    double x;
    ref_mlp_forward(&n->actor, actor, o, &x);
    double scale = (n->hi - n->lo) / 2, bias = (n->hi + n->lo) / 2;
    return scale * tanh(x) + bias;
}

static double q_at(const nn_mlp *q, const float *p, const double *o, double a) {
    double x[OD + A], y;
    for (int i = 0; i < OD; i++) x[i] = o[i];
    x[OD] = a;
    ref_mlp_forward(q, p, x, &y);
    return y;
}

typedef struct transitions {
    float obs[E][STEPS][OD], u[E][STEPS], r[E][STEPS], next[E][STEPS][OD];
    uint8_t term[E][STEPS];
} transitions;

/* The update of iteration `it`: its samples' obs, actions and targets y. */
typedef struct batch {
    double obs[B][OD], u[B], y[B];
} batch;

static void make_batch(const nets *n, const transitions *tr, int it, const groups *b,
                       mistake planted, batch *out) {
    int env[B];
    int64_t pos[B];
    replay_sample(SEED, it, 0, E, it + 1, B, env, pos);
    const float *actor = planted == TARGET_FROM_ONLINE ? b->actor : b->actor_t;
    const float *critic = planted == TARGET_FROM_ONLINE ? b->critic : b->critic_t;
    double scale = (n->hi - n->lo) / 2;
    for (int j = 0; j < B; j++) {
        int e = env[j], t = (int)pos[j];
        double next[OD];
        for (int i = 0; i < OD; i++) out->obs[j][i] = tr->obs[e][t][i], next[i] = tr->next[e][t][i];
        out->u[j] = tr->u[e][t];
        if (tr->term[e][t]) {
            out->y[j] = tr->r[e][t];
            continue;
        }
        calf_rng rng;
        calf_rng_seed(&rng, SEED, replay_stream_index(it, 0) * 0x9E3779B97F4A7C15ULL + (uint64_t)j,
                      CALF_RNG_NOISE);
        double a = action_at(n, actor, next);
        if (n->fl->td3) {
            double eps = (float)calf_rng_normal(&rng);
            double noise = clampd(eps * POLICY_NOISE, -NOISE_CLIP, NOISE_CLIP) * scale;
            a = clampd(a + noise, n->lo, n->hi);
        }
        double q1 = q_at(&n->q1, critic, next, a);
        double q2 = n->fl->td3 ? q_at(&n->q2, critic, next, a) : q1;
        out->y[j] = tr->r[e][t] + GAMMA * (q1 < q2 ? q1 : q2);
    }
}

static double critic_loss(const nets *n, const float *critic, const batch *bt) {
    double loss = 0;
    for (int j = 0; j < B; j++) {
        double a = q_at(&n->q1, critic, bt->obs[j], bt->u[j]) - bt->y[j];
        double b = n->fl->td3 ? q_at(&n->q2, critic, bt->obs[j], bt->u[j]) - bt->y[j] : 0.0;
        loss += a * a + b * b;
    }
    return loss / B;
}

static double actor_loss(const nets *n, const float *actor, const float *critic, const batch *bt) {
    double loss = 0;
    for (int j = 0; j < B; j++) loss -= q_at(&n->q1, critic, bt->obs[j], action_at(n, actor, bt->obs[j]));
    return loss / B;
}

/* Misses of a group's gradient: the one Adam's moment says the step used (from m_b to m_f)
 * against central differences of loss(params) at b's params; counts the parameters with
 * a clear gradient into *checked. */
typedef double (*loss_fn)(const nets *n, const float *p, const float *other, const batch *bt);
static double critic_loss_fn(const nets *n, const float *p, const float *other, const batch *bt) {
    (void)other;
    return critic_loss(n, p, bt);
}
static double actor_loss_fn(const nets *n, const float *p, const float *other, const batch *bt) {
    return actor_loss(n, p, other, bt);
}

static int gradient_misses(const nets *n, loss_fn loss, const float *p0, size_t np,
                           const float *other, const batch *bt, const float *m_b,
                           const float *m_f, int *checked) {
    float *p = malloc(np * sizeof(float));
    int misses = 0;
    for (size_t i = 0; i < np; i++) {
        memcpy(p, p0, np * sizeof(float));
        const float hp = p0[i] + 1e-4f, hm = p0[i] - 1e-4f;
        p[i] = hp;
        double lp = loss(n, p, other, bt);
        p[i] = hm;
        double lm = loss(n, p, other, bt);
        double g = (lp - lm) / ((double)hp - (double)hm);
        double used = ((double)m_f[i] - 0.9 * (double)m_b[i]) / 0.1;
        if (fabs(g) > 1e-3) ++*checked;
        if (fabs(used - g) > 2e-3 * (fabs(g) + 1e-2)) misses++;
    }
    free(p);
    return misses;
}

/* Misses of target == (1 - tau) before + tau online, in float, element by element. */
static int polyak_misses(const float *before, const float *online, const float *after, size_t n) {
    int misses = 0;
    for (size_t i = 0; i < n; i++) {
        float t = (1.0f - (float)TAU) * before[i];
        float q = (float)TAU * online[i];
        misses += memcmp(&(float){t + q}, &after[i], sizeof(float)) != 0;
    }
    return misses;
}

/* Every check of update k (1-based) of iteration it, from groups b to f, against the
 * reference with `planted`; returns the misses. */
static int update_misses(const nets *n, const transitions *tr, int it, int k, const groups *b,
                         const groups *f, mistake planted) {
    batch bt;
    make_batch(n, tr, it, b, planted, &bt);
    int checked = 0, misses = 0;
    misses += gradient_misses(n, critic_loss_fn, b->critic, b->nc, NULL, &bt, b->critic_m,
                              f->critic_m, &checked);
    if (checked < 32) misses++; /* enough parameters to mean something */
    /* TD3: the actor and the targets every 2nd update; DDPG: the actor every update, the
     * targets every 2nd */
    bool second = (planted == DELAY_OFF_BY_ONE ? k + 1 : k) % 2 == 0;
    bool actor_due = n->fl->td3 ? second : true;
    if (actor_due) {
        checked = 0;
        misses += gradient_misses(n, actor_loss_fn, b->actor, b->na, f->critic, &bt, b->actor_m,
                                  f->actor_m, &checked);
        if (checked < 8) misses++;
    } else {
        misses += memcmp(b->actor, f->actor, b->na * sizeof(float)) != 0;
    }
    if (second) {
        misses += polyak_misses(b->actor_t, f->actor, f->actor_t, b->na);
        misses += polyak_misses(b->critic_t, f->critic, f->critic_t, b->nc);
    } else {
        misses += memcmp(b->actor_t, f->actor_t, b->na * sizeof(float)) != 0;
        misses += memcmp(b->critic_t, f->critic_t, b->nc * sizeof(float)) != 0;
    }
    return misses;
}

static void one_case(const flavor *fl, bool terminated) {
    const calf_env_class *cls = calf_env_find("Pendulum-v1");
    CHECK(cls != NULL);
    if (!cls) return;
    calf_config cfg;
    config_init(&cfg);
    char own[128], text[1024];
    if (fl->td3)
        snprintf(own, sizeof own, "Td3Algorithm.policy_noise = %g\nTd3Algorithm.noise_clip = %g",
                 POLICY_NOISE, NOISE_CLIP);
    else
        snprintf(own, sizeof own, "DdpgAlgorithm.target_update_period = 2");
    snprintf(text, sizeof text,
             "TrainerConfig.algorithm_ctor = @%s\n"
             "create_environment.env_name = 'Pendulum-v1'\n"
             "create_environment.num_parallel_environments = %d\n"
             "TrainerConfig.unroll_length = 1\n"
             "TrainerConfig.num_updates_per_train_iter = 1\n"
             "TrainerConfig.mini_batch_size = %d\n"
             "TrainerConfig.initial_collect_steps = %d\n"
             "TrainerConfig.replay_buffer_length = 100\n"
             "actor/ActorDistributionNetwork.fc_layer_params = (%d, %d)\n"
             "critic/CriticNetwork.joint_fc_layer_params = (%d, %d)\n"
             "actor/Adam.lr = %g\ncritic/Adam.lr = %g\n"
             "Adam.eps = 1e-8\n"
             "%s.target_update_tau = %g\n"
             "%s\n"
             "OneStepTDLoss.gamma = %g\n",
             fl->name, E, B, E * (STEPS - UPDATES + 1), H, H, H, H, LR, LR, fl->name, TAU,
             own, GAMMA);
    calf_error err;
    CHECK_INT_EQ(calf_config_parse_string(&cfg, text, "test", &err), CALF_OK);
    comm *c = NULL;
    CHECK_INT_EQ(comm_single(&c, NULL), CALF_OK);
    const algorithm_ops *ops = algorithm_find(fl->name);
    CHECK(ops != NULL);
    if (!ops) return;
    CHECK_INT_EQ(ops->check(&cfg, &cls->spec, &err), CALF_OK);
    algo_setup s = {.cfg = &cfg, .spec = &cls->spec, .c = c, .E = E, .begin = 0, .count = E,
                    .T = 1, .seed = SEED};
    algorithm *a = NULL;
    CHECK_INT_EQ(ops->create(&s, &a, &err), CALF_OK);
    if (!a) return;

    nets n = {.fl = fl, .lo = cls->spec.action_low[0], .hi = cls->spec.action_high[0]};
    int hidden[2] = {H, H};
    size_t cur = 0;
    nn_mlp_layout(&n.actor, OD, hidden, 2, A, NN_ACT_RELU, &cur);
    size_t na = cur;
    cur = 0;
    nn_mlp_layout(&n.q1, OD + A, hidden, 2, 1, NN_ACT_RELU, &cur);
    if (fl->td3) nn_mlp_layout(&n.q2, OD + A, hidden, 2, 1, NN_ACT_RELU, &cur);
    size_t nc = cur;
    groups snap[UPDATES + 1];
    for (int k = 0; k <= UPDATES; k++)
        snap[k] = (groups){calloc(na, 4), calloc(na, 4), calloc(nc, 4), calloc(nc, 4),
                           calloc(na, 4), calloc(nc, 4), na, nc};

    transitions tr;
    int first = STEPS - UPDATES;
    for (int t = 0; t < STEPS; t++) {
        float o[E * OD], act_u[E * A], rew[E], nx[E * OD], sampled[E * A];
        int act[E];
        uint8_t te[E], trunc[E] = {0};
        for (int e = 0; e < E; e++) {
            ref_transition(e, t, OD, terminated, tr.obs[e][t], &tr.u[e][t], &tr.r[e][t], &tr.term[e][t],
                       tr.next[e][t]);
            memcpy(o + e * OD, tr.obs[e][t], sizeof tr.obs[e][t]);
            memcpy(nx + e * OD, tr.next[e][t], sizeof tr.next[e][t]);
            act_u[e] = tr.u[e][t];
            rew[e] = tr.r[e][t];
            te[e] = tr.term[e][t];
        }
        ops->act(a, t, 0, o, NULL, act, sampled);
        for (int e = 0; e < E; e++) CHECK(sampled[e] >= -2.0f && sampled[e] <= 2.0f);
        algo_step st = {.s = 0, .obs = o, .act = act, .u = act_u, .reward = rew,
                        .terminated = te, .truncated = trunc, .final_obs = nx, .next_obs = nx};
        ops->observe(a, &st);
        if (t == first) read_groups(fl, ops, a, &snap[0]);
        CHECK_INT_EQ(ops->train(a, t, &err), CALF_OK);
        if (t >= first) read_groups(fl, ops, a, &snap[t - first + 1]);
    }
    for (int k = 1; k <= UPDATES; k++) {
        int it = first + k - 1;
        int misses = update_misses(&n, &tr, it, k, &snap[k - 1], &snap[k], NONE);
        if (misses)
            fprintf(stderr, "%s, terminated=%d, update %d: %d misses\n", fl->name, terminated, k,
                    misses);
        CHECK_INT_EQ(misses, 0);
    }
    /* the planted mistakes: the same checks against a wrong reference miss, so an
     * implementation with the mistake would fail them. A terminated batch has no
     * bootstrap, so its targets do not show which networks formed them. */
    if (!terminated) {
        CHECK(update_misses(&n, &tr, first + 1, 2, &snap[1], &snap[2], TARGET_FROM_ONLINE) > 0);
        CHECK(update_misses(&n, &tr, first + 3, 4, &snap[3], &snap[4], TARGET_FROM_ONLINE) > 0);
    }
    for (int k = 1; k <= UPDATES; k++)
        CHECK(update_misses(&n, &tr, first + k - 1, k, &snap[k - 1], &snap[k], DELAY_OFF_BY_ONE) > 0);

    for (int k = 0; k <= UPDATES; k++) {
        groups *g = &snap[k];
        free(g->actor), free(g->actor_t), free(g->critic), free(g->critic_t);
        free(g->actor_m), free(g->critic_m);
    }
    ops->destroy(a);
    comm_finalize(c);
}

/* DDPG's exploration over 10 steps of 2 envs from the start (no uniform collection),
 * cut by a checkpoint after 5: each env's action is clamp(greedy + 2 x, -2, 2), x its
 * OU state, x = (1 - 0.15) x + 0.2 n with n from its own action stream. Returns the
 * actions that differ from the reference's. */
static int ou_misses(mistake planted) {
    const calf_env_class *cls = calf_env_find("Pendulum-v1");
    calf_config cfg;
    config_init(&cfg);
    calf_error err;
    CHECK_INT_EQ(calf_config_parse_string(&cfg,
                                          "TrainerConfig.algorithm_ctor = @DdpgAlgorithm\n"
                                          "create_environment.env_name = 'Pendulum-v1'\n"
                                          "create_environment.num_parallel_environments = 2\n"
                                          /* the policy's actions from the first step, not
                                           * DDPG's default 25,000 uniform ones */
                                          "TrainerConfig.initial_collect_steps = 0\n"
                                          "actor/ActorDistributionNetwork.fc_layer_params = (8,)\n"
                                          "critic/CriticNetwork.joint_fc_layer_params = (8,)\n",
                                          "t.gin", &err), CALF_OK);
    const algorithm_ops *ops = algorithm_find("DdpgAlgorithm");
    comm *c = NULL;
    CHECK_INT_EQ(comm_single(&c, NULL), CALF_OK);
    algo_setup s = {.cfg = &cfg, .spec = &cls->spec, .c = c, .E = E, .begin = 0, .count = E,
                    .T = 1, .seed = SEED};
    algorithm *a = NULL;
    CHECK_INT_EQ(ops->create(&s, &a, &err), CALF_OK);
    if (!a) return -1;
    calf_rng rng[E];
    float x[E] = {0};
    for (int e = 0; e < E; e++) calf_rng_seed(&rng[e], SEED, (uint64_t)e, CALF_RNG_ACTION);
    int misses = 0;
    for (int t = 0; t < 10; t++) {
        if (t == 5) { /* a checkpoint: the main section and the env records, into a new one */
            ckpt_buf b;
            ckpt_buf_init(&b);
            ops->save(a, &b);
            size_t rs = ops->env_record_size(a);
            unsigned char *rec = malloc(rs * E);
            for (int e = 0; e < E; e++) ops->save_env(a, e, rec + rs * e);
            ops->destroy(a);
            a = NULL;
            CHECK_INT_EQ(ops->create(&s, &a, &err), CALF_OK);
            ckpt_reader r;
            ckpt_reader_init(&r, b.data, b.len, "t.ckpt", &err);
            CHECK_INT_EQ(ops->load(a, &r, 0, &err), CALF_OK);
            for (int e = 0; e < E; e++)
                CHECK_INT_EQ(ops->load_env(a, e, rec + rs * e, "t.ckpt", &err), CALF_OK);
            /* a damaged record: the OU state (the record's last 4 bytes here) not finite */
            if (planted == NONE) {
                unsigned char *bad = malloc(rs);
                memcpy(bad, rec, rs);
                memset(bad + rs - 4, 0xff, 4); /* a NaN */
                CHECK_INT_EQ(ops->load_env(a, 0, bad, "t.ckpt", &err), CALF_EINVAL);
                CHECK_STR_EQ(err.msg, "t.ckpt: env 0's exploration noise is not finite");
                CHECK_INT_EQ(ops->load_env(a, 0, rec, "t.ckpt", &err), CALF_OK);
                free(bad);
            }
            free(rec);
            ckpt_buf_free(&b);
        }
        float o[E * OD], u[E], best[E];
        int act[E];
        for (int i = 0; i < E * OD; i++) o[i] = (float)sin(0.4 * t + 1.1 * i);
        ops->act(a, t, 0, o, NULL, act, u);
        ops->greedy(a, o, NULL, E, act, best);
        for (int e = 0; e < E; e++) {
            float n = (float)calf_rng_normal(&rng[e]);
            float keep = 1.0f - 0.15f;
            x[e] = (planted == OU_FORGETS ? 0.0f : keep * x[e]) + 0.2f * n;
            float noise = (float)((double)x[e] * 2.0);
            float want = (float)clampd((double)best[e] + (double)noise, -2.0, 2.0);
            misses += memcmp(&want, &u[e], sizeof want) != 0;
        }
    }
    ops->destroy(a);
    comm_finalize(c);
    return misses;
}

/* A discrete env is refused before anything is built, naming where the algorithm was
 * chosen and the env. */
static void refuses_discrete(void) {
    const calf_env_class *cls = calf_env_find("CartPole-v1");
    CHECK(cls != NULL);
    if (!cls) return;
    calf_config cfg;
    config_init(&cfg);
    calf_error err;
    CHECK_INT_EQ(calf_config_parse_string(&cfg,
                                          "create_environment.env_name = 'CartPole-v1'\n"
                                          "TrainerConfig.algorithm_ctor = @Td3Algorithm\n",
                                          "t.gin", &err), CALF_OK);
    const algorithm_ops *ops = algorithm_find("Td3Algorithm");
    CHECK_INT_EQ(ops->check(&cfg, &cls->spec, &err), CALF_EINVAL);
    CHECK_STR_EQ(err.msg, "t.gin:2: Td3Algorithm needs continuous actions; CartPole-v1 "
                          "(create_environment.env_name, set at t.gin:1) has 2 discrete ones");
}

int main(void) {
    one_case(&TD3, false);
    one_case(&TD3, true);
    one_case(&DDPG, false);
    one_case(&DDPG, true);
    CHECK_INT_EQ(ou_misses(NONE), 0);
    CHECK(ou_misses(OU_FORGETS) > 0);
    refuses_discrete();
    return test_report("test_dpg");
}
