/* calf/policy.h: a trained run's policy, opened from its run dir or one of its
 * checkpoints, acting on batches of observations inside the caller's program: greedy,
 * computing what `calf play` computes, float for float (observation normalization
 * included), for any batch of rows; or sampled from its distribution with a seed. */
#ifndef CALF_POLICY_H
#define CALF_POLICY_H

#include <stdint.h>

#include "calf/error.h"

/* Opaque: made by calf_policy_open, released by calf_policy_close. One thread at a time
 * may use a handle (acting reuses its buffers); different handles are independent.
 *
 * Misuse is refused, never undefined: a NULL handle, or one closed already, given to
 * calf_policy_greedy is CALF_EINVAL with a message; the queries below then answer -1
 * (NULL for the strings); a second close does nothing; a NULL out is CALF_EINVAL. */
typedef struct calf_policy calf_policy;

/* Open the policy of the run in root_dir (its config.gin, checked against the
 * checkpoint's config digest) at checkpoint: NULL means the newest valid one in
 * ROOT/train/algorithm (older ones are tried, with a warning on stderr, when a newer
 * one is damaged); else that checkpoint file. root_dir NULL with a checkpoint: the run
 * that holds it, three levels up (ROOT/train/algorithm/ckpt-N). The run's environment
 * must be registered: a plug-in's, load it first (calf_env_load_library, calf/env.h).
 * On success *out is the caller's, to release with calf_policy_close. Errors, with *out
 * NULL and nothing held: CALF_EINVAL naming the file for a missing or bad config, no
 * checkpoint, a damaged one or one of another config, an unregistered environment (the
 * message says which --env_lib the run used); CALF_EIO when the checkpoint directory
 * cannot be read; CALF_ENOMEM "out of memory allocating ..." when the policy does not
 * fit. */
int calf_policy_open(const char *root_dir, const char *checkpoint, calf_policy **out,
                     calf_error *err);
void calf_policy_close(calf_policy *p); /* NULL is fine */

/* ---- what it acts on ------------------------------------------------------------- */
int calf_policy_obs_dim(const calf_policy *p);     /* floats per observation row */
/* 1: discrete, one int action per row in 0..calf_policy_num_actions-1; 0: continuous,
 * calf_policy_action_dim floats per row. */
int calf_policy_discrete(const calf_policy *p);
int calf_policy_num_actions(const calf_policy *p); /* discrete: the choices; else 0 */
int calf_policy_action_dim(const calf_policy *p);  /* continuous: floats; discrete: 0 */
/* MultiDiscrete: the sub-actions D and their sizes (D ints summing to num_actions, the
 * handle's until close); an action is then D ints per row. Otherwise 0 and NULL. */
int calf_policy_action_dims(const calf_policy *p);
const int *calf_policy_action_nvec(const calf_policy *p);
/* 1 when the run's environment masks its actions (calf_policy_greedy_masked). */
int calf_policy_masked(const calf_policy *p);
/* The run's environment name, and the checkpoint file opened (as given, or as found in
 * the run dir) and its iteration. The strings are the handle's, valid until close. */
const char *calf_policy_env_name(const calf_policy *p);
const char *calf_policy_checkpoint(const calf_policy *p);
int64_t calf_policy_iteration(const calf_policy *p);

/* ---- a policy with memory (PPO with a recurrent core) ------------------------------ *
 * Such a policy keeps a state for each row (its core's h, and c for an LSTM): a greedy
 * or sample call's row r steps row r's state, as `calf play` steps each episode's (and
 * the training's rollout while it samples); greedy and sample calls share that state.
 * Open leaves it no rows; calf_policy_reset makes them. */
