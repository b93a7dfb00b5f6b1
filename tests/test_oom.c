/* test_oom.c: running out of memory in the public API is a status, never an exit or a
 * crash. Linked with -Wl,--wrap=malloc,calloc,realloc (CMakeLists.txt), so every
 * allocation libcalf makes comes through here: for k = 1, 2, ... the k-th allocation of a
 * call fails, the call must return CALF_ENOMEM saying "out of memory" (or succeed, when
 * what failed was optional), and the same call with nothing failing must then give the
 * bytes the first clean call gave. Under the sanitizer build (detect_leaks=1) this also
 * shows that no failure path leaks. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calf/config.h"
#include "calf/env.h"
#include "calf/plot.h"
#include "calf/policy.h"
#include "calf/summary.h"
#include "calf/testing.h"
#include "calf/train.h"
#include "calf/vec_env.h"
#include "test_files.h"
#include "test_util.h"

/* ---- the allocation shim ---------------------------------------------------------- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t count, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t count, size_t size);
void *__wrap_realloc(void *p, size_t n);

static struct {
    bool counting;  /* inside the call under test */
    long calls;     /* allocations counted since counting began */
    long fail_at;   /* the allocation that fails (1-based); 0: none */
    bool failed;    /* the armed one was reached and failed */
} shim;

static bool shim_fails(void) {
    if (!shim.counting) return false;
    if (++shim.calls != shim.fail_at) return false;
    shim.failed = true;
    return true;
}

void *__wrap_malloc(size_t n) { return shim_fails() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t count, size_t size) {
    return shim_fails() ? NULL : __real_calloc(count, size);
}
void *__wrap_realloc(void *p, size_t n) { return shim_fails() ? NULL : __real_realloc(p, n); }

/* ---- one public call, run armed and clean --------------------------------------- */

/* A call under test: writes what it produced on out (the bytes compared), returns its
 * status with err filled. */
typedef int (*call_fn)(FILE *out, calf_error *err);

static char tmp_root[256];

/* Runs fn with allocation fail_at failing (0: none); *text is its output (caller frees). */
static int run_call(call_fn fn, long fail_at, char **text, size_t *len, calf_error *err) {
    FILE *out = open_memstream(text, len);
    if (!out) {
        perror("open_memstream");
        exit(1);
    }
    calf_error_clear(err);
    shim.calls = 0;
    shim.fail_at = fail_at;
    shim.failed = false;
    shim.counting = true;
    int rc = fn(out, err);
    shim.counting = false;
    if (fclose(out) != 0) {
        perror("fclose");
        exit(1);
    }
    return rc;
}

/* The whole check for one call; returns how many allocations were failed. */
static long check_call(const char *name, call_fn fn) {
    char *want = NULL;
    size_t want_len = 0;
    calf_error err;
    int rc = run_call(fn, 0, &want, &want_len, &err);
    if (rc != CALF_OK) fprintf(stderr, "%s: %s\n", name, err.msg);
    CHECK_INT_EQ(rc, CALF_OK);
    long clean_calls = shim.calls;
    CHECK(want_len > 0);
    long k = 1, failures = 0, optional = 0;
    char first[sizeof err.msg] = "";
    for (; k < 100000; k++) {
        char *got = NULL;
        size_t got_len = 0;
        rc = run_call(fn, k, &got, &got_len, &err);
        bool reached = shim.failed;
        if (!reached) {
            free(got);
            break; /* the call made fewer than k allocations: all were tried */
        }
        if (rc == CALF_OK) {
            /* what failed was optional: the result is the clean one all the same */
            optional++;
            bool same = got_len == want_len && memcmp(got, want, want_len) == 0;
            if (!same) fprintf(stderr, "%s: allocation %ld failed: succeeded with other output\n",
                               name, k);
            CHECK(same);
        } else {
            if (failures++ == 0) snprintf(first, sizeof first, "%s", err.msg);
            if (rc != CALF_ENOMEM || !strstr(err.msg, "out of memory")) {
                fprintf(stderr, "%s: allocation %ld failed: status %d, \"%s\"\n", name, k, rc,
                        err.msg);
                CHECK_INT_EQ(rc, CALF_ENOMEM);
                CHECK(strstr(err.msg, "out of memory") != NULL);
            }
        }
        free(got);
        /* the host goes on: the same call again, with nothing failing, gives the same */
        got = NULL;
        got_len = 0;
        rc = run_call(fn, 0, &got, &got_len, &err);
        if (rc != CALF_OK) fprintf(stderr, "%s after allocation %ld failed: %s\n", name, k, err.msg);
        CHECK_INT_EQ(rc, CALF_OK);
        bool same = got_len == want_len && memcmp(got, want, want_len) == 0;
        if (!same) fprintf(stderr, "%s after allocation %ld failed: other output\n", name, k);
        CHECK(same);
        free(got);
    }
    CHECK(k < 100000);
    CHECK_INT_EQ(k - 1, clean_calls); /* every allocation of the clean call was failed once */
    fprintf(stderr, "%s: %ld allocations, %ld failed with CALF_ENOMEM, %ld optional", name,
            clean_calls, failures, optional);
    fprintf(stderr, "\n  first: %s\n", first);
    free(want);
    return failures;
}

