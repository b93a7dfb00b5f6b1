/* job_setup.h: what every way of starting a training job does before any process trains
 * (job_setup.c), for the launch (job.c) and the stepwise trainer (stepwise.c); private to
 * src/training/. */
#ifndef CALF_JOB_SETUP_H
#define CALF_JOB_SETUP_H

#include <stdbool.h>

#include "calf/config.h"
#include "calf/error.h"
#include "calf/train.h"
#include "records/rundir.h"
#include "training/trainer_checkpoint.h"

/* trainer_check_memory for `envs` envs on this machine, unless the root's newest
 * checkpoint by name already ends the run: job_settle_root then finds nothing to do, which
 * needs no memory, so a finished run stays exit 0 on any machine. (If that file turns out
 * damaged and an older one is resumed, the check was skipped; the allocation still
 * tells.) */
int job_check_memory(const calf_train_options *o, const calf_config *cfg, int envs,
                     calf_error *err);

/* With the input settled and nothing written yet (rundir_check passed): take the root
 * dir's lock (l), remove what a dead run left half-written, find the checkpoint to resume
 * from, and decide whether there is anything to do (*complete: the checkpoint already
 * reaches the run's end, which needs no write access). A root this process cannot write
 * in (read-only mount, no permission) is fine only then. The caller releases l, also on
 * failure. */
int job_settle_root(const calf_train_options *o, const calf_config *cfg, const char *job,
                    rundir_lock *l, resume_state *rs, bool *complete, calf_error *err);

#endif
