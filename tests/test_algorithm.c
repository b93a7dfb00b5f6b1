/* test_algorithm.c: the algorithm registry (training/algorithm.c, training/registry.h)
 * and what is made from it: algorithm_ctor's choices, its error, --list-bindings,
 * algorithm_find, the registry check; and the public ids and digests
 * that an algorithm's own rows must leave as they are. */
#include <stddef.h>
#include <string.h>

#include "calf/config.h"
#include "training/algorithm.h"
#include "test_util.h"

/* The registry's names, each after `prefix`, joined by `sep`. */
static void registry_names(char *out, size_t cap, const char *prefix, const char *sep) {
    int n;
    const algorithm_entry *r = algorithm_registry(&n);
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%s%s", i ? sep : "", prefix, r[i].name);
}

static void test_choices_are_the_registry(void) {
    int n;
    const algorithm_entry *r = algorithm_registry(&n);
    CHECK(n >= 2);
    CHECK_STR_EQ(r[0].name, "PPOAlgorithm");
    CHECK_STR_EQ(r[1].name, "SacAlgorithm");
    CHECK(r[0].ops == &ppo_algorithm_ops && r[1].ops == &sac_algorithm_ops);
    char want[512];
    registry_names(want, sizeof want, "", "|");
    CHECK_STR_EQ(calf_binding_choices(CALF_CFG_ALGORITHM_CTOR), want);
    CHECK_STR_EQ(calf_binding_choices(CALF_CFG_ALGORITHM_CTOR), ALGORITHM_CHOICES);
    /* every entry is a config's choice and what algorithm_find gives for it */
    for (int i = 0; i < n; i++) {
        calf_config cfg;
        calf_error err;
        char param[300];
        config_init(&cfg);
        snprintf(param, sizeof param, "TrainerConfig.algorithm_ctor=@%s", r[i].name);
        CHECK_INT_EQ(calf_config_apply_param(&cfg, param, &err), CALF_OK);
        CHECK_STR_EQ(calf_config_string(&cfg, CALF_CFG_ALGORITHM_CTOR), r[i].name);
        CHECK(algorithm_find(r[i].name) == r[i].ops);
    }
    CHECK(algorithm_find("NoSuchAlgorithm") == NULL);
    CHECK(algorithm_find("ppoalgorithm") == NULL);
}

static void test_errors_name_the_registry(void) {
    calf_config cfg;
    calf_error err;
    char known[512], want[1024];
    registry_names(known, sizeof known, "@", ", ");
    config_init(&cfg);
    CHECK_INT_EQ(calf_config_parse_string(&cfg, "TrainerConfig.algorithm_ctor = @Zzzzzzzzzzzz\n",
                                          "t.gin", &err), CALF_EINVAL);
    snprintf(want, sizeof want,
             "t.gin:1: unknown reference '@Zzzzzzzzzzzz' for 'TrainerConfig.algorithm_ctor' "
             "(known: %s)", known);
    CHECK_STR_EQ(err.msg, want);
    CHECK_STR_EQ(known, "@PPOAlgorithm, @SacAlgorithm, @Td3Algorithm, @DqnAlgorithm, @DdpgAlgorithm");
    /* a near miss names the entry it is near */
    CHECK_INT_EQ(calf_config_apply_param(&cfg, "TrainerConfig.algorithm_ctor=@SacAlgoritm", &err),
                 CALF_EINVAL);
    CHECK_STR_EQ(err.msg, "--conf_param 'TrainerConfig.algorithm_ctor=@SacAlgoritm': unknown "
                          "reference '@SacAlgoritm' for 'TrainerConfig.algorithm_ctor' (did you "
                          "mean '@SacAlgorithm'?)");
    /* a string where a reference belongs is shown the registry's first entry */
    CHECK_INT_EQ(calf_config_apply_param(&cfg, "TrainerConfig.algorithm_ctor='x'", &err),
                 CALF_EINVAL);
    CHECK_STR_EQ(err.msg, "--conf_param 'TrainerConfig.algorithm_ctor='x'': "
                          "'TrainerConfig.algorithm_ctor' expects a reference like @PPOAlgorithm, "
                          "got the string 'x'");
}

