/* calf/testing.h: what only calf's own tests use, beside the public API: the test hooks
 * that make timing and limits what a test needs, the reset of the per-process context,
 * and the policy dump that holds `calf export` to calf's own actions. Not installed
 * (`cmake --install` ships every header of include/calf/ but this one) and not exported
 * by libcalf.so: calf's tests, the calf program and the Python module link the static
 * library and include it from the source tree. Nothing here is part of the API. */
#ifndef CALF_TESTING_H
#define CALF_TESTING_H

#include "calf/error.h"
#include "calf/train.h"

/* Set the test hooks from spec, comma-separated name=value pairs ("" clears them all):
 *   slow_rank=R        rank R of a work-sharing job holds back its own envs until
 *                      another rank has taken some, so that sharing certainly happens;
 *                      the other ranks wait up to 30 s for a rank to open a round
 *   memory_bytes=N     the memory checks take N bytes for the machine's memory (and
 *                      ignore the cgroup and ulimits)
 *   ckpt_chunk_envs=K  checkpoints are written and read K env records at a time
 *   alloc_fail=R:K     the K-th allocation through calf's allocator (src/base/mem.h) on
 *                      rank R (0 in a run that is not distributed), counted from when
 *                      the process learns its rank, fails as out of memory
 *   alloc_fail_iter=R:I  rank R's first such allocation once its trainer has started
 *                      iteration I (1: the first) fails (given with alloc_fail, both
 *                      name the rank last given)
 *   busy_rank=R:S      rank R (0 in a run that is not distributed) spends the first S
 *                      seconds of its second iteration working: it tells the job it is
 *                      alive (comm_progress) every 10 ms, as a long evaluation does
 *   stuck_rank=R:S     the same, silent, as an env step that does not return
 * A setting changes when things happen, what a check takes for the machine's memory or
 * which allocation fails, never a result. The library reads no environment variable for them: the calf program
 * sets them from CALF_TEST_HOOKS when it starts, a test program calls this. Settings are
 * process-wide and inherited by --nproc workers. A bad name or value is CALF_EINVAL
 * naming it, and changes nothing. */
int calf_testing_set(const char *spec, calf_error *err);

/* The per-process context (calf/context.h) back to the not-distributed, not-finalized
 * state. */
void calf_context_reset_for_testing(void);

/* What `calf play --dump_actions/--observations` adds to calf_play, for checking an
 * exported policy against calf (tests/e2e_export.sh). */
typedef struct calf_play_testing {
    /* Write every observation the policy acts on and its greedy action to this file, a
     * row a line: obs_dim numbers, then the discrete action's index or the continuous
     * action's numbers, each as %.9g (reads back as the same float). NULL: none. */
    const char *dump_actions;
    /* With dump_actions: instead of playing episodes, act on these observations (a file
     * of obs_dim numbers a line, as strtof reads them) in one batch. NULL: play. */
    const char *observations;
} calf_play_testing;

/* calf_play with t's additions (t NULL: none, calf_play itself). The dump_actions file is
 * written atomically when it is a regular file (or new): after a failure there is no
 * file, not an empty or partial one; a device or pipe that exists (/dev/stdout) is
 * written straight. Errors as calf_play's; --observations without --dump_actions, or
 * with a video, is CALF_EINVAL. */
int calf_play_for_testing(const calf_play_options *o, const calf_play_testing *t, calf_error *err);

#endif
