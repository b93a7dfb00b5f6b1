/* test_api_policy.c: the public calf_policy (calf/policy.h) acts as `calf play` does,
 * bit for bit: on short trained runs (PPO CartPole, PPO Pendulum with observations
 * normalized, SAC Pendulum) its greedy actions equal the rows calf_play's dump_actions
 * writes, for played episodes and for observations far out of range, in one batch and
 * row by row; a recurrent PPO policy's per-row state and resets likewise. Also its
 * sizes, opening by checkpoint file, its errors, and calf_play's and calf_export's report
 * going to the caller's stream. */
#include "calf/policy.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calf/testing.h"
#include "calf/train.h"
#include "test_files.h"
#include "test_util.h"

static char tmp_root[256];

/* Train examples/CONF with the given overrides into DIR/name; returns the root. */
static const char *train(const char *name, const char *conf, const char *const *params, int n,
                         char *root, size_t cap) {
    join(root, cap, tmp_root, name);
    char conf_path[1024];
    join(conf_path, sizeof conf_path, CALF_SOURCE_DIR "/examples", conf);
    calf_train_options o;
    memset(&o, 0, sizeof o);
    o.root_dir = root;
    o.conf_path = conf_path;
    o.conf_params = params;
    o.num_conf_params = n;
    o.nproc = 1;
    o.quiet = true;
    calf_error err;
    calf_error_clear(&err);
    int rc = calf_train(&o, &err);
    if (rc != CALF_OK) fprintf(stderr, "train %s: %s\n", name, err.msg);
    CHECK_INT_EQ(rc, CALF_OK);
    return root;
}

/* A dump_actions file: rows of od observation floats, then the action (one int, or ad
 * floats); %.9g reads back as the same float. */
typedef struct dump {
    int rows, od, ad;
    float *obs;  /* (rows, od) */
    int *act;    /* (rows) discrete */
    float *u;    /* (rows, ad) continuous */
} dump;

static void read_dump(const char *path, int od, int ad, dump *d) {
    memset(d, 0, sizeof *d);
    d->od = od;
    d->ad = ad;
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f) return;
    char *line = NULL;
    size_t cap = 0;
    int room = 0;
    while (getline(&line, &cap, f) > 0) {
        if (d->rows == room) {
            room = room ? 2 * room : 256;
            d->obs = realloc(d->obs, (size_t)room * od * sizeof(float));
            d->act = realloc(d->act, (size_t)room * sizeof(int));
            d->u = realloc(d->u, (size_t)room * (ad ? ad : 1) * sizeof(float));
            if (!d->obs || !d->act || !d->u) exit(1);
        }
        char *s = line, *end;
        for (int i = 0; i < od; i++, s = end) d->obs[(size_t)d->rows * od + i] = strtof(s, &end);
        if (ad == 0) d->act[d->rows] = (int)strtol(s, &end, 10);
        for (int i = 0; i < ad; i++, s = end) d->u[(size_t)d->rows * ad + i] = strtof(s, &end);
        d->rows++;
    }
    free(line);
    fclose(f);
}

static void free_dump(dump *d) {
    free(d->obs);
    free(d->act);
    free(d->u);
}

/* calf_policy's actions on d's observations are d's actions, bit for bit, in one batch
 * and one row at a time. */
static void check_actions(calf_policy *p, const dump *d) {
    calf_error err;
    calf_error_clear(&err);
    CHECK(d->rows > 0);
    int ad = d->ad;
    int *act = calloc((size_t)d->rows, sizeof(int));
    float *u = calloc((size_t)d->rows * (ad ? ad : 1), sizeof(float));
    CHECK_INT_EQ(calf_policy_greedy(p, d->obs, d->rows, ad ? NULL : act, ad ? u : NULL, &err), CALF_OK);
    if (ad == 0) CHECK(memcmp(act, d->act, (size_t)d->rows * sizeof(int)) == 0);
    else CHECK(memcmp(u, d->u, (size_t)d->rows * ad * sizeof(float)) == 0);
    int same = 1;
    for (int r = 0; r < d->rows; r++) {
        int a1 = -1;
        float u1[8];
        CHECK_INT_EQ(calf_policy_greedy(p, d->obs + (size_t)r * d->od, 1, &a1, u1, &err), CALF_OK);
        same &= ad == 0 ? a1 == d->act[r] : memcmp(u1, d->u + (size_t)r * ad, ad * sizeof(float)) == 0;
    }
    CHECK(same);
    free(act);
    free(u);
}

