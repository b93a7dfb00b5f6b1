/* test_param_group.c: named parameter groups: one optimizer step is clip-then-Adam with the
 * group's own settings and step count, processes stepping slices of one shared group
 * make the same bits, a non-finite gradient changes nothing, the
 * checkpoint section round-trips and refuses a step count the iteration does not imply;
 * and SAC's temperature moves the right way under its loss (sac_math's gradient through
 * the group's Adam). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/sac_math.h"
#include "numerics/param_group.h"
#include "test_util.h"

static void test_step(void) {
    adam_conf opt = {.lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .max_norm = 1.0};
    param_group g;
    param_group_init(&g, "TEST", 5, true, opt, NULL);
    float want_p[5], want_m[5] = {0}, want_v[5] = {0}, grad[5];
    for (int i = 0; i < 5; i++) {
        g.params[i] = want_p[i] = 0.5f * (float)i - 1.0f;
        g.grad[i] = grad[i] = 3.0f - (float)i; /* norm sqrt(19) > 1: clipped */
    }
    adam_scale(grad, 5, adam_clip_coef(adam_global_norm(grad, 5), 1.0));
    adam_step(want_p, grad, want_m, want_v, 5, 1, 0.01f, 0.9f, 0.999f, 1e-8f);
    CHECK(param_group_step(&g));
    CHECK_INT_EQ(g.step, 1);
    CHECK(memcmp(g.params, want_p, sizeof want_p) == 0);
    CHECK(memcmp(g.m, want_m, sizeof want_m) == 0 && memcmp(g.v, want_v, sizeof want_v) == 0);
    /* a non-finite gradient: refused, nothing moves */
    g.grad[2] = NAN;
    CHECK(!param_group_step(&g));
    CHECK_INT_EQ(g.step, 1);
    CHECK(memcmp(g.params, want_p, sizeof want_p) == 0);

    /* the section round-trips; a wrong step count or a non-finite value is refused */
    ckpt_buf b;
    ckpt_buf_init(&b);
    param_group_save(&g, &b);
    param_group h;
    param_group_init(&h, "TEST", 5, true, opt, NULL);
    calf_error err;
    ckpt_reader r;
    ckpt_reader_init(&r, b.data, b.len, "t.ckpt", &err);
    CHECK_INT_EQ(param_group_load(&h, &r, 1, &err), CALF_OK);
    CHECK_INT_EQ(ckpt_reader_finish(&r), CALF_OK);
    CHECK(param_group_digest(&h, 1) == param_group_digest(&g, 1));
    ckpt_reader_init(&r, b.data, b.len, "t.ckpt", &err);
    CHECK_INT_EQ(param_group_load(&h, &r, 2, &err), CALF_EINVAL);
    CHECK_STR_EQ(err.msg, "t.ckpt: TEST: 1 optimizer steps, 2 expected");
    float nan = NAN;
    memcpy(b.data + 4 + 8 + 4 * 3, &nan, 4); /* params[3] */
    ckpt_reader_init(&r, b.data, b.len, "t.ckpt", &err);
    CHECK_INT_EQ(param_group_load(&h, &r, 1, &err), CALF_EINVAL);
    CHECK_STR_EQ(err.msg, "t.ckpt: TEST parameters are not finite");
    memcpy(b.data + 4 + 8 + 4 * 3, &want_p[3], 4);
    ckpt_reader_init(&r, b.data, b.len, "t.ckpt", &err);
    CHECK_INT_EQ(param_group_load(&h, &r, 1, &err), CALF_OK); /* mended */
    float neg = -1.0f;
    /* tag, params (count, 5 floats), step, m (count, 5 floats), v (count, then v[1]) */
    memcpy(b.data + 4 + (8 + 4 * 5) + 8 + (8 + 4 * 5) + 8 + 4 * 1, &neg, 4);
    ckpt_reader_init(&r, b.data, b.len, "t.ckpt", &err);
    CHECK_INT_EQ(param_group_load(&h, &r, 1, &err), CALF_EINVAL);
    CHECK_STR_EQ(err.msg, "t.ckpt: TEST optimizer state has a negative second moment");
    ckpt_buf_free(&b);

    /* a group without an optimizer (a target network) saves only its parameters */
    param_group t;
    param_group_init(&t, "TARG", 3, false, opt, NULL);
    CHECK(t.grad == NULL && t.m == NULL);
    ckpt_buf_init(&b);
    param_group_save(&t, &b);
    CHECK_INT_EQ(b.len, 4 + 8 + 3 * 4);
    ckpt_buf_free(&b);
    param_group_free(&t);
    param_group_free(&g);
    param_group_free(&h);
    param_group_free(&g); /* twice is fine */
}

