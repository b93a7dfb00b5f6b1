/* test_pieces.c: the work-shared tree sum (parallel/pieces.c) across real forked ranks:
 * whoever folds which piece (claimed, taken from a slow rank, copied or lent by reference),
 * the sum has the one-process bits; a piece never put fails on every rank; the backends
 * that share no memory offer no piece sums. */
#include "parallel/claim.h"
#include "parallel/comm.h"
#include "parallel/pieces.h"
#include "parallel/tree_sum.h"
#include "comm_test_util.h"
#include "test_util.h"

typedef struct share_arg {
    int E;
    size_t n;
    int rounds;
    int slow_rank;    /* sleeps before each of its own envs, so that others take some */
    bool by_reference; /* own blocks in shared buffers (comm_tree_share_buffers), and the
                          first LENT_SETS pieces taken in a round in its spare sets */
} share_arg;

enum { LENT_SETS = 2 };

/* Elements k % 3 == 1 are padding, as between a model's layers: zero in every leaf, and
 * never written, since comm_tree_leaf_raw hands out a buffer whose padding is zero. The
 * period 3 is not a divisor of a cache line's 16 floats, so a merge that lands at the
 * wrong position leaves data where padding must be. */
static bool is_padding(size_t k) { return k % 3 == 1; }

static void put_leaf(comm_tree *t, const float *leaf, size_t n) {
    float *dst = comm_tree_leaf_raw(t);
    for (size_t k = 0; k < n; k++)
        if (!is_padding(k)) dst[k] = leaf[k];
    comm_tree_push(t);
}

/* Fold envs [first, first+k) of the global leaves into t as the piece starting there. */
static void fold_piece(comm_tree *t, const float *leaves, size_t n, int first, int k) {
    comm_tree_restart(t, first, k, NULL);
    for (int i = first; i < first + k; i++) put_leaf(t, leaves + (size_t)i * n, n);
}

/* Each round: every rank claims its own envs a few at a time, then takes what is left of
 * others; the piece sum must equal the one-process tree to the bit, whoever did what. */
