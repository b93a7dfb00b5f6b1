/* test_ppo_recurrent.c: PPO's recurrent update (algorithms/ppo_recurrent.h) and the
 * actor-critic's recurrent states it replays (algorithms/ac_recurrent.h). One env's
 * sequence gradient against central finite differences of the PPO loss computed here from
 * the cells' and MLPs' forwards (an LSTM actor and a GRU value; discrete and continuous
 * actions), its ADD mode against SET, and the rollout's step-by-step acting against the
 * update's recomputation bit for bit (so the first epoch's ratios are exactly 1). Each
 * check is shown to reject a planted mistake: the state not reset where an episode starts,
 * the rollout's first state ignored. */
#include <stdint.h>

#include "algorithms/ac_model.h"
#include "algorithms/ac_recurrent.h"
#include "algorithms/ppo_math.h"
#include "algorithms/ppo_recurrent.h"
#include "base/config.h"
#include "test_util.h"

enum { T = 7, OD = 3 };

typedef struct fixture {
    ac_model md;
    ppo_seq_work w;
    float obs[T * OD];
    uint8_t start[T];
    float *state0;
    int act[T];
    float u[T];
    float logp[T], adv[T], ret[T];
    float val_old[T]; /* the rollout's values, for value clipping */
    ppo_loss_weights lw;
} fixture;

static ppo_seq seq_of(const fixture *f, const uint8_t *start, const float *state0) {
    return (ppo_seq){.T = T, .obs = f->obs, .start = start, .state0 = state0, .act = f->act,
                     .u = f->md.action_dim ? f->u : NULL, .logp = f->logp, .adv = f->adv,
                     .ret = f->ret, .val = f->val_old};
}

/* The loss the gradient is of: scale * sum over the steps of ppo_sample_loss's loss, the
 * networks (each a core, then its MLP) run here over the sequence from state0 (resetting
 * where start says). */
static double loss_of(fixture *f, const float *params) {
    ac_model *md = &f->md;
    ppo_seq_work *w = &f->w;
    int hd = md->head_dim;
    const float *sa = f->state0, *sv = f->state0 + md->actor.state_size;
    net_forward_seq(&md->actor, params, 0, f->obs, f->start, sa, T, 1, &w->ac, w->head, NULL);
    net_forward_seq(&md->value, params, 0, f->obs, f->start, sv, T, 1, &w->vc, w->val, NULL);
    double L = 0;
    ppo_loss_weights one = f->lw;
    one.scale = 1.0f;
    for (int j = 0; j < T; j++) {
        float logp, ent;
        ac_model_logp_entropy(md, params, w->head + j * hd, NULL, &f->act[j],
                              md->action_dim ? f->u + j : NULL, &logp, &ent, NULL);
        ppo_sample_result res;
        ppo_sample_loss(logp, f->logp[j], f->adv[j], ent, w->val[j], f->val_old[j], f->ret[j],
                        &one, &res);
        L += (double)f->lw.scale * res.loss;
    }
    return L;
}

/* The largest disagreement of grad with central differences of loss_of over every
 * parameter, each relative to max(1e-2, |fd|); grad came from the correct inputs or from a
 * planted mistake. */
static double fd_mismatch(fixture *f, const float *grad) {
    float *p = f->md.g.params;
    double worst = 0;
    for (size_t k = 0; k < f->md.g.n; k++) {
        float keep = p[k];
        float hi = keep + 3e-3f, lo = keep - 3e-3f; /* the steps as floats hold them */
        p[k] = hi;
        double up = loss_of(f, p);
        p[k] = lo;
        double down = loss_of(f, p);
        p[k] = keep;
        double fd = (up - down) / ((double)hi - (double)lo);
        double e = fabs((double)grad[k] - fd) / fmax(1e-2, fabs(fd));
        if (e > worst) worst = e;
    }
    return worst;
}

