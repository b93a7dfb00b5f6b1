/* bench_rnn.c: the LSTM of src/numerics/rnn.h, forward and forward + backward through
 * time, on the shapes the examples run (issue 36's section 1 "Speed"): CleanRL's
 * ppo_atari_lstm (512 features into 128 units; 8 envs x 128 steps in 4 minibatches, so
 * an update's call is T x B = 128 x 2 and acting one step of 8 rows) and
 * examples/ppo_lstm_cartpole_novel.gin (4 observations into 64 units; 8 envs x 32 steps,
 * the whole rollout one minibatch: 32 x 8; acting one step of 8 rows), against this
 * core's measured FMA peaks (8 and 16 floats wide; CALF_KERNELS picks the variant run)
 * and, with --torch PATH (bench/torch_rnn.py), PyTorch's nn.LSTM
 * on one thread: with the BLAS Debian's torch finds by default and, with --openblas DIR,
 * again with DIR's libblas.so.3 (OpenBLAS) first on LD_LIBRARY_PATH.
 *
 * Usage: bench_rnn [REPEATS] [--torch bench/torch_rnn.py [--openblas DIR]]
 * (REPEATS default 7: 35 timed runs a shape, each side; the best and the median of them) */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "bench_util.h"
#include "calf/rng.h"
#include "numerics/kernels.h"
#include "numerics/nn.h"
#include "numerics/rnn.h"

static volatile float sink;

/* Seconds of CPU time this thread has run: up to seven helpers share this machine's two
 * cores, and wall time would measure the queue; the FMA peak is measured the same way. */
static double cpu_now(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    rnn_kind kind;
    int in, H, T, B;
} shape;

static const shape SHAPES[] = {
    {RNN_LSTM, 512, 128, 128, 2}, {RNN_LSTM, 512, 128, 1, 8}, /* ppo_atari_lstm */
    {RNN_LSTM, 4, 64, 32, 8},     {RNN_LSTM, 4, 64, 1, 8},    /* ppo_lstm_cartpole_novel */
};
enum { NSHAPES = sizeof SHAPES / sizeof SHAPES[0] };

/* FLOPs (two per multiply-add) of one forward: x W_ih and h W_hh. Forward + backward
 * adds dX, dW_ih, dh (through W_hh) and dW_hh: three times the forward's. The gate
 * arithmetic (a few dozen operations per unit and step) is not counted. */
static double shape_flop(const shape *s) {
    double G = (s->kind == RNN_LSTM ? 4.0 : 3.0) * s->H;
    return 2.0 * s->T * s->B * (s->in + s->H) * G;
}

/* ---- calf ---- */

typedef struct {
    shape s;
    rnn_cell cell;
    float *params, *grad, *x, *y, *dy, *dx, *h0, *c0, *dh0, *dc0;
    uint8_t *start;
    rnn_cache cache;
} run;

static void fill(calf_rng *rng, float *a, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) a[i] = scale * (2.0f * calf_rng_uniform_float(rng) - 1.0f);
}

static int run_make(run *r, const shape *s, calf_rng *rng) {
    memset(r, 0, sizeof *r);
    r->s = *s;
    size_t cur = 0;
    rnn_layout(&r->cell, s->kind, s->in, s->H, &cur);
    size_t TB = (size_t)s->T * s->B, BH = (size_t)s->B * s->H;
    r->params = nn_alloc_floats(cur, NULL), r->grad = nn_alloc_floats(cur, NULL);
    r->x = nn_alloc_floats(TB * s->in, NULL), r->dx = nn_alloc_floats(TB * s->in, NULL);
    r->y = nn_alloc_floats(TB * s->H, NULL), r->dy = nn_alloc_floats(TB * s->H, NULL);
    r->h0 = nn_alloc_floats(BH, NULL), r->c0 = nn_alloc_floats(BH, NULL);
    r->dh0 = nn_alloc_floats(BH, NULL), r->dc0 = nn_alloc_floats(BH, NULL);
    r->start = calloc(TB, 1);
    if (!r->params || !r->grad || !r->x || !r->dx || !r->y || !r->dy || !r->h0 || !r->c0 ||
        !r->dh0 || !r->dc0 || !r->start)
        return -1;
    if (rnn_init(&r->cell, r->params, rng, NULL) != CALF_OK) return -1;
    fill(rng, r->x, TB * s->in, 1.0f);
    fill(rng, r->dy, TB * s->H, 1e-3f);
    fill(rng, r->h0, BH, 0.5f);
    fill(rng, r->c0, BH, 0.5f);
    for (size_t e = 0; e < TB; e++) r->start[e] = calf_rng_uniform_float(rng) < 0.01f;
    return rnn_cache_init(&r->cache, &r->cell, s->T, s->B, NULL);
}

