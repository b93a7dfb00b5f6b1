/* bench_conv.c: conv2d and the linear layer after it on MinAtar's network (issue 36's
 * section 1 "Speed"): 10x10xC with C = 4, 7, 10 (Breakout and Asterix, Seaquest, ... see
 * bench/README.md), 16 filters 3x3 stride 1 without padding, flatten, fc 1024 -> 128, at
 * the acting batch (64 rows: one forward per iteration step of ppo_minatar's 64 envs) and
 * the update's minibatch (1,024 rows: 64 envs x 128 steps in 8 minibatches). Forward and
 * forward+backward rates of each layer, against this machine's FMA peaks measured here
 * (8 floats wide, and 16 where the CPU has AVX-512; CALF_KERNELS picks the variant run);
 * with --torch PATH (bench/torch_conv.py) PyTorch's Conv2d and Linear through autograd on
 * one thread on the same shapes, side by side, and with --openblas DIR torch runs with
 * DIR's libblas.so.3 (OpenBLAS, one thread) first on LD_LIBRARY_PATH.
 *
 * Usage: bench_conv [--peak] [--torch bench/torch_conv.py [--openblas DIR]] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "calf/rng.h"
#include "numerics/conv2d.h"
#include "numerics/kernels.h"
#include "numerics/nn.h"

enum { RUNS = 31, NCOLS = 4 };

static volatile float sink;

typedef void (*bench_fn)(void *);

/* CPU seconds of this thread per call of fn (the machine is shared: wall time would count
 * the others' turns): runs of enough calls to last >= 3 ms each, shorter than a time
 * slice so that some run has the core and its caches to itself, the best and (in
 * *median) the median of RUNS runs. bench/torch_conv.py times the same way. */
static double best_time(bench_fn fn, void *arg, double *median) {
    fn(arg);
    int reps = 1;
    for (;;) {
        double t0 = bench_cpu_now();
        for (int i = 0; i < reps; i++) fn(arg);
        if (bench_cpu_now() - t0 >= 0.003 || reps >= 1 << 20) break;
        reps *= 2;
    }
    double t[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double t0 = bench_cpu_now();
        for (int i = 0; i < reps; i++) fn(arg);
        t[r] = (bench_cpu_now() - t0) / reps;
    }
    *median = bench_quantile(t, RUNS, 0.5);
    return t[0]; /* sorted */
}

static void fill(calf_rng *rng, float *a, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) a[i] = scale * (2.0f * calf_rng_uniform_float(rng) - 1.0f);
}

typedef struct {
    conv2d l;
    conv2d_cache c;
    float *params, *grad, *x, *y, *dy;
    int B;
} conv_arg;

static void conv_f(void *p) {
    conv_arg *a = p;
    conv2d_forward(&a->l, a->params, a->x, a->B, &a->c, a->y);
    sink = a->y[0];
}

static void conv_fb(void *p) { /* the first layer: dW and db, no dX */
    conv_arg *a = p;
    conv2d_forward(&a->l, a->params, a->x, a->B, &a->c, a->y);
    conv2d_backward_set(&a->l, a->params, &a->c, 0, a->B, a->dy, a->grad, NULL);
    sink = a->grad[a->l.w_off];
}

typedef struct {
    float *x, *w, *wt, *b, *y, *dy, *dw, *db, *dx;
    int B, in, out;
} fc_arg;

static void fc_f(void *p) {
    fc_arg *a = p;
    nn_linear_forward(a->x, a->w, a->b, a->B, a->in, a->out, a->y, NULL);
    sink = a->y[0];
}

/* forward, dW and db, and dX (the conv below needs it), as net.c runs the fc: dX through
 * the W^T nn's MLP keeps (16-input strips at this size; the packing is inside the time) */
static void fc_fb(void *p) {
    fc_arg *a = p;
    nn_linear_forward(a->x, a->w, a->b, a->B, a->in, a->out, a->y, NULL);
    nn_linear_backward_params_set(a->x, a->dy, a->B, a->in, a->out, a->dw, a->db);
    nn_wt_pack(a->w, a->in, a->out, a->wt);
    nn_linear_backward_input_wt(a->dy, a->wt, a->B, a->in, a->out, a->dx);
    sink = a->dw[0] + a->dx[0];
}

