/* test_config.c: gin parsing, the binding table, errors with file:line, the operative
 * dump, the digest, and the per-process split. */
#include <sys/stat.h>
#include <unistd.h>

#include "base/config.h"
#include "calf/config.h"
#include "test_util.h"
#include "training/registry.h"

static char tmpdir[256];

static void write_file(const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); exit(1); }
    fputs(text, f);
    fclose(f);
}

/* A config at its defaults, from the public constructor. */
static calf_config *new_config(void) {
    calf_error err;
    calf_config *cfg = calf_config_new(&err);
    if (!cfg) { fprintf(stderr, "calf_config_new: %s\n", err.msg); exit(1); }
    return cfg;
}

static int parse(calf_config *cfg, const char *name, calf_error *err) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    config_init(cfg);
    return calf_config_parse_file(cfg, path, err);
}

/* the error message must end with the expected text after "file:line: " */
static void check_error(const char *name, const char *text, int line, const char *expect) {
    calf_config *cfg = new_config();
    calf_error err;
    write_file(name, text);
    int rc = parse(cfg, name, &err);
    CHECK_INT_EQ(rc, CALF_EINVAL);
    char want[1024];
    snprintf(want, sizeof want, "%s/%s:%d: %s", tmpdir, name, line, expect);
    CHECK_STR_EQ(err.msg, want);
    calf_config_free(cfg);
}

static void test_defaults(void) {
    calf_config *cfg = new_config();
    CHECK_STR_EQ(calf_config_string(cfg, CALF_CFG_ENV_NAME), "CartPole-v1");
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_NUM_ENVS), 64);
    CHECK_NEAR(calf_config_float(cfg, CFG_PPO_GAMMA), 0.99, 0);
    CHECK(calf_config_bool(cfg, CFG_PPO_NORMALIZE_ADVANTAGES));
    /* tuples through the public accessors, and as the library reads them */
    CHECK_INT_EQ(calf_config_tuple_len(cfg, CALF_CFG_ADAM_BETAS), 2);
    CHECK_NEAR(calf_config_tuple_float(cfg, CALF_CFG_ADAM_BETAS, 1), 0.999, 0);
    CHECK_INT_EQ(calf_config_tuple_len(cfg, CALF_CFG_ACTOR_LAYERS), 2);
    CHECK_INT_EQ(calf_config_tuple_int(cfg, CALF_CFG_ACTOR_LAYERS, 0), 64);
    const config_value *layers = config_get(cfg, CALF_CFG_ACTOR_LAYERS);
    CHECK_INT_EQ(layers->n, 2);
    CHECK_INT_EQ(layers->ti[1], 64);
    /* a scoped tuple row that is not set reads its fallback's value once that is set */
    CHECK_INT_EQ(calf_config_tuple_int(cfg, CALF_CFG_SAC_ACTOR_LAYERS, 0), 100);
    calf_error err;
    CHECK_INT_EQ(calf_config_apply_param(cfg, "ActorDistributionNetwork.fc_layer_params=(8, 9, 10)",
                                         &err), CALF_OK);
    CHECK_INT_EQ(calf_config_tuple_len(cfg, CALF_CFG_SAC_ACTOR_LAYERS), 3);
    CHECK_INT_EQ(calf_config_tuple_int(cfg, CALF_CFG_SAC_ACTOR_LAYERS, 2), 10);
    CHECK_INT_EQ(calf_binding_find("TrainerConfig.num_iterations"), CALF_CFG_NUM_ITERATIONS);
    CHECK_INT_EQ(calf_binding_find("TrainerConfig.nope"), -1);
    /* whose row, and the default each algorithm gives it (calf's own rows: none's) */
    CHECK(calf_binding_algorithm(CALF_CFG_UNROLL_LENGTH) == NULL);
    CHECK(strcmp(calf_binding_algorithm(calf_binding_find("PPOLoss.gamma")), "PPOAlgorithm") == 0);
    CHECK(strcmp(calf_binding_algorithm(calf_binding_find("Td3Algorithm.policy_delay")),
                 "Td3Algorithm") == 0);
    CHECK(strcmp(calf_binding_algorithm(calf_binding_find("q/QNetwork.fc_layer_params")),
                 "DqnAlgorithm") == 0);
    CHECK(strcmp(calf_binding_default(CALF_CFG_UNROLL_LENGTH, NULL), "32") == 0);
    CHECK(strcmp(calf_binding_default(CALF_CFG_UNROLL_LENGTH, "PPOAlgorithm"), "32") == 0);
    CHECK(strcmp(calf_binding_default(CALF_CFG_UNROLL_LENGTH, "DqnAlgorithm"), "10") == 0);
    CHECK(strcmp(calf_binding_default(CALF_CFG_ACTOR_LR, "SacAlgorithm"), "3e-4") == 0);
    CHECK(strcmp(calf_binding_default(CALF_CFG_ACTOR_LR, "DqnAlgorithm"), "0.001") == 0);
    CHECK(calf_binding_default(CALF_CFG_UNROLL_LENGTH, "NoSuchAlgorithm") == NULL);
    calf_config_free(cfg);
    calf_config_free(NULL);
}

static void test_parse_values(void) {
    calf_config *cfg = new_config();
    calf_error err;
    write_file("ok.gin",
               "# a comment\n"
               "create_environment.env_name = \"Pendulum-v1\"   # trailing comment\n"
               "create_environment.num_parallel_environments = 65\n"
               "TrainerConfig.num_iterations = 1_000\n"
               "PPOLoss.gamma = 0.5\n"
               "PPOLoss.td_lambda = 1\n"                 /* int literal for a float binding */
               "Adam.lr = 3e-4\n"
               "PPOLoss.normalize_advantages = False\n"
               "ActorDistributionNetwork.fc_layer_params = (\n   32,\n   16,\n)\n"
               "ValueNetwork.fc_layer_params = (8,)\n"
               "Adam.betas = (0.8, 0.99)\n"
               "ValueNetwork.activation = 'relu'\n"
               "TrainerConfig.num_iterations = 7\n");    /* later binding wins */
    CHECK_INT_EQ(parse(cfg, "ok.gin", &err), CALF_OK);
    CHECK_STR_EQ(calf_config_string(cfg, CALF_CFG_ENV_NAME), "Pendulum-v1");
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_NUM_ENVS), 65);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_NUM_ITERATIONS), 7);
    CHECK_NEAR(calf_config_float(cfg, CFG_PPO_GAMMA), 0.5, 0);
    CHECK_NEAR(calf_config_float(cfg, CFG_PPO_TD_LAMBDA), 1.0, 0);
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_ADAM_LR), 3e-4, 0);
    CHECK(!calf_config_bool(cfg, CFG_PPO_NORMALIZE_ADVANTAGES));
    const config_value *a = config_get(cfg, CALF_CFG_ACTOR_LAYERS);
    CHECK_INT_EQ(a->n, 2);
    CHECK_INT_EQ(a->ti[0], 32);
    CHECK_INT_EQ(a->ti[1], 16);
    CHECK_INT_EQ(config_get(cfg, CALF_CFG_VALUE_LAYERS)->n, 1);
    CHECK_INT_EQ(config_get(cfg, CALF_CFG_VALUE_LAYERS)->ti[0], 8);
    CHECK_NEAR(config_get(cfg, CALF_CFG_ADAM_BETAS)->tf[0], 0.8, 0);
    CHECK_STR_EQ(calf_config_string(cfg, CALF_CFG_VALUE_ACTIVATION), "relu");
    char origin[512];
    snprintf(origin, sizeof origin, "%s/ok.gin:16", tmpdir);
    CHECK_STR_EQ(cfg->origin[CALF_CFG_NUM_ITERATIONS], origin);

    /* --conf_param overrides the file and records its origin */
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.num_iterations=12", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_NUM_ITERATIONS), 12);
    CHECK_STR_EQ(cfg->origin[CALF_CFG_NUM_ITERATIONS], "--conf_param");
    CHECK_INT_EQ(calf_config_apply_param(cfg, " PPOLoss.gamma = 0.25 ", &err), CALF_OK);
    CHECK_NEAR(calf_config_float(cfg, CFG_PPO_GAMMA), 0.25, 0);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.num_iteration=3", &err), CALF_EINVAL);
    CHECK_STR_EQ(err.msg, "--conf_param 'TrainerConfig.num_iteration=3': unknown binding "
                          "'TrainerConfig.num_iteration' (did you mean 'TrainerConfig.num_iterations'?)");
    CHECK_INT_EQ(calf_config_apply_param(cfg, "PPOLoss.gamma=0.5 Adam.lr=0.1", &err), CALF_EINVAL);
    CHECK_STR_EQ(err.msg, "--conf_param 'PPOLoss.gamma=0.5 Adam.lr=0.1': expected one "
                          "'Scope.param=value', found more after the value");
    CHECK_INT_EQ(calf_config_apply_param(cfg, "include='x.gin'", &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "include is not allowed here") != NULL);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "PPOLoss.gamma", &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "expected 'Scope.param=value'") != NULL);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_NUM_ITERATIONS), 12);
    calf_config_free(cfg);
}

