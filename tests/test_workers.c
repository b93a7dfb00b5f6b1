/* test_workers.c: the launcher's failure model with real workers (success, a failing rank,
 * a rank killed mid-collective, Ctrl-C once and twice, bad input, abort), checking exit
 * code, stderr line, how each wait ended, and that no worker is left behind. No bound
 * on time depends on the machine's speed: a worker that would otherwise wait marks
 * what ended its wait, and the only clock bound is half the 600 s collective timeout. */
#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "calf/context.h"
#include "calf/testing.h"
#include "parallel/workers.h"
#include "test_util.h"

/* Shared with the workers across fork. */
typedef struct page {
    pid_t pid[8];
    int sigints[8];
    int rc[8];
    int napped[8]; /* the worker's long nap ran to its end: nothing stopped it */
    char msg[8][1024];
} page;

/* Far beyond any machine's time for what the launcher does, however slow or emulated,
 * and far below the collective timeout (600 s) that a missed failure would wait for. */
static const double SLOW_BOUND_S = 300.0;

static page *pg;

#ifdef CALF_TEST_WRAP_FORK
/* Linked with -Wl,--wrap=fork (CMakeLists.txt): the launcher's fork comes through here, so
 * the test can make one fail as it does at a process limit (root ignores RLIMIT_NPROC). */
pid_t __real_fork(void);
pid_t __wrap_fork(void);
static int forks_until_failure = -1; /* < 0: never fail */
pid_t __wrap_fork(void) {
    if (forks_until_failure >= 0 && forks_until_failure-- == 0) {
        errno = EAGAIN;
        return -1;
    }
    return __real_fork();
}
#endif

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static volatile sig_atomic_t got_sigint;
static void on_sigint(int sig) {
    (void)sig;
    got_sigint++;
}

static void install(int sig, void (*handler)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) != 0) _exit(99);
}

/* Run the launcher with stderr captured; returns its result. */
static int run_captured(int nproc, workers_fn w, double grace, char *out, size_t cap,
                        double *elapsed) {
    memset(pg, 0, sizeof *pg);
    fflush(stderr);
    FILE *tmp = tmpfile();
    CHECK(tmp != NULL);
    int saved = dup(2);
    CHECK(saved >= 0);
    CHECK(dup2(fileno(tmp), 2) == 2);
    calf_error err;
    double t0 = now_s();
    int rc = workers_run_opts(nproc, w, NULL, 0, grace, &err);
    *elapsed = now_s() - t0;
    fflush(stderr);
    CHECK(dup2(saved, 2) == 2);
    close(saved);
    rewind(tmp);
    size_t got = fread(out, 1, cap - 1, tmp);
    out[got] = '\0';
    fclose(tmp);
    fprintf(stderr, "[launcher %d workers -> %d in %.3f s] %s", nproc, rc, *elapsed,
            got ? out : "(no stderr)\n");
    return rc;
}

/* Every worker was reaped and none survives. A worker stopped by the launcher before it
 * got to record its pid is covered by the ECHILD check: workers are our children. */
static void check_none_left(int nproc) {
    int recorded = 0;
    for (int r = 0; r < nproc; r++) {
        if (pg->pid[r] <= 0) continue;
        recorded++;
        errno = 0;
        CHECK(kill(pg->pid[r], 0) == -1 && errno == ESRCH);
    }
    CHECK(recorded >= 1);
    errno = 0;
    CHECK(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD);
}

