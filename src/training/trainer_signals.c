/* trainer_signals.c: what reaches a run from outside its loop: SIGINT and SIGTERM, which
 * stop every rank after the same iteration, and an exit() by something the run loaded,
 * which must not end `calf train` quietly. */
#include "training/trainer_signals.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calf/error.h"

/* Set by SIGINT/SIGTERM; read at the end of each iteration, where the ranks agree on
 * stopping (comm_agree) so that all of them stop after the same iteration. Process-wide,
 * as the handlers are (a signal handler can reach nothing else): hence one run of the
 * process at a time holds them (signals_owner). */
static volatile sig_atomic_t stop_requested = 0;
/* Whether the first signal says what happens (this process is the one the user sees: one
 * process, or MPI rank 0; --nproc workers leave it to their launcher). */
static volatile sig_atomic_t announce_stop = 0;

static void on_stop_signal(int sig) {
    (void)sig;
    if (announce_stop && !stop_requested) {
        static const char msg[] = "calf: interrupted: finishing this iteration and writing its "
                                  "checkpoint; Ctrl-C again stops at once, without it\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1); /* async-signal-safe */
        (void)w;
    }
    stop_requested = 1;
}

/* The process whose run holds the handlers, or 0. A pid rather than a flag: a forked
 * --nproc worker inherits its launcher's claim and must be able to make its own. Atomic
 * rather than under a mutex, which a fork could copy locked. */
static _Atomic long signals_owner = 0;

bool trainer_signals_claim(void) {
    long me = (long)getpid();
    long cur = atomic_load(&signals_owner);
    while (cur != me)
        if (atomic_compare_exchange_weak(&signals_owner, &cur, me)) return true;
    return false;
}

void trainer_signals_unclaim(void) {
    long me = (long)getpid();
    atomic_compare_exchange_strong(&signals_owner, &me, 0L);
}

/* Agree on stopping after Ctrl-C; a second Ctrl-C gets the default action (SA_RESETHAND),
 * as the launcher's second Ctrl-C kills its workers. */
bool trainer_signals_install(struct sigaction *old_int, struct sigaction *old_term,
                             bool announce) {
    if (!trainer_signals_claim()) return false;
    announce_stop = announce;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    stop_requested = 0;
    /* cannot fail for these signals and a valid handler */
    CALF_ASSERT(sigaction(SIGINT, &sa, old_int) == 0);
    CALF_ASSERT(sigaction(SIGTERM, &sa, old_term) == 0);
    return true;
}

void trainer_signals_restore(const struct sigaction *old_int,
                             const struct sigaction *old_term) {
    CALF_ASSERT(sigaction(SIGINT, old_int, NULL) == 0);
    CALF_ASSERT(sigaction(SIGTERM, old_term, NULL) == 0);
    trainer_signals_unclaim();
}

bool trainer_signals_stop_requested(void) { return stop_requested != 0; }

/* The iteration counter of the run whose process must not end quietly
 * (trainer_args.guard_exit): a plug-in or library that calls exit() in the middle of it
 * would otherwise end `calf train` with the status it chose, 0 for a run that did not
 * finish. */
static const int64_t *guarded_iteration = NULL;

static void on_exit_mid_run(void) {
    if (!guarded_iteration) return;
    char msg[256];
    int n = snprintf(msg, sizeof msg, "calf: the process exited in the middle of iteration %lld "
                     "(something it loaded called exit()): the run did not finish; a new run "
                     "resumes from the last checkpoint\n", (long long)*guarded_iteration + 1);
    if (n > 0) {
        ssize_t w = write(STDERR_FILENO, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
        (void)w;
    }
    _exit(1); /* the process is ending already; only its status changes */
}

bool trainer_signals_guard_exit(const int64_t *iteration) {
    static bool registered = false;
    if (!registered) registered = atexit(on_exit_mid_run) == 0;
    if (registered) guarded_iteration = iteration;
    return registered;
}

void trainer_signals_unguard_exit(void) { guarded_iteration = NULL; }