static void test_errors(void) {
    check_error("typo.gin", "# first line\nTrainerConfig.num_iteration = 3\n", 2,
                "unknown binding 'TrainerConfig.num_iteration' (did you mean "
                "'TrainerConfig.num_iterations'?)");
    check_error("far.gin", "Foo.bar = 3\n", 1,
                "unknown binding 'Foo.bar' (see calf train --list-bindings)");
    check_error("type.gin", "\n\nTrainerConfig.unroll_length = 3.5\n", 3,
                "'TrainerConfig.unroll_length' expects an int, got '3.5'");
    check_error("type2.gin", "create_environment.env_name = CartPole\n", 1,
                "'create_environment.env_name' expects a quoted string, got 'CartPole'");
    check_error("bool.gin", "TrainerConfig.evaluate = true\n", 1,
                "'TrainerConfig.evaluate' expects True or False, got 'true'");
    check_error("bounds.gin", "PPOLoss.gamma = 1.5\n", 1,
                "'PPOLoss.gamma': value 1.5 out of bounds [0, 1]");
    check_error("bounds2.gin", "create_environment.num_parallel_environments = 0\n", 1,
                "'create_environment.num_parallel_environments': value 0 out of bounds [1, 1048576]");
    check_error("syntax.gin", "TrainerConfig.unroll_length 32\n", 1,
                "expected '=' after 'TrainerConfig.unroll_length', got '32'");
    check_error("missing.gin", "TrainerConfig.unroll_length =\n", 2,
                "missing value for 'TrainerConfig.unroll_length'");
    check_error("tuple.gin", "ValueNetwork.fc_layer_params = (64, 64\n", 2,
                "'ValueNetwork.fc_layer_params': expected ',' or ')' in the tuple, got 'end of file'");
    check_error("betas.gin", "Adam.betas = (0.9,)\n", 1,
                "'Adam.betas' expects a tuple of 2 elements, got 1");
    check_error("choice.gin", "ValueNetwork.activation = 'sigmoid'\n", 1,
                "'ValueNetwork.activation' must be one of tanh|relu, got 'sigmoid'");
    check_error("str.gin", "create_environment.env_name = 'CartPole\n", 1,
                "'create_environment.env_name': cannot read value starting at ''CartPole'");
    check_error("noscope.gin", "actor/lr = 0.9\n", 1,
                "'actor/lr' is neither a binding ('Scope.param') nor a macro name");
    check_error("ref.gin", "create_environment.env_name = @make_env\n", 1,
                "'create_environment.env_name' expects a quoted string, got '@make_env'");
    check_error("at.gin", "create_environment.env_name = @ x\n", 1,
                "'create_environment.env_name': cannot read value starting at '@'");
    check_error("deep.gin", "ValueNetwork.fc_layer_params = (8, 8, 8, 8, 8, 8, 8, 8)\n", 1,
                "'ValueNetwork.fc_layer_params' takes at most 7 elements, got 8");
}

/* ALF's conv_layer_params: a tuple of (filters, kernel, stride[, padding]) tuples, padding
 * 0 when left out, written back with all four; bounds per element; the row enters the
 * digest only when set to other than its default (CALF_BINDING_DIGEST_SET). */
static void test_conv_layers(void) {
    calf_error err;
    calf_config *cfg = calf_config_new(&err);
    CHECK(cfg != NULL);
    uint64_t d_default = calf_config_digest(cfg);
    CHECK_INT_EQ(calf_config_tuple_len(cfg, CALF_CFG_ACTOR_CONV_LAYERS), 0);
    CHECK_INT_EQ(calf_config_parse_string(cfg,
                                          "ActorDistributionNetwork.conv_layer_params = ()\n"
                                          "EncodingNetwork.uint8_scale = None\n",
                                          "same.gin", &err),
                 CALF_OK);
    CHECK(calf_config_digest(cfg) == d_default); /* set, but to the defaults */
    CHECK_INT_EQ(calf_config_parse_string(cfg,
                                          "ActorDistributionNetwork.conv_layer_params = "
                                          "((16, 3, 1), (32, 4, 2, 1),)\n",
                                          "conv.gin", &err),
                 CALF_OK);
    CHECK(calf_config_digest(cfg) != d_default);
    CHECK_INT_EQ(calf_config_tuple_len(cfg, CALF_CFG_ACTOR_CONV_LAYERS), 2);
    const int64_t want[8] = {16, 3, 1, 0, 32, 4, 2, 1};
    for (int k = 0; k < 8; k++)
        CHECK_INT_EQ(calf_config_tuple_int(cfg, CALF_CFG_ACTOR_CONV_LAYERS, k), want[k]);
    char buf[200];
    calf_config_format_value(cfg, CALF_CFG_ACTOR_CONV_LAYERS, buf, sizeof buf);
    CHECK_STR_EQ(buf, "((16, 3, 1, 0), (32, 4, 2, 1))");
    /* one layer keeps its trailing comma; the text reads back as the same value */
    calf_config *back = calf_config_new(&err);
    CHECK_INT_EQ(calf_config_parse_string(back, "ValueNetwork.conv_layer_params = ((8, 2, 1),)\n",
                                          "one.gin", &err),
                 CALF_OK);
    calf_config_format_value(back, CALF_CFG_VALUE_CONV_LAYERS, buf, sizeof buf);
    CHECK_STR_EQ(buf, "((8, 2, 1, 0),)");
    char text[300];
    snprintf(text, sizeof text, "ValueNetwork.conv_layer_params = %s\n", buf);
    CHECK_INT_EQ(calf_config_parse_string(cfg, text, "again.gin", &err), CALF_OK);
    calf_config_format_value(cfg, CALF_CFG_VALUE_CONV_LAYERS, text, sizeof text);
    CHECK_STR_EQ(text, buf);
    calf_config_free(back);
    calf_config_free(cfg);
    check_error("conv1.gin", "ActorDistributionNetwork.conv_layer_params = (16, 3, 1)\n", 1,
                "'ActorDistributionNetwork.conv_layer_params': layer 1 expects (filters, kernel, "
                "stride[, padding]), got '16'");
    check_error("conv2.gin", "ActorDistributionNetwork.conv_layer_params = ((16, 3),)\n", 1,
                "'ActorDistributionNetwork.conv_layer_params': layer 1 has 2 numbers; it needs "
                "(filters, kernel, stride[, padding])");
    check_error("conv3.gin", "ValueNetwork.conv_layer_params = ((16, 3, 1, 0, 5),)\n", 1,
                "'ValueNetwork.conv_layer_params': layer 1 has more than 4 numbers (filters, kernel, "
                "stride, padding)");
    check_error("conv4.gin", "ValueNetwork.conv_layer_params = ((16, 3, 1), (8, 0, 1))\n", 1,
                "'ValueNetwork.conv_layer_params': layer 2's kernel 0 out of bounds [1, 1024]");
    check_error("conv5.gin", "ValueNetwork.conv_layer_params = ((16, 3, 1, -1),)\n", 1,
                "'ValueNetwork.conv_layer_params': layer 1's padding -1 out of bounds [0, 1024]");
    check_error("conv6.gin",
                "ValueNetwork.conv_layer_params = ((1, 1, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1), "
                "(1, 1, 1))\n",
                1, "'ValueNetwork.conv_layer_params' takes at most 4 conv layers");
    check_error("conv7.gin", "ValueNetwork.conv_layer_params = ((16, 3, 1) (8, 2, 1))\n", 1,
                "'ValueNetwork.conv_layer_params': expected ',' or ')' after conv layer 1, got '('");
}

