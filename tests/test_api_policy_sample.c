/* test_api_policy_sample.c: calf_policy_sample (calf/policy.h) draws from the policy's
 * distribution among the actions a mask allows, per sub-action for MultiDiscrete, on the
 * tests' action envs (tests/action_envs.c, the plug-in CALF_ACTION_ENVS names). PPO
 * trained with learning rate 0 keeps its initial networks, whose biases are 0, so on an
 * all-zero observation every logit is 0 and the distribution is known: uniform over the
 * valid actions of each sub-action. Each frequency check is also run on the greedy
 * actions (a sampler that forgot to sample) and must reject them. Public API only. */
#include "calf/policy.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calf/env.h"
#include "calf/train.h"
#include "test_files.h"
#include "test_util.h"

enum { N = 12000, MAXA = 8 };

static char tmp_root[256];

/* Train tests/data/actions/GIN for one iteration at learning rate 0 on ENV; returns the root. */
static const char *train_lr0(const char *name, const char *gin, const char *env, char *root,
                             size_t cap) {
    join(root, cap, tmp_root, name);
    char conf[1024], env_param[128];
    join(conf, sizeof conf, CALF_SOURCE_DIR "/tests/data/actions", gin);
    snprintf(env_param, sizeof env_param, "create_environment.env_name='%s'", env);
    const char *params[] = {"Adam.lr=0.0", "TrainerConfig.num_iterations=1", env_param};
    calf_train_options o;
    memset(&o, 0, sizeof o);
    o.root_dir = root;
    o.conf_path = conf;
    o.conf_params = params;
    o.num_conf_params = 3;
    o.nproc = 1;
    o.quiet = true;
    calf_error err;
    calf_error_clear(&err);
    int rc = calf_train(&o, &err);
    if (rc != CALF_OK) fprintf(stderr, "train %s: %s\n", name, err.msg);
    CHECK_INT_EQ(rc, CALF_OK);
    return root;
}

/* Whether column d of acts (N rows of D ints) looks drawn from p (w choices): each count
 * within 5 standard deviations of N p, and exactly N p where p is 0 or 1. */
static bool drawn_from(const int *acts, int D, int d, const double *p, int w) {
    int count[MAXA] = {0};
    for (int r = 0; r < N; r++) {
        int a = acts[(size_t)r * D + d];
        if (a < 0 || a >= w) return false;
        count[a]++;
    }
    for (int j = 0; j < w; j++) {
        double mean = N * p[j], sd = sqrt(N * p[j] * (1 - p[j]));
        if (sd == 0 ? count[j] != (int)mean : fabs(count[j] - mean) >= 5 * sd) return false;
    }
    return true;
}

/* Sample and greedy of N zero rows under one mask row repeated (or none). */
static void act_both(calf_policy *p, const uint8_t *mask_row, int *sampled, int *greedy) {
    int od = calf_policy_obs_dim(p), nA = calf_policy_num_actions(p);
    float *obs = calloc((size_t)N * od, sizeof *obs);
    uint8_t *mask = mask_row ? malloc((size_t)N * nA) : NULL;
    CHECK(obs != NULL && (!mask_row || mask != NULL));
    for (int r = 0; mask && r < N; r++) memcpy(mask + (size_t)r * nA, mask_row, (size_t)nA);
    calf_error err;
    CHECK_INT_EQ(calf_policy_seed(p, 11, &err), CALF_OK);
    CHECK_INT_EQ(calf_policy_sample(p, obs, mask, N, sampled, NULL, &err), CALF_OK);
    CHECK_INT_EQ(calf_policy_greedy_masked(p, obs, mask, N, greedy, NULL, &err), CALF_OK);
    free(obs);
    free(mask);
}

