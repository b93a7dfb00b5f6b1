/* test_oom_train.c: out of memory is a status, never an exit. Linked with
 * -Wl,--wrap=malloc,calloc,realloc,aligned_alloc: for k = 1, 2, ... the k-th allocation
 * of a stepwise run (open, two steps, a checkpoint, close) fails; every call must then
 * succeed or return a status saying "out of memory", and a fresh run in the same process
 * must still write the reference run's checkpoint bytes (the sanitizer build checks that
 * the failure paths free what they took). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calf/trainer.h"
#include "test_files.h"
#include "test_util.h"

/* ---- the allocation shim ------------------------------------------------------------ */

void *__real_malloc(size_t n);
void *__real_calloc(size_t count, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);

static bool armed;       /* counting the run's allocations */
static long counted;     /* allocations since arming */
static long fail_at;     /* the one to fail (1-based), 0: none */
static bool failed;      /* fail_at was reached and failed */
/* Whether this allocation is the one to fail. */
static bool fail_now(void) {
    if (!armed || ++counted != fail_at) return false;
    failed = true;
    return true;
}

void *__wrap_malloc(size_t n) {
    return fail_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t count, size_t size) {
    return fail_now() ? NULL : __real_calloc(count, size);
}

void *__wrap_realloc(void *p, size_t n) {
    return fail_now() ? NULL : __real_realloc(p, n);
}

void *__wrap_aligned_alloc(size_t align, size_t n) {
    return fail_now() ? NULL : __real_aligned_alloc(align, n);
}

/* ---- runs ----------------------------------------------------------------------------- */

static const char ppo_conf[] =
    "create_environment.env_name = 'CartPole-v1'\n"
    "create_environment.num_parallel_environments = 2\n"
    "TrainerConfig.random_seed = 3\n"
    "TrainerConfig.unroll_length = 4\n"
    "TrainerConfig.mini_batch_size = 4\n"
    "TrainerConfig.num_updates_per_train_iter = 1\n"
    "TrainerConfig.num_iterations = 2\n"
    "TrainerConfig.num_checkpoints = 1\n"
    "TrainerConfig.evaluate = True\n"
    "TrainerConfig.eval_interval = 2\n"
    "TrainerConfig.num_eval_episodes = 2\n"
    "TrainerConfig.summary_interval = 1\n"
    "TrainerConfig.normalize_observations = True\n"
    "ActorDistributionNetwork.fc_layer_params = (8,)\n"
    "ValueNetwork.fc_layer_params = (8,)\n";

static const char sac_conf[] =
    "import alf.algorithms.sac_algorithm\n"
    "create_environment.env_name = 'Pendulum-v1'\n"
    "create_environment.num_parallel_environments = 2\n"
    "TrainerConfig.algorithm_ctor = @SacAlgorithm\n"
    "TrainerConfig.random_seed = 3\n"
    "TrainerConfig.initial_collect_steps = 4\n"
    "TrainerConfig.unroll_length = 4\n"
    "TrainerConfig.mini_batch_length = 2\n"
    "TrainerConfig.mini_batch_size = 4\n"
    "TrainerConfig.num_updates_per_train_iter = 1\n"
    "TrainerConfig.replay_buffer_length = 16\n"
    "TrainerConfig.num_iterations = 2\n"
    "TrainerConfig.num_checkpoints = 1\n"
    "TrainerConfig.evaluate = True\n"
    "TrainerConfig.eval_interval = 2\n"
    "TrainerConfig.num_eval_episodes = 1\n"
    "TrainerConfig.summary_interval = 1\n"
    "actor/ActorDistributionNetwork.fc_layer_params = (8,)\n"
    "critic/CriticNetwork.joint_fc_layer_params = (8,)\n";

static char base[256]; /* the test's temporary dir */

/* A status of an armed call: CALF_OK, or a failure that says it ran out of memory. */
static bool status_ok(const char *what, long k, int rc, const calf_error *err) {
    if (rc == CALF_OK) return true;
    if (strstr(err->msg, "out of memory") == NULL) {
        fprintf(stderr, "allocation %ld: %s returned %d without saying out of memory: %s\n", k,
                what, rc, err->msg);
        CHECK(false);
    }
    return false;
}

/* Open, two steps, a checkpoint, close, in a fresh root dir; *ckpt: the final checkpoint's
 * bytes when every call succeeded (else NULL). With k > 0 the k-th allocation fails.
 * Returns the allocations counted. */
static long run(const char *conf, const char *name, long k, unsigned char **ckpt, size_t *len) {
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/%s-%ld", base, name, k);
    rm_rf(dir);
    calf_trainer_options o = CALF_TRAINER_OPTIONS_INIT;
    o.root_dir = dir;
    o.conf_text = conf;
    o.quiet = true;
    calf_error err;
    calf_error_clear(&err);
    calf_trainer *t = NULL;
    counted = 0;
    fail_at = k;
    failed = false;
    armed = true;
    bool ok = status_ok("calf_trainer_open", k, calf_trainer_open(&o, &t, &err), &err);
    CHECK(ok == (t != NULL)); /* a failed open leaves nothing to close */
    for (int i = 0; ok && i < 2; i++)
        ok = status_ok("calf_trainer_step", k, calf_trainer_step(t, &err), &err);
    if (ok) ok = status_ok("calf_trainer_checkpoint", k, calf_trainer_checkpoint(t, &err), &err);
    calf_error close_err;
    calf_error_clear(&close_err);
    if (t && !status_ok("calf_trainer_close", k, calf_trainer_close(t, &close_err), &close_err))
        ok = false;
    armed = false;
    long n = counted;
    *ckpt = NULL;
    snprintf(path, sizeof path, "%s/train/algorithm/ckpt-2", dir);
    if (ok) *ckpt = read_file(path, len);
    rm_rf(dir);
    return n;
}

/* Every allocation of the run in turn fails; then a run with nothing failing. */
static void test_every_allocation(const char *conf, const char *name) {
    unsigned char *ref = NULL;
    size_t ref_len = 0;
    long total = run(conf, name, 0, &ref, &ref_len);
    CHECK(ref != NULL && total > 0);
    if (!ref) return;
    long failures = 0;
    for (long k = 1; k <= total + 1; k++) {
        unsigned char *got = NULL;
        size_t len = 0;
        long n = run(conf, name, k, &got, &len);
        if (n < k) { /* the run made fewer than k allocations: none was left to fail */
            free(got);
            break;
        }
        failures += failed;
        /* whatever failed, the process goes on: a fresh run writes the reference bytes */
        unsigned char *again = NULL;
        size_t again_len = 0;
        run(conf, name, 0, &again, &again_len);
        bool same = again && again_len == ref_len && memcmp(again, ref, ref_len) == 0;
        if (!same)
            fprintf(stderr, "%s: after failing allocation %ld the fresh run differs\n", name, k);
        CHECK(same);
        free(again);
        free(got);
    }
    printf("%s: %ld allocations, each failed in turn\n", name, total);
    CHECK_INT_EQ(failures, total); /* every one of the run's allocations was failed once */
    free(ref);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(base, sizeof base, "%s/calf_test_oom_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(base)) {
        perror("mkdtemp");
        return 1;
    }
    test_every_allocation(ppo_conf, "ppo");
    test_every_allocation(sac_conf, "sac");
    rm_rf(base);
    return test_report("test_oom_train");
}