static void test_includes(void) {
    calf_config *cfg = new_config();
    calf_error err;
    char sub[512];
    snprintf(sub, sizeof sub, "%s/sub", tmpdir);
    CHECK(mkdir(sub, 0755) == 0 || access(sub, F_OK) == 0);
    write_file("sub/base.gin", "TrainerConfig.unroll_length = 16\nPPOLoss.gamma = 0.9\n");
    write_file("sub/top.gin", "include 'base.gin'\nPPOLoss.gamma = 0.8\n");
    CHECK_INT_EQ(parse(cfg, "sub/top.gin", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_UNROLL_LENGTH), 16);
    CHECK_NEAR(calf_config_float(cfg, CFG_PPO_GAMMA), 0.8, 0);

    write_file("sub/a.gin", "include 'b.gin'\n");
    write_file("sub/b.gin", "PPOLoss.gamma = 0.7\ninclude \"a.gin\"\n");
    CHECK_INT_EQ(parse(cfg, "sub/a.gin", &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "sub/b.gin:2: include cycle") != NULL);

    write_file("sub/self.gin", "include 'self.gin'\n");
    CHECK_INT_EQ(parse(cfg, "sub/self.gin", &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "include cycle") != NULL);

    write_file("inc_missing.gin", "\ninclude 'nothere.gin'\n");
    CHECK_INT_EQ(parse(cfg, "inc_missing.gin", &err), CALF_EIO);
    CHECK(strstr(err.msg, "inc_missing.gin:2: cannot include: ") != NULL);
    CHECK(strstr(err.msg, "nothere.gin: cannot open: No such file or directory") != NULL);

    CHECK_INT_EQ(parse(cfg, "does-not-exist.gin", &err), CALF_EIO);
    CHECK(strstr(err.msg, "does-not-exist.gin: cannot open") != NULL);

    /* A name too long to hold is an error, not a cut name: cut to 299 characters, this
     * one ("<200 x's>/<99 y's>.gin") would name "<200 x's>/<98 y's>", which exists. */
    char dir[256], leaf[128], path[1024], text[1024];
    memset(dir, 'x', 200);
    dir[200] = '\0';
    memset(leaf, 'y', 99);
    leaf[99] = '\0';
    snprintf(path, sizeof path, "%s/sub/%s", tmpdir, dir);
    CHECK(mkdir(path, 0755) == 0 || access(path, F_OK) == 0);
    snprintf(path, sizeof path, "sub/%s/%.98s", dir, leaf);
    write_file(path, "PPOLoss.gamma = 0.5\n");
    snprintf(text, sizeof text, "PPOLoss.gamma = 0.8\ninclude '%s/%s.gin'\n", dir, leaf);
    write_file("sub/longinc.gin", text);
    CHECK_INT_EQ(parse(cfg, "sub/longinc.gin", &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "sub/longinc.gin:2: include name too long (304 characters") != NULL);
    calf_config_free(cfg);
}

static void test_dump_and_digest(void) {
    calf_config *cfg = new_config();
    calf_config *back = new_config();
    calf_error err;
    config_init(cfg);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "PPOLoss.gamma=0.123456789012345", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "ValueNetwork.fc_layer_params=(7,)", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "Adam.lr=1", &err), CALF_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/operative.gin", tmpdir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    CHECK_INT_EQ(calf_config_write(cfg, f, "operative config\nsecond line"), CALF_OK);
    fclose(f);
    /* the dump is valid gin and round-trips every value exactly */
    config_init(back);
    CHECK_INT_EQ(calf_config_parse_file(back, path, &err), CALF_OK);
    for (int i = 0; i < calf_binding_count(); i++) {
        char a[800], b[800];
        calf_config_format_value(cfg, (calf_binding_id)i, a, sizeof a);
        calf_config_format_value(back, (calf_binding_id)i, b, sizeof b);
        CHECK_STR_EQ(a, b);
    }
    CHECK(calf_config_digest(cfg) == calf_config_digest(back));

    /* run length and cadence do not change the digest; anything learned does */
    uint64_t d0 = calf_config_digest(cfg);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.num_iterations=99", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.num_env_steps=99", &err), CALF_OK);
    CHECK(calf_config_digest(cfg) == d0);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.random_seed=2", &err), CALF_OK);
    CHECK(calf_config_digest(cfg) != d0);

    config_init(cfg);
    CHECK_INT_EQ(calf_config_validate(cfg, &err), CALF_OK);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.num_iterations=0", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_validate(cfg, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "never stop") != NULL);
    config_init(cfg);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "create_environment.num_parallel_environments=65536", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.unroll_length=65", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_validate(cfg, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "4259840 samples per iteration") != NULL);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.unroll_length=64", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_validate(cfg, &err), CALF_OK);
    calf_config_free(back);
    calf_config_free(cfg);
}

/* Parse `text` as the file `name` in tmpdir; expects success. */
static void parse_ok(calf_config *cfg, const char *name, const char *text) {
    calf_error err;
    write_file(name, text);
    int rc = parse(cfg, name, &err);
    CHECK_INT_EQ(rc, CALF_OK);
    if (rc) fprintf(stderr, "  %s\n", err.msg);
}

