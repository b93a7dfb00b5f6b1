/* bench_comm.c: latency and bandwidth of the canonical-tree allreduce at the ppo_cartpole
 * gradient size (9,219 floats, 64 envs) on 2 local processes, plus barrier and comm_any
 * latency, the 1-process figure for comparison, and the work-shared sum the trainer runs
 * after every minibatch, with pieces as stealing leaves them. Runs in a few seconds.
 * Under mpirun (`mpirun -np P build/bench_comm`, envs split as the trainer splits them) it
 * measures the MPI backend instead, and prints what one exchange moves: every rank's
 * blocks of the tree, each a whole gradient (bench/README.md, "Two hosts").
 * `build/bench_comm --barriers P...` times bare barriers on P local processes each, for
 * more processes than cores, and `--ring P...` the machine's own cost of switching among
 * P processes, without calf: a byte passed around a ring of pipes (bench/README.md,
 * "Oversubscription"). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "calf/config.h"
#include "parallel/comm.h"
#include "parallel/pieces.h"
#include "parallel/tree_sum.h"
#include "parallel/workers.h"

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
    calf_error err;
    calf_error_clear(&err);
    int begin, count; /* the trainer's split: P need not divide the envs */
    if (calf_split(N_ENVS, P, r, &begin, &count, &err) != CALF_OK) {
        fprintf(stderr, "bench_comm: %s\n", err.msg);
        return 1;
    }
    comm_tree t;
    comm_tree_init(&t, N_FLOATS, N_ENVS, begin, count, NULL);
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
        /* Bytes each rank moves: its blob in, every blob out (one block per rank: exact
         * where P divides the envs into aligned blocks, low otherwise; see below). */
        double bytes = (double)N_FLOATS * sizeof(float) * (1 + P);
        printf("%-6s P=%d  allreduce of %d floats over %d envs: median %.1f us, p90 %.1f us",
               comm_backend_name(c), P, N_FLOATS, N_ENVS, med, p90);
        if (P > 1) printf(" (%.2f GB/s moved per rank)", bytes / med * 1e-3);
        printf("; fold %d envs + allreduce: median %.1f us\n", count, full);
        if (P > 1)
            printf("%-6s P=%d  barrier %.2f us, comm_any %.2f us (mean of %d back-to-back)\n",
                   comm_backend_name(c), P, bar, any, BARRIERS);
    }
    /* What one exchange moves: each rank's blob (its maximal aligned blocks of the tree,
     * each a whole gradient) goes to every rank in one allgatherv. */
    if (rc == 0 && P > 1 && c->ops->allgatherv) {
        fold_envs(&t, count);
        uint64_t mine[2] = {(uint64_t)t.depth, comm_tree_packed_bytes(&t)};
        uint64_t *all = malloc((size_t)P * sizeof mine);
        size_t *sizes = malloc((size_t)P * sizeof *sizes);
        for (int q = 0; q < P; q++) sizes[q] = sizeof mine;
        rc = c->ops->allgatherv(c, mine, all, sizes, &err);
        if (rc == 0) rc = comm_tree_allreduce(c, &t, out, &err);
        if (rc == 0 && r == 0) {
            uint64_t blocks = 0, bytes = 0;
            printf("%-6s P=%d  one exchange: blocks (bytes) per rank:", comm_backend_name(c), P);
            for (int q = 0; q < P; q++) {
                printf(" %llu (%llu)", (unsigned long long)all[2 * q],
                       (unsigned long long)all[2 * q + 1]);
                blocks += all[2 * q];
                bytes += all[2 * q + 1];
            }
            printf("; whole, every rank gathers all %llu blocks, %llu bytes, for a sum of %zu "
                   "bytes\n",
                   (unsigned long long)blocks, (unsigned long long)bytes,
                   (size_t)N_FLOATS * sizeof(float));
            /* in slices (comm_tree_allreduce's choice where ranks hold many blocks): rank
             * 0's slice of every block (a 56-byte header, 16 bytes per block), then the
             * other slices of the sum */
            size_t lo, hi;
            comm_slice_of(P, 0, N_FLOATS, &lo, &hi);
            unsigned long long sliced = 0;
            for (int q = 0; q < P; q++)
                sliced += 56 + all[2 * q] * (16 + (hi - lo) * sizeof(float));
            sliced += (unsigned long long)(N_FLOATS - (hi - lo)) * sizeof(float);
            printf("%-6s P=%d  in slices, rank 0 receives about %llu bytes in two collectives\n",
                   comm_backend_name(c), P, sliced);
        }
        free(sizes);
        free(all);
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
    comm_tree_init(&own, N_FLOATS, N_ENVS, own_begin, own_count, NULL);
    comm_tree_init(&steal, N_FLOATS, N_ENVS, 0, 0, NULL);
    float *out = malloc(N_FLOATS * sizeof *out);
    double *sample = malloc(ITERS * sizeof *sample);
    int rc = comm_tree_share_buffers(c, &own, 0, &err);
    for (int i = 0; i < 300 + ITERS && rc == 0; i++) {
        comm_tree_pieces p;
        if ((rc = comm_tree_pieces_open(c, &p, N_ENVS, N_FLOATS, &own, &err))) break;
        comm_tree_restart(&own, own_begin, own_count, NULL);
        fold_envs(&own, own_count);
        comm_tree_pieces_put(&p, &own);
        comm_tree_restart(&steal, steal_begin, 4, NULL);
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

/* Barriers alone on P processes: 20 to warm up, then enough to take about a second at
 * ~100 us per process and barrier (at least 20). Rank 0 prints. */
static int barrier_rank(comm *c, void *arg) {
    (void)arg;
    int P = comm_size(c), n = 10000 / P > 20 ? 10000 / P : 20;
    calf_error err;
    calf_error_clear(&err);
    for (int i = 0; i < 20; i++)
        if (comm_barrier(c, &err) != CALF_OK) goto fail;
    double t0 = bench_now();
    for (int i = 0; i < n; i++)
        if (comm_barrier(c, &err) != CALF_OK) goto fail;
    double dt = bench_now() - t0;
    if (comm_rank(c) == 0)
        printf("%5d processes: %9.1f us per barrier, %6.1f us per process (%d barriers)\n", P,
               1e6 * dt / n, 1e6 * dt / n / P, n);
    return 0;
fail:
    fprintf(stderr, "bench_comm: rank %d: %s\n", comm_rank(c), err.msg);
    return 1;
}

/* A process count in [lo, 4096], or 0 (said on stderr). */
static int process_count(const char *opt, const char *s, int lo) {
    char *end = NULL;
    long P = strtol(s, &end, 10);
    if (end == s || *end || P < lo || P > 4096) {
        fprintf(stderr, "bench_comm: %s expects process counts in [%d, 4096], got '%s'\n", opt,
                lo, s);
        return 0;
    }
    return (int)P;
}

static int bench_barriers(int argc, char **argv) {
    calf_error err;
    calf_error_clear(&err);
    for (int i = 0; i < argc; i++) {
        int P = process_count("--barriers", argv[i], 1);
        if (!P) return 2;
        fflush(stdout);
        int rc = workers_run(P, barrier_rank, NULL, &err);
        if (rc != 0) {
            if (err.msg[0]) fprintf(stderr, "bench_comm: %s\n", err.msg);
            return 1;
        }
    }
    return 0;
}

/* P processes pass one byte around a ring of pipes, LAPS times: every hop is a switch to
 * the next process, in the same cyclic order a barrier's wakeups run in. */
static int ring(int P) {
    enum { LAPS = 30 };
    int (*fd)[2] = calloc((size_t)P, sizeof *fd);
    if (!fd) return 1;
    for (int i = 0; i < P; i++)
        if (pipe(fd[i]) != 0) {
            perror("bench_comm: pipe");
            return 1;
        }
    fflush(stdout);
    for (int i = 1; i < P; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("bench_comm: fork");
            return 1;
        }
        if (pid == 0) {
            char b;
            for (int l = 0; l < LAPS; l++)
                if (read(fd[i][0], &b, 1) != 1 || write(fd[(i + 1) % P][1], &b, 1) != 1) _exit(1);
            _exit(0);
        }
    }
    char b = 'x';
    double t0 = bench_now();
    int rc = 0;
    for (int l = 0; l < LAPS && rc == 0; l++)
        if (write(fd[1 % P][1], &b, 1) != 1 || read(fd[0][0], &b, 1) != 1) rc = 1;
    double dt = bench_now() - t0;
    for (int i = 0; i < P; i++) {
        close(fd[i][0]);
        close(fd[i][1]);
    }
    while (wait(NULL) > 0) {}
    free(fd);
    if (rc == 0)
        printf("%5d processes: %6.1f us per hop around a ring of pipes (%d laps)\n", P,
               1e6 * dt / ((double)LAPS * P), LAPS);
    return rc;
}

int main(int argc, char **argv) {
    calf_error err;
    calf_error_clear(&err);
    if (argc > 1 && strcmp(argv[1], "--barriers") == 0) return bench_barriers(argc - 2, argv + 2);
    if (argc > 1 && strcmp(argv[1], "--ring") == 0) {
        for (int i = 2; i < argc; i++) {
            int P = process_count("--ring", argv[i], 2);
            if (!P) return 2;
            if (ring(P) != 0) return 1;
        }
        return 0;
    }
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
    comm_single(&single, NULL);
    int rc = bench_rank(single, NULL);
    comm_finalize(single);
    int lrc = workers_run(2, bench_rank, NULL, &err);
    if (lrc == 0) lrc = workers_run(2, bench_shared_sum, NULL, &err);
    if (lrc != 0 && err.msg[0]) fprintf(stderr, "bench_comm: %s\n", err.msg);
    return rc || lrc;
}
