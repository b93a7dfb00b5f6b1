/* replay.h: the off-policy replay buffer, keyed by global env index: one ring per env,
 * held by the process that steps that env, and a sampler whose choices depend only on
 * (seed, iteration, update) and the job's shape, never on the process. So SAC's
 * minibatches, and with them its results, are the same on 1 process or N (docs/DESIGN.md,
 * "Replay keyed by global env"), and a checkpoint restores onto any split. */
#ifndef CALF_REPLAY_H
#define CALF_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "calf/env.h"
#include "calf/error.h"
#include "calf/rng.h"
#include "records/checkpoint.h"

/* A transition: obs, action, reward, terminated (the episode ended in a terminal state:
 * no bootstrap), next_obs (the true observation after the step; for a truncated step
 * the episode's final observation, not the reset one) and, for an env that masks its
 * actions (mask_dim > 0), next_mask: the actions valid at next_obs, so that a TD target's
 * max over next actions is over those (DQN). A discrete action is stored as
 * its index in one float (act_dim 1; exact below 2^24). Observations are kept in the
 * env's obs_dtype: floats, or bytes for CALF_DTYPE_U8 (the env writes integers 0..255
 * as floats; a replay of bytes is a quarter the size, and reads back the same floats).
 *
 * Envs step in lockstep, so every env of the job holds the same number of transitions:
 * one counter (stored) and one write slot (next_slot) serve all of them. A position pos
 * in [0, stored) names a transition by age, 0 the oldest, stored - 1 the newest; it is
 * what the sampler draws and what checkpoints keep, while the ring slot it lives in is
 * this process's business (replay_slot). capacity is ALF's replay_buffer_length: the
 * transitions kept PER ENV; when full, a step overwrites each env's oldest. */
typedef struct replay {
    int num_envs;        /* E, the job's global env count */
    int env_begin;       /* this process owns global envs [env_begin, env_begin + env_count) */
    int env_count;
    int obs_dim, act_dim;
    int obs_dtype;       /* CALF_DTYPE_F32 or CALF_DTYPE_U8: the type of obs and next_obs */
    int mask_dim;        /* a masked env's num_actions: next_mask's width; 0: no masks */
    int64_t capacity;    /* transitions kept per env, >= 1 */
    int64_t stored;      /* transitions held per env, 0..capacity */
    int64_t next_slot;   /* ring slot the next step writes, 0..capacity-1 */
    /* Views into the memory (env-major: local env e's ring is rows [e * capacity,
     * (e + 1) * capacity)). Slots not yet written hold whatever the memory held. */
    void *obs;           /* (env_count, capacity, obs_dim) of obs_dtype */
    void *next_obs;      /* (env_count, capacity, obs_dim) of obs_dtype */
    float *act;          /* (env_count, capacity, act_dim) */
    float *reward;       /* (env_count, capacity) */
    uint8_t *terminated; /* (env_count, capacity), 0 or 1 */
    uint8_t *next_mask;  /* (env_count, capacity, mask_dim), 0 or 1; NULL when mask_dim 0 */
    void *owned;         /* what replay_create allocated; NULL for the caller's memory */
} replay;

/* Bytes of memory replay_init needs: the five arrays above (six with masks), each
 * starting on a 64-byte boundary, the total a multiple of 64. 0 if that does not fit in
 * a size_t (or a size is not positive, or mask_dim is negative). */
size_t replay_bytes(int env_count, int64_t capacity, int obs_dim, int obs_dtype, int act_dim,
                    int mask_dim);

/* Lay rb out over mem (64-byte aligned, replay_bytes(...) bytes, e.g. shared memory;
 * not owned, not cleared) and make it empty. 0 <= env_begin, 1 <= env_count,
 * env_begin + env_count <= num_envs, capacity >= 1, obs_dim >= 1, act_dim >= 1
 * (asserted). The counters live in rb itself. */
void replay_init(replay *rb, int num_envs, int env_begin, int env_count, int64_t capacity,
                 int obs_dim, int obs_dtype, int act_dim, int mask_dim, void *mem);
