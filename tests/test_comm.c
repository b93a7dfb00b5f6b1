/* test_comm.c: the comm object (parallel/comm.c) and its backends: slices, the single
 * backend, the local backend's collectives and shared heap across real forks, and how they
 * fail fast (a killed, vanished, late or aborting rank, a stop); MPI (if built) under mpirun. */
#include <errno.h>
#include <signal.h>

#include "parallel/comm.h"
#include "parallel/tree_sum.h"
#include "comm_test_util.h"
#include "test_util.h"

/* comm_slice: the ranks' slices tile [0, n) in rank order, start at whole runs of
 * COMM_SLICE_ELEMS, and differ by at most one run. */
static void test_slices(void) {
    int bad = 0, cases = 0;
    const size_t ns[] = {1, 5, 511, 512, 513, 1024, 9219, 100000};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int P = 1; P <= 8; P++) {
            size_t n = ns[i], at = 0, runs_min = SIZE_MAX, runs_max = 0;
            for (int r = 0; r < P; r++) {
                comm fake = {.rank = r, .size = P, .index = r};
                size_t lo, hi;
                comm_slice(&fake, n, &lo, &hi);
                bad += lo != at || hi < lo || hi > n || (lo < n && lo % COMM_SLICE_ELEMS != 0);
                size_t runs = (hi - lo + COMM_SLICE_ELEMS - 1) / COMM_SLICE_ELEMS;
                runs_min = runs < runs_min ? runs : runs_min;
                runs_max = runs > runs_max ? runs : runs_max;
                at = hi;
            }
            bad += at != n || runs_max - runs_min > 1;
            cases++;
        }
    CHECK_INT_EQ(cases, 64);
    CHECK_INT_EQ(bad, 0);
}

/* The single backend: rank -1, everything local, the same bits as the reference. */
static void test_single(void) {
    comm *c = NULL;
    calf_error err;
    calf_error_clear(&err);
    CHECK_INT_EQ(comm_single(&c, NULL), CALF_OK);
    CHECK_INT_EQ(comm_rank(c), -1);
    CHECK_INT_EQ(comm_size(c), 1);
    CHECK_STR_EQ(comm_backend_name(c), "single");

    const int E = 13;
    const size_t n = 301;
    float *leaves = malloc((size_t)E * n * sizeof *leaves), *ref = malloc(n * sizeof *ref);
    float *out = malloc(n * sizeof *out);
    for (int i = 0; i < E; i++) fill_leaf(leaves + (size_t)i * n, n, 5, i);
    ref_sum(leaves, E, n, ref);
    comm_tree t;
    comm_tree_init(&t, n, E, 0, E, NULL);
    for (int iter = 0; iter < 3; iter++) { /* the tree is reused across iterations */
        for (int i = 0; i < E; i++) {
            memcpy(comm_tree_leaf(&t), leaves + (size_t)i * n, n * sizeof(float));
            comm_tree_push(&t);
        }
        memset(out, 0xff, n * sizeof *out);
        CHECK_INT_EQ(comm_tree_allreduce(c, &t, out, &err), CALF_OK);
        CHECK(memcmp(out, ref, n * sizeof *out) == 0);
    }
    comm_tree_free(&t);

    double per_env[3][2] = {{1e16, 1}, {-1e16, 2}, {1, 3}}, sum[2];
    CHECK_INT_EQ(comm_tree_sum_f64(c, 3, 0, 3, &per_env[0][0], 2, sum, &err), CALF_OK);
    CHECK(sum[0] == 1.0 && sum[1] == 6.0); /* (1e16 + -1e16) + 1 */

    int recs[4] = {10, 11, 12, 13}, all[4] = {0};
    CHECK_INT_EQ(comm_gather_records(c, recs, sizeof(int), 4, 4, all, &err), CALF_OK);
    CHECK(memcmp(recs, all, sizeof recs) == 0);
    CHECK_INT_EQ(comm_gather_records(c, recs, sizeof(int), 4, 5, all, &err), CALF_ECOMM);
    int any = -1;
    CHECK_INT_EQ(comm_any(c, 7, &any, &err), CALF_OK);
    CHECK_INT_EQ(any, 1);
    CHECK_INT_EQ(comm_any(c, 0, &any, &err), CALF_OK);
    CHECK_INT_EQ(any, 0);
    CHECK_INT_EQ(comm_check_equal(c, "abc", 3, &err), CALF_OK);
    CHECK_INT_EQ(comm_barrier(c, &err), CALF_OK);
    char buf[4] = "xyz";
    CHECK_INT_EQ(comm_broadcast(c, buf, 4, 0, &err), CALF_OK);
    CHECK_STR_EQ(buf, "xyz");
    comm_finalize(c);
    comm_finalize(NULL);
    free(out);
    free(ref);
    free(leaves);
}

