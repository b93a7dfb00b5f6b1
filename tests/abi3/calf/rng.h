/* tests/abi3/calf/rng.h: include/calf/rng.h at plug-in ABI version 3, frozen beside env.h. */
/* calf/rng.h: small explicit-state random streams (xoshiro256**).
 * Every random draw in calf comes from a stream named by (seed, global env index,
 * purpose), so results never depend on which process owns an env. The state is plain
 * data: copy it into a checkpoint and back. */
#ifndef CALF_RNG_H
#define CALF_RNG_H

#include <stdint.h>

typedef struct calf_rng {
    uint64_t s[4];
} calf_rng;

/* What a stream is for; part of the stream's identity, so streams never overlap. */
enum calf_rng_purpose {
    CALF_RNG_DYNAMICS = 1, /* env reset distribution and stochastic dynamics */
    CALF_RNG_ACTION = 2,   /* policy action sampling */
    CALF_RNG_SHUFFLE = 3,  /* minibatch selection of the env's timesteps */
    CALF_RNG_EVAL = 4,     /* evaluation episodes */
    CALF_RNG_INIT = 5,     /* parameter initialisation (index 0) */
    CALF_RNG_REPLAY = 6,   /* replay sampling; index (iteration << 20) | update, the same
                              on every process (algorithms/replay.h) */
    CALF_RNG_NOISE = 7,    /* an update's per-sample policy noise (SAC; index from the
                              update's stream and the sample's place in the batch) */
    CALF_RNG_PLAN = 8      /* a recurrent PPO epoch's minibatches of whole env sequences;
                              index (iteration << 20) | epoch, the same on every process */
};

/* Seed the stream identified by (seed, index, purpose). Distinct triples give
 * independent streams; the same triple always gives the same stream. */
void calf_rng_seed(calf_rng *r, uint64_t seed, uint64_t index, uint64_t purpose);
uint64_t calf_rng_next(calf_rng *r);
/* Uniform in [0, 1) with 24 (float) or 53 (double) random bits. */
float calf_rng_uniform_float(calf_rng *r);
double calf_rng_uniform_double(calf_rng *r);
/* Uniform in [lo, hi). */
double calf_rng_uniform_range(calf_rng *r, double lo, double hi);
/* Uniform integer in [0, n), n >= 1, without modulo bias. */
uint32_t calf_rng_below(calf_rng *r, uint32_t n);
/* Standard normal (Box-Muller; uses two uniforms, keeps no cached value). */
double calf_rng_normal(calf_rng *r);

#endif
