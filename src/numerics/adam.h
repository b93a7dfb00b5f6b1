/* adam.h: calf's optimizer, Adam with global-norm gradient clipping (ALF's Adam and its
 * gradient_clipping), over flat float arrays, with the arithmetic order written down so
 * that ranks stepping slices of one model get one process's bits; and Adam.lr_schedule. */
#ifndef CALF_ADAM_H
#define CALF_ADAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Which optimizer a parameter group steps with: Adam (the zero value, so every existing
 * adam_conf means it) or RMSProp (numerics/rmsprop.h). */
enum { OPTIM_ADAM, OPTIM_RMSPROP };

/* One optimizer's settings (Adam.lr, betas, eps, gradient_clipping); with kind
 * OPTIM_RMSPROP, RMSProp's: lr, eps, alpha, centered (betas unused). Clipping is the same
 * for both. */
typedef struct adam_conf {
    float lr, beta1, beta2, eps;
    double max_norm;         /* clip the gradient to this global norm (0: none) */
    int kind;                /* OPTIM_ADAM or OPTIM_RMSPROP */
    float alpha;             /* RMSProp's decay of its averages */
    float one_minus_alpha;   /* 1 - alpha rounded once from double (rmsprop.h) */
    bool centered;           /* RMSProp divides by the root of a variance, not of a mean square */
} adam_conf;

/* Adam (Kingma & Ba; PyTorch's arrangement of the bias corrections) over n flat floats:
 * m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps), t = step >= 1
 * (the count of updates including this one). Bias corrections in double. A new m or v
 * under FLT_MIN in magnitude is stored, and used, as +0: a weight whose gradient is 0
 * (a dead ReLU unit) would otherwise decay its moments into subnormals, which Intel
 * CPUs multiply in microcode (Sapphire Rapids: ~10x slower, 18% of a SAC HalfCheetah
 * update). A compare and a select, so the bits are the same on every CPU; NaN stays NaN. */
void adam_step(float *params,     /* (n) */
               const float *grad, /* (n) */
               float *m,          /* (n) first moments */
               float *v,          /* (n) second moments */
               size_t n, int64_t step, float lr, float beta1, float beta2, float eps);

/* The global norm sqrt(sum g^2), in double, is defined over chunks of ADAM_NORM_CHUNK
 * elements (the last may be short) so that ranks holding whole chunks of a gradient can
 * each sum theirs and get the same bits as one process: adam_sum_sq of every chunk, added
 * in chunk order. Within a chunk element i goes to lane i % 8 in index order and the
 * eight lanes are combined in a fixed tree. */
enum { ADAM_NORM_CHUNK = 512 };
double adam_sum_sq(const float *x, size_t n); /* one chunk: n <= ADAM_NORM_CHUNK */
double adam_norm_of_chunks(const double *chunk_sq, size_t chunks);
double adam_global_norm(const float *grad, size_t n);
/* PyTorch's clip_grad_norm_ factor: max_norm / (norm + 1e-6) as a float when max_norm >
 * 0 and that is below 1, else 1. adam_scale multiplies (nothing to do for 1). */
float adam_clip_coef(double norm, double max_norm);
void adam_scale(float *x, size_t n, float c);

/* Iteration k of a run of N under Adam.lr_schedule = 'linear': lr * (1 - k / N) in
 * double, rounded to float once (0 from N on, and when N is unknown). Alike on every
 * process. */
float adam_lr_linear_at(double lr, int64_t k, int64_t N);

#endif
