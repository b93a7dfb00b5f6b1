/* test_api_trainer.c: the stepwise trainer (calf/trainer.h) through the public API only.
 * Each iteration's metrics come back as values; a run stepped to the end writes the
 * bytes calf_train writes; a checkpoint taken by hand resumes to the same bytes; bad
 * input fails with a message and leaves the process able to open the next run; misuse
 * (NULL handles and assignments, double close, step or close from the progress callback)
 * is refused; signal handlers are installed only when asked for. */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include "calf/train.h"
#include "calf/trainer.h"
#include "test_files.h"
#include "test_util.h"

static char root[256];

/* 8 CartPole envs of 16 steps, 4 iterations: a run of moments */
static const char conf_text[] =
    "create_environment.env_name = 'CartPole-v1'\n"
    "create_environment.num_parallel_environments = 8\n"
    "TrainerConfig.random_seed = 7\n"
    "TrainerConfig.unroll_length = 16\n"
    "TrainerConfig.mini_batch_size = 64\n"
    "TrainerConfig.num_updates_per_train_iter = 2\n"
    "TrainerConfig.num_iterations = 4\n"
    "TrainerConfig.num_checkpoints = 1\n"
    "ActorDistributionNetwork.fc_layer_params = (16,)\n"
    "ValueNetwork.fc_layer_params = (16,)\n";

/* Options for a quiet run of conf_text in dir. */
static calf_trainer_options run_options(const char *dir) {
    calf_trainer_options o = CALF_TRAINER_OPTIONS_INIT;
    o.root_dir = dir;
    o.conf_text = conf_text;
    o.quiet = true;
    return o;
}

static int progress_calls = 0;
static int64_t progress_last = 0;

static void on_progress(const calf_trainer_metrics *m, void *arg) {
    CHECK(arg == &progress_calls);
    progress_calls++;
    progress_last = m->iteration;
}

static const double *metric(const calf_trainer_metrics *m, const char *name) {
    for (int k = 0; k < m->num_algorithm_metrics; k++)
        if (!strcmp(m->algorithm_metric_names[k], name)) return &m->algorithm_metric_values[k];
    return NULL;
}

