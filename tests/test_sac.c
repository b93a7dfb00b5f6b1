/* test_sac.c: SAC's first two updates, driven through the algorithm interface as the
 * trainer drives them (act, observe, train), checked against what an update must do,
 * with the networks recomputed here in double. Adam's first moment after a step, 0.9
 * m_before + 0.1 g, gives the gradient g each step used:
 * - the critics' gradient equals central differences of
 *   mean_j [0.5 (q1_j - y_j)^2 + 0.5 (q2_j - y_j)^2] over the update's samples
 *   (replay_sample), where y_j is r_j for a terminated transition, else r_j + gamma (min
 *   of the TARGET critics at (s'_j, a'_j) - alpha logp(a'_j)), a'_j the squashed sample
 *   of the pre-update actor at s'_j with the sample's own noise (its CALF_RNG_NOISE
 *   stream, docs/DESIGN.md); on the first step (eps 1e-8) each parameter moves by lr
 *   against its gradient's sign, and one without gradient does not move;
 * - the temperature's gradient is -(mean logp + target entropy) of the actor-loss sample;
 * - then the target critics move tau of the way to the stepped critics (in float, as
 *   sac_polyak_update does), and the actor moves.
 * The second update is where targets and critics differ, so it tells them apart. Two
 * cases: every stored transition terminated, and none. */
#include <stdint.h>

#include "training/algorithm.h"
#include "algorithms/replay.h"
#include "algorithms/sac_math.h"
#include "calf/rng.h"
#include "parallel/comm.h"
#include "numerics/nn.h"
#include "offpolicy_ref.h"
#include "test_util.h"

enum { E = 2, STEPS = 4, B = 16, OD = 3, A = 1, H = 8 };
/* lr large enough that after one step the targets differ clearly from the critics */
static const double LR = 3e-2, TAU = 0.25, GAMMA = 0.9;
static const uint64_t SEED = 7;

/* The algorithm's four groups as its checkpoint section holds them. */
typedef struct groups {
    float *actor, *critic, *target, log_alpha;
    size_t na, nc;
    float *critic_m, alpha_m; /* Adam's first moments: after the first step, 0.1 * gradient */
} groups;

static void read_groups(const algorithm_ops *ops, const algorithm *a, groups *g) {
    ckpt_buf b;
    ckpt_reader r;
    calf_error err;
    int64_t updates;
    ref_section_open(ops, a, "SACU", &b, &r, &err, &updates);
    ref_read_group(&r, "SACA", g->actor, g->na, true, NULL);
    ref_read_group(&r, "SACQ", g->critic, g->nc, true, g->critic_m);
    ref_read_group(&r, "SACT", g->target, g->nc, false, NULL);
    ref_read_group(&r, "SACL", &g->log_alpha, 1, true, &g->alpha_m);
    CHECK_INT_EQ(r.status, CALF_OK);
    ckpt_buf_free(&b);
}

/* The squashed sample of the pre-update actor at observation o with sample j's noise of
 * the update in iteration it (its CALF_RNG_NOISE stream: eps for the next action, then
 * eps2 for the actor loss's; `second` picks eps2): the action into a, logp returned. */
static float policy_sample(const nn_mlp *actor, const groups *g, const float *o, int it, int j,
                           bool second, const float *lo, const float *hi, float *a) {
    double x[OD], head[2 * A];
    for (int i = 0; i < OD; i++) x[i] = o[i];
    ref_mlp_forward(actor, g->actor, x, head);
    calf_rng rng;
    calf_rng_seed(&rng, SEED, replay_stream_index(it, 0) * 0x9E3779B97F4A7C15ULL + (uint64_t)j,
                  CALF_RNG_NOISE);
    float eps[A], headf[2 * A], logp;
    for (int i = 0; i < A; i++) eps[i] = (float)calf_rng_normal(&rng);
    if (second)
        for (int i = 0; i < A; i++) eps[i] = (float)calf_rng_normal(&rng);
    for (int i = 0; i < 2 * A; i++) headf[i] = (float)head[i];
    sac_squashed_sample(A, headf, eps, lo, hi, a, &logp);
    return logp;
}

/* y_j as the update must form it, from the pre-update groups. */
static double target_value(const nn_mlp *actor, const nn_mlp *q1, const nn_mlp *q2,
                           const groups *g, float r, uint8_t term, const float *next, int it,
                           int j, const float *lo, const float *hi) {
    if (term) return r;
    float a[A];
    float logp = policy_sample(actor, g, next, it, j, false, lo, hi, a);
    double x[OD + A];
    for (int i = 0; i < OD; i++) x[i] = next[i];
    for (int i = 0; i < A; i++) x[OD + i] = a[i];
    double t1, t2;
    ref_mlp_forward(q1, g->target, x, &t1);
    ref_mlp_forward(q2, g->target, x, &t2);
    float alpha = (float)exp((double)g->log_alpha);
    return sac_td_target(r, (float)GAMMA, 0, (float)t1, (float)t2, alpha, logp);
}

