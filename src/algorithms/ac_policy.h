/* ac_policy.h: an actor-critic's policy outside its rollout (evaluation, calf play, a
 * policy handle, calf export), as any on-policy actor-critic (PPO, an A2C) acts with it:
 * greedy actions or actions sampled from the distribution, a few rows at a time through a
 * cache made with the algorithm (acting never allocates), a recurrent actor's state per
 * greedy row, and the greedy policy described to calf export as C. */
#ifndef CALF_AC_POLICY_H
#define CALF_AC_POLICY_H

#include <stdint.h>

#include "algorithms/ac_model.h"
#include "algorithms/ac_recurrent.h"
#include "algorithms/obs_norm.h"
#include "calf/error.h"
#include "calf/rng.h"
#include "numerics/export_c.h"
#include "numerics/net.h"

/* Rows per pass through the actor. Rows are independent (numerics/nn.h), so the slicing
 * never shows in the actions. */
enum { AC_POLICY_ROWS = 64 };

typedef struct ac_policy {
    const ac_model *md;     /* the model acted with (its arrays may move: onpolicy_start) */
    const obs_norm *onorm;  /* the statistics observations are normalized by, or NULL */
    net_cache cache;        /* the actor's AC_POLICY_ROWS rows */
    float *head;            /* (AC_POLICY_ROWS, head_dim) */
    float *in;              /* (AC_POLICY_ROWS, obs_dim) normalized rows, when normalizing */
    ac_rec_state gstate;    /* a recurrent actor's greedy rows (ac_policy_reset) */
} ac_policy;

/* The cache for md's actor; observations normalized by onorm (NULL: as they come), which
 * must outlive p, as md must. CALF_ENOMEM when memory runs out (ac_policy_free frees what
 * was made; a zeroed p frees as a no-op). */
int ac_policy_init(ac_policy *p, const ac_model *md, const obs_norm *onorm, calf_error *err);
void ac_policy_free(ac_policy *p);

/* algorithm_ops.greedy (rng NULL) and .sample (row r drawn from rng[r]): each row's
 * action from obs (rows, obs_dim) and its mask (rows, num_actions; NULL: all valid) into
 * act (rows, action_ints) or u (rows, action_dim): the distribution's mode (ac_model_mode)
 * or a draw (ac_model_sample). A recurrent actor steps the rows' states, as the last
 * ac_policy_reset made them and earlier calls left them. */
void ac_policy_act(ac_policy *p, const float *obs, const uint8_t *mask, int rows,
                   calf_rng *rng, int *act, float *u);
/* algorithm_ops.greedy_memory: the floats of state a greedy row carries (a recurrent
 * actor's core: h, and c for an LSTM), 0 for none. */
int ac_policy_memory(const ac_policy *p);
/* algorithm_ops.greedy_reset: room for rows rows, every state zeroed. CALF_ENOMEM. */
int ac_policy_reset(ac_policy *p, int rows, calf_error *err);
/* algorithm_ops.greedy_reset_rows: the rows among [0, rows) whose which byte is set
 * start over. */
void ac_policy_reset_rows(ac_policy *p, const uint8_t *which, int rows);
/* algorithm_ops.export_c: the actor and its distribution's mode, as ac_policy_act
 * computes them for one row. */
int ac_policy_export_c(const ac_policy *p, export_c *x, calf_error *err);

#endif
