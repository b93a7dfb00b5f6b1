/* adam.c: the optimizer's arithmetic (adam.h): Adam's step over flat float arrays, the
 * chunked global norm and the clipping factor, and the linear learning-rate schedule. The
 * one home of Adam in calf: parameter groups (param_group.c) and every algorithm use it. */
#include "numerics/adam.h"

#include <float.h>
#include <math.h>

#include "calf/error.h"
#include "base/cmath.h"

#if defined(__AVX2__) && defined(__FMA__) /* as nn.c's kernels, whose builds this follows */
#include <immintrin.h>
#define ADAM_AVX2 1
#else
#define ADAM_AVX2 0
#endif

#if ADAM_AVX2
/* sqrtf in a loop keeps gcc from vectorising (errno); the instruction is the same
 * correctly rounded square root either way. */
static inline void adam_vec(float *p, const float *g, float *m, float *v, size_t n, float b1,
                            float b2, float omb1, float omb2, float bc2s, float eps,
                            float step_size, size_t *done) {
    size_t i = 0;
    const __m256 vb1 = _mm256_set1_ps(b1), vb2 = _mm256_set1_ps(b2);
    const __m256 vomb1 = _mm256_set1_ps(omb1), vomb2 = _mm256_set1_ps(omb2);
    const __m256 vbc2s = _mm256_set1_ps(bc2s), veps = _mm256_set1_ps(eps);
    const __m256 vstep = _mm256_set1_ps(step_size);
    const __m256 vtiny = _mm256_set1_ps(FLT_MIN), vabs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (; i + 8 <= n; i += 8) {
        __m256 gi = _mm256_loadu_ps(g + i);
        __m256 mi = _mm256_add_ps(_mm256_mul_ps(vb1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(vomb1, gi));
        __m256 vi = _mm256_add_ps(_mm256_mul_ps(vb2, _mm256_loadu_ps(v + i)),
                                  _mm256_mul_ps(vomb2, _mm256_mul_ps(gi, gi)));
        mi = _mm256_andnot_ps(_mm256_cmp_ps(_mm256_and_ps(mi, vabs), vtiny, _CMP_LT_OQ), mi);
        vi = _mm256_andnot_ps(_mm256_cmp_ps(vi, vtiny, _CMP_LT_OQ), vi);
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), vbc2s), veps);
        __m256 upd = _mm256_mul_ps(vstep, _mm256_div_ps(mi, denom));
        _mm256_storeu_ps(p + i, _mm256_sub_ps(_mm256_loadu_ps(p + i), upd));
    }
    *done = i;
}
#endif

void adam_step(float *params, const float *grad, float *m, float *v, size_t n, int64_t step,
               float lr, float beta1, float beta2, float eps) {
    CALF_ASSERT(step >= 1);
    double bc1 = 1.0 - cm_powi((double)beta1, step);
    double bc2 = 1.0 - cm_powi((double)beta2, step);
    float step_size = (float)((double)lr / bc1);
    float bc2s = (float)sqrt(bc2);
    float omb1 = 1.0f - beta1, omb2 = 1.0f - beta2;
    size_t i = 0;
#if ADAM_AVX2
    adam_vec(params, grad, m, v, n, beta1, beta2, omb1, omb2, bc2s, eps, step_size, &i);
#endif
    for (; i < n; i++) {
        float g = grad[i];
        float mi = beta1 * m[i] + omb1 * g;
        float vi = beta2 * v[i] + omb2 * (g * g);
        if (fabsf(mi) < FLT_MIN) mi = 0.0f;
        if (vi < FLT_MIN) vi = 0.0f;
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) / bc2s + eps;
        params[i] = params[i] - step_size * (mi / denom);
    }
}

double adam_sum_sq(const float *x, size_t n) {
    /* Eight partial sums (element i goes to lane i % 8), combined in a fixed tree: the
     * order depends only on n, and the lanes vectorise instead of waiting on one long
     * chain of dependent additions. */
    double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) lane[k] += (double)x[i + k] * (double)x[i + k];
    for (int k = 0; i < n; i++, k++) lane[k] += (double)x[i] * (double)x[i];
    return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

double adam_norm_of_chunks(const double *chunk_sq, size_t chunks) {
    double s = 0.0;
    for (size_t c = 0; c < chunks; c++) s += chunk_sq[c];
    return sqrt(s);
}

double adam_global_norm(const float *grad, size_t n) {
    double s = 0.0;
    for (size_t at = 0; at < n; at += ADAM_NORM_CHUNK)
        s += adam_sum_sq(grad + at, n - at < ADAM_NORM_CHUNK ? n - at : ADAM_NORM_CHUNK);
    return sqrt(s);
}

float adam_clip_coef(double norm, double max_norm) {
    if (max_norm <= 0.0) return 1.0f;
    double coef = max_norm / (norm + 1e-6);
    return coef < 1.0 ? (float)coef : 1.0f;
}

void adam_scale(float *x, size_t n, float c) {
    if (c == 1.0f) return;
    for (size_t i = 0; i < n; i++) x[i] *= c;
}

float adam_lr_linear_at(double lr, int64_t k, int64_t N) {
    if (N <= 0 || k >= N) return 0.0f;
    return (float)(lr * (1.0 - (double)k / (double)N));
}
