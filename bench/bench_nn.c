/* bench_nn.c: throughput of the nn kernels on ppo_cartpole's shapes: a 64x64 linear
 * layer at batch 512, and the actor (4-64-64-2) and critic (4-64-64-1) tanh MLPs,
 * forward at batch 512 and backward per env (64 calls of 8 rows), as the trainer runs;
 * then the MLP calls of one SAC and one TD3 update on HalfCheetah (17 observations, 6
 * actions, 256x256 relu networks, batch 256), the reference the trainers' update rates
 * are measured against (bench_sac). Prints the median of several timed runs. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "calf/rng.h"
#include "numerics/adam.h"
#include "numerics/nn.h"

/* Many short runs (each well inside a scheduler time slice) and their median: on a
 * shared machine that is far steadier than a few long runs. */
enum { RUNS = 301 };

static volatile float sink;

/* Seconds per repetition of fn over RUNS runs of reps repetitions: the median, and in
 * *best the fastest run (what the kernels do when nothing else shares the core). */
typedef void (*bench_fn)(void *);
static double median_time(bench_fn fn, void *arg, int reps, double *best) {
    static double t[RUNS];
    for (int i = 0; i < 20; i++) fn(arg); /* warm caches and clocks */
    for (int r = 0; r < RUNS; r++) {
        double t0 = bench_now();
        for (int i = 0; i < reps; i++) fn(arg);
        t[r] = (bench_now() - t0) / reps;
    }
    qsort(t, RUNS, sizeof t[0], bench_cmp_double);
    *best = t[0];
    return t[RUNS / 2];
}

static void fill(calf_rng *rng, float *a, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) a[i] = scale * (2.0f * calf_rng_uniform_float(rng) - 1.0f);
}

/* ---- one 64x64 layer at batch 512 ---- */

typedef struct {
    int B, in, out;
    float *x, *w, *wt, *b, *y, *dy, *dw, *db, *dx;
} layer_arg;

/* A layer's buffers: x uniform in +-1, w in +-w_scale, dy in +-1e-3, wt = w^T. */
static layer_arg layer_make(calf_rng *rng, int B, int in, int out, float w_scale) {
    layer_arg a = {.B = B, .in = in, .out = out};
    size_t nx = (size_t)B * in, nw = (size_t)in * out, ny = (size_t)B * out;
    a.x = nn_alloc_floats(nx, NULL), a.dx = nn_alloc_floats(nx, NULL);
    a.w = nn_alloc_floats(nw, NULL), a.wt = nn_alloc_floats(nw, NULL), a.dw = nn_alloc_floats(nw, NULL);
    a.b = nn_alloc_floats((size_t)out, NULL), a.db = nn_alloc_floats((size_t)out, NULL);
    a.y = nn_alloc_floats(ny, NULL), a.dy = nn_alloc_floats(ny, NULL);
    fill(rng, a.x, nx, 1.0f);
    fill(rng, a.w, nw, w_scale);
    fill(rng, a.dy, ny, 1e-3f);
    nn_transpose(a.w, in, out, a.wt);
    return a;
}

static void layer_free(layer_arg *a) {
    free(a->x), free(a->dx), free(a->w), free(a->wt), free(a->dw), free(a->b), free(a->db);
    free(a->y), free(a->dy);
}

static void layer_forward(void *p) {
    layer_arg *a = p;
    nn_linear_forward(a->x, a->w, a->b, a->B, a->in, a->out, a->y, NULL);
    sink = a->y[0];
}

static void layer_dw_per_env(void *p) {
    layer_arg *a = p;
    for (int r0 = 0; r0 < a->B; r0 += 8)
        nn_linear_backward_params(a->x + (size_t)r0 * a->in, a->dy + (size_t)r0 * a->out, 8,
                                  a->in, a->out, a->dw, a->db);
    sink = a->dw[0];
}

