/* trainer_config.h: a run's config as the trainer takes it (trainer_config.c): loaded
 * and checked, and written back as the operative config.gin; private to src/training/
 * (trainer.h passes it on to calf play). */
#ifndef CALF_TRAINER_CONFIG_H
#define CALF_TRAINER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "calf/config.h"
#include "calf/error.h"
#include "calf/train.h"
#include "training/algorithm.h"

/* calf_train_load_config, with the config given as text (conf_text, in place of
 * o->conf_path: both is CALF_EINVAL; errors name it "<conf_text>:LINE"). */
int trainer_load_config(const calf_train_options *o, const char *conf_text, calf_config *cfg,
                        calf_error *err);

/* config.gin's header names each plug-in library the run loaded on a line
 * "# env_lib: PATH". */
#define ENV_LIB_COMMENT "env_lib: "
/* Appends " --env_lib PATH" to buf (a string, size bytes) for each library the config
 * file conf names that buf does not name yet; nothing when conf is NULL or unreadable. */
void trainer_env_lib_hint(const char *conf, char *buf, size_t size);

/* Whether a run of this config is complete after `iteration` iterations
 * (TrainerConfig.num_iterations or num_env_steps reached): nothing left to do. */
bool trainer_run_complete(const calf_config *cfg, int64_t iteration);

/* The algorithm the config names (TrainerConfig.algorithm_ctor). */
const algorithm_ops *trainer_algorithm(const calf_config *cfg);

/* Write ROOT/config.gin atomically: every binding's final value under a header that says
 * how E envs split over N processes, which plug-in libraries registered envs, and what
 * the algorithm describes of itself (ops->describe). */
int trainer_config_write(const calf_config *cfg, int E, int N, const algorithm_ops *ops,
                         algorithm *algo, const char *root, calf_error *err);

#endif
