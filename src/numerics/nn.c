/* nn.c: flat-memory MLPs for calf's policies: layout, orthogonal init, forward/backward
 * kernels and activations. The kernels block over rows and features for
 * speed, but every output element is computed in the fixed order documented in nn.h,
 * so a row's bits never depend on the batch size, its position, or its neighbours. */
#include "numerics/nn.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/scratch.h"
#include "calf/error.h"
#include "base/cmath.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define NN_AVX2 1
#else
#define NN_AVX2 0
#endif
/* The avx512 variant (and a native build on such a CPU): the products' tiles 16 floats
 * wide (__m512), everything else as with AVX2. Each output's chain of fused multiply-adds
 * is the one nn.h states whatever the width: a wider tile computes more outputs at once. */
#if NN_AVX2 && defined(__AVX512F__) && defined(__AVX512VL__)
#define NN_AVX512 1
#else
#define NN_AVX512 0
#endif

#define NN_INLINE static inline __attribute__((always_inline))

/* ---------------------------------------------------------------- memory, layout */

float *nn_alloc_floats_at(size_t n, calf_error *err, const char *file, int line) {
    bool fits = n <= (SIZE_MAX - 63) / sizeof(float);
    size_t bytes = fits ? (n * sizeof(float) + 63) / 64 * 64 : 0;
    if (bytes == 0) bytes = 64;
    float *p = fits ? aligned_alloc(64, bytes) : NULL;
    if (!p) {
        mem_failed(err, n, sizeof(float), file, line);
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

void nn_mlp_layout(nn_mlp *m, int in, const int *hidden, int num_hidden, int out,
                   nn_activation act, size_t *cursor) {
    CALF_ASSERT(num_hidden >= 0 && num_hidden + 1 <= NN_MAX_LAYERS);
    CALF_ASSERT(in > 0 && out > 0 && (num_hidden == 0 || hidden != NULL));
    memset(m, 0, sizeof *m);
    m->num_layers = num_hidden + 1;
    m->act = act;
    m->sizes[0] = in;
    for (int l = 0; l < num_hidden; l++) {
        CALF_ASSERT(hidden[l] > 0);
        m->sizes[l + 1] = hidden[l];
    }
    m->sizes[m->num_layers] = out;
    size_t cur = *cursor;
    m->offset = cur;
    for (int l = 0; l < m->num_layers; l++) {
        cur = (cur + 15) / 16 * 16;
        m->w_off[l] = cur;
        cur += (size_t)m->sizes[l] * (size_t)m->sizes[l + 1];
        m->b_off[l] = cur;
        cur += (size_t)m->sizes[l + 1];
    }
    m->num_params = cur - m->offset;
    *cursor = cur;
}

/* ---------------------------------------------------------------- orthogonal init */

int nn_orthogonal_init(float *w, int rows, int cols, float gain, calf_rng *rng,
                       calf_error *err) {
    CALF_ASSERT(rows > 0 && cols > 0);
    int nb = rows > cols ? rows : cols; /* vector length */
    int ns = rows > cols ? cols : rows; /* number of orthonormal vectors */
    /* v holds the ns vectors as contiguous rows: v[j][k] is element (k, j) of the
     * Gaussian (nb, ns) matrix, drawn row-major from rng */
    double *v = mem_alloc((size_t)nb * (size_t)ns * sizeof *v, err); /* (ns, nb) */
    if (!v) return CALF_ENOMEM;
    for (size_t k = 0; k < (size_t)nb; k++)
        for (size_t j = 0; j < (size_t)ns; j++) v[j * nb + k] = calf_rng_normal(rng);
    /* Modified Gram-Schmidt on the columns, twice per column ("twice is enough") so the
     * result is orthonormal to double precision; the diagonal of R comes out positive,
     * which is the sign convention PyTorch applies after its QR. */
    for (int j = 0; j < ns; j++) {
        double *vj = v + (size_t)j * nb;
        for (int pass = 0; pass < 2; pass++) {
            for (int i = 0; i < j; i++) {
                const double *vi = v + (size_t)i * nb;
                double d = 0.0;
                for (int k = 0; k < nb; k++) d += vi[k] * vj[k];
                for (int k = 0; k < nb; k++) vj[k] -= d * vi[k];
            }
        }
        double norm = 0.0;
        for (int k = 0; k < nb; k++) norm += vj[k] * vj[k];
        norm = sqrt(norm);
        CALF_ASSERT(norm > 0.0);
        for (int k = 0; k < nb; k++) vj[k] /= norm;
    }
    for (int i = 0; i < rows; i++) {
        for (int j = 0; j < cols; j++) {
            double q = rows >= cols ? v[(size_t)j * nb + i] : v[(size_t)i * nb + j];
            w[(size_t)i * cols + j] = (float)(gain * q);
        }
    }
    free(v);
    return CALF_OK;
}

int nn_mlp_init(const nn_mlp *m, float *params, float hidden_gain, float out_gain,
                calf_rng *rng, calf_error *err) {
    memset(params + m->offset, 0, m->num_params * sizeof(float));
    for (int l = 0; l < m->num_layers; l++) {
        float gain = l + 1 < m->num_layers ? hidden_gain : out_gain;
        int rc = nn_orthogonal_init(params + m->w_off[l], m->sizes[l], m->sizes[l + 1], gain, rng,
                                    err);
        if (rc) return rc;
    }
    return CALF_OK;
}

/* ---------------------------------------------------------------- kernels */

/* In 16x16 tiles: a row-by-row copy writes each element of wt to another cache line
 * (256x256: 64K lines per call, a tenth of a 256x256 SAC update's time). With AVX2 the
 * whole 8x8 blocks go through registers (eight row loads, eight stores of a transposed
 * row), down each 8-column strip of w in turn, so that the stores stream along eight wt
 * rows; the scalar tiles moved one float per load and store, 2-4x slower (512 x 512, an
 * LSTM's W_ih transposed by every backward: 99-125 us, 45-76 us so; bench/README.md). A
 * copy: the bits are w's whatever the path. */
#if NN_AVX2
NN_INLINE void transpose8(const float *w, size_t ldw, float *wt, size_t ldt) {
    __m256 r[8], t[8], s[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(w + (size_t)i * ldw);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);     /* a0 b0 a1 b1 | a4 b4 a5 b5 */
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]); /* a2 b2 a3 b3 | a6 b6 a7 b7 */
    }
    for (int i = 0; i < 8; i += 4) {
        s[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);     /* a0 b0 c0 d0 | a4 .. d4 */
        s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE); /* columns 1 | 5 */
        s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {
        _mm256_storeu_ps(wt + (size_t)j * ldt, _mm256_permute2f128_ps(s[j], s[j + 4], 0x20));
        _mm256_storeu_ps(wt + (size_t)(j + 4) * ldt, _mm256_permute2f128_ps(s[j], s[j + 4], 0x31));
    }
}
#endif

void nn_transpose(const float *w, int rows, int cols, float *wt) {
    enum { T = 16 };
    int i8 = 0;
#if NN_AVX2
    /* rows [0, i8) in 8x8 blocks where 8 columns remain, their last cols % 8 columns by
     * element; rows [i8, rows) in the tiles below */
    i8 = rows / 8 * 8;
    int c8 = cols / 8 * 8;
    for (int j0 = 0; j0 < c8; j0 += 8)
        for (int i = 0; i < i8; i += 8)
            transpose8(w + (size_t)i * cols + j0, (size_t)cols, wt + (size_t)j0 * rows + i,
                       (size_t)rows);
    for (int j = c8; j < cols; j++)
        for (int i = 0; i < i8; i++) wt[(size_t)j * rows + i] = w[(size_t)i * cols + j];
#endif
    for (int i0 = i8; i0 < rows; i0 += T) {
        int i1 = rows - i0 < T ? rows : i0 + T;
        for (int j0 = 0; j0 < cols; j0 += T) {
            int j1 = cols - j0 < T ? cols : j0 + T;
            for (int j = j0; j < j1; j++)
                for (int i = i0; i < i1; i++) wt[(size_t)j * rows + i] = w[(size_t)i * cols + j];
        }
    }
}

/* y[r][n] = init[n] (0 when init is NULL), then for k ascending
 * y[r][n] = madd(x[r][k], w[k][n], y[r][n]), for r < R, n < N. Forward (w = W) and
 * dX (x = dy, w = W^T) both use it. A tile of RT rows x 8*NV columns keeps its
 * accumulators in registers and shares each weight load between its rows. */