static void layer_dx_per_env(void *p) {
    layer_arg *a = p;
    for (int r0 = 0; r0 < a->B; r0 += 8)
        nn_linear_backward_input(a->dy + (size_t)r0 * a->out, a->wt, 8, a->in, a->out,
                                 a->dx + (size_t)r0 * a->in);
    sink = a->dx[0];
}

static void layer_dw_whole(void *p) {
    layer_arg *a = p;
    nn_linear_backward_params_set(a->x, a->dy, a->B, a->in, a->out, a->dw, a->db);
    sink = a->dw[0];
}

static void layer_dx_whole(void *p) {
    layer_arg *a = p;
    nn_linear_backward_input(a->dy, a->wt, a->B, a->in, a->out, a->dx);
    sink = a->dx[0];
}

/* ---- actor + critic MLPs ---- */

typedef struct {
    nn_mlp actor, critic;
    nn_cache ca, cc;
    float *params, *grad;
    float *x, *ya, *yc, *dya, *dyc;
    int B, rows_per_env;
    int group_rows; /* rows per forward call in mlp_forward_groups */
} mlp_arg;

static void mlp_forward(void *p) {
    mlp_arg *a = p;
    nn_mlp_forward(&a->actor, a->params, a->x, a->B, &a->ca, a->ya);
    nn_mlp_forward(&a->critic, a->params, a->x, a->B, &a->cc, a->yc);
    sink = a->ya[0] + a->yc[0];
}

/* The same 512 rows as sharing ranks pass them: a group of envs (8 rows each) a call.
 * The weights do not change between calls, as within one minibatch. */
static void mlp_forward_groups(void *p) {
    mlp_arg *a = p;
    int g = a->group_rows;
    for (int r0 = 0; r0 < a->B; r0 += g) {
        nn_mlp_forward_v(&a->actor, a->params, 1, a->x + (size_t)r0 * 4, g, &a->ca,
                         a->ya + (size_t)r0 * 2);
        nn_mlp_forward_v(&a->critic, a->params, 1, a->x + (size_t)r0 * 4, g, &a->cc, a->yc + r0);
    }
    sink = a->ya[0] + a->yc[0];
}

static void mlp_backward(void *p) {
    mlp_arg *a = p;
    /* The trainer zeroes a fresh per-env partial first; that memset belongs to the
     * reduction tree, not to the kernels, so here every env accumulates into one. */
    for (int r0 = 0; r0 < a->B; r0 += a->rows_per_env) {
        nn_mlp_backward(&a->actor, a->params, &a->ca, r0, a->rows_per_env,
                        a->dya + (size_t)r0 * 2, a->grad, NULL);
        nn_mlp_backward(&a->critic, a->params, &a->cc, r0, a->rows_per_env,
                        a->dyc + (size_t)r0, a->grad, NULL);
    }
    sink = a->grad[0];
}

/* ---- the MLP calls of one SAC / TD3 update at 256x256 ---- */

/* HalfCheetah's shapes, one env, batch 256: the actor 17-256-256-{12 (SAC: mean and log
 * std), 6 (TD3)}, each critic 23-256-256-1, relu. The calls are those of sac.c's and
 * dpg.c's critic and actor passes (forwards of the actor, the target and online critics;
 * the critics' backward to their parameters, then to the action through them; the
 * actor's backward), without the losses, the sampling, the gradient tree or Adam:
 * the arithmetic an update cannot avoid. */
enum { UPD_B = 256, UPD_OBS = 17, UPD_ACT = 6 };

typedef struct {
    nn_mlp actor, q1, q2;
    nn_cache ca, c1, c2, t1, t2;
    float *params, *grad, *obs, *qin, *dhead, *dq, *dx;
    int head; /* the actor's outputs */
    bool td3; /* TD3: its actor pass every second update, through q1 only */
    int step;
} update_arg;

