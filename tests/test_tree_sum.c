/* test_tree_sum.c: the canonical env-ordered sum (parallel/tree_sum.c) is bit-identical
 * for every split of the envs, checked through the exchange format with no processes:
 * whole and in slices, in float and double, with raw leaves and sums into a left sibling. */
#include "parallel/comm.h"
#include "parallel/tree_sum.h"
#include "comm_test_util.h"
#include "test_util.h"

/* Run the whole protocol for one split (counts of P ranks): every rank folds its leaves,
 * packs, and the concatenated blobs are completed as every rank would. */
static int split_sum(const float *leaves, int E, size_t n, int P, const int *counts, float *out,
                     calf_error *err) {
    size_t *sizes = malloc((size_t)P * sizeof *sizes), total = 0;
    comm_tree *trees = malloc((size_t)P * sizeof *trees);
    int begin = 0;
    for (int r = 0; r < P; r++) {
        comm_tree_init(&trees[r], n, E, begin, counts[r], NULL);
        for (int i = begin; i < begin + counts[r]; i++) {
            memcpy(comm_tree_leaf(&trees[r]), leaves + (size_t)i * n, n * sizeof(float));
            comm_tree_push(&trees[r]);
        }
        sizes[r] = comm_tree_packed_bytes(&trees[r]);
        if (sizes[r] != comm_tree_blob_bytes(E, begin, counts[r], n, sizeof(float))) total = 1;
        begin += counts[r];
        total += sizes[r];
    }
    unsigned char *packed = malloc(total), *p = packed;
    for (int r = 0; r < P; r++) {
        comm_tree_pack(&trees[r], p);
        p += sizes[r];
        comm_tree_free(&trees[r]);
    }
    int rc = comm_tree_finish(packed, sizes, P, n, sizeof(float), E, out, err);
    free(packed);
    free(trees);
    free(sizes);
    return rc;
}

/* The same split completed in slices, as comm_tree_allreduce does when the ranks hold
 * many blocks: slice q of the elements (P nearly equal slices, some possibly empty) is
 * completed from slice q of every rank's blocks (comm_tree_pack_slice) alone. */
static int split_sum_sliced(const float *leaves, int E, size_t n, int P, const int *counts,
                            float *out, calf_error *err) {
    comm_tree *trees = malloc((size_t)P * sizeof *trees);
    size_t *sizes = malloc((size_t)P * sizeof *sizes);
    int begin = 0, rc = CALF_OK;
    for (int r = 0; r < P; r++) {
        comm_tree_init(&trees[r], n, E, begin, counts[r], NULL);
        for (int i = begin; i < begin + counts[r]; i++) {
            memcpy(comm_tree_leaf(&trees[r]), leaves + (size_t)i * n, n * sizeof(float));
            comm_tree_push(&trees[r]);
        }
        begin += counts[r];
    }
    for (int q = 0; q < P && rc == CALF_OK; q++) {
        size_t lo = n * (size_t)q / (size_t)P, hi = n * (size_t)(q + 1) / (size_t)P, total = 0;
        for (int r = 0; r < P; r++)
            total += sizes[r] = comm_tree_packed_slice_bytes(&trees[r], lo, hi);
        unsigned char *packed = malloc(total), *p = packed;
        for (int r = 0; r < P; r++) {
            comm_tree_pack_slice(&trees[r], lo, hi, p);
            p += sizes[r];
        }
        rc = comm_tree_finish(packed, sizes, P, hi - lo, sizeof(float), E, out + lo, err);
        free(packed);
    }
    for (int r = 0; r < P; r++) comm_tree_free(&trees[r]);
    free(sizes);
    free(trees);
    return rc;
}

static int splits_checked = 0, split_mismatches = 0, naive_differs = 0;

static void check_split(const float *leaves, const float *ref, int E, size_t n, int P,
                        const int *counts) {
    float *out = malloc(n * sizeof *out);
    calf_error err;
    calf_error_clear(&err);
    int rc = split_sum(leaves, E, n, P, counts, out, &err);
    bool same = rc == CALF_OK && memcmp(out, ref, n * sizeof *out) == 0;
    if (same) {
        memset(out, 0xff, n * sizeof *out);
        rc = split_sum_sliced(leaves, E, n, P, counts, out, &err);
        same = rc == CALF_OK && memcmp(out, ref, n * sizeof *out) == 0;
    }
    splits_checked++;
    if (!same) {
        if (split_mismatches++ < 5) {
            fprintf(stderr, "split mismatch: E=%d P=%d rc=%d %s; counts:", E, P, rc, err.msg);
            for (int r = 0; r < P; r++) fprintf(stderr, " %d", counts[r]);
            fputc('\n', stderr);
        }
    }
    free(out);
}

