/* workers.c: forks the workers of `calf train --nproc N` over one comm_local region and
 * supervises them per docs/DESIGN.md's failure model: any failure stops the job within seconds,
 * reported once, nothing left behind; Ctrl-C is forwarded once (checkpoint, exit 130). */
#include "parallel/workers.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "calf/context.h"
#include "base/clock.h"
#include "base/mem.h"

/* Interrupts (SIGINT/SIGTERM) received while supervising. A signal handler can only
 * talk to the supervision loop through a static, so this is the one exception to
 * "no hidden global state"; it is only touched inside workers_run_opts. */
static volatile sig_atomic_t interrupts_seen;

static void on_interrupt(int sig) {
    (void)sig;
    if (interrupts_seen < 100) interrupts_seen++;
}

/* SIGCHLD only needs to cut the supervisor's nap short. */
static void on_child(int sig) { (void)sig; }

/* After an interrupt, the workers have stop_after seconds to finish the iteration and
 * write its checkpoint; then every wait fails (comm_local_stop_after) and they leave
 * without one; whoever is left at twice that is killed. With many processes per core an
 * iteration can take far longer than a user waits for Ctrl-C to work, and exiting takes
 * time too: a thousand processes need about two seconds on two cores. So the window is
 * STOP_AFTER_S with a core per worker, STOP_AFTER_OVERSUBSCRIBED_S without, and the
 * job is gone within 5 s either way. */
static const double STOP_AFTER_S = 2.0, STOP_AFTER_OVERSUBSCRIBED_S = 1.0;


static const char *signal_name(int sig) {
    switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGSTOP: return "SIGSTOP";
    case SIGTSTP: return "SIGTSTP";
    case SIGTTIN: return "SIGTTIN";
    case SIGTTOU: return "SIGTTOU";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    default: return "unknown signal";
    }
}

enum { NSIG_HANDLED = 3 };
static const int handled_signals[NSIG_HANDLED] = {SIGINT, SIGTERM, SIGCHLD};

/* What a child needs to restore the launching process's signal state. */
typedef struct saved_signals {
    struct sigaction old[NSIG_HANDLED];
    sigset_t old_mask;
} saved_signals;

static void restore_signals(const saved_signals *s) {
    for (int i = 0; i < NSIG_HANDLED; i++) {
        int rc = sigaction(handled_signals[i], &s->old[i], NULL);
        CALF_ASSERT(rc == 0);
    }
    int rc = sigprocmask(SIG_SETMASK, &s->old_mask, NULL);
    CALF_ASSERT(rc == 0);
}

/* A child that cannot even start its worker: say why through the shared slot, leave. */
static _Noreturn void child_fail(comm *c, const char *what, int e) {
    char msg[256];
    snprintf(msg, sizeof msg, "worker start-up: %s: %s", what, strerror(e));
    if (c) comm_report_failure(c, msg);
    else fprintf(stderr, "calf: %s\n", msg);
    fflush(NULL);
    _exit(1);
}

static _Noreturn void child_main(comm_local_shared *sh, int rank, int nproc,
                                 workers_fn worker, void *arg, pid_t parent, pid_t group,
                                 bool lower_priority, const saved_signals *saved) {
    comm *c = NULL;
    calf_error err;
    calf_error_clear(&err);
    if (comm_local_attach(sh, rank, &c, &err) != CALF_OK) {
        fprintf(stderr, "calf: rank %d: %s\n", rank, err.msg);
        fflush(NULL);
        _exit(1);
    }
    /* The workers' own process group (see signal_all): a terminal's Ctrl-C then
     * reaches only the launcher, which forwards exactly one SIGINT per interrupt.
     * Signals stay blocked until the launching process's handlers are back in place. */
    if (setpgid(0, group) != 0) child_fail(c, "setpgid", errno);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(c, "prctl(PR_SET_PDEATHSIG)", errno);
    if (getppid() != parent) _exit(1); /* the launcher died before prctl took effect */
    comm_local_await_start(c);
    errno = 0;
    if (lower_priority && nice(WORKERS_NICE_OVERSUBSCRIBED) == -1 && errno != 0)
        child_fail(c, "nice", errno);
    for (int i = 0; i < NSIG_HANDLED; i++)
        if (sigaction(handled_signals[i], &saved->old[i], NULL) != 0)
            child_fail(c, "sigaction", errno);
    if (sigprocmask(SIG_SETMASK, &saved->old_mask, NULL) != 0) child_fail(c, "sigprocmask", errno);
    if (calf_context_set_distributed(rank, nproc, rank, &err) != CALF_OK) {
        comm_report_failure(c, err.msg);
        fflush(NULL);
        _exit(1);
    }
    calf_context_finalize();
    int rc = worker(c, arg);
    comm_local_mark_finished(c);
    comm_finalize(c);
    fflush(NULL);
    _exit(rc >= 0 && rc <= 255 ? rc : 1);
}

