/* trainer.h: what `calf play` shares with the trainer: reading a policy's parameters
 * out of a checkpoint payload, and greedy evaluation episodes. */
#ifndef CALF_TRAINER_H
#define CALF_TRAINER_H

#include <stddef.h>
#include <stdint.h>

#include "calf/error.h"
#include "model.h"

/* Copy the parameters stored in a checkpoint payload into md (laid out by model_init
 * for the same config); *iteration (may be NULL) gets the checkpoint's iteration. */
int trainer_read_params(const unsigned char *payload, size_t n, const char *name, model *md,
                        int64_t *iteration, calf_error *err);

/* Run `episodes` greedy episodes of env_name in parallel, env k seeded from
 * (seed, 2^40 + k); returns[k] gets episode k's return. Returns the average, or NAN
 * with err filled when the envs cannot be created. */
double calf_evaluate_greedy(const model *md, const char *env_name, uint64_t seed, int episodes,
                            double *returns, calf_error *err);

#endif