static size_t count_lines(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static int w_success(comm *c, void *arg) {
    (void)arg;
    int r = comm_rank(c);
    pg->pid[r] = getpid();
    calf_error err;
    int ok = calf_context_rank() == r && calf_context_num_processes() == comm_size(c) &&
             calf_context_local_rank() == r && calf_context_is_finalized() &&
             calf_context_is_main() == (r == 0) && comm_size(c) == 3;
    int any = 0;
    if (comm_barrier(c, &err) != CALF_OK || comm_any(c, r == 2, &any, &err) != CALF_OK) ok = 0;
    pg->rc[r] = ok && any == 1;
    return pg->rc[r] ? 0 : 5;
}

static int w_fail3(comm *c, void *arg) {
    (void)arg;
    int r = comm_rank(c);
    pg->pid[r] = getpid();
    calf_error err;
    if (comm_barrier(c, &err) != CALF_OK) return 1;
    if (r == 1) {
        comm_report_failure(c, "bad thing happened");
        return 3;
    }
    calf_error_clear(&err);
    int rc = comm_barrier(c, &err); /* would wait 600 s unaided */
    snprintf(pg->msg[r], sizeof pg->msg[r], "%s", err.msg);
    return rc == CALF_OK ? 0 : 1;
}

static int w_sigkill(comm *c, void *arg) {
    (void)arg;
    int r = comm_rank(c);
    pg->pid[r] = getpid();
    install(SIGTERM, SIG_IGN); /* so the ranks see the comm failure, not just SIGTERM */
    calf_error err;
    calf_error_clear(&err);
    if (comm_barrier(c, &err) != CALF_OK) return 1;
    if (r == 2) raise(SIGKILL);
    for (int i = 0; i < 100000 && (pg->rc[r] = comm_barrier(c, &err)) == CALF_OK; i++) {
    }
    snprintf(pg->msg[r], sizeof pg->msg[r], "%s", err.msg);
    if (r == 0) nap_ms(10000); /* a stuck rank: only SIGKILL after the grace ends it */
    pg->napped[r] = 1;
    return 1;
}

static int w_sigint(comm *c, void *arg) {
    (void)arg;
    int r = comm_rank(c);
    pg->pid[r] = getpid();
    install(SIGINT, on_sigint);
    calf_error err;
    if (comm_barrier(c, &err) != CALF_OK) return 1;
    if (r == 0) kill(getppid(), SIGINT); /* as if Ctrl-C reached the launcher */
    for (int i = 0; i < 5000; i++) {
        int stop = 0;
        if (comm_any(c, got_sigint > 0, &stop, &err) != CALF_OK) return 1;
        if (stop) {
            nap_ms(50); /* a second forwarded SIGINT would arrive by now */
            pg->sigints[r] = got_sigint;
            return 130; /* the trainer checkpoints here */
        }
        nap_ms(1);
    }
    return 0;
}

static int w_double_sigint(comm *c, void *arg) {
    (void)arg;
    int r = comm_rank(c);
    pg->pid[r] = getpid();
    install(SIGINT, on_sigint); /* counts, keeps going: a worker stuck in a long step */
    calf_error err;
    if (comm_barrier(c, &err) != CALF_OK) return 1;
    if (r == 0) {
        kill(getppid(), SIGINT);
        nap_ms(100);
        kill(getppid(), SIGINT);
    }
    nap_ms(10000);
    pg->napped[r] = 1;
    return 0;
}

static int w_config(comm *c, void *arg) {
    (void)arg;
    pg->pid[comm_rank(c)] = getpid();
    comm_report_failure(c, "examples/x.gin:3: unknown binding 'Foo.bar'");
    return 2;
}

static int w_abort(comm *c, void *arg) {
    (void)arg;
    int r = comm_rank(c);
    pg->pid[r] = getpid();
    calf_error err;
    if (r == 0) comm_abort(c, "digest mismatch at iteration 4");
    calf_error_clear(&err);
    int rc = comm_barrier(c, &err);
    if (r > 0) snprintf(pg->msg[r], sizeof pg->msg[r], "%s", err.msg);
    return rc == CALF_OK ? 0 : 1;
}

int main(void) {
    pg = mmap(NULL, sizeof *pg, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (pg == MAP_FAILED) return 1;
    char out[8192];
    double el;

    CHECK_INT_EQ(run_captured(3, w_success, 2.0, out, sizeof out, &el), 0);
    CHECK_STR_EQ(out, "");
    for (int r = 0; r < 3; r++) CHECK_INT_EQ(pg->rc[r], 1);
    check_none_left(3);
    /* The launching process itself stays undistributed. */
    CHECK_INT_EQ(calf_context_rank(), -1);

    CHECK_INT_EQ(run_captured(1, w_config, 2.0, out, sizeof out, &el), 2);
    check_none_left(1);

    CHECK_INT_EQ(run_captured(3, w_fail3, 2.0, out, sizeof out, &el), 3);
    CHECK(strstr(out, "calf: rank 1 failed: exit status 3: bad thing happened\n") != NULL);
    CHECK(strstr(out, "rank 0 failed") == NULL); /* reported once, at the cause */
    /* the others' barrier ended on rank 1's failure or the SIGTERM that followed it (then
     * no message), never on the timeout */
    for (int r = 0; r < 3; r += 2)
        CHECK(!pg->msg[r][0] || strstr(pg->msg[r], "rank 1 failed") != NULL);
    CHECK(el < SLOW_BOUND_S);
    check_none_left(3);

    CHECK_INT_EQ(run_captured(3, w_sigkill, 0.5, out, sizeof out, &el), 128 + SIGKILL);
    CHECK(strstr(out, "calf: rank 2 failed: killed by signal 9 (SIGKILL)\n") != NULL);
    for (int r = 0; r < 2; r++) {
        CHECK_INT_EQ(pg->rc[r], CALF_ECOMM);
        CHECK(strstr(pg->msg[r], "rank 2 failed (killed by signal 9 (SIGKILL))") != NULL);
    }
    /* rank 0 ignored SIGTERM: SIGKILL after the grace ended its nap, not the nap's end */
    CHECK(el >= 0.45 && el < SLOW_BOUND_S);
    CHECK_INT_EQ(pg->napped[0], 0);
    check_none_left(3);

    CHECK_INT_EQ(run_captured(2, w_sigint, 2.0, out, sizeof out, &el), 130);
    /* the first Ctrl-C says what happens and what a second one does, and only that */
    CHECK(strncmp(out, "calf: interrupted: the workers finish this iteration and write its "
                  "checkpoint if they can within ", 81) == 0);
    CHECK(strstr(out, " s; Ctrl-C again stops them at once, without it\n") != NULL);
    CHECK_INT_EQ((long long)count_lines(out), 1);
    CHECK_INT_EQ(pg->sigints[0], 1); /* forwarded exactly once */
    CHECK_INT_EQ(pg->sigints[1], 1);
    check_none_left(2);

    CHECK_INT_EQ(run_captured(2, w_double_sigint, 2.0, out, sizeof out, &el), 130);
    /* the second Ctrl-C, not the stop deadline or the end of the nap, stopped them */
    CHECK(strstr(out, "calf: interrupted again: workers stopped at once; a new run resumes "
                      "from the last checkpoint written\n") != NULL);
    for (int r = 0; r < 2; r++) CHECK_INT_EQ(pg->napped[r], 0);
    CHECK(el < SLOW_BOUND_S);
    check_none_left(2);

    CHECK_INT_EQ(run_captured(3, w_config, 2.0, out, sizeof out, &el), 2);
    CHECK(strstr(out, "exit status 2: examples/x.gin:3: unknown binding 'Foo.bar'") != NULL);
    check_none_left(3);

    CHECK_INT_EQ(run_captured(3, w_abort, 2.0, out, sizeof out, &el), 1);
    CHECK(strstr(out, "calf: rank 0 failed: exit status 1: digest mismatch at iteration 4\n") !=
          NULL);
    for (int r = 1; r < 3; r++) /* the abort, or the SIGTERM after it: not the timeout */
        CHECK(!pg->msg[r][0] || strstr(pg->msg[r], "digest mismatch") != NULL);
    CHECK(el < SLOW_BOUND_S);
    check_none_left(3);

    calf_error err;
    calf_error_clear(&err);
#ifdef CALF_TEST_WRAP_FORK
    /* The third fork fails: the two workers already started (waiting for the third in a
     * barrier) are killed and reaped, and the launcher says which fork failed. */
    memset(pg, 0, sizeof *pg);
    forks_until_failure = 2;
    el = now_s();
    CHECK_INT_EQ(workers_run_opts(3, w_success, NULL, 0, 2.0, &err), 1);
    el = now_s() - el;
    forks_until_failure = -1;
    CHECK_INT_EQ(err.status, CALF_EIO);
    CHECK_STR_EQ(err.msg, "launcher: fork of worker 2 of 3 failed: Resource temporarily unavailable");
    CHECK(el < SLOW_BOUND_S);
    for (int r = 0; r < 3; r++) {
        errno = 0;
        if (pg->pid[r] > 0) CHECK(kill(pg->pid[r], 0) == -1 && errno == ESRCH);
    }
    CHECK_INT_EQ(pg->pid[2], 0); /* never started */
    errno = 0;
    CHECK(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD);
    /* and the launcher still works afterwards */
    CHECK_INT_EQ(run_captured(3, w_success, 2.0, out, sizeof out, &el), 0);
    for (int r = 0; r < 3; r++) CHECK_INT_EQ(pg->rc[r], 1);
    check_none_left(3);
#else
    printf("test_workers: fork failure not tested: this linker cannot wrap fork\n");
#endif

    /* A launching process whose context is already set cannot launch. */
    calf_error_clear(&err);
    CHECK_INT_EQ(calf_context_set_distributed(0, 2, 0, &err), CALF_OK);
    CHECK_INT_EQ(workers_run(2, w_success, NULL, &err), 1);
    CHECK_INT_EQ(err.status, CALF_EINVAL);
    calf_context_reset_for_testing();
    CHECK_INT_EQ(workers_run(0, w_success, NULL, &err), 1);
    CHECK_INT_EQ(err.status, CALF_EINVAL);

    munmap(pg, sizeof *pg);
    return test_report("test_workers");
}
