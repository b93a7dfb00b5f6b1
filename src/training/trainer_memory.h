/* trainer_memory.h: whether a run fits this machine's memory (trainer_memory.c);
 * private to src/training/. */
#ifndef CALF_TRAINER_MEMORY_H
#define CALF_TRAINER_MEMORY_H

#include "calf/config.h"
#include "calf/error.h"

/* Whether what the algorithm keeps for `envs` envs (SAC's replay) fits in this
 * machine's memory (the memory_bytes test hook stands in for it in tests), for a config
 * that calf_train_load_config accepted; a file:line error, CALF_EINVAL, if not. */
int trainer_check_memory(const calf_config *cfg, int envs, calf_error *err);

#endif