/* ---- the calls ----------------------------------------------------------------- */

static char run_a[512], run_b[512], events_file[1024], gin_file[512], out_file[512],
    obs_file[512];

static int put_bytes(FILE *out, const void *p, size_t n) {
    return fwrite(p, 1, n, out) == n ? CALF_OK : CALF_EIO;
}

/* open, reset, 40 steps with actions of the row and the step, close */
static int vec_env_steps(const char *env, int first, int count, FILE *out, calf_error *err) {
    calf_vec_env *v = NULL;
    int rc = calf_vec_env_open(env, NULL, 11, first, count, &v, err);
    if (rc != CALF_OK) return rc;
    int od = calf_vec_env_obs_dim(v), ad = calf_vec_env_action_dim(v);
    float obs[64], final_obs[64], reward[8], u[8];
    int act[8];
    uint8_t term[8], trunc[8];
    CALF_ASSERT(count <= 8 && od * count <= 64 && ad * count <= 8);
    rc = calf_vec_env_reset(v, obs, err);
    if (rc == CALF_OK) rc = put_bytes(out, obs, sizeof(float) * (size_t)(od * count));
    for (int t = 0; t < 40 && rc == CALF_OK; t++) {
        for (int i = 0; i < count; i++) act[i] = (t + i) % 2;
        for (int i = 0; i < ad * count; i++) u[i] = (float)((t * 7 + i) % 5) - 2.0f;
        rc = calf_vec_env_step(v, act, u, obs, reward, term, trunc, final_obs, err);
        if (rc == CALF_OK) rc = put_bytes(out, obs, sizeof(float) * (size_t)(od * count));
        if (rc == CALF_OK) rc = put_bytes(out, final_obs, sizeof(float) * (size_t)(od * count));
        if (rc == CALF_OK) rc = put_bytes(out, reward, sizeof(float) * (size_t)count);
        if (rc == CALF_OK) rc = put_bytes(out, term, (size_t)count);
        if (rc == CALF_OK) rc = put_bytes(out, trunc, (size_t)count);
    }
    calf_vec_env_close(v);
    return rc;
}

static int call_vec_env_cartpole(FILE *out, calf_error *err) {
    return vec_env_steps("CartPole-v1", 3, 5, out, err);
}

static int call_vec_env_pendulum(FILE *out, calf_error *err) {
    return vec_env_steps("Pendulum-v1", 0, 3, out, err);
}

static int call_env_init(FILE *out, calf_error *err) {
    calf_env env;
    int rc = calf_env_init(&env, "Pendulum-v1", 5, 2, err);
    if (rc != CALF_OK) return rc;
    float obs[3], reward, u = 0.5f;
    int term, trunc;
    calf_env_reset(&env, obs);
    rc = put_bytes(out, obs, sizeof obs);
    for (int t = 0; t < 10 && rc == CALF_OK; t++) {
        calf_env_step(&env, 0, &u, obs, &reward, &term, &trunc);
        rc = put_bytes(out, obs, sizeof obs);
    }
    calf_env_free(&env);
    return rc;
}

static int call_config_file(FILE *out, calf_error *err) {
    calf_config *cfg = calf_config_new(err);
    if (!cfg) return err->status;
    int rc = calf_config_parse_file(cfg, CALF_SOURCE_DIR "/examples/ppo_cartpole.gin", err);
    if (rc == CALF_OK) rc = calf_config_write(cfg, out, "# test");
    calf_config_free(cfg);
    return rc;
}