/* Processes that hold one group in shared memory (param_group_use) each step their slice
 * with the norm of the whole gradient, as PPO's ranks do: the bits of one process's
 * param_group_step, and each process counts the step. Slices of whole norm chunks and a
 * gradient large enough to be clipped. */
static void test_step_slices(void) {
    enum { N = 2 * ADAM_NORM_CHUNK + 45, STEPS = 3 };
    adam_conf opt = {.lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-7f, .max_norm = 2.0};
    param_group whole, part[2];
    param_group_init(&whole, "TEST", N, true, opt, NULL);
    float *shared[4];
    for (int a = 0; a < 4; a++) shared[a] = calloc(N, sizeof(float));
    for (int q = 0; q < 2; q++) {
        param_group_init(&part[q], "TEST", N, true, opt, NULL);
        param_group_use(&part[q], shared[0], shared[1], shared[2], shared[3]);
    }
    for (size_t i = 0; i < N; i++) whole.params[i] = shared[0][i] = sinf((float)i);
    const size_t cut = ADAM_NORM_CHUNK; /* part 0: [0, cut), part 1: [cut, N) */
    for (int k = 1; k <= STEPS; k++) {
        for (size_t i = 0; i < N; i++)
            whole.grad[i] = shared[1][i] = cosf((float)(i * (size_t)k)) * (float)k;
        double norm = adam_global_norm(shared[1], N);
        CHECK(norm > opt.max_norm);
        CHECK(param_group_step(&whole));
        param_group_step_slice(&part[0], 0, cut, norm);
        param_group_step_slice(&part[1], cut, N, norm);
        CHECK_INT_EQ(part[0].step, k);
        CHECK_INT_EQ(part[1].step, k);
    }
    CHECK(memcmp(whole.params, shared[0], N * sizeof(float)) == 0);
    CHECK(memcmp(whole.grad, shared[1], N * sizeof(float)) == 0); /* clipped alike */
    CHECK(memcmp(whole.m, shared[2], N * sizeof(float)) == 0);
    CHECK(memcmp(whole.v, shared[3], N * sizeof(float)) == 0);
    CHECK(param_group_digest(&whole, 3) == param_group_digest(&part[0], 3));
    param_group_free(&part[0]);
    param_group_free(&part[1]); /* the caller's arrays are left alone */
    for (int a = 0; a < 4; a++) free(shared[a]);
    param_group_free(&whole);
}

/* Entropy above the target: alpha must fall; below it: rise. */
static void test_alpha_moves(void) {
    adam_conf opt = {.lr = 0.05f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    for (int side = 0; side < 2; side++) {
        param_group a;
        param_group_init(&a, "SACL", 1, true, opt, NULL);
        float target = -1.0f;
        float logp = side == 0 ? -3.0f : 2.0f; /* entropy -logp: 3 or -2, target -1 */
        for (int k = 0; k < 20; k++) {
            sac_alpha_loss(a.params[0], logp, target, 1.0f, &a.grad[0]);
            CHECK(param_group_step(&a));
        }
        if (side == 0) CHECK(a.params[0] < -0.5f);
        else CHECK(a.params[0] > 0.5f);
        param_group_free(&a);
    }
}

/* The digest that proves processes' copies agree tells apart copies that differ in any
 * one bit of the parameters or either moment, for sizes around its four 64-bit lanes. */
static void test_digest_bits(void) {
    adam_conf opt = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    const size_t sizes[] = {1, 2, 3, 7, 8, 9, 16, 17, 33};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t n = sizes[si];
        param_group g;
        param_group_init(&g, "TEST", n, true, opt, NULL);
        for (size_t i = 0; i < n; i++) {
            g.params[i] = 0.25f * (float)i - 1.0f;
            g.m[i] = 1e-3f * (float)i;
            g.v[i] = 1e-6f * (float)(i + 1);
        }
        uint64_t base = param_group_digest(&g, 7);
        int same = 0, tried = 0;
        float *arrays[3] = {g.params, g.m, g.v};
        for (int a = 0; a < 3; a++)
            for (size_t i = 0; i < n; i++)
                for (int bit = 0; bit < 32; bit++) {
                    uint32_t w;
                    memcpy(&w, &arrays[a][i], 4);
                    w ^= 1u << bit;
                    memcpy(&arrays[a][i], &w, 4);
                    same += param_group_digest(&g, 7) == base;
                    tried++;
                    w ^= 1u << bit;
                    memcpy(&arrays[a][i], &w, 4);
                }
        CHECK_INT_EQ(same, 0);
        CHECK(tried == (int)(3 * 32 * n));
        CHECK(param_group_digest(&g, 7) == base); /* restored */
        CHECK(param_group_digest(&g, 8) != base); /* the seed enters */
        param_group_free(&g);
    }
}

int main(void) {
    test_step();
    test_step_slices();
    test_alpha_moves();
    test_digest_bits();
    return test_report("test_param_group");
}