/* The operative dump of cfg, into buf. */
static void dump(const calf_config *cfg, char *buf, size_t cap) {
    char path[512];
    snprintf(path, sizeof path, "%s/dump.gin", tmpdir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    CHECK_INT_EQ(calf_config_write(cfg, f, NULL), CALF_OK);
    fclose(f);
    f = fopen(path, "r");
    CHECK(f != NULL);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* `line` must be a whole line of the dump of cfg. */
static void check_dump_line(const calf_config *cfg, const char *line) {
    static char text[16384];
    dump(cfg, text, sizeof text);
    char want[1024];
    snprintf(want, sizeof want, "\n%s\n", line);
    CHECK(strstr(text, want) != NULL);
    if (!strstr(text, want)) fprintf(stderr, "  no line '%s' in:\n%s", line, text);
}

/* One list makes the ids and the rows: every id's row has its own name, the rows named
 * in issue 16 sit under the ids the trainer uses, and a scoped row's fallback holds
 * values of its kind. */
static void test_table(void) {
    for (int i = 0; i < calf_binding_count(); i++) {
        const char *name = calf_binding_name((calf_binding_id)i);
        if (calf_binding_find(name) != i) CHECK_INT_EQ(calf_binding_find(name), i);
        CHECK(strchr(name, '.') != NULL && calf_binding_help((calf_binding_id)i)[0]);
        int fb = calf_binding_fallback((calf_binding_id)i);
        if (fb == CALF_NO_FALLBACK) continue;
        CHECK(strchr(name, '/') != NULL);
        CHECK_STR_EQ(strchr(name, '/') + 1, calf_binding_name((calf_binding_id)fb));
        CHECK_INT_EQ(calf_binding_type((calf_binding_id)fb), calf_binding_type((calf_binding_id)i));
    }
    static const struct { calf_binding_id id; const char *name; calf_config_type type; int flags;
                          int fallback; } rows[] = {
        {CALF_CFG_ENV_NAME, "create_environment.env_name", CALF_CFG_STRING, 0, CALF_NO_FALLBACK},
        {CALF_CFG_NUM_ITERATIONS, "TrainerConfig.num_iterations", CALF_CFG_INT,
         CALF_BINDING_NODIGEST, CALF_NO_FALLBACK},
        {CALF_CFG_ALGORITHM_CTOR, "TrainerConfig.algorithm_ctor", CALF_CFG_REF, 0, CALF_NO_FALLBACK},
        {CALF_CFG_INITIAL_COLLECT_STEPS, "TrainerConfig.initial_collect_steps", CALF_CFG_INT, 0,
         CALF_NO_FALLBACK},
        {CALF_CFG_MINI_BATCH_LENGTH, "TrainerConfig.mini_batch_length", CALF_CFG_INT, 0,
         CALF_NO_FALLBACK},
        {CALF_CFG_REPLAY_BUFFER_LENGTH, "TrainerConfig.replay_buffer_length", CALF_CFG_INT, 0,
         CALF_NO_FALLBACK},
        {CFG_SAC_TAU, "SacAlgorithm.target_update_tau", CALF_CFG_FLOAT, 0, CALF_NO_FALLBACK},
        {CFG_SAC_TARGET_PERIOD, "SacAlgorithm.target_update_period", CALF_CFG_INT, 0,
         CALF_NO_FALLBACK},
        {CFG_SAC_INITIAL_LOG_ALPHA, "SacAlgorithm.initial_log_alpha", CALF_CFG_FLOAT, 0,
         CALF_NO_FALLBACK},
        {CFG_SAC_TARGET_ENTROPY, "SacAlgorithm.target_entropy", CALF_CFG_FLOAT,
         CALF_BINDING_OPTIONAL, CALF_NO_FALLBACK},
        {CALF_CFG_TD_GAMMA, "OneStepTDLoss.gamma", CALF_CFG_FLOAT, 0, CALF_NO_FALLBACK},
        {CALF_CFG_SAC_ACTOR_LAYERS, "actor/ActorDistributionNetwork.fc_layer_params",
         CALF_CFG_INT_TUPLE, 0, CALF_CFG_ACTOR_LAYERS},
        {CALF_CFG_SAC_ACTOR_ACTIVATION, "actor/ActorDistributionNetwork.activation", CALF_CFG_STRING,
         0, CALF_CFG_ACTOR_ACTIVATION},
        {CALF_CFG_SAC_CRITIC_LAYERS, "critic/CriticNetwork.joint_fc_layer_params",
         CALF_CFG_INT_TUPLE, 0, CALF_NO_FALLBACK},
        {CALF_CFG_SAC_CRITIC_ACTIVATION, "critic/CriticNetwork.activation", CALF_CFG_STRING, 0,
         CALF_NO_FALLBACK},
        {CALF_CFG_ACTOR_LR, "actor/Adam.lr", CALF_CFG_FLOAT, 0, CALF_CFG_ADAM_LR},
        {CALF_CFG_CRITIC_LR, "critic/Adam.lr", CALF_CFG_FLOAT, 0, CALF_CFG_ADAM_LR},
        {CALF_CFG_ALPHA_LR, "alpha/Adam.lr", CALF_CFG_FLOAT, 0, CALF_CFG_ADAM_LR},
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        CHECK_STR_EQ(calf_binding_name(rows[k].id), rows[k].name);
        CHECK_INT_EQ(calf_binding_type(rows[k].id), rows[k].type);
        CHECK_INT_EQ(calf_binding_flags(rows[k].id), rows[k].flags);
        CHECK_INT_EQ(calf_binding_fallback(rows[k].id), rows[k].fallback);
    }

    calf_config *cfg = new_config();
    config_init(cfg);
    CHECK_STR_EQ(calf_config_string(cfg, CALF_CFG_ALGORITHM_CTOR), "PPOAlgorithm");
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_INITIAL_COLLECT_STEPS), 0);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_MINI_BATCH_LENGTH), 2);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_REPLAY_BUFFER_LENGTH), 100000);
    CHECK_NEAR(calf_config_float(cfg, CFG_SAC_TAU), 0.05, 0);
    CHECK_INT_EQ(calf_config_int(cfg, CFG_SAC_TARGET_PERIOD), 1);
    CHECK_NEAR(calf_config_float(cfg, CFG_SAC_INITIAL_LOG_ALPHA), 0.0, 0);
    CHECK(calf_config_is_none(cfg, CFG_SAC_TARGET_ENTROPY));
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_TD_GAMMA), 0.99, 0);
    const calf_binding_id sac_layers[] = {CALF_CFG_SAC_ACTOR_LAYERS, CALF_CFG_SAC_CRITIC_LAYERS};
    for (int k = 0; k < 2; k++) {
        const config_value *v = config_get(cfg, sac_layers[k]);
        CHECK_INT_EQ(v->n, 2);
        CHECK_INT_EQ(v->ti[0], 100);
        CHECK_INT_EQ(v->ti[1], 100);
    }
    CHECK_STR_EQ(calf_config_string(cfg, CALF_CFG_SAC_ACTOR_ACTIVATION), "relu");
    CHECK_STR_EQ(calf_config_string(cfg, CALF_CFG_SAC_CRITIC_ACTIVATION), "relu");
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_ACTOR_LR), 0.001, 0);
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_CRITIC_LR), 0.001, 0);
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_ALPHA_LR), 0.001, 0);

    check_error("tau.gin", "SacAlgorithm.target_update_tau = 1.5\n", 1,
                "'SacAlgorithm.target_update_tau': value 1.5 out of bounds [0, 1]");
    check_error("mbl.gin", "TrainerConfig.mini_batch_length = 0\n", 1,
                "'TrainerConfig.mini_batch_length': value 0 out of bounds [1, 1048576]");
    check_error("rbl.gin", "TrainerConfig.replay_buffer_length = 1073741825\n", 1,
                "'TrainerConfig.replay_buffer_length': value 1073741825 out of bounds [1, 1073741824]");
    check_error("ent.gin", "SacAlgorithm.target_entropy = -1e7\n", 1,
                "'SacAlgorithm.target_entropy': value -10000000 out of bounds [-1000000, 1000000]");
    check_error("crit.gin", "critic/CriticNetwork.activation = 'sigmoid'\n", 1,
                "'critic/CriticNetwork.activation' must be one of tanh|relu, got 'sigmoid'");
    calf_config_free(cfg);
}

