/* stepwise.h: the stepwise trainer's open with the launch's own options (stepwise.c),
 * for calf_train's one process; private to src/training/. */
#ifndef CALF_STEPWISE_H
#define CALF_STEPWISE_H

#include <stdbool.h>

#include "calf/error.h"
#include "calf/trainer.h"

/* calf_trainer_open, with the name the root dir's lock gives the job, and guard_exit as
 * in trainer_args (`calf train`'s one process). */
int stepwise_open(const calf_trainer_options *o, const char *job, bool guard_exit,
                  calf_trainer **out, calf_error *err);

#endif