static void update_calls(void *p) {
    update_arg *a = p;
    const float *pp = a->params;
    nn_mlp_forward(&a->actor, pp, a->obs, UPD_B, &a->ca, NULL);
    nn_mlp_forward(&a->q1, pp, a->qin, UPD_B, &a->t1, NULL);
    nn_mlp_forward(&a->q2, pp, a->qin, UPD_B, &a->t2, NULL);
    nn_mlp_forward(&a->q1, pp, a->qin, UPD_B, &a->c1, NULL);
    nn_mlp_forward(&a->q2, pp, a->qin, UPD_B, &a->c2, NULL);
    nn_mlp_backward_set(&a->q1, pp, &a->c1, 0, UPD_B, a->dq, a->grad, NULL);
    nn_mlp_backward_set(&a->q2, pp, &a->c2, 0, UPD_B, a->dq, a->grad, NULL);
    if (!a->td3 || (a->step++ & 1)) {
        nn_mlp_forward(&a->actor, pp, a->obs, UPD_B, &a->ca, NULL);
        nn_mlp_forward(&a->q1, pp, a->qin, UPD_B, &a->c1, NULL);
        nn_mlp_backward(&a->q1, pp, &a->c1, 0, UPD_B, a->dq, NULL, a->dx);
        if (!a->td3) {
            nn_mlp_forward(&a->q2, pp, a->qin, UPD_B, &a->c2, NULL);
            nn_mlp_backward(&a->q2, pp, &a->c2, 0, UPD_B, a->dq, NULL, a->dx);
        }
        nn_mlp_backward_set(&a->actor, pp, &a->ca, 0, UPD_B, a->dhead, a->grad, NULL);
    }
    sink = a->grad[0];
}

static void bench_update(calf_rng *rng, bool td3) {
    update_arg a = {.head = td3 ? UPD_ACT : 2 * UPD_ACT, .td3 = td3};
    size_t cursor = 0;
    const int hidden[2] = {256, 256};
    nn_mlp_layout(&a.actor, UPD_OBS, hidden, 2, a.head, NN_ACT_RELU, &cursor);
    nn_mlp_layout(&a.q1, UPD_OBS + UPD_ACT, hidden, 2, 1, NN_ACT_RELU, &cursor);
    nn_mlp_layout(&a.q2, UPD_OBS + UPD_ACT, hidden, 2, 1, NN_ACT_RELU, &cursor);
    a.params = nn_alloc_floats(cursor, NULL);
    a.grad = nn_alloc_floats(cursor, NULL);
    nn_mlp_init(&a.actor, a.params, sqrtf(2.0f), 1.0f, rng, NULL);
    nn_mlp_init(&a.q1, a.params, sqrtf(2.0f), 1.0f, rng, NULL);
    nn_mlp_init(&a.q2, a.params, sqrtf(2.0f), 1.0f, rng, NULL);
    nn_cache_init(&a.ca, &a.actor, UPD_B, NULL);
    nn_cache *cs[] = {&a.c1, &a.c2, &a.t1, &a.t2};
    for (int i = 0; i < 4; i++) nn_cache_init(cs[i], &a.q1, UPD_B, NULL);
    a.obs = nn_alloc_floats(UPD_B * UPD_OBS, NULL);
    a.qin = nn_alloc_floats(UPD_B * (UPD_OBS + UPD_ACT), NULL);
    a.dhead = nn_alloc_floats(UPD_B * 2 * UPD_ACT, NULL);
    a.dq = nn_alloc_floats(UPD_B, NULL);
    a.dx = nn_alloc_floats(UPD_B * (UPD_OBS + UPD_ACT), NULL);
    fill(rng, a.obs, UPD_B * UPD_OBS, 1.0f);
    fill(rng, a.qin, UPD_B * (UPD_OBS + UPD_ACT), 1.0f);
    fill(rng, a.dhead, UPD_B * 2 * UPD_ACT, 1e-2f);
    fill(rng, a.dq, UPD_B, 1e-2f);
    double flop = bench_update_flop(UPD_OBS, UPD_ACT, 256, UPD_B, td3);
    double best, t = median_time(update_calls, &a, 2, &best);
    printf("  %s: %.1f MFLOP/update: %5.1f (%5.1f) GFLOP/s, %.0f (%.0f) updates/s\n",
           td3 ? "TD3 (actor every 2nd)" : "SAC                  ", flop * 1e-6, flop / t * 1e-9,
           flop / best * 1e-9, 1.0 / t, 1.0 / best);
    nn_cache_free(&a.ca);
    for (int i = 0; i < 4; i++) nn_cache_free(cs[i]);
    free(a.params), free(a.grad), free(a.obs), free(a.qin), free(a.dhead), free(a.dq), free(a.dx);
}

