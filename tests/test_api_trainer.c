/* test_api_trainer.c: the stepwise trainer (calf/trainer.h) through the public API only.
 * Each iteration's metrics come back as values; a run stepped to the end writes the
 * bytes calf_train writes; a checkpoint taken by hand resumes to the same bytes; bad
 * input fails with a message and leaves the process able to open the next run; misuse
 * (NULL handles and assignments, double close, step or close from the progress callback)
 * is refused; signal handlers are installed only when asked for, by one run at a time;
 * two trainers stepped in two threads at once each write only their own summaries;
 * calf_train on a thread of a 128 KiB stack writes the same bytes. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "calf/env.h"
#include "calf/summary.h"
#include "calf/train.h"
#include "calf/trainer.h"
#include "test_files.h"
#include "test_stack.h"
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
        CHECK(isnan(m->eval_return_std) && isnan(m->eval_episode_length));
        CHECK_INT_EQ(m->eval_episodes, 0);
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

/* ---- two trainers in two threads ------------------------------------------------ */

/* Lockstep: every env step of one thread's run waits for a step of the other's, so the
 * two runs are inside calf_trainer_step at the same moment on every step, whatever the
 * scheduler does: each has made its summary writer current before the other writes a
 * summary. A partner that stops stepping (done, or failed) releases the other; so does
 * a wait of over 60 s (lockstep_broken: then the runs did not overlap as meant). */
static pthread_mutex_t ls_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ls_cv = PTHREAD_COND_INITIALIZER;
static int ls_active = 0;      /* threads still stepping */
static int ls_waiting = 0;
static unsigned long ls_round = 0;
static bool lockstep_broken = false;

static void lockstep(void) {
    pthread_mutex_lock(&ls_mu);
    if (ls_active == 2 && !lockstep_broken) {
        unsigned long r = ls_round;
        if (++ls_waiting == 2) {
            ls_waiting = 0;
            ls_round++;
            pthread_cond_broadcast(&ls_cv);
        } else {
            struct timespec deadline;
            clock_gettime(CLOCK_REALTIME, &deadline);
            deadline.tv_sec += 60;
            while (r == ls_round && ls_active == 2 && !lockstep_broken)
                if (pthread_cond_timedwait(&ls_cv, &ls_mu, &deadline) == ETIMEDOUT)
                    lockstep_broken = true;
            if (r == ls_round) ls_waiting = 0; /* released without a partner */
        }
    }
    pthread_mutex_unlock(&ls_mu);
}

static void lockstep_leave(void) {
    pthread_mutex_lock(&ls_mu);
    ls_active--;
    pthread_cond_broadcast(&ls_cv);
    pthread_mutex_unlock(&ls_mu);
}

/* A walk on a line: push left or right, paid for staying near 0, over at |x| > 1. */
typedef struct {
    float x;
} walk_state;

static void walk_reset(void *state, calf_rng *rng, float *obs) {
    walk_state *s = state;
    s->x = (float)calf_rng_uniform_range(rng, -0.5, 0.5);
    obs[0] = s->x;
}

static int walk_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                     float *reward) {
    (void)rng;
    (void)u;
    walk_state *s = state;
    lockstep();
    s->x += action ? 0.1f : -0.1f;
    obs[0] = s->x;
    *reward = 1.0f - fabsf(s->x);
    return fabsf(s->x) > 1.0f;
}

static const calf_env_class walk_class = {
    .spec = {.name = "LockstepWalk-v0", .obs_dim = 1, .num_actions = 2,
             .max_episode_steps = 30, .state_size = sizeof(walk_state)},
    .reset = walk_reset,
    .step = walk_step,
};

#define THREAD_ITERATIONS 12

/* One thread's run, and what its steps returned: per iteration, PPO's pg_loss. */
typedef struct {
    char dir[512];
    const char *param;           /* its seed */
    int rc;                      /* the first failing call's status, else CALF_OK */
    char msg[1024];
    int steps;
    double pg_loss[THREAD_ITERATIONS + 1]; /* [i]: iteration i's, NAN when missing */
} thread_run;

static const char walk_conf[] =
    "create_environment.env_name = 'LockstepWalk-v0'\n"
    "create_environment.num_parallel_environments = 4\n"
    "TrainerConfig.unroll_length = 8\n"
    "TrainerConfig.mini_batch_size = 16\n"
    "TrainerConfig.num_updates_per_train_iter = 1\n"
    "TrainerConfig.num_iterations = 12\n"
    "TrainerConfig.num_checkpoints = 1\n"
    "ActorDistributionNetwork.fc_layer_params = (8,)\n"
    "ValueNetwork.fc_layer_params = (8,)\n";