/* For run root: calf_play's dump of 3 episodes, and of their observations times 10 and
 * times -1000 (saturating every tanh, clipping normalized observations), against
 * calf_policy on the same rows. The report goes to a stream of the test's. */
static void check_run(const char *root, const char *env_name, int od, int ad) {
    calf_error err;
    calf_error_clear(&err);
    calf_policy *p = NULL;
    CHECK_INT_EQ(calf_policy_open(root, NULL, &p, &err), CALF_OK);
    if (!p) {
        fprintf(stderr, "%s: %s\n", root, err.msg);
        return;
    }
    CHECK_STR_EQ(calf_policy_env_name(p), env_name);
    CHECK_INT_EQ(calf_policy_obs_dim(p), od);
    CHECK_INT_EQ(calf_policy_discrete(p), ad == 0);
    CHECK_INT_EQ(calf_policy_action_dim(p), ad);
    CHECK_INT_EQ(calf_policy_num_actions(p), ad == 0 ? 2 : 0);
    CHECK(strstr(calf_policy_checkpoint(p), "/train/algorithm/ckpt-") != NULL);
    CHECK_INT_EQ(calf_policy_state_size(p), 0);
    CHECK_INT_EQ(calf_policy_reset(p, 5, NULL, &err), CALF_OK); /* no memory: nothing to do */

    char dump_path[1024], far_path[1024], far_dump[1024];
    join(dump_path, sizeof dump_path, root, "play.txt");
    join(far_path, sizeof far_path, root, "far.obs");
    join(far_dump, sizeof far_dump, root, "far.txt");
    FILE *report = tmpfile();
    CHECK(report != NULL);
    calf_play_options o;
    memset(&o, 0, sizeof o);
    o.root_dir = root;
    o.num_episodes = 3;
    o.seed = 5;
    o.out = report;
    calf_play_testing t = {.dump_actions = dump_path};
    CHECK_INT_EQ(calf_play_for_testing(&o, &t, &err), CALF_OK);
    rewind(report);
    char text[4096] = "";
    size_t got = fread(text, 1, sizeof text - 1, report);
    text[got] = '\0';
    CHECK(strstr(text, "average return over 3 episodes") != NULL);
    fclose(report);

    dump d, far;
    read_dump(dump_path, od, ad, &d);
    check_actions(p, &d);
    FILE *f = fopen(far_path, "w");
    CHECK(f != NULL);
    for (int r = 0; r < d.rows && f; r++)
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < od; i++)
                fprintf(f, "%.9g%c", (double)(d.obs[(size_t)r * od + i] * (k ? -1000.0f : 10.0f)),
                        i + 1 < od ? ' ' : '\n');
    if (f) CHECK(fclose(f) == 0);
    t.observations = far_path;
    t.dump_actions = far_dump;
    o.out = tmpfile();
    CHECK_INT_EQ(calf_play_for_testing(&o, &t, &err), CALF_OK);
    fclose(o.out);
    read_dump(far_dump, od, ad, &far);
    CHECK_INT_EQ(far.rows, 2 * d.rows);
    check_actions(p, &far);
    free_dump(&d);
    free_dump(&far);

    /* rows 0 writes nothing; bad arguments are refused */
    CHECK_INT_EQ(calf_policy_greedy(p, NULL, 0, NULL, NULL, &err), CALF_OK);
    float obs[8] = {0}, u[8];
    int act;
    CHECK_INT_EQ(calf_policy_greedy(p, obs, -1, &act, u, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "rows = -1") != NULL);
    CHECK_INT_EQ(calf_policy_greedy(p, NULL, 1, &act, u, &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_policy_greedy(p, obs, 1, ad ? &act : NULL, ad ? NULL : u, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, ad ? "cont_actions is NULL" : "actions is NULL") != NULL);
    calf_policy_close(p);
}