/* All compositions of E into P positive parts, recursively. */
static void all_splits(const float *leaves, const float *ref, int E, size_t n, int P, int *counts,
                       int r, int left) {
    if (r == P - 1) {
        counts[r] = left;
        check_split(leaves, ref, E, n, P, counts);
        return;
    }
    for (int c = 1; c <= left - (P - 1 - r); c++) {
        counts[r] = c;
        all_splits(leaves, ref, E, n, P, counts, r + 1, left - c);
    }
}

static void test_tree_math(void) {
    const size_t n = 23;
    calf_rng pick;
    calf_rng_seed(&pick, 7, 0, CALF_RNG_INIT);
    for (int E = 1; E <= 70; E++) {
        float *leaves = malloc((size_t)E * n * sizeof *leaves);
        for (int i = 0; i < E; i++) fill_leaf(leaves + (size_t)i * n, n, 1000 + (uint64_t)E, i);
        float *ref = malloc(n * sizeof *ref), *naive = calloc(n, sizeof *naive);
        ref_sum(leaves, E, n, ref);
        for (int i = 0; i < E; i++)
            for (size_t k = 0; k < n; k++) naive[k] += leaves[(size_t)i * n + k];
        if (memcmp(naive, ref, n * sizeof *ref) != 0) naive_differs++;

        int counts[8];
        for (int P = 1; P <= 8 && P <= E; P++) {
            if (E <= 14) {
                all_splits(leaves, ref, E, n, P, counts, 0, E);
            } else {
                for (int r = 0; r < P; r++) {
                    int b;
                    even_split(E, P, r, &b, &counts[r]);
                }
                check_split(leaves, ref, E, n, P, counts);
                for (int trial = 0; trial < 40; trial++) {
                    /* Random cut points: P-1 distinct positions in 1..E-1, sorted. */
                    int cuts[9] = {0}, nc = 0;
                    while (nc < P - 1) {
                        int c = 1 + (int)calf_rng_below(&pick, (uint32_t)(E - 1));
                        int dup = 0;
                        for (int q = 0; q < nc; q++) dup |= cuts[q] == c;
                        if (!dup) cuts[nc++] = c;
                    }
                    for (int a = 0; a < nc; a++)
                        for (int b = a + 1; b < nc; b++)
                            if (cuts[b] < cuts[a]) {
                                int t = cuts[a];
                                cuts[a] = cuts[b];
                                cuts[b] = t;
                            }
                    int prev = 0;
                    for (int r = 0; r < P - 1; r++) {
                        counts[r] = cuts[r] - prev;
                        prev = cuts[r];
                    }
                    counts[P - 1] = E - prev;
                    check_split(leaves, ref, E, n, P, counts);
                }
            }
        }
        /* Ranks owning nothing are allowed too (more ranks than work at some level). */
        if (E >= 3) {
            int z[4] = {0, E / 2, 0, E - E / 2};
            check_split(leaves, ref, E, n, 4, z);
        }
        free(naive);
        free(ref);
        free(leaves);
    }
    printf("tree math: %d splits checked, %d mismatches; naive order differs for %d of 70 E\n",
           splits_checked, split_mismatches, naive_differs);
    CHECK(splits_checked > 10000);
    CHECK_INT_EQ(split_mismatches, 0);
    /* The test can fail: a different summation order does change the bits here. */
    CHECK(naive_differs > 10);
}

/* The completion works a chunk of elements at a time from a recorded list of blocks and
 * merges: vectors of several chunks (the last one partial), more blocks than it records
 * without allocating, and stacks deeper than the partial sums it keeps in its frame. */
