/* calf/vec_env.h: a block of environments stepped as calf's trainer steps them, for a
 * program that brings its own policy or learner. Env i of a job is a pure function of
 * (seed, i, the actions it was given): a process that opens envs [a, b) of a job and
 * feeds them the same actions sees the same floats as `calf train` and `calf env`. */
#ifndef CALF_VEC_ENV_H
#define CALF_VEC_ENV_H

#include <stdint.h>

#include "calf/env.h"
#include "calf/error.h"

/* Opaque: made by calf_vec_env_open, released by calf_vec_env_close. One thread at a
 * time may use a handle; different handles are independent.
 *
 * Misuse is refused, never undefined: a NULL handle, or one closed already, given to
 * reset or step is CALF_EINVAL with a message; the queries below then answer -1 (NULL
 * for the pointer ones); a second close does nothing; a NULL out is CALF_EINVAL. */
typedef struct calf_vec_env calf_vec_env;

/* Open envs [first_index, first_index + count) of a job of env_name seeded with seed,
 * as the trainer makes them (a job's env e is seeded by (seed, e), whichever process
 * holds it). env_name is a built-in environment (calf_env_count/calf_env_at in
 * calf/env.h list them) or one a plug-in registered: env_lib, when not NULL, is loaded
 * first with calf_env_load_library (a library already loaded is not loaded again).
 * Every env starts its first episode here (see calf_vec_env_reset).
 * On success *out is the caller's, to release with calf_vec_env_close. Errors, with
 * *out NULL and nothing held: CALF_EINVAL for an unknown name (the message lists the
 * known ones), a plug-in that does not load, first_index < 0, count < 1 or a range
 * past INT32_MAX; CALF_ENOMEM "out of memory allocating ..." when the envs do not fit
 * (or a plug-in's path cannot be kept); an env class's own create failing gives its
 * status and message. */
int calf_vec_env_open(const char *env_name, const char *env_lib, uint64_t seed, int first_index,
                      int count, calf_vec_env **out, calf_error *err);
void calf_vec_env_close(calf_vec_env *v); /* NULL is fine */

/* ---- the block and its spaces --------------------------------------------------- */
int calf_vec_env_count(const calf_vec_env *v);       /* envs in the block */
int calf_vec_env_first_index(const calf_vec_env *v); /* the job's index of the first */
/* The environment's registered name; calf owns it, it lives as long as the process. */
const char *calf_vec_env_name(const calf_vec_env *v);
int calf_vec_env_obs_dim(const calf_vec_env *v);     /* floats per observation, >= 1 */
/* 1 when actions are discrete: one int in 0..calf_vec_env_num_actions-1 per env;
 * 0 when continuous: calf_vec_env_action_dim floats per env. */
int calf_vec_env_discrete(const calf_vec_env *v);
int calf_vec_env_num_actions(const calf_vec_env *v); /* discrete: >= 1 choices; else 0 */
int calf_vec_env_action_dim(const calf_vec_env *v);  /* continuous: >= 1; discrete: 0 */
/* MultiDiscrete: the sub-actions D (>= 1) and their sizes (D ints, summing to
 * num_actions; calf's, as long as the process); an action is then D ints per env, each in
 * 0..nvec[d]-1. Otherwise 0 and NULL. */
int calf_vec_env_action_dims(const calf_vec_env *v);
const int *calf_vec_env_action_nvec(const calf_vec_env *v);
/* When the env masks its actions: (n, num_actions) bytes, 1 where the action is valid in
 * the state each env's obs row shows (after reset and after every step, auto-reset
 * included); valid until the next reset or step, owned by v. NULL for an env without a
 * mask. */
const uint8_t *calf_vec_env_action_mask(const calf_vec_env *v);
/* Continuous: the bounds, action_dim floats each, low < high; a step clips actions to
 * them (in a copy; NaN stays NaN). Owned by calf, they live as long as the process.
 * Discrete: NULL. */