static void fixture_init(fixture *f, bool continuous) {
    memset(f, 0, sizeof *f);
    calf_error err;
    calf_config *cfg = calf_config_new(&err);
    CHECK(cfg != NULL);
    const char *params[] = {"ActorDistributionNetwork.fc_layer_params=(5,)",
                            "ValueNetwork.fc_layer_params=(4,)",
                            "ActorDistributionNetwork.lstm_hidden_size=4",
                            "ValueNetwork.gru_hidden_size=3",
                            "ActorDistributionNetwork.init_log_std=-0.5"};
    for (size_t k = 0; k < sizeof params / sizeof params[0]; k++)
        CHECK_INT_EQ(calf_config_apply_param(cfg, params[k], &err), CALF_OK);
    static const float low[1] = {-2.0f}, high[1] = {2.0f};
    calf_env_spec spec = {.name = "Seq-v0", .obs_dim = OD, .num_actions = continuous ? 0 : 3,
                          .action_dim = continuous ? 1 : 0, .action_low = low,
                          .action_high = high, .max_episode_steps = 10};
    adam_conf opt = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-5f};
    CHECK_INT_EQ(ac_model_init(&f->md, cfg, &ppo_model_rows, &spec, opt, &err), CALF_OK);
    CHECK_INT_EQ(ac_model_init_params(&f->md, cfg, &ppo_model_rows, 3, &err), CALF_OK);
    calf_config_free(cfg);
    ac_model *md = &f->md;
    CHECK_INT_EQ(md->state_dim, 2 * 4 + 3);
    CHECK_INT_EQ(ppo_seq_work_init(&f->w, md, T, &err), CALF_OK);
    calf_rng r;
    calf_rng_seed(&r, 11, continuous, CALF_RNG_INIT);
    /* the heads' init (gain 0.01) and zero biases leave gradients near nothing: spread
     * every parameter so each one matters */
    for (size_t k = 0; k < md->g.n; k++)
        md->g.params[k] += (float)calf_rng_uniform_range(&r, -0.4, 0.4);
    for (int k = 0; k < T * OD; k++) f->obs[k] = (float)calf_rng_uniform_range(&r, -1.5, 1.5);
    static const uint8_t start[T] = {0, 0, 1, 0, 0, 0, 0}; /* an episode starts at step 2 */
    memcpy(f->start, start, sizeof start);
    f->state0 = calloc((size_t)md->state_dim, sizeof(float));
    for (int k = 0; k < md->state_dim; k++) f->state0[k] = (float)calf_rng_uniform_range(&r, -0.8, 0.8);
    for (int j = 0; j < T; j++) {
        f->act[j] = (int)calf_rng_below(&r, 3);
        f->u[j] = (float)calf_rng_uniform_range(&r, -1, 1);
        f->adv[j] = (float)calf_rng_uniform_range(&r, -1, 1);
        f->ret[j] = (float)calf_rng_uniform_range(&r, -1, 1);
    }
    f->lw = (ppo_loss_weights){.clip = 0.2f, .td_w = 0.5f, .ent_w = 0.01f, .scale = 1.0f / T};
    /* the old log-probabilities near the current ones: ratios inside the clip range,
     * where the loss is smooth */
    loss_of(f, md->g.params);
    for (int j = 0; j < T; j++) {
        float logp, ent;
        ac_model_logp_entropy(md, md->g.params, f->w.head + j * md->head_dim, NULL, &f->act[j],
                              continuous ? f->u + j : NULL, &logp, &ent, NULL);
        f->logp[j] = logp + (float)calf_rng_uniform_range(&r, -0.05, 0.05);
    }
}

static void fixture_free(fixture *f) {
    ppo_seq_work_free(&f->w);
    ac_model_free(&f->md);
    free(f->state0);
}