/* --list-bindings: algorithm_ctor's choices are the registry's, and every row (the
 * algorithms' own ones too) is listed once. */
static void test_list_bindings(void) {
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (!f) return;
    calf_config_list_bindings(f);
    rewind(f);
    char choices[512], want[700], line[1024];
    registry_names(choices, sizeof choices, "@", "|");
    snprintf(want, sizeof want, "    reference one of %s, default @PPOAlgorithm\n", choices);
    int entries = 0, found_ctor = 0, after_ctor = 0;
    static char seen[CONFIG_CAPACITY];
    while (fgets(line, sizeof line, f)) {
        if (after_ctor) {
            CHECK_STR_EQ(line, want);
            found_ctor++;
            after_ctor = 0;
        }
        if (line[0] == ' ') continue;
        entries++;
        line[strcspn(line, "\n")] = '\0';
        int id = calf_binding_find(line);
        CHECK(id >= 0 && id < calf_binding_count());
        if (id >= 0 && id < CONFIG_CAPACITY) seen[id]++;
        after_ctor = id == CALF_CFG_ALGORITHM_CTOR;
    }
    fclose(f);
    CHECK_INT_EQ(found_ctor, 1);
    CHECK_INT_EQ(entries, calf_binding_count());
    for (int i = 0; i < calf_binding_count(); i++) CHECK_INT_EQ(seen[i], 1);
}

static void test_registry_check(void) {
    int n;
    const algorithm_entry *r = algorithm_registry(&n);
    calf_error err;
    CHECK_INT_EQ(algorithm_registry_check(r, n, &err), CALF_OK);

    algorithm_entry twice[3] = {r[0], r[1], {r[0].name, r[1].ops}};
    CHECK_INT_EQ(algorithm_registry_check(twice, 3, &err), CALF_EINVAL);
    CHECK_STR_EQ(err.msg, "algorithm registry entries 0 and 2 are both named 'PPOAlgorithm'");

    static const char *const bad_names[] = {"", "9Lives", "Sac Algorithm", "alf.Sac", "@Sac"};
    for (size_t k = 0; k < sizeof bad_names / sizeof bad_names[0]; k++) {
        algorithm_entry e[1] = {{bad_names[k], r[0].ops}};
        char want[300];
        snprintf(want, sizeof want,
                 "algorithm registry entry 0: '%s' is not a name a config can write as @Name",
                 bad_names[k]);
        CHECK_INT_EQ(algorithm_registry_check(e, 1, &err), CALF_EINVAL);
        CHECK_STR_EQ(err.msg, want);
    }
    algorithm_entry nameless[1] = {{NULL, r[0].ops}};
    CHECK_INT_EQ(algorithm_registry_check(nameless, 1, &err), CALF_EINVAL);

    algorithm_ops half = *r[0].ops;
    half.train = NULL;
    algorithm_entry halves[2] = {r[0], {"Half_2", &half}};
    CHECK_INT_EQ(algorithm_registry_check(halves, 2, &err), CALF_EINVAL);
    CHECK_STR_EQ(err.msg, "algorithm registry entry 'Half_2' has no train");
    half = *r[1].ops;
    half.start = NULL; /* the optional entries */
    half.check = NULL;
    half.check_memory = NULL;
    half.describe = NULL;
    half.report = NULL;
    half.export_c = NULL;
    CHECK_INT_EQ(algorithm_registry_check(halves, 2, &err), CALF_OK);
    algorithm_entry no_ops[1] = {{"NoOps", NULL}};
    CHECK_INT_EQ(algorithm_registry_check(no_ops, 1, &err), CALF_EINVAL);
    CHECK_STR_EQ(err.msg, "algorithm registry entry 'NoOps' has no ops");
}

/* An algorithm's own rows have ids after the public ones, and the public API reaches them
 * by name. */
