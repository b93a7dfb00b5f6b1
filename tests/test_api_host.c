/* test_api_host.c: a host program that provokes, through the public API only, each kind
 * of failure a library must survive (an unknown env, a plug-in without its register
 * function, a damaged checkpoint, a bad config, MuJoCo out of memory) and after each one
 * runs a good job to completion in the same process, with the bytes of a clean run.
 * Allocation failures at every allocation of the public calls are test_oom's and
 * test_oom_train's (a link-time shim). */
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "calf/env.h"
#include "calf/policy.h"
#include "calf/trainer.h"
#include "calf/vec_env.h"
#include "test_files.h"
#include "test_util.h"

static char root[256];
static int runs = 0;

static const char conf_text[] =
    "create_environment.env_name = 'CartPole-v1'\n"
    "create_environment.num_parallel_environments = 4\n"
    "TrainerConfig.random_seed = 11\n"
    "TrainerConfig.unroll_length = 16\n"
    "TrainerConfig.mini_batch_size = 32\n"
    "TrainerConfig.num_updates_per_train_iter = 2\n"
    "TrainerConfig.num_iterations = 3\n"
    "TrainerConfig.num_checkpoints = 3\n"
    "ActorDistributionNetwork.fc_layer_params = (8,)\n"
    "ValueNetwork.fc_layer_params = (8,)\n";

/* Options for a quiet run of conf_text in dir. */
static calf_trainer_options run_options(const char *dir) {
    calf_trainer_options o = CALF_TRAINER_OPTIONS_INIT;
    o.root_dir = dir;
    o.conf_text = conf_text;
    o.quiet = true;
    return o;
}

static unsigned char *reference = NULL;
static size_t reference_len = 0;

/* A good job in a fresh root: opened, stepped to its end, closed; its last checkpoint
 * returned in dir's train/algorithm/ckpt-3. Checks it matches the first one's bytes. */
static void good_job(const char *why) {
    char dir[512], ckpt[600];
    snprintf(dir, sizeof dir, "%s/good_%d", root, runs++);
    calf_trainer_options o = run_options(dir);
    calf_trainer *t = NULL;
    calf_error err;
    int rc = calf_trainer_open(&o, &t, &err);
    CHECK_INT_EQ(rc, CALF_OK);
    if (rc != CALF_OK) {
        fprintf(stderr, "after %s: %s\n", why, err.msg);
        return;
    }
    while (!calf_trainer_done(t)) {
        rc = calf_trainer_step(t, &err);
        CHECK_INT_EQ(rc, CALF_OK);
        if (rc) break;
    }
    CHECK_INT_EQ(calf_trainer_close(t, &err), CALF_OK);
    join(ckpt, sizeof ckpt, dir, "train/algorithm/ckpt-3");
    size_t n = 0;
    unsigned char *bytes = read_file(ckpt, &n);
    CHECK(bytes != NULL);
    if (!reference) {
        reference = bytes;
        reference_len = n;
        return;
    }
    bool same = bytes && n == reference_len && memcmp(bytes, reference, n) == 0;
    if (!same) fprintf(stderr, "after %s: the good job's ckpt-3 differs from the first one's\n", why);
    CHECK(same);
    free(bytes);
}

static void unknown_env(void) {
    char dir[512];
    join(dir, sizeof dir, root, "unknown");
    calf_trainer_options o = run_options(dir);
    const char *p[] = {"create_environment.env_name='Nowhere-v9'"};
    o.conf_params = p;
    o.num_conf_params = 1;
    calf_trainer *t = NULL;
    calf_error err;
    CHECK_INT_EQ(calf_trainer_open(&o, &t, &err), CALF_EINVAL);
    CHECK(t == NULL && strstr(err.msg, "Nowhere-v9") != NULL);
    calf_vec_env *v = NULL;
    CHECK_INT_EQ(calf_vec_env_open("Nowhere-v9", NULL, 0, 0, 2, &v, &err), CALF_EINVAL);
    CHECK(v == NULL && strstr(err.msg, "Nowhere-v9") != NULL);
}

static void bad_config(void) {
    char dir[512];
    join(dir, sizeof dir, root, "bad_config");
    calf_trainer_options o = CALF_TRAINER_OPTIONS_INIT;
    o.root_dir = dir;
    o.conf_text = "TrainerConfig.unroll_length = 'sixteen'\n";
    o.quiet = true;
    calf_trainer *t = NULL;
    calf_error err;
    CHECK_INT_EQ(calf_trainer_open(&o, &t, &err), CALF_EINVAL);
    CHECK(t == NULL && strstr(err.msg, "<conf_text>:1") != NULL);
    struct stat st;
    CHECK(stat(dir, &st) != 0); /* nothing written for a config that does not load */
}