static int rank_share(comm *c, report *rep, const void *argp) {
    const share_arg *a = argp;
    int r = comm_rank(c), P = comm_size(c), begin, count;
    calf_error err;
    calf_error_clear(&err);
    even_split(a->E, P, r, &begin, &count);
    void *peers[8];
    CHECK_INT_EQ(comm_shared_alloc(c, sizeof(comm_claim), peers, &err), CALF_OK);
    comm_claim *words[8];
    for (int q = 0; q < P; q++) words[q] = peers[q];
    float *leaves = malloc((size_t)a->E * a->n * sizeof *leaves);
    float *ref = malloc(a->n * sizeof *ref), *out = malloc(a->n * sizeof *out);
    comm_tree own, other, lent[LENT_SETS];
    comm_tree_init(&own, a->n, a->E, begin, count, NULL);
    comm_tree_init(&other, a->n, a->E, 0, 0, NULL);
    for (int s = 0; s < LENT_SETS; s++) comm_tree_init(&lent[s], a->n, a->E, 0, 0, NULL);
    if (a->by_reference) {
        CHECK_INT_EQ(comm_tree_share_buffers(c, &own, LENT_SETS, &err), CALF_OK);
        for (int s = 0; s < LENT_SETS; s++) comm_tree_share_set(&lent[s], &own, s + 1, NULL);
    }
    int taken = 0, mismatches = 0, copied = 0, by_ref = 0;
    CHECK(comm_tree_pieces_supported(c, a->E, a->n));
    for (int round = 1; round <= a->rounds; round++) {
        for (int i = 0; i < a->E; i++) {
            fill_leaf(leaves + (size_t)i * a->n, a->n, 300 + (uint64_t)round, i);
            for (size_t k = 0; k < a->n; k++)
                if (is_padding(k)) leaves[(size_t)i * a->n + k] = 0.0f;
        }
        ref_sum(leaves, a->E, a->n, ref);
        comm_tree_pieces pc;
        CHECK_INT_EQ(comm_tree_pieces_open(c, &pc, a->E, a->n, a->by_reference ? &own : NULL, &err),
                     CALF_OK);
        comm_claim_open(words[r], (uint32_t)round, count);
        comm_tree_restart(&own, begin, count, NULL);
        /* An event, not a delay, makes sure sharing happens: in the first round the slow
         * rank starts on its envs only once another rank has taken some (the back half,
         * at least one, and every env of it a piece when by reference). */
        if (r == a->slow_rank && round == 1 && count > 1)
            while (!atomic_load(&rep->taken)) nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
        int first, k, victim, steals = 0;
        while ((k = comm_claim_front(words[r], (uint32_t)round, 2, &first)) > 0)
            for (int i = begin + first; i < begin + first + k; i++) {
                if (r == a->slow_rank) {
                    struct timespec nap = {0, 3 * 1000 * 1000};
                    nanosleep(&nap, NULL);
                }
                put_leaf(&own, leaves + (size_t)i * a->n, a->n);
            }
        comm_tree_pieces_put(&pc, &own);
        /* A rank only takes from words opened for this round (the owner's data is ready
         * then); comm_claim_take waits for a rank that has not opened it yet. */
        while ((k = comm_claim_take(words, P, r, P - 1, (uint32_t)round, 60.0, &victim,
                                    &first)) > 0) {
            int vb, vc;
            even_split(a->E, P, victim, &vb, &vc);
            /* By reference, every env taken is a piece of its own, so that a round has
             * more pieces than spare sets (the first take is about half the slow rank's
             * envs) and both ways of publishing run. */
            for (int j = 0, step = a->by_reference ? 1 : k; j < k; j += step) {
                comm_tree *t = a->by_reference && steals < LENT_SETS ? &lent[steals] : &other;
                copied += t == &other;
                by_ref += t != &other;
                steals++;
                fold_piece(t, leaves, a->n, vb + first + j, step);
                comm_tree_pieces_put(&pc, t);
            }
            taken += k;
            if (victim == a->slow_rank) atomic_fetch_add(&rep->taken, k);
        }
        if (a->by_reference && round % 2 == 1) {
            /* split and left in place: this rank's slice first, the rest after a barrier */
            float *sum;
            size_t lo, hi;
            CHECK_INT_EQ(comm_tree_pieces_fold(c, &pc, &sum, &err), CALF_OK);
            comm_slice(c, a->n, &lo, &hi);
            mismatches += memcmp(sum + lo, ref + lo, (hi - lo) * sizeof *out) != 0;
            CHECK_INT_EQ(comm_barrier(c, &err), CALF_OK);
            mismatches += memcmp(sum, ref, a->n * sizeof *out) != 0;
            CHECK_INT_EQ(comm_barrier(c, &err), CALF_OK); /* all read it: the next may write */
        } else {
            memset(out, 0xff, a->n * sizeof *out);
            CHECK_INT_EQ(comm_tree_pieces_sum(c, &pc, out, &err), CALF_OK);
            mismatches += memcmp(out, ref, a->n * sizeof *out) != 0;
        }
        /* Other collectives in between reuse the arenas. */
        if (round % 2 == 0) CHECK_INT_EQ(comm_barrier(c, &err), CALF_OK);
    }
    CHECK_INT_EQ(mismatches, 0);
    rep->rc[r] = taken;
    rep->lent[r] = by_ref;
    rep->copied[r] = copied;
    comm_tree_free(&own);
    comm_tree_free(&other);
    for (int s = 0; s < LENT_SETS; s++) comm_tree_free(&lent[s]);
    free(out);
    free(ref);
    free(leaves);
    return 0;
}