static void test_own_rows_by_name(void) {
    static const struct { const char *name; int id; } own[] = {
        {"PPOLoss.gamma", CFG_PPO_GAMMA},
        {"PPOLoss.td_lambda", CFG_PPO_TD_LAMBDA},
        {"PPOLoss.importance_ratio_clipping", CFG_PPO_RATIO_CLIPPING},
        {"PPOLoss.td_loss_weight", CFG_PPO_TD_LOSS_WEIGHT},
        {"PPOLoss.entropy_regularization", CFG_PPO_ENTROPY_REG},
        {"PPOLoss.normalize_advantages", CFG_PPO_NORMALIZE_ADVANTAGES},
        {"PPOLoss.advantage_normalization_scope", CFG_PPO_ADV_NORM_SCOPE},
        {"PPOLoss.value_clipping", CFG_PPO_VALUE_CLIPPING},
        {"ActorDistributionNetwork.lstm_hidden_size", CFG_PPO_ACTOR_LSTM},
        {"ActorDistributionNetwork.gru_hidden_size", CFG_PPO_ACTOR_GRU},
        {"ValueNetwork.lstm_hidden_size", CFG_PPO_VALUE_LSTM},
        {"ValueNetwork.gru_hidden_size", CFG_PPO_VALUE_GRU},
        {"ActorDistributionNetwork.pre_fc_layer_params", CFG_PPO_ACTOR_PRE_FC},
        {"ValueNetwork.pre_fc_layer_params", CFG_PPO_VALUE_PRE_FC},
        {"SacAlgorithm.target_update_tau", CFG_SAC_TAU},
        {"SacAlgorithm.target_update_period", CFG_SAC_TARGET_PERIOD},
        {"SacAlgorithm.initial_log_alpha", CFG_SAC_INITIAL_LOG_ALPHA},
        {"SacAlgorithm.target_entropy", CFG_SAC_TARGET_ENTROPY},
        {"Td3Algorithm.target_update_tau", CFG_TD3_TAU},
        {"Td3Algorithm.policy_delay", CFG_TD3_POLICY_DELAY},
        {"Td3Algorithm.policy_noise", CFG_TD3_POLICY_NOISE},
        {"Td3Algorithm.noise_clip", CFG_TD3_NOISE_CLIP},
        {"Td3Algorithm.exploration_noise", CFG_TD3_EXPLORATION_NOISE},
        {"q/QNetwork.fc_layer_params", CFG_DQN_Q_LAYERS},
        {"q/QNetwork.activation", CFG_DQN_Q_ACTIVATION},
        {"q/QNetwork.conv_layer_params", CFG_DQN_Q_CONV_LAYERS},
        {"DqnAlgorithm.target_update_period", CFG_DQN_TARGET_PERIOD},
        {"DqnAlgorithm.target_update_tau", CFG_DQN_TAU},
        {"DqnAlgorithm.start_epsilon", CFG_DQN_START_EPSILON},
        {"DqnAlgorithm.end_epsilon", CFG_DQN_END_EPSILON},
        {"DqnAlgorithm.exploration_fraction", CFG_DQN_EXPLORATION_FRACTION},
        {"DqnAlgorithm.td_loss", CFG_DQN_TD_LOSS},
        {"DqnAlgorithm.optimizer", CFG_DQN_OPTIMIZER},
        {"RMSprop.lr", CFG_DQN_RMSPROP_LR},
        {"RMSprop.alpha", CFG_DQN_RMSPROP_ALPHA},
        {"RMSprop.eps", CFG_DQN_RMSPROP_EPS},
        {"RMSprop.centered", CFG_DQN_RMSPROP_CENTERED},
        {"DqnAlgorithm.epsilon_decay_after_collect", CFG_DQN_DECAY_AFTER_COLLECT},
        {"DdpgAlgorithm.target_update_tau", CFG_DDPG_TAU},
        {"DdpgAlgorithm.target_update_period", CFG_DDPG_TARGET_PERIOD},
        {"DdpgAlgorithm.exploration_noise", CFG_DDPG_NOISE},
        {"DdpgAlgorithm.ou_stddev", CFG_DDPG_OU_STDDEV},
        {"DdpgAlgorithm.ou_damping", CFG_DDPG_OU_DAMPING},
    };
    size_t n = sizeof own / sizeof own[0];
    CHECK_INT_EQ(calf_binding_count(), CALF_CFG_NUM_BINDINGS + (int)n);
    CHECK_INT_EQ(calf_binding_count(), CFG_NUM_ROWS);
    for (size_t k = 0; k < n; k++) {
        CHECK_INT_EQ(calf_binding_find(own[k].name), own[k].id);
        CHECK(own[k].id >= CALF_CFG_NUM_BINDINGS && own[k].id < calf_binding_count());
        CHECK_STR_EQ(calf_binding_name(own[k].id), own[k].name);
    }
    calf_config cfg;
    calf_error err;
    config_init(&cfg);
    CHECK_INT_EQ(calf_config_apply_param(&cfg, "SacAlgorithm.target_update_tau=0.25", &err), CALF_OK);
    int tau = calf_binding_find("SacAlgorithm.target_update_tau");
    CHECK_NEAR(calf_config_float(&cfg, tau), 0.25, 0);
    CHECK_STR_EQ(calf_config_origin(&cfg, tau), "--conf_param");
}