static double loadavg(void) {
    FILE *f = fopen("/proc/loadavg", "r");
    double v = -1.0;
    if (f) {
        if (fscanf(f, "%lf", &v) != 1) v = -1.0;
        fclose(f);
    }
    return v;
}

static const int CHANS[] = {4, 7, 10}, BATCHES[] = {64, 1024};
enum { NCH = 3, NB = 2, NSHAPES = NCH * NB };
static const char *const COLS[NCOLS] = {"conv fwd", "conv f+b (no dX)", "fc fwd", "fc f+b+dX"};

/* FLOPs (two per multiply-add) of each column at C channels and B rows: a forward is one
 * product, the conv's backward adds dW (a first layer: no dX), the fc's dW and dX. */
static void col_flop(int C, int B, double *f) {
    double conv = 2.0 * B * 8 * 8 * 9 * C * 16, fc = 2.0 * B * 1024 * 128;
    f[0] = conv, f[1] = 2 * conv, f[2] = fc, f[3] = 3 * fc;
}

/* torch_conv.py's lines "CONV <shape index> <column> <best s> <median s>". */
static int run_torch(const char *path, const char *blas_dir, double best[][NCOLS],
                     double med[][NCOLS]) {
    char cmd[2048], line[512];
    int n = blas_dir ? snprintf(cmd, sizeof cmd,
                                "env LD_LIBRARY_PATH='%s' OPENBLAS_NUM_THREADS=1 /usr/bin/python3 '%s'",
                                blas_dir, path)
                     : snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s'", path);
    for (int k = 0; k < NSHAPES && n > 0 && (size_t)n < sizeof cmd; k++)
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " %d:%d", CHANS[k / NB], BATCHES[k % NB]);
    if (n <= 0 || (size_t)n >= sizeof cmd) return -1;
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    while (fgets(line, sizeof line, p)) {
        int k, c;
        double b, m;
        if (sscanf(line, "CONV %d %d %lf %lf", &k, &c, &b, &m) == 4 && k >= 0 && k < NSHAPES &&
            c >= 0 && c < NCOLS)
            best[k][c] = b, med[k][c] = m;
        else
            fputs(line, stdout);
    }
    return pclose(p) == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
    const char *torch = NULL, *blas_dir = NULL;
    int peak_only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--peak") == 0) peak_only = 1;
        else if (strcmp(argv[i], "--torch") == 0 && i + 1 < argc) torch = argv[++i];
        else if (strcmp(argv[i], "--openblas") == 0 && i + 1 < argc) blas_dir = argv[++i];
        else {
            fprintf(stderr, "usage: bench_conv [--peak] [--torch PATH [--openblas DIR]]\n");
            return 2;
        }
    }
    calf_rng rng;
    calf_rng_seed(&rng, 1, 0, CALF_RNG_INIT);
    double peak = bench_fma_peak(10); /* the best of ten: the machine may be shared */
    double peak16 = bench_fma_peak16(10);
    printf("calf: peak %.1f GFLOP/s 8 wide, %.1f 16 wide (one core, register-only FMA loops); "
           "load average %.1f\ncalf kernels: %s\n",
           peak * 1e-9, peak16 * 1e-9, loadavg(), kernels_describe());
    if (peak16 <= 0) peak16 = peak; /* no AVX-512: the 16-wide column repeats the 8-wide */
    if (peak_only) return 0;
    double cb[NSHAPES][NCOLS], cm[NSHAPES][NCOLS];
    for (int k = 0; k < NSHAPES; k++) {
        int C = CHANS[k / NB], B = BATCHES[k % NB];
        conv_arg a = {.B = B};
        size_t cursor = 0;
        if (conv2d_layout(&a.l, 10, 10, C, 16, 3, 1, 0, &cursor, NULL)) return 1;
        a.params = nn_alloc_floats(cursor, NULL);
        a.grad = nn_alloc_floats(cursor, NULL);
        a.x = nn_alloc_floats(conv2d_in_size(&a.l) * B, NULL);
        a.y = nn_alloc_floats(conv2d_out_size(&a.l) * B, NULL);
        a.dy = nn_alloc_floats(conv2d_out_size(&a.l) * B, NULL);
        if (!a.params || !a.grad || !a.x || !a.y || !a.dy ||
            conv2d_cache_init(&a.c, &a.l, B, NULL) ||
            conv2d_init(&a.l, a.params, 1.41421356f, &rng, NULL))
            return 1;
        for (size_t i = 0; i < conv2d_in_size(&a.l) * B; i++) /* MinAtar's 0/1 cells */
            a.x[i] = calf_rng_uniform_float(&rng) < 0.1f ? 1.0f : 0.0f;
        fill(&rng, a.dy, conv2d_out_size(&a.l) * B, 1e-3f);
        cb[k][0] = best_time(conv_f, &a, &cm[k][0]);
        cb[k][1] = best_time(conv_fb, &a, &cm[k][1]);

        fc_arg f = {.B = B, .in = (int)conv2d_out_size(&a.l), .out = 128};
        size_t nx = (size_t)B * f.in, nw = (size_t)f.in * f.out, ny = (size_t)B * f.out;
        f.x = nn_alloc_floats(nx, NULL), f.dx = nn_alloc_floats(nx, NULL);
        f.w = nn_alloc_floats(nw, NULL), f.wt = nn_alloc_floats(nw, NULL);
        f.dw = nn_alloc_floats(nw, NULL), f.b = nn_alloc_floats(128, NULL);
        f.db = nn_alloc_floats(128, NULL), f.y = nn_alloc_floats(ny, NULL);
        f.dy = nn_alloc_floats(ny, NULL);
        if (!f.x || !f.dx || !f.w || !f.wt || !f.dw || !f.b || !f.db || !f.y || !f.dy) return 1;
        fill(&rng, f.x, nx, 1.0f);
        fill(&rng, f.w, nw, 0.05f);
        fill(&rng, f.dy, ny, 1e-3f);
        cb[k][2] = best_time(fc_f, &f, &cm[k][2]);
        cb[k][3] = best_time(fc_fb, &f, &cm[k][3]);
        conv2d_cache_free(&a.c);
        free(a.params), free(a.grad), free(a.x), free(a.y), free(a.dy);
        free(f.x), free(f.dx), free(f.w), free(f.wt), free(f.dw), free(f.b), free(f.db);
        free(f.y), free(f.dy);
    }
    double tb[NSHAPES][NCOLS], tm[NSHAPES][NCOLS];
    for (int k = 0; k < NSHAPES; k++)
        for (int c = 0; c < NCOLS; c++) tb[k][c] = tm[k][c] = -1.0;
    if (torch && run_torch(torch, blas_dir, tb, tm) != 0)
        fprintf(stderr, "bench_conv: %s did not run to the end\n", torch);
    printf("GFLOP/s per CPU second of the thread, best (median) of %d runs; %% of the 8-wide "
           "and the 16-wide peak from the best; conv 16 filters 3x3 stride 1 -> 8x8x16, fc "
           "1024 -> 128\n", RUNS);
    printf("| input | batch | layer | calf GFLOP/s | calf %% of peak 8 / 16 wide |%s\n",
           torch ? " torch GFLOP/s | torch % of peak 8 wide | calf / torch |" : "");
    printf("|---|---|---|---|---|%s\n", torch ? "---|---|---|" : "");
    for (int k = 0; k < NSHAPES; k++) {
        int C = CHANS[k / NB], B = BATCHES[k % NB];
        double fl[NCOLS];
        col_flop(C, B, fl);
        for (int c = 0; c < NCOLS; c++) {
            printf("| 10x10x%d | %d | %s | %.1f (%.1f) | %.0f%% / %.0f%% |", C, B, COLS[c],
                   fl[c] / cb[k][c] * 1e-9, fl[c] / cm[k][c] * 1e-9, 100 * fl[c] / cb[k][c] / peak,
                   100 * fl[c] / cb[k][c] / peak16);
            if (torch && tb[k][c] > 0)
                printf(" %.1f (%.1f) | %.0f%% | %.2fx |", fl[c] / tb[k][c] * 1e-9,
                       fl[c] / tm[k][c] * 1e-9, 100 * fl[c] / tb[k][c] / peak,
                       tb[k][c] / cb[k][c]);
            else if (torch)
                printf(" - | - | - |");
            printf("\n");
        }
    }
    printf("load average at the end: %.1f\n", loadavg());
    return 0;
}
