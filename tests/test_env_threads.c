/* test_env_threads.c: the env registry changed and read from many threads at once:
 * classes registered while others look names up, and one plug-in (--env_lib) loaded by
 * eight threads together, which loads it once and fails none of them. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "calf/env.h"
#include "test_util.h"

enum { NUM_REGISTER = 16, NUM_READERS = 4, NUM_LOADERS = 8 };

static pthread_barrier_t start;

static void stay_reset(void *state, calf_rng *rng, float *obs) {
    (void)state, (void)rng;
    obs[0] = 0;
}
static int stay_step(void *state, calf_rng *rng, int action, const float *u, float *obs,
                     float *reward) {
    (void)state, (void)rng, (void)action, (void)u;
    obs[0] = 0;
    *reward = 1;
    return 0;
}

static char names[NUM_REGISTER][32];
static calf_env_class classes[NUM_REGISTER];
static int register_rc[NUM_REGISTER];

static void *register_one(void *arg) {
    int i = (int)(intptr_t)arg;
    pthread_barrier_wait(&start);
    calf_error err;
    register_rc[i] = calf_env_register(&classes[i], &err);
    return NULL;
}

/* Reads while the others register: every name it finds is a whole class. */
static int reader_wrong[NUM_READERS];
static void *read_registry(void *arg) {
    int i = (int)(intptr_t)arg;
    pthread_barrier_wait(&start);
    for (int k = 0; k < 2000; k++) {
        int n = calf_env_count();
        const calf_env_class *c = calf_env_at(n - 1);
        if (!c || calf_env_find(c->spec.name) != c) reader_wrong[i]++;
        char list[4096];
        calf_env_list_names(list, sizeof list);
    }
    return NULL;
}

static void test_register(void) {
    int before = calf_env_count();
    pthread_t th[NUM_REGISTER + NUM_READERS];
    CHECK_INT_EQ(pthread_barrier_init(&start, NULL, NUM_REGISTER + NUM_READERS), 0);
    for (int i = 0; i < NUM_REGISTER; i++) {
        snprintf(names[i], sizeof names[i], "Thread%d-v0", i);
        classes[i].spec.name = names[i];
        classes[i].spec.obs_dim = 1;
        classes[i].spec.num_actions = 2;
        classes[i].spec.max_episode_steps = 10;
        classes[i].spec.state_size = 8;
        classes[i].reset = stay_reset;
        classes[i].step = stay_step;
        CHECK_INT_EQ(pthread_create(&th[i], NULL, register_one, (void *)(intptr_t)i), 0);
    }
    for (int i = 0; i < NUM_READERS; i++)
        CHECK_INT_EQ(pthread_create(&th[NUM_REGISTER + i], NULL, read_registry, (void *)(intptr_t)i), 0);
    for (int i = 0; i < NUM_REGISTER + NUM_READERS; i++) CHECK_INT_EQ(pthread_join(th[i], NULL), 0);
    pthread_barrier_destroy(&start);
    CHECK_INT_EQ(calf_env_count(), before + NUM_REGISTER);
    for (int i = 0; i < NUM_REGISTER; i++) {
        CHECK_INT_EQ(register_rc[i], CALF_OK);
        CHECK(calf_env_find(names[i]) == &classes[i]);
    }
    for (int i = 0; i < NUM_READERS; i++) CHECK_INT_EQ(reader_wrong[i], 0);
}

static int load_rc[NUM_LOADERS];
static char load_msg[NUM_LOADERS][1024];

static void *load_plugin(void *arg) {
    int i = (int)(intptr_t)arg;
    pthread_barrier_wait(&start);
    calf_error err;
    calf_error_clear(&err);
    load_rc[i] = calf_env_load_library(CALF_TEST_PLUGIN, &err);
    snprintf(load_msg[i], sizeof load_msg[i], "%s", err.msg);
    return NULL;
}

static void test_load_library(void) {
    int libs = calf_env_library_count(), before = calf_env_count();
    pthread_t th[NUM_LOADERS];
    CHECK_INT_EQ(pthread_barrier_init(&start, NULL, NUM_LOADERS), 0);
    for (int i = 0; i < NUM_LOADERS; i++)
        CHECK_INT_EQ(pthread_create(&th[i], NULL, load_plugin, (void *)(intptr_t)i), 0);
    for (int i = 0; i < NUM_LOADERS; i++) CHECK_INT_EQ(pthread_join(th[i], NULL), 0);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < NUM_LOADERS; i++) {
        if (load_rc[i] != CALF_OK) fprintf(stderr, "loader %d: %s\n", i, load_msg[i]);
        CHECK_INT_EQ(load_rc[i], CALF_OK);
    }
    CHECK_INT_EQ(calf_env_library_count(), libs + 1);
    CHECK_INT_EQ(calf_env_count(), before + 1); /* the example registers Corridor-v0 */
    const calf_env_class *c = calf_env_find("Corridor-v0");
    CHECK(c != NULL && calf_env_class_library(c) != NULL);
    calf_env env;
    calf_error err;
    CHECK_INT_EQ(calf_env_init(&env, "Corridor-v0", 1, 0, &err), CALF_OK);
    calf_env_free(&env);
}

int main(void) {
    test_register();
    test_load_library();
    return test_report("test_env_threads");
}