static void scalar_rows(const float *x, size_t ldx, const float *w, size_t ldw, int K,
                        int n_begin, int n_end, const float *init, float *y, size_t ldy,
                        int R) {
    for (int r = 0; r < R; r++) {
        for (int n = n_begin; n < n_end; n++) {
            float acc = init ? init[n] : 0.0f;
            for (int k = 0; k < K; k++) acc = nn_madd(x[(size_t)r * ldx + k], w[(size_t)k * ldw + n], acc);
            y[(size_t)r * ldy + n] = acc;
        }
    }
}

#if NN_AVX2
NN_INLINE void rows_tile(int RT, int NV, const float *x, size_t ldx, const float *w,
                         size_t ldw, int K, const float *init, float *y, size_t ldy) {
    __m256 acc[8][6];
    for (int r = 0; r < RT; r++)
        for (int v = 0; v < NV; v++)
            acc[r][v] = init ? _mm256_loadu_ps(init + 8 * v) : _mm256_setzero_ps();
    for (int k = 0; k < K; k++) {
        __m256 wv[6];
        for (int v = 0; v < NV; v++) wv[v] = _mm256_loadu_ps(w + (size_t)k * ldw + 8 * v);
        for (int r = 0; r < RT; r++) {
            __m256 xb = _mm256_broadcast_ss(x + (size_t)r * ldx + k);
            for (int v = 0; v < NV; v++) acc[r][v] = _mm256_fmadd_ps(xb, wv[v], acc[r][v]);
        }
    }
    for (int r = 0; r < RT; r++)
        for (int v = 0; v < NV; v++) _mm256_storeu_ps(y + (size_t)r * ldy + 8 * v, acc[r][v]);
}

/* Four columns, where a layer's width leaves them (100 = 6 x 16 + 4): the same fused
 * multiply-add chain per element as rows_tile and scalar_rows, in 128-bit registers. */
NN_INLINE void rows_tile4(int RT, const float *x, size_t ldx, const float *w, size_t ldw, int K,
                          const float *init, float *y, size_t ldy) {
    __m128 acc[8];
    for (int r = 0; r < RT; r++) acc[r] = init ? _mm_loadu_ps(init) : _mm_setzero_ps();
    for (int k = 0; k < K; k++) {
        __m128 wv = _mm_loadu_ps(w + (size_t)k * ldw);
        for (int r = 0; r < RT; r++)
            acc[r] = _mm_fmadd_ps(_mm_broadcast_ss(x + (size_t)r * ldx + k), wv, acc[r]);
    }
    for (int r = 0; r < RT; r++) _mm_storeu_ps(y + (size_t)r * ldy, acc[r]);
}

NN_INLINE void rows_block(int RT, int NV, const float *x, size_t ldx, const float *w,
                          size_t ldw, int K, int N, const float *init, float *y, size_t ldy) {
    int n = 0;
    if (NV == 6)
        for (; n + 48 <= N; n += 48)
            rows_tile(RT, 6, x, ldx, w + n, ldw, K, init ? init + n : NULL, y + n, ldy);
    if (NV >= 4)
        for (; n + 32 <= N; n += 32)
            rows_tile(RT, 4, x, ldx, w + n, ldw, K, init ? init + n : NULL, y + n, ldy);
    if (NV >= 2)
        for (; n + 16 <= N; n += 16)
            rows_tile(RT, 2, x, ldx, w + n, ldw, K, init ? init + n : NULL, y + n, ldy);
    for (; n + 8 <= N; n += 8)
        rows_tile(RT, 1, x, ldx, w + n, ldw, K, init ? init + n : NULL, y + n, ldy);
    if (n + 4 <= N) {
        rows_tile4(RT, x, ldx, w + n, ldw, K, init ? init + n : NULL, y + n, ldy);
        n += 4;
    }
    if (n < N) scalar_rows(x, ldx, w, ldw, K, n, N, init, y, ldy, RT);
}
#endif

#if NN_AVX512
/* rows_tile 16 floats wide: RT rows x 16*NV columns, RT * NV <= 24 of the 32 registers. */
NN_INLINE void rows_tile16(int RT, int NV, const float *x, size_t ldx, const float *w,
                           size_t ldw, int K, const float *init, float *y, size_t ldy) {
    __m512 acc[8][8];
    for (int r = 0; r < RT; r++)
        for (int v = 0; v < NV; v++)
            acc[r][v] = init ? _mm512_loadu_ps(init + 16 * v) : _mm512_setzero_ps();
    for (int k = 0; k < K; k++) {
        __m512 wv[8];
        for (int v = 0; v < NV; v++) wv[v] = _mm512_loadu_ps(w + (size_t)k * ldw + 16 * v);
        for (int r = 0; r < RT; r++) {
            __m512 xb = _mm512_set1_ps(x[(size_t)r * ldx + k]);
            for (int v = 0; v < NV; v++) acc[r][v] = _mm512_fmadd_ps(xb, wv[v], acc[r][v]);
        }
    }
    for (int r = 0; r < RT; r++)
        for (int v = 0; v < NV; v++) _mm512_storeu_ps(y + (size_t)r * ldy + 16 * v, acc[r][v]);
}

/* Columns in tiles of 16*NV (NV = 8, 4, 2 or 1, from the widest NVW allows), the last
 * N % 16 by the AVX2 tiles: the same chain per element on every path. */
NN_INLINE void rows_block16(int RT, int NVW, const float *x, size_t ldx, const float *w,
                            size_t ldw, int K, int N, const float *init, float *y, size_t ldy) {
    int n = 0;
#define RB16(nv)                                                                               \
    if (NVW >= nv)                                                                             \
        for (; n + 16 * nv <= N; n += 16 * nv)                                                 \
            rows_tile16(RT, nv, x, ldx, w + n, ldw, K, init ? init + n : NULL, y + n, ldy);
    RB16(8) RB16(4) RB16(2) RB16(1)
#undef RB16
    if (n < N) rows_block(RT, 2, x, ldx, w + n, ldw, K, N - n, init ? init + n : NULL, y + n, ldy);
}
#endif

/* One block of RT rows over all N columns (x, ldx, w, ldw, K, N, init, y, ldy): NV
 * 8-float vectors a tile with AVX2, NVW 16-float ones with AVX-512. */
#if NN_AVX512
#define ROWS_BLOCK(RT, NV, NVW, ...) rows_block16(RT, NVW, __VA_ARGS__)
#elif NN_AVX2
#define ROWS_BLOCK(RT, NV, NVW, ...) rows_block(RT, NV, __VA_ARGS__)
#endif

#if NN_AVX2
/* The packed product for large weights (MinAtar's fc, 1024 -> 128, forward and dX back
 * through it): the tiles below stream a row-major w of K x N floats (512 KiB there) from
 * L3 for every six rows, its 16-float column strips 512 B apart, and ran at 55-70% of
 * the FMA peak. Here the rows go in blocks of PK_MC, k in chunks of PK_KC; a block's
 * x rows of a chunk are copied contiguous (48 KiB; at 1024 inputs the rows are 4 KiB
 * apart, all in one L1 set) and so is each 16-column strip of w (16 KiB, L1) before
 * the block's 6-row tiles run over it (64 KiB in all, the thread's scratch_get block: a
 * host thread's stack may be smaller; without the block the row tiles below run, with the
 * same chains). A tile starts from init
 * (or +0) at k = 0 and from the y it stored after the chunk before, so every element is
 * still init, then madd over k ascending: the single pass's chain, stored and reloaded
 * between chunks (exact). tests/test_nn.c holds the bits on shapes that take every
 * branch here. */
/* From 512 KiB of weights (more than half this machine's L2; 256 x 256 layers run at
 * 90% of peak as they are) and 32 rows (fewer do not pay for the copies). */
enum { PK_KC = 256, PK_MIN_WEIGHTS = 1 << 17, PK_MIN_ROWS = 32 };