static void check_gradient(bool continuous) {
    fixture f;
    fixture_init(&f, continuous);
    ac_model *md = &f.md;
    size_t n = md->g.n;
    float *g = calloc(n, sizeof(float)), *g2 = calloc(n, sizeof(float));
    double st[4] = {0};
    ppo_seq sq = seq_of(&f, f.start, f.state0);
    ppo_seq_grad(md, md->g.params, 1, &f.w, &sq, &f.lw, g, false, st);
    double e = fd_mismatch(&f, g);
    CHECK(e <= 2e-2);
    CHECK(st[2] > 0); /* the entropies were summed */
    /* ADD mode: grad + the SET partial, elementwise, bit for bit */
    for (size_t k = 0; k < n; k++) g2[k] = (float)k * 0.125f;
    ppo_seq_grad(md, md->g.params, 5, &f.w, &sq, &f.lw, g2, true, st);
    bool same = true;
    for (size_t k = 0; k < n; k++) {
        float want = (float)k * 0.125f + g[k];
        same &= memcmp(&want, &g2[k], sizeof want) == 0;
    }
    CHECK(same);
    /* planted mistakes, each rejected by the same check: the state not reset where the
     * episode starts; the rollout's first state taken as zero */
    static const uint8_t no_start[T] = {0};
    memset(g2, 0, n * sizeof(float)); /* the padding as SET leaves it: untouched */
    sq = seq_of(&f, no_start, f.state0);
    ppo_seq_grad(md, md->g.params, 2, &f.w, &sq, &f.lw, g2, false, st);
    double e_reset = fd_mismatch(&f, g2);
    CHECK(e_reset > 2e-2);
    float *zero = calloc((size_t)md->state_dim, sizeof(float));
    sq = seq_of(&f, f.start, zero);
    ppo_seq_grad(md, md->g.params, 3, &f.w, &sq, &f.lw, g2, false, st);
    double e_state0 = fd_mismatch(&f, g2);
    CHECK(e_state0 > 2e-2);
    printf("%s actions: gradient within %.2g of finite differences (bound 2e-2); planted: "
           "no reset %.2g, no first state %.2g\n",
           continuous ? "continuous" : "discrete", e, e_reset, e_state0);
    /* value clipping (PPOLoss.value_clipping): the rollout's values moved from the
     * current ones by more than the clip at some steps, less at others, so each branch of
     * the max is taken somewhere; the same check, and it rejects the planted mistake of
     * the sequence's old values read as the current ones (no clipping at all) */
    static const float moved[T] = {0.3f, -0.25f, 0.03f, -0.04f, 0.5f, -0.6f, 0.35f};
    loss_of(&f, md->g.params);
    for (int j = 0; j < T; j++) f.val_old[j] = f.w.val[j] + moved[j];
    f.lw.value_clip = 0.1f;
    sq = seq_of(&f, f.start, f.state0);
    ppo_seq_grad(md, md->g.params, 6, &f.w, &sq, &f.lw, g2, false, st);
    double e_vclip = fd_mismatch(&f, g2);
    CHECK(e_vclip <= 2e-2);
    float cur[T];
    loss_of(&f, md->g.params);
    memcpy(cur, f.w.val, sizeof cur);
    sq.val = cur;
    ppo_seq_grad(md, md->g.params, 7, &f.w, &sq, &f.lw, g2, false, st);
    double e_noclip = fd_mismatch(&f, g2);
    CHECK(e_noclip > 2e-2);
    printf("%s actions, value clipping 0.1: gradient within %.2g (bound 2e-2); planted: "
           "old values ignored %.2g\n",
           continuous ? "continuous" : "discrete", e_vclip, e_noclip);
    free(zero);
    free(g);
    free(g2);
    fixture_free(&f);
}

/* The rollout acts a step at a time (ac_rec_step) on every env's state; the update
 * recomputes the whole sequence (ppo_seq_grad). Same parameters, same bits: the actor's
 * outputs and the values agree exactly at every step. The check compares every output,
 * so a rollout that does not reset at the episode start is rejected. */
static bool replay_agrees(fixture *f, const uint8_t *rollout_start) {
    ac_model *md = &f->md;
    calf_error err;
    ac_rec_act act;
    ac_rec_state s;
    net_cache ac, vc;
    CHECK_INT_EQ(ac_rec_act_init(&act, md, &err), CALF_OK);
    CHECK_INT_EQ(ac_rec_state_init(&s, md, 1, &err), CALF_OK);
    CHECK_INT_EQ(net_cache_init(&ac, &md->actor, 4, &err), CALF_OK);
    CHECK_INT_EQ(net_cache_init(&vc, &md->value, 4, &err), CALF_OK);
    ac_rec_state_set(&s, md, 0, f->state0);
    int hd = md->head_dim;
    float head[T * 3], val[T];
    for (int j = 0; j < T; j++)
        ac_rec_step(md, md->g.params, &s, f->obs + j * OD, rollout_start + j, 1, &ac,
                    head + j * hd, &vc, val + j);
    double st[4] = {0};
    float *g = calloc(md->g.n, sizeof(float));
    ppo_seq sq = seq_of(f, f->start, f->state0);
    ppo_seq_grad(md, md->g.params, 4, &f->w, &sq, &f->lw, g, false, st);
    bool same = memcmp(head, f->w.head, (size_t)T * hd * sizeof(float)) == 0 &&
                memcmp(val, f->w.val, sizeof val) == 0;
    free(g);
    net_cache_free(&ac);
    net_cache_free(&vc);
    ac_rec_state_free(&s);
    ac_rec_act_free(&act);
    return same;
}