/* What a program compiled against an older header depends on: the public ids (rows are
 * only appended; calf_config is opaque since 0.3, so no layout), and the digest of a
 * config, which every checkpoint carries (the values are those calf wrote before
 * algorithms had rows of their own). */
static void test_abi_and_digest(void) {
    static const char *const public_rows[] = {
        "create_environment.env_name",
        "create_environment.num_parallel_environments",
        "TrainerConfig.random_seed",
        "TrainerConfig.num_iterations",
        "TrainerConfig.num_env_steps",
        "TrainerConfig.unroll_length",
        "TrainerConfig.mini_batch_size",
        "TrainerConfig.num_updates_per_train_iter",
        "TrainerConfig.num_checkpoints",
        "TrainerConfig.evaluate",
        "TrainerConfig.eval_interval",
        "TrainerConfig.num_eval_episodes",
        "TrainerConfig.summary_interval",
        "TrainerConfig.summaries_flush_secs",
        "TrainerConfig.summarize_grads_and_vars",
        "TrainerConfig.ddp_paras_check_interval",
        "TrainerConfig.collective_timeout_secs",
        "TrainerConfig.algorithm_ctor",
        "TrainerConfig.initial_collect_steps",
        "TrainerConfig.mini_batch_length",
        "TrainerConfig.replay_buffer_length",
        "TrainerConfig.normalize_observations",
        "ObservationNormalizer.clipping",
        "OneStepTDLoss.gamma",
        "Adam.lr",
        "Adam.betas",
        "Adam.eps",
        "Adam.gradient_clipping",
        "Adam.lr_schedule",
        "actor/Adam.lr",
        "critic/Adam.lr",
        "alpha/Adam.lr",
        "ActorDistributionNetwork.fc_layer_params",
        "ActorDistributionNetwork.activation",
        "ActorDistributionNetwork.init_log_std",
        "actor/ActorDistributionNetwork.fc_layer_params",
        "actor/ActorDistributionNetwork.activation",
        "ValueNetwork.fc_layer_params",
        "ValueNetwork.activation",
        "critic/CriticNetwork.joint_fc_layer_params",
        "critic/CriticNetwork.activation",
    };
    size_t n = sizeof public_rows / sizeof public_rows[0];
    CHECK(CALF_CFG_NUM_BINDINGS >= (int)n);
    for (size_t i = 0; i < n; i++) CHECK_STR_EQ(calf_binding_name((calf_binding_id)i), public_rows[i]);
    CHECK_INT_EQ(CALF_CFG_ALGORITHM_CTOR, 17);
    CHECK_INT_EQ(CALF_CFG_TD_GAMMA, 23);
    calf_error err;
    calf_config *cfg = calf_config_new(&err);
    CHECK(cfg != NULL);
    CHECK(calf_config_digest(cfg) == 0x7ae10aa87a17c343ULL);
    /* rows added later (CALF_BINDING_DIGEST_SET) enter the digest only away from their
     * default: set to it, the digest above holds; set elsewhere, it changes */
    CHECK_INT_EQ(calf_config_apply_param(cfg, "ValueNetwork.lstm_hidden_size=0", &err), CALF_OK);
    CHECK(calf_config_digest(cfg) == 0x7ae10aa87a17c343ULL);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "ValueNetwork.lstm_hidden_size=8", &err), CALF_OK);
    CHECK(calf_config_digest(cfg) != 0x7ae10aa87a17c343ULL);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "ValueNetwork.lstm_hidden_size=0", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.algorithm_ctor=@SacAlgorithm", &err),
                 CALF_OK);
    /* SAC with the values it had before it had defaults of its own (calf's, PPO-shaped):
     * the digest hashes values, never where they came from */
    static const char *const before[] = {
        "create_environment.num_parallel_environments=64", "TrainerConfig.unroll_length=32",
        "TrainerConfig.num_updates_per_train_iter=4", "TrainerConfig.mini_batch_size=512",
        "TrainerConfig.initial_collect_steps=0", "TrainerConfig.replay_buffer_length=100000",
        "actor/Adam.lr=0.001", "critic/Adam.lr=0.001", "alpha/Adam.lr=0.001"};
    for (size_t k = 0; k < sizeof before / sizeof before[0]; k++)
        CHECK_INT_EQ(calf_config_apply_param(cfg, before[k], &err), CALF_OK);
    CHECK(calf_config_digest(cfg) == 0x87399da2800ba61fULL);
    /* PPO's and SAC's rows are in every config's digest (in_every_digest) */
    uint64_t sac = calf_config_digest(cfg);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "PPOLoss.gamma=0.5", &err), CALF_OK);
    CHECK(calf_config_digest(cfg) != sac);
    calf_config_free(cfg);
}