NN_INLINE void packed_tile(int RT, const float *x, size_t ldx, const float *wp, int kc,
                           const float *init, int from_y, float *y, size_t ldy) {
    __m256 acc[6][2];
    for (int r = 0; r < RT; r++)
        for (int v = 0; v < 2; v++)
            acc[r][v] = from_y ? _mm256_loadu_ps(y + (size_t)r * ldy + 8 * v)
                        : init ? _mm256_loadu_ps(init + 8 * v)
                               : _mm256_setzero_ps();
    for (int k = 0; k < kc; k++) {
        __m256 w0 = _mm256_load_ps(wp + 16 * k), w1 = _mm256_load_ps(wp + 16 * k + 8);
        for (int r = 0; r < RT; r++) {
            __m256 xb = _mm256_broadcast_ss(x + (size_t)r * ldx + k);
            acc[r][0] = _mm256_fmadd_ps(xb, w0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(xb, w1, acc[r][1]);
        }
    }
    for (int r = 0; r < RT; r++)
        for (int v = 0; v < 2; v++) _mm256_storeu_ps(y + (size_t)r * ldy + 8 * v, acc[r][v]);
}

#if !NN_AVX512
static void packed_rows(int RT, const float *x, size_t ldx, const float *wp, int kc,
                        const float *init, int from_y, float *y, size_t ldy) {
    switch (RT) { /* constant row counts, so each tile's loops unroll into registers */
    case 6: packed_tile(6, x, ldx, wp, kc, init, from_y, y, ldy); break;
    case 5: packed_tile(5, x, ldx, wp, kc, init, from_y, y, ldy); break;
    case 4: packed_tile(4, x, ldx, wp, kc, init, from_y, y, ldy); break;
    case 3: packed_tile(3, x, ldx, wp, kc, init, from_y, y, ldy); break;
    case 2: packed_tile(2, x, ldx, wp, kc, init, from_y, y, ldy); break;
    default: packed_tile(1, x, ldx, wp, kc, init, from_y, y, ldy); break;
    }
}
#endif

#if NN_AVX512
/* The AVX-512 tile: RT <= 12 rows x 16*NV columns (NV 2: 24 accumulators; 1 for a
 * 16-column strip left over), from a strip of 16*NV columns; otherwise packed_tile. */
NN_INLINE void packed_tile16(int RT, int NV, const float *x, size_t ldx, const float *wp,
                             int kc, const float *init, int from_y, float *y, size_t ldy) {
    __m512 acc[12][2];
    for (int r = 0; r < RT; r++)
        for (int v = 0; v < NV; v++)
            acc[r][v] = from_y ? _mm512_loadu_ps(y + (size_t)r * ldy + 16 * v)
                        : init ? _mm512_loadu_ps(init + 16 * v)
                               : _mm512_setzero_ps();
    for (int k = 0; k < kc; k++) {
        __m512 wv[2];
        for (int v = 0; v < NV; v++) wv[v] = _mm512_load_ps(wp + (size_t)16 * NV * k + 16 * v);
        for (int r = 0; r < RT; r++) {
            __m512 xb = _mm512_set1_ps(x[(size_t)r * ldx + k]);
            for (int v = 0; v < NV; v++) acc[r][v] = _mm512_fmadd_ps(xb, wv[v], acc[r][v]);
        }
    }
    for (int r = 0; r < RT; r++)
        for (int v = 0; v < NV; v++) _mm512_storeu_ps(y + (size_t)r * ldy + 16 * v, acc[r][v]);
}

static void packed_rows16(int RT, int NV, const float *x, size_t ldx, const float *wp, int kc,
                          const float *init, int from_y, float *y, size_t ldy) {
#define PT16(rt)                                                                               \
    case rt:                                                                                   \
        if (NV == 2) packed_tile16(rt, 2, x, ldx, wp, kc, init, from_y, y, ldy);              \
        else packed_tile16(rt, 1, x, ldx, wp, kc, init, from_y, y, ldy);                      \
        break;
    switch (RT) { /* constant shapes, so each tile's loops unroll into registers */
    PT16(12) PT16(11) PT16(10) PT16(9) PT16(8) PT16(7)
    PT16(6) PT16(5) PT16(4) PT16(3) PT16(2) default: PT16(1)
    }
#undef PT16
}
/* Strips of 32 columns (32 KiB, L1) and tiles of up to 12 rows: 14 loads for 24 fused
 * multiply-adds, where 6 x 16 with AVX2 took 8 for 12; blocks of 128 rows, so each strip's
 * copy serves 128 rows, not 48 (160 KiB of scratch in all). The fc alone (1024 -> 128, a
 * throwaway driver, load ~9): 48-row blocks 58-61% of the 16-wide peak at 64 and 1,024
 * rows, 128-row blocks 68-70%. */
enum { PK_NS = 32, PK_RT = 12, PK_MC = 128 };
#else
enum { PK_NS = 16, PK_RT = 6, PK_MC = 48 };
#endif

/* Columns [0, N16) of y, N16 a multiple of 16 (the caller runs the rest): strips of
 * PK_NS columns, then (AVX-512, N16 % 32 = 16) one of 16. A block's x rows are copied
 * contiguous too (at 1024 inputs they are 4 KiB apart: one L1 set). Returns 0, having
 * written nothing, when the thread's scratch cannot be had. */
static int gemm_packed(const float *x, size_t ldx, const float *w, size_t ldw, int K, int N16,
                       const float *init, float *y, size_t ldy, int R) {
    /* wp: one strip of a chunk (PK_KC x PK_NS); xp: a block's rows of it (PK_MC x PK_KC),
     * 64-byte aligned after wp (PK_NS is a multiple of 16) */
    float *wp = scratch_get((size_t)(PK_KC * PK_NS + PK_MC * PK_KC) * sizeof(float));
    if (!wp) return 0;
    float *xp = wp + PK_KC * PK_NS;
    for (int r0 = 0; r0 < R; r0 += PK_MC) {
        int mr = R - r0 < PK_MC ? R - r0 : PK_MC;
        for (int k0 = 0; k0 < K; k0 += PK_KC) {
            int kc = K - k0 < PK_KC ? K - k0 : PK_KC;
            for (int r = 0; r < mr; r++)
                memcpy(xp + (size_t)r * kc, x + (size_t)(r0 + r) * ldx + k0, (size_t)kc * sizeof(float));
            for (int n0 = 0; n0 < N16;) {
                int ns = N16 - n0 >= PK_NS ? PK_NS : 16;
                for (int k = 0; k < kc; k++)
                    memcpy(wp + (size_t)ns * k, w + (size_t)(k0 + k) * ldw + n0, (size_t)ns * sizeof(float));
#if NN_AVX512
                /* the block's rows in tiles of as even a size as PK_RT allows (64: 4 x 11 +
                 * 2 x 10, not 5 x 12 + 4, whose 8 chains would leave the FMA units idle) */
                for (int r = 0, tiles = (mr + PK_RT - 1) / PK_RT; r < mr; tiles--) {
                    int rt = (mr - r + tiles - 1) / tiles;
                    size_t row = (size_t)(r0 + r);
                    packed_rows16(rt, ns / 16, xp + (size_t)r * kc, (size_t)kc, wp, kc,
                                  init ? init + n0 : NULL, k0 > 0, y + row * ldy + n0, ldy);
                    r += rt;
                }
#else
                for (int r = 0; r < mr; r += PK_RT) {
                    int rt = mr - r < PK_RT ? mr - r : PK_RT;
                    size_t row = (size_t)(r0 + r);
                    packed_rows(rt, xp + (size_t)r * kc, (size_t)kc, wp, kc,
                                init ? init + n0 : NULL, k0 > 0, y + row * ldy + n0, ldy);
                }
#endif
                n0 += ns;
            }
        }
    }
    return 1;
}
#endif

static void gemm_rows(const float *x, size_t ldx, const float *w, size_t ldw, int K, int N,
                      const float *init, float *y, size_t ldy, int R) {
#if NN_AVX2
    /* Large weights: the packed product over the whole 16-column strips, the rest of the
     * columns (N % 16) below with every row (same chains either way). */
    int N16 = N / 16 * 16;
    if ((size_t)K * (size_t)N >= PK_MIN_WEIGHTS && R >= PK_MIN_ROWS && N >= 16 &&
        gemm_packed(x, ldx, w, ldw, K, N16, init, y, ldy, R)) {
        if (N16 == N) return;
        w += N16, y += N16, N -= N16;
        if (init) init += N16;
    }
    /* The tile shape follows the rows left only for speed (6x16 is fastest on big
     * batches, 8x8 on a per-env block of 8 rows): every shape runs the same sequence
     * of operations on each element, so the choice never shows in the bits
     * (tests/test_nn.c checks every shape against a scalar reference). */
    int r = 0;
#define AT(r) x + (size_t)(r) * ldx, ldx, w, ldw, K, N, init, y + (size_t)(r) * ldy, ldy
    for (; R - r >= 14; r += 6) ROWS_BLOCK(6, 2, 4, AT(r));
    /* 6, 7, 10 or 11 rows left: one more 6-row block leaves 0, 1, 4 or 5, where an 8-row
     * or 4-row block would leave 2 or 3 single rows (64 rows: 9x6 + 6 + 4, not 9x6 + 8 +
     * 1 + 1) */
    if (R - r == 6 || R - r == 7 || R - r == 10 || R - r == 11) {
        ROWS_BLOCK(6, 2, 4, AT(r));
        r += 6;
    }
    for (; R - r >= 8; r += 8) ROWS_BLOCK(8, 1, 2, AT(r));
    for (; R - r >= 4; r += 4) ROWS_BLOCK(4, 2, 4, AT(r));
    /* 2 or 3 rows (a recurrent core's step over 2 envs) share each weight load: one row at
     * a time streamed the whole weight once per row. Their tiles are 32 columns wide (48
     * for 2 rows of 256 or more): at 16, 2 rows keep 4 chains of fused multiply-adds in
     * flight, half of what two FMA units of 4 cycles' latency need (a 2-row step of
     * 128 -> 512 ran at 37% of peak, 49% at 32 columns, 54% at 48; 512 -> 128 at 48%,
     * 54%, 46%: its 48-column strips straddle cache lines). With AVX-512, 2 rows take 128
     * columns (16 chains), 3 rows 64 (12). */
    if (R - r >= 2) {
        int rt = R - r;
        if (rt == 3) ROWS_BLOCK(3, 4, 4, AT(r));
        else if (N >= 256) ROWS_BLOCK(2, 6, 8, AT(r));
        else ROWS_BLOCK(2, 4, 8, AT(r));
        r += rt;
    }
    for (; r < R; r++) ROWS_BLOCK(1, 4, 8, AT(r));
#undef AT
#else
    scalar_rows(x, ldx, w, ldw, K, 0, N, init, y, ldy, R);
#endif
}

/* dX through a large layer (MinAtar's fc, 1024 -> 128: W^T is 128 x 1024, 512 KiB). The
 * row tiles above walk a 16-column strip of a row-major W^T down its K = out rows, 4 KiB
 * apart at 1024 inputs: every line of the strip falls in the same L1 set and in another
 * page, so the strip is neither kept in L1 nor prefetched, and the whole W^T streams from
 * L3 for every six rows (PPO's dX at 16 rows per env ran at ~55% of the FMA peak). So
 * nn_cache keeps such a layer's W^T packed in strips (wt_pack) in place of the plain
 * transpose, made once per parameter version as the transpose was, and dx_strips runs
 * every row tile of a block over one contiguous strip before the next: one pass over W^T
 * per block of rows, each strip read from L1 by all but the first tile. Each element is
 * still 0, then madd(dy[r][o], W[i][o], .) over o ascending: the order of nn.h. */
#if NN_AVX2
enum { STRIP_MIN_WEIGHTS = PK_MIN_WEIGHTS, STRIP_MAX_OUT = 256 };
#endif

/* Whether nn_cache keeps layer (in, out)'s W^T as strips: from 131,072 weights (as the
 * packed product) and at most 256 outputs (a strip of out x 16 floats in 16 KiB of L1). */
static int wt_strips(int in, int out) {
#if NN_AVX2
    return (size_t)in * (size_t)out >= STRIP_MIN_WEIGHTS && in >= 16 && out >= NN_SMALL_OUT &&
           out <= STRIP_MAX_OUT;
#else
    (void)in, (void)out;
    return 0;
#endif
}

/* W^T of w (in, out) in strips: inputs [s, s + 16) for each s < in16 = in / 16 * 16 at
 * wp + s * out, out rows of 16 floats (wp[s * out + o * 16 + j] = w[s + j][o]); the last
 * in - in16 inputs after them as a row-major (out, in - in16) W^T. in * out floats. */
static void wt_pack(const float *w, int in, int out, float *wp) {
    int in16 = in / 16 * 16, tail = in - in16;
    for (int s = 0; s < in16; s += 16) {
        float *dst = wp + (size_t)s * out;
        for (int j = 0; j < 16; j++) {
            const float *src = w + (size_t)(s + j) * out;
            for (int o = 0; o < out; o++) dst[(size_t)o * 16 + j] = src[o];
        }
    }
    float *t = wp + (size_t)in16 * out;
    for (int j = 0; j < tail; j++)
        for (int o = 0; o < out; o++) t[(size_t)o * tail + j] = w[(size_t)(in16 + j) * out + o];
}

#if NN_AVX2 && !NN_AVX512
/* Tiles over one strip from +0: 6, 4 or 2 rows (written out, each accumulator a variable
 * of its own: packed_tile's array, once more callers shared it, was kept in memory by
 * gcc 12 and stored on every k), rt <= the tile's rows: rows past rt repeat row rt - 1
 * and are not stored. */
#define ST_ROW(r) const float *x##r = x + (size_t)(r < rt ? r : rt - 1) * ldx
#define ST_FMA(r)                                                                              \
    do {                                                                                       \
        __m256 b = _mm256_broadcast_ss(x##r + k);                                              \
        a##r##0 = _mm256_fmadd_ps(b, w0, a##r##0);                                             \
        a##r##1 = _mm256_fmadd_ps(b, w1, a##r##1);                                             \
    } while (0)
#define ST_STORE(r)                                                                            \
    if (r < rt) {                                                                              \
        _mm256_storeu_ps(y + (size_t)r * ldy, a##r##0);                                        \
        _mm256_storeu_ps(y + (size_t)r * ldy + 8, a##r##1);                                    \
    }

static __attribute__((noinline)) void strip_tile6(int rt, const float *x, size_t ldx,
                                                  const float *wp, int K, float *y, size_t ldy) {
    ST_ROW(0); ST_ROW(1); ST_ROW(2); ST_ROW(3); ST_ROW(4); ST_ROW(5);
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00;
    __m256 a30 = a00, a31 = a00, a40 = a00, a41 = a00, a50 = a00, a51 = a00;
    for (int k = 0; k < K; k++) {
        __m256 w0 = _mm256_load_ps(wp + 16 * k), w1 = _mm256_load_ps(wp + 16 * k + 8);
        ST_FMA(0); ST_FMA(1); ST_FMA(2); ST_FMA(3); ST_FMA(4); ST_FMA(5);
    }
    ST_STORE(0) ST_STORE(1) ST_STORE(2) ST_STORE(3) ST_STORE(4) ST_STORE(5)
}

static __attribute__((noinline)) void strip_tile4(int rt, const float *x, size_t ldx,
                                                  const float *wp, int K, float *y, size_t ldy) {
    ST_ROW(0); ST_ROW(1); ST_ROW(2); ST_ROW(3);
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00;
    __m256 a30 = a00, a31 = a00;
    for (int k = 0; k < K; k++) {
        __m256 w0 = _mm256_load_ps(wp + 16 * k), w1 = _mm256_load_ps(wp + 16 * k + 8);
        ST_FMA(0); ST_FMA(1); ST_FMA(2); ST_FMA(3);
    }
    ST_STORE(0) ST_STORE(1) ST_STORE(2) ST_STORE(3)
}

static __attribute__((noinline)) void strip_tile2(int rt, const float *x, size_t ldx,
                                                  const float *wp, int K, float *y, size_t ldy) {
    ST_ROW(0); ST_ROW(1);
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00;
    for (int k = 0; k < K; k++) {
        __m256 w0 = _mm256_load_ps(wp + 16 * k), w1 = _mm256_load_ps(wp + 16 * k + 8);
        ST_FMA(0); ST_FMA(1);
    }
    ST_STORE(0) ST_STORE(1)
}
#undef ST_ROW
#undef ST_FMA
#undef ST_STORE
#endif

#if NN_AVX512
/* The AVX-512 tile over NS adjacent strips (the second 16 * out floats after the first):
 * RT <= 6 rows x 16 * NS inputs, each input's chain one register lane, from +0. */
NN_INLINE void strip_tile16(int RT, int NS, const float *x, size_t ldx, const float *wp, int K,
                            float *y, size_t ldy) {
    __m512 acc[6][2];
    for (int r = 0; r < RT; r++)
        for (int v = 0; v < NS; v++) acc[r][v] = _mm512_setzero_ps();
    for (int k = 0; k < K; k++) {
        __m512 wv[2];
        for (int v = 0; v < NS; v++) wv[v] = _mm512_load_ps(wp + (size_t)16 * K * v + 16 * k);
        for (int r = 0; r < RT; r++) {
            __m512 xb = _mm512_set1_ps(x[(size_t)r * ldx + k]);
            for (int v = 0; v < NS; v++) acc[r][v] = _mm512_fmadd_ps(xb, wv[v], acc[r][v]);
        }
    }
    for (int r = 0; r < RT; r++)
        for (int v = 0; v < NS; v++) _mm512_storeu_ps(y + (size_t)r * ldy + 16 * v, acc[r][v]);
}

static __attribute__((noinline)) void strip_rows16(int RT, int NS, const float *x, size_t ldx,
                                                   const float *wp, int K, float *y,
                                                   size_t ldy) {
#define ST16(rt)                                                                               \
    case rt:                                                                                   \
        if (NS == 2) strip_tile16(rt, 2, x, ldx, wp, K, y, ldy);                              \
        else strip_tile16(rt, 1, x, ldx, wp, K, y, ldy);                                      \
        break;
    switch (RT) { /* constant shapes, so each tile's loops unroll into registers */
    ST16(6) ST16(5) ST16(4) ST16(3) ST16(2) default: ST16(1)
    }
#undef ST16
}
#endif

/* dx (R, in) = dy (R, out) W^T with W^T as wt_pack leaves it. */
static void dx_strips(const float *dy, int R, int in, int out, const float *wp, float *dx) {
#if NN_AVX2
    int in16 = in / 16 * 16, tail = in - in16;
    /* rows in blocks whose dy (mc rows of out floats) sits in L1 beside a strip */
    int mc = 4096 / out / 6 * 6;
    if (mc < 6) mc = 6;
    for (int r0 = 0; r0 < R; r0 += mc) {
        int mr = R - r0 < mc ? R - r0 : mc;
#if NN_AVX512
        /* two strips at a time (6 rows x 32 inputs: 12 chains), the last alone */
        for (int s = 0; s < in16;) {
            int ns = in16 - s >= 32 ? 2 : 1;
            const float *strip = wp + (size_t)s * out;
            for (int r = 0, left = mr; left > 0;) {
                int rt = left < 6 ? left : 6;
                size_t row = (size_t)(r0 + r);
                strip_rows16(rt, ns, dy + row * out, (size_t)out, strip, out, dx + row * in + s,
                             (size_t)in);
                r += rt, left -= rt;
            }
            s += 16 * ns;
        }
#else
        for (int s = 0; s < in16; s += 16) {
            const float *strip = wp + (size_t)s * out;
            /* tiles of 6 rows, the last 1 to 5 in a 6-, 4- or 2-row one (16: 6 + 6 + 4) */
            for (int r = 0, left = mr; left > 0;) {
                int rt = left < 6 ? left : 6;
                size_t row = (size_t)(r0 + r);
                const float *a = dy + row * out;
                float *d = dx + row * in + s;
                if (rt > 4) strip_tile6(rt, a, (size_t)out, strip, out, d, (size_t)in);
                else if (rt > 2) strip_tile4(rt, a, (size_t)out, strip, out, d, (size_t)in);
                else strip_tile2(rt, a, (size_t)out, strip, out, d, (size_t)in);
                r += rt, left -= rt;
            }
        }
#endif
    }
    if (tail)
        gemm_rows(dy, (size_t)out, wp + (size_t)in16 * out, (size_t)tail, out, tail, NULL,
                  dx + in16, (size_t)in, R);
#else
    (void)dy, (void)R, (void)in, (void)out, (void)wp, (void)dx;
    CALF_ASSERT(0); /* wt_strips is 0 without AVX2 */
#endif
}

/* For N < NN_SMALL_OUT outputs a vector over N would be mostly empty, so each output
 * is a dot product over k in 8 fixed lanes (lane = k % 8) summed by the pairwise tree
 * ((s0+s1)+(s2+s3)) + ((s4+s5)+(s6+s7)), the order _mm256_hadd_ps produces. */
static inline float lane_tree(const float *s) {
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static float dot_lanes(const float *a, const float *b, int K) {
    float s[8];
    int k = 0;
#if NN_AVX2
    __m256 acc = _mm256_setzero_ps();
    for (; k + 8 <= K; k += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc);
    _mm256_storeu_ps(s, acc);
#else
    for (int l = 0; l < 8; l++) s[l] = 0.0f;
    for (; k + 8 <= K; k += 8)
        for (int l = 0; l < 8; l++) s[l] = nn_madd(a[k + l], b[k + l], s[l]);
#endif
    for (int l = 0; k < K; k++, l++) s[l] = nn_madd(a[k], b[k], s[l]);
    return lane_tree(s);
}

/* y (R, N) flattened: output f is (row f / N, column f % N). With AVX2 and K % 8 == 0,
 * eight consecutive outputs are computed together (eight independent accumulators,
 * then a transposing hadd reduction in the same tree order); the rest one at a time. */
static void small_forward(const float *x, /* (R, K) */
                          const float *wt, /* (N, K) */
                          const float *b, int K, int N, float *y, int R) {
    int F = R * N, f = 0;
#if NN_AVX2
    if (K % 8 == 0) {
        for (; f + 8 <= F; f += 8) {
            const float *xp[8], *wp[8];
            __m256 a[8];
            for (int i = 0; i < 8; i++) {
                int r = (f + i) / N, o = (f + i) % N;
                xp[i] = x + (size_t)r * K;
                wp[i] = wt + (size_t)o * K;
                a[i] = _mm256_setzero_ps();
            }
            for (int k = 0; k < K; k += 8)
                for (int i = 0; i < 8; i++)
                    a[i] = _mm256_fmadd_ps(_mm256_loadu_ps(xp[i] + k), _mm256_loadu_ps(wp[i] + k), a[i]);
            __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
            __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
            __m256 h0123 = _mm256_hadd_ps(h01, h23), h4567 = _mm256_hadd_ps(h45, h67);
            __m256 sum = _mm256_add_ps(_mm256_permute2f128_ps(h0123, h4567, 0x20),
                                       _mm256_permute2f128_ps(h0123, h4567, 0x31));
            float d[8];
            _mm256_storeu_ps(d, sum);
            for (int i = 0; i < 8; i++) y[f + i] = b ? b[(f + i) % N] + d[i] : d[i];
        }
    }
#endif
    for (; f < F; f++) {
        int r = f / N, o = f % N;
        float d = dot_lanes(x + (size_t)r * K, wt + (size_t)o * K, K);
        y[f] = b ? b[o] + d : d;
    }
}

/* How a gradient kernel meets what dw holds. ACC: dw[k][n] = madd(x[r][k], dy[r][n],
 * dw[k][n]) for r ascending (accumulate). SET: the same chain from +0 (the bits of
 * zeroing dw first, without touching it twice). ADD: dw = dw + (the SET chain), i.e. the
 * tree's left + right with this call's rows as the right operand. A tile of KT k x 8*NV
 * n holds its chains in registers across all R rows. */
enum { DW_ACC, DW_SET, DW_ADD };

static inline float dw_out(int mode, float old, float acc) {
    return mode == DW_ADD ? old + acc : acc;
}

static void scalar_dw(const float *x, int K, const float *dy, int N, int R, int k_begin,
                      int k_end, int n_begin, int n_end, float *dw, int mode) {
    for (int k = k_begin; k < k_end; k++) {
        for (int n = n_begin; n < n_end; n++) {
            float *d = dw + (size_t)k * N + n;
            float acc = mode == DW_ACC ? *d : 0.0f;
            for (int r = 0; r < R; r++) acc = nn_madd(x[(size_t)r * K + k], dy[(size_t)r * N + n], acc);
            *d = dw_out(mode, *d, acc);
        }
    }
}

#if NN_AVX2
static inline __m256 dw_start(int mode, const float *p) {
    return mode == DW_ACC ? _mm256_loadu_ps(p) : _mm256_setzero_ps();
}

static inline void dw_store(int mode, float *p, __m256 acc) {
    _mm256_storeu_ps(p, mode == DW_ADD ? _mm256_add_ps(_mm256_loadu_ps(p), acc) : acc);
}

NN_INLINE void dw_tile(int KT, int NV, const float *x, int K, const float *dy, int N, int R,
                       float *dw, int mode) {
    __m256 acc[8][2];
    for (int kk = 0; kk < KT; kk++)
        for (int v = 0; v < NV; v++) acc[kk][v] = dw_start(mode, dw + (size_t)kk * N + 8 * v);
    for (int r = 0; r < R; r++) {
        __m256 dv[2];
        for (int v = 0; v < NV; v++) dv[v] = _mm256_loadu_ps(dy + (size_t)r * N + 8 * v);
        for (int kk = 0; kk < KT; kk++) {
            __m256 xb = _mm256_broadcast_ss(x + (size_t)r * K + kk);
            for (int v = 0; v < NV; v++) acc[kk][v] = _mm256_fmadd_ps(xb, dv[v], acc[kk][v]);
        }
    }
    for (int kk = 0; kk < KT; kk++)
        for (int v = 0; v < NV; v++) dw_store(mode, dw + (size_t)kk * N + 8 * v, acc[kk][v]);
}

/* Four columns (see rows_tile4): the same chain per element as dw_tile and scalar_dw. */
NN_INLINE void dw_tile4(int KT, const float *x, int K, const float *dy, int N, int R, float *dw,
                        int mode) {
    __m128 acc[8];
    for (int kk = 0; kk < KT; kk++)
        acc[kk] = mode == DW_ACC ? _mm_loadu_ps(dw + (size_t)kk * N) : _mm_setzero_ps();
    for (int r = 0; r < R; r++) {
        __m128 dv = _mm_loadu_ps(dy + (size_t)r * N);
        for (int kk = 0; kk < KT; kk++)
            acc[kk] = _mm_fmadd_ps(_mm_broadcast_ss(x + (size_t)r * K + kk), dv, acc[kk]);
    }
    for (int kk = 0; kk < KT; kk++) {
        float *p = dw + (size_t)kk * N;
        _mm_storeu_ps(p, mode == DW_ADD ? _mm_add_ps(_mm_loadu_ps(p), acc[kk]) : acc[kk]);
    }
}

#if NN_AVX512
/* dw_tile 16 floats wide: KT k x 16*NV n (at most 8 x 2: 16 accumulators). */
NN_INLINE void dw_tile16(int KT, int NV, const float *x, int K, const float *dy, int N, int R,
                         float *dw, int mode) {
    __m512 acc[8][2];
    for (int kk = 0; kk < KT; kk++)
        for (int v = 0; v < NV; v++) {
            const float *p = dw + (size_t)kk * N + 16 * v;
            acc[kk][v] = mode == DW_ACC ? _mm512_loadu_ps(p) : _mm512_setzero_ps();
        }
    for (int r = 0; r < R; r++) {
        __m512 dv[2];
        for (int v = 0; v < NV; v++) dv[v] = _mm512_loadu_ps(dy + (size_t)r * N + 16 * v);
        for (int kk = 0; kk < KT; kk++) {
            __m512 xb = _mm512_set1_ps(x[(size_t)r * K + kk]);
            for (int v = 0; v < NV; v++) acc[kk][v] = _mm512_fmadd_ps(xb, dv[v], acc[kk][v]);
        }
    }
    for (int kk = 0; kk < KT; kk++)
        for (int v = 0; v < NV; v++) {
            float *p = dw + (size_t)kk * N + 16 * v;
            _mm512_storeu_ps(p, mode == DW_ADD ? _mm512_add_ps(_mm512_loadu_ps(p), acc[kk][v])
                                               : acc[kk][v]);
        }
}
#endif

NN_INLINE void dw_block(int KT, int NV, const float *x, int K, int k0, const float *dy, int N,
                        int R, float *dw, int mode) {
    int n = 0;
#if NN_AVX512
    /* 32 columns a tile, then 16; what is left by the AVX2 tiles below */
    for (; n + 32 <= N; n += 32) dw_tile16(KT, 2, x + k0, K, dy + n, N, R, dw + (size_t)k0 * N + n, mode);
    for (; n + 16 <= N; n += 16) dw_tile16(KT, 1, x + k0, K, dy + n, N, R, dw + (size_t)k0 * N + n, mode);
#endif
    if (NV == 2)
        for (; n + 16 <= N; n += 16)
            dw_tile(KT, 2, x + k0, K, dy + n, N, R, dw + (size_t)k0 * N + n, mode);
    for (; n + 8 <= N; n += 8) dw_tile(KT, 1, x + k0, K, dy + n, N, R, dw + (size_t)k0 * N + n, mode);
    if (n + 4 <= N) {
        dw_tile4(KT, x + k0, K, dy + n, N, R, dw + (size_t)k0 * N + n, mode);
        n += 4;
    }
    if (n < N) scalar_dw(x, K, dy, N, R, k0, k0 + KT, n, N, dw, mode);
}
#endif

/* N < NN_SMALL_OUT: accumulate into a transposed copy (contiguous over k, so the
 * update vectorises along k), in chunks of 64 k; the per-element order is unchanged.
 * With AVX2 the two common heads get direct kernels: N == 1 (a value head: dw is
 * contiguous over k) and N == 2 (a two-action head: 4 k x 2 n per vector, x lanes
 * duplicated by a permute, dy lanes repeated). */
static void small_dw(const float *x, int K, const float *dy, int N, int R, float *dw,
                     int mode) {
    int k_done = 0;
#if NN_AVX2
    if (N == 1) {
        for (; k_done + 8 <= K; k_done += 8) {
            __m256 acc = dw_start(mode, dw + k_done);
            for (int r = 0; r < R; r++)
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + (size_t)r * K + k_done),
                                      _mm256_set1_ps(dy[r]), acc);
            dw_store(mode, dw + k_done, acc);
        }
    } else if (N == 2) {
        const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
        for (; k_done + 4 <= K; k_done += 4) {
            __m256 acc = dw_start(mode, dw + (size_t)k_done * 2);
            for (int r = 0; r < R; r++) {
                __m256 xv = _mm256_permutevar8x32_ps(
                    _mm256_castps128_ps256(_mm_loadu_ps(x + (size_t)r * K + k_done)), dup);
                /* (d0, d1) repeated: one 64-bit broadcast (building it from two
                 * floats made gcc go through the stack and stall store forwarding) */
                double d01;
                memcpy(&d01, dy + (size_t)r * 2, sizeof d01);
                __m256 dv = _mm256_castpd_ps(_mm256_set1_pd(d01));
                acc = _mm256_fmadd_ps(xv, dv, acc);
            }
            dw_store(mode, dw + (size_t)k_done * 2, acc);
        }
    }
#endif
    float t[NN_SMALL_OUT][64];
    for (int k0 = k_done; k0 < K; k0 += 64) {
        int kc = K - k0 < 64 ? K - k0 : 64;
        for (int n = 0; n < N; n++)
            for (int k = 0; k < kc; k++) t[n][k] = mode == DW_ACC ? dw[(size_t)(k0 + k) * N + n] : 0.0f;
        for (int r = 0; r < R; r++) {
            const float *xr = x + (size_t)r * K + k0;
            for (int n = 0; n < N; n++) {
                float d = dy[(size_t)r * N + n];
                float *tn = t[n];
                for (int k = 0; k < kc; k++) tn[k] = nn_madd(xr[k], d, tn[k]);
            }
        }
        for (int n = 0; n < N; n++)
            for (int k = 0; k < kc; k++) {
                float *d = dw + (size_t)(k0 + k) * N + n;
                *d = dw_out(mode, *d, t[n][k]);
            }
    }
}

int nn_linear_forward(const float *x, const float *w, const float *b, int B, int in, int out,
                      float *y, calf_error *err) {
    CALF_ASSERT(B >= 0 && in > 0 && out > 0);
    if (out < NN_SMALL_OUT) {
        float *wt = mem_alloc((size_t)in * (size_t)out * sizeof *wt, err);
        if (!wt) return CALF_ENOMEM;
        nn_transpose(w, in, out, wt);
        small_forward(x, wt, b, in, out, y, B);
        free(wt);
    } else {
        gemm_rows(x, (size_t)in, w, (size_t)out, in, out, b, y, (size_t)out, B);
    }
    return CALF_OK;
}

#if NN_AVX2
static void dw_all_k(const float *x, const float *dy, int B, int in, int out, float *dw,
                     int mode) {
    int k = 0;
    if (B >= 32)
        for (; k + 6 <= in; k += 6) dw_block(6, 2, x, in, k, dy, out, B, dw, mode);
    for (; k + 8 <= in; k += 8) dw_block(8, 1, x, in, k, dy, out, B, dw, mode);
    for (; k + 4 <= in; k += 4) dw_block(4, 2, x, in, k, dy, out, B, dw, mode);
    for (; k < in; k++) dw_block(1, 2, x, in, k, dy, out, B, dw, mode);
}

/* Each tile holds its chains over all rows, so one call streams every row of dy once per
 * six inputs: at 1024 rows x 1024 -> 128, 512 KiB of dy from L3 for each tile. Large
 * weights therefore take the rows in chunks of DW_ROWS (x and dy of a chunk in L2), the
 * first chunk by the call's mode, the rest continuing each chain from what dw holds
 * (ACC): the single pass's chain, stored and reloaded between chunks. A call of up to
 * DW_ROWS rows (PPO's per-env partials: 16 rows at MinAtar's minibatch) is one chunk in
 * any mode; a longer ADD (dw + the SET chain) cannot continue through dw, so it keeps
 * the single pass. */
/* 6 x 16 tiles from 16 rows here: PPO's per-env partial of MinAtar's fc (16 rows of
 * 1024 -> 128) ran its 8 x 8 tiles with nine loads to eight multiply-adds. */
enum { DW_ROWS = 128, DW_TILE6_ROWS = 16, DW_MIN_WEIGHTS = 16384 };

/* One chunk of R <= DW_ROWS rows: each 6-input tile's x (rows 4 KiB apart at 1024
 * inputs, so they fall in one L1 set) copied first to 8 floats a row, contiguous, the
 * tiles of several 6-input groups at once (DW_XT_FLOATS in all), so each row's x is read
 * along its lines once, not six floats of a line at a time from L2; and while a group's
 * tiles run, the next group's rows of dw are prefetched (at 16 rows a tile has only 16
 * multiply-adds per accumulator to hide the store's miss behind). The copies (8 KiB) are
 * the thread's scratch_get block; without it dw_all_k runs the chunk, the same chains. */
enum { DW_XT_FLOATS = 2048 };

static void dw_chunk(const float *x, const float *dy, int R, int in, int out, float *dw,
                     int mode) {
    float *xt = scratch_get((DW_ROWS * 8 > DW_XT_FLOATS ? DW_ROWS * 8 : DW_XT_FLOATS) *
                            sizeof(float));
    if (!xt) {
        dw_all_k(x, dy, R, in, out, dw, mode);
        return;
    }
    int k = 0;
    if (R >= DW_TILE6_ROWS) {
        int per = DW_XT_FLOATS / (8 * R); /* 6-input groups per copy */
        if (per < 1) per = 1;
        while (k + 6 <= in) {
            int groups = (in - k) / 6 < per ? (in - k) / 6 : per;
            for (int r = 0; r < R; r++)
                for (int g = 0; g < groups; g++)
                    memcpy(xt + ((size_t)g * R + r) * 8, x + (size_t)r * in + k + 6 * g,
                           6 * sizeof(float));
            for (int g = 0; g < groups; g++, k += 6) {
                if (k + 12 <= in)
                    for (int kk = k + 6; kk < k + 12; kk++)
                        for (int n = 0; n < out; n += 16) __builtin_prefetch(dw + (size_t)kk * out + n, 1);
                dw_block(6, 2, xt + (size_t)g * R * 8, 8, 0, dy, out, R, dw + (size_t)k * out, mode);
            }
        }
    }
    for (; k + 8 <= in; k += 8) {
        for (int r = 0; r < R; r++) memcpy(xt + 8 * r, x + (size_t)r * in + k, 8 * sizeof(float));
        dw_block(8, 1, xt, 8, 0, dy, out, R, dw + (size_t)k * out, mode);
    }
    for (; k + 4 <= in; k += 4) dw_block(4, 2, x, in, k, dy, out, R, dw, mode);
    for (; k < in; k++) dw_block(1, 2, x, in, k, dy, out, R, dw, mode);
}

static void dw_rows(const float *x, const float *dy, int B, int in, int out, float *dw,
                    int mode) {
    if ((size_t)in * (size_t)out < DW_MIN_WEIGHTS) {
        dw_all_k(x, dy, B, in, out, dw, mode);
        return;
    }
    if (B <= DW_ROWS) { /* one chunk: any mode */
        dw_chunk(x, dy, B, in, out, dw, mode);
        return;
    }
    if (mode == DW_ADD) {
        dw_all_k(x, dy, B, in, out, dw, mode);
        return;
    }
    for (int r0 = 0; r0 < B; r0 += DW_ROWS) {
        int n = B - r0 < DW_ROWS ? B - r0 : DW_ROWS;
        dw_chunk(x + (size_t)r0 * in, dy + (size_t)r0 * out, n, in, out, dw,
                 r0 == 0 ? mode : DW_ACC);
    }
}
#endif

static void backward_params(const float *x, const float *dy, int B, int in, int out,
                            float *dw, float *db, int mode) {
    CALF_ASSERT(B >= 0 && in > 0 && out > 0);
    if (out < NN_SMALL_OUT) {
        small_dw(x, in, dy, out, B, dw, mode);
    } else {
#if NN_AVX2
        /* tiles of 8 k x 8 n, then 4 k x 16 n (a 4-input first layer), then 1 k; from 32
         * rows (an off-policy batch in one call) 6 k x 16 n first: two dy loads and six
         * broadcasts feed twelve multiply-adds, where 8 x 8 needs nine loads for eight
         * (256x256 at 256 rows: 72 -> 106 GFLOP/s; a per-env block of 8 rows is faster
         * with 8 x 8, whose accumulators are fewer to load and store; weights of 16,384
         * floats or more take 6 x 16 from 16 rows, dw_chunk) */
        dw_rows(x, dy, B, in, out, dw, mode);
#else
        scalar_dw(x, in, dy, out, B, 0, in, 0, out, dw, mode);
#endif
    }
    if (!db) return;
    /* column sums in chunks, each chain in a small array, then met with db as above */
    for (int n0 = 0; n0 < out; n0 += 256) {
        int nc = out - n0 < 256 ? out - n0 : 256;
        float s[256];
        for (int n = 0; n < nc; n++) s[n] = mode == DW_ACC ? db[n0 + n] : 0.0f;
        for (int r = 0; r < B; r++) {
            const float *d = dy + (size_t)r * out + n0;
            for (int n = 0; n < nc; n++) s[n] = s[n] + d[n];
        }
        for (int n = 0; n < nc; n++) db[n0 + n] = dw_out(mode, db[n0 + n], s[n]);
    }
}

void nn_linear_backward_params(const float *x, const float *dy, int B, int in, int out,
                               float *dw, float *db) {
    backward_params(x, dy, B, in, out, dw, db, DW_ACC);
}

void nn_linear_backward_params_set(const float *x, const float *dy, int B, int in, int out,
                                   float *dw, float *db) {
    backward_params(x, dy, B, in, out, dw, db, DW_SET);
}

void nn_linear_backward_params_add(const float *x, const float *dy, int B, int in, int out,
                                   float *dw, float *db) {
    backward_params(x, dy, B, in, out, dw, db, DW_ADD);
}

void nn_linear_backward_input(const float *dy, const float *wt, int B, int in, int out,
                              float *dx) {
    CALF_ASSERT(B >= 0 && in > 0 && out > 0);
    gemm_rows(dy, (size_t)out, wt, (size_t)in, out, in, NULL, dx, (size_t)in, B);
}

void nn_wt_pack(const float *w, int in, int out, float *wt) {
    if (wt_strips(in, out)) wt_pack(w, in, out, wt);
    else nn_transpose(w, in, out, wt);
}

void nn_linear_backward_input_wt(const float *dy, const float *wt, int B, int in, int out,
                                 float *dx) {
    CALF_ASSERT(B >= 0 && in > 0 && out > 0);
    if (wt_strips(in, out)) dx_strips(dy, B, in, out, wt, dx);
    else gemm_rows(dy, (size_t)out, wt, (size_t)in, out, in, NULL, dx, (size_t)in, B);
}

/* ---------------------------------------------------------------- activations */

/* Clamped odd rational minimax approximation (the coefficients of Eigen's float tanh):
 * |error| < 2.6e-7 on the whole line (its multiply-adds fused); beyond +-7.9053 the clamp
 * saturates it at +-(1 - 2.4e-7), within 2.4e-7 of tanh there. Every element runs the same
 * instructions. The clamp and the NaN pass-through are done on the bits as integers:
 * gcc will not if-convert a float select that feeds more float arithmetic (it might
 * trap), so a float clamp would keep the loop scalar. */
static inline float tanh_approx(float v) {
    const float c = NN_TANH_CLAMP;
    uint32_t cb, ab;
    float a = fabsf(v);
    memcpy(&cb, &c, sizeof cb);
    memcpy(&ab, &a, sizeof ab);
    uint32_t xb = ab > cb ? cb : ab; /* min(|v|, c); a NaN's bits exceed c's */
    float x;
    memcpy(&x, &xb, sizeof x);
    float x2 = x * x;
    float p = NN_TANH_P0;
    p = nn_madd(p, x2, NN_TANH_P1);
    p = nn_madd(p, x2, NN_TANH_P2);
    p = nn_madd(p, x2, NN_TANH_P3);
    p = nn_madd(p, x2, NN_TANH_P4);
    p = nn_madd(p, x2, NN_TANH_P5);
    p = nn_madd(p, x2, NN_TANH_P6);
    float q = NN_TANH_Q0;
    q = nn_madd(q, x2, NN_TANH_Q1);
    q = nn_madd(q, x2, NN_TANH_Q2);
    q = nn_madd(q, x2, NN_TANH_Q3);
    float r = copysignf((x * p) / q, v);
    uint32_t rb;
    memcpy(&rb, &r, sizeof rb);
    rb |= (0u - (uint32_t)(ab > 0x7f800000u)) & 0x7fc00000u; /* NaN in, NaN out */
    memcpy(&r, &rb, sizeof r);
    return r;
}

float nn_tanh1(float x) { return tanh_approx(x); }

static void tanh_inplace(float *restrict x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = tanh_approx(x[i]);
}

static void tanh_copy(const float *restrict x, float *restrict y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = tanh_approx(x[i]);
}

void nn_tanh(const float *x, float *y, size_t n) {
    if (x == y) tanh_inplace(y, n);
    else tanh_copy(x, y, n);
}

static void relu_inplace(float *restrict x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void nn_relu(const float *x, float *y, size_t n) {
    if (x != y) memmove(y, x, n * sizeof *y);
    relu_inplace(y, n);
}

void nn_activate(nn_activation act, float *x, size_t n) {
    if (act == NN_ACT_TANH) tanh_inplace(x, n);
    else relu_inplace(x, n);
}

/* Separate in-place and copying loops: with restrict pointers the compiler vectorises
 * both without a runtime overlap check that an in-place call would fail. */
static void act_backward_inplace(nn_activation act, const float *restrict h,
                                 float *restrict d, size_t n) {
    if (act == NN_ACT_TANH) {
        for (size_t i = 0; i < n; i++) d[i] = d[i] * (1.0f - h[i] * h[i]);
    } else {
        for (size_t i = 0; i < n; i++) d[i] = h[i] > 0.0f ? d[i] : 0.0f;
    }
}

void nn_activation_backward(nn_activation act, const float *h, const float *dh, float *dz,
                            size_t n) {
    if (dz != dh) memmove(dz, dh, n * sizeof *dz);
    act_backward_inplace(act, h, dz, n);
}

/* ---------------------------------------------------------------- MLP */

int nn_cache_init(nn_cache *c, const nn_mlp *m, int max_rows, calf_error *err) {
    CALF_ASSERT(max_rows > 0 && m->num_layers > 0 && m->num_layers <= NN_MAX_LAYERS);
    memset(c, 0, sizeof *c);
    c->max_rows = max_rows;
    c->num_layers = m->num_layers;
    int maxw = 0;
    for (int l = 0; l <= m->num_layers; l++) {
        c->sizes[l] = m->sizes[l];
        if (m->sizes[l] > maxw) maxw = m->sizes[l];
        if (!(c->act[l] = nn_alloc_floats((size_t)max_rows * (size_t)m->sizes[l], err)))
            return CALF_ENOMEM;
    }
    for (int l = 0; l < m->num_layers; l++)
        if (!(c->wt[l] = nn_alloc_floats((size_t)m->sizes[l] * (size_t)m->sizes[l + 1], err)))
            return CALF_ENOMEM;
    for (int i = 0; i < 2; i++)
        if (!(c->scratch[i] = nn_alloc_floats((size_t)max_rows * (size_t)maxw, err)))
            return CALF_ENOMEM;
    return CALF_OK;
}

void nn_cache_free(nn_cache *c) {
    if (!c) return;
    for (int l = 0; l <= NN_MAX_LAYERS; l++) free(c->act[l]);
    for (int l = 0; l < NN_MAX_LAYERS; l++) free(c->wt[l]);
    free(c->scratch[0]);
    free(c->scratch[1]);
    memset(c, 0, sizeof *c);
}

static void check_cache(const nn_mlp *m, const nn_cache *c) {
    CALF_ASSERT(c->num_layers == m->num_layers);
    for (int l = 0; l <= m->num_layers; l++) CALF_ASSERT(c->sizes[l] == m->sizes[l]);
}

void nn_mlp_forward_v(const nn_mlp *m, const float *params, uint64_t version, const float *x,
                      int B, nn_cache *c, float *y) {
    check_cache(m, c);
    CALF_ASSERT(B >= 0 && B <= c->max_rows);
    int L = m->num_layers;
    memcpy(c->act[0], x, (size_t)B * (size_t)m->sizes[0] * sizeof(float));
    c->rows = B;
    if (version == 0 || version != c->version || params != c->params) c->wt_valid = 0;
    c->params = params;
    c->version = version;
    for (int l = 0; l < L; l++) {
        int in = m->sizes[l], out = m->sizes[l + 1];
        const float *w = params + m->w_off[l], *b = params + m->b_off[l];
        if (out < NN_SMALL_OUT) {
            /* The transposed copy doubles as the one backward's dX uses. */
            if (!(c->wt_valid & (1u << l))) nn_transpose(w, in, out, c->wt[l]);
            c->wt_valid |= 1u << l;
            small_forward(c->act[l], c->wt[l], b, in, out, c->act[l + 1], B);
        } else {
            gemm_rows(c->act[l], (size_t)in, w, (size_t)out, in, out, b, c->act[l + 1],
                      (size_t)out, B);
        }
        if (l + 1 < L) nn_activate(m->act, c->act[l + 1], (size_t)B * (size_t)out);
    }
    if (y) memcpy(y, c->act[L], (size_t)B * (size_t)m->sizes[L] * sizeof(float));
}

void nn_mlp_forward(const nn_mlp *m, const float *params, const float *x, int B, nn_cache *c,
                    float *y) {
    nn_mlp_forward_v(m, params, 0, x, B, c, y);
}

static void mlp_backward(const nn_mlp *m, const float *params, nn_cache *c, int row_begin,
                         int row_count, const float *dy, float *grad, float *dx, int mode) {
    check_cache(m, c);
    CALF_ASSERT(params == c->params);
    CALF_ASSERT(row_begin >= 0 && row_count >= 0 && row_begin + row_count <= c->rows);
    const float *dz = dy;
    int buf = 0;
    for (int l = m->num_layers - 1; l >= 0; l--) {
        int in = m->sizes[l], out = m->sizes[l + 1];
        const float *xl = c->act[l] + (size_t)row_begin * in;
        if (grad) backward_params(xl, dz, row_count, in, out, grad + m->w_off[l], grad + m->b_off[l], mode);
        if (l == 0 && !dx) break;
        if (!(c->wt_valid & (1u << l))) {
            nn_wt_pack(params + m->w_off[l], in, out, c->wt[l]);
            c->wt_valid |= 1u << l;
        }
        float *dh = l > 0 ? c->scratch[buf] : dx;
        nn_linear_backward_input_wt(dz, c->wt[l], row_count, in, out, dh);
        if (l > 0) {
            nn_activation_backward(m->act, xl, dh, dh, (size_t)row_count * in);
            dz = dh;
            buf ^= 1;
        }
    }
}

void nn_mlp_backward(const nn_mlp *m, const float *params, nn_cache *c, int row_begin,
                     int row_count, const float *dy, float *grad, float *dx) {
    mlp_backward(m, params, c, row_begin, row_count, dy, grad, dx, DW_ACC);
}

void nn_mlp_backward_set(const nn_mlp *m, const float *params, nn_cache *c, int row_begin,
                         int row_count, const float *dy, float *grad, float *dx) {
    mlp_backward(m, params, c, row_begin, row_count, dy, grad, dx, DW_SET);
}

void nn_mlp_backward_add(const nn_mlp *m, const float *params, nn_cache *c, int row_begin,
                         int row_count, const float *dy, float *grad, float *dx) {
    mlp_backward(m, params, c, row_begin, row_count, dy, grad, dx, DW_ADD);
}