static void plugin_without_register(void) {
    calf_vec_env *v = NULL;
    calf_error err;
    CHECK_INT_EQ(calf_vec_env_open("Corridor-v0", CALF_TEST_PLUGIN_NOSYM, 0, 0, 2, &v, &err),
                 CALF_EINVAL);
    CHECK(v == NULL);
    CHECK(strstr(err.msg, "no function calf_plugin_register") != NULL);
}

/* The only checkpoint of a run damaged (a flipped byte): reopening refuses it, naming
 * it; the policy handle too. */
static void damaged_checkpoint(void) {
    char dir[512], ckpt[600];
    join(dir, sizeof dir, root, "damaged");
    calf_trainer_options o = run_options(dir);
    calf_trainer *t = NULL;
    calf_error err;
    CHECK_INT_EQ(calf_trainer_open(&o, &t, &err), CALF_OK);
    if (!t) return;
    CHECK_INT_EQ(calf_trainer_step(t, &err), CALF_OK);
    CHECK_INT_EQ(calf_trainer_checkpoint(t, &err), CALF_OK);
    CHECK_INT_EQ(calf_trainer_close(t, &err), CALF_OK);
    join(ckpt, sizeof ckpt, dir, "train/algorithm/ckpt-1");
    size_t n = 0;
    unsigned char *bytes = read_file(ckpt, &n);
    CHECK(bytes != NULL && n > 100);
    if (!bytes) return;
    bytes[n / 2] ^= 0x40;
    CHECK_INT_EQ(write_file(ckpt, bytes, n), 0);
    free(bytes);
    CHECK_INT_EQ(calf_trainer_open(&o, &t, &err), CALF_EINVAL);
    CHECK(t == NULL && strstr(err.msg, "ckpt-1") && strstr(err.msg, "CRC mismatch"));
    calf_policy *p = NULL;
    CHECK(calf_policy_open(dir, NULL, &p, &err) != CALF_OK);
    CHECK(p == NULL && strstr(err.msg, "ckpt-1") != NULL);
}

/* MuJoCo running out of memory while making envs (the address-space limit lowered):
 * a status with MuJoCo's message, and the same envs open once the limit is back. */
static void mujoco_out_of_memory(void) {
#if !CALF_HAVE_MUJOCO
    printf("MuJoCo case skipped: this build has no MuJoCo\n");
#elif defined(__SANITIZE_ADDRESS__)
    printf("MuJoCo case skipped under AddressSanitizer (its shadow memory is mapped)\n");
#else
    unsigned long long vm = vm_size();
    CHECK(vm > 0);
    struct rlimit old, low;
    CHECK(getrlimit(RLIMIT_AS, &old) == 0);
    low = old;
    low.rlim_cur = (rlim_t)(vm + (8u << 20)); /* room for a few of Hopper's 13 MiB */
    calf_vec_env *v = NULL;
    calf_error err;
    /* first while MuJoCo compiles the model (the process's first Hopper), then while it
     * makes each env's data (the model compiled) */
    for (int pass = 0; pass < 2; pass++) {
        /* more envs the second time than the heap kept from the first (13 MiB each) */
        int count = pass == 0 ? 64 : 256;
        CHECK(setrlimit(RLIMIT_AS, &low) == 0);
        int rc = calf_vec_env_open("Hopper-v4", NULL, 0, 0, count, &v, &err);
        CHECK(setrlimit(RLIMIT_AS, &old) == 0);
        if (rc != CALF_ENOMEM) fprintf(stderr, "Hopper-v4 under the limit: %d %s\n", rc, err.msg);
        CHECK_INT_EQ(rc, CALF_ENOMEM);
        CHECK(v == NULL && strstr(err.msg, "Hopper-v4") && strstr(err.msg, "MuJoCo") &&
              strstr(err.msg, "allocate"));
        CHECK(strstr(err.msg, pass == 0 ? "cannot compile" : "could not make an env's data"));
        CHECK_INT_EQ(calf_vec_env_open("Hopper-v4", NULL, 0, 0, 4, &v, &err), CALF_OK);
        calf_vec_env_close(v);
        v = NULL;
    }
#endif
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/calf_test_api_host.XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    good_job("nothing");
    unknown_env();
    good_job("an unknown env");
    bad_config();
    good_job("a bad config");
    plugin_without_register();
    good_job("a plug-in without calf_plugin_register");
    damaged_checkpoint();
    good_job("a damaged checkpoint");
    mujoco_out_of_memory();
    good_job("MuJoCo out of memory");
    free(reference);
    rm_rf(root);
    return test_report("test_api_host");
}