/* A policy with memory (recurrent PPO, an LSTM, continuous actions so that every bit
 * shows): calf_play's dump of 3 episodes (every step one greedy call of 3 rows) replayed
 * through a fresh handle, 3 rows a call, gives its actions bit for bit (the first call
 * resets the rows itself; so does calf_policy_reset). A row reset alone (calf_policy_reset
 * with which) then acts as a fresh handle's single row on that row's observations, while
 * the others keep their state and play's actions; the same without the row's reset
 * (planted: an episode start missed) differs from the fresh row. Sampling steps the same
 * state (reset and reseeded, it draws the same again; not reset, planted, it does not). */
static void check_recurrent(const char *root) {
    calf_error err;
    calf_error_clear(&err);
    calf_policy *p = NULL, *q = NULL;
    CHECK_INT_EQ(calf_policy_open(root, NULL, &p, &err), CALF_OK);
    CHECK_INT_EQ(calf_policy_open(root, NULL, &q, &err), CALF_OK);
    if (!p || !q) return;
    CHECK_INT_EQ(calf_policy_state_size(p), 2 * 8); /* the LSTM's h and c */
    enum { N = 3 };
    int od = calf_policy_obs_dim(p);
    char dump_path[1024];
    join(dump_path, sizeof dump_path, root, "play.txt");
    calf_play_options o;
    memset(&o, 0, sizeof o);
    o.root_dir = root;
    o.num_episodes = N;
    o.seed = 5;
    o.out = tmpfile();
    calf_play_testing t = {.dump_actions = dump_path};
    CHECK_INT_EQ(calf_play_for_testing(&o, &t, &err), CALF_OK);
    fclose(o.out);
    dump d;
    read_dump(dump_path, od, 1, &d);
    int groups = d.rows / N;
    CHECK(groups >= 8 && d.rows % N == 0);
    float u[N], u1;
    bool same = true;
    for (int g = 0; g < groups; g++) {
        CHECK_INT_EQ(calf_policy_greedy(p, d.obs + (size_t)g * N * od, N, NULL, u, &err), CALF_OK);
        same &= memcmp(u, d.u + (size_t)g * N, sizeof u) == 0;
    }
    CHECK(same);
    /* row 1 starts over at step 4 (its env ended and was reset), rows 0 and 2 go on */
    for (int planted = 0; planted <= 1; planted++) {
        CHECK_INT_EQ(calf_policy_reset(p, N, NULL, &err), CALF_OK);
        CHECK_INT_EQ(calf_policy_reset(q, 1, NULL, &err), CALF_OK);
        bool others = true, fresh = true;
        for (int g = 0; g < 8; g++) {
            static const uint8_t which[N] = {0, 1, 0};
            if (g == 4 && !planted) CHECK_INT_EQ(calf_policy_reset(p, N, which, &err), CALF_OK);
            CHECK_INT_EQ(calf_policy_greedy(p, d.obs + (size_t)g * N * od, N, NULL, u, &err), CALF_OK);
            others &= memcmp(&u[0], &d.u[(size_t)g * N], sizeof u1) == 0 &&
                      memcmp(&u[2], &d.u[(size_t)g * N + 2], sizeof u1) == 0;
            if (g < 4) continue;
            CHECK_INT_EQ(calf_policy_greedy(q, d.obs + ((size_t)g * N + 1) * od, 1, NULL, &u1, &err),
                         CALF_OK);
            fresh &= memcmp(&u[1], &u1, sizeof u1) == 0;
        }
        CHECK(others);
        CHECK(planted ? !fresh : fresh);
    }
    /* sampling steps the same state: from a reset and a seed it draws the same actions
     * again, row 0 as a fresh one-row handle's (stream (seed, 0)); without the reset
     * (planted: the state carried over) it does not */
    float us[8][N];
    for (int pass = 0; pass < 3; pass++) {
        if (pass != 2) CHECK_INT_EQ(calf_policy_reset(p, N, NULL, &err), CALF_OK);
        CHECK_INT_EQ(calf_policy_seed(p, 9, &err), CALF_OK);
        CHECK_INT_EQ(calf_policy_reset(q, 1, NULL, &err), CALF_OK);
        CHECK_INT_EQ(calf_policy_seed(q, 9, &err), CALF_OK);
        bool again = true, row0 = true;
        for (int g = 0; g < 8; g++) {
            CHECK_INT_EQ(calf_policy_sample(p, d.obs + (size_t)g * N * od, NULL, N, NULL, u, &err),
                         CALF_OK);
            CHECK_INT_EQ(calf_policy_sample(q, d.obs + (size_t)g * N * od, NULL, 1, NULL, &u1, &err),
                         CALF_OK);
            row0 &= memcmp(&u[0], &u1, sizeof u1) == 0;
            if (pass == 0) memcpy(us[g], u, sizeof u);
            again &= memcmp(us[g], u, sizeof u) == 0;
        }
        CHECK(pass == 2 ? !again : again);
        CHECK(row0 || pass == 2);
    }
    /* the state's rows bound the calls and the row resets */
    float big[4 * 8] = {0}, ub[4];
    uint8_t which4[4] = {1, 0, 0, 0};
    CHECK_INT_EQ(calf_policy_greedy(p, big, 4, NULL, ub, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "calf_policy_reset(p, 4, NULL) first") != NULL);
    CHECK_INT_EQ(calf_policy_reset(p, 4, which4, &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_policy_reset(p, -1, NULL, &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_policy_reset(p, 4, NULL, &err), CALF_OK);
    CHECK_INT_EQ(calf_policy_greedy(p, big, 4, NULL, ub, &err), CALF_OK);
    free_dump(&d);
    calf_policy_close(p);
    calf_policy_close(q);
}

/* calf_export's text, without -o, goes to the caller's stream. */
static void check_export_stream(const char *root) {
    calf_error err;
    calf_error_clear(&err);
    FILE *f = tmpfile();
    CHECK(f != NULL);
    calf_export_options o;
    memset(&o, 0, sizeof o);
    o.root_dir = root;
    o.out = f;
    CHECK_INT_EQ(calf_export(&o, &err), CALF_OK);
    rewind(f);
    char head[200] = "";
    size_t got = fread(head, 1, sizeof head - 1, f);
    head[got] = '\0';
    CHECK(strncmp(head, "/* The greedy policy of a calf run", 34) == 0);
    fclose(f);
}

/* A checkpoint file opens alone (its run is three levels up); errors leave *out NULL. */
static void check_open(const char *cartpole, const char *pendulum) {
    calf_error err;
    calf_error_clear(&err);
    char ckpt[1024];
    join(ckpt, sizeof ckpt, cartpole, "train/algorithm/ckpt-1");
    calf_policy *p = NULL;
    CHECK_INT_EQ(calf_policy_open(NULL, ckpt, &p, &err), CALF_OK);
    if (p) {
        CHECK_INT_EQ(calf_policy_iteration(p), 1);
        CHECK_STR_EQ(calf_policy_checkpoint(p), ckpt);
    }
    calf_policy_close(p);
    CHECK_INT_EQ(calf_policy_open(cartpole, NULL, &p, &err), CALF_OK);
    if (p) CHECK_INT_EQ(calf_policy_iteration(p), 3);
    /* misuse (calf/policy.h): a closed handle is refused, never read through; a second
     * close does nothing; NULL is refused the same way */
    calf_policy_close(p);
    calf_policy_close(p);
    calf_policy_close(NULL);
    float row[4] = {0};
    int act = 7;
    CHECK_INT_EQ(calf_policy_greedy(p, row, 1, &act, NULL, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "not an open policy") != NULL);
    CHECK_INT_EQ(act, 7);
    CHECK_INT_EQ(calf_policy_greedy(NULL, row, 1, &act, NULL, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "calf_policy_greedy: the policy is NULL") != NULL);
    CHECK_INT_EQ(calf_policy_obs_dim(p), -1);
    CHECK_INT_EQ(calf_policy_discrete(p), -1);
    CHECK_INT_EQ(calf_policy_num_actions(NULL), -1);
    CHECK_INT_EQ(calf_policy_action_dim(p), -1);
    CHECK_INT_EQ(calf_policy_iteration(p), -1);
    CHECK(calf_policy_env_name(p) == NULL && calf_policy_checkpoint(NULL) == NULL);
    CHECK_INT_EQ(calf_policy_open(cartpole, NULL, NULL, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "out is NULL") != NULL);

    p = (calf_policy *)&err;
    char missing[1024];
    join(missing, sizeof missing, tmp_root, "nothing_here");
    CHECK_INT_EQ(calf_policy_open(missing, NULL, &p, &err), CALF_EINVAL);
    CHECK(p == NULL);
    CHECK(strstr(err.msg, "nothing_here/config.gin") != NULL);
    CHECK_INT_EQ(calf_policy_open(NULL, NULL, &p, &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_policy_open(NULL, "ckpt-1", &p, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "ckpt-1: not in a run dir") != NULL);
    /* a checkpoint of another run's config */
    CHECK_INT_EQ(calf_policy_open(pendulum, ckpt, &p, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "does not belong to the config") != NULL);
    CHECK(p == NULL);
    /* a damaged checkpoint: its first 100 bytes, in a run of the same config */
    char bad[1024], dir[1100], bad_ckpt[1100], conf[1100], bad_conf[1100];
    join(bad, sizeof bad, tmp_root, "bad");
    join(dir, sizeof dir, bad, "train");
    CHECK(mkdir(bad, 0755) == 0 && mkdir(dir, 0755) == 0);
    join(dir, sizeof dir, bad, "train/algorithm");
    CHECK(mkdir(dir, 0755) == 0);
    join(bad_ckpt, sizeof bad_ckpt, dir, "ckpt-1");
    join(conf, sizeof conf, cartpole, "config.gin");
    join(bad_conf, sizeof bad_conf, bad, "config.gin");
    size_t n = 0, m = 0;
    unsigned char *c = read_file(conf, &n), *k = read_file(ckpt, &m);
    CHECK(c && k && m > 100);
    if (c && k) {
        CHECK(write_file(bad_conf, c, n) == 0);
        CHECK(write_file(bad_ckpt, k, 100) == 0);
    }
    free(c);
    free(k);
    CHECK(calf_policy_open(NULL, bad_ckpt, &p, &err) != CALF_OK);
    CHECK(p == NULL);
    CHECK(strstr(err.msg, "ckpt-1") != NULL);
}

int main(void) {
    snprintf(tmp_root, sizeof tmp_root, "/tmp/calf_test_api_policy_XXXXXX");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        return 1;
    }
    char cartpole[512], pendulum[512], sac[512], lstm[512];
    const char *ppo_cp[] = {"TrainerConfig.num_iterations=3", "TrainerConfig.evaluate=False"};
    const char *ppo_pd[] = {"TrainerConfig.num_iterations=2", "TrainerConfig.num_env_steps=0",
                            "TrainerConfig.evaluate=False", "TrainerConfig.normalize_observations=True",
                            "ObservationNormalizer.clipping=3.0"};
    const char *sac_pd[] = {"TrainerConfig.num_iterations=300", "TrainerConfig.num_env_steps=0",
                            "TrainerConfig.initial_collect_steps=100", "TrainerConfig.evaluate=False"};
    train("ppo_cartpole", "ppo_cartpole.gin", ppo_cp, 2, cartpole, sizeof cartpole);
    train("ppo_pendulum", "ppo_pendulum.gin", ppo_pd, 5, pendulum, sizeof pendulum);
    train("sac_pendulum", "sac_pendulum.gin", sac_pd, 4, sac, sizeof sac);
    const char *lstm_pd[] = {"TrainerConfig.num_iterations=2", "TrainerConfig.evaluate=False",
                             "create_environment.env_name='PendulumNoVel-v1'",
                             "ActorDistributionNetwork.lstm_hidden_size=8",
                             "ValueNetwork.lstm_hidden_size=6"};
    train("ppo_lstm", "ppo_lstm_cartpole_novel.gin", lstm_pd, 5, lstm, sizeof lstm);
    check_run(cartpole, "CartPole-v1", 4, 0);
    check_run(pendulum, "Pendulum-v1", 3, 1);
    check_run(sac, "Pendulum-v1", 3, 1);
    check_recurrent(lstm);
    check_export_stream(cartpole);
    check_open(cartpole, pendulum);
    rm_rf(tmp_root);
    return test_report("test_api_policy");
}
