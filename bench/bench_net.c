/* bench_net.c: a whole conv PPO network through net.h, forward and backward (SET, no dX
 * for the observations) as PPO's update runs it, on MinAtar's shapes (10x10xC, 16 filters
 * 3x3 stride 1, flatten, fc 128, a head of 6 logits or 1 value) at PPO-like batches, in
 * GFLOP/s per CPU second against this machine's FMA peak (bench_util.h). The layers alone
 * are bench_conv's; this adds what net does between them (ReLU, its masks, buffers). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "calf/rng.h"
#include "numerics/net.h"

enum { RUNS = 9 };

static volatile float sink;

typedef struct {
    net n;
    net_cache c;
    float *p, *g, *x, *dy;
    int B;
} run_arg;

static void step(run_arg *a) {
    net_forward(&a->n, a->p, a->x, a->B, &a->c, NULL);
    net_backward_set(&a->n, a->p, &a->c, 0, a->B, a->dy, a->g, NULL);
    sink = a->g[a->n.offset];
}

/* CPU seconds per step: runs of >= 20 ms, the best and the median of RUNS. */
static double best_time(run_arg *a, double *median) {
    step(a);
    int reps = 1;
    for (;;) {
        double t0 = bench_cpu_now();
        for (int i = 0; i < reps; i++) step(a);
        if (bench_cpu_now() - t0 >= 0.02 || reps >= 1 << 20) break;
        reps *= 2;
    }
    double t[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double t0 = bench_cpu_now();
        for (int i = 0; i < reps; i++) step(a);
        t[r] = (bench_cpu_now() - t0) / reps;
    }
    *median = bench_quantile(t, RUNS, 0.5);
    double best = t[0];
    for (int r = 1; r < RUNS; r++) best = t[r] < best ? t[r] : best;
    return best;
}

/* Multiply-adds per row, forward (x2 FLOP): conv positions x patch x filters, the fc and
 * the head; backward without dX of the observations: dW of each layer (x2), dX of every
 * layer but the first (x2). */
static double flop_per_row(const net *n) {
    double fwd = 0, bwd = 0;
    for (int k = 0; k < n->num_layers; k++) {
        const net_layer *l = &n->layer[k];
        double m = 0;
        if (l->kind == NET_CONV2D)
            m = (double)l->conv.out_h * l->conv.out_w * conv2d_patch(&l->conv) * l->conv.filters;
        else
            for (int j = 0; j < l->mlp.num_layers; j++)
                m += (double)l->mlp.sizes[j] * l->mlp.sizes[j + 1];
        fwd += 2 * m;
        bwd += 2 * m * (k == 0 ? 1 : 2);
    }
    return fwd + bwd;
}

int main(void) {
    double peak = bench_fma_peak(10);
    printf("calf: peak %.1f GFLOP/s (one core, register-only FMA loop)\n", peak * 1e-9);
    printf("conv PPO network forward + backward (SET, no dX of the input), GFLOP/s per CPU "
           "second, best (median) of %d runs, the best's fraction of peak\n", RUNS);
    printf("%-34s %5s  %-22s %s\n", "network", "batch", "GFLOP/s", "us/row");
    const int channels[] = {4, 7, 10};
    const int batches[] = {64, 512};
    const int heads[] = {6, 1};
    calf_rng rng;
    calf_rng_seed(&rng, 1, 0, 0);
    for (size_t ci = 0; ci < sizeof channels / sizeof *channels; ci++)
        for (size_t hi = 0; hi < 2; hi++)
            for (size_t bi = 0; bi < sizeof batches / sizeof *batches; bi++) {
                int C = channels[ci], out = heads[hi], B = batches[bi];
                const int fc[] = {128};
                net_spec s = net_spec_mlp(100 * C, fc, 1, out, NN_ACT_RELU);
                s.in_h = 10, s.in_w = 10, s.in_c = C;
                s.num_conv = 1;
                s.conv[0] = (net_conv_spec){16, 3, 1, 0};
                run_arg a = {.B = B};
                size_t cur = 0;
                calf_error err;
                if (net_layout(&a.n, &s, &cur, &err) || net_cache_init(&a.c, &a.n, B, &err)) {
                    fprintf(stderr, "bench_net: %s\n", err.msg);
                    return 1;
                }
                a.p = nn_alloc_floats(cur, NULL), a.g = nn_alloc_floats(cur, NULL);
                a.x = nn_alloc_floats((size_t)B * a.n.in, NULL);
                a.dy = nn_alloc_floats((size_t)B * out, NULL);
                if (!a.p || !a.g || !a.x || !a.dy) return 1;
                if (net_init(&a.n, a.p, 1.41f, 0.01f, &rng, &err)) return 1;
                for (size_t i = 0; i < (size_t)B * a.n.in; i++)
                    a.x[i] = calf_rng_uniform_float(&rng) < 0.1f ? 1.0f : 0.0f; /* MinAtar-like */
                for (size_t i = 0; i < (size_t)B * out; i++) a.dy[i] = calf_rng_uniform_float(&rng) - 0.5f;
                double med, t = best_time(&a, &med);
                double f = flop_per_row(&a.n) * B;
                char name[64], rate[64];
                snprintf(name, sizeof name, "10x10x%d -> 8x8x16 -> 128 -> %d", C, out);
                snprintf(rate, sizeof rate, "%5.1f (%5.1f) %3.0f%%", f / t * 1e-9, f / med * 1e-9,
                         100 * f / t / peak);
                printf("%-34s %5d  %-22s %.2f\n", name, B, rate, 1e6 * t / B);
                net_cache_free(&a.c);
                free(a.p), free(a.g), free(a.x), free(a.dy);
            }
    return 0;
}