/* The mean over the actor-loss samples (noise eps2 at s_j) of logp, pre-update actor. */
static double mean_logp(const nn_mlp *actor, const groups *g, float (*obs)[OD], int it,
                        const float *lo, const float *hi) {
    double sum = 0;
    for (int j = 0; j < B; j++) {
        float a[A];
        sum += policy_sample(actor, g, obs[j], it, j, true, lo, hi, a);
    }
    return sum / B;
}

static double critic_loss(const nn_mlp *q1, const nn_mlp *q2, const float *critic,
                          float (*obs)[OD], const float *u, const double *y) {
    double loss = 0;
    for (int j = 0; j < B; j++) {
        double x[OD + A], a, b;
        for (int i = 0; i < OD; i++) x[i] = obs[j][i];
        x[OD] = u[j];
        ref_mlp_forward(q1, critic, x, &a);
        ref_mlp_forward(q2, critic, x, &b);
        loss += 0.5 * (a - y[j]) * (a - y[j]) + 0.5 * (b - y[j]) * (b - y[j]);
    }
    return loss / B;
}

/* What the test remembers of the transitions it fed. */
typedef struct transitions {
    float obs[E][STEPS][OD], u[E][STEPS], r[E][STEPS], next[E][STEPS][OD];
    uint8_t term[E][STEPS];
} transitions;

typedef struct nets {
    const nn_mlp *actor, *q1, *q2;
    const float *lo, *hi;
} nets;

/* The update of iteration `it` (stored = it + 1 transitions per env), from groups b to
 * groups f. Adam's first moment m after a step is 0.9 m_before + 0.1 g, which gives the
 * gradient g the step used; on the first step (first) m_before is 0 and the step moves
 * each parameter by lr against the gradient's sign. */
static void check_update(const nets *n, const transitions *tr, bool terminated, int it,
                         const groups *b, const groups *f, bool first, double lr) {
    size_t nc = b->nc;
    int env[B];
    int64_t pos[B];
    replay_sample(SEED, it, 0, E, it + 1, B, env, pos);
    float sobs[B][OD], su[B];
    double y[B];
    for (int j = 0; j < B; j++) {
        int e = env[j], t = (int)pos[j];
        memcpy(sobs[j], tr->obs[e][t], sizeof sobs[j]);
        su[j] = tr->u[e][t];
        y[j] = target_value(n->actor, n->q1, n->q2, b, tr->r[e][t], tr->term[e][t],
                            tr->next[e][t], it, j, n->lo, n->hi);
    }

    /* the critics' gradient against central differences of the loss */
    float *p = malloc(nc * sizeof(float));
    int checked = 0, moved_right = 0, still = 0, still_right = 0;
    double worst = 0; /* the largest |gradient used - finite difference|, relative */
    for (size_t i = 0; i < nc; i++) {
        memcpy(p, b->critic, nc * sizeof(float));
        const float hp = b->critic[i] + 1e-4f, hm = b->critic[i] - 1e-4f;
        p[i] = hp;
        double lp = critic_loss(n->q1, n->q2, p, sobs, su, y);
        p[i] = hm;
        double lm = critic_loss(n->q1, n->q2, p, sobs, su, y);
        double g = (lp - lm) / ((double)hp - (double)hm);
        double used = ((double)f->critic_m[i] - 0.9 * (double)b->critic_m[i]) / 0.1;
        worst = fmax(worst, fabs(used - g) / (fabs(g) + 1e-3));
        double d = (double)f->critic[i] - (double)b->critic[i];
        if (fabs(g) > 1e-4) {
            checked++;
            moved_right += !first || fabs(d + lr * (g > 0 ? 1 : -1)) <= 1e-3 * lr;
        } else if (g == 0.0) {
            still++; /* padding, and weights into or out of units no sample reaches */
            still_right += !first || d == 0.0;
        }
    }
    free(p);
    if (worst > 1e-3 || moved_right != checked)
        fprintf(stderr, "terminated=%d, iteration %d: critic gradient off by %g (relative); %d of %d parameters moved by lr\n",
                terminated, it, worst, moved_right, checked);
    CHECK(checked >= 64); /* enough to mean something: about a third of the parameters */
    CHECK(worst <= 1e-3);
    CHECK_INT_EQ(still_right, still);
    CHECK_INT_EQ(moved_right, checked);

    /* the temperature's gradient, d(-log_alpha (logp + target))/d log_alpha averaged:
     * -(mean logp - |A|); on the first step it goes up when the entropy is below -|A| */
    double m = mean_logp(n->actor, b, sobs, it, n->lo, n->hi);
    double used = ((double)f->alpha_m - 0.9 * (double)b->alpha_m) / 0.1;
    CHECK_NEAR(used, -(m - (double)A), 1e-4 * (1.0 + fabs(m)));
    if (first) CHECK_NEAR((double)f->log_alpha - (double)b->log_alpha, (-m < -(double)A) ? lr : -lr, 1e-3 * lr);

    /* the targets: tau of the way to the stepped critics, in float */
    int exact = 0;
    for (size_t i = 0; i < nc; i++) {
        float t = (1.0f - (float)TAU) * b->target[i];
        float q = (float)TAU * f->critic[i];
        exact += memcmp(&(float){t + q}, &f->target[i], sizeof(float)) == 0;
    }
    CHECK_INT_EQ(exact, (long long)nc);
    /* and the actor moved (its own gradient is sac_math's finite-difference test) */
    CHECK(memcmp(b->actor, f->actor, b->na * sizeof(float)) != 0);
}