/* ---- activations, optimiser ---- */

typedef struct {
    float *x, *y;
    size_t n;
} vec_arg;

static void run_tanh(void *p) {
    vec_arg *a = p;
    nn_tanh(a->x, a->y, a->n);
    sink = a->y[0];
}

static void run_tanhf(void *p) {
    vec_arg *a = p;
    for (size_t i = 0; i < a->n; i++) a->y[i] = tanhf(a->x[i]);
    sink = a->y[0];
}

typedef struct {
    float *p, *g, *m, *v;
    size_t n;
} adam_arg;

static void run_adam(void *p) {
    adam_arg *a = p;
    adam_step(a->p, a->g, a->m, a->v, a->n, 10, 1e-3f, 0.9f, 0.999f, 1e-7f);
    sink = a->p[0];
}

/* Times fn(arg) (median_time, runs of reps calls) and prints its GFLOP/s for `flop`
 * floating-point operations a call: the median, then the best in parentheses. */
static void rate_line(const char *label, bench_fn fn, void *arg, int reps, double flop) {
    double best, t = median_time(fn, arg, reps, &best);
    printf("%-44s %5.1f (%5.1f)\n", label, flop / t * 1e-9, flop / best * 1e-9);
}

int main(void) {
    calf_rng rng;
    calf_rng_seed(&rng, 1, 0, CALF_RNG_INIT);

    layer_arg L = layer_make(&rng, 512, 64, 64, 0.2f);
    double layer_flop = 2.0 * 512 * 64 * 64;
    printf("GFLOP/s, median (best) of %d runs\n", RUNS);
    rate_line("linear 64x64, 512 rows, forward:", layer_forward, &L, 2, layer_flop);
    rate_line("  per env (64 calls x 8 rows), dW:", layer_dw_per_env, &L, 2, layer_flop);
    rate_line("  per env (64 calls x 8 rows), dX:", layer_dx_per_env, &L, 2, layer_flop);

    /* SAC's and TD3's hidden layer at their batch: one call of 256 rows each */
    layer_arg W = layer_make(&rng, 256, 256, 256, 0.1f);
    double wide_flop = 2.0 * 256 * 256 * 256;
    rate_line("linear 256x256, 256 rows, one call: forward", layer_forward, &W, 1, wide_flop);
    rate_line("  dW:", layer_dw_whole, &W, 1, wide_flop);
    rate_line("  dX:", layer_dx_whole, &W, 1, wide_flop);
    layer_free(&W);

    mlp_arg M = {.B = 512, .rows_per_env = 8};
    size_t cursor = 0;
    const int hidden[2] = {64, 64};
    nn_mlp_layout(&M.actor, 4, hidden, 2, 2, NN_ACT_TANH, &cursor);
    nn_mlp_layout(&M.critic, 4, hidden, 2, 1, NN_ACT_TANH, &cursor);
    M.params = nn_alloc_floats(cursor, NULL);
    M.grad = nn_alloc_floats(cursor, NULL);
    nn_mlp_init(&M.actor, M.params, sqrtf(2.0f), 0.01f, &rng, NULL);
    nn_mlp_init(&M.critic, M.params, sqrtf(2.0f), 1.0f, &rng, NULL);
    nn_cache_init(&M.ca, &M.actor, M.B, NULL);
    nn_cache_init(&M.cc, &M.critic, M.B, NULL);
    M.x = nn_alloc_floats(512 * 4, NULL);
    M.ya = nn_alloc_floats(512 * 2, NULL);
    M.yc = nn_alloc_floats(512, NULL);
    M.dya = nn_alloc_floats(512 * 2, NULL);
    M.dyc = nn_alloc_floats(512, NULL);
    fill(&rng, M.x, 512 * 4, 1.0f);
    fill(&rng, M.dya, 512 * 2, 1e-2f);
    fill(&rng, M.dyc, 512, 1e-2f);
    /* multiply-adds per row: forward sum(in*out); backward dW the same, dX all but the
     * first layer's */
    double fwd_madds = 2.0 * (4 * 64 + 64 * 64) + 64 * 2 + 64 * 1;
    double bwd_madds = fwd_madds + 2.0 * (64 * 64) + 64 * 2 + 64 * 1;
    double b1, b2, tmf = median_time(mlp_forward, &M, 1, &b1);
    double tmb = median_time(mlp_backward, &M, 1, &b2);
    printf("actor+critic MLPs (4-64-64-{2,1} tanh), 512 rows:\n");
    printf("  forward, one call per net:                 %5.1f (%5.1f)  %.0f ns/row\n",
           2.0 * fwd_madds * 512 / tmf * 1e-9, 2.0 * fwd_madds * 512 / b1 * 1e-9, tmf / 512 * 1e9);
    for (int g = 32; g <= 64; g += 32) {
        M.group_rows = g;
        double b4, tmg = median_time(mlp_forward_groups, &M, 1, &b4);
        printf("  forward, %2d calls x %2d rows per net:       %5.1f (%5.1f)  %.0f ns/row\n", 512 / g,
               g, 2.0 * fwd_madds * 512 / tmg * 1e-9, 2.0 * fwd_madds * 512 / b4 * 1e-9,
               tmg / 512 * 1e9);
    }
    printf("  backward dW+dX, 64 calls x 8 rows per net: %5.1f (%5.1f)  %.0f ns/row\n",
           2.0 * bwd_madds * 512 / tmb * 1e-9, 2.0 * bwd_madds * 512 / b2 * 1e-9, tmb / 512 * 1e9);

    printf("one update's MLP calls, HalfCheetah (17-256-256-{12,6} actor, 23-256-256-1 critics, "
           "relu, 256 rows):\n");
    bench_update(&rng, false);
    bench_update(&rng, true);

    vec_arg V = {.n = 512 * 64};
    V.x = nn_alloc_floats(V.n, NULL);
    V.y = nn_alloc_floats(V.n, NULL);
    fill(&rng, V.x, V.n, 4.0f);
    double tt = median_time(run_tanh, &V, 2, &b1);
    double ttf = median_time(run_tanhf, &V, 1, &b2);
    printf("tanh: nn_tanh %.2f ns/element, libm tanhf %.2f ns/element\n", tt / V.n * 1e9,
           ttf / V.n * 1e9);

    adam_arg A = {.n = cursor};
    A.p = M.params;
    A.g = M.grad;
    A.m = nn_alloc_floats(cursor, NULL);
    A.v = nn_alloc_floats(cursor, NULL);
    fill(&rng, A.g, cursor, 1e-2f);
    double ta = median_time(run_adam, &A, 4, &b1);
    printf("adam: %zu params, %.2f us/step\n", cursor, ta * 1e6);

    nn_cache_free(&M.ca);
    nn_cache_free(&M.cc);
    layer_free(&L);
    free(M.params), free(M.grad), free(M.x), free(M.ya), free(M.yc), free(M.dya);
    free(M.dyc), free(V.x), free(V.y), free(A.m), free(A.v);
    return 0;
}
