/* test_trainer.c: the trainer treats checkpoints as untrusted input. Files with a valid
 * CRC but contents no training run could have written (counters that disagree with the
 * iteration, non-finite parameters, a dead random stream, a spliced header) are refused
 * with a message naming the file, by resume and by play, instead of training on them. */
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>

#include "calf/train.h"
#include "records/checkpoint.h"
#include "test_files.h"
#include "test_util.h"

static char root[256];

static int train_to(const char *dir, int iterations, calf_error *err) {
    char conf[512], iters[64];
    join(conf, sizeof conf, root, "small.gin");
    snprintf(iters, sizeof iters, "TrainerConfig.num_iterations=%d", iterations);
    const char *params[] = {iters};
    calf_train_options o = {.root_dir = dir, .conf_path = conf, .conf_params = params,
                            .num_conf_params = 1, .nproc = 1, .quiet = true};
    return calf_train(&o, err);
}

/* Root dir `name` holding the run's config and a ckpt-2 made from the good payload with
 * `patch` applied (CRC recomputed, so only the contents are wrong). */
static void make_bad_run(const char *name, const unsigned char *good, size_t n, uint64_t digest,
                         void (*patch)(unsigned char *p, size_t n), char *dir, size_t cap) {
    join(dir, cap, root, name);
    char alg[512], path[600], conf_src[512], conf_dst[600];
    join(alg, sizeof alg, dir, "train/algorithm");
    unsigned char *p = malloc(n);
    memcpy(p, good, n);
    patch(p, n);
    calf_error err;
    join(path, sizeof path, alg, "ckpt-2");
    CHECK_INT_EQ(ckpt_write_atomic(path, digest, 2, p, n, &err), CALF_OK);
    free(p);
    char a_conf[512];
    join(a_conf, sizeof a_conf, root, "a");
    join(conf_src, sizeof conf_src, a_conf, "config.gin");
    join(conf_dst, sizeof conf_dst, dir, "config.gin");
    size_t cn;
    unsigned char *text = read_file(conf_src, &cn);
    CHECK(text != NULL);
    if (text) CHECK_INT_EQ(write_file(conf_dst, text, cn), 0);
    free(text);
}

/* payload layout (trainer_checkpoint.c, then PPO's sections): "META" u32 layout,
 * i64 iteration @8, i64 env_steps @16, i64 episodes @24, u64 E @32, u64 head size @40,
 * "PRMS" @48, u64 count @52, floats @60 ..., i64 adam_step, moments; "ENVS";
 * the last 32 bytes are the last env's shuffle stream */
static void put_i64(unsigned char *p, int64_t v) {
    for (int k = 0; k < 8; k++) p[k] = (unsigned char)((uint64_t)v >> (8 * k));
}
static void patch_env_steps(unsigned char *p, size_t n) { (void)n; put_i64(p + 16, 12345); }
static void patch_iteration(unsigned char *p, size_t n) { (void)n; put_i64(p + 8, 3); }
static void patch_huge(unsigned char *p, size_t n) { (void)n; put_i64(p + 8, INT64_MAX); }
static void patch_nan(unsigned char *p, size_t n) {
    (void)n;
    float x = NAN;
    memcpy(p + 60 + 4 * 5, &x, 4);
}
static void patch_rng(unsigned char *p, size_t n) { memset(p + n - 32, 0, 32); }