static int call_config_string(FILE *out, calf_error *err) {
    char text[1024];
    snprintf(text, sizeof text, "include '%s'\nTrainerConfig.num_iterations = 7\n", gin_file);
    calf_config *cfg = calf_config_new(err);
    if (!cfg) return err->status;
    int rc = calf_config_parse_string(cfg, text, "<test>", err);
    if (rc == CALF_OK) rc = calf_config_write(cfg, out, "# test");
    calf_config_free(cfg);
    return rc;
}

static int call_events_dump(FILE *out, calf_error *err) {
    const char *paths[1] = {events_file};
    calf_events_dump_options opt = {true, false, NULL};
    return calf_events_dump(paths, 1, &opt, out, err);
}

static int call_summary_writer(FILE *out, calf_error *err) {
    char dir[600];
    join(dir, sizeof dir, tmp_root, "writer");
    rm_rf(dir);
    calf_summary_writer *w = calf_summary_writer_open(dir, 0, err);
    if (!w) return err->status;
    float values[300];
    for (int i = 0; i < 300; i++) values[i] = (float)(i % 17) - 8.5f;
    for (int s = 1; s <= 3; s++) {
        calf_summary_writer_add_scalar(w, "Metrics/AverageReturn", s, 1e9 + s, 10.0 * s);
        calf_summary_writer_add_histogram(w, "Weights/a_rather_long_tag_name", s, 1e9 + s,
                                          values, 300);
    }
    calf_summary_writer_add_session_start(w, 2, 1e9 + 4);
    char path[1200];
    snprintf(path, sizeof path, "%s", calf_summary_writer_path(w));
    int rc = calf_summary_writer_close(w, err);
    if (rc != CALF_OK) return rc;
    /* read back with nothing failing: what reached the file, not the reader, is checked */
    bool was = shim.counting;
    shim.counting = false;
    const char *paths[1] = {path};
    calf_events_dump_options opt = {true, false, NULL};
    rc = calf_events_dump(paths, 1, &opt, out, err);
    shim.counting = was;
    return rc;
}

static int call_plot(FILE *out, calf_error *err) {
    const char *roots[2] = {run_a, run_b};
    const char *tags[2] = {"train:Metrics/AverageReturn", "Metrics/AverageEpisodeLength"};
    calf_plot_options opt = {tags, 2, 0.6, CALF_PLOT_X_STEPS, true, NULL};
    return calf_plot(roots, 2, &opt, out, err);
}

static int call_policy(FILE *out, calf_error *err) {
    calf_policy *p = NULL;
    int rc = calf_policy_open(run_a, NULL, &p, err);
    if (rc != CALF_OK) return rc;
    float obs[6 * 4];
    for (int i = 0; i < 6 * 4; i++) obs[i] = (float)((i * 37) % 11) / 10.0f - 0.5f;
    int act[6];
    /* a row, then six: the second call grows the handle's scratch */
    rc = calf_policy_greedy(p, obs, 1, act, NULL, err);
    if (rc == CALF_OK) rc = calf_policy_greedy(p, obs, 6, act, NULL, err);
    if (rc == CALF_OK) rc = put_bytes(out, act, sizeof act);
    calf_policy_close(p);
    return rc;
}

/* out_file's bytes on out, read with nothing failing; it must not exist after a failure */
static int copy_out_file(int rc, FILE *out) {
    size_t n = 0;
    bool was = shim.counting;
    shim.counting = false;
    unsigned char *data = read_file(out_file, &n);
    shim.counting = was;
    if (rc != CALF_OK) {
        CHECK(data == NULL); /* a failed call leaves no file */
        free(data);
        return rc;
    }
    CHECK(data != NULL);
    if (data) rc = put_bytes(out, data, n);
    free(data);
    unlink(out_file);
    return rc;
}

static int call_play(FILE *out, calf_error *err) {
    calf_play_options o;
    memset(&o, 0, sizeof o);
    o.root_dir = run_a;
    o.num_episodes = 2;
    o.seed = 3;
    o.out = out;
    calf_play_testing t = {.dump_actions = out_file};
    unlink(out_file);
    return copy_out_file(calf_play_for_testing(&o, &t, err), out);
}