static void test_refs(void) {
    calf_config *cfg = new_config();
    parse_ok(cfg, "ref_ok.gin", "TrainerConfig.algorithm_ctor = @SacAlgorithm\n");
    CHECK_STR_EQ(calf_config_string(cfg, CALF_CFG_ALGORITHM_CTOR), "SacAlgorithm");
    CHECK_STR_EQ(config_get(cfg, CALF_CFG_ALGORITHM_CTOR)->s, "SacAlgorithm");
    char buf[64];
    calf_config_format_value(cfg, CALF_CFG_ALGORITHM_CTOR, buf, sizeof buf);
    CHECK_STR_EQ(buf, "@SacAlgorithm");
    char line[600];
    snprintf(line, sizeof line, "TrainerConfig.algorithm_ctor = @SacAlgorithm  # %s/ref_ok.gin:1",
             tmpdir);
    check_dump_line(cfg, line);
    calf_error err;
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.algorithm_ctor=@PPOAlgorithm", &err),
                 CALF_OK);
    CHECK_STR_EQ(calf_config_string(cfg, CALF_CFG_ALGORITHM_CTOR), "PPOAlgorithm");

    check_error("ref_typo.gin", "# SAC\n\nTrainerConfig.algorithm_ctor = @SacAlgorithmm\n", 3,
                "unknown reference '@SacAlgorithmm' for 'TrainerConfig.algorithm_ctor' (did you "
                "mean '@SacAlgorithm'?)");
    check_error("ref_far.gin", "TrainerConfig.algorithm_ctor = @Foo\n", 1,
                "unknown reference '@Foo' for 'TrainerConfig.algorithm_ctor' (known: "
                "@PPOAlgorithm, @SacAlgorithm, @Td3Algorithm, @DqnAlgorithm, @DdpgAlgorithm)");
    check_error("ref_path.gin", "TrainerConfig.algorithm_ctor = @alf.algorithms.SacAlgorithm\n", 1,
                "unknown reference '@alf.algorithms.SacAlgorithm' for 'TrainerConfig.algorithm_ctor' "
                "(did you mean '@SacAlgorithm'?)");
    check_error("ref_call.gin", "TrainerConfig.algorithm_ctor = @SacAlgorithm()\n", 1,
                "'TrainerConfig.algorithm_ctor': write '@SacAlgorithm', not '@SacAlgorithm()': calf "
                "takes the reference, it calls nothing");
    check_error("ref_str.gin", "TrainerConfig.algorithm_ctor = 'SacAlgorithm'\n", 1,
                "'TrainerConfig.algorithm_ctor' expects a reference like @PPOAlgorithm, got the "
                "string 'SacAlgorithm'");
    check_error("ref_name.gin", "TrainerConfig.algorithm_ctor = SacAlgorithm\n", 1,
                "'TrainerConfig.algorithm_ctor' expects a reference like @PPOAlgorithm, got "
                "'SacAlgorithm'");
    check_error("ref_int.gin", "TrainerConfig.unroll_length = @SacAlgorithm\n", 1,
                "'TrainerConfig.unroll_length' expects a number, got '@SacAlgorithm'");
    calf_config_free(cfg);
}

/* A scoped row: set -> its value; else its fallback set -> the fallback's; else its own
 * default. */
static void test_scopes(void) {
    calf_config *cfg = new_config();
    calf_error err;
    char path[512], line[800];
    config_init(cfg);
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_ACTOR_LR), 0.001, 0);
    CHECK_STR_EQ(calf_config_origin(cfg, CALF_CFG_ACTOR_LR), "");
    CHECK_STR_EQ(config_where(cfg, CALF_CFG_ACTOR_LR), "config");
    CHECK_INT_EQ(config_get(cfg, CALF_CFG_SAC_ACTOR_LAYERS)->ti[0], 100); /* not 64 */
    check_dump_line(cfg, "actor/Adam.lr = 0.001");
    uint64_t d_default = calf_config_digest(cfg);

    /* the unscoped row set: every scope that is not set follows it */
    parse_ok(cfg, "scope1.gin",
             "# lr for all\n"
             "\n"
             "\n"
             "Adam.lr = 3e-4\n"
             "ActorDistributionNetwork.fc_layer_params = (32,)\n"
             "ActorDistributionNetwork.activation = 'tanh'\n");
    snprintf(path, sizeof path, "%s/scope1.gin", tmpdir);
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_ACTOR_LR), 3e-4, 0);
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_CRITIC_LR), 3e-4, 0);
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_ALPHA_LR), 3e-4, 0);
    CHECK_STR_EQ(cfg->origin[CALF_CFG_ACTOR_LR], "");
    snprintf(line, sizeof line, "%s:4", path);
    CHECK_STR_EQ(calf_config_origin(cfg, CALF_CFG_ACTOR_LR), line);
    /* the algorithms' messages (config_where) name the fallback's line, not "config" */
    CHECK_STR_EQ(config_where(cfg, CALF_CFG_CRITIC_LR), line);
    CHECK_STR_EQ(config_where(cfg, CALF_CFG_ADAM_LR), line);
    snprintf(line, sizeof line, "actor/Adam.lr = 0.00029999999999999997  # from Adam.lr at %s:4", path);
    check_dump_line(cfg, line);
    snprintf(line, sizeof line, "alpha/Adam.lr = 0.00029999999999999997  # from Adam.lr at %s:4", path);
    check_dump_line(cfg, line);
    const config_value *al = config_get(cfg, CALF_CFG_SAC_ACTOR_LAYERS);
    CHECK_INT_EQ(al->n, 1);
    CHECK_INT_EQ(al->ti[0], 32);
    snprintf(line, sizeof line, "actor/ActorDistributionNetwork.fc_layer_params = (32,)  # from "
             "ActorDistributionNetwork.fc_layer_params at %s:5", path);
    check_dump_line(cfg, line);
    CHECK_STR_EQ(calf_config_string(cfg, CALF_CFG_SAC_ACTOR_ACTIVATION), "tanh");
    char buf[64];
    calf_config_format_value(cfg, CALF_CFG_CRITIC_LR, buf, sizeof buf);
    CHECK_STR_EQ(buf, "0.00029999999999999997");
    /* no fallback row: the critic's layers keep their default */
    CHECK_INT_EQ(config_get(cfg, CALF_CFG_SAC_CRITIC_LAYERS)->ti[0], 100);
    uint64_t d_fallback = calf_config_digest(cfg);
    CHECK(d_fallback != d_default);

    /* the digest hashes the values in effect: setting each scope to what it already
     * takes from Adam.lr changes nothing */
    calf_config *same = new_config();
    parse_ok(same, "scope_same.gin",
             "Adam.lr = 3e-4\n"
             "actor/Adam.lr = 3e-4\n"
             "critic/Adam.lr = 0.0003\n"
             "alpha/Adam.lr = 3e-4\n"
             "ActorDistributionNetwork.fc_layer_params = (32,)\n"
             "actor/ActorDistributionNetwork.fc_layer_params = (32,)\n"
             "ActorDistributionNetwork.activation = 'tanh'\n");
    CHECK(calf_config_digest(same) == d_fallback);
    calf_config_free(same);

    /* set explicitly: its own value, whether before or after the unscoped one */
    parse_ok(cfg, "scope2.gin",
             "actor/Adam.lr = 1e-4\n"
             "Adam.lr = 3e-4\n"
             "critic/Adam.lr = 2e-4\n");
    snprintf(path, sizeof path, "%s/scope2.gin", tmpdir);
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_ACTOR_LR), 1e-4, 0);
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_CRITIC_LR), 2e-4, 0);
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_ALPHA_LR), 3e-4, 0);
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_ADAM_LR), 3e-4, 0);
    snprintf(line, sizeof line, "actor/Adam.lr = 0.0001  # %s:1", path);
    check_dump_line(cfg, line);
    snprintf(line, sizeof line, "critic/Adam.lr = 0.00020000000000000001  # %s:3", path);
    check_dump_line(cfg, line);
    uint64_t d_explicit = calf_config_digest(cfg);
    CHECK(d_explicit != d_fallback && d_explicit != d_default);
    /* the fallback no longer reaches the scopes that are set */
    CHECK_INT_EQ(calf_config_apply_param(cfg, "Adam.lr=0.5", &err), CALF_OK);
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_ACTOR_LR), 1e-4, 0);
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_ALPHA_LR), 0.5, 0);
    check_dump_line(cfg, "alpha/Adam.lr = 0.5  # from Adam.lr at --conf_param");
    CHECK(calf_config_digest(cfg) != d_explicit);

    /* a scoped row set to its default still counts as set */
    config_init(cfg);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "actor/Adam.lr=0.001", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "Adam.lr=0.01", &err), CALF_OK);
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_ACTOR_LR), 0.001, 0);
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_CRITIC_LR), 0.01, 0);

    check_error("actr.gin", "actr/Adam.lr = 1e-3\n", 1,
                "unknown binding 'actr/Adam.lr' (did you mean 'actor/Adam.lr'?)");
    check_error("critc.gin", "\ncritc/CriticNetwork.activation = 'tanh'\n", 2,
                "unknown binding 'critc/CriticNetwork.activation' (did you mean "
                "'critic/CriticNetwork.activation'?)");
    CHECK_INT_EQ(calf_config_apply_param(cfg, "alpha/Adam.lrr=1", &err), CALF_EINVAL);
    CHECK_STR_EQ(err.msg, "--conf_param 'alpha/Adam.lrr=1': unknown binding 'alpha/Adam.lrr' (did "
                          "you mean 'alpha/Adam.lr'?)");
    calf_config_free(cfg);
}