static void test_tree_fold_storage(void) {
    const size_t n = 1300; /* 2.5 chunks of floats */
    const int E = 300;
    float *leaves = malloc((size_t)E * n * sizeof *leaves), *ref = malloc(n * sizeof *ref);
    for (int i = 0; i < E; i++) fill_leaf(leaves + (size_t)i * n, n, 4242, i);
    int *counts = malloc((size_t)E * sizeof *counts);
    int before = split_mismatches;
    for (int c = 0; c < 4; c++) {
        int sub = c < 3 ? 128 : E, P;
        ref_sum(leaves, sub, n, ref);
        if (c == 0) { /* 127 + 1: seven blocks on the stack when the last arrives */
            P = 2;
            counts[0] = 127;
            counts[1] = 1;
        } else if (c == 1) {
            P = 3;
            counts[0] = 1;
            counts[1] = 126;
            counts[2] = 1;
        } else { /* one env per rank: 128 and 300 blocks */
            P = sub;
            for (int r = 0; r < P; r++) counts[r] = 1;
        }
        check_split(leaves, ref, sub, n, P, counts);
    }
    CHECK_INT_EQ(split_mismatches - before, 0);
    free(counts);
    free(ref);
    free(leaves);
}

/* A specific small case where the canonical tree and left-to-right disagree, so the
 * order matters visibly: (big + -big) + small vs big + (-big + small) over 3 envs. */
static void test_tree_order_matters(void) {
    const int E = 3;
    float leaves[3] = {1e8f, -1e8f, 1.0f};
    float ref, out;
    ref_sum(leaves, E, 1, &ref);
    CHECK(ref == 1.0f); /* (1e8 + -1e8) + 1 */
    int counts[2] = {1, 2};
    calf_error err;
    CHECK_INT_EQ(split_sum(leaves, E, 1, 2, counts, &out, &err), CALF_OK);
    CHECK(out == 1.0f);
    float right_first = leaves[0] + (leaves[1] + leaves[2]);
    CHECK(right_first != ref); /* 1e8 + (-1e8 + 1) rounds the 1 away */
}

static void test_tree_edges(void) {
    calf_error err;
    /* E = 1: the result is the one leaf, bit for bit. */
    float leaf[5] = {1.5f, -0.0f, 3e-38f, 7.0f, -2.25f}, out[5];
    int one = 1;
    CHECK_INT_EQ(split_sum(leaf, 1, 5, 1, &one, out, &err), CALF_OK);
    CHECK(memcmp(out, leaf, sizeof leaf) == 0);

    /* Every range's blob fits the padded maximum that comm_tree_sum_f64 uses. */
    int over = 0;
    for (int E = 1; E <= 70; E++)
        for (int a = 0; a < E; a++)
            for (int b = a; b <= E; b++)
                if (comm_tree_blob_bytes(E, a, b - a, 3, 8) > comm_tree_blob_bytes_max(E, 3, 8))
                    over++;
    CHECK_INT_EQ(over, 0);

    /* Ranges out of rank order are refused, not silently summed in another order. */
    comm_tree a, b;
    comm_tree_init(&a, 2, 4, 0, 2, NULL);
    comm_tree_init(&b, 2, 4, 2, 2, NULL);
    for (int i = 0; i < 2; i++) {
        float *l = comm_tree_leaf(&a);
        l[0] = (float)i;
        comm_tree_push(&a);
        l = comm_tree_leaf(&b);
        l[1] = (float)i;
        comm_tree_push(&b);
    }
    size_t sizes[2] = {comm_tree_packed_bytes(&b), comm_tree_packed_bytes(&a)};
    unsigned char *packed = malloc(sizes[0] + sizes[1]);
    comm_tree_pack(&b, packed);
    comm_tree_pack(&a, packed + sizes[0]);
    float o[2];
    calf_error_clear(&err);
    CHECK_INT_EQ(comm_tree_finish(packed, sizes, 2, 2, sizeof(float), 4, o, &err), CALF_ECOMM);
    CHECK(strstr(err.msg, "rank order") != NULL);
    /* A gap (envs 2..3 missing) is refused too. */
    calf_error_clear(&err);
    CHECK_INT_EQ(comm_tree_finish(packed + sizes[0], &sizes[1], 1, 2, sizeof(float), 4, o, &err),
                 CALF_ECOMM);
    free(packed);
    comm_tree_free(&a);
    comm_tree_free(&b);
    comm_tree_free(NULL);
}