/* sched_n > 0: under Adam.lr_schedule = 'linear' over a run of sched_n iterations, so
 * the first update (iteration STEPS - 2) steps with LR * (1 - (STEPS - 2) / sched_n). */
static void one_case(bool terminated, int64_t sched_n) {
    const calf_env_class *cls = calf_env_find("Pendulum-v1");
    CHECK(cls != NULL);
    if (!cls) return;
    calf_config cfg;
    config_init(&cfg);
    char text[1024];
    snprintf(text, sizeof text,
             "TrainerConfig.algorithm_ctor = @SacAlgorithm\n"
             "create_environment.env_name = 'Pendulum-v1'\n"
             "create_environment.num_parallel_environments = %d\n"
             "TrainerConfig.unroll_length = 1\n"
             "TrainerConfig.num_updates_per_train_iter = 1\n"
             "TrainerConfig.mini_batch_length = 2\n"
             "TrainerConfig.mini_batch_size = %d\n"
             "TrainerConfig.initial_collect_steps = %d\n"
             "TrainerConfig.replay_buffer_length = 100\n"
             "actor/ActorDistributionNetwork.fc_layer_params = (%d, %d)\n"
             "critic/CriticNetwork.joint_fc_layer_params = (%d, %d)\n"
             "actor/Adam.lr = %g\ncritic/Adam.lr = %g\nalpha/Adam.lr = %g\n"
             "Adam.eps = 1e-8\n"
             "SacAlgorithm.target_update_tau = %g\n"
             "OneStepTDLoss.gamma = %g\n"
             "Adam.lr_schedule = '%s'\n",
             E, B, E * (STEPS - 1), H, H, H, H, LR, LR, LR, TAU, GAMMA,
             sched_n > 0 ? "linear" : "constant");
    calf_error err;
    CHECK_INT_EQ(calf_config_parse_string(&cfg, text, "test", &err), CALF_OK);
    comm *c = NULL;
    CHECK_INT_EQ(comm_single(&c, NULL), CALF_OK);
    const algorithm_ops *ops = algorithm_find("SacAlgorithm");
    CHECK(ops != NULL);
    algo_setup s = {.cfg = &cfg, .spec = &cls->spec, .c = c, .E = E, .begin = 0, .count = E,
                    .T = 1, .seed = SEED, .total_iterations = sched_n};
    algorithm *a = NULL;
    CHECK_INT_EQ(ops->create(&s, &a, &err), CALF_OK);
    if (!a) return;

    /* the layout sac.c uses: the actor alone, then q1 and q2 in one group */
    nn_mlp actor, q1, q2;
    int hidden[2] = {H, H};
    size_t cur = 0;
    nn_mlp_layout(&actor, OD, hidden, 2, 2 * A, NN_ACT_RELU, &cur);
    size_t na = cur;
    cur = 0;
    nn_mlp_layout(&q1, OD + A, hidden, 2, 1, NN_ACT_RELU, &cur);
    nn_mlp_layout(&q2, OD + A, hidden, 2, 1, NN_ACT_RELU, &cur);
    size_t nc = cur;
    groups snap[3]; /* before the first update, after it, after the second */
    for (int k = 0; k < 3; k++)
        snap[k] = (groups){calloc(na, 4), calloc(nc, 4), calloc(nc, 4), 0, na, nc, calloc(nc, 4), 0};

    /* STEPS iterations of collection; the last two iterations' trains update once each */
    transitions tr;
    for (int t = 0; t < STEPS; t++) {
        float o[E * OD], act_u[E * A], rew[E], nx[E * OD];
        int act[E];
        uint8_t te[E], trunc[E] = {0};
        for (int e = 0; e < E; e++) {
            ref_transition(e, t, OD, terminated, tr.obs[e][t], &tr.u[e][t], &tr.r[e][t],
                       &tr.term[e][t], tr.next[e][t]);
            memcpy(o + e * OD, tr.obs[e][t], sizeof tr.obs[e][t]);
            memcpy(nx + e * OD, tr.next[e][t], sizeof tr.next[e][t]);
            act_u[e] = tr.u[e][t];
            rew[e] = tr.r[e][t];
            te[e] = tr.term[e][t];
        }
        float sampled[E * A];
        ops->act(a, t, 0, o, NULL, act, sampled);
        if (t < STEPS - 1) /* still collecting: uniform in the bounds */
            for (int e = 0; e < E; e++) CHECK(sampled[e] >= -2.0f && sampled[e] <= 2.0f);
        algo_step st = {.s = 0, .obs = o, .act = act, .u = act_u, .reward = rew,
                        .terminated = te, .truncated = trunc, .final_obs = nx, .next_obs = nx};
        ops->observe(a, &st);
        if (t == STEPS - 2) read_groups(ops, a, &snap[0]);
        CHECK_INT_EQ(ops->train(a, t, &err), CALF_OK);
        if (t == STEPS - 2) read_groups(ops, a, &snap[1]);
    }
    read_groups(ops, a, &snap[2]);
    nets n = {&actor, &q1, &q2, cls->spec.action_low, cls->spec.action_high};
    double lr = sched_n > 0 ? (double)(float)(LR * (1.0 - (double)(STEPS - 2) / (double)sched_n)) : LR;
    check_update(&n, &tr, terminated, STEPS - 2, &snap[0], &snap[1], true, lr);
    /* the second: the targets now differ from the critics, Adam has a history */
    check_update(&n, &tr, terminated, STEPS - 1, &snap[1], &snap[2], false, lr);

    for (int k = 0; k < 3; k++)
        free(snap[k].actor), free(snap[k].critic), free(snap[k].target), free(snap[k].critic_m);
    ops->destroy(a);
    comm_finalize(c);
}

