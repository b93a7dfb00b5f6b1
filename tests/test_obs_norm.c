/* test_obs_norm.c: the observation normalizer against its definition: running mean and
 * variance against a two-pass computation over everything seen (with a mean far from
 * zero, which plain sums of squares would lose), normalization and clipping by hand,
 * the same bits for any split of the envs over processes (the canonical tree), and the
 * ONRM checkpoint section read back and refused when damaged. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/obs_norm.h"
#include "parallel/comm.h"
#include "parallel/tree_sum.h"
#include "test_util.h"

enum { D = 3, E = 7, T = 5, ITERS = 4 };

/* observation of env e at step s of iteration k: a mean far from zero in dimension 0 */
static float obs_at(int k, int e, int s, int i) {
    double u = sin(1.7 * (k * 1000 + e * 37 + s * 5 + i) + 0.3 * i);
    const double offset[D] = {1000.0, 0.0, -3.0}, width[D] = {0.5, 2.0, 1e-3};
    return (float)(offset[i] + width[i] * u);
}

/* the iteration's per-env accumulators, (E, OBS_NORM_ACC(D)) */
static void accumulate(const obs_norm *z, int k, double *acc) {
    memset(acc, 0, (size_t)E * OBS_NORM_ACC(D) * sizeof(double));
    for (int e = 0; e < E; e++)
        for (int s = 0; s < T; s++) {
            float x[D];
            for (int i = 0; i < D; i++) x[i] = obs_at(k, e, s, i);
            obs_norm_accumulate(z, x, acc + (size_t)e * OBS_NORM_ACC(D));
        }
}

/* the canonical tree sum of the accumulators for a split of E envs into P ranks */
static void split_sum(const double *acc, int P, const int *counts, double *out) {
    size_t n = OBS_NORM_ACC(D), sizes[E], total = 0;
    comm_tree trees[E];
    int begin = 0;
    for (int r = 0; r < P; r++) {
        comm_tree_init_f64(&trees[r], n, E, begin, counts[r], NULL);
        for (int e = begin; e < begin + counts[r]; e++) {
            memcpy(comm_tree_leaf_f64(&trees[r]), acc + (size_t)e * n, n * sizeof(double));
            comm_tree_push(&trees[r]);
        }
        sizes[r] = comm_tree_packed_bytes(&trees[r]);
        total += sizes[r];
        begin += counts[r];
    }
    unsigned char *packed = malloc(total), *p = packed;
    for (int r = 0; r < P; r++) {
        comm_tree_pack(&trees[r], p);
        p += sizes[r];
        comm_tree_free(&trees[r]);
    }
    calf_error err;
    CHECK_INT_EQ(comm_tree_finish(packed, sizes, P, n, sizeof(double), E, out, &err), CALF_OK);
    free(packed);
}

static void test_two_pass(void) {
    obs_norm z;
    obs_norm_init(&z, D, 0.0f, NULL);
    double *acc = calloc((size_t)E * OBS_NORM_ACC(D), sizeof(double));
    const int one[1] = {E};
    for (int k = 0; k < ITERS; k++) {
        accumulate(&z, k, acc);
        double sum[OBS_NORM_ACC(D)];
        split_sum(acc, 1, one, sum);
        obs_norm_merge(&z, (int64_t)E * T, sum);
        CHECK(z.count == (int64_t)(k + 1) * E * T);
        /* two passes over everything so far */
        for (int i = 0; i < D; i++) {
            double m = 0, v = 0, N = (double)(k + 1) * E * T;
            for (int kk = 0; kk <= k; kk++)
                for (int e = 0; e < E; e++)
                    for (int s = 0; s < T; s++) m += obs_at(kk, e, s, i);
            m /= N;
            for (int kk = 0; kk <= k; kk++)
                for (int e = 0; e < E; e++)
                    for (int s = 0; s < T; s++) {
                        double d = obs_at(kk, e, s, i) - m;
                        v += d * d;
                    }
            v /= N;
            CHECK_NEAR(z.mean[i], m, 1e-12 * (1 + fabs(m)));
            /* the first batch's sums are about 0 (no mean yet), so a mean 3,000 standard
             * deviations from zero costs some digits there: still 8 of them */
            CHECK_NEAR(z.m2[i] / (double)z.count, v, 1e-8 * v);
            CHECK(z.shift[i] == (float)z.mean[i]);
            CHECK(z.scale[i] == (float)(1.0 / sqrt(z.m2[i] / (double)z.count + 1e-8)));
        }
    }
    /* dimension 0 varies by 0.5 around 1,000: its variance (about 1/8) survives */
    CHECK(z.m2[0] / (double)z.count > 0.1 && z.m2[0] / (double)z.count < 0.15);
    free(acc);
    obs_norm_free(&z);
    obs_norm_free(&z); /* freed twice is fine */
}

