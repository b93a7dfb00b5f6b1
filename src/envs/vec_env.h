/* vec_env.h: this process's block of environments, [begin, begin + count) out of the
 * job's global env indices. Steps them all with auto-reset and keeps per-episode
 * statistics; env i's trajectory depends only on (seed, i, its actions), so how the
 * global range is split over processes never changes a single bit. */
#ifndef CALF_ENVS_VEC_ENV_H
#define CALF_ENVS_VEC_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "calf/env.h"
#include "calf/error.h"

typedef struct vec_env {
    int begin, count;          /* global env indices [begin, begin+count) */
    int obs_dim, num_actions, action_dim;
    int obs_high;              /* a CALF_DTYPE_U8 env's largest value (spec.obs_high, or 255);
                                  0 for floats */
    int action_ints;           /* ints per env's action: num_action_dims (MultiDiscrete), else 1 */
    calf_env *envs;            /* (count) */
    uint8_t *mask;             /* (count, num_actions) the actions each env's current state
                                  allows (after auto-reset: the new episode's), kept after
                                  every reset, step and loaded record; NULL when the class
                                  has no mask */
    uint8_t *final_mask;       /* (count, num_actions) after a step, the actions valid at its
                                  final observation (before any auto-reset): mask's row, a
                                  truncated env's from its last state, a terminated env's all
                                  1 (no bootstrap reads it); NULL when the class has no mask */
    float *obs;                /* (count, obs_dim) current observation (after auto-reset); a
                                  byte block's: NULL, or for a class without the byte hooks
                                  the floats it last wrote, which became obs8 */
    uint8_t *obs8;             /* a byte block's (vec_env_use_u8) current observation, (count,
                                  obs_dim) bytes; NULL for a float block */
    double *episode_return;    /* (count) running return of the current episode */
    int *episode_length;       /* (count) */
    float *clipped;            /* (count, action_dim) scratch for batched continuous classes, or NULL */
    float *scratch_obs;        /* (2, obs_dim) a record's observation and the one its state gives */
    /* The first non-finite observation or reward an env returned since init (or since
     * the owner cleared it), or observation value of a CALF_DTYPE_U8 env that is not an
     * integer 0..obs_high, naming the env and its global index; status CALF_OK while
     * there is none. The block steps on after one exactly as before: the check only
     * reads, and the owner decides when to stop (the trainer after a rollout). */
    calf_error fault;
} vec_env;

/* Create envs begin..begin+count-1 of `env_name` seeded with `seed`, and reset each
 * once (ve->obs then holds the first observations). Errors: unknown env name,
 * begin < 0, count < 1, an env class's create failing, CALF_ENOMEM. On error nothing
 * is left allocated. */
int vec_env_init(vec_env *ve, const char *env_name, uint64_t seed, int begin, int count,
                 calf_error *err);
void vec_env_free(vec_env *ve);   /* safe on a zeroed or freed vec_env */
/* Start a new episode in every env (draws from each env's stream; init already did
 * this once), fill obs, zero the episode accumulators. Returns ve->fault.status. */
int vec_env_reset(vec_env *ve);
/* Step every env of a float block. actions (count, action_ints) for discrete and MultiDiscrete,
 * cont_actions (count, action_dim) for continuous (the other may be NULL).
 * Outputs (count): reward, terminated, truncated; final_obs (count, obs_dim, may be
 * NULL): the observation the step produced BEFORE auto-reset (so the trainer can
 * bootstrap on truncation); ve->obs afterwards holds the next observation (the reset
 * one for envs whose episode ended).
 * ep_return/ep_length (count, may be NULL): the finished episode's return/length
 * where the episode ended, else 0.
 * Returns ve->fault.status: CALF_EINVAL once any env has returned a NaN or infinite
 * observation (after a step or an auto-reset) or reward, else CALF_OK. */
int vec_env_step(vec_env *ve, const int *actions, const float *cont_actions, float *reward,
                  uint8_t *terminated, uint8_t *truncated, float *final_obs, double *ep_return,
                  int *ep_length);

/* CALF_OK when no env has returned a non-finite value (ve->fault), else that status
 * with ve->fault's message copied into err: "environment NAME, env index I: ...". */
int vec_env_fault(const vec_env *ve, calf_error *err);

/* Make a CALF_DTYPE_U8 env's block keep its observations as bytes from now on: obs8
 * holds them (the current ones made bytes here), obs is left as the field says, and the
 * block steps with vec_env_step_u8 only. A class with the byte hooks (reset_u8, step_u8)
 * writes bytes, a quarter of the floats' stores; another's floats (checked as before)
 * become bytes. The same values, draws and states either way. CALF_ENOMEM (the block
 * left as it was) when obs8 does not fit. */
int vec_env_use_u8(vec_env *ve, calf_error *err);
/* vec_env_step for a byte block: the same, with final_obs (count, obs_dim, may be NULL)
 * in bytes and ve->obs8 holding the next observation. A byte written above obs_high is
 * the env's fault, as a non-finite value is. */
int vec_env_step_u8(vec_env *ve, const int *actions, const float *cont_actions, float *reward,
                    uint8_t *terminated, uint8_t *truncated, uint8_t *final_obs,
                    double *ep_return, int *ep_length);

/* Checkpoint support: one env's complete state (its saved state, rng, elapsed steps,
 * episode accumulators, current obs, global index) as a fixed-size record of plain
 * little-endian bytes without pointers. The size depends only on the env class. */
size_t vec_env_record_size(const vec_env *ve);
void vec_env_save_record(const vec_env *ve, int local_i, void *rec);
/* Validates the record (it may come from a corrupted or foreign file: magic, class
 * state size, global index, elapsed_steps range, finite values, obs consistent with
 * the state) and only then overwrites env local_i; CALF_ENOMEM (env untouched) when
 * the copies it checks with do not fit. */
int vec_env_load_record(vec_env *ve, int local_i, const void *rec, calf_error *err);

#endif