/* calf_train's run of conf_text, written as a file: the reference bytes */
static void reference_run(char *ckpt, size_t cap) {
    char conf[512], dir[512];
    join(conf, sizeof conf, root, "run.gin");
    FILE *f = fopen(conf, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(conf_text, f);
    fclose(f);
    join(dir, sizeof dir, root, "reference");
    calf_train_options o = {.root_dir = dir, .conf_path = conf, .nproc = 1, .quiet = true};
    calf_error err;
    CHECK_INT_EQ(calf_train(&o, &err), CALF_OK);
    join(ckpt, cap, dir, "train/algorithm/ckpt-4");
}

static void test_steps_and_bytes(const char *reference) {
    char dir[512];
    join(dir, sizeof dir, root, "stepwise");
    calf_trainer_options o = run_options(dir);
    o.progress = on_progress;
    o.progress_arg = &progress_calls;
    calf_trainer *t = NULL;
    calf_error err;
    CHECK_INT_EQ(calf_trainer_open(&o, &t, &err), CALF_OK);
    if (!t) return;
    CHECK(!calf_trainer_done(t));
    CHECK_INT_EQ(calf_trainer_iteration(t), 0);
    CHECK(calf_trainer_metrics_last(t) == NULL);
    int64_t episodes = 0;
    for (int i = 1; i <= 4; i++) {
        CHECK_INT_EQ(calf_trainer_step(t, &err), CALF_OK);
        const calf_trainer_metrics *m = calf_trainer_metrics_last(t);
        CHECK(m != NULL);
        if (!m) break;
        CHECK_INT_EQ(m->iteration, i);
        CHECK_INT_EQ(m->env_steps, (int64_t)i * 8 * 16);
        episodes += m->episodes;
        CHECK_INT_EQ(m->total_episodes, episodes);
        if (m->episodes > 0) {
            /* CartPole pays 1 a step: the average return is the average length */
            CHECK(m->average_return >= 1 && m->average_return <= 500);
            CHECK_NEAR(m->average_return, m->average_episode_length, 1e-9);
        } else {
            CHECK(isnan(m->average_return));
        }
        CHECK(isnan(m->eval_return)); /* TrainerConfig.evaluate is off */
        CHECK(m->steps_per_sec > 0);
        /* PPO's losses, as its summaries name them, every iteration (summary_interval 1) */
        const double *pg = metric(m, "PPOLoss/pg_loss"), *ent = metric(m, "PPOLoss/entropy");
        CHECK(pg != NULL && isfinite(*pg));
        /* a 2-action policy's entropy lies in (0, ln 2] */
        CHECK(ent != NULL && *ent > 0 && *ent <= log(2.0) + 1e-6);
        CHECK(metric(m, "Optimizer/grad_norm") != NULL);
        CHECK(metric(m, "Metrics/AverageReturn") == NULL); /* the trainer's are fields */
        CHECK_INT_EQ(progress_calls, i);
        CHECK_INT_EQ(progress_last, i);
        CHECK_INT_EQ(calf_trainer_iteration(t), i);
    }
    CHECK(episodes > 0);
    CHECK(calf_trainer_done(t));
    CHECK_INT_EQ(calf_trainer_step(t, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "is complete at iteration 4") != NULL);
    CHECK_INT_EQ(calf_trainer_close(t, &err), CALF_OK);

    char ckpt[600];
    join(ckpt, sizeof ckpt, dir, "train/algorithm/ckpt-4");
    CHECK(same_file(ckpt, reference));

    /* reopened, the run is complete: done at once, nothing to step */
    CHECK_INT_EQ(calf_trainer_open(&o, &t, &err), CALF_OK);
    if (!t) return;
    CHECK(calf_trainer_done(t));
    CHECK_INT_EQ(calf_trainer_iteration(t), 4);
    CHECK_INT_EQ(calf_trainer_step(t, &err), CALF_EINVAL);
    CHECK_INT_EQ(calf_trainer_close(t, &err), CALF_OK);
}

/* calf_train given the config as text writes the file's bytes, on one process and on
 * two; the config given both ways is refused, by calf_train and calf_trainer_open alike,
 * with nothing written. */
static void test_train_conf_text(const char *reference) {
    for (int nproc = 1; nproc <= 2; nproc++) {
        char dir[512], ckpt[600];
        join(dir, sizeof dir, root, nproc == 1 ? "text1" : "text2");
        calf_train_options o = {.root_dir = dir, .conf_text = conf_text, .nproc = nproc,
                                .quiet = true};
        calf_error err;
        CHECK_INT_EQ(calf_train(&o, &err), CALF_OK);
        join(ckpt, sizeof ckpt, dir, "train/algorithm/ckpt-4");
        CHECK(same_file(ckpt, reference));
    }
    char dir[512], conf[512];
    join(dir, sizeof dir, root, "twice");
    join(conf, sizeof conf, root, "run.gin");
    calf_train_options o = {.root_dir = dir, .conf_path = conf, .conf_text = conf_text,
                            .nproc = 1, .quiet = true};
    calf_error err;
    CHECK_INT_EQ(calf_train(&o, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "given twice") && strstr(err.msg, conf) && strstr(err.msg, "conf_text"));
    calf_trainer_options to = run_options(dir);
    to.conf_path = conf;
    calf_trainer *t = (calf_trainer *)&err;
    CHECK_INT_EQ(calf_trainer_open(&to, &t, &err), CALF_EINVAL);
    CHECK(t == NULL);
    CHECK(strstr(err.msg, "given twice") != NULL);
    struct stat st;
    CHECK(stat(dir, &st) != 0); /* refused before the root dir was made */
}

/* A checkpoint written by hand after iteration 2, reopened (the config now from the
 * run's own config.gin), resumes at 2 and ends on the reference's bytes. */
static void test_checkpoint_and_resume(const char *reference) {
    char dir[512];
    join(dir, sizeof dir, root, "by_hand");
    calf_trainer_options o = run_options(dir);
    calf_trainer *t = NULL;
    calf_error err;
    CHECK_INT_EQ(calf_trainer_open(&o, &t, &err), CALF_OK);
    if (!t) return;
    CHECK_INT_EQ(calf_trainer_step(t, &err), CALF_OK);
    CHECK_INT_EQ(calf_trainer_step(t, &err), CALF_OK);
    CHECK_INT_EQ(calf_trainer_checkpoint(t, &err), CALF_OK);
    char ckpt2[600];
    join(ckpt2, sizeof ckpt2, dir, "train/algorithm/ckpt-2");
    struct stat st;
    CHECK(stat(ckpt2, &st) == 0 && st.st_size > 0);
    CHECK_INT_EQ(calf_trainer_close(t, &err), CALF_OK);

    calf_trainer_options again = CALF_TRAINER_OPTIONS_INIT;
    again.root_dir = dir; /* no config: ROOT/config.gin */
    again.quiet = true;
    CHECK_INT_EQ(calf_trainer_open(&again, &t, &err), CALF_OK);
    if (!t) return;
    CHECK_INT_EQ(calf_trainer_iteration(t), 2);
    while (!calf_trainer_done(t)) CHECK_INT_EQ(calf_trainer_step(t, &err), CALF_OK);
    CHECK_INT_EQ(calf_trainer_close(t, &err), CALF_OK);
    char ckpt4[600];
    join(ckpt4, sizeof ckpt4, dir, "train/algorithm/ckpt-4");
    CHECK(same_file(ckpt4, reference));
}

/* Failures return a status with a message, take nothing with them, and the same
 * process opens a good run afterwards. */
static void test_errors(void) {
    char dir[512];
    join(dir, sizeof dir, root, "errors");
    calf_error err;
    calf_trainer *t = (calf_trainer *)&err; /* must come back NULL */

    calf_trainer_options bare;
    memset(&bare, 0, sizeof bare); /* not from CALF_TRAINER_OPTIONS_INIT */
    bare.root_dir = dir;
    CHECK_INT_EQ(calf_trainer_open(&bare, &t, &err), CALF_EINVAL);
    CHECK(t == NULL);
    CHECK(strstr(err.msg, "CALF_TRAINER_OPTIONS_INIT") != NULL);

    calf_trainer_options o = CALF_TRAINER_OPTIONS_INIT;
    o.quiet = true;
    o.conf_text = conf_text;
    CHECK_INT_EQ(calf_trainer_open(&o, &t, &err), CALF_EINVAL); /* no root dir */
    CHECK(strstr(err.msg, "root_dir") != NULL);

    o.root_dir = dir;
    o.conf_text = "TrainerConfig.num_iterations = 4\nTrainerConfig.no_such_thing = 3\n";
    CHECK_INT_EQ(calf_trainer_open(&o, &t, &err), CALF_EINVAL);
    CHECK(t == NULL);
    CHECK(strstr(err.msg, "<conf_text>:2") != NULL);

    o.conf_text = conf_text;
    const char *unknown[] = {"create_environment.env_name='NoSuchEnv-v0'"};
    o.conf_params = unknown;
    o.num_conf_params = 1;
    CHECK_INT_EQ(calf_trainer_open(&o, &t, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "NoSuchEnv-v0") != NULL);
    o.conf_params = NULL;
    o.num_conf_params = 0;

    /* a second trainer on the same root is refused while the first holds it */
    calf_trainer *first = NULL, *second = (calf_trainer *)&err;
    CHECK_INT_EQ(calf_trainer_open(&o, &first, &err), CALF_OK);
    CHECK(calf_trainer_open(&o, &second, &err) != CALF_OK);
    CHECK(second == NULL);
    CHECK(strstr(err.msg, "is in use by another run") && strstr(err.msg, "(calf_trainer_open)"));
    if (first) {
        CHECK_INT_EQ(calf_trainer_step(first, &err), CALF_OK);
        CHECK_INT_EQ(calf_trainer_close(first, &err), CALF_OK);
    }
    /* released at close: it opens again, resuming nothing (no checkpoint yet) */
    CHECK_INT_EQ(calf_trainer_open(&o, &second, &err), CALF_OK);
    if (second) {
        CHECK_INT_EQ(calf_trainer_iteration(second), 0);
        CHECK_INT_EQ(calf_trainer_close(second, &err), CALF_OK);
    }
    CHECK_INT_EQ(calf_trainer_close(NULL, &err), CALF_OK);
}

/* The progress callback misusing its trainer: step and close from inside it are refused
 * (the iteration is not over), and the run goes on after it returns. */
typedef struct {
    calf_trainer *t;
    int step_rc, close_rc, calls;
    char step_msg[1024], close_msg[1024];
} reentry;

static void on_progress_reenter(const calf_trainer_metrics *m, void *arg) {
    (void)m;
    reentry *r = arg;
    calf_error err;
    r->calls++;
    r->step_rc = calf_trainer_step(r->t, &err);
    snprintf(r->step_msg, sizeof r->step_msg, "%s", err.msg);
    r->close_rc = calf_trainer_close(r->t, &err);
    snprintf(r->close_msg, sizeof r->close_msg, "%s", err.msg);
}

/* Misuse of the handles and options (include/calf/trainer.h, train.h): each a status
 * and a message, never a crash or a read of freed memory. */
static void test_misuse(void) {
    char dir[512];
    join(dir, sizeof dir, root, "misuse");
    calf_error err;
    /* NULL handles */
    CHECK_INT_EQ(calf_trainer_step(NULL, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "calf_trainer_step") && strstr(err.msg, "NULL"));
    CHECK_INT_EQ(calf_trainer_checkpoint(NULL, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "calf_trainer_checkpoint") && strstr(err.msg, "NULL"));
    CHECK(calf_trainer_done(NULL));
    CHECK_INT_EQ(calf_trainer_iteration(NULL), -1);
    CHECK(calf_trainer_metrics_last(NULL) == NULL);
    calf_trainer_options o = run_options(dir);
    CHECK_INT_EQ(calf_trainer_open(&o, NULL, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "out") && strstr(err.msg, "NULL"));
    calf_trainer *t = (calf_trainer *)&err;
    CHECK_INT_EQ(calf_trainer_open(NULL, &t, &err), CALF_EINVAL);
    CHECK(t == NULL);

    /* a NULL assignment, a negative count, a count without the array */
    const char *with_null[] = {"TrainerConfig.random_seed = 3", NULL};
    o.conf_params = with_null;
    o.num_conf_params = 2;
    CHECK_INT_EQ(calf_trainer_open(&o, &t, &err), CALF_EINVAL);
    CHECK(t == NULL && strstr(err.msg, "conf_params[1] is NULL"));
    o.num_conf_params = -1;
    CHECK_INT_EQ(calf_trainer_open(&o, &t, &err), CALF_EINVAL);
    CHECK(t == NULL && strstr(err.msg, "num_conf_params -1"));
    o.conf_params = NULL;
    o.num_conf_params = 1;
    CHECK_INT_EQ(calf_trainer_open(&o, &t, &err), CALF_EINVAL);
    CHECK(t == NULL && strstr(err.msg, "conf_params is NULL"));
    char conf[512];
    join(conf, sizeof conf, root, "run.gin"); /* reference_run's */
    calf_train_options to = {.root_dir = dir, .conf_path = conf, .nproc = 1, .quiet = true,
                             .conf_params = with_null, .num_conf_params = 2};
    CHECK_INT_EQ(calf_train(&to, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "conf_params[1] is NULL") != NULL);
    to.num_conf_params = -3;
    CHECK_INT_EQ(calf_train(&to, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "num_conf_params -3") != NULL);
    o.conf_params = NULL;
    o.num_conf_params = 0;

    /* step and close from inside the progress callback */
    reentry r;
    memset(&r, 0, sizeof r);
    o.progress = on_progress_reenter;
    o.progress_arg = &r;
    CHECK_INT_EQ(calf_trainer_open(&o, &t, &err), CALF_OK);
    if (!t) return;
    r.t = t;
    CHECK_INT_EQ(calf_trainer_step(t, &err), CALF_OK);
    CHECK_INT_EQ(r.calls, 1);
    CHECK_INT_EQ(r.step_rc, CALF_EINVAL);
    CHECK(strstr(r.step_msg, "progress callback") != NULL);
    CHECK_INT_EQ(r.close_rc, CALF_EINVAL);
    CHECK(strstr(r.close_msg, "progress callback") != NULL);
    CHECK_INT_EQ(calf_trainer_iteration(t), 1); /* one iteration, not nested ones */
    CHECK_INT_EQ(calf_trainer_step(t, &err), CALF_OK);
    CHECK_INT_EQ(r.calls, 2);
    CHECK_INT_EQ(calf_trainer_iteration(t), 2);

    /* double close: the second is refused, and so is any use of the closed handle */
    CHECK_INT_EQ(calf_trainer_close(t, &err), CALF_OK);
    CHECK_INT_EQ(calf_trainer_close(t, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "not an open trainer") != NULL);
    CHECK_INT_EQ(calf_trainer_step(t, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "not an open trainer") != NULL);
    CHECK_INT_EQ(calf_trainer_checkpoint(t, &err), CALF_EINVAL);
}

static volatile sig_atomic_t host_saw = 0;
static void host_handler(int sig) { host_saw = sig; }

/* Without handle_signals the host's handler stays; with it, a SIGINT makes the next step
 * end its iteration with a checkpoint and CALF_EINTR, and close puts the host's back. */
static void test_signals(void) {
    struct sigaction sa, cur;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = host_handler;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGINT, &sa, NULL) == 0);

    char dir[512];
    join(dir, sizeof dir, root, "signals");
    calf_trainer_options o = run_options(dir);
    calf_trainer *t = NULL;
    calf_error err;
    CHECK_INT_EQ(calf_trainer_open(&o, &t, &err), CALF_OK);
    if (!t) return;
    CHECK(sigaction(SIGINT, NULL, &cur) == 0 && cur.sa_handler == host_handler);
    raise(SIGINT);
    CHECK_INT_EQ(host_saw, SIGINT);
    CHECK_INT_EQ(calf_trainer_step(t, &err), CALF_OK); /* the host's signal, not calf's */
    CHECK_INT_EQ(calf_trainer_close(t, &err), CALF_OK);

    o.handle_signals = true;
    CHECK_INT_EQ(calf_trainer_open(&o, &t, &err), CALF_OK);
    if (!t) return;
    CHECK_INT_EQ(calf_trainer_iteration(t), 0); /* nothing was checkpointed before */
    CHECK(sigaction(SIGINT, NULL, &cur) == 0 && cur.sa_handler != host_handler);
    host_saw = 0;
    raise(SIGINT);
    CHECK_INT_EQ(host_saw, 0);
    CHECK_INT_EQ(calf_trainer_step(t, &err), CALF_EINTR);
    CHECK(strstr(err.msg, "stopped after iteration 1, checkpoint written") != NULL);
    CHECK(calf_trainer_done(t));
    CHECK_INT_EQ(calf_trainer_close(t, &err), CALF_OK);
    CHECK(sigaction(SIGINT, NULL, &cur) == 0 && cur.sa_handler == host_handler);
    char ckpt[600];
    join(ckpt, sizeof ckpt, dir, "train/algorithm/ckpt-1");
    struct stat st;
    CHECK(stat(ckpt, &st) == 0);
    signal(SIGINT, SIG_DFL);
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/calf_test_api_trainer.XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    char reference[600];
    reference_run(reference, sizeof reference);
    test_steps_and_bytes(reference);
    test_checkpoint_and_resume(reference);
    test_train_conf_text(reference);
    test_errors();
    test_misuse();
    test_signals();
    rm_rf(root);
    return test_report("test_api_trainer");
}
