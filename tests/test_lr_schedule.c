/* test_lr_schedule.c: Adam.lr_schedule = 'linear' in every replay algorithm (SAC, TD3,
 * DDPG, DQN with Adam and with RMSProp): a run whose one train with updates is at
 * iteration K of N ends in the bytes of a run at the constant learning rates
 * (float)(lr * (1 - K/N)), each network's from its own configured lr, and not in those
 * of the unscaled rates (what an algorithm that ignored the schedule would give). */
#include <stdint.h>

#include "training/algorithm.h"
#include "base/config.h"
#include "calf/env.h"
#include "parallel/comm.h"
#include "records/checkpoint.h"
#include "test_util.h"

enum { E = 2, K = 3, N = 8 };
/* each network's lr differs, so that one network stepped with another's rate shows */
static const double ACTOR_LR = 3e-2, CRITIC_LR = 2e-2, ALPHA_LR = 1e-2;

typedef struct variant {
    const char *algo;         /* the registry's name */
    const char *env;
    const char *extra;        /* the variant's own lines */
    bool actor, alpha;        /* it reads actor/Adam.lr, alpha/Adam.lr */
    bool rmsprop;             /* its critic lr is RMSprop.lr */
} variant;

static const variant VARIANTS[] = {
    {"SacAlgorithm", "Pendulum-v1", "", true, true, false},
    {"Td3Algorithm", "Pendulum-v1", "", true, false, false},
    {"DdpgAlgorithm", "Pendulum-v1", "", true, false, false},
    {"DqnAlgorithm", "CartPole-v1", "", false, false, false},
    {"DqnAlgorithm", "CartPole-v1",
     "DqnAlgorithm.optimizer = 'rmsprop'\nRMSprop.alpha = 0.9\nRMSprop.centered = True\n", false,
     false, true},
};

/* The learning rate lr as configured for this run: scaled by (1 - K/N) as a float when
 * `scaled` (the constant run that the linear one must equal). */
static void put_lr(char *text, size_t cap, size_t *len, const char *name, double lr, bool scaled) {
    float at_k = (float)(lr * (1.0 - (double)K / (double)N));
    *len += (size_t)snprintf(text + *len, cap - *len, "%s = %.9g\n", name,
                             scaled ? (double)at_k : lr);
}

/* The algorithm's checkpoint section after iterations 0..K with the one train with
 * updates at K (two updates, so TD3's delayed actor steps too); *before: the same before
 * that train. schedule: 'linear' or 'constant'; scaled: the rates at K's. */
