/* rmsprop.c: RMSProp's step (rmsprop.h). A dispatched file (kernels.h): the fma variant
 * steps eight floats at a time with the FMA instruction, the rest (and the generic
 * variant) one by one with fmaf, in the same order, so the bits do not depend on either. */
#include "numerics/rmsprop.h"

#include <float.h>
#include <math.h>

#if defined(__AVX2__) && defined(__FMA__) /* as adam.c's kernels, whose builds this follows */
#include <immintrin.h>
#define RMSPROP_AVX2 1
#else
#define RMSPROP_AVX2 0
#endif

/* x, or +0 where |x| < FLT_MIN (a NaN stays NaN) */
static inline float flush(float x) { return fabsf(x) < FLT_MIN ? 0.0f : x; }

#if RMSPROP_AVX2
static inline __m256 flush8(__m256 x) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    return _mm256_andnot_ps(_mm256_cmp_ps(_mm256_and_ps(x, abs_mask), _mm256_set1_ps(FLT_MIN),
                                          _CMP_LT_OQ),
                            x);
}

static void rmsprop_vec(float *params, const float *grad, float *m, float *v, size_t n,
                        float neg_lr, float alpha, float one_minus_alpha, float eps, bool centered,
                        size_t *done) {
    const __m256 va = _mm256_set1_ps(alpha), vw = _mm256_set1_ps(one_minus_alpha);
    const __m256 veps = _mm256_set1_ps(eps), vlr = _mm256_set1_ps(neg_lr);
    const __m256 zero = _mm256_setzero_ps();
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_loadu_ps(grad + i);
        __m256 vi = _mm256_fmadd_ps(_mm256_mul_ps(vw, g), g,
                                    _mm256_mul_ps(_mm256_loadu_ps(v + i), va));
        vi = flush8(vi);
        _mm256_storeu_ps(v + i, vi);
        __m256 d = vi;
        if (centered) {
            __m256 mi = _mm256_fmadd_ps(vw, g, _mm256_mul_ps(_mm256_loadu_ps(m + i), va));
            mi = flush8(mi);
            _mm256_storeu_ps(m + i, mi);
            d = _mm256_fmadd_ps(_mm256_xor_ps(mi, sign), mi, vi);
            /* below 0 (or NaN): 0, then a NaN v put back */
            d = _mm256_and_ps(d, _mm256_cmp_ps(d, zero, _CMP_GE_OQ));
            d = _mm256_or_ps(d, _mm256_and_ps(vi, _mm256_cmp_ps(vi, vi, _CMP_UNORD_Q)));
        }
        __m256 avg = _mm256_add_ps(_mm256_sqrt_ps(d), veps);
        __m256 p = _mm256_add_ps(_mm256_loadu_ps(params + i),
                                 _mm256_div_ps(_mm256_mul_ps(vlr, g), avg));
        _mm256_storeu_ps(params + i, p);
    }
    *done = i;
}
#endif

void rmsprop_step(float *params, const float *grad, float *m, float *v, size_t n, float neg_lr,
                  float alpha, float one_minus_alpha, float eps, bool centered) {
    size_t i = 0;
#if RMSPROP_AVX2
    rmsprop_vec(params, grad, m, v, n, neg_lr, alpha, one_minus_alpha, eps, centered, &i);
#endif
    for (; i < n; i++) {
        float g = grad[i];
        float vi = flush(fmaf(one_minus_alpha * g, g, v[i] * alpha));
        v[i] = vi;
        float d = vi;
        if (centered) {
            float mi = flush(fmaf(one_minus_alpha, g, m[i] * alpha));
            m[i] = mi;
            d = fmaf(-mi, mi, vi);
            if (!(d >= 0.0f)) d = isnan(vi) ? vi : 0.0f;
        }
        params[i] = params[i] + (neg_lr * g) / (sqrtf(d) + eps);
    }
}
