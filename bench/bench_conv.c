/* bench_conv.c: forward+backward rate of conv2d and of the linear layer after it on
 * MinAtar's network shapes (10x10xC, C in {4, 6, 7, 10}; 16 filters 3x3 stride 1,
 * padding 0 or 1; then 1024 or 1600 -> 128) at PPO-like batches, against this machine's
 * FMA peak measured here (`bench_conv --peak`: that line only). bench/torch_conv.py
 * prints the same columns for PyTorch; bench/layers_vs_torch.sh runs both. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "calf/rng.h"
#include "numerics/conv2d.h"
#include "numerics/nn.h"


enum { RUNS = 9 };

/* This thread's CPU seconds: on a machine shared by more processes than cores, wall
 * time counts the others' turns; CPU time counts only this one's (what is left is the
 * cache the others evict). bench/torch_conv.py times with time.thread_time alike. */
static double cpu_now(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static volatile float sink;

typedef void (*bench_fn)(void *);

/* CPU seconds per call of fn: runs of enough calls to last >= 20 ms each, the best and
 * (in *median) the median of RUNS runs. */
static double best_time(bench_fn fn, void *arg, double *median) {
    fn(arg);
    int reps = 1;
    for (;;) {
        double t0 = cpu_now();
        for (int i = 0; i < reps; i++) fn(arg);
        if (cpu_now() - t0 >= 0.02 || reps >= 1 << 20) break;
        reps *= 2;
    }
    double t[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double t0 = cpu_now();
        for (int i = 0; i < reps; i++) fn(arg);
        t[r] = (cpu_now() - t0) / reps;
    }
    *median = bench_quantile(t, RUNS, 0.5);
    return t[0];
}


static void fill(calf_rng *rng, float *a, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) a[i] = scale * (2.0f * calf_rng_uniform_float(rng) - 1.0f);
}

typedef struct {
    conv2d l;
    conv2d_cache c;
    float *params, *grad, *x, *y, *dy, *dx;
    int B;
} conv_arg;

static void conv_fb(void *p) { /* the first layer: no dX */
    conv_arg *a = p;
    conv2d_forward(&a->l, a->params, a->x, a->B, &a->c, a->y);
    conv2d_backward_set(&a->l, a->params, &a->c, 0, a->B, a->dy, a->grad, NULL);
    sink = a->grad[a->l.w_off];
}

static void conv_fb_dx(void *p) {
    conv_arg *a = p;
    conv2d_forward(&a->l, a->params, a->x, a->B, &a->c, a->y);
    conv2d_backward_set(&a->l, a->params, &a->c, 0, a->B, a->dy, a->grad, a->dx);
    sink = a->grad[a->l.w_off] + a->dx[0];
}

typedef struct {
    float *x, *w, *wt, *b, *y, *dy, *dw, *db, *dx;
    int B, in, out;
} fc_arg;

/* dW and db over the rows in chunks of FC_CHUNK: the first chunk from +0, the rest
 * continuing each chain (nn.h: rows ascending), the bits of one call, with a chunk's
 * rows of x and dy still in cache for every column tile (main checks the bits). */
enum { FC_CHUNK = 64 };

static void fc_dw_chunked(const fc_arg *a) {
    for (int r0 = 0; r0 < a->B; r0 += FC_CHUNK) {
        int R = a->B - r0 < FC_CHUNK ? a->B - r0 : FC_CHUNK;
        const float *x = a->x + (size_t)r0 * a->in, *dy = a->dy + (size_t)r0 * a->out;
        if (r0 == 0)
            nn_linear_backward_params_set(x, dy, R, a->in, a->out, a->dw, a->db);
        else
            nn_linear_backward_params(x, dy, R, a->in, a->out, a->dw, a->db);
    }
}