/* Rows flagged CALF_BINDING_DIGEST_SET (DQN's optimizer rows, added after DQN
 * checkpoints existed) enter the digest only when not at their own default: a DQN config
 * has the digest it had before them (the value calf computed then), set to their
 * defaults explicitly too, and another once one of them changes. */
static void test_digest_if_changed(void) {
    calf_error err;
    calf_config *cfg = calf_config_new(&err);
    CHECK(cfg != NULL);
    if (!cfg) return;
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.algorithm_ctor=@DqnAlgorithm", &err),
                 CALF_OK);
    const uint64_t before = 0x0c9ad3d6b411608bULL; /* calf 1c0475d, before the rows */
    CHECK(calf_config_digest(cfg) == before);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "RMSprop.lr=0.01", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "DqnAlgorithm.optimizer='adam'", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "DqnAlgorithm.epsilon_decay_after_collect=False",
                                         &err), CALF_OK);
    CHECK(calf_config_digest(cfg) == before);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "DqnAlgorithm.epsilon_decay_after_collect=True",
                                         &err), CALF_OK);
    CHECK(calf_config_digest(cfg) != before);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "DqnAlgorithm.epsilon_decay_after_collect=False",
                                         &err), CALF_OK);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "DqnAlgorithm.optimizer='rmsprop'", &err), CALF_OK);
    uint64_t rmsprop = calf_config_digest(cfg);
    CHECK(rmsprop != before);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "RMSprop.lr=0.02", &err), CALF_OK);
    CHECK(calf_config_digest(cfg) != rmsprop);
    calf_config_free(cfg);
}

/* An algorithm's defaults (registry.h): a config that names only the algorithm trains
 * with them; whatever the config sets keeps its value, before or after the choice, and
 * directly or through the unscoped row; the dump says where each value came from; the
 * digest sees only values. */