typedef struct child {
    pid_t pid;
    bool reaped;
    bool stopped;   /* stopped by a signal (kill -STOP) and not continued since */
    bool signalled; /* we sent it SIGTERM or SIGKILL */
    int status;     /* waitpid status once reaped */
} child;

/* The workers share one process group, worker 0's, so that one kill() signals them all
 * and one waitpid() finds whichever exited: with hundreds of workers on a few cores, a
 * launcher that calls once per worker waits for a core between calls (each signal wakes
 * a worker that takes the core), and Ctrl-C would take many seconds to reach them all.
 * The group outlives worker 0 while any member, a zombie too, is unreaped. */
static void signal_all(pid_t group, child *ch, int n, int sig, bool mark) {
    bool any = false;
    for (int r = 0; r < n; r++) any = any || (!ch[r].reaped && ch[r].pid > 0);
    if (!any || kill(-group, sig) != 0) return;
    for (int r = 0; mark && r < n; r++)
        if (!ch[r].reaped && ch[r].pid > 0) ch[r].signalled = true;
}

typedef struct pid_rank {
    pid_t pid;
    int rank;
} pid_rank;

static int by_pid(const void *a, const void *b) {
    pid_t x = ((const pid_rank *)a)->pid, y = ((const pid_rank *)b)->pid;
    return (x > y) - (x < y);
}

/* The rank of worker pid (index sorted by pid), or -1. */
static int rank_of(const pid_rank *index, int n, pid_t pid) {
    pid_rank key = {pid, -1};
    const pid_rank *hit = bsearch(&key, index, (size_t)n, sizeof *index, by_pid);
    return hit ? hit->rank : -1;
}

static void reap_all_blocking(child *ch, int n) {
    for (int r = 0; r < n; r++) {
        if (ch[r].reaped || ch[r].pid <= 0) continue;
        pid_t w;
        do w = waitpid(ch[r].pid, &ch[r].status, 0);
        while (w < 0 && errno == EINTR);
        ch[r].reaped = true;
    }
}

static int worker_code(int status) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
}

static void describe(int status, char *buf, size_t cap) {
    if (WIFEXITED(status))
        snprintf(buf, cap, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, cap, "killed by signal %d (%s)", WTERMSIG(status),
                 signal_name(WTERMSIG(status)));
    else
        snprintf(buf, cap, "wait status 0x%x", (unsigned)status);
}

int workers_run(int nproc, workers_fn worker, void *arg, calf_error *err) {
    return workers_run_opts(nproc, worker, arg, 0, 2.0, err);
}