static void test_apply(void) {
    obs_norm z;
    obs_norm_init(&z, 2, 5.0f, NULL);
    /* no statistics yet: only the clipping */
    const float x0[4] = {1.5f, -7.0f, 6.0f, NAN};
    float y[4];
    obs_norm_apply(&z, x0, 2, y);
    CHECK(y[0] == 1.5f && y[1] == -5.0f && y[2] == 5.0f && isnan(y[3]));
    /* statistics of {1, 3} in dimension 0 and {10, 10} in dimension 1 */
    double acc[OBS_NORM_ACC(2)] = {0};
    const float a[2] = {1.0f, 10.0f}, b[2] = {3.0f, 10.0f};
    obs_norm_accumulate(&z, a, acc);
    obs_norm_accumulate(&z, b, acc);
    CHECK(acc[0] == 4.0 && acc[1] == 20.0 && acc[2] == 10.0 && acc[3] == 200.0);
    obs_norm_merge(&z, 2, acc);
    CHECK(z.mean[0] == 2.0 && z.mean[1] == 10.0 && z.m2[0] == 2.0 && z.m2[1] == 0.0);
    CHECK(z.scale[0] == (float)(1.0 / sqrt(1.0 + 1e-8)));
    CHECK(z.scale[1] == (float)(1.0 / sqrt(1e-8)));
    const float x[4] = {4.0f, 10.0f, 0.0f, 10.01f};
    obs_norm_apply(&z, x, 2, y);
    CHECK(y[0] == (4.0f - 2.0f) * z.scale[0]);
    CHECK(y[1] == 0.0f);
    CHECK(y[2] == (0.0f - 2.0f) * z.scale[0]);
    CHECK(y[3] == 5.0f); /* 0.01 away from a constant dimension: clipped */
    /* in place */
    float w[4];
    memcpy(w, x, sizeof w);
    obs_norm_apply(&z, w, 2, w);
    CHECK(memcmp(w, y, sizeof w) == 0);
    /* clipping 0: none */
    z.clip = 0.0f;
    obs_norm_apply(&z, x, 2, y);
    CHECK(y[3] > 5.0f);
    obs_norm_free(&z);
}

/* Any split of the envs over processes gives the same bits, iteration after iteration. */
static void test_split_independent(void) {
    const int splits[][E] = {{7}, {4, 3}, {3, 4}, {2, 2, 3}, {1, 1, 1, 4}, {1, 1, 1, 1, 1, 1, 1}};
    const int ranks[] = {1, 2, 2, 3, 4, 7};
    enum { NS = sizeof ranks / sizeof ranks[0] };
    obs_norm z[NS];
    double *acc = calloc((size_t)E * OBS_NORM_ACC(D), sizeof(double));
    for (int j = 0; j < NS; j++) obs_norm_init(&z[j], D, 10.0f, NULL);
    int differ = 0;
    for (int k = 0; k < ITERS; k++)
        for (int j = 0; j < NS; j++) {
            accumulate(&z[j], k, acc);
            double sum[OBS_NORM_ACC(D)];
            split_sum(acc, ranks[j], splits[j], sum);
            obs_norm_merge(&z[j], (int64_t)E * T, sum);
            differ += memcmp(z[j].mean, z[0].mean, D * sizeof(double)) != 0;
            differ += memcmp(z[j].m2, z[0].m2, D * sizeof(double)) != 0;
        }
    CHECK_INT_EQ(differ, 0);
    /* and the tree differs from a plain left-to-right sum in the last bits at times, so
     * the test above could see a split that changed the order */
    comm *c = NULL;
    CHECK_INT_EQ(comm_single(&c, NULL), CALF_OK);
    double via[OBS_NORM_ACC(D)], mine[OBS_NORM_ACC(D)];
    calf_error err;
    accumulate(&z[0], 0, acc);
    CHECK_INT_EQ(comm_tree_sum_f64(c, E, 0, E, acc, OBS_NORM_ACC(D), via, &err), CALF_OK);
    split_sum(acc, 1, splits[0], mine);
    CHECK(memcmp(via, mine, sizeof via) == 0);
    comm_finalize(c);
    for (int j = 0; j < NS; j++) obs_norm_free(&z[j]);
    free(acc);
}