static void test_local_sharing(void) {
    report *rep = report_map();
    const share_arg cases[] = {
        {.E = 37, .n = 1001, .rounds = 6, .slow_rank = 1},
        {.E = 64, .n = 513, .rounds = 4, .slow_rank = 0},
        {.E = 3, .n = 77, .rounds = 5, .slow_rank = 2}, /* fewer envs than ranks */
        {.E = 37, .n = 1001, .rounds = 7, .slow_rank = 0, .by_reference = true},
        {.E = 65, .n = 300, .rounds = 6, .slow_rank = 2, .by_reference = true},
        /* slices of 1536 and 1464 floats: the second starts above 0, the fold works
         * on several chunks of both, the last one partial */
        {.E = 20, .n = 3000, .rounds = 6, .slow_rank = 1, .by_reference = true},
        /* one run of COMM_SLICE_ELEMS: the completion's slices of three ranks are empty */
        {.E = 9, .n = 5, .rounds = 5, .slow_rank = 1, .by_reference = true},
    };
    const int procs[] = {2, 3, 4, 2, 3, 2, 4};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        int P = procs[ci], st[8];
        memset(rep, 0, sizeof *rep);
        run_ranks(P, 0, 60.0, rank_share, rep, &cases[ci], st);
        int by_others = 0, copied = 0, lent = 0;
        for (int r = 0; r < P; r++) {
            CHECK_INT_EQ(st[r], 0);
            if (r != cases[ci].slow_rank) by_others += rep->rc[r];
            copied += rep->copied[r];
            lent += rep->lent[r];
        }
        /* The slow rank waited for the others to take some of its envs (and then sleeps
         * 3 ms per env, so that they take more). */
        int sb, sc;
        even_split(cases[ci].E, P, cases[ci].slow_rank, &sb, &sc);
        if (sc > 1) CHECK(by_others > 0);
        /* Pieces taken go by reference while a round has spare sets left, then are copied. */
        if (sc > 2 && cases[ci].by_reference) CHECK(lent > 0 && copied > 0);
        printf("sharing P=%d E=%d%s: %d env partials taken from other ranks, pieces: %d by "
               "reference, %d copied\n",
               P, cases[ci].E, cases[ci].by_reference ? " (by reference)" : "", by_others, lent,
               copied);
    }
    munmap(rep, sizeof *rep);
}

/* A piece that is never put is an error on every rank, even when the same arena still
 * holds a valid piece from two collectives ago at that start. */
static int rank_missing_piece(comm *c, report *rep, const void *arg) {
    (void)arg;
    calf_error err;
    calf_error_clear(&err);
    int r = comm_rank(c), E = 8, begin = 4 * r;
    size_t n = 50;
    comm_tree t;
    comm_tree_init(&t, n, E, begin, 4, NULL);
    float out[50];
    for (int round = 0; round < 2; round++) {
        comm_tree_pieces pc;
        CHECK_INT_EQ(comm_tree_pieces_open(c, &pc, E, n, NULL, &err), CALF_OK);
        comm_tree_restart(&t, begin, 4, NULL);
        for (int i = 0; i < 4; i++) {
            float *leaf = comm_tree_leaf(&t);
            leaf[0] = (float)(begin + i);
            comm_tree_push(&t);
        }
        if (round == 0 || r == 0) comm_tree_pieces_put(&pc, &t);
        rep->rc[r] = comm_tree_pieces_sum(c, &pc, out, &err);
        if (round == 0) {
            CHECK_INT_EQ(rep->rc[r], CALF_OK);
            CHECK(out[0] == 28.0f);
            CHECK_INT_EQ(comm_barrier(c, &err), CALF_OK); /* round 1 reuses round 0's arena */
        }
    }
    snprintf(rep->msg[r], sizeof rep->msg[r], "%s", err.msg);
    comm_tree_free(&t);
    return 0;
}

static void test_missing_piece(void) {
    check_every_rank_fails(2, 0, rank_missing_piece, CALF_ECOMM, "no valid piece starts at env 4",
                           "missing piece");
}

/* The single and MPI backends share no memory: no piece sums there. */
static void test_sharing_unsupported(void) {
    comm *c = NULL;
    CHECK_INT_EQ(comm_single(&c, NULL), CALF_OK);
    CHECK(!comm_shares_memory(c));
    CHECK(!comm_tree_pieces_supported(c, 8, 10));
    CHECK_INT_EQ((long long)comm_shared_left(c), 0);
    comm_finalize(c);
}

int main(void) {
    test_local_sharing();
    test_sharing_unsupported();
    test_missing_piece();
    return test_report("test_pieces");
}
