/* session_log.h: what a resumed launch does to the events files earlier launches left,
 * so that TensorBoard (and calf events, calf plot) show every step of every tag once. */
#ifndef CALF_SESSION_LOG_H
#define CALF_SESSION_LOG_H

#include <stdint.h>

#include "calf/error.h"

/* The tags whose steps are env steps (ALF's StepMetric: Metrics_vs_EnvironmentSteps/X);
 * every other tag's step is the iteration. */
#define SESSION_ENV_STEP_TAGS "Metrics_vs_EnvironmentSteps/"

/* A run resumed from the checkpoint of `iteration` (env steps `env_steps`): cut every
 * events file in root/sub back to it. A launch that died after its last checkpoint
 * wrote values past it, which the resumed launch writes again; TensorBoard's own remedy,
 * a restart marker (SessionLog START) at iteration + 1, drops every earlier value with a
 * step from there on whatever its tag, so it would also hide nearly all the
 * Metrics_vs_EnvironmentSteps values, whose steps are env steps. Instead each file
 * keeps the records up to the checkpoint on its own axis (env steps for
 * SESSION_ENV_STEP_TAGS, the iteration for the rest), and no restart marker but a run's
 * start (step 1; earlier builds wrote them on resumes). A file that changes is replaced
 * atomically; a cut tail (a crash while writing) goes; a file with a damaged record is
 * left as it is, said on stderr. A missing directory is nothing to do. Returns a
 * calf_status (I/O, out of memory). */
int session_trim(const char *root, const char *sub, int64_t iteration, int64_t env_steps,
                 calf_error *err);

#endif