static void run(const variant *v, const char *schedule, bool scaled, ckpt_buf *after,
                ckpt_buf *before) {
    const calf_env_class *cls = calf_env_find(v->env);
    CHECK(cls != NULL);
    const algorithm_ops *ops = algorithm_find(v->algo);
    CHECK(ops != NULL);
    char text[2048];
    size_t len = (size_t)snprintf(
        text, sizeof text,
        "TrainerConfig.algorithm_ctor = @%s\n"
        "create_environment.env_name = '%s'\n"
        "create_environment.num_parallel_environments = %d\n"
        "TrainerConfig.unroll_length = 1\n"
        "TrainerConfig.num_iterations = %d\n"
        "TrainerConfig.num_updates_per_train_iter = 2\n"
        "TrainerConfig.mini_batch_size = 4\n"
        "TrainerConfig.initial_collect_steps = %d\n"
        "TrainerConfig.replay_buffer_length = 16\n"
        "Adam.lr_schedule = '%s'\n%s",
        v->algo, v->env, E, N, E * (K + 1), schedule, v->extra);
    if (v->actor) {
        len += (size_t)snprintf(text + len, sizeof text - len,
                                "actor/ActorDistributionNetwork.fc_layer_params = (8,)\n"
                                "critic/CriticNetwork.joint_fc_layer_params = (8,)\n");
        put_lr(text, sizeof text, &len, "actor/Adam.lr", ACTOR_LR, scaled);
    } else {
        len += (size_t)snprintf(text + len, sizeof text - len, "q/QNetwork.fc_layer_params = (8,)\n");
    }
    put_lr(text, sizeof text, &len, v->rmsprop ? "RMSprop.lr" : "critic/Adam.lr", CRITIC_LR, scaled);
    if (v->alpha) put_lr(text, sizeof text, &len, "alpha/Adam.lr", ALPHA_LR, scaled);
    CHECK(len < sizeof text);

    calf_config cfg;
    config_init(&cfg);
    calf_error err;
    CHECK_INT_EQ(calf_config_parse_string(&cfg, text, "test", &err), CALF_OK);
    CHECK_INT_EQ(ops->check(&cfg, &cls->spec, &err), CALF_OK);
    comm *c = NULL;
    CHECK_INT_EQ(comm_single(&c, NULL), CALF_OK);
    algo_setup s = {.cfg = &cfg, .spec = &cls->spec, .c = c, .E = E, .begin = 0, .count = E,
                    .T = 1, .seed = 7, .total_iterations = N};
    algorithm *a = NULL;
    CHECK_INT_EQ(ops->create(&s, &a, &err), CALF_OK);
    if (!a) {
        fprintf(stderr, "%s: %s\n", v->algo, err.msg);
        comm_finalize(c);
        return;
    }
    int od = cls->spec.obs_dim, A = cls->spec.action_dim;
    for (int t = 0; t <= K; t++) {
        float obs[E * 8], next[E * 8], u[E], rew[E];
        int act[E];
        uint8_t term[E] = {0}, trunc[E] = {0};
        for (int e = 0; e < E; e++) {
            for (int i = 0; i < od; i++) {
                obs[e * od + i] = (float)sin(1.3 * e + 0.7 * t + 0.9 * i);
                next[e * od + i] = (float)cos(0.4 * e + 1.1 * t + 0.5 * i);
            }
            rew[e] = (float)(-1.0 - 0.5 * cos(0.8 * e + t));
        }
        float sampled[E];
        ops->act(a, t, 0, obs, NULL, act, A > 0 ? sampled : NULL);
        for (int e = 0; e < E; e++) { /* the run's own transitions, alike in every run */
            act[e] = (e + t) % 2;
            u[e] = (float)(1.5 * sin(2.1 * e + 0.3 * t));
        }
        algo_step st = {.s = 0, .obs = obs, .act = act, .u = A > 0 ? u : NULL, .reward = rew,
                        .terminated = term, .truncated = trunc, .final_obs = next,
                        .next_obs = next};
        ops->observe(a, &st);
        if (t == K) ops->save(a, before);
        CHECK_INT_EQ(ops->train(a, t, &err), CALF_OK);
    }
    ops->save(a, after);
    ops->destroy(a);
    comm_finalize(c);
}

static bool same(const ckpt_buf *x, const ckpt_buf *y) {
    return x->len == y->len && memcmp(x->data, y->data, x->len) == 0;
}

static void one_variant(const variant *v) {
    ckpt_buf linear, constant_k, unscaled, before, skip;
    ckpt_buf_init(&linear), ckpt_buf_init(&constant_k), ckpt_buf_init(&unscaled);
    ckpt_buf_init(&before), ckpt_buf_init(&skip);
    run(v, "linear", false, &linear, &before);
    run(v, "constant", true, &constant_k, &skip);
    run(v, "constant", false, &unscaled, &skip);
    CHECK(!same(&before, &linear)); /* iteration K updated */
    bool ok = same(&linear, &constant_k);
    if (!ok) fprintf(stderr, "%s%s: linear at iteration %d of %d is not the constant rates at %d\n",
                     v->algo, v->rmsprop ? " (rmsprop)" : "", K, N, K);
    CHECK(ok);
    /* planted: the schedule ignored (every rate as configured) is caught by that check */
    CHECK(!same(&linear, &unscaled));
    ckpt_buf_free(&linear), ckpt_buf_free(&constant_k), ckpt_buf_free(&unscaled);
    ckpt_buf_free(&before), ckpt_buf_free(&skip);
}

int main(void) {
    for (size_t i = 0; i < sizeof VARIANTS / sizeof VARIANTS[0]; i++) one_variant(&VARIANTS[i]);
    return test_report("test_lr_schedule");
}