/* A checkpoint whose log alpha makes alpha 0 as a float (exp(-200)) is refused for
 * discrete actions, which divide by alpha; exp(-100), a subnormal, still loads. */
static void discrete_alpha_load(void) {
    const calf_env_class *cls = calf_env_find("CartPole-v1");
    CHECK(cls != NULL);
    if (!cls) return;
    calf_config cfg;
    config_init(&cfg);
    calf_error err;
    CHECK_INT_EQ(calf_config_parse_string(&cfg,
                                          "TrainerConfig.algorithm_ctor = @SacAlgorithm\n"
                                          "create_environment.env_name = 'CartPole-v1'\n"
                                          "critic/CriticNetwork.joint_fc_layer_params = (8,)\n",
                                          "test", &err), CALF_OK);
    const algorithm_ops *ops = algorithm_find("SacAlgorithm");
    algo_setup s = {.cfg = &cfg, .spec = &cls->spec, .E = 1, .T = 1, .seed = SEED};
    algorithm *a = NULL;
    CHECK_INT_EQ(ops->create(&s, &a, &err), CALF_OK); /* acting only: count 0, no comm */
    if (!a) return;
    ckpt_buf b;
    ckpt_buf_init(&b);
    ops->save(a, &b);
    unsigned char *sacl = NULL;
    for (size_t i = 0; i + 4 <= b.len && !sacl; i++)
        if (memcmp(b.data + i, "SACL", 4) == 0) sacl = b.data + i;
    CHECK(sacl != NULL);
    const float values[2] = {-100.0f, -200.0f};
    for (int k = 0; sacl && k < 2; k++) {
        memcpy(sacl + 4 + 8, &values[k], 4); /* tag, count, then log alpha */
        ckpt_reader r;
        ckpt_reader_init(&r, b.data, b.len, "t.ckpt", &err);
        int rc = ops->load(a, &r, 0, &err);
        if (k == 0) {
            CHECK_INT_EQ(rc, CALF_OK);
        } else {
            CHECK_INT_EQ(rc, CALF_EINVAL);
            CHECK_STR_EQ(err.msg, "t.ckpt: SACL: log alpha -200 makes alpha 0, which discrete "
                                  "actions cannot use");
        }
    }
    ckpt_buf_free(&b);
    ops->destroy(a);
}

int main(void) {
    one_case(true, 0);
    one_case(false, 0);
    one_case(false, 8); /* the linear schedule: the first step moves by 0.75 LR */
    discrete_alpha_load();
    return test_report("test_sac");
}