static void test_macros(void) {
    calf_config *cfg = new_config();
    calf_error err;
    char path[512], want[1024];
    parse_ok(cfg, "macros.gin",
             "NUM_ENVS = 8\n"
             "LAYERS = (256, 128)\n"
             "W = 32\n"
             "ENV = 'Pendulum-v1'\n"
             "ALG = @SacAlgorithm\n"
             "NOTHING = None\n"
             "ON = False\n"
             "BETAS = (0.5, %W)\n"                        /* a macro inside a macro's tuple */
             "create_environment.num_parallel_environments = %NUM_ENVS\n"
             "ValueNetwork.fc_layer_params = %LAYERS\n"
             "ActorDistributionNetwork.fc_layer_params = (%W, %NUM_ENVS, 16)\n"
             "create_environment.env_name = %ENV\n"
             "TrainerConfig.algorithm_ctor = %ALG\n"
             "SacAlgorithm.target_entropy = %NOTHING\n"
             "PPOLoss.normalize_advantages = %ON\n"
             "PPOLoss.td_loss_weight = %W\n"              /* an int literal for a float */
             "Adam.betas = (0.5, 0.25)\n");
    snprintf(path, sizeof path, "%s/macros.gin", tmpdir);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_NUM_ENVS), 8);
    snprintf(want, sizeof want, "%s:9", path);
    CHECK_STR_EQ(cfg->origin[CALF_CFG_NUM_ENVS], want); /* where it was used */
    const config_value *v = config_get(cfg, CALF_CFG_VALUE_LAYERS);
    CHECK_INT_EQ(v->n, 2);
    CHECK_INT_EQ(v->ti[0], 256);
    CHECK_INT_EQ(v->ti[1], 128);
    v = config_get(cfg, CALF_CFG_ACTOR_LAYERS);
    CHECK_INT_EQ(v->n, 3);
    CHECK_INT_EQ(v->ti[0], 32);
    CHECK_INT_EQ(v->ti[1], 8);
    CHECK_INT_EQ(v->ti[2], 16);
    CHECK_STR_EQ(calf_config_string(cfg, CALF_CFG_ENV_NAME), "Pendulum-v1");
    CHECK_STR_EQ(calf_config_string(cfg, CALF_CFG_ALGORITHM_CTOR), "SacAlgorithm");
    CHECK(calf_config_is_none(cfg, CFG_SAC_TARGET_ENTROPY));
    CHECK(!calf_config_bool(cfg, CFG_PPO_NORMALIZE_ADVANTAGES));
    CHECK_NEAR(calf_config_float(cfg, CFG_PPO_TD_LOSS_WEIGHT), 32.0, 0);
    CHECK_INT_EQ(cfg->num_macros, 8);
    CHECK_STR_EQ(cfg->macros[7].name, "BETAS");
    CHECK_STR_EQ(cfg->macros[7].text, "(0.5, 32)");
    CHECK_INT_EQ(calf_config_validate(cfg, &err), CALF_EINVAL); /* BETAS is never used */
    snprintf(want, sizeof want, "%s:8: macro 'BETAS' is never used (a binding is written "
             "'Scope.param = value')", path);
    CHECK_STR_EQ(err.msg, want);

    /* --conf_param defines and uses macros too; one used by the file stays as it was */
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.unroll_length=%W", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_UNROLL_LENGTH), 32);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "STEPS = 64", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.unroll_length=%STEPS", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_UNROLL_LENGTH), 64);
    CHECK_STR_EQ(cfg->origin[CALF_CFG_UNROLL_LENGTH], "--conf_param");
    CHECK_INT_EQ(calf_config_apply_param(cfg, "NUM_ENVS=4", &err), CALF_EINVAL);
    snprintf(want, sizeof want, "--conf_param 'NUM_ENVS=4': macro 'NUM_ENVS' is changed after its "
             "use at %s:9, which keeps 8: calf expands a macro where it is used (gin would change "
             "that use too); define it before that use, or set the binding itself", path);
    CHECK_STR_EQ(err.msg, want);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_NUM_ENVS), 8);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "NUM_ENVS=8", &err), CALF_OK); /* unchanged */
    CHECK_INT_EQ(calf_config_apply_param(cfg, "Adam.betas=%BETAS", &err), CALF_EINVAL);
    snprintf(want, sizeof want, "--conf_param 'Adam.betas=%%BETAS': 'Adam.betas': value 32 out of "
             "bounds [0, 0.99999997] (in %%BETAS, defined at %s:8)", path);
    CHECK_STR_EQ(err.msg, want);
    /* Adam computes in float: the bound keeps a beta below 1 there too (0.99999998 would be
     * 1.0f, and 1 - beta^t = 0 makes every step inf or NaN) */
    CHECK_INT_EQ(calf_config_apply_param(cfg, "Adam.betas=(0.9, 0.99999998)", &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "Adam.betas=(0.99999997, 0.99999997)", &err), CALF_OK);
    CHECK((float)config_get(cfg, CALF_CFG_ADAM_BETAS)->tf[1] < 1.0f);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.unroll_length=%STEP", &err),
                 CALF_EINVAL);
    CHECK_STR_EQ(err.msg, "--conf_param 'TrainerConfig.unroll_length=%STEP': undefined macro "
                          "'%STEP' (did you mean '%STEPS'?)");

    /* redefined before any use: the last definition wins; macros cross includes both ways */
    write_file("mac_inc.gin", "TrainerConfig.unroll_length = %T\nINNER = 0.25\n");
    parse_ok(cfg, "mac_top.gin",
             "T = 1\n"
             "T = 2\n"
             "include 'mac_inc.gin'\n"
             "PPOLoss.gamma = %INNER\n"
             "T = 2\n");                                  /* the same value again is fine */
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_UNROLL_LENGTH), 2);
    CHECK_NEAR(calf_config_float(cfg, CFG_PPO_GAMMA), 0.25, 0);
    CHECK_INT_EQ(calf_config_validate(cfg, &err), CALF_OK);

    check_error("mac_undef.gin", "NUM_ENVS = 8\ncreate_environment.num_parallel_environments = %NUM_ENV\n", 2,
                "undefined macro '%NUM_ENV' (did you mean '%NUM_ENVS'?)");
    check_error("mac_undef2.gin", "\nTrainerConfig.unroll_length = %SIZE\nSIZE = 3\n", 2,
                "undefined macro '%SIZE' (define it before its use: SIZE = value)");
    check_error("mac_tuple.gin", "\n\nValueNetwork.fc_layer_params = (8, %NOPE)\n", 3,
                "undefined macro '%NOPE' (define it before its use: NOPE = value)");
    snprintf(want, sizeof want, "macro 'N' is changed after its use at %s/mac_later.gin:2, which "
             "keeps 4: calf expands a macro where it is used (gin would change that use too); "
             "define it before that use, or set the binding itself", tmpdir);
    check_error("mac_later.gin", "N = 4\nTrainerConfig.unroll_length = %N\nN = 5\n", 3, want);
    snprintf(path, sizeof path, "%s/mac_type.gin", tmpdir);
    snprintf(want, sizeof want, "'TrainerConfig.unroll_length' expects an int, got '3.5' (in %%N, "
             "defined at %s:1)", path);
    check_error("mac_type.gin", "N = 3.5\n\nTrainerConfig.unroll_length = %N\n", 3, want);
    snprintf(path, sizeof path, "%s/mac_nest.gin", tmpdir);
    snprintf(want, sizeof want, "'ValueNetwork.fc_layer_params': expected a number in the tuple, "
             "got '(' (in %%L, defined at %s:1)", path);
    check_error("mac_nest.gin", "L = (1, 2)\nValueNetwork.fc_layer_params = (%L, 3)\n", 2, want);
    check_error("mac_word.gin", "N = eight\n", 1,
                "macro 'N': cannot read value 'eight' (expected a literal, a tuple, @Name or %MACRO)");
    check_error("mac_none.gin", "None = 3\n", 1, "'None' is a value, not a macro name");
    check_error("mac_call.gin", "A = @SacAlgorithm()\n", 1,
                "macro 'A': write '@SacAlgorithm', not '@SacAlgorithm()': calf takes the reference, "
                "it calls nothing");
    check_error("mac_open.gin", "A = (1, 2\n", 2,
                "macro 'A': expected ',' or ')' in the tuple, got 'end of file'");

    /* a bare name is a macro, and one never used is most likely a binding without scope */
    parse_ok(cfg, "mac_unused.gin", "\ngamma = 0.9\n");
    CHECK_INT_EQ(calf_config_validate(cfg, &err), CALF_EINVAL);
    snprintf(want, sizeof want, "%s/mac_unused.gin:2: macro 'gamma' is never used (did you mean "
             "the binding 'PPOLoss.gamma'?)", tmpdir);
    CHECK_STR_EQ(err.msg, want);
    calf_config_free(cfg);
}

