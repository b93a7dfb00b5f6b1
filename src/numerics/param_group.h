/* param_group.h: named parameter groups, each its own flat float array with (when it is
 * trained) a gradient and Adam moments beside it, and its own optimizer settings and
 * step count: SAC's actor, critics, target critics and temperature are four groups, PPO's
 * actor-critic one. A target network is a group without an optimizer holding a copy of
 * another's layout. The arithmetic of a step is adam.h's, or rmsprop.h's where the group's
 * settings say RMSProp (its square_avg in v, its grad_avg in m). */
#ifndef CALF_PARAM_GROUP_H
#define CALF_PARAM_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "calf/error.h"
#include "numerics/adam.h"
#include "records/checkpoint.h"

typedef struct param_group {
    char tag[5];             /* the group's checkpoint section, 4 characters */
    size_t n;                /* floats */
    float *params;           /* (n) */
    float *grad, *m, *v;     /* (n) each when trained, else NULL; RMSProp's grad_avg and
                                square_avg are m and v, so the checkpoint holds either */
    adam_conf opt;
    int64_t step;            /* optimizer steps taken */
    bool external;           /* the arrays are the caller's (param_group_use): not freed */
} param_group;

/* Zeroed arrays for n floats (64-byte aligned); trained: with grad, m and v. CALF_ENOMEM
 * when memory runs out (param_group_free frees what was made). */
int param_group_init(param_group *g, const char *tag, size_t n, bool trained, adam_conf opt,
                     calf_error *err);
void param_group_free(param_group *g); /* zeroed or freed g is fine */
/* Use params, grad, m and v (n floats each) that the caller owns, e.g. memory shared with
 * other processes holding the same group, instead of the group's own, which are freed
 * without copying; param_group_free then leaves the caller's alone. */
void param_group_use(param_group *g, float *params, float *grad, float *m, float *v);
/* One optimizer step on the group's gradient: clip to opt.max_norm (adam_global_norm
 * order), then Adam (adam_step) with step + 1, or RMSProp (rmsprop_step). False (nothing changed) when the
 * gradient is not finite. */
bool param_group_step(param_group *g);
/* The same step on elements [lo, hi) only, given the norm of the whole gradient (finite):
 * processes that hold one group in shared memory each step their slice (comm_slice), and
 * together they make param_group_step's bits; each counts the step in its own g->step. */
void param_group_step_slice(param_group *g, size_t lo, size_t hi, double norm);
/* A 64-bit digest of params, m and v (to prove processes agree). */
uint64_t param_group_digest(const param_group *g, uint64_t h);
/* Section `tag`: params, and when trained the step count and both moments. */
void param_group_save(const param_group *g, ckpt_buf *b);
/* Read what save wrote; non-finite values and a step count other than want_step (the
 * count the checkpoint's iteration implies; ignored for untrained groups) are errors
 * naming r->name. */
int param_group_load(param_group *g, ckpt_reader *r, int64_t want_step, calf_error *err);

#endif
