/* calf/context.h: the per-process context (ALF's PerProcessContext).
 * One process-wide record of this process's place in the job: rank, number of
 * processes, local rank. The launcher (or MPI) sets it once, from the job's comm, then
 * finalizes it; from then on it is read-only and any attempt to change it is an error,
 * never a silent change. Readable from anywhere without passing it down the call stack:
 * for C programs and code that holds no comm (calf_summary_run); calf's trainer asks
 * the job's comm itself. */
#ifndef CALF_CONTEXT_H
#define CALF_CONTEXT_H

#include <stdbool.h>

#include "calf/error.h"

/* Make this process rank `rank` of `num_processes` (local_rank: its index among the
 * processes on this machine). Validates 0 <= rank < num_processes and
 * 0 <= local_rank < num_processes. Fails after finalize, or if already set. */
int calf_context_set_distributed(int rank, int num_processes, int local_rank, calf_error *err);
/* Freeze the context. Calling it twice is harmless; setting after it fails. */
void calf_context_finalize(void);
bool calf_context_is_finalized(void);

int calf_context_rank(void);          /* -1 when not distributed (ALF's convention) */
int calf_context_num_processes(void); /* 1 when not distributed */
int calf_context_local_rank(void);    /* -1 when not distributed */
bool calf_context_is_distributed(void);
bool calf_context_is_main(void);      /* rank <= 0: the process that writes files */

#endif
