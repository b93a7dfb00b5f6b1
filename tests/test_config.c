/* test_config.c: gin parsing, the binding table, errors with file:line, the operative
 * dump, the digest, and the per-process split. */
#include <sys/stat.h>
#include <unistd.h>

#include "calf/config.h"
#include "test_util.h"

static char tmpdir[256];

static void write_file(const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); exit(1); }
    fputs(text, f);
    fclose(f);
}

static int parse(calf_config *cfg, const char *name, calf_error *err) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    calf_config_init(cfg);
    return calf_config_parse_file(cfg, path, err);
}

/* the error message must end with the expected text after "file:line: " */
static void check_error(const char *name, const char *text, int line, const char *expect) {
    calf_config cfg;
    calf_error err;
    write_file(name, text);
    int rc = parse(&cfg, name, &err);
    CHECK_INT_EQ(rc, CALF_EINVAL);
    char want[1024];
    snprintf(want, sizeof want, "%s/%s:%d: %s", tmpdir, name, line, expect);
    CHECK_STR_EQ(err.msg, want);
}

static void test_defaults(void) {
    calf_config cfg;
    calf_config_init(&cfg);
    CHECK_STR_EQ(calf_config_string(&cfg, CALF_CFG_ENV_NAME), "CartPole-v1");
    CHECK_INT_EQ(calf_config_int(&cfg, CALF_CFG_NUM_ENVS), 64);
    CHECK_NEAR(calf_config_float(&cfg, CALF_CFG_GAMMA), 0.99, 0);
    CHECK(calf_config_bool(&cfg, CALF_CFG_NORMALIZE_ADVANTAGES));
    const calf_config_value *betas = calf_config_get(&cfg, CALF_CFG_ADAM_BETAS);
    CHECK_INT_EQ(betas->n, 2);
    CHECK_NEAR(betas->tf[1], 0.999, 0);
    const calf_config_value *layers = calf_config_get(&cfg, CALF_CFG_ACTOR_LAYERS);
    CHECK_INT_EQ(layers->n, 2);
    CHECK_INT_EQ(layers->ti[0], 64);
    CHECK_INT_EQ(calf_binding_find("TrainerConfig.num_iterations"), CALF_CFG_NUM_ITERATIONS);
    CHECK_INT_EQ(calf_binding_find("TrainerConfig.nope"), -1);
}

