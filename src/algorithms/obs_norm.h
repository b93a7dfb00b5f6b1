/* obs_norm.h: ALF's observation normalizer (running mean and variance, then clipping) in
 * a form that keeps --nproc bit-identical: during an iteration every env only adds its own
 * observations into a per-env accumulator, and once per iteration the accumulators,
 * summed over the global env index in the canonical tree order by the caller
 * (comm_tree_sum_f64), are merged into the running statistics. The normalization itself
 * is a fixed chain of float operations, which `calf export` writes out as it is here. */
#ifndef CALF_OBS_NORM_H
#define CALF_OBS_NORM_H

#include <stdint.h>

#include "calf/error.h"
#include "records/checkpoint.h"
#include "numerics/export_c.h"

/* Per-env accumulator: OBS_NORM_ACC(dim) doubles (see obs_norm_accumulate). */
#define OBS_NORM_ACC(dim) (2 * (size_t)(dim))

/* Added to the variance before its square root (as ALF and Stable-Baselines do). */
#define OBS_NORM_EPS 1e-8

typedef struct obs_norm {
    int dim;
    float clip;       /* ObservationNormalizer.clipping: |y| <= clip; 0: no clipping */
    int64_t count;    /* observations merged so far */
    double *mean;     /* (dim) running mean */
    double *m2;       /* (dim) running sum of squared deviations from the mean */
    float *shift;     /* (dim) (float)mean, what obs_norm_apply subtracts */
    float *scale;     /* (dim) (float)(1 / sqrt(m2 / count + OBS_NORM_EPS)); 1 while count 0 */
} obs_norm;

/* Statistics of no observations: obs_norm_apply only clips. CALF_ENOMEM when memory runs
 * out (z is then zeroed, nothing held). */
int obs_norm_init(obs_norm *z, int dim, float clip, calf_error *err);
void obs_norm_free(obs_norm *z); /* zeroed z is fine */

/* Add observation x to an env's accumulator acc (OBS_NORM_ACC(dim) doubles, zeroed at the
 * start of a batch), in double, about the running mean m (shifted sums, so that no
 * precision is lost to a mean far from zero):
 *   acc[i] += x[i] - m[i],   acc[dim + i] += (x[i] - m[i])^2 */
void obs_norm_accumulate(const obs_norm *z, const float *x, /* (dim) */ double *acc);

/* Merge a batch of n > 0 observations, given the sum over its envs of their accumulators
 * (taken about the same running mean), into the running statistics (Chan et al.'s
 * pairwise update, in double):
 *   mean_b = m + S1 / n,  M2_b = S2 - S1^2 / n,  d = mean_b - mean,  N = count + n
 *   mean += d * n / N,  m2 += M2_b + d^2 * count * n / N,  count = N
 * then recompute shift and scale. */
void obs_norm_merge(obs_norm *z, int64_t n, const double *sum /* (OBS_NORM_ACC(dim)) */);

/* y = (x - shift) * scale in float (two roundings), then clamped to [-clip, clip] when
 * clip > 0 (a NaN stays NaN). x and y may be the same array. */
void obs_norm_apply(const obs_norm *z, const float *x, /* (rows, dim) */ int rows,
                    float *y /* (rows, dim) */);

/* Checkpoint section "ONRM": u64 dim, i64 count, f64 mean[dim], f64 m2[dim]. Load checks
 * the dim, that count equals want_count (what the iteration implies) and that the values
 * are finite (m2 >= 0), then recomputes shift and scale. */
void obs_norm_save(const obs_norm *z, ckpt_buf *b);
int obs_norm_load(obs_norm *z, ckpt_reader *r, int64_t want_count, calf_error *err);

/* `calf export`: write into calf_policy_act's body a float array named `out` (dim)
 * holding obs_norm_apply of `obs`, with shift and scale as hex constants. */
void obs_norm_export_c(const obs_norm *z, export_c *x, const char *out);

#endif