static void test_imports_and_bom(void) {
    calf_config *cfg = new_config();
    calf_error err;
    parse_ok(cfg, "imports.gin",
             "import alf.algorithms.sac_algorithm\n"
             "import alf.utils.math_ops as m, alf.networks\n"
             "from alf.algorithms.sac_algorithm import SacAlgorithm\n"
             "from a.b import c as d, e\n"
             "TrainerConfig.unroll_length = 7\n"
             "import x\n"
             "PPOLoss.gamma = 0.5\n");
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_UNROLL_LENGTH), 7);
    CHECK_NEAR(calf_config_float(cfg, CFG_PPO_GAMMA), 0.5, 0);
    char want[600];
    snprintf(want, sizeof want, "%s/imports.gin:7", tmpdir);
    CHECK_STR_EQ(cfg->origin[CFG_PPO_GAMMA], want);
    check_error("imp_bare.gin", "import\nPPOLoss.gamma = 0.5\n", 1, "expected 'import module'");
    check_error("imp_two.gin", "import a b\n", 1, "expected 'import module', got 'b' after it");
    check_error("imp_from.gin", "\nfrom a.b imprt c\n", 2, "expected 'from module import name'");
    check_error("imp_from2.gin", "from a.b import\n", 1, "expected 'from module import name'");
    CHECK_INT_EQ(calf_config_apply_param(cfg, "import=x", &err), CALF_EINVAL);
    CHECK_STR_EQ(err.msg, "--conf_param 'import=x': import is not allowed here: expected "
                          "'Scope.param=value'");

    /* a UTF-8 byte-order mark, as some editors write, changes nothing */
    parse_ok(cfg, "bom.gin", "\xEF\xBB\xBF# with a BOM\nAdam.lr = 0.5\n");
    CHECK_NEAR(calf_config_float(cfg, CALF_CFG_ADAM_LR), 0.5, 0);
    snprintf(want, sizeof want, "%s/bom.gin:2", tmpdir);
    CHECK_STR_EQ(cfg->origin[CALF_CFG_ADAM_LR], want);
    parse_ok(cfg, "bom2.gin", "\xEF\xBB\xBFPPOLoss.gamma = 0.25\n");
    CHECK_NEAR(calf_config_float(cfg, CFG_PPO_GAMMA), 0.25, 0);
    /* elsewhere it is no letter */
    check_error("bom3.gin", "PPOLoss.gamma = 0.25\n\xEF\xBB\xBF" "Adam.lr = 1\n", 2,
                "expected 'Scope.param = value', got '\xEF'");
    calf_config_free(cfg);
}

static void test_none(void) {
    calf_config *cfg = new_config();
    calf_error err;
    config_init(cfg);
    CHECK(calf_config_is_none(cfg, CFG_SAC_TARGET_ENTROPY));
    CHECK(!calf_config_is_none(cfg, CFG_PPO_GAMMA));
    char buf[64];
    calf_config_format_value(cfg, CFG_SAC_TARGET_ENTROPY, buf, sizeof buf);
    CHECK_STR_EQ(buf, "None");
    check_dump_line(cfg, "SacAlgorithm.target_entropy = None");
    uint64_t d_none = calf_config_digest(cfg);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "SacAlgorithm.target_entropy=-1.5", &err), CALF_OK);
    CHECK(!calf_config_is_none(cfg, CFG_SAC_TARGET_ENTROPY));
    CHECK_NEAR(calf_config_float(cfg, CFG_SAC_TARGET_ENTROPY), -1.5, 0);
    CHECK(calf_config_digest(cfg) != d_none);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "SacAlgorithm.target_entropy=None", &err), CALF_OK);
    CHECK(calf_config_is_none(cfg, CFG_SAC_TARGET_ENTROPY));
    CHECK(calf_config_digest(cfg) == d_none);
    check_dump_line(cfg, "SacAlgorithm.target_entropy = None  # --conf_param");

    check_error("none.gin", "PPOLoss.gamma = None\n", 1,
                "'PPOLoss.gamma' cannot be None: it is not optional (type float)");
    check_error("none2.gin", "\nActorDistributionNetwork.fc_layer_params = None\n", 2,
                "'ActorDistributionNetwork.fc_layer_params' cannot be None: it is not optional "
                "(type tuple of ints)");
    check_error("none3.gin", "TrainerConfig.algorithm_ctor = None\n", 1,
                "'TrainerConfig.algorithm_ctor' cannot be None: it is not optional (type reference)");
    calf_config_free(cfg);
}

/* The dump re-parses to the same values and digest, with scoped rows (set and following
 * their fallback), references, None and macros in the source. */