/* replay_init over memory it allocates (rb owns it; replay_free releases it).
 * CALF_EINVAL if the size does not fit in memory's address range, CALF_ENOMEM if the
 * allocation fails, each with a message giving the size. */
int replay_create(replay *rb, int num_envs, int env_begin, int env_count, int64_t capacity,
                  int obs_dim, int obs_dtype, int act_dim, int mask_dim, calf_error *err);
/* Release what replay_create allocated and zero rb. NULL and a zeroed rb are fine. */
void replay_free(replay *rb);

/* Append one step of every owned env (rows in local env order) at next_slot, then
 * advance it (wrapping at capacity) and count it (stored stops at capacity: from then
 * on each step overwrites each env's oldest transition). terminated is stored as 0/1
 * (any nonzero is 1). A CALF_DTYPE_U8 replay stores each observation value as the byte
 * (uint8_t)x: the env's integers 0..255 exactly (vec_env has checked them). next_mask is
 * read only when mask_dim > 0 (then not NULL; any nonzero byte stored as 1). */
void replay_add_step(replay *rb,
                     const float *obs,           /* (env_count, obs_dim) */
                     const float *act,           /* (env_count, act_dim) */
                     const float *reward,        /* (env_count) */
                     const uint8_t *terminated,  /* (env_count) */
                     const float *next_obs,      /* (env_count, obs_dim) */
                     const uint8_t *next_mask);  /* (env_count, mask_dim) or NULL */
/* The same for a CALF_DTYPE_U8 replay given the env block's bytes (obs and next_obs
 * (env_count, obs_dim) bytes), stored as they are: what replay_add_step stores for
 * their floats. */
void replay_add_step_u8(replay *rb, const uint8_t *obs, const float *act, const float *reward,
                        const uint8_t *terminated, const uint8_t *next_obs,
                        const uint8_t *next_mask);

/* The ring slot holding position pos (0 oldest .. stored - 1 newest):
 *   (next_slot - stored + pos) mod capacity. */
int64_t replay_slot(const replay *rb, int64_t pos);

/* One stored transition; pointers into rb, valid until the next add or load. A
 * CALF_DTYPE_F32 replay's only (asserted): replay_gather reads any. */
typedef struct replay_item {
    const float *obs;      /* (obs_dim) */
    const float *act;      /* (act_dim) */
    float reward;
    uint8_t terminated;
    const float *next_obs; /* (obs_dim) */
    const uint8_t *next_mask; /* (mask_dim); NULL when mask_dim 0 */
} replay_item;
/* Global env `env` (owned) at position pos < stored. */
void replay_get(const replay *rb, int env, int64_t pos, replay_item *out);
/* Copy n transitions into batch rows 0..n-1: row i is (env[s], pos[s]) with s = idx[i],
 * or s = i when idx is NULL. Every env[s] must be owned. Any output may be NULL.
 * Observations come out as floats whatever the replay keeps (a byte b as (float)b).
 * next_mask is written only when mask_dim > 0. */
void replay_gather(const replay *rb, int n,
                   const int *idx,      /* (n) sample indices, or NULL */
                   const int *env,      /* global env of each sample */
                   const int64_t *pos,  /* position of each sample */
                   float *obs,          /* (n, obs_dim) out */
                   float *act,          /* (n, act_dim) out */
                   float *reward,       /* (n) out */
                   uint8_t *terminated, /* (n) out */
                   float *next_obs,     /* (n, obs_dim) out */
                   uint8_t *next_mask); /* (n, mask_dim) out */

/* ---- sampling: uniform over every transition of the whole job ----
 *
 * The samples of update `update` (0-based within the iteration) of iteration
 * `iteration` come from the stream
 *   calf_rng_seed(&r, seed, replay_stream_index(iteration, update), CALF_RNG_REPLAY)
 *   replay_stream_index = ((uint64_t)iteration << 20) | update,
 *       0 <= iteration < 2^43, 0 <= update < 2^20 (asserted): distinct pairs, distinct
 *       indices, distinct streams.
 * Sample j = 0, 1, ..., B-1 in that order: k = replay_below64(&r, E * stored),
 * env[j] = k / stored, pos[j] = k % stored. Every transition of every env is equally
 * likely; the draws depend on (seed, iteration, update, E, stored, B) and nothing else,
 * so every process computes the same list. */