typedef struct parity_arg {
    int E;
    size_t n;
    int iters;
} parity_arg;

/* Every collective, checked against what one process computes. */
static int rank_parity(comm *c, report *rep, const void *argp) {
    const parity_arg *a = argp;
    int r = comm_rank(c), P = comm_size(c), begin, count;
    calf_error err;
    calf_error_clear(&err);
    even_split(a->E, P, r, &begin, &count);
    float *leaves = malloc((size_t)a->E * a->n * sizeof *leaves);
    float *ref = malloc(a->n * sizeof *ref), *out = malloc(a->n * sizeof *out);
    comm_tree t;
    comm_tree_init(&t, a->n, a->E, begin, count, NULL);
    for (int it = 0; it < a->iters; it++) {
        for (int i = 0; i < a->E; i++) fill_leaf(leaves + (size_t)i * a->n, a->n, 77 + (uint64_t)it, i);
        ref_sum(leaves, a->E, a->n, ref);
        for (int i = begin; i < begin + count; i++) {
            memcpy(comm_tree_leaf(&t), leaves + (size_t)i * a->n, a->n * sizeof(float));
            comm_tree_push(&t);
        }
        CHECK_INT_EQ(comm_tree_allreduce(c, &t, out, &err), CALF_OK);
        CHECK(memcmp(out, ref, a->n * sizeof *out) == 0);
    }
    comm_tree_free(&t);

    /* Statistics in double. */
    double *pe = malloc((size_t)a->E * 3 * sizeof *pe), dref[3], dout[3];
    for (int i = 0; i < a->E; i++) fill_leaf_f64(pe + (size_t)i * 3, 3, 5, i);
    ref_node_f64(pe, a->E, 3, ceil_log2_int(a->E), 0, dref);
    CHECK_INT_EQ(comm_tree_sum_f64(c, a->E, begin, count, pe + (size_t)begin * 3, 3, dout, &err),
                 CALF_OK);
    CHECK(memcmp(dout, dref, sizeof dref) == 0);
    free(pe);

    /* Gather: records land in global env order on rank 0 only. */
    int64_t *mine = malloc((size_t)(count ? count : 1) * 2 * sizeof *mine);
    for (int i = 0; i < count; i++) {
        mine[2 * i] = begin + i;
        mine[2 * i + 1] = r;
    }
    int64_t *all = r == 0 ? malloc((size_t)a->E * 2 * sizeof *all) : NULL;
    CHECK_INT_EQ(comm_gather_records(c, mine, 2 * sizeof(int64_t), count, a->E, all, &err),
                 CALF_OK);
    if (r == 0) {
        for (int i = 0; i < a->E; i++) {
            int owner, b, cn;
            for (owner = 0; owner < P; owner++) {
                even_split(a->E, P, owner, &b, &cn);
                if (i >= b && i < b + cn) break;
            }
            CHECK_INT_EQ(all[2 * i], i);
            CHECK_INT_EQ(all[2 * i + 1], owner);
        }
    }
    /* Counts that do not add up fail on every rank, and nobody hangs. */
    CHECK_INT_EQ(comm_gather_records(c, mine, 2 * sizeof(int64_t), count, a->E + 1, all, &err),
                 CALF_ECOMM);
    free(all);
    free(mine);

    /* The last rank's records are wider than the others' (a Python env's slot sized from
     * that rank's own pickle): every rank fails, naming the sizes, before any record
     * moves, and rank 0's buffer, sized by its own records, is not written past. */
    size_t wide = r == P - 1 ? 3 * sizeof(int64_t) : 2 * sizeof(int64_t);
    int64_t *recs = calloc((size_t)(count ? count : 1) * 3, sizeof *recs);
    int64_t *room = r == 0 ? malloc(((size_t)a->E * 2 + 1) * sizeof *room) : NULL;
    if (room) room[a->E * 2] = 0x5afe;
    CHECK_INT_EQ(comm_gather_records(c, recs, wide, count, a->E, room, &err), CALF_ECOMM);
    char want_msg[128];
    snprintf(want_msg, sizeof want_msg, "ranks disagree on the record size: rank 0 has 16, "
             "rank %d has 24", P - 1);
    CHECK(strstr(err.msg, want_msg) != NULL);
    if (room) CHECK_INT_EQ(room[a->E * 2], 0x5afe);
    free(room);
    free(recs);
    /* Sizes ranks must agree on: the first that differs is named, with each value. */
    const char *const names[] = {"the observation size", "the time limit"};
    int64_t vals[2] = {4, r == P - 1 ? 500 : 200};
    int which = -2;
    CHECK_INT_EQ(comm_check_agree(c, vals, names, 2, &which, &err), CALF_ECOMM);
    CHECK_INT_EQ(which, 1);
    snprintf(want_msg, sizeof want_msg, "ranks disagree on the time limit: rank 0 has 200, "
             "rank %d has 500", P - 1);
    CHECK_STR_EQ(err.msg, want_msg);
    vals[1] = 200;
    CHECK_INT_EQ(comm_check_agree(c, vals, names, 2, &which, &err), CALF_OK);
    CHECK_INT_EQ(which, -1);

    /* Broadcast from the last rank. */
    char buf[32];
    snprintf(buf, sizeof buf, "from rank %d", r);
    CHECK_INT_EQ(comm_broadcast(c, buf, sizeof buf, P - 1, &err), CALF_OK);
    char want[32];
    snprintf(want, sizeof want, "from rank %d", P - 1);
    CHECK_STR_EQ(buf, want);

    /* OR over ranks. */
    int any = -1;
    CHECK_INT_EQ(comm_any(c, r == P - 1, &any, &err), CALF_OK);
    CHECK_INT_EQ(any, 1);
    CHECK_INT_EQ(comm_any(c, 0, &any, &err), CALF_OK);
    CHECK_INT_EQ(any, 0);

    /* Digests: equal passes; rank 1 differing fails on every rank, naming rank 1. */
    uint64_t digest = 0x1234;
    CHECK_INT_EQ(comm_check_equal(c, &digest, sizeof digest, &err), CALF_OK);
    if (P > 1) {
        if (r == 1) digest ^= 1;
        CHECK_INT_EQ(comm_check_equal(c, &digest, sizeof digest, &err), CALF_ECOMM);
        CHECK(strstr(err.msg, "rank 1 differs from rank 0") != NULL);
        snprintf(rep->msg[r], sizeof rep->msg[r], "%s", err.msg);
    }
    CHECK_INT_EQ(comm_barrier(c, &err), CALF_OK);
    free(out);
    free(ref);
    free(leaves);
    return 0;
}