static void check_masked(const char *root) {
    calf_policy *p;
    calf_error err;
    CHECK_INT_EQ(calf_policy_open(root, NULL, &p, &err), CALF_OK);
    CHECK_INT_EQ(calf_policy_stochastic(p), 1);
    CHECK_INT_EQ(calf_policy_num_actions(p), 4);
    int *s = malloc(N * sizeof *s), *g = malloc(N * sizeof *g);
    CHECK(s != NULL && g != NULL);
    const double all[4] = {0.25, 0.25, 0.25, 0.25}, two[4] = {0.5, 0, 0.5, 0},
                 last[4] = {0, 0, 0, 1};
    act_both(p, NULL, s, g);
    CHECK(drawn_from(s, 1, 0, all, 4));
    CHECK(!drawn_from(g, 1, 0, all, 4)); /* planted: the greedy actions */
    const uint8_t m02[4] = {1, 0, 1, 0}, m3[4] = {0, 0, 0, 1};
    act_both(p, m02, s, g);
    CHECK(drawn_from(s, 1, 0, two, 4));
    CHECK(!drawn_from(g, 1, 0, two, 4));
    act_both(p, m3, s, g);
    CHECK(drawn_from(s, 1, 0, last, 4));
    /* a mask that allows nothing is refused before anything is drawn */
    const uint8_t none[4] = {0, 0, 0, 0};
    float obs[3] = {0};
    CHECK_INT_EQ(calf_policy_sample(p, obs, none, 1, s, NULL, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "calf_policy_sample: row 0's mask allows no action") != NULL);
    CHECK_INT_EQ(calf_policy_sample(p, obs, NULL, 1, NULL, NULL, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "actions is NULL") != NULL);
    calf_policy_close(p);
    /* a closed or NULL handle is refused, never read through */
    CHECK_INT_EQ(calf_policy_seed(p, 1, &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_policy_sample(p, obs, NULL, 1, s, NULL, &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_policy_sample(NULL, obs, NULL, 1, s, NULL, &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_policy_stochastic(NULL), -1);
    free(s);
    free(g);
}

static void check_multi(const char *root, bool masked) {
    calf_policy *p;
    calf_error err;
    CHECK_INT_EQ(calf_policy_open(root, NULL, &p, &err), CALF_OK);
    CHECK_INT_EQ(calf_policy_action_dims(p), 2);
    int *s = malloc(2 * N * sizeof *s), *g = malloc(2 * N * sizeof *g);
    CHECK(s != NULL && g != NULL);
    const double third[3] = {1.0 / 3, 1.0 / 3, 1.0 / 3}, half[2] = {0.5, 0.5},
                 first2[3] = {0.5, 0.5, 0}, one[2] = {0, 1};
    if (!masked) {
        act_both(p, NULL, s, g);
        CHECK(drawn_from(s, 2, 0, third, 3));
        CHECK(drawn_from(s, 2, 1, half, 2));
        CHECK(!drawn_from(g, 2, 0, third, 3));
        /* the sub-actions are drawn independently: each of the 6 pairs about 1/6 */
        int pair[N];
        for (int r = 0; r < N; r++) pair[r] = s[2 * r] * 2 + s[2 * r + 1];
        const double sixth[6] = {1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6};
        CHECK(drawn_from(pair, 1, 0, sixth, 6));
    } else {
        const uint8_t m[5] = {1, 1, 0, 0, 1};
        act_both(p, m, s, g);
        CHECK(drawn_from(s, 2, 0, first2, 3));
        CHECK(drawn_from(s, 2, 1, one, 2));
        CHECK(!drawn_from(g, 2, 0, first2, 3));
        const uint8_t bad[5] = {1, 1, 0, 0, 0}; /* the second sub-action's slice empty */
        float obs[8] = {0};
        CHECK_INT_EQ(calf_policy_sample(p, obs, bad, 1, s, NULL, &err), CALF_EINVAL);
        CHECK(strstr(err.msg, "of a sub-action") != NULL);
    }
    free(s);
    free(g);
    calf_policy_close(p);
}

int main(void) {
    const char *lib = getenv("CALF_ACTION_ENVS");
    if (!lib || !*lib) {
        printf("skipped: CALF_ACTION_ENVS does not name the action_envs plug-in\n");
        return 77;
    }
    calf_error err;
    if (calf_env_load_library(lib, &err) != CALF_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    snprintf(tmp_root, sizeof tmp_root, "/tmp/calf_test_api_policy_sample_XXXXXX");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        return 1;
    }
    char masked[512], multi[512], mmulti[512];
    train_lr0("masked", "ppo_masked_choice.gin", "Test/MaskedChoice-v0", masked, sizeof masked);
    train_lr0("multi", "ppo_multi_choice.gin", "Test/MultiChoice-v0", multi, sizeof multi);
    train_lr0("mmulti", "ppo_multi_choice.gin", "Test/MaskedMultiChoice-v0", mmulti,
              sizeof mmulti);
    check_masked(masked);
    check_multi(multi, false);
    check_multi(mmulti, true);
    rm_rf(tmp_root);
    return test_report("test_api_policy_sample");
}