static void check_round_trip(const char *name, const char *text) {
    calf_config *cfg = new_config();
    calf_config *back = new_config();
    calf_error err;
    parse_ok(cfg, name, text);
    char path[512];
    snprintf(path, sizeof path, "%s/%s.operative", tmpdir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    CHECK_INT_EQ(calf_config_write(cfg, f, "round trip"), CALF_OK);
    fclose(f);
    config_init(back);
    CHECK_INT_EQ(calf_config_parse_file(back, path, &err), CALF_OK);
    CHECK(calf_config_digest(cfg) == calf_config_digest(back));
    for (int i = 0; i < calf_binding_count(); i++) {
        char a[800], b[800];
        calf_config_format_value(cfg, (calf_binding_id)i, a, sizeof a);
        calf_config_format_value(back, (calf_binding_id)i, b, sizeof b);
        CHECK_STR_EQ(a, b);
        CHECK_INT_EQ(calf_config_is_none(cfg, (calf_binding_id)i),
                     calf_config_is_none(back, (calf_binding_id)i));
    }
    calf_config_free(back);
    calf_config_free(cfg);
}

static void test_round_trip(void) {
    check_round_trip("rt1.gin",
                     "LR = 3e-4\n"
                     "Adam.lr = %LR\n"
                     "critic/Adam.lr = 1e-4\n"
                     "ActorDistributionNetwork.fc_layer_params = (32, 32)\n"
                     "actor/ActorDistributionNetwork.activation = 'tanh'\n"
                     "critic/CriticNetwork.joint_fc_layer_params = (256, 256, 256)\n"
                     "TrainerConfig.algorithm_ctor = @SacAlgorithm\n"
                     "TrainerConfig.initial_collect_steps = 1000\n"
                     "SacAlgorithm.target_entropy = None\n");
    check_round_trip("rt2.gin",
                     "SacAlgorithm.target_entropy = -0.1\n"
                     "alpha/Adam.lr = 0.123456789012345\n"
                     "OneStepTDLoss.gamma = 0.9\n");
}

static void check_split(int E, int n, const int *expect_counts) {
    int next = 0, total = 0;
    calf_error err;
    for (int r = 0; r < n; r++) {
        int b = -1, c = -1;
        CHECK_INT_EQ(calf_split(E, n, r, &b, &c, &err), CALF_OK);
        CHECK_INT_EQ(b, next);
        CHECK_INT_EQ(c, expect_counts[r]);
        next = b + c;
        total += c;
    }
    CHECK_INT_EQ(total, E);
}

static void test_split(void) {
    check_split(64, 2, (const int[]){32, 32});
    check_split(65, 2, (const int[]){33, 32});
    check_split(30, 4, (const int[]){8, 8, 7, 7});
    check_split(64, 1, (const int[]){64});
    check_split(3, 3, (const int[]){1, 1, 1});
    int b, c;
    calf_error err;
    CHECK_INT_EQ(calf_split(4, 8, 0, &b, &c, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "8 processes but only 4 environments") != NULL);
    /* sizes always differ by at most one and cover [0, E) exactly */
    for (int E = 1; E <= 70; E++)
        for (int n = 1; n <= 8 && n <= E; n++) {
            int next = 0, lo = E, hi = 0;
            for (int r = 0; r < n; r++) {
                CHECK_INT_EQ(calf_split(E, n, r, &b, &c, &err), CALF_OK);
                if (b != next) CHECK_INT_EQ(b, next);
                next = b + c;
                lo = c < lo ? c : lo;
                hi = c > hi ? c : hi;
            }
            if (next != E || hi - lo > 1) CHECK(0);
        }
}

/* Messages that name the right thing: a number calf cannot read is reported on its own
 * line as the value it is (not as "x10" starting a statement on the next line), a name
 * too long for the parser is called too long (cut, it lost its '.' and was called a
 * macro), and --conf on a directory says so. */
static void test_messages(void) {
    check_error("hex.gin", "TrainerConfig.num_iterations = 0x10\n", 1,
                "'TrainerConfig.num_iterations': cannot read value starting at '0x10'");
    check_error("hex1.gin", "TrainerConfig.num_iterations = 0x10", 1,
                "'TrainerConfig.num_iterations': cannot read value starting at '0x10'");
    check_error("suffix.gin", "\nAdam.lr = 3e-4f\n\n", 2,
                "'Adam.lr': cannot read value starting at '3e-4f'");
    check_error("hexmacro.gin", "N = 0x10\nTrainerConfig.num_iterations = %N\n", 1,
                "macro 'N': cannot read value starting at '0x10'");
    char text[700], want[200];
    memset(text, 'a', 320);
    snprintf(text + 320, sizeof text - 320, ".x = 1\n");
    snprintf(want, sizeof want, "name '%.40s...' too long (322 characters, at most 299)", text);
    check_error("longname.gin", text, 1, want);
    calf_config *cfg = new_config();
    calf_error err;
    config_init(cfg);
    CHECK_INT_EQ(calf_config_parse_file(cfg, tmpdir, &err), CALF_EINVAL);
    char dir_msg[600];
    snprintf(dir_msg, sizeof dir_msg, "%s: is a directory, not a config file", tmpdir);
    CHECK_STR_EQ(err.msg, dir_msg);
    calf_config_free(cfg);
}

/* One budget: num_env_steps alone ends the run there (num_iterations' default gives way,
 * and the dump says so); a config that sets both is refused naming both lines. */
static void test_one_budget(void) {
    calf_config *cfg = new_config();
    calf_error err;
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_NUM_ITERATIONS), 1000);
    parse_ok(cfg, "steps.gin", "# budget\nTrainerConfig.num_env_steps = 5000000\n");
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_NUM_ITERATIONS), 0);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_NUM_ENV_STEPS), 5000000);
    CHECK_INT_EQ(calf_config_validate(cfg, &err), CALF_OK);
    check_dump_line(cfg, "TrainerConfig.num_iterations = 0  # TrainerConfig.num_env_steps ends the run");
    /* the dump reads back to the same budget */
    char text[16384], path[600];
    dump(cfg, text, sizeof text);
    snprintf(path, sizeof path, "%s/dump.gin", tmpdir);
    calf_config *back = new_config();
    CHECK_INT_EQ(calf_config_parse_file(back, path, &err), CALF_OK);
    CHECK_INT_EQ(calf_config_validate(back, &err), CALF_OK);
    CHECK_INT_EQ(calf_config_int(back, CALF_CFG_NUM_ITERATIONS), 0);
    calf_config_free(back);
    /* num_env_steps back to 0: num_iterations' default is the budget again */
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.num_env_steps=0", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_int(cfg, CALF_CFG_NUM_ITERATIONS), 1000);
    /* both: refused, naming each line */
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.num_env_steps=7", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.num_iterations=3", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_validate(cfg, &err), CALF_EINVAL);
    CHECK_STR_EQ(err.msg, "--conf_param: TrainerConfig.num_iterations = 3 and --conf_param: "
                          "TrainerConfig.num_env_steps = 7: a run has one budget; set one of "
                          "them (the other to 0)");
    config_init(cfg);
    parse_ok(cfg, "both.gin", "TrainerConfig.num_iterations = 10\n\nTrainerConfig.num_env_steps = 99\n");
    CHECK_INT_EQ(calf_config_validate(cfg, &err), CALF_EINVAL);
    char want[1024];
    snprintf(want, sizeof want, "%s/both.gin:1: TrainerConfig.num_iterations = 10 and "
             "%s/both.gin:3: TrainerConfig.num_env_steps = 99: a run has one budget; set one of "
             "them (the other to 0)", tmpdir, tmpdir);
    CHECK_STR_EQ(err.msg, want);
    /* the other one at 0, as the examples write it: one budget */
    CHECK_INT_EQ(calf_config_apply_param(cfg, "TrainerConfig.num_iterations=0", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_validate(cfg, &err), CALF_OK);
    calf_config_free(cfg);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/calf_test_config_XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    test_defaults();
    test_one_budget();
    test_parse_values();
    test_errors();
    test_conv_layers();
    test_includes();
    test_dump_and_digest();
    test_table();
    test_refs();
    test_scopes();
    test_macros();
    test_imports_and_bom();
    test_none();
    test_round_trip();
    test_split();
    test_messages();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmpdir);
    return test_report("test_config");
}