/* calf play --observations: greedy actions for the rows of a file */
static int call_play_observations(FILE *out, calf_error *err) {
    calf_play_options o;
    memset(&o, 0, sizeof o);
    o.root_dir = run_a;
    o.num_episodes = 1;
    o.out = out;
    calf_play_testing t = {.dump_actions = out_file, .observations = obs_file};
    unlink(out_file);
    return copy_out_file(calf_play_for_testing(&o, &t, err), out);
}

static int call_export(FILE *out, calf_error *err) {
    calf_export_options o;
    memset(&o, 0, sizeof o);
    o.root_dir = run_a;
    o.output = out_file;
    unlink(out_file);
    return copy_out_file(calf_export(&o, err), out);
}

/* ---- set-up: two short runs whose events and checkpoints the calls read --------- */

static void train(const char *root) {
    static const char *const params[] = {"TrainerConfig.num_iterations=2"};
    calf_train_options o;
    memset(&o, 0, sizeof o);
    o.root_dir = root;
    o.conf_path = CALF_SOURCE_DIR "/examples/ppo_cartpole.gin";
    o.conf_params = params;
    o.num_conf_params = 1;
    o.nproc = 1;
    o.quiet = true;
    calf_error err;
    calf_error_clear(&err);
    int rc = calf_train(&o, &err);
    if (rc != CALF_OK) fprintf(stderr, "train %s: %s\n", root, err.msg);
    CHECK_INT_EQ(rc, CALF_OK);
}

static void find_events_file(const char *root) {
    char dir[600];
    join(dir, sizeof dir, root, "train");
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (!strncmp(e->d_name, "events.out.tfevents.", 20)) join(events_file, sizeof events_file, dir, e->d_name);
    closedir(d);
    CHECK(events_file[0] != '\0');
}

int main(void) {
    snprintf(tmp_root, sizeof tmp_root, "/tmp/calf_test_oom_XXXXXX");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        return 1;
    }
    join(run_a, sizeof run_a, tmp_root, "cartpole-seed1");
    join(run_b, sizeof run_b, tmp_root, "cartpole-seed2");
    join(gin_file, sizeof gin_file, tmp_root, "included.gin");
    join(out_file, sizeof out_file, tmp_root, "out.txt");
    join(obs_file, sizeof obs_file, tmp_root, "observations.txt");
    train(run_a);
    train(run_b);
    find_events_file(run_a);
    FILE *g = fopen(gin_file, "w");
    CHECK(g != NULL);
    if (g) {
        fprintf(g, "include '%s/examples/ppo_cartpole.gin'\n", CALF_SOURCE_DIR);
        CHECK_INT_EQ(fclose(g), 0);
    }
    FILE *o = fopen(obs_file, "w");
    CHECK(o != NULL);
    if (o) {
        for (int r = 0; r < 70; r++) /* past the reader's first 64 rows */
            fprintf(o, "%g %g %g %g\n", r * 0.01 - 0.3, 0.5 - r * 0.02, r % 3 * 0.05, -0.1 * (r % 4));
        CHECK_INT_EQ(fclose(o), 0);
    }
    if (test_failures == 0) {
        /* each converted entry point fails cleanly at each of its allocations */
        CHECK(check_call("calf_vec_env CartPole", call_vec_env_cartpole) > 0);
        CHECK(check_call("calf_vec_env Pendulum", call_vec_env_pendulum) > 0);
        CHECK(check_call("calf_env_init", call_env_init) > 0);
        CHECK(check_call("calf_config_parse_file", call_config_file) > 0);
        CHECK(check_call("calf_config_parse_string", call_config_string) > 0);
        CHECK(check_call("calf_events_dump", call_events_dump) > 0);
        CHECK(check_call("calf_summary_writer", call_summary_writer) > 0);
        CHECK(check_call("calf_plot", call_plot) > 0);
        /* these load the algorithm, whose modules may not all be converted yet */
        CHECK(check_call("calf_policy", call_policy) > 0);
        CHECK(check_call("calf_play", call_play) > 0);
        CHECK(check_call("calf_play --observations", call_play_observations) > 0);
        CHECK(check_call("calf_export", call_export) > 0);
    }
    rm_rf(tmp_root);
    return test_report("test_oom");
}
