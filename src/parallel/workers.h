/* workers.h: `calf train --nproc N`: fork N local workers that share a comm_local region,
 * supervise them, and fail fast: one failing worker stops the job within seconds with its
 * rank and reason on stderr, and nothing is left running. */
#ifndef CALF_WORKERS_H
#define CALF_WORKERS_H

#include "calf/error.h"
#include "parallel/comm.h"

/* The work of one rank. c is owned by the launcher (do not finalize it). The return
 * value becomes the worker's exit status (0 ok, 2 bad input, 130 interrupted, else 1);
 * before returning non-zero, pass the reason to comm_report_failure(c, msg). */
typedef int (*workers_fn)(comm *c, void *arg);

/* With more workers than cores online, each worker lowers its priority by this much
 * (nice), so that the launcher, which alone hears Ctrl-C and SIGTERM, gets a core within
 * milliseconds instead of waiting its turn behind hundreds of runnable workers. The
 * workers' shares among themselves do not change. */
enum { WORKERS_NICE_OVERSUBSCRIBED = 10 };

/* Fork nproc workers; each starts once all are forked. In each: the workers' own process
 * group (so a terminal's Ctrl-C reaches only the launcher, which forwards it once),
 * SIGKILL when the launcher dies, WORKERS_NICE_OVERSUBSCRIBED when nproc exceeds the
 * cores online, the per-process context set to (rank, nproc, local rank = rank) and
 * finalized, the launching process's signal dispositions restored, then worker(c, arg)
 * and _exit with its result after flushing stdio. The launching process must not have
 * set or finalized its context.
 *
 * Supervision: a worker that exits non-zero (other than 130) or dies by a signal we did not
 * send raises the abort flag every collective watches, is reported on stderr as
 * "calf: rank R failed: exit status N: <its message>" or "... killed by signal S (NAME)",
 * and the others get SIGTERM, then SIGKILL after a 2 s grace. SIGINT/SIGTERM to the
 * launcher are forwarded to the workers as SIGINT, which gives them 2 s (1 s when they
 * outnumber the cores) to finish the iteration (with its checkpoint); then every
 * collective fails with CALF_EINTR and they leave without one, and any left after twice
 * that are SIGKILLed, so that an interrupt ends the job within 5 s however slow its
 * iterations; a second interrupt SIGKILLs them at once. A worker that leaves interrupted (130) ends the others' waits the same way.
 * Every worker is reaped before returning.
 *
 * Returns the exit status for the whole job: 0 when all workers exit 0; the first failing
 * worker's status (128+S when killed by signal S), so 2 when the failures were bad input;
 * otherwise 130 when interrupted. Only when the launcher itself cannot run the job (shared
 * memory, fork) does it fill err and return 1; worker failures are already on stderr. */
int workers_run(int nproc, workers_fn worker, void *arg, calf_error *err);

/* The same with a bound on each collective's payload (0: the generous default) and the
 * grace between SIGTERM and SIGKILL; for tests and benchmarks. */
int workers_run_opts(int nproc, workers_fn worker, void *arg, size_t arena_bytes,
                     double grace_s, calf_error *err);

#endif