static void test_local_parity(void) {
    report *rep = report_map();
    for (int P = 2; P <= 4; P++) {
        parity_arg a = {.E = 37, .n = 1001, .iters = 3};
        int st[8];
        memset(rep, 0, sizeof *rep);
        run_ranks(P, 0, 10.0, rank_parity, rep, &a, st);
        for (int r = 0; r < P; r++) CHECK_INT_EQ(st[r], 0);
        printf("local P=%d: %s\n", P, rep->msg[0]);
    }
    /* A large vector (two 4 MB blocks) goes through the default arena: no small limit. */
    parity_arg big = {.E = 4, .n = 1000000, .iters = 1};
    int st[8];
    run_ranks(2, 0, 30.0, rank_parity, rep, &big, st);
    CHECK_INT_EQ(st[0], 0);
    CHECK_INT_EQ(st[1], 0);
    munmap(rep, sizeof *rep);
}

/* Shared memory is carved in rank order from a heap as large as an arena; what is left
 * is the same on every rank (the trainer decides on work sharing by it), and asking for
 * more than that fails on every rank alike, saying so, instead of hanging. */
static int rank_heap(comm *c, report *rep, const void *arg) {
    (void)arg;
    calf_error err;
    calf_error_clear(&err);
    int r = comm_rank(c);
    size_t left0 = comm_shared_left(c);
    CHECK_INT_EQ((long long)left0, 1 << 20);
    void *peers[8];
    CHECK_INT_EQ(comm_shared_alloc(c, r == 0 ? 100000 : 1000, peers, &err), CALF_OK);
    CHECK_INT_EQ((long long)comm_shared_left(c), (long long)(left0 - 100032 - 1024));
    CHECK(peers[1] == (unsigned char *)peers[0] + 100032);
    /* zeroed, and every rank sees the others' writes after a collective */
    CHECK(((unsigned char *)peers[r])[r == 0 ? 99999 : 999] == 0);
    ((unsigned char *)peers[r])[0] = (unsigned char)(10 + r);
    CHECK_INT_EQ(comm_barrier(c, &err), CALF_OK);
    CHECK_INT_EQ(((unsigned char *)peers[1 - r])[0], 10 + (1 - r));
    rep->rc[r] = comm_shared_alloc(c, 1 << 20, peers, &err);
    snprintf(rep->msg[r], sizeof rep->msg[r], "%s", err.msg);
    CHECK_INT_EQ(comm_barrier(c, &err), CALF_OK); /* still usable */
    return 0;
}