static void *run_in_thread(void *arg) {
    thread_run *r = arg;
    calf_trainer_options o = CALF_TRAINER_OPTIONS_INIT;
    o.root_dir = r->dir;
    o.conf_text = walk_conf;
    o.conf_params = &r->param;
    o.num_conf_params = 1;
    o.quiet = true;
    calf_trainer *t = NULL;
    calf_error err;
    calf_error_clear(&err);
    for (int i = 0; i <= THREAD_ITERATIONS; i++) r->pg_loss[i] = NAN;
    r->rc = calf_trainer_open(&o, &t, &err);
    while (r->rc == CALF_OK && !calf_trainer_done(t)) {
        r->rc = calf_trainer_step(t, &err);
        const calf_trainer_metrics *m = calf_trainer_metrics_last(t);
        if (r->rc == CALF_OK && m && m->iteration >= 1 && m->iteration <= THREAD_ITERATIONS) {
            const double *pg = metric(m, "PPOLoss/pg_loss");
            if (pg) r->pg_loss[m->iteration] = *pg;
            r->steps++;
        }
    }
    lockstep_leave();
    if (t) {
        int crc = calf_trainer_close(t, r->rc == CALF_OK ? &err : NULL);
        if (r->rc == CALF_OK) r->rc = crc;
    }
    snprintf(r->msg, sizeof r->msg, "%s", err.msg);
    return NULL;
}

/* What a run's train/ events file holds of one tag: the value at each step and how many
 * times each step was written. */
typedef struct {
    const char *tag;
    double value[THREAD_ITERATIONS + 1];
    int count[THREAD_ITERATIONS + 1];
    int other_steps; /* rows at steps outside 1..THREAD_ITERATIONS */
} tag_rows;

static int collect_tag(void *arg, const char *tag, int64_t step, double wall_time, float value) {
    (void)wall_time;
    tag_rows *rows = arg;
    if (strcmp(tag, rows->tag) != 0) return CALF_OK;
    if (step < 1 || step > THREAD_ITERATIONS) {
        rows->other_steps++;
        return CALF_OK;
    }
    rows->count[step]++;
    rows->value[step] = value;
    return CALF_OK;
}

/* The one events file in dir/train, read back with calf's events reader. */
static int read_train_tag(const char *dir, tag_rows *rows, calf_error *err) {
    char train[600], path[1200];
    join(train, sizeof train, dir, "train");
    DIR *d = opendir(train);
    int found = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (!strncmp(e->d_name, "events.out.tfevents.", 20)) {
            join(path, sizeof path, train, e->d_name);
            found++;
        }
    if (d) closedir(d);
    if (found != 1) return calf_error_set(err, CALF_EINVAL, "%s: %d events files", train, found);
    const char *paths[1] = {path};
    return calf_events_scalars(paths, 1, stderr, collect_tag, rows, err);
}

/* Two trainers stepped at once in two threads, on two seeds: each run's events file
 * holds each iteration once, and its pg_loss is the one that run's steps returned. With
 * one process-wide current writer both runs' summaries went into whichever writer was
 * made current last (issue 40, item 4). */
static void test_threads(void) {
    calf_error err;
    CHECK_INT_EQ(calf_env_register(&walk_class, &err), CALF_OK);
    thread_run runs[2];
    memset(runs, 0, sizeof runs);
    static const char *seeds[2] = {"TrainerConfig.random_seed = 11",
                                   "TrainerConfig.random_seed = 12"};
    ls_active = 2;
    pthread_t th[2];
    for (int k = 0; k < 2; k++) {
        char name[32];
        snprintf(name, sizeof name, "thread%d", k);
        join(runs[k].dir, sizeof runs[k].dir, root, name);
        runs[k].param = seeds[k];
        CHECK_INT_EQ(pthread_create(&th[k], NULL, run_in_thread, &runs[k]), 0);
    }
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    CHECK(!lockstep_broken);
    for (int k = 0; k < 2; k++) {
        thread_run *r = &runs[k];
        if (r->rc != CALF_OK) fprintf(stderr, "run %d: %s\n", k, r->msg);
        CHECK_INT_EQ(r->rc, CALF_OK);
        CHECK_INT_EQ(r->steps, THREAD_ITERATIONS);
        tag_rows env_steps = {.tag = "Metrics/EnvironmentSteps"};
        tag_rows pg = {.tag = "PPOLoss/pg_loss"};
        CHECK_INT_EQ(read_train_tag(r->dir, &env_steps, &err), CALF_OK);
        CHECK_INT_EQ(read_train_tag(r->dir, &pg, &err), CALF_OK);
        CHECK_INT_EQ(env_steps.other_steps, 0);
        CHECK_INT_EQ(pg.other_steps, 0);
        int wrong = 0;
        for (int i = 1; i <= THREAD_ITERATIONS; i++) {
            wrong += env_steps.count[i] != 1 || env_steps.value[i] != (double)i * 4 * 8;
            /* the file's float32 of the value this run's own step returned */
            wrong += pg.count[i] != 1 || !(pg.value[i] == (double)(float)r->pg_loss[i]);
        }
        if (wrong) fprintf(stderr, "run %d: %d of its iterations' summaries are missing, "
                           "doubled or another run's\n", k, wrong);
        CHECK_INT_EQ(wrong, 0);
    }
    /* the two seeds' losses differ, so the check above tells the runs apart */
    CHECK(runs[0].pg_loss[1] != runs[1].pg_loss[1]);
}

