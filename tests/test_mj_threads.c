/* test_mj_threads.c: MuJoCo envs opened, stepped and closed from many threads at once,
 * some of them failing inside MuJoCo (their allocations refused), and more first opens
 * than the model cache holds: every thread gets its own error, the cache refuses cleanly
 * past its bound, and every env still steps. Skipped, saying why, without MuJoCo. */
#include <stdio.h>

#include "calf/env.h"
#include "test_util.h"

#if !CALF_HAVE_MUJOCO
int main(void) {
    printf("skipped: calf was built without MuJoCo (apt-get install libmujoco-dev)\n");
    return 77;
}
#else

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "envs/envs.h"
#include "envs/mj_env.h"

/* MuJoCo allocates through these hooks (set before its first allocation); a thread that
 * sets refuse_alloc sees every MuJoCo allocation fail, so MuJoCo raises its error in that
 * thread while the others go on. */
static _Thread_local int refuse_alloc = 0;
static void *hook_malloc(size_t n) {
    /* 64-byte aligned, as MuJoCo's own: it lays out its buffers from there */
    return refuse_alloc ? NULL : aligned_alloc(64, (n + 63) / 64 * 64);
}
static void hook_free(void *p) { free(p); }

enum { NUM_THREADS = 24, ROUNDS = 60, STEPS = 5, NUM_COPIES = 32 };

static const char *task_names[MJ_NUM_TASKS];
static pthread_barrier_t start;

/* What a thread saw; checked by the main thread (the CHECK counters are not shared). */
typedef struct {
    int index;
    int opened, failed_as_asked, wrong; /* wrong: an unexpected status or message */
    char first_wrong[1200];
} worker;

static void note_wrong(worker *w, const char *what, const calf_error *err) {
    if (w->wrong++ == 0)
        snprintf(w->first_wrong, sizeof w->first_wrong, "%s: %s", what, err ? err->msg : "");
}

static void *open_step_close(void *arg) {
    worker *w = arg;
    pthread_barrier_wait(&start);
    float obs[512], u[32] = {0};
    for (int r = 0; r < ROUNDS; r++) {
        const char *name = task_names[(w->index + r) % MJ_NUM_TASKS];
        calf_env env;
        calf_error err;
        calf_error_clear(&err);
        if (calf_env_init(&env, name, 1, (uint64_t)w->index, &err) != CALF_OK) {
            note_wrong(w, name, &err);
            continue;
        }
        w->opened++;
        calf_env_reset(&env, obs);
        for (int k = 0; k < STEPS; k++) {
            float rew;
            int term, trunc;
            calf_env_step(&env, 0, u, obs, &rew, &term, &trunc);
            if (term || trunc) calf_env_reset(&env, obs);
        }
        if (!isfinite(obs[0])) note_wrong(w, "obs not finite", NULL);
        /* every fourth thread: a second env of the same task, with MuJoCo's allocations
         * refused: an error for this thread alone, naming the task and MuJoCo's words */
        if (w->index % 4 == 3) {
            calf_env bad;
            refuse_alloc = 1;
            int rc = calf_env_init(&bad, name, 1, 0, &err);
            refuse_alloc = 0;
            if (rc == CALF_ENOMEM && strstr(err.msg, name) && strstr(err.msg, "allocate"))
                w->failed_as_asked++;
            else {
                note_wrong(w, "forced failure", &err);
                if (rc == CALF_OK) calf_env_free(&bad);
            }
        }
        calf_env_free(&env);
    }
    return NULL;
}

/* One first open of a task of its own (a copy of a built-in task: another cache key). */
typedef struct {
    const mj_task *task;
    int rc;
    char msg[1024];
} opener;