static void test_shared_heap(void) {
    check_every_rank_fails(2, 1 << 20, rank_heap, CALF_ENOMEM, "shared memory", "shared heap");
}

/* A payload beyond a (deliberately small) arena fails clearly on every rank. */
static int rank_too_big(comm *c, report *rep, const void *arg) {
    (void)arg;
    calf_error err;
    calf_error_clear(&err);
    int begin, count;
    even_split(4, comm_size(c), comm_rank(c), &begin, &count);
    comm_tree t;
    comm_tree_init(&t, 10000, 4, begin, count, NULL);
    for (int i = 0; i < count; i++) {
        comm_tree_leaf(&t);
        comm_tree_push(&t);
    }
    float *out = malloc(10000 * sizeof *out);
    rep->rc[comm_rank(c)] = comm_tree_allreduce(c, &t, out, &err);
    snprintf(rep->msg[comm_rank(c)], sizeof rep->msg[0], "%s", err.msg);
    /* The job is still usable for small collectives afterwards. */
    CHECK_INT_EQ(comm_barrier(c, &err), CALF_OK);
    free(out);
    comm_tree_free(&t);
    return 0;
}

/* Rank 2 is SIGKILLed while the others wait in a barrier. */
static int rank_killed_peer(comm *c, report *rep, const void *arg) {
    (void)arg;
    calf_error err;
    calf_error_clear(&err);
    int r = comm_rank(c);
    CHECK_INT_EQ(comm_barrier(c, &err), CALF_OK);
    if (r == 2) raise(SIGKILL);
    double t0 = now_s();
    rep->rc[r] = comm_barrier(c, &err);
    rep->elapsed[r] = now_s() - t0;
    snprintf(rep->msg[r], sizeof rep->msg[r], "%s", err.msg);
    return 0;
}

/* Rank 1 leaves (exit 0) without joining the collective rank 0 waits in. */
static int rank_vanished(comm *c, report *rep, const void *arg) {
    (void)arg;
    calf_error err;
    calf_error_clear(&err);
    int r = comm_rank(c);
    if (r == 1) return 0;
    double t0 = now_s();
    rep->rc[r] = comm_barrier(c, &err);
    rep->elapsed[r] = now_s() - t0;
    snprintf(rep->msg[r], sizeof rep->msg[r], "%s", err.msg);
    return 0;
}

/* Rank 1 is late by more than the timeout: it arrives only once rank 0 has timed out
 * (an event, so however slow the machine, rank 0 cannot see it in time). */
static int rank_timeout(comm *c, report *rep, const void *arg) {
    (void)arg;
    calf_error err;
    calf_error_clear(&err);
    int r = comm_rank(c);
    if (r == 1) {
        await_done(rep, 0);
        /* what follows is not the timeout under test: wait as long as it takes */
        comm_set_timeout(c, 60.0);
    }
    double t0 = now_s();
    rep->rc[r] = comm_barrier(c, &err);
    rep->elapsed[r] = now_s() - t0;
    snprintf(rep->msg[r], sizeof rep->msg[r], "%s", err.msg);
    atomic_store(&rep->done[r], 1);
    if (r == 1) {
        /* Rank 0 had arrived before timing out, so this one completes; rank 0 then exits,
         * and the next collective must not wait for it. */
        CHECK_INT_EQ(rep->rc[r], CALF_OK);
        rep->rc[r] = comm_barrier(c, &err);
        snprintf(rep->msg[r], sizeof rep->msg[r], "%s", err.msg);
    }
    return 0;
}

