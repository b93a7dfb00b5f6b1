/* bench_comm.c: latency and bandwidth of the canonical-tree allreduce at the ppo_cartpole
 * gradient size (9,219 floats, 64 envs) on 2 local processes, plus barrier and comm_any
 * latency, the 1-process figure for comparison, and the work-shared sum the trainer runs
 * after every minibatch, with pieces as stealing leaves them. Runs in a few seconds.
 * Under mpirun (`mpirun -np 2 build/bench_comm`) it measures the MPI backend instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "comm.h"
#include "launcher.h"

enum { N_FLOATS = 9219, N_ENVS = 64, ITERS = 3000, BARRIERS = 20000 };

static void fold_envs(comm_tree *t, int count) {
    for (int i = 0; i < count; i++) {
        float *leaf = comm_tree_leaf(t);
        leaf[i % N_FLOATS] = (float)i;
        comm_tree_push(t);
    }
}

/* Times allreduce alone (leaves folded outside the clock), and fold + allreduce. */
static int bench_rank(comm *c, void *arg) {
    (void)arg;
    int P = comm_size(c), r = comm_rank(c) < 0 ? 0 : comm_rank(c);
    int count = N_ENVS / P, begin = r * count;
    calf_error err;
    calf_error_clear(&err);
    comm_tree t;
    comm_tree_init(&t, N_FLOATS, N_ENVS, begin, count);
    float *out = malloc(N_FLOATS * sizeof *out);
    double *sample = malloc((ITERS > BARRIERS ? ITERS : BARRIERS) * sizeof *sample);
    int rc = 0;
    for (int i = 0; i < 300 && rc == 0; i++) { /* warm up: pages, caches, range exchange */
        fold_envs(&t, count);
        rc = comm_tree_allreduce(c, &t, out, &err);
    }
    for (int i = 0; i < ITERS && rc == 0; i++) {
        fold_envs(&t, count);
        rc = comm_barrier(c, &err); /* start together: time the exchange, not fold skew */
        double t0 = bench_now_us();
        rc = comm_tree_allreduce(c, &t, out, &err);
        sample[i] = bench_now_us() - t0;
    }
    double med = bench_quantile(sample, ITERS, 0.5), p90 = bench_quantile(sample, ITERS, 0.9);
    for (int i = 0; i < ITERS && rc == 0; i++) {
        double t0 = bench_now_us();
        fold_envs(&t, count);
        rc = comm_tree_allreduce(c, &t, out, &err);
        sample[i] = bench_now_us() - t0;
    }
    double full = bench_quantile(sample, ITERS, 0.5);
    /* Back-to-back barriers: the mean is the round trip through shared memory (a single
     * rank's per-call time would mostly see the other rank already arrived). */
    double bar = 0, any = 0;
    if (P > 1) {
        double t0 = bench_now_us();
        for (int i = 0; i < BARRIERS && rc == 0; i++) rc = comm_barrier(c, &err);
        bar = (bench_now_us() - t0) / BARRIERS;
        t0 = bench_now_us();
        for (int i = 0; i < BARRIERS && rc == 0; i++) {
            int flag;
            rc = comm_any(c, 0, &flag, &err);
        }
        any = (bench_now_us() - t0) / BARRIERS;
    }
    if (rc != 0) {
        comm_report_failure(c, err.msg);
    } else if (r == 0) {
        /* Bytes each rank moves: its blob in, every blob out. */
        double bytes = (double)N_FLOATS * sizeof(float) * (1 + P);
        printf("%-6s P=%d  allreduce of %d floats over %d envs: median %.1f us, p90 %.1f us",
               comm_backend_name(c), P, N_FLOATS, N_ENVS, med, p90);
        if (P > 1) printf(" (%.2f GB/s moved per rank)", bytes / med * 1e-3);
        printf("; fold %d envs + allreduce: median %.1f us\n", count, full);
        if (P > 1)
            printf("%-6s P=%d  barrier %.2f us, comm_any %.2f us (mean of %d back-to-back)\n",
                   comm_backend_name(c), P, bar, any, BARRIERS);
    }
    free(sample);
    free(out);
    comm_tree_free(&t);
    return rc == 0 ? 0 : 1;
}

/* The work-shared sum of one minibatch after stealing on 2 local processes: rank 0
 * folded [0, 28) of its own and [60, 64) of rank 1's, rank 1 [32, 60) and [28, 32), so the
 * completion has 8 blocks from 4 pieces. Own trees are published where they lie, stolen
 * ones copied, as in the trainer. */
static int bench_shared_sum(comm *c, void *arg) {
    (void)arg;
    int r = comm_rank(c);
    int own_begin = r == 0 ? 0 : 32, own_count = 28, steal_begin = r == 0 ? 60 : 28;
    calf_error err;
    calf_error_clear(&err);
    comm_tree own, steal;
    comm_tree_init(&own, N_FLOATS, N_ENVS, own_begin, own_count);
    comm_tree_init(&steal, N_FLOATS, N_ENVS, 0, 0);
    float *out = malloc(N_FLOATS * sizeof *out);
    double *sample = malloc(ITERS * sizeof *sample);
    int rc = comm_tree_share_buffers(c, &own, 0, &err);
    for (int i = 0; i < 300 + ITERS && rc == 0; i++) {
        comm_tree_pieces p;
        if ((rc = comm_tree_pieces_open(c, &p, N_ENVS, N_FLOATS, &own, &err))) break;
        comm_tree_restart(&own, own_begin, own_count);
        fold_envs(&own, own_count);
        comm_tree_pieces_put(&p, &own);
        comm_tree_restart(&steal, steal_begin, 4);
        fold_envs(&steal, 4);
        comm_tree_pieces_put(&p, &steal);
        double t0 = bench_now_us();
        rc = comm_tree_pieces_sum(c, &p, out, &err);
        if (i >= 300) sample[i - 300] = bench_now_us() - t0;
        if (rc == 0) rc = comm_barrier(c, &err); /* start the next round together */
    }
    if (rc != 0)
        comm_report_failure(c, err.msg);
    else if (r == 0)
        printf("local  P=2  work-shared sum of %d floats, 8 blocks in 4 pieces: median %.1f us, "
               "p90 %.1f us\n",
               N_FLOATS, bench_quantile(sample, ITERS, 0.5), bench_quantile(sample, ITERS, 0.9));
    free(sample);
    free(out);
    comm_tree_free(&steal);
    comm_tree_free(&own);
    return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    calf_error err;
    calf_error_clear(&err);
    if (comm_mpi_launched()) {
        comm *c = NULL;
        if (comm_mpi_init(&c, &argc, &argv, &err) != CALF_OK) {
            fprintf(stderr, "bench_comm: %s\n", err.msg);
            return 1;
        }
        int rc = bench_rank(c, NULL);
        comm_finalize(c);
        return rc;
    }
    comm *single = NULL;
    comm_single(&single);
    int rc = bench_rank(single, NULL);
    comm_finalize(single);
    int lrc = launcher_run(2, bench_rank, NULL, &err);
    if (lrc == 0) lrc = launcher_run(2, bench_shared_sum, NULL, &err);
    if (lrc != 0 && err.msg[0]) fprintf(stderr, "bench_comm: %s\n", err.msg);
    return rc || lrc;
}