static void run_free(run *r) {
    free(r->params), free(r->grad), free(r->x), free(r->dx), free(r->y), free(r->dy);
    free(r->h0), free(r->c0), free(r->dh0), free(r->dc0), free(r->start);
    rnn_cache_free(&r->cache);
}

static void calf_fwd(run *r) {
    bool lstm = r->s.kind == RNN_LSTM;
    rnn_forward(&r->cell, r->params, &r->cache, r->x, r->start, r->h0, lstm ? r->c0 : NULL,
                r->s.T, r->s.B, r->y, NULL, NULL);
    sink = r->y[0];
}

static void calf_fwd_bwd(run *r) {
    bool lstm = r->s.kind == RNN_LSTM;
    rnn_forward(&r->cell, r->params, &r->cache, r->x, r->start, r->h0, lstm ? r->c0 : NULL,
                r->s.T, r->s.B, r->y, NULL, NULL);
    rnn_backward(&r->cell, r->params, &r->cache, r->dy, NULL, NULL, r->grad, RNN_GRAD_SET,
                 r->dx, r->dh0, lstm ? r->dc0 : NULL);
    sink = r->grad[r->cell.w_hh_off] + r->dx[0];
}

/* CPU seconds of the fastest of 5 x `repeats` runs, each long enough (>= 30 ms) to
 * average the clock out but short enough that some run finds the core's caches to
 * itself on a shared machine; *median the median of them. */
static double best_time(void (*fn)(run *), run *r, int repeats, double *median) {
    enum { MAX_RUNS = 320 };
    double t[MAX_RUNS];
    int runs = 5 * repeats < MAX_RUNS ? 5 * repeats : MAX_RUNS;
    fn(r); /* warm */
    double t0 = cpu_now();
    fn(r);
    double once = cpu_now() - t0;
    int reps = once > 0.03 ? 1 : (int)(0.03 / (once > 1e-6 ? once : 1e-6)) + 1;
    for (int k = 0; k < runs; k++) {
        t0 = cpu_now();
        for (int i = 0; i < reps; i++) fn(r);
        t[k] = (cpu_now() - t0) / reps;
    }
    *median = bench_quantile(t, runs, 0.5);
    return t[0]; /* bench_quantile sorted t */
}

/* ---- PyTorch: torch_rnn.py times the same shapes, one line each: "RNN k fwd_s fb_s" ---- */

/* blas_dir: a directory put first on LD_LIBRARY_PATH (OpenBLAS's libblas.so.3, one
 * thread), or NULL for the BLAS Debian's torch finds by default. */
static int run_torch(const char *path, const char *blas_dir, int repeats, double (*sec)[2]) {
    char cmd[2048], line[512];
    int n = blas_dir ? snprintf(cmd, sizeof cmd,
                                "env LD_LIBRARY_PATH='%s' OPENBLAS_NUM_THREADS=1 /usr/bin/python3 "
                                "'%s' --repeats %d", blas_dir, path, repeats)
                     : snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' --repeats %d", path, repeats);
    for (int k = 0; k < NSHAPES && n > 0 && (size_t)n < sizeof cmd; k++) {
        const shape *s = &SHAPES[k];
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " %s:%d:%d:%d:%d",
                      s->kind == RNN_LSTM ? "lstm" : "gru", s->in, s->H, s->T, s->B);
    }
    if (n <= 0 || (size_t)n >= sizeof cmd) return -1;
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    while (fgets(line, sizeof line, p)) {
        int k;
        double f, fb;
        if (sscanf(line, "RNN %d %lf %lf", &k, &f, &fb) == 3 && k >= 0 && k < NSHAPES)
            sec[k][0] = f, sec[k][1] = fb;
        else fputs(line, stdout);
    }
    return pclose(p) == 0 ? 0 : -1;
}

/* Bytes a second this core reads from L2: a 256 KiB buffer (ppo_atari_lstm's W_hh,
 * 128 x 512 floats, which each step of the update streams for its 2 rows) summed over
 * and over with 32-byte loads, the best of 2,000 passes in CPU time; 0 without AVX2. */
#if defined(__x86_64__)
__attribute__((target("avx2"))) static double l2_read_avx2(void) {
    enum { N = 256 * 1024 / 4 };
    float *a = aligned_alloc(64, N * sizeof(float));
    if (!a) return 0;
    for (int i = 0; i < N; i++) a[i] = (float)i;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    double best = 1e9;
    for (int rep = 0; rep < 2000; rep++) {
        double t0 = cpu_now();
        for (int i = 0; i < N; i += 32) {
            s0 = _mm256_add_ps(s0, _mm256_load_ps(a + i));
            s1 = _mm256_add_ps(s1, _mm256_load_ps(a + i + 8));
            s2 = _mm256_add_ps(s2, _mm256_load_ps(a + i + 16));
            s3 = _mm256_add_ps(s3, _mm256_load_ps(a + i + 24));
        }
        double t = cpu_now() - t0;
        if (t > 0 && t < best) best = t;
    }
    float o[8];
    _mm256_storeu_ps(o, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    sink = o[0];
    free(a);
    return N * sizeof(float) / best;
}
#endif

static double l2_read_rate(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) return l2_read_avx2();
#endif
    return 0;
}