/* Rank 1 aborts the job; the others learn why. */
static int rank_abort(comm *c, report *rep, const void *arg) {
    (void)arg;
    calf_error err;
    calf_error_clear(&err);
    int r = comm_rank(c);
    if (r == 1) comm_abort(c, "parameter digest mismatch at iteration 7");
    double t0 = now_s();
    rep->rc[r] = comm_barrier(c, &err);
    rep->elapsed[r] = now_s() - t0;
    snprintf(rep->msg[r], sizeof rep->msg[r], "%s", err.msg);
    return 0;
}

/* Rank 1 stands for the launcher after Ctrl-C: it sets the deadline (0.3 s) and never
 * arrives (it stays until the others are done, so that none sees it leave). Rank 0's
 * wait fails with CALF_EINTR at the deadline, not at the 60 s timeout; rank 2, which
 * arrives only after that, fails at once; and once a wait has failed, the next
 * collective fails without waiting. */
static int rank_stopped(comm *c, report *rep, const void *arg) {
    (void)arg;
    calf_error err;
    calf_error_clear(&err);
    int r = comm_rank(c);
    CHECK_INT_EQ(comm_barrier(c, &err), CALF_OK);
    if (r == 1) {
        rep->at[1] = now_s();
        comm_local_stop_after(c->impl, 0.3);
        await_done(rep, 0);
        await_done(rep, 2);
        return 0;
    }
    if (r == 2) await_done(rep, 0); /* the deadline has passed */
    double t0 = now_s();
    rep->rc[r] = comm_barrier(c, &err);
    rep->at[r] = now_s();
    rep->elapsed[r] = rep->at[r] - t0;
    snprintf(rep->msg[r], sizeof rep->msg[r], "%s", err.msg);
    atomic_store(&rep->done[r], 1);
    calf_error_clear(&err);
    CHECK_INT_EQ(comm_barrier(c, &err), CALF_ECOMM);
    CHECK(strstr(err.msg, "an earlier one failed") != NULL);
    return 0;
}

static void test_local_stop(void) {
    report *rep = report_map();
    memset(rep, 0, sizeof *rep);
    int st[8];
    run_ranks(3, 0, 60.0, rank_stopped, rep, NULL, st);
    for (int r = 0; r < 3; r++) CHECK_INT_EQ(st[r], 0);
    for (int r = 0; r < 3; r += 2) {
        CHECK_INT_EQ(rep->rc[r], CALF_EINTR);
        CHECK(strstr(rep->msg[r], "the job was interrupted") != NULL);
    }
    /* Rank 0 stopped waiting at the deadline: not before it (CLOCK_MONOTONIC is one clock
     * for all processes), and not at the 60 s timeout however loaded the machine. Rank 2
     * came after the deadline and did not wait for the timeout either. */
    CHECK(rep->at[0] - rep->at[1] >= 0.3 - 1e-6 && rep->at[0] - rep->at[1] < 30.0);
    CHECK(rep->elapsed[2] < 30.0);
    printf("stop: %s (after %.3f s)\n", rep->msg[0], rep->elapsed[0]);
    munmap(rep, sizeof *rep);
}