static void *open_own_task(void *arg) {
    opener *o = arg;
    pthread_barrier_wait(&start);
    mj_state s;
    memset(&s, 0, sizeof s);
    calf_error err;
    calf_error_clear(&err);
    o->rc = mj_env_create(&s, o->task, &err);
    snprintf(o->msg, sizeof o->msg, "%s", err.msg);
    if (o->rc == CALF_OK) {
        float obs[8];
        calf_rng rng;
        calf_rng_seed(&rng, 1, 0, CALF_RNG_DYNAMICS);
        mj_env_reset_hook(&s, &rng, obs);
        mj_env_destroy(&s);
    }
    return NULL;
}

/* Many threads open, step and close every task (their first opens racing), a quarter of
 * them also failing inside MuJoCo every round. */
static void test_open_step_close(void) {
    static worker w[NUM_THREADS];
    pthread_t th[NUM_THREADS];
    CHECK_INT_EQ(pthread_barrier_init(&start, NULL, NUM_THREADS), 0);
    for (int i = 0; i < NUM_THREADS; i++) {
        w[i].index = i;
        CHECK_INT_EQ(pthread_create(&th[i], NULL, open_step_close, &w[i]), 0);
    }
    for (int i = 0; i < NUM_THREADS; i++) CHECK_INT_EQ(pthread_join(th[i], NULL), 0);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < NUM_THREADS; i++) {
        if (w[i].wrong) fprintf(stderr, "thread %d: %d wrong, first %s\n", i, w[i].wrong, w[i].first_wrong);
        CHECK_INT_EQ(w[i].wrong, 0);
        CHECK_INT_EQ(w[i].opened, ROUNDS);
        CHECK_INT_EQ(w[i].failed_as_asked, i % 4 == 3 ? ROUNDS : 0);
    }
}

/* More first opens than the cache holds, all at once: those that find room compile, the
 * rest get an error saying so, and the built-in tasks (cached already) still open. */
static void test_cache_bound(void) {
    calf_env env;
    calf_error err;
    CHECK_INT_EQ(calf_env_init(&env, "InvertedPendulum-v4", 0, 0, &err), CALF_OK);
    static mj_task copies[NUM_COPIES];
    static opener o[NUM_COPIES];
    pthread_t th[NUM_COPIES];
    CHECK_INT_EQ(pthread_barrier_init(&start, NULL, NUM_COPIES), 0);
    for (int i = 0; i < NUM_COPIES; i++) {
        copies[i] = *((const mj_state *)env.state)->task;
        o[i].task = &copies[i];
        CHECK_INT_EQ(pthread_create(&th[i], NULL, open_own_task, &o[i]), 0);
    }
    for (int i = 0; i < NUM_COPIES; i++) CHECK_INT_EQ(pthread_join(th[i], NULL), 0);
    pthread_barrier_destroy(&start);
    calf_env_free(&env);
    int made = 0, refused = 0;
    for (int i = 0; i < NUM_COPIES; i++) {
        if (o[i].rc == CALF_OK)
            made++;
        else if (o[i].rc == CALF_ENOMEM && strstr(o[i].msg, "InvertedPendulum-v4") &&
                 strstr(o[i].msg, "models"))
            refused++;
        else
            fprintf(stderr, "copy %d: status %d: %s\n", i, o[i].rc, o[i].msg);
    }
    /* the first test cached every built-in task */
    CHECK_INT_EQ(made, MJ_MAX_MODELS - MJ_NUM_TASKS);
    CHECK_INT_EQ(refused, NUM_COPIES - made);
    for (int i = 0; i < MJ_NUM_TASKS; i++) {
        CHECK_INT_EQ(calf_env_init(&env, task_names[i], 0, 0, &err), CALF_OK);
        calf_env_free(&env);
    }
}

int main(void) {
    mju_user_malloc = hook_malloc;
    mju_user_free = hook_free;
#define NAME_(id, name, model) name,
    static const char *const names[] = {MJ_TASKS(NAME_)};
#undef NAME_
    for (int i = 0; i < MJ_NUM_TASKS; i++) task_names[i] = names[i];
    test_open_step_close();
    test_cache_bound();
    return test_report("test_mj_threads");
}
#endif