static void check_replay(void) {
    for (int continuous = 0; continuous <= 1; continuous++) {
        fixture f;
        fixture_init(&f, continuous);
        CHECK(replay_agrees(&f, f.start));
        static const uint8_t no_start[T] = {0};
        CHECK(!replay_agrees(&f, no_start)); /* planted: no reset while acting */
        fixture_free(&f);
    }
}

/* A checkpoint's record of a row's state reads back as the same bits; a non-finite value
 * is refused and changes nothing. */
static void check_state_bytes(void) {
    fixture f;
    fixture_init(&f, false);
    ac_model *md = &f.md;
    calf_error err;
    ac_rec_state s;
    CHECK_INT_EQ(ac_rec_state_init(&s, md, 3, &err), CALF_OK);
    ac_rec_state_set(&s, md, 1, f.state0);
    unsigned char rec[4 * 64];
    CHECK(md->state_dim <= 64);
    ac_rec_state_put(&s, md, 1, rec);
    ac_rec_state_zero(&s, md, 0, 3);
    CHECK(ac_rec_state_load(&s, md, 2, rec));
    float back[64];
    ac_rec_state_get(&s, md, 2, back);
    CHECK(memcmp(back, f.state0, (size_t)md->state_dim * sizeof(float)) == 0);
    rec[4 * 3 + 3] = 0x7f, rec[4 * 3 + 2] = 0xc0; /* value 3 becomes a NaN */
    CHECK(!ac_rec_state_load(&s, md, 0, rec));
    ac_rec_state_get(&s, md, 0, back);
    bool zero = true;
    for (int k = 0; k < md->state_dim; k++) zero &= back[k] == 0.0f;
    CHECK(zero);
    ac_rec_state_free(&s);
    fixture_free(&f);
}

/* ac_model_check refuses a model that cannot be, in the rows it is handed, naming the
 * row and where it was set: a core both an LSTM and a GRU, a core under 3 units, pre_fc
 * layers without a core (each network's rows, the value's too); and passes the fixture's. */
static void check_model_check(void) {
    static const struct {
        const char *params[2];
        const char *msg;
    } bad[] = {
        {{"ValueNetwork.lstm_hidden_size=4", "ValueNetwork.gru_hidden_size=5"},
         "--conf_param: ValueNetwork.gru_hidden_size and ValueNetwork.lstm_hidden_size "
         "(--conf_param) are both set: a network's core is an LSTM or a GRU, not both"},
        {{"ActorDistributionNetwork.gru_hidden_size=2", NULL},
         "--conf_param: ActorDistributionNetwork.gru_hidden_size = 2: a recurrent core needs "
         "at least 3 units"},
        {{"ValueNetwork.pre_fc_layer_params=(4,)", NULL},
         "--conf_param: ValueNetwork.pre_fc_layer_params: fc layers before a recurrent core, "
         "but the network has none (set ValueNetwork.lstm_hidden_size or "
         "ValueNetwork.gru_hidden_size)"},
        {{"ActorDistributionNetwork.lstm_hidden_size=4", "ValueNetwork.gru_hidden_size=3"}, NULL},
    };
    calf_env_spec spec = {.name = "Seq-v0", .obs_dim = OD, .num_actions = 3,
                          .max_episode_steps = 10};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        calf_error err;
        calf_config *cfg = calf_config_new(&err);
        CHECK(cfg != NULL);
        for (int j = 0; j < 2 && bad[k].params[j]; j++)
            CHECK_INT_EQ(calf_config_apply_param(cfg, bad[k].params[j], &err), CALF_OK);
        int rc = ac_model_check(cfg, &ppo_model_rows, &spec, &err);
        CHECK_INT_EQ(rc, bad[k].msg ? CALF_EINVAL : CALF_OK);
        if (bad[k].msg && rc) CHECK_STR_EQ(err.msg, bad[k].msg);
        calf_config_free(cfg);
    }
}

int main(void) {
    check_model_check();
    check_gradient(false);
    check_gradient(true);
    check_replay();
    check_state_bytes();
    return test_report("test_ppo_recurrent");
}