/* Doubles: the same tree over any split, through the padded one-collective format. */
static void test_tree_f64_splits(void) {
    const size_t n = 5;
    int bad = 0, cases = 0, naive_diff = 0;
    for (int E = 1; E <= 40; E++) {
        double *leaves = malloc((size_t)E * n * sizeof *leaves), ref[5], naive[5] = {0};
        for (int i = 0; i < E; i++) fill_leaf_f64(leaves + (size_t)i * n, n, 99, i);
        ref_node_f64(leaves, E, n, ceil_log2_int(E), 0, ref);
        for (int i = 0; i < E; i++)
            for (size_t k = 0; k < n; k++) naive[k] += leaves[(size_t)i * n + k];
        naive_diff += memcmp(naive, ref, sizeof ref) != 0;
        for (int P = 1; P <= 5 && P <= E; P++) {
            size_t blob = comm_tree_blob_bytes_max(E, n, 8);
            unsigned char *packed = calloc((size_t)P, blob);
            size_t sizes[5];
            for (int r = 0; r < P; r++) {
                int b, c;
                even_split(E, P, r, &b, &c);
                comm_tree t;
                comm_tree_init_f64(&t, n, E, b, c, NULL);
                for (int i = b; i < b + c; i++) {
                    memcpy(comm_tree_leaf_f64(&t), leaves + (size_t)i * n, n * sizeof(double));
                    comm_tree_push(&t);
                }
                comm_tree_pack(&t, packed + (size_t)r * blob);
                sizes[r] = blob;
                comm_tree_free(&t);
            }
            double out[5];
            calf_error err;
            cases++;
            if (comm_tree_finish(packed, sizes, P, n, 8, E, out, &err) != CALF_OK ||
                memcmp(out, ref, sizeof ref) != 0)
                bad++;
            free(packed);
        }
        free(leaves);
    }
    CHECK(cases > 150);
    CHECK_INT_EQ(bad, 0);
    CHECK(naive_diff > 0);
}

/* comm_tree_leaf_raw: leaves that overwrite only some elements (here the even ones, as
 * the trainer overwrites the model's parameters but not the padding between layers) sum
 * exactly as zeroed leaves do, round after round, and the rest stays zero; adding an env
 * into its left sibling (comm_tree_push_into_left) gives the same bits as pushing it. */
static void test_leaf_raw(void) {
    const int E = 11;
    const size_t n = 203;
    float *leaves = calloc((size_t)E * n, sizeof *leaves), *ref = malloc(n * sizeof *ref);
    float *out = malloc(n * sizeof *out);
    comm *c = NULL;
    calf_error err;
    calf_error_clear(&err);
    CHECK_INT_EQ(comm_single(&c, NULL), CALF_OK);
    comm_tree t;
    comm_tree_init(&t, n, E, 0, E, NULL);
    int exact = 1, zeros = 1;
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < E; i++) {
            fill_leaf(leaves + (size_t)i * n, n, 40 + (uint64_t)round, i);
            for (size_t k = 1; k < n; k += 2) leaves[(size_t)i * n + k] = 0.0f;
        }
        ref_sum(leaves, E, n, ref);
        for (int i = 0; i < E; i++) {
            /* in odd rounds an env whose left sibling is on the stack is added into it */
            float *left = round % 2 ? comm_tree_left_sibling(&t) : NULL;
            if ((i & 1) && round % 2) CHECK(left != NULL);
            if (!(i & 1)) CHECK(comm_tree_left_sibling(&t) == NULL);
            float *leaf = left ? left : comm_tree_leaf_raw(&t);
            for (size_t k = 0; k < n; k += 2)
                leaf[k] = left ? leaf[k] + leaves[(size_t)i * n + k] : leaves[(size_t)i * n + k];
            if (left) comm_tree_push_into_left(&t);
            else comm_tree_push(&t);
        }
        CHECK_INT_EQ(comm_tree_allreduce(c, &t, out, &err), CALF_OK);
        exact &= memcmp(out, ref, n * sizeof *out) == 0;
        for (size_t k = 1; k < n; k += 2) zeros &= out[k] == 0.0f && !signbit(out[k]);
    }
    CHECK(exact);
    CHECK(zeros);
    comm_tree_free(&t);
    comm_finalize(c);
    free(out);
    free(ref);
    free(leaves);
}

int main(void) {
    test_tree_order_matters();
    test_tree_edges();
    test_tree_math();
    test_tree_fold_storage();
    test_tree_f64_splits();
    test_leaf_raw();
    return test_report("test_tree_sum");
}