uint64_t replay_stream_index(int64_t iteration, int update);
/* Uniform in [0, n), n >= 1, without modulo bias, by rejection: t = 2^64 mod n
 * (computed as (0 - n) % n in uint64_t); draw x = calf_rng_next until x >= t; return
 * x % n. (The accepted range [t, 2^64) holds a whole number of copies of [0, n).) */
uint64_t replay_below64(calf_rng *r, uint64_t n);
/* B >= 0 samples as above; E >= 1, stored >= 1, E * stored < 2^63 (asserted). */
void replay_sample(uint64_t seed, int64_t iteration, int update, int num_envs, int64_t stored,
                   int B,
                   int *env,      /* (B) out: global env index */
                   int64_t *pos); /* (B) out: position, 0 oldest */

/* The samples this process computes, in the order its per-env partial gradients fold
 * into the canonical tree: of the B samples, those whose env lies in [env_begin,
 * env_begin + env_count), by env ascending, and within an env in sample order (a stable
 * counting sort). order (>= the count returned) receives sample indices j; local env e's
 * samples are order[offsets[e] .. offsets[e + 1]), offsets[0] = 0, offsets[env_count] =
 * the count returned. */
int replay_select_owned(int B, const int *env, /* (B) */
                        int env_begin, int env_count,
                        int *offsets,  /* (env_count + 1) out */
                        int *order);   /* (B) out, first (return value) entries used */

/* ---- checkpoints ----
 * A job's replay is one counters record, then one record per global env in env order,
 * each written by the env's owner (a checkpoint gathers them), so a resume on another
 * split reads back exactly the same rings. Little-endian, floats as bit patterns:
 *   counters:  tag "RPLC", u64 num_envs, u64 capacity, u64 stored, u32 obs_dim,
 *              u32 act_dim
 *   env:       tag "RPLE", u64 env, u64 stored, u32 obs_dim, u32 act_dim, then for
 *              positions 0 (oldest) .. stored - 1 in order, field by field:
 *              obs (stored * obs_dim f32), act (stored * act_dim f32),
 *              reward (stored f32), terminated (stored bytes, 0 or 1),
 *              next_obs (stored * obs_dim f32)
 * A CALF_DTYPE_U8 replay's records are tagged "RPL8" and "RPE8" (so neither kind loads
 * as the other) and hold obs and next_obs as stored * obs_dim bytes. A replay with masks
 * (mask_dim > 0) tags its records "RPLM" and "RPEM" (bytes: "RPM8" and "REM8"), and each
 * env record ends with next_mask (stored * mask_dim bytes, 0 or 1); the counters record's
 * fields are the same (mask_dim is the env's num_actions, fixed by the config).
 * The write slot is not kept: a loaded ring holds position p in slot p. */
void replay_save_counters(const replay *rb, ckpt_buf *b);
/* The counters record's tag for a replay of obs_dtype, with masks or not ("RPLC",
 * "RPL8", "RPLM", "RPM8"). */
const char *replay_counters_tag(int obs_dtype, bool masked);
/* An env's record is replay_env_record_bytes long (the same for every env of rb);
 * replay_save_env writes env's at out, which has room for it (nothing is allocated). */
size_t replay_env_record_bytes(const replay *rb);
void replay_save_env(const replay *rb, int env, /* global, owned */ unsigned char *out);
/* Read the counters record; its num_envs, capacity and dims must equal rb's. Sets
 * stored (and the write slot); the rings are then to be filled by replay_load_env for
 * every owned env. Errors are CALF_EINVAL through the reader (sticky, the first message
 * kept, naming the reader's name, the offset and what is wrong). */
int replay_load_counters(replay *rb, ckpt_reader *r);
/* Read the record of global env `env` (the next in the payload): its env index, stored
 * count and dims must match; floats must be finite, terminated and mask bytes 0 or 1. An
 * owned env's record fills its ring; another env's is checked and skipped. A failure
 * leaves that env's ring partly written: do not train on it. */
int replay_load_env(replay *rb, ckpt_reader *r, int env);

#endif