int workers_run_opts(int nproc, workers_fn worker, void *arg, size_t arena_bytes,
                     double grace_s, calf_error *err) {
    CALF_ASSERT(worker != NULL);
    calf_error_clear(err);
    if (nproc < 1) {
        calf_error_set(err, CALF_EINVAL, "launcher: --nproc must be >= 1, got %d", nproc);
        return 1;
    }
    if (calf_context_is_distributed() || calf_context_is_finalized()) {
        calf_error_set(err, CALF_EINVAL,
                       "launcher: the launching process's per-process context is already "
                       "set or finalized; workers could not set theirs");
        return 1;
    }
    if (!(grace_s > 0) || grace_s > 2.0) grace_s = 2.0;
    comm_local_shared *sh = NULL;
    if (comm_local_create(&sh, nproc, arena_bytes, err) != CALF_OK) return 1;

    /* everything the supervision loop needs, before any worker is forked */
    child *ch = mem_calloc((size_t)nproc, sizeof *ch, err);
    pid_rank *index = ch ? mem_alloc((size_t)nproc * sizeof *index, err) : NULL;
    int *newly = index ? mem_alloc((size_t)nproc * sizeof *newly, err) : NULL;
    if (!newly) {
        free(index);
        free(ch);
        comm_local_destroy(sh);
        return 1;
    }
    saved_signals saved;
    sigset_t block;
    sigemptyset(&block);
    for (int i = 0; i < NSIG_HANDLED; i++) sigaddset(&block, handled_signals[i]);
    int rc = sigprocmask(SIG_BLOCK, &block, &saved.old_mask);
    CALF_ASSERT(rc == 0);
    for (int i = 0; i < NSIG_HANDLED; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = handled_signals[i] == SIGCHLD ? on_child : on_interrupt;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = 0; /* no SA_RESTART: a signal cuts the nap short */
        rc = sigaction(handled_signals[i], &sa, &saved.old[i]);
        CALF_ASSERT(rc == 0);
    }
    interrupts_seen = 0;

    fflush(NULL); /* or each child would flush a copy of our buffered output */
    pid_t parent = getpid();
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1) cpus = nproc; /* unknown: assume a core each */
    const double stop_after = nproc > cpus ? STOP_AFTER_OVERSUBSCRIBED_S : STOP_AFTER_S;
    for (int r = 0; r < nproc; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            int e = errno;
            if (r > 0) signal_all(ch[0].pid, ch, r, SIGKILL, true);
            reap_all_blocking(ch, r);
            restore_signals(&saved);
            free(newly);
            free(index);
            free(ch);
            comm_local_destroy(sh);
            calf_error_set(err, CALF_EIO, "launcher: fork of worker %d of %d failed: %s", r,
                           nproc, strerror(e));
            return 1;
        }
        pid_t group = r == 0 ? 0 : ch[0].pid;
        if (pid == 0) { /* a worker has no use for the supervisor's tables: its copies go */
            free(newly);
            free(index);
            free(ch);
            child_main(sh, r, nproc, worker, arg, parent, group, nproc > cpus, &saved);
        }
        ch[r].pid = pid;
        setpgid(pid, r == 0 ? pid : group); /* also done by the child; whichever runs first wins */
    }
    const pid_t group = ch[0].pid;
    comm_local_start(sh);
    for (int r = 0; r < nproc; r++) index[r] = (pid_rank){ch[r].pid, r};
    qsort(index, (size_t)nproc, sizeof *index, by_pid);
    /* The handled signals stay blocked while the loop sweeps and are let in only by the
     * nap itself (pselect swaps the mask atomically), so one that lands during a sweep
     * ends the next nap at once instead of being noticed a whole nap late. */
    sigset_t nap_mask = saved.old_mask;
    for (int i = 0; i < NSIG_HANDLED; i++) sigdelset(&nap_mask, handled_signals[i]);

    int alive = nproc, first_fail = -1, first_code = 0, forwarded = 0, unfinished = 0;
    bool interrupted_exit = false, killed_all = false;
    double term_at = -1.0, interrupt_at = -1.0;
    while (alive > 0) {
        /* Collect everything that exited since the last sweep, then judge it, so that a
         * rank that raised the abort flag is blamed before the ranks that obeyed it. */
        int nnew = 0;
        for (;;) {
            int st;
            /* stops and continues too: a stopped rank holds every other rank in its next
             * collective (up to its 600 s timeout), so it is named at once (SIGCHLD ends
             * the nap for a stop as for an exit) */
            pid_t w = waitpid(-group, &st, WNOHANG | WUNTRACED | WCONTINUED);
            if (w == 0) break;
            if (w < 0 && errno == EINTR) continue;
            if (w > 0 && (WIFSTOPPED(st) || WIFCONTINUED(st))) {
                int r = rank_of(index, nproc, w);
                if (r < 0 || ch[r].reaped) continue;
                if (WIFSTOPPED(st) && !ch[r].stopped)
                    fprintf(stderr, "calf: rank %d (pid %ld) is stopped (%s): the other ranks "
                            "wait for it; kill -CONT %ld resumes the job\n", r, (long)w,
                            signal_name(WSTOPSIG(st)), (long)w);
                ch[r].stopped = WIFSTOPPED(st);
                continue;
            }
            if (w < 0) { /* ECHILD: someone else reaped them; we cannot know how they ended */
                for (int r = 0; r < nproc; r++)
                    if (!ch[r].reaped) {
                        ch[r].status = 1 << 8;
                        ch[r].reaped = true;
                        alive--;
                        newly[nnew++] = r;
                    }
                break;
            }
            int r = rank_of(index, nproc, w);
            if (r < 0 || ch[r].reaped) continue; /* not a worker: cannot happen */
            ch[r].status = st;
            ch[r].reaped = true;
            alive--;
            newly[nnew++] = r;
        }
        int blamed = comm_local_abort_rank(sh);
        if (blamed >= 0 && !ch[blamed].reaped && nnew > 0) {
            /* Ranks are exiting because `blamed` called comm_abort; it is exiting too. Give
             * it a moment so that the cause, not an echo, is reported. */
            for (int tries = 0; tries < 1000; tries++) {
                pid_t w = waitpid(ch[blamed].pid, &ch[blamed].status, WNOHANG);
                if (w == ch[blamed].pid || (w < 0 && errno != EINTR)) {
                    if (w < 0) ch[blamed].status = 1 << 8;
                    ch[blamed].reaped = true;
                    alive--;
                    newly[nnew++] = blamed;
                    break;
                }
                struct timespec ms = {0, 1000000};
                nanosleep(&ms, NULL);
            }
        }
        for (int i = 0; i < nnew; i++)
            if (newly[i] == blamed && i > 0) {
                newly[i] = newly[0];
                newly[0] = blamed;
            }
        for (int i = 0; i < nnew; i++) {
            int r = newly[i], st = ch[r].status, code = worker_code(st);
            bool by_signal = WIFSIGNALED(st);
            bool interrupt = code == 130;
            bool ours = ch[r].signalled && by_signal;
            /* exit status 0 from a rank whose worker never returned: something called
             * exit() in the middle of the job (a plug-in env); the job did not finish */
            bool cut_short = code == 0 && !comm_local_finished(sh, r);
            bool failed = (code != 0 && !interrupt && !ours) || cut_short;
            char why[96];
            describe(st, why, sizeof why);
            if (cut_short) {
                unfinished++;
                snprintf(why, sizeof why, "exit status 0 before its job finished (exit() "
                         "called by an env or plug-in?)");
                code = 1;
            }
            /* An interrupted rank has left: the others stop waiting for it now, interrupted
             * too (it may have been in setup, before it could agree on an iteration) */
            if (interrupt && forwarded > 0) comm_local_stop_after(sh, 0);
            comm_local_mark_exited(sh, r, failed, why);
            if (interrupt) interrupted_exit = true;
            if (!failed || first_fail >= 0) continue;
            first_fail = r;
            first_code = code;
            char msg[600];
            comm_local_failure_message(sh, r, msg, sizeof msg);
            fprintf(stderr, "calf: rank %d failed: %s%s%s\n", r, why, msg[0] ? ": " : "", msg);
            fflush(stderr);
            signal_all(group, ch, nproc, SIGTERM, true);
            term_at = calf_monotonic_s();
        }
        if (alive == 0) break;
        int seen = interrupts_seen;
        if (seen > forwarded) {
            if (forwarded == 0) {
                /* the deadline first: the workers keep it themselves, however long this
                 * process then waits for a core */
                comm_local_stop_after(sh, stop_after);
                interrupt_at = calf_monotonic_s();
                signal_all(group, ch, nproc, SIGINT, false);
                /* said once the workers have the signal: what happens, and what a second
                 * Ctrl-C does (a large checkpoint can take a while to write) */
                fprintf(stderr, "calf: interrupted: the workers finish this iteration and write "
                        "its checkpoint if they can within %g s; Ctrl-C again stops them at "
                        "once, without it\n", stop_after);
                fflush(stderr);
            }
            if (seen >= 2 && !killed_all) {
                signal_all(group, ch, nproc, SIGKILL, true);
                killed_all = true;
                interrupted_exit = true;
                fprintf(stderr, "calf: interrupted again: workers stopped at once; a new run "
                        "resumes from the last checkpoint written\n");
                fflush(stderr);
            }
            forwarded = seen;
        }
        if (interrupt_at >= 0 && !killed_all &&
            calf_monotonic_s() - interrupt_at > 2 * stop_after) {
            signal_all(group, ch, nproc, SIGKILL, true);
            killed_all = true;
            interrupted_exit = true;
        }
        if (term_at >= 0 && !killed_all && calf_monotonic_s() - term_at > grace_s) {
            signal_all(group, ch, nproc, SIGKILL, true);
            killed_all = true;
        }
        /* SIGCHLD or an interrupt ends the nap early; it is long because every wakeup
         * takes a core from a worker (on a machine with a core per worker, one wakeup
         * delays every rank waiting for that one). */
        struct timespec nap = {0, 50 * 1000 * 1000};
        pselect(0, NULL, NULL, NULL, &nap, &nap_mask);
    }
    if (unfinished > 1) { /* the first was reported as the failure; name every one */
        fprintf(stderr, "calf: the job did not finish: %d ranks exited with status 0 in the "
                "middle of it (ranks", unfinished);
        for (int r = 0; r < nproc; r++)
            if (WIFEXITED(ch[r].status) && WEXITSTATUS(ch[r].status) == 0 &&
                !comm_local_finished(sh, r))
                fprintf(stderr, " %d", r);
        fprintf(stderr, ")\n");
    }
    free(newly);
    free(index);
    restore_signals(&saved);
    free(ch);
    comm_local_destroy(sh);
    if (first_fail >= 0) return first_code;
    return interrupted_exit ? 130 : 0;
}