int main(int argc, char **argv) {
    int repeats = 7;
    const char *torch = NULL, *blas_dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--torch") == 0 && i + 1 < argc) {
            torch = argv[++i];
        } else if (strcmp(argv[i], "--openblas") == 0 && i + 1 < argc) {
            blas_dir = argv[++i];
        } else {
            char *end;
            long v = strtol(argv[i], &end, 10);
            if (*end || v < 1 || v > 64) {
                fprintf(stderr, "usage: bench_rnn [REPEATS 1..64] [--torch PATH [--openblas DIR]]\n");
                return 2;
            }
            repeats = (int)v;
        }
    }
    double peak = bench_fma_peak(10 * repeats), peak16 = bench_fma_peak16(10 * repeats);
    printf("FMA peak of this core (12 independent chains, registers only): %.1f GFLOP/s 8 "
           "wide, %.1f 16 wide\ncalf kernels: %s\n",
           peak / 1e9, peak16 / 1e9, kernels_describe());
    if (peak16 <= 0) peak16 = peak; /* no AVX-512: the 16-wide column repeats the 8-wide */
    double l2 = l2_read_rate();
    if (l2 > 0 && peak > 0)
        printf("L2 read rate (a 256 KiB buffer, W_hh at 128 -> 512, read with 32-byte loads): "
               "%.0f GB/s, %.1f B a cycle at the clock of the peak (32 FLOP a cycle); the "
               "update's per-step product at 2 rows needs 32 B a cycle at the 8-wide peak, 64 "
               "at the 16-wide one\n",
               l2 / 1e9, l2 / (peak / 32));
    calf_rng rng;
    calf_rng_seed(&rng, 36, 0, CALF_RNG_INIT);
    double calf_best[NSHAPES][2], calf_med[NSHAPES][2];
    for (int k = 0; k < NSHAPES; k++) {
        run r;
        if (run_make(&r, &SHAPES[k], &rng) != 0) {
            fprintf(stderr, "bench_rnn: out of memory\n");
            return 1;
        }
        calf_best[k][0] = best_time(calf_fwd, &r, repeats, &calf_med[k][0]);
        calf_best[k][1] = best_time(calf_fwd_bwd, &r, repeats, &calf_med[k][1]);
        run_free(&r);
    }
    double torch_sec[NSHAPES][2], ob_sec[NSHAPES][2];
    for (int k = 0; k < NSHAPES; k++)
        for (int j = 0; j < 2; j++) torch_sec[k][j] = ob_sec[k][j] = -1.0;
    if (torch && run_torch(torch, NULL, repeats, torch_sec) != 0)
        fprintf(stderr, "bench_rnn: %s did not run to the end\n", torch);
    if (torch && blas_dir && run_torch(torch, blas_dir, repeats, ob_sec) != 0)
        fprintf(stderr, "bench_rnn: %s with %s did not run to the end\n", torch, blas_dir);
    printf("CPU us of the best of %d runs (median); GFLOP/s and %% of peak count the gate "
           "products' multiply-adds only (x W_ih, h W_hh; backward three times that)\n",
           5 * repeats);
    printf("| cell | in | H | T | B | pass | calf us | calf GFLOP/s | of peak 8 / 16 wide | torch us "
           "| calf speedup | torch+OpenBLAS us | of peak 8 wide | calf speedup |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int k = 0; k < NSHAPES; k++) {
        const shape *s = &SHAPES[k];
        for (int j = 0; j < 2; j++) {
            double f = shape_flop(s) * (j ? 3 : 1);
            printf("| %s | %d | %d | %d | %d | %s | %.1f (%.1f) | %.1f | %.0f%% / %.0f%% |",
                   s->kind == RNN_LSTM ? "LSTM" : "GRU", s->in, s->H, s->T, s->B,
                   j ? "fwd+bwd" : "fwd", 1e6 * calf_best[k][j], 1e6 * calf_med[k][j],
                   f / calf_best[k][j] / 1e9, 100 * f / calf_best[k][j] / peak,
                   100 * f / calf_best[k][j] / peak16);
            if (torch_sec[k][j] > 0)
                printf(" %.1f | %.1fx |", 1e6 * torch_sec[k][j], torch_sec[k][j] / calf_best[k][j]);
            else
                printf(" - | - |");
            if (ob_sec[k][j] > 0)
                printf(" %.1f | %.0f%% | %.1fx |", 1e6 * ob_sec[k][j], 100 * f / ob_sec[k][j] / peak,
                       ob_sec[k][j] / calf_best[k][j]);
            else
                printf(" - | - | - |");
            printf("\n");
        }
    }
    return 0;
}