static void test_checkpoint(void) {
    obs_norm z, back;
    obs_norm_init(&z, D, 10.0f, NULL);
    double *acc = calloc((size_t)E * OBS_NORM_ACC(D), sizeof(double));
    double sum[OBS_NORM_ACC(D)];
    const int one[1] = {E};
    accumulate(&z, 0, acc);
    split_sum(acc, 1, one, sum);
    obs_norm_merge(&z, (int64_t)E * T, sum);
    ckpt_buf b;
    ckpt_buf_init(&b);
    obs_norm_save(&z, &b);
    CHECK_INT_EQ((int)b.len, 4 + 8 + 8 + 2 * D * 8);
    calf_error err;
    ckpt_reader r;
    /* read back: the same statistics and the same floats */
    obs_norm_init(&back, D, 10.0f, NULL);
    ckpt_reader_init(&r, b.data, b.len, "ckpt", &err);
    CHECK_INT_EQ(obs_norm_load(&back, &r, (int64_t)E * T, &err), CALF_OK);
    CHECK_INT_EQ(ckpt_reader_finish(&r), CALF_OK);
    CHECK(back.count == z.count);
    CHECK(memcmp(back.mean, z.mean, D * sizeof(double)) == 0);
    CHECK(memcmp(back.m2, z.m2, D * sizeof(double)) == 0);
    CHECK(memcmp(back.shift, z.shift, D * sizeof(float)) == 0);
    CHECK(memcmp(back.scale, z.scale, D * sizeof(float)) == 0);
    /* a count the iteration does not imply */
    ckpt_reader_init(&r, b.data, b.len, "ckpt", &err);
    CHECK_INT_EQ(obs_norm_load(&back, &r, (int64_t)E * T * 2, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "ckpt: ONRM: 35 observations merged, the iteration implies 70") != NULL);
    /* another env's size */
    obs_norm other;
    obs_norm_init(&other, D + 1, 10.0f, NULL);
    ckpt_reader_init(&r, b.data, b.len, "ckpt", &err);
    CHECK_INT_EQ(obs_norm_load(&other, &r, (int64_t)E * T, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "3 dimensions, the env has 4") != NULL);
    obs_norm_free(&other);
    /* a negative sum of squares (bytes of m2[1]'s sign flipped), and a short section */
    b.data[4 + 8 + 8 + D * 8 + 8 + 7] ^= 0x80;
    ckpt_reader_init(&r, b.data, b.len, "ckpt", &err);
    CHECK_INT_EQ(obs_norm_load(&back, &r, (int64_t)E * T, &err), CALF_EINVAL);
    CHECK(strstr(err.msg, "dimension 1") != NULL);
    CHECK(memcmp(back.m2, z.m2, D * sizeof(double)) == 0); /* left as it was */
    ckpt_reader_init(&r, b.data, b.len - 3, "ckpt", &err);
    CHECK(obs_norm_load(&back, &r, (int64_t)E * T, &err) != CALF_OK);
    ckpt_buf_free(&b);
    obs_norm_free(&back);
    obs_norm_free(&z);
    free(acc);
}

int main(void) {
    test_two_pass();
    test_apply();
    test_split_independent();
    test_checkpoint();
    return test_report("test_obs_norm");
}