static void fc_fb(void *p) { /* forward, dW, db, and dX (the conv below needs it) */
    fc_arg *a = p;
    nn_linear_forward(a->x, a->w, a->b, a->B, a->in, a->out, a->y, NULL);
    fc_dw_chunked(a);
    nn_transpose(a->w, a->in, a->out, a->wt);
    nn_linear_backward_input(a->dy, a->wt, a->B, a->in, a->out, a->dx);
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

int main(int argc, char **argv) {
    calf_rng rng;
    calf_rng_seed(&rng, 1, 0, CALF_RNG_INIT);
    double peak = bench_fma_peak(10); /* the best of ten: the machine may be shared */
    printf("calf: peak %.1f GFLOP/s (one core, register-only FMA loop); load average %.1f\n",
           peak * 1e-9, loadavg());
    if (argc > 1 && strcmp(argv[1], "--peak") == 0) return 0; /* the peak line only */
    printf("GFLOP/s (per CPU second) of forward+backward, best (median) of %d runs, and the best's fraction "
           "of peak\n", RUNS);
    printf("%-26s %5s  %-20s %-20s %-20s\n", "shape", "batch", "conv f+b (no dX)",
           "conv f+b+dX", "fc f+b+dX");
    static const int chans[] = {4, 6, 7, 10}, batches[] = {128, 512, 2048};
    for (int ci = 0; ci < 4; ci++) {
        for (int pad = 0; pad <= 1; pad++) {
            for (int bi = 0; bi < 3; bi++) {
                int C = chans[ci], B = batches[bi];
                conv_arg a = {.B = B};
                size_t cursor = 0;
                if (conv2d_layout(&a.l, 10, 10, C, 16, 3, 1, pad, &cursor, NULL)) return 1;
                a.params = nn_alloc_floats(cursor, NULL);
                a.grad = nn_alloc_floats(cursor, NULL);
                a.x = nn_alloc_floats(conv2d_in_size(&a.l) * B, NULL);
                a.dx = nn_alloc_floats(conv2d_in_size(&a.l) * B, NULL);
                a.y = nn_alloc_floats(conv2d_out_size(&a.l) * B, NULL);
                a.dy = nn_alloc_floats(conv2d_out_size(&a.l) * B, NULL);
                if (!a.params || !a.grad || !a.x || !a.dx || !a.y || !a.dy ||
                    conv2d_cache_init(&a.c, &a.l, B, NULL) ||
                    conv2d_init(&a.l, a.params, 1.41421356f, &rng, NULL))
                    return 1;
                fill(&rng, a.x, conv2d_in_size(&a.l) * B, 1.0f);
                fill(&rng, a.dy, conv2d_out_size(&a.l) * B, 1e-3f);
                double conv_flop = 2.0 * B * a.l.out_h * a.l.out_w * conv2d_patch(&a.l) * 16;
                double m1, m2, m3;
                double t1 = best_time(conv_fb, &a, &m1), t2 = best_time(conv_fb_dx, &a, &m2);

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
                double fc_flop = 3 * 2.0 * B * f.in * f.out;
                {
                    size_t nwb = nw * sizeof(float);
                    float *one = malloc(nwb), *db1 = malloc(128 * sizeof(float));
                    if (!one || !db1) return 1;
                    nn_linear_backward_params_set(f.x, f.dy, B, f.in, f.out, one, db1);
                    fc_dw_chunked(&f);
                    if (memcmp(one, f.dw, nwb) != 0 || memcmp(db1, f.db, 128 * sizeof(float)) != 0) {
                        fprintf(stderr, "bench_conv: chunked dW differs from one call\n");
                        return 1;
                    }
                    free(one), free(db1);
                }
                double t3 = best_time(fc_fb, &f, &m3);

                char shape[64], c1[32], c2[32], c3[32];
                snprintf(shape, sizeof shape, "10x10x%d p%d -> %dx%dx16 -> 128", C, pad, a.l.out_h,
                         a.l.out_w);
                snprintf(c1, sizeof c1, "%5.1f (%5.1f) %3.0f%%", 2 * conv_flop / t1 * 1e-9,
                         2 * conv_flop / m1 * 1e-9, 100 * 2 * conv_flop / t1 / peak);
                snprintf(c2, sizeof c2, "%5.1f (%5.1f) %3.0f%%", 3 * conv_flop / t2 * 1e-9,
                         3 * conv_flop / m2 * 1e-9, 100 * 3 * conv_flop / t2 / peak);
                snprintf(c3, sizeof c3, "%5.1f (%5.1f) %3.0f%%", fc_flop / t3 * 1e-9,
                         fc_flop / m3 * 1e-9, 100 * fc_flop / t3 / peak);
                printf("%-26s %5d  %-20s %-20s %-20s\n", shape, B, c1, c2, c3);
                fflush(stdout);
                conv2d_cache_free(&a.c);
                free(a.params), free(a.grad), free(a.x), free(a.dx), free(a.y), free(a.dy);
                free(f.x), free(f.dx), free(f.w), free(f.wt), free(f.dw), free(f.b), free(f.db);
                free(f.y), free(f.dy);
            }
        }
    }
    printf("fc: forward and dX one call each, dW in chunks of %d rows (checked: the bits of "
           "one call)\n", FC_CHUNK);
    printf("load average at the end: %.1f\n", loadavg());
    return 0;
}