const float *calf_vec_env_action_low(const calf_vec_env *v);
const float *calf_vec_env_action_high(const calf_vec_env *v);
/* The time limit: an episode that reaches this many steps without terminating is
 * truncated. */
int calf_vec_env_max_episode_steps(const calf_vec_env *v);
/* The block's env e (0..count-1), for reading only: to draw it (calf_renderer_draw,
 * calf/render.h). NULL out of range. Owned by v; valid until calf_vec_env_close. */
const calf_env *calf_vec_env_env(const calf_vec_env *v, int e);

/* ---- stepping ---------------------------------------------------------------------
 * Arrays are the caller's, contiguous, row e for the block's env e (the job's env
 * first_index + e); n = calf_vec_env_count, od = calf_vec_env_obs_dim. calf keeps no
 * pointer to them after the call.
 *
 * Auto-reset, in the same step (Gymnasium 1.x's SAME_STEP mode, and calf's trainer):
 * when env e's episode ends in a step (terminated: the task ended; truncated: the time
 * limit, and not terminated), that step resets it at once. Then obs row e holds the
 * first observation of the new episode, final_obs row e the last one of the episode
 * that ended (what to bootstrap a value from on truncation), and reward, terminated and
 * truncated row e are the ended episode's. Rows of envs whose episode goes on have
 * final_obs equal to obs. The next step acts in the new episode.
 *
 * An env that returns a NaN or infinite observation (after a step or a reset) or
 * reward is a broken environment: the call that returns it fails with CALF_EINVAL,
 * naming the env and its job index, and still writes every output and advances every
 * env as it would have; the caller may go on stepping. */

/* Start a new episode in every env; writes obs (n, od). A call right after open (no
 * step or reset between) draws nothing: it returns the episodes open started, which
 * are the trainer's first ones, so open, reset, then steps replay the trainer's envs
 * (stepping without a reset continues those episodes too). Every other call draws new
 * episodes from each env's stream. Returns CALF_OK, or CALF_EINVAL as above. */
int calf_vec_env_reset(calf_vec_env *v, float *obs, calf_error *err);

/* Step every env once. actions (n) for a discrete env, each in 0..num_actions-1, (n, D)
 * for a MultiDiscrete one;
 * cont_actions (n, action_dim) for a continuous one; the other may be NULL.
 * Writes obs (n, od), reward (n), terminated (n) and truncated (n), each 0 or 1, and,
 * when final_obs is not NULL, final_obs (n, od): see auto-reset above.
 * Errors: CALF_EINVAL naming the row when a discrete action is out of range or the
 * array the env needs is NULL, before anything is stepped; CALF_EINVAL naming the env
 * for a non-finite value, after the step (see above). */
int calf_vec_env_step(calf_vec_env *v, const int *actions, const float *cont_actions, float *obs,
                      float *reward, uint8_t *terminated, uint8_t *truncated, float *final_obs,
                      calf_error *err);

/* ---- a uint8 env's observations as bytes --------------------------------------- */

/* A uint8 env's largest observation value (1..255): its observations may be read as
 * bytes by the two calls below; 0 for an env whose observations are floats. */
int calf_vec_env_obs_high(const calf_vec_env *v);

/* calf_vec_env_reset and calf_vec_env_step with obs and final_obs as (n, od) bytes: the
 * same values, episodes and errors, a quarter of the memory, and for an env that writes
 * bytes itself (MinAtar's games) no floats made at all. The first of them makes the
 * block keep bytes for good; the float calls then return those bytes as floats, the
 * same values. CALF_EINVAL for an env whose observations are floats
 * (calf_vec_env_obs_high 0), before anything is stepped. */
int calf_vec_env_reset_u8(calf_vec_env *v, uint8_t *obs, calf_error *err);
int calf_vec_env_step_u8(calf_vec_env *v, const int *actions, const float *cont_actions,
                         uint8_t *obs, float *reward, uint8_t *terminated, uint8_t *truncated,
                         uint8_t *final_obs, calf_error *err);

#endif
