/* context.c: the one documented process-wide singleton (STYLE.md): the public record
 * of this process's place in its job, set once from the job's comm (whose rank is the
 * one calf's own code asks: comm_is_main). */
#include "calf/context.h"
#include "calf/testing.h"

#include "base/testing.h"

static struct {
    int rank;          /* -1 when not distributed, else 0..num_processes-1 */
    int num_processes; /* 1 when not distributed */
    int local_rank;    /* index among processes on this host; -1 when not distributed */
    bool is_set;       /* calf_context_set_distributed succeeded once */
    bool finalized;    /* read-only from now on */
} ctx = {-1, 1, -1, false, false};

int calf_context_set_distributed(int rank, int num_processes, int local_rank, calf_error *err) {
    if (ctx.finalized)
        return calf_error_set(err, CALF_EINVAL,
                              "per-process context is finalized; cannot set rank %d of %d",
                              rank, num_processes);
    if (ctx.is_set)
        return calf_error_set(err, CALF_EINVAL,
                              "per-process context already set (rank %d of %d)", ctx.rank,
                              ctx.num_processes);
    if (num_processes < 1)
        return calf_error_set(err, CALF_EINVAL, "number of processes must be >= 1, got %d",
                              num_processes);
    if (rank < 0 || rank >= num_processes)
        return calf_error_set(err, CALF_EINVAL, "rank %d out of range [0, %d)", rank,
                              num_processes);
    if (local_rank < 0 || local_rank >= num_processes)
        return calf_error_set(err, CALF_EINVAL, "local rank %d out of range [0, %d)",
                              local_rank, num_processes);
    ctx.rank = rank;
    ctx.num_processes = num_processes;
    ctx.local_rank = local_rank;
    ctx.is_set = true;
    testing_note_rank(rank);
    return CALF_OK;
}

void calf_context_finalize(void) { ctx.finalized = true; }
bool calf_context_is_finalized(void) { return ctx.finalized; }
int calf_context_rank(void) { return ctx.rank; }
int calf_context_num_processes(void) { return ctx.num_processes; }
int calf_context_local_rank(void) { return ctx.local_rank; }
bool calf_context_is_distributed(void) { return ctx.is_set; }
bool calf_context_is_main(void) { return ctx.rank <= 0; }

void calf_context_reset_for_testing(void) {
    ctx.rank = -1;
    ctx.num_processes = 1;
    ctx.local_rank = -1;
    ctx.is_set = false;
    ctx.finalized = false;
    testing_note_rank(-1);
}