static void test_parse_values(void) {
    calf_config cfg;
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
    CHECK_INT_EQ(parse(&cfg, "ok.gin", &err), CALF_OK);
    CHECK_STR_EQ(calf_config_string(&cfg, CALF_CFG_ENV_NAME), "Pendulum-v1");
    CHECK_INT_EQ(calf_config_int(&cfg, CALF_CFG_NUM_ENVS), 65);
    CHECK_INT_EQ(calf_config_int(&cfg, CALF_CFG_NUM_ITERATIONS), 7);
    CHECK_NEAR(calf_config_float(&cfg, CALF_CFG_GAMMA), 0.5, 0);
    CHECK_NEAR(calf_config_float(&cfg, CALF_CFG_TD_LAMBDA), 1.0, 0);
    CHECK_NEAR(calf_config_float(&cfg, CALF_CFG_ADAM_LR), 3e-4, 0);
    CHECK(!calf_config_bool(&cfg, CALF_CFG_NORMALIZE_ADVANTAGES));
    const calf_config_value *a = calf_config_get(&cfg, CALF_CFG_ACTOR_LAYERS);
    CHECK_INT_EQ(a->n, 2);
    CHECK_INT_EQ(a->ti[0], 32);
    CHECK_INT_EQ(a->ti[1], 16);
    CHECK_INT_EQ(calf_config_get(&cfg, CALF_CFG_VALUE_LAYERS)->n, 1);
    CHECK_INT_EQ(calf_config_get(&cfg, CALF_CFG_VALUE_LAYERS)->ti[0], 8);
    CHECK_NEAR(calf_config_get(&cfg, CALF_CFG_ADAM_BETAS)->tf[0], 0.8, 0);
    CHECK_STR_EQ(calf_config_string(&cfg, CALF_CFG_VALUE_ACTIVATION), "relu");
    char origin[512];
    snprintf(origin, sizeof origin, "%s/ok.gin:16", tmpdir);
    CHECK_STR_EQ(cfg.origin[CALF_CFG_NUM_ITERATIONS], origin);

    /* --conf_param overrides the file and records its origin */
    CHECK_INT_EQ(calf_config_apply_param(&cfg, "TrainerConfig.num_iterations=12", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_int(&cfg, CALF_CFG_NUM_ITERATIONS), 12);
    CHECK_STR_EQ(cfg.origin[CALF_CFG_NUM_ITERATIONS], "--conf_param");
    CHECK_INT_EQ(calf_config_apply_param(&cfg, " PPOLoss.gamma = 0.25 ", &err), CALF_OK);
    CHECK_NEAR(calf_config_float(&cfg, CALF_CFG_GAMMA), 0.25, 0);
    CHECK_INT_EQ(calf_config_apply_param(&cfg, "TrainerConfig.num_iteration=3", &err), CALF_EINVAL);
    CHECK_STR_EQ(err.msg, "--conf_param 'TrainerConfig.num_iteration=3': unknown binding "
                          "'TrainerConfig.num_iteration' (did you mean 'TrainerConfig.num_iterations'?)");
    CHECK_INT_EQ(calf_config_apply_param(&cfg, "PPOLoss.gamma=0.5 Adam.lr=0.1", &err), CALF_EINVAL);
    CHECK_STR_EQ(err.msg, "--conf_param 'PPOLoss.gamma=0.5 Adam.lr=0.1': expected one "
                          "'Scope.param=value', found more after the value");
    CHECK_INT_EQ(calf_config_apply_param(&cfg, "include='x.gin'", &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "include is not allowed here") != NULL);
    CHECK_INT_EQ(calf_config_apply_param(&cfg, "PPOLoss.gamma", &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "expected 'Scope.param=value'") != NULL);
    CHECK_INT_EQ(calf_config_int(&cfg, CALF_CFG_NUM_ITERATIONS), 12);
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
    check_error("import.gin", "import foo\n", 1,
                "'import' is not supported: a calf config is data, not code");
    check_error("noscope.gin", "gamma = 0.9\n", 1,
                "'gamma' is not a binding: expected 'Scope.param'");
    check_error("ref.gin", "create_environment.env_name = @make_env\n", 1,
                "'create_environment.env_name': references (@name) are not supported: a calf "
                "config is data");
    check_error("deep.gin", "ValueNetwork.fc_layer_params = (8, 8, 8, 8, 8, 8, 8, 8)\n", 1,
                "'ValueNetwork.fc_layer_params' takes at most 7 elements, got 8");
}

static void test_includes(void) {
    calf_config cfg;
    calf_error err;
    char sub[512];
    snprintf(sub, sizeof sub, "%s/sub", tmpdir);
    CHECK(mkdir(sub, 0755) == 0 || access(sub, F_OK) == 0);
    write_file("sub/base.gin", "TrainerConfig.unroll_length = 16\nPPOLoss.gamma = 0.9\n");
    write_file("sub/top.gin", "include 'base.gin'\nPPOLoss.gamma = 0.8\n");
    CHECK_INT_EQ(parse(&cfg, "sub/top.gin", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_int(&cfg, CALF_CFG_UNROLL_LENGTH), 16);
    CHECK_NEAR(calf_config_float(&cfg, CALF_CFG_GAMMA), 0.8, 0);

    write_file("sub/a.gin", "include 'b.gin'\n");
    write_file("sub/b.gin", "PPOLoss.gamma = 0.7\ninclude \"a.gin\"\n");
    CHECK_INT_EQ(parse(&cfg, "sub/a.gin", &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "sub/b.gin:2: include cycle") != NULL);

    write_file("sub/self.gin", "include 'self.gin'\n");
    CHECK_INT_EQ(parse(&cfg, "sub/self.gin", &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "include cycle") != NULL);

    write_file("inc_missing.gin", "\ninclude 'nothere.gin'\n");
    CHECK_INT_EQ(parse(&cfg, "inc_missing.gin", &err), CALF_EIO);
    CHECK(strstr(err.msg, "inc_missing.gin:2: cannot include: ") != NULL);
    CHECK(strstr(err.msg, "nothere.gin: cannot open: No such file or directory") != NULL);

    CHECK_INT_EQ(parse(&cfg, "does-not-exist.gin", &err), CALF_EIO);
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
    CHECK_INT_EQ(parse(&cfg, "sub/longinc.gin", &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "sub/longinc.gin:2: include name too long (304 characters") != NULL);
}

static void test_dump_and_digest(void) {
    calf_config cfg, back;
    calf_error err;
    calf_config_init(&cfg);
    CHECK_INT_EQ(calf_config_apply_param(&cfg, "PPOLoss.gamma=0.123456789012345", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_apply_param(&cfg, "ValueNetwork.fc_layer_params=(7,)", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_apply_param(&cfg, "Adam.lr=1", &err), CALF_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/operative.gin", tmpdir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    CHECK_INT_EQ(calf_config_write(&cfg, f, "operative config\nsecond line"), CALF_OK);
    fclose(f);
    /* the dump is valid gin and round-trips every value exactly */
    calf_config_init(&back);
    CHECK_INT_EQ(calf_config_parse_file(&back, path, &err), CALF_OK);
    for (int i = 0; i < CALF_CFG_NUM_BINDINGS; i++) {
        char a[800], b[800];
        calf_config_format_value(&cfg, (calf_binding_id)i, a, sizeof a);
        calf_config_format_value(&back, (calf_binding_id)i, b, sizeof b);
        CHECK_STR_EQ(a, b);
    }
    CHECK(calf_config_digest(&cfg) == calf_config_digest(&back));

    /* run length and cadence do not change the digest; anything learned does */
    uint64_t d0 = calf_config_digest(&cfg);
    CHECK_INT_EQ(calf_config_apply_param(&cfg, "TrainerConfig.num_iterations=99", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_apply_param(&cfg, "TrainerConfig.num_env_steps=99", &err), CALF_OK);
    CHECK(calf_config_digest(&cfg) == d0);
    CHECK_INT_EQ(calf_config_apply_param(&cfg, "TrainerConfig.random_seed=2", &err), CALF_OK);
    CHECK(calf_config_digest(&cfg) != d0);

    calf_config_init(&cfg);
    CHECK_INT_EQ(calf_config_validate(&cfg, &err), CALF_OK);
    CHECK_INT_EQ(calf_config_apply_param(&cfg, "TrainerConfig.num_iterations=0", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_validate(&cfg, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "never stop") != NULL);
    calf_config_init(&cfg);
    CHECK_INT_EQ(calf_config_apply_param(&cfg, "create_environment.num_parallel_environments=65536", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_apply_param(&cfg, "TrainerConfig.unroll_length=65", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_validate(&cfg, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "4259840 samples per iteration") != NULL);
    CHECK_INT_EQ(calf_config_apply_param(&cfg, "TrainerConfig.unroll_length=64", &err), CALF_OK);
    CHECK_INT_EQ(calf_config_validate(&cfg, &err), CALF_OK);
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

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/calf_test_config_XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    test_defaults();
    test_parse_values();
    test_errors();
    test_includes();
    test_dump_and_digest();
    test_split();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmpdir);
    return test_report("test_config");
}