static void expect_refused(const char *dir, const char *what) {
    calf_error err;
    calf_error_clear(&err);
    CHECK_INT_EQ(train_to(dir, 3, &err), CALF_EINVAL);
    if (!strstr(err.msg, what) || !strstr(err.msg, "ckpt-2")) {
        fprintf(stderr, "resume of %s: got '%s', want '%s' naming ckpt-2\n", dir, err.msg, what);
        CHECK(0);
    }
    char next[600];
    join(next, sizeof next, dir, "train/algorithm/ckpt-3");
    struct stat st;
    CHECK(stat(next, &st) != 0); /* nothing trained on it */
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/calf_test_trainer_XXXXXX");
    if (!mkdtemp(root)) { perror("mkdtemp"); return 1; }
    char conf[512];
    join(conf, sizeof conf, root, "small.gin");
    const char *gin = "create_environment.num_parallel_environments = 4\n"
                      "TrainerConfig.unroll_length = 8\n"
                      "TrainerConfig.mini_batch_size = 16\n"
                      "TrainerConfig.num_updates_per_train_iter = 2\n"
                      "ActorDistributionNetwork.fc_layer_params = (8,)\n"
                      "ValueNetwork.fc_layer_params = (8,)\n";
    CHECK_INT_EQ(write_file(conf, (const unsigned char *)gin, strlen(gin)), 0);

    char a[512], ck[600];
    join(a, sizeof a, root, "a");
    calf_error err;
    CHECK_INT_EQ(train_to(a, 2, &err), CALF_OK);
    join(ck, sizeof ck, a, "train/algorithm/ckpt-2");
    ckpt_header hdr;
    unsigned char *good = NULL;
    size_t n = 0;
    CHECK_INT_EQ(ckpt_read(ck, &hdr, &good, &n, &err), CALF_OK);
    if (!good) return test_report("test_trainer");

    char dir[512];
    struct { const char *name; void (*patch)(unsigned char *, size_t); const char *what; } cases[] = {
        {"steps", patch_env_steps, "counters do not match iteration 2"},
        {"iter", patch_iteration, "iteration 3 inside, 2 in the header"},
        {"huge", patch_huge, "in the header"},
        {"nan", patch_nan, "parameters are not finite"},
        {"rng", patch_rng, "all-zero random stream"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        make_bad_run(cases[i].name, good, n, hdr.digest, cases[i].patch, dir, sizeof dir);
        expect_refused(dir, cases[i].what);
    }
    /* play refuses the non-finite policy too */
    join(dir, sizeof dir, root, "nan");
    calf_play_options po = {.root_dir = dir, .num_episodes = 1};
    calf_error_clear(&err);
    CHECK_INT_EQ(calf_play(&po, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "parameters are not finite") != NULL);

    /* Beside an older good checkpoint, a CRC-valid newest one that no run could have
     * written is skipped like a damaged one, and the run goes on from the older to the
     * bytes of a run that never met it. (The random-stream case is in the env records,
     * which only the real load reads: that one is still refused.) */
    {
        char c[512], one_src[600], one_dst[600], ref[600], got[600];
        join(c, sizeof c, root, "c");
        CHECK_INT_EQ(train_to(c, 3, &err), CALF_OK);
        join(ref, sizeof ref, c, "train/algorithm/ckpt-3");
        join(one_src, sizeof one_src, a, "train/algorithm/ckpt-1");
        const char *skipped[] = {"steps", "nan"};
        for (size_t i = 0; i < 2; i++) {
            join(dir, sizeof dir, root, skipped[i]);
            join(one_dst, sizeof one_dst, dir, "train/algorithm/ckpt-1");
            size_t m = 0;
            unsigned char *bytes = read_file(one_src, &m);
            CHECK(bytes != NULL && write_file(one_dst, bytes, m) == 0);
            free(bytes);
            calf_error_clear(&err);
            CHECK_INT_EQ(train_to(dir, 3, &err), CALF_OK);
            join(got, sizeof got, dir, "train/algorithm/ckpt-3");
            CHECK(same_file(ref, got));
        }
    }

    /* Counters too big to compute are refused like wrong ones (no signed overflow): the
     * iteration before the last one a config may name, 10^12, with 10,240,000 updates per
     * iteration (a checkpoint at the run's end is not loaded: nothing to do) */
    {
        char big[512], bdir[512], alg[600], path[700], conf_param[64];
        join(big, sizeof big, root, "big.gin");
        const char *more = "TrainerConfig.unroll_length = 1024\n"
                           "TrainerConfig.mini_batch_size = 4\n"
                           "TrainerConfig.num_updates_per_train_iter = 10000\n";
        size_t gl = strlen(gin), ml = strlen(more);
        unsigned char *text = malloc(gl + ml);
        memcpy(text, gin, gl);
        memcpy(text + gl, more, ml);
        CHECK_INT_EQ(write_file(big, text, gl + ml), 0);
        free(text);
        const int64_t last = 1000000000000LL;
        snprintf(conf_param, sizeof conf_param, "TrainerConfig.num_iterations=%lld", (long long)last);
        const char *params[] = {conf_param};
        join(bdir, sizeof bdir, root, "big");
        calf_train_options o = {.root_dir = bdir, .conf_path = big, .conf_params = params,
                                .num_conf_params = 1, .nproc = 1, .quiet = true};
        calf_config *cfg = calf_config_new(&err);
        CHECK_INT_EQ(calf_train_load_config(&o, cfg, &err), CALF_OK);
        unsigned char *p = malloc(n);
        memcpy(p, good, n);
        put_i64(p + 8, last - 1);
        put_i64(p + 16, (last - 1) * 4 * 1024); /* right: E * T steps per iteration */
        /* and PPO's adam_step, whatever it holds, cannot be 10^12 * 10,240,000: that
         * does not fit in 64 bits */
        join(alg, sizeof alg, bdir, "train/algorithm");
        CHECK_INT_EQ(ckpt_path(path, sizeof path, alg, last - 1, &err), CALF_OK);
        CHECK_INT_EQ(ckpt_write_atomic(path, calf_config_digest(cfg), last - 1, p, n, &err), CALF_OK);
        free(p);
        calf_config_free(cfg);
        calf_error_clear(&err);
        CHECK_INT_EQ(calf_train(&o, &err), CALF_EINVAL);
        CHECK(strstr(err.msg, "counters do not match iteration 999999999999") != NULL);
    }

    /* while the unmodified run resumes (so the refusals above are about the patches) */
    CHECK_INT_EQ(train_to(a, 3, &err), CALF_OK);
    free(good);
    rm_rf(root);
    return test_report("test_trainer");
}
