/* test_obs_dtype.c: a CALF_DTYPE_U8 env's observations are kept as bytes (PPO's rollout,
 * DQN's replay and its checkpoint records) and read back as the floats they were, so a
 * byte env trains to the same bits as the same env declared float: MinAtar's Breakout
 * against a float twin, PPO on 1 and 2 processes (the rollout then in shared memory),
 * with and without observation normalization, recurrent PPO likewise (cut by a time
 * limit, so truncated steps' look-aheads read bytes too), and DQN; the checkpoints
 * compared. The byte class writes bytes, so its trainer steps a byte block and hands
 * the algorithms its bytes; the twin steps floats. */
#include <stdint.h>

#include "calf/env.h"
#include "calf/train.h"
#include "records/checkpoint.h"
#include "test_files.h"
#include "test_util.h"

/* MinAtar/Breakout-v1 with a float observation space: the same class otherwise; and
 * both cut at 9 steps (a time limit: truncated episodes, whose final observations a
 * recurrent value looks ahead at). */
static calf_env_class float_twin, u8_cut, float_cut;

/* The checkpoint's payload (caller frees), or NULL with a message. */
static unsigned char *payload_of(const char *ckpt, size_t *n) {
    ckpt_header hdr;
    unsigned char *p = NULL;
    calf_error err;
    if (ckpt_read(ckpt, &hdr, &p, n, &err) != CALF_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    return p;
}

/* Offset of the first occurrence of tag in p[0, n), or n. */
static size_t find_tag(const unsigned char *p, size_t n, const char *tag) {
    for (size_t i = 0; i + 4 <= n; i++)
        if (memcmp(p + i, tag, 4) == 0) return i;
    return n;
}

/* Train conf with the overrides on env, into root/name; the checkpoint's path in ckpt. */
static int train(const char *root, const char *name, const char *conf, const char *env,
                 const char *const *over, int nover, int nproc, const char *iters, char *ckpt,
                 size_t size) {
    char dir[512], env_param[128];
    join(dir, sizeof dir, root, name);
    snprintf(env_param, sizeof env_param, "create_environment.env_name='%s'", env);
    const char *params[16];
    int n = 0;
    params[n++] = env_param;
    for (int i = 0; i < nover && n < 16; i++) params[n++] = over[i];
    calf_train_options o = {.root_dir = dir, .conf_path = conf, .nproc = nproc, .quiet = true,
                            .conf_params = params, .num_conf_params = n};
    calf_error err;
    int rc = calf_train(&o, &err);
    if (rc != CALF_OK) fprintf(stderr, "%s on %s: %s\n", name, env, err.msg);
    snprintf(ckpt, size, "%s/train/algorithm/ckpt-%s", dir, iters);
    return rc;
}

/* PPO with conf's overrides (the last one "TrainerConfig.normalize_observations=False")
 * on env_u8 against its float twin env_f32, with and without normalization, on 1 and 2
 * processes: the checkpoints' payloads compared (PPO's holds no observations but the
 * envs' own: all of it the same). what names the case in runs (prefix_u8_..) and
 * messages. */
static void ppo_bytes_vs_floats(const char *root, const char *prefix, const char *what,
                                const char *env_u8, const char *env_f32,
                                const char *const *over, int nover) {
    const char *conf = CALF_SOURCE_DIR "/examples/ppo_cartpole.gin";
    CHECK(nover >= 1 && nover <= 15); /* train adds the env's to at most 16 */
    if (nover < 1 || nover > 15) return;
    for (int norm = 0; norm <= 1; norm++)
        for (int nproc = 1; nproc <= 2; nproc++) {
            const char *o2[15];
            memcpy(o2, over, (size_t)nover * sizeof *over);
            if (norm) o2[nover - 1] = "TrainerConfig.normalize_observations=True";
            char a[600], b[600], na[32], nb[32];
            snprintf(na, sizeof na, "%s_u8_%d_%d", prefix, norm, nproc);
            snprintf(nb, sizeof nb, "%s_f32_%d_%d", prefix, norm, nproc);
            CHECK_INT_EQ(train(root, na, conf, env_u8, o2, nover, nproc, "3", a, sizeof a),
                         CALF_OK);
            CHECK_INT_EQ(train(root, nb, conf, env_f32, o2, nover, nproc, "3", b, sizeof b),
                         CALF_OK);
            size_t la = 0, lb = 0;
            unsigned char *pa = payload_of(a, &la), *pb = payload_of(b, &lb);
            CHECK(pa && pb && la == lb && memcmp(pa, pb, la) == 0);
            if (pa && pb && (la != lb || memcmp(pa, pb, la) != 0))
                fprintf(stderr, "%s (normalize %d, nproc %d): bytes and floats trained apart\n",
                        what, norm, nproc);
            free(pa);
            free(pb);
        }
}

static void test_ppo(const char *root) {
    static const char *const over[] = {
        "TrainerConfig.num_iterations=3", "TrainerConfig.num_env_steps=0",
        "TrainerConfig.evaluate=False",   "TrainerConfig.num_checkpoints=1",
        "TrainerConfig.num_updates_per_train_iter=2", "TrainerConfig.mini_batch_size=64",
        "TrainerConfig.normalize_observations=False"};
    ppo_bytes_vs_floats(root, "ppo", "PPO", "MinAtar/Breakout-v1", "Breakout-f32", over,
                        (int)(sizeof over / sizeof over[0]));
}

/* Recurrent PPO (an LSTM actor, a GRU value): its rollout keeps bytes too, and the
 * look-ahead values of truncated and last steps read them back; on 1 and 2 processes,
 * with and without normalization, against the float twin, both cut by a time limit. */
static void test_ppo_recurrent(const char *root) {
    static const char *const over[] = {
        "TrainerConfig.num_iterations=3", "TrainerConfig.num_env_steps=0",
        "TrainerConfig.evaluate=False",   "TrainerConfig.num_checkpoints=1",
        "TrainerConfig.num_updates_per_train_iter=2", "TrainerConfig.unroll_length=16",
        "TrainerConfig.mini_batch_size=32", "ActorDistributionNetwork.lstm_hidden_size=8",
        "ActorDistributionNetwork.pre_fc_layer_params=(16,)", "ValueNetwork.gru_hidden_size=6",
        "TrainerConfig.normalize_observations=False"};
    ppo_bytes_vs_floats(root, "rppo", "recurrent PPO", "Breakout-u8-cut", "Breakout-f32-cut",
                        over, (int)(sizeof over / sizeof over[0]));
}

static void test_dqn(const char *root) {
    static const char *const over[] = {
        "create_environment.num_parallel_environments=2", "TrainerConfig.num_iterations=20",
        "TrainerConfig.num_env_steps=0", "TrainerConfig.initial_collect_steps=60",
        "TrainerConfig.replay_buffer_length=50", "TrainerConfig.mini_batch_size=16",
        "TrainerConfig.evaluate=False", "TrainerConfig.num_checkpoints=1",
        "DqnAlgorithm.target_update_period=3"};
    enum { NOVER = (int)(sizeof over / sizeof over[0]) };
    const char *conf = CALF_SOURCE_DIR "/examples/dqn_cartpole.gin";
    char a[600], b[600];
    CHECK_INT_EQ(train(root, "dqn_u8", conf, "MinAtar/Breakout-v1", over, NOVER, 1, "20", a,
                       sizeof a),
                 CALF_OK);
    CHECK_INT_EQ(train(root, "dqn_f32", conf, "Breakout-f32", over, NOVER, 1, "20", b, sizeof b),
                 CALF_OK);
    size_t la = 0, lb = 0;
    unsigned char *pa = payload_of(a, &la), *pb = payload_of(b, &lb);
    CHECK(pa && pb);
    if (pa && pb) {
        /* everything before the replay the same (the networks trained on what it gave
         * back); the byte replay's section its own, and smaller by 3 bytes a value */
        size_t ra = find_tag(pa, la, "RPL8"), rb = find_tag(pb, lb, "RPLC");
        CHECK(ra < la && ra == rb && memcmp(pa, pb, ra) == 0);
        /* 2 envs x 50 transitions x (obs and next obs of 400 values) x 3 bytes saved */
        CHECK_INT_EQ(lb - la, 2 * 50 * 2 * 400 * 3);
    }
    free(pa);
    free(pb);
    /* --nproc 2 writes the byte run's checkpoint bit for bit */
    char c[600];
    CHECK_INT_EQ(train(root, "dqn_u8_n2", conf, "MinAtar/Breakout-v1", over, NOVER, 2, "20", c,
                       sizeof c),
                 CALF_OK);
    size_t lc = 0;
    pa = payload_of(a, &la);
    unsigned char *pc = payload_of(c, &lc);
    CHECK(pa && pc && la == lc && memcmp(pa, pc, la) == 0);
    free(pa);
    free(pc);
}

int main(void) {
    const calf_env_class *cls = calf_env_find("MinAtar/Breakout-v1");
    CHECK(cls != NULL && cls->spec.obs_dtype == CALF_DTYPE_U8);
    if (!cls) return test_report("test_obs_dtype");
    float_twin = *cls;
    float_twin.spec.name = "Breakout-f32";
    memset(float_twin.spec.obs_shape, 0, sizeof float_twin.spec.obs_shape);
    float_twin.spec.obs_dtype = CALF_DTYPE_F32;
    float_twin.spec.obs_high = 0;
    /* a float observation has no byte hooks (the registry refuses them): the twin steps
     * as floats, the byte class as bytes */
    float_twin.reset_u8 = NULL, float_twin.step_u8 = NULL, float_twin.step_many_u8 = NULL;
    calf_error err;
    CHECK_INT_EQ(calf_env_register(&float_twin, &err), CALF_OK);
    u8_cut = *cls, float_cut = float_twin;
    u8_cut.spec.name = "Breakout-u8-cut", float_cut.spec.name = "Breakout-f32-cut";
    u8_cut.spec.max_episode_steps = float_cut.spec.max_episode_steps = 9;
    CHECK_INT_EQ(calf_env_register(&u8_cut, &err), CALF_OK);
    CHECK_INT_EQ(calf_env_register(&float_cut, &err), CALF_OK);
    char root[256];
    snprintf(root, sizeof root, "/tmp/calf_test_obs_dtype_XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    test_ppo(root);
    test_ppo_recurrent(root);
    test_dqn(root);
    rm_rf(root);
    return test_report("test_obs_dtype");
}