static void test_local_failures(void) {
    report *rep = report_map();
    int st[8];

    check_every_rank_fails(2, 65536, rank_too_big, CALF_ENOMEM, "bytes of shared memory",
                           "arena limit");

    memset(rep, 0, sizeof *rep);
    run_ranks(3, 0, 60.0, rank_killed_peer, rep, NULL, st);
    CHECK(WIFSIGNALED(st[2]) && WTERMSIG(st[2]) == SIGKILL);
    for (int r = 0; r < 2; r++) {
        CHECK_INT_EQ(st[r], 0);
        CHECK_INT_EQ(rep->rc[r], CALF_ECOMM);
        CHECK(strstr(rep->msg[r], "rank 2 failed (killed by signal 9)") != NULL);
        CHECK(rep->elapsed[r] < 30.0); /* not the 60 s timeout, on any machine */
    }
    printf("killed peer: %s (after %.3f s)\n", rep->msg[0], rep->elapsed[0]);

    memset(rep, 0, sizeof *rep);
    run_ranks(2, 0, 60.0, rank_vanished, rep, NULL, st);
    CHECK_INT_EQ(st[0], 0);
    CHECK_INT_EQ(st[1], 0);
    CHECK_INT_EQ(rep->rc[0], CALF_ECOMM);
    CHECK(strstr(rep->msg[0], "rank 1 vanished (exit status 0)") != NULL);
    CHECK(rep->elapsed[0] < 30.0);
    printf("vanished peer: %s\n", rep->msg[0]);

    memset(rep, 0, sizeof *rep);
    run_ranks(2, 0, 0.3, rank_timeout, rep, NULL, st);
    CHECK_INT_EQ(st[0], 0);
    CHECK_INT_EQ(st[1], 0);
    CHECK_INT_EQ(rep->rc[0], CALF_ECOMM);
    CHECK(strstr(rep->msg[0], "timed out after 0.3 s on rank 0 waiting for rank 1") != NULL);
    /* never before the 0.3 s (a clock reading, not a machine's speed), and far below the
     * default 600 s however loaded the machine */
    CHECK(rep->elapsed[0] >= 0.29 && rep->elapsed[0] < 60.0);
    /* The late rank then finds rank 0 gone instead of waiting for it. */
    CHECK_INT_EQ(rep->rc[1], CALF_ECOMM);
    CHECK(strstr(rep->msg[1], "rank 0 vanished") != NULL);
    printf("timeout: %s (after %.3f s)\n", rep->msg[0], rep->elapsed[0]);

    memset(rep, 0, sizeof *rep);
    comm_local_shared *probe = NULL;
    calf_error err;
    CHECK_INT_EQ(comm_local_create(&probe, 3, 0, &err), CALF_OK);
    /* The default reservation is large (address space only), not a small fixed buffer. */
    CHECK(comm_local_arena_bytes(probe) >= ((size_t)256 << 20));
    comm_local_destroy(probe);
    run_ranks(3, 0, 60.0, rank_abort, rep, NULL, st);
    CHECK(WIFEXITED(st[1]) && WEXITSTATUS(st[1]) == 1);
    for (int r = 0; r < 3; r += 2) {
        CHECK_INT_EQ(st[r], 0);
        CHECK_INT_EQ(rep->rc[r], CALF_ECOMM);
        CHECK(strstr(rep->msg[r], "rank 1 failed (aborted: parameter digest mismatch") != NULL);
        CHECK(rep->elapsed[r] < 30.0);
    }
    printf("abort: %s\n", rep->msg[0]);
    munmap(rep, sizeof *rep);
}

/* ---- MPI ------------------------------------------------------------------------------ */

static void test_mpi_detection(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID",
                                 "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS"};
    char *saved[6];
    for (int i = 0; i < 6; i++) {
        const char *v = getenv(vars[i]);
        saved[i] = v ? strdup(v) : NULL;
        unsetenv(vars[i]);
    }
    CHECK(!comm_mpi_launched());
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    CHECK(comm_mpi_launched());
    unsetenv("OMPI_COMM_WORLD_SIZE");
    setenv("PMI_SIZE", "4", 1);
    CHECK(comm_mpi_launched());
    unsetenv("PMI_SIZE");
    setenv("PMIX_RANK", "0", 1);
    CHECK(comm_mpi_launched());
    unsetenv("PMIX_RANK");
    setenv("SLURM_PROCID", "0", 1);
    setenv("SLURM_NTASKS", "2", 1); /* a batch script of --ntasks=2: one process, no step */
    CHECK(!comm_mpi_launched());
    setenv("SLURM_STEP_NUM_TASKS", "1", 1); /* a one-task step is not a distributed job */
    CHECK(!comm_mpi_launched());
    setenv("SLURM_STEP_NUM_TASKS", "2", 1);
    CHECK(comm_mpi_launched());
    setenv("SLURM_STEP_NUM_TASKS", "x", 1);
    CHECK(!comm_mpi_launched());
    for (int i = 0; i < 6; i++) {
        if (saved[i]) setenv(vars[i], saved[i], 1);
        else unsetenv(vars[i]);
        free(saved[i]);
    }
#if !CALF_HAVE_MPI
    comm *c = (comm *)1;
    calf_error err;
    CHECK_INT_EQ(comm_mpi_init(&c, NULL, NULL, &err), CALF_EINVAL);
    CHECK(c == NULL);
    CHECK(strstr(err.msg, "without MPI") != NULL);
