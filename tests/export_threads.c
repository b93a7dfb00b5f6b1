/* export_threads.c: the program tests/e2e_export.sh builds around a policy written by
 * `calf export` (CALF_POLICY_FILE) to hold its header to "any number of threads may call
 * it at once". It reads observations from stdin as tests/export_main.c does (the first
 * CALF_POLICY_OBS_DIM numbers of each line; the rest ignored), acts on each in turn, then
 * has two threads act at once, thread k on lines k, k + 2, ... (different observations),
 * each over and over (ROUNDS passes), every result compared with the sequential one:
 * the same return and the same action floats. A recurrent policy's call is a reset of the
 * thread's own state, then one step. Prints the calls and the differences; exits 1 on
 * any difference. Scratch kept in static storage shows here: a call that another
 * thread's call overlaps (the threads running on two CPUs, or one preempted mid-call)
 * reads arrays the other wrote; e2e_export plants it. C99 and POSIX threads. */
#define _POSIX_C_SOURCE 200809L
#include CALF_POLICY_FILE

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_LINES = 4096, ROUNDS = 500, THREADS = 2 };

static float obs[MAX_LINES][CALF_POLICY_OBS_DIM];
static float want[MAX_LINES][CALF_POLICY_ACTION_DIM];
static int want_r[MAX_LINES];
static int lines;
static pthread_barrier_t start;

/* One call on a fresh row: a recurrent policy's state is the caller's. */
static int act(const float *o, float *action) {
#ifdef CALF_POLICY_STATE_SIZE
    float state[CALF_POLICY_STATE_SIZE];
    calf_policy_reset(state);
    return calf_policy_step(state, o, action);
#else
    return calf_policy_act(o, action);
#endif
}

typedef struct worker {
    int k;
    long calls, differ;
} worker;

static void *run(void *arg) {
    worker *w = arg;
    pthread_barrier_wait(&start);
    for (int round = 0; round < ROUNDS && !w->differ; round++)
        for (int i = w->k; i < lines; i += THREADS) {
            float action[CALF_POLICY_ACTION_DIM];
            int r = act(obs[i], action);
            w->calls++;
            if (r != want_r[i] || memcmp(action, want[i], sizeof action) != 0) w->differ++;
        }
    return NULL;
}

int main(void) {
    char line[16384];
    while (lines < MAX_LINES && fgets(line, sizeof line, stdin)) {
        char *s = line;
        for (int i = 0; i < CALF_POLICY_OBS_DIM; i++) {
            char *end;
            obs[lines][i] = strtof(s, &end);
            if (end == s) {
                fprintf(stderr, "export_threads: line %d: expected %d numbers\n", lines + 1,
                        CALF_POLICY_OBS_DIM);
                return 1;
            }
            s = end;
        }
        lines++;
    }
    if (lines < THREADS) {
        fprintf(stderr, "export_threads: %d lines, fewer than the threads\n", lines);
        return 1;
    }
    for (int i = 0; i < lines; i++) want_r[i] = act(obs[i], want[i]);
    worker w[THREADS];
    pthread_t t[THREADS];
    if (pthread_barrier_init(&start, NULL, THREADS) != 0) return 1;
    for (int k = 0; k < THREADS; k++) {
        w[k] = (worker){.k = k};
        if (pthread_create(&t[k], NULL, run, &w[k]) != 0) {
            fprintf(stderr, "export_threads: cannot start a thread\n");
            return 1;
        }
    }
    long calls = 0, differ = 0;
    for (int k = 0; k < THREADS; k++) {
        pthread_join(t[k], NULL);
        calls += w[k].calls, differ += w[k].differ;
    }
    printf("%d threads, %ld calls at once on %d observations: %ld differ from the calls one "
           "at a time\n", THREADS, calls, lines, differ);
    return differ > 0;
}