static void test_algorithm_defaults(void) {
    calf_error err;
    calf_config *cfg = calf_config_new(&err), *same = calf_config_new(&err);
    CHECK(cfg != NULL && same != NULL);
    if (!cfg || !same) return;
    /* PPO's are calf's own */
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_NUM_ENVS), 64);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_UNROLL_LENGTH), 32);
    CHECK_INT_EQ(calf_config_parse_string(cfg, "TrainerConfig.unroll_length = 3\n"
                                               "TrainerConfig.algorithm_ctor = @SacAlgorithm\n",
                                          "sac.gin", &err), CALF_OK);
    /* CleanRL's sac_continuous_action.py, where the config is silent */
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_NUM_ENVS), 1);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_NUM_UPDATES), 1);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_MINI_BATCH_SIZE), 256);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_INITIAL_COLLECT_STEPS), 5000);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_REPLAY_BUFFER_LENGTH), 1000000);
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_ACTOR_LR), 3e-4, 0);
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_CRITIC_LR), 1e-3, 0);
    CHECK_STR_EQ(calf_config_origin(cfg, CALF_CFG_NUM_ENVS), "");
    /* set before the choice: kept */
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_UNROLL_LENGTH), 3);
    /* set after it, and the unscoped Adam.lr over SAC's actor/Adam.lr */
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.mini_batch_size=64", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "Adam.lr=0.01", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_MINI_BATCH_SIZE), 64);
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_ACTOR_LR), 0.01, 0);
    /* the dump: the file's line, the algorithm's default, calf's (no comment) */
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (f) {
        CHECK_INT_EQ(calf_config_write(cfg, f, NULL), CALF_OK);
        rewind(f);
        char text[16384];
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = '\0';
        fclose(f);
        CHECK(strstr(text, "\nTrainerConfig.unroll_length = 3  # sac.gin:1\n") != NULL);
        CHECK(strstr(text, "\ncreate_environment.num_parallel_environments = 1  # SacAlgorithm's "
                           "default\n") != NULL);
        CHECK(strstr(text, "\nTrainerConfig.initial_collect_steps = 5000  # SacAlgorithm's "
                           "default\n") != NULL);
        CHECK(strstr(text, "\nTrainerConfig.random_seed = 0\n") != NULL);
        CHECK(strstr(text, "\nactor/Adam.lr = 0.01  # from Adam.lr at --conf_param\n") != NULL);
        /* the same values written out are the same digest */
        CHECK_INT_EQ(calf_config_parse_string(same,
                                              "TrainerConfig.algorithm_ctor = @SacAlgorithm\n"
                                              "create_environment.num_parallel_environments = 1\n"
                                              "TrainerConfig.unroll_length = 3\n"
                                              "TrainerConfig.num_updates_per_train_iter = 1\n"
                                              "TrainerConfig.mini_batch_size = 64\n"
                                              "TrainerConfig.initial_collect_steps = 5000\n"
                                              "TrainerConfig.replay_buffer_length = 1000000\n"
                                              "Adam.lr = 0.01\n",
                                              "explicit.gin", &err), CALF_OK);
        CHECK(calf_config_digest(same) == calf_config_digest(cfg));
    }
    /* choosing PPO again: calf's defaults where nothing was set */
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.algorithm_ctor=@PPOAlgorithm", &err),
                 CALF_OK);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_NUM_ENVS), 64);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_NUM_UPDATES), 4);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_MINI_BATCH_SIZE), 64);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.algorithm_ctor=@Td3Algorithm", &err),
                 CALF_OK);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_INITIAL_COLLECT_STEPS), 25000);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_MINI_BATCH_SIZE), 64); /* set above: kept */
    /* each algorithm's own: DQN's train_frequency 10 is its unroll */
    config_init(cfg);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.algorithm_ctor=@DqnAlgorithm", &err),
                 CALF_OK);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_NUM_ENVS), 1);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_UNROLL_LENGTH), 10);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_INITIAL_COLLECT_STEPS), 10000);
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_CRITIC_LR), 2.5e-4, 0);
    calf_config_free(same);
    calf_config_free(cfg);

    /* --list-bindings names them beside calf's */
    f = tmpfile();
    CHECK(f != NULL);
    if (!f) return;
    calf_config_list_bindings(f);
    rewind(f);
    char line[1024];
    int found = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "    int in [1, 1048576], default 64; @SacAlgorithm: 1, @Td3Algorithm: 1, "
                         "@DqnAlgorithm: 1, @DdpgAlgorithm: 1\n") == line)
            found++;
    fclose(f);
    CHECK_INT_EQ(found, 1);
}

int main(void) {
    test_choices_are_the_registry();
    test_errors_name_the_registry();
    test_list_bindings();
    test_registry_check();
    test_own_rows_by_name();
    test_abi_and_digest();
    test_digest_if_changed();
    test_algorithm_defaults();
    return test_report("test_algorithm");
}