#endif
}

#if CALF_HAVE_MPI
/* Runs under mpirun: the same collectives and bits as the local backend. */
static int mpi_child(int *argc, char ***argv) {
    comm *c = NULL;
    calf_error err;
    calf_error_clear(&err);
    if (comm_mpi_init(&c, argc, argv, &err) != CALF_OK) {
        fprintf(stderr, "mpi child: %s\n", err.msg);
        return 2;
    }
    CHECK_STR_EQ(comm_backend_name(c), "mpi");
    CHECK(comm_mpi_launched());
    CHECK(comm_size(c) >= 2);
    report *rep = calloc(1, sizeof *rep);
    parity_arg a = {.E = 37, .n = 1001, .iters = 3};
    rank_parity(c, rep, &a);
    free(rep);
    int failed = test_failures != 0;
    if (failed) comm_report_failure(c, "MPI parity checks failed");
    comm_finalize(c); /* MPI_Abort after a reported failure */
    return failed;
}

/* Runs under mpirun: rank 1 aborts while the others wait in a barrier, which must end
 * the whole job (exit non-zero) rather than leave them waiting. */
static int mpi_child_abort(int *argc, char ***argv) {
    comm *c = NULL;
    calf_error err;
    if (comm_mpi_init(&c, argc, argv, &err) != CALF_OK) return 2;
    if (comm_rank(c) == 1) comm_abort(c, "test abort from rank 1");
    comm_barrier(c, &err);
    comm_finalize(c);
    return 0;
}

/* `mpirun -np 3 <this test> mode` with a hard deadline; returns the wait status. */
static int run_mpirun(const char *mode, double *elapsed) {
    char self[4096];
    *elapsed = 0;
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(len > 0);
    if (len <= 0) return -1;
    self[len] = '\0';
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid < 0) return -1;
    if (pid == 0) {
        setpgid(0, 0); /* so a hung job can be killed as a group */
        /* Open MPI's own allocations outlive MPI_Finalize; under the sanitizer build, leak
         * reports about them would fail the ranks. Memory errors are still caught. */
        const char *asan = getenv("ASAN_OPTIONS");
        char opts[1024];
        snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", asan ? asan : "", asan ? ":" : "");
        setenv("ASAN_OPTIONS", opts, 1);
        if (geteuid() == 0)
            execlp("mpirun", "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "3", self,
                   mode, (char *)NULL);
        else
            execlp("mpirun", "mpirun", "--oversubscribe", "-np", "3", self, mode, (char *)NULL);
        fprintf(stderr, "test_comm: cannot run mpirun: %s\n", strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    double t0 = now_s();
    int st = 0;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) break;
        if (now_s() - t0 > 60.0) {
            fprintf(stderr, "test_comm: mpirun hung; killing it\n");
            kill(-pid, SIGKILL);
            waitpid(pid, &st, 0);
            st = -1;
            break;
        }
        struct timespec nap = {0, 10000000};
        nanosleep(&nap, NULL);
    }
    *elapsed = now_s() - t0;
    return st;
}

static void test_mpi_backend(void) {
    if (getenv("CALF_TEST_SKIP_MPI")) {
        printf("MPI backend test skipped (CALF_TEST_SKIP_MPI)\n");
        return;
    }
    double el;
    int st = run_mpirun("--mpi-child", &el);
    printf("MPI backend (mpirun -np 3): status %d in %.2f s\n", st, el);
    CHECK_INT_EQ(st, 0);
    st = run_mpirun("--mpi-child-abort", &el);
    printf("MPI abort (mpirun -np 3): status %d in %.2f s\n", st, el);
    CHECK(st != 0 && st != -1);
    CHECK(el < 30.0);
}
#endif

int main(int argc, char **argv) {
#if CALF_HAVE_MPI
    if (argc > 1 && strcmp(argv[1], "--mpi-child") == 0) return mpi_child(&argc, &argv);
    if (argc > 1 && strcmp(argv[1], "--mpi-child-abort") == 0)
        return mpi_child_abort(&argc, &argv);
#else
    (void)argc, (void)argv;
#endif
    test_mpi_detection();
    test_slices();
    test_single();
    test_local_parity();
    test_shared_heap();
    test_local_failures();
    test_local_stop();
#if CALF_HAVE_MPI
    test_mpi_backend();
#endif
    return test_report("test_comm");
}