/* Signal handlers are the process's: a second run asking for them while one has them is
 * refused, saying why; one that does not ask opens, and once the first closes they are
 * free again. */
static void test_signals_one_run(void) {
    char d1[512], d2[512];
    join(d1, sizeof d1, root, "signals1");
    join(d2, sizeof d2, root, "signals2");
    calf_trainer_options o1 = run_options(d1), o2 = run_options(d2);
    o1.handle_signals = o2.handle_signals = true;
    calf_trainer *t1 = NULL, *t2 = NULL;
    calf_error err;
    CHECK_INT_EQ(calf_trainer_open(&o1, &t1, &err), CALF_OK);
    if (!t1) return;
    CHECK_INT_EQ(calf_trainer_open(&o2, &t2, &err), CALF_EINVAL);
    CHECK(t2 == NULL && strstr(err.msg, "process-wide") && strstr(err.msg, "handle_signals"));
    /* calf_train's jobs handle them too: one process, and --nproc's launcher */
    char conf[512];
    join(conf, sizeof conf, root, "run.gin"); /* reference_run's */
    calf_train_options to = {.root_dir = d2, .conf_path = conf, .nproc = 1, .quiet = true};
    CHECK_INT_EQ(calf_train(&to, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "process-wide") != NULL);
    to.nproc = 2;
    CHECK_INT_EQ(calf_train(&to, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "process-wide") != NULL);
    o2.handle_signals = false;
    CHECK_INT_EQ(calf_trainer_open(&o2, &t2, &err), CALF_OK);
    CHECK_INT_EQ(calf_trainer_close(t2, &err), CALF_OK);
    CHECK_INT_EQ(calf_trainer_close(t1, &err), CALF_OK);
    o2.handle_signals = true;
    CHECK_INT_EQ(calf_trainer_open(&o2, &t2, &err), CALF_OK);
    CHECK_INT_EQ(calf_trainer_close(t2, &err), CALF_OK);
}

/* ---- calf_train on a host's thread of a small stack ------------------------------------
 * An embedding host may call calf_train on a thread of its own, whose stack can be 128 KiB
 * (musl's default). The job's config (some 140 KiB) once sat in calf_train's frame and
 * overflowed such a thread; now it is on the heap, and one process (the trainer on this
 * thread) and two (the launcher on this thread, the workers forked from it) both write
 * the reference bytes. A sanitized or unoptimized build's frames are several times larger,
 * so there the thread gets 1 MiB: the bytes are still checked. */
#define TRAIN_STACK (TEST_LARGE_FRAMES ? 1024 * 1024 : 128 * 1024)

typedef struct {
    calf_train_options o;
    int rc;
    calf_error err;
} train_call;

static void *train_thread(void *arg) {
    train_call *c = arg;
    c->rc = calf_train(&c->o, &c->err);
    return NULL;
}

static void test_train_small_stack(const char *reference) {
    for (int nproc = 1; nproc <= 2; nproc++) {
        char dir[512], ckpt[600];
        join(dir, sizeof dir, root, nproc == 1 ? "stack1" : "stack2");
        train_call c = {.o = {.root_dir = dir, .conf_text = conf_text, .nproc = nproc,
                              .quiet = true},
                        .rc = -1};
        bool ran = test_on_stack(TRAIN_STACK, train_thread, &c);
        CHECK(ran);
        if (!ran) continue;
        CHECK_INT_EQ(c.rc, CALF_OK);
        if (c.rc != CALF_OK) fprintf(stderr, "test_api_trainer: %s\n", c.err.msg);
        join(ckpt, sizeof ckpt, dir, "train/algorithm/ckpt-4");
        CHECK(same_file(ckpt, reference));
    }
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
    test_train_small_stack(reference);
    test_errors();
    test_misuse();
    test_signals();
    test_signals_one_run();
    test_threads();
    rm_rf(root);
    return test_report("test_api_trainer");
}