/* Floats of state each row carries from call to call; 0 for a policy without memory. */
int calf_policy_state_size(const calf_policy *p);
/* which NULL: rows rows, each starting an episode now (its state zeroed), as `calf play`
 * starts its episodes; else which (rows) bytes: the rows whose byte is nonzero start an
 * episode (their state zeroed; an env that ended and was reset), the others keep theirs,
 * rows at most those of the last full reset. A greedy or sample call then acts on at most
 * that many rows (rows [0, rows) of the call are the state's rows [0, rows)); the first
 * call of a policy never reset resets its rows itself. A policy without memory takes every
 * reset and does nothing. CALF_EINVAL for rows < 0, or more rows than the last full
 * reset's with which; CALF_ENOMEM when the state does not fit. */
int calf_policy_reset(calf_policy *p, int rows, const uint8_t *which, calf_error *err);

/* Greedy actions for rows observations: obs (rows, obs_dim) as the environment returns
 * them (the policy normalizes them itself when the run did). Writes actions (rows) for
 * a discrete policy or cont_actions (rows, action_dim) for a continuous one; the other
 * may be NULL. Continuous actions are the policy's, not clipped: an env clips to its
 * bounds as it steps (calf_vec_env_step does). Row r's action depends only on row r.
 * (A policy with memory: row r's action depends on row r's observations since its
 * reset, see above.) rows 0 writes nothing. CALF_EINVAL for rows < 0, a NULL array that
 * is needed, or, with memory, more rows than the last reset made;
 * CALF_ENOMEM when scratch for more rows than before does not fit (the handle stays
 * usable).
 * (Not named calf_policy_act: that is the one-row function a `calf export` file
 * defines, which computes the same actions.) */
int calf_policy_greedy(calf_policy *p, const float *obs, int rows, int *actions,
                       float *cont_actions, calf_error *err);
/* calf_policy_greedy among the actions mask allows: mask (rows, num_actions) bytes,
 * nonzero where valid, as the environment reports them (calf_vec_env_action_mask; any
 * discrete policy takes one, also of an env without a mask), or NULL (every action
 * valid: calf_policy_greedy). A MultiDiscrete policy writes actions
 * (rows, D). CALF_EINVAL, before anything is written, when a row's mask (one of its
 * sub-action slices) allows no action. */
int calf_policy_greedy_masked(calf_policy *p, const float *obs, const uint8_t *mask, int rows,
                              int *actions, float *cont_actions, calf_error *err);

/* ---- sampling ---------------------------------------------------------------------- */
/* 1 when the policy is a distribution to draw from (PPO's, SAC's); 0 when it is
 * deterministic (DQN's argmax of Q, TD3's and DDPG's actor), whose samples are its greedy
 * actions; -1 for a handle that is not open. */
int calf_policy_stochastic(const calf_policy *p);
/* Seed the handle's sampling streams: row r of the calf_policy_sample calls that follow
 * draws from calf's stream (seed, r, CALF_RNG_ACTION) (calf/rng.h), each call going on
 * from where row r's last draw left it, until the next seed. A handle starts seeded with
 * 0, so a program that seeds the same and makes the same calls draws the same actions.
 * CALF_EINVAL for a handle that is not open. */
int calf_policy_seed(calf_policy *p, uint64_t seed, calf_error *err);
/* Actions drawn from the policy's distribution for rows observations, as the training
 * draws them: PPO's categorical (masked, per sub-action for MultiDiscrete) or Gaussian
 * (continuous, unclipped, as calf_policy_greedy's); SAC's tanh-squashed Gaussian, or
 * softmax(min(Q1, Q2) / alpha) for discrete actions. mask: as calf_policy_greedy_masked's,
 * or NULL. A deterministic policy (calf_policy_stochastic 0) writes its greedy actions
 * and draws nothing. Row r's action depends only on row r's observation and mask and
 * stream r (with memory: and on row r's state, which the call steps as greedy does).
 * The errors are calf_policy_greedy_masked's. */
int calf_policy_sample(calf_policy *p, const float *obs, const uint8_t *mask, int rows,
                       int *actions, float *cont_actions, calf_error *err);

#endif
