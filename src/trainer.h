/* trainer.h: what `calf play` shares with the trainer: reading a policy's parameters
 * out of a checkpoint payload, and greedy evaluation episodes. */
#ifndef CALF_TRAINER_H
#define CALF_TRAINER_H

#include <stddef.h>
#include <stdint.h>

#include "calf/error.h"
#include "model.h"

/* Copy the parameters stored in a checkpoint payload into md (laid out by model_init
 * for the same config). header_iteration is the file header's, checked against the
 * payload's. */
int trainer_read_params(const unsigned char *payload, /* (n) */ size_t n, const char *name,
                        int64_t header_iteration, model *md, calf_error *err);

/* Run `episodes` greedy episodes of env_name in parallel, env k seeded from
 * (seed, 2^40 + k); returns[k] gets episode k's return and *average their mean.
 * Fails (CALF_EINVAL) only when the envs cannot be created. */
int trainer_evaluate_greedy(const model *md, const char *env_name, uint64_t seed, int episodes,
                            double *returns, /* (episodes) */
                            double *average, calf_error *err);

#endif
