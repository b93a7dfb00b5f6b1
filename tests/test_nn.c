/* test_nn.c: the numeric core. Kernels against a scalar reference of the documented
 * arithmetic order (bit for bit), row independence of forward and backward, finite-
 * difference gradients against a double-precision reference, tanh accuracy, orthogonal
 * init, layout. */
#include <stdint.h>
#include <string.h>

#include "calf/rng.h"
#include "numerics/nn.h"
#include "test_util.h"

static calf_rng g_rng;

static float urand(float lo, float hi) {
    return lo + (hi - lo) * calf_rng_uniform_float(&g_rng);
}

static void fill(float *a, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) a[i] = urand(lo, hi);
}

static int bits_equal(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof(float)) == 0;
}

/* ------------------------------------------------------------ reference kernels */

static void ref_forward(const float *x, const float *w, const float *b, int B, int in,
                        int out, float *y) {
    for (int r = 0; r < B; r++) {
        for (int o = 0; o < out; o++) {
            if (out < NN_SMALL_OUT) {
                float s[8] = {0};
                for (int i = 0; i < in; i++)
                    s[i % 8] = nn_madd(x[r * in + i], w[i * out + o], s[i % 8]);
                float d = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
                y[r * out + o] = b ? b[o] + d : d;
            } else {
                float acc = b ? b[o] : 0.0f;
                for (int i = 0; i < in; i++) acc = nn_madd(x[r * in + i], w[i * out + o], acc);
                y[r * out + o] = acc;
            }
        }
    }
}

static void ref_backward_params(const float *x, const float *dy, int B, int in, int out,
                                float *dw, float *db) {
    for (int r = 0; r < B; r++) {
        for (int i = 0; i < in; i++)
            for (int o = 0; o < out; o++)
                dw[i * out + o] = nn_madd(x[r * in + i], dy[r * out + o], dw[i * out + o]);
        for (int o = 0; o < out; o++) db[o] = db[o] + dy[r * out + o];
    }
}

static void ref_backward_input(const float *dy, const float *w, int B, int in, int out,
                               float *dx) {
    for (int r = 0; r < B; r++) {
        for (int i = 0; i < in; i++) {
            float acc = 0.0f;
            for (int o = 0; o < out; o++) acc = nn_madd(dy[r * out + o], w[i * out + o], acc);
            dx[r * in + i] = acc;
        }
    }
}

static void test_linear_order(void) {
    static const int shapes[][3] = {
        /* B, in, out: remainders in every dimension, and the ppo_cartpole layers */
        {1, 4, 64}, {7, 64, 64}, {13, 64, 2}, {9, 64, 1}, {5, 5, 13}, {6, 7, 24},
        {3, 3, 9},  {11, 64, 8}, {4, 17, 7},  {8, 70, 3}, {10, 9, 40}, {2, 130, 5},
        {5, 66, 2}, {7, 67, 1},  {6, 64, 5},  {3, 16, 7}, {8, 64, 2}, {8, 64, 1},
        /* every row tiling: 6-row, 8-row, 4-row and 1-row blocks, and mixes */
        {14, 64, 64}, {8, 64, 64}, {12, 64, 64}, {19, 64, 64}, {22, 4, 64}, {25, 12, 40},
        {8, 9, 20}, {30, 64, 24}, {16, 64, 64}, {17, 8, 16}, {64, 64, 64},
        /* four-column tiles beside wider ones: SAC's 100-wide layers, 12 = 8 + 4, and a
         * scalar column after the four (103) */
        {64, 100, 100}, {64, 4, 100}, {7, 100, 12}, {9, 101, 103}, {13, 12, 4}, {5, 100, 20},
        /* dW's 6 x 16 tiles from 32 rows, and what they leave (8, 4 and single k; 8 and 4
         * columns): the off-policy layers at batch 256 */
        {256, 23, 256}, {256, 256, 12}, {32, 17, 24}, {40, 31, 20}, {33, 6, 16}, {31, 23, 16},
        /* weights of 16,384 floats or more: dW in chunks of 128 rows with x copied per
         * tile (one call of up to 128 rows in any mode); from 131,072 floats and 32 rows
         * also the packed product (rows in blocks of 48, k in chunks of 256, 16-column
         * strips; the columns past them by the tiles above): MinAtar's fc (1024 -> 128)
         * at PPO's 16 rows per env, 64 and 150 rows; 200 rows over five k chunks and
         * 130 = 128 + 2 columns; 33 rows over 17 k chunks */
        {150, 1024, 128}, {200, 300, 70}, {13, 1100, 16}, {131, 130, 130}, {12, 128, 128},
        {16, 1024, 128}, {64, 1024, 128}, {200, 1100, 130}, {33, 4100, 32},
        /* with AVX-512 the strips are 32 columns and the tiles 12 rows: a 16-column strip
         * past them (144 = 4 x 32 + 16, 48 = 32 + 16), and 40 = 3 x 12 + 4, 35 = 2 x 12 + 11 */
        {40, 1030, 144}, {35, 3000, 48},
        /* 1, 2 and 3 rows in tiles of 32 columns, 2 rows of 256 or more columns in tiles
         * of 48 (then 32, 16, 8, 4, scalar): an LSTM step over 2 envs (128 -> 512 and
         * back), 300 = 6 x 48 + 8 + 4, 100 = 3 x 32 + 4, 75 = 2 x 32 + 8 + 3 */
        {2, 128, 512}, {2, 512, 128}, {2, 33, 300}, {3, 64, 100}, {1, 70, 75}, {11, 9, 256},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int B = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
        size_t nx = (size_t)B * in, nw = (size_t)in * out, ny = (size_t)B * out;
        float *x = malloc(nx * 4), *w = malloc(nw * 4), *b = malloc(out * 4);
        float *y = malloc(ny * 4), *yr = malloc(ny * 4), *dy = malloc(ny * 4);
        float *dw = malloc(nw * 4), *dwr = malloc(nw * 4), *db = malloc(out * 4),
              *dbr = malloc(out * 4);
        float *wt = malloc(nw * 4), *dx = malloc(nx * 4), *dxr = malloc(nx * 4);
        fill(x, nx, -1, 1);
        fill(w, nw, -0.5f, 0.5f);
        fill(b, out, -0.1f, 0.1f);
        fill(dy, ny, -1, 1);
        fill(dw, nw, -1, 1); /* backward accumulates: start from non-zero */
        fill(db, out, -1, 1);
        memcpy(dwr, dw, nw * 4);
        memcpy(dbr, db, out * 4);

        nn_linear_forward(x, w, b, B, in, out, y, NULL);
        ref_forward(x, w, b, B, in, out, yr);
        CHECK(bits_equal(y, yr, ny));
        /* and the value is right: compare with a double dot product */
        double maxerr = 0.0;
        for (int r = 0; r < B; r++)
            for (int o = 0; o < out; o++) {
                double acc = b[o];
                for (int i = 0; i < in; i++) acc += (double)x[r * in + i] * w[i * out + o];
                double e = fabs(acc - y[r * out + o]);
                if (e > maxerr) maxerr = e;
            }
        CHECK(maxerr < (in > 256 ? 1e-4 : 1e-5)); /* sums of 1,000 terms round more */

        nn_linear_backward_params(x, dy, B, in, out, dw, db);
        ref_backward_params(x, dy, B, in, out, dwr, dbr);
        CHECK(bits_equal(dw, dwr, nw));
        CHECK(bits_equal(db, dbr, out));
        /* _set: over garbage, the bits of accumulating into zeros */
        fill(dw, nw, -1, 1);
        fill(db, out, -1, 1);
        memset(dwr, 0, nw * 4);
        memset(dbr, 0, out * 4);
        nn_linear_backward_params_set(x, dy, B, in, out, dw, db);
        ref_backward_params(x, dy, B, in, out, dwr, dbr);
        CHECK(bits_equal(dw, dwr, nw));
        CHECK(bits_equal(db, dbr, out));
        /* _add: left + (the _set result), elementwise, in place */
        float *lw = malloc(nw * 4), *lb = malloc(out * 4);
        fill(lw, nw, -1, 1);
        fill(lb, out, -1, 1);
        memcpy(dw, lw, nw * 4);
        memcpy(db, lb, out * 4);
        nn_linear_backward_params_add(x, dy, B, in, out, dw, db);
        for (size_t i = 0; i < nw; i++) lw[i] = lw[i] + dwr[i];
        for (int i = 0; i < out; i++) lb[i] = lb[i] + dbr[i];
        CHECK(bits_equal(dw, lw, nw));
        CHECK(bits_equal(db, lb, out));
        free(lw), free(lb);

        nn_transpose(w, in, out, wt);
        CHECK(wt[(size_t)(out - 1) * in + 0] == w[out - 1]);
        nn_linear_backward_input(dy, wt, B, in, out, dx);
        ref_backward_input(dy, w, B, in, out, dxr);
        CHECK(bits_equal(dx, dxr, nx));
        free(x), free(w), free(b), free(y), free(yr), free(dy), free(dw), free(dwr);
        free(db), free(dbr), free(wt), free(dx), free(dxr);
    }
}

/* A large layer's dX through the MLP: nn_cache keeps W^T of layers from 131,072 weights
 * (and at most 256 outputs) packed in 16-input strips, the inputs past them as a plain
 * W^T, and runs the row tiles strip by strip in blocks of rows. The bits must be the
 * scalar reference's for every row count and row range: MinAtar's fc at PPO's 16 rows
 * per env and 1 to 5 rows; 1030 inputs (6 past the strips: 1030 = 64 x 16 + 6) and 130
 * outputs; 100 rows over four row blocks; 256 outputs (blocks of 12 rows); and the cache
 * reused by a second backward over other rows. */
static void test_strip_dx(void) {
    static const int shapes[][4] = {
        /* B rows forwarded, in, out, rows backpropagated from row 1 */
        {17, 1024, 128, 16}, {6, 1024, 128, 5}, {3, 1024, 128, 1}, {40, 1030, 130, 37},
        {101, 1024, 128, 100}, {14, 520, 256, 13}, {9, 2048, 64, 8},
        /* AVX-512 runs the strips in pairs: 1046 = 32 pairs + one strip + 6 inputs */
        {20, 1046, 128, 19},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int B = shapes[s][0], in = shapes[s][1], out = shapes[s][2], n = shapes[s][3];
        size_t cursor = 0;
        nn_mlp m;
        nn_mlp_layout(&m, in, NULL, 0, out, NN_ACT_RELU, &cursor);
        float *p = nn_alloc_floats(cursor, NULL), *g = nn_alloc_floats(cursor, NULL);
        float *x = malloc((size_t)B * in * 4), *dy = malloc((size_t)B * out * 4);
        float *dx = malloc((size_t)B * in * 4), *dxr = malloc((size_t)B * in * 4);
        float *dwr = calloc((size_t)in * out, 4), *dbr = calloc((size_t)out, 4);
        fill(p, cursor, -0.5f, 0.5f);
        fill(x, (size_t)B * in, -1, 1);
        fill(dy, (size_t)B * out, -1, 1);
        nn_cache c;
        CHECK_INT_EQ(nn_cache_init(&c, &m, B, NULL), CALF_OK);
        nn_mlp_forward_v(&m, p, 5, x, B, &c, NULL);
        /* rows [1, 1 + n), then (the packed W^T reused) rows [0, 1) */
        nn_mlp_backward_set(&m, p, &c, 1, n, dy + out, g, dx + in);
        nn_mlp_backward(&m, p, &c, 0, 1, dy, g, dx);
        ref_backward_input(dy, p + m.w_off[0], n + 1, in, out, dxr);
        CHECK(bits_equal(dx, dxr, (size_t)(n + 1) * in));
        ref_backward_params(x + in, dy + out, n, in, out, dwr, dbr);
        ref_backward_params(x, dy, 1, in, out, dwr, dbr);
        CHECK(bits_equal(g + m.w_off[0], dwr, (size_t)in * out));
        CHECK(bits_equal(g + m.b_off[0], dbr, (size_t)out));
        nn_cache_free(&c);
        free(p), free(g), free(x), free(dy), free(dx), free(dxr), free(dwr), free(dbr);
    }
}

/* ------------------------------------------------------------ activations */

/* nn_transpose against its definition, on shapes that take the 8x8 register blocks, the
 * columns and rows they leave, and neither (a copy, so exact): each element distinct. */
static void test_transpose(void) {
    static const int shapes[][2] = {{1, 1},  {3, 17}, {8, 8},   {9, 9},    {16, 7},   {7, 16},
                                    {21, 37}, {100, 64}, {128, 512}, {512, 512}, {1024, 128}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int rows = shapes[s][0], cols = shapes[s][1];
        size_t n = (size_t)rows * cols;
        float *w = malloc(n * sizeof *w), *wt = malloc(n * sizeof *wt), *ref = malloc(n * sizeof *ref);
        CHECK(w && wt && ref);
        if (!w || !wt || !ref) return;
        for (size_t e = 0; e < n; e++) w[e] = (float)e - 0.5f * (float)n;
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++) ref[(size_t)j * rows + i] = w[(size_t)i * cols + j];
        nn_transpose(w, rows, cols, wt);
        if (!bits_equal(wt, ref, n)) fprintf(stderr, "transpose %d x %d differs\n", rows, cols);
        CHECK(bits_equal(wt, ref, n));
        free(w), free(wt), free(ref);
    }
}

static void test_tanh(void) {
    const int n = 400003; /* odd: the vector loop's tail runs too */
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    for (int i = 0; i < n; i++) x[i] = -20.0f + 40.0f * (float)i / (float)(n - 1);
    nn_tanh(x, y, (size_t)n);
    double maxerr = 0.0;
    int same_as_scalar = 1, odd = 1;
    for (int i = 0; i < n; i++) {
        double e = fabs((double)y[i] - tanh((double)x[i]));
        if (e > maxerr) maxerr = e;
        float s = nn_tanh1(x[i]);
        if (memcmp(&s, &y[i], sizeof s) != 0) same_as_scalar = 0;
        if (nn_tanh1(-x[i]) != -y[i]) odd = 0;
    }
    printf("tanh: max |err| on [-20, 20] = %.3g\n", maxerr);
    CHECK(maxerr <= 4e-7);
    CHECK(same_as_scalar);
    CHECK(odd);
    /* dense near zero, where relative accuracy matters for small pre-activations */
    double maxrel = 0.0;
    for (int i = 1; i < 100000; i++) {
        float v = (float)i * 1e-5f;
        double t = tanh((double)v);
        double e = fabs((double)nn_tanh1(v) - t) / t;
        if (e > maxrel) maxrel = e;
    }
    CHECK(maxrel < 1e-6);
    /* in place equals out of place */
    nn_tanh(x, x, (size_t)n);
    CHECK(bits_equal(x, y, (size_t)n));
    /* saturation and special values */
    const float big[] = {8.0f, 9.0f, 15.0f, 1e3f, 1e30f, 3.4e38f, INFINITY};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        CHECK(nn_tanh1(big[i]) <= 1.0f && nn_tanh1(big[i]) >= 1.0f - 3e-7f);
        CHECK(nn_tanh1(-big[i]) == -nn_tanh1(big[i]));
    }
    CHECK(nn_tanh1(0.0f) == 0.0f && !signbit(nn_tanh1(0.0f)));
    CHECK(signbit(nn_tanh1(-0.0f)));
    CHECK(isnan(nn_tanh1(NAN)));
    CHECK(nn_tanh1(1e-30f) == 1e-30f || fabsf(nn_tanh1(1e-30f) - 1e-30f) < 1e-36f);
    free(x);
    free(y);
}

static void test_relu(void) {
    float x[11] = {-3, -1, -0.5f, -0.0f, 0, 1e-30f, 0.5f, 1, 2, -1e-30f, 7};
    float y[11], dh[11], dz[11];
    nn_relu(x, y, 11);
    for (int i = 0; i < 11; i++) CHECK(y[i] == (x[i] > 0 ? x[i] : 0.0f));
    for (int i = 0; i < 11; i++) dh[i] = (float)(i + 1);
    nn_activation_backward(NN_ACT_RELU, y, dh, dz, 11);
    for (int i = 0; i < 11; i++) CHECK(dz[i] == (x[i] > 0 ? dh[i] : 0.0f));
    nn_activation_backward(NN_ACT_TANH, y, dh, dz, 11);
    for (int i = 0; i < 11; i++) CHECK(dz[i] == dh[i] * (1.0f - y[i] * y[i]));
    memcpy(dz, dh, sizeof dz);
    nn_activation_backward(NN_ACT_RELU, y, dz, dz, 11); /* in place */
    for (int i = 0; i < 11; i++) CHECK(dz[i] == (x[i] > 0 ? dh[i] : 0.0f));
    nn_relu(x, x, 11);
    CHECK(bits_equal(x, y, 11));
}

/* ------------------------------------------------------------ layout and init */

static void test_layout_init(void) {
    size_t cursor = 0;
    const int hidden[2] = {64, 64};
    nn_mlp actor, critic;
    nn_mlp_layout(&actor, 4, hidden, 2, 2, NN_ACT_TANH, &cursor);
    size_t actor_end = cursor;
    nn_mlp_layout(&critic, 4, hidden, 2, 1, NN_ACT_TANH, &cursor);
    size_t log_std_off = cursor;
    cursor += 3;
    CHECK_INT_EQ(actor.num_layers, 3);
    CHECK_INT_EQ(actor.offset, 0);
    CHECK_INT_EQ(actor.num_params, actor_end);
    CHECK_INT_EQ(actor_end, 4 * 64 + 64 + 64 * 64 + 64 + 64 * 2 + 2);
    CHECK_INT_EQ(critic.offset, actor_end);
    CHECK_INT_EQ(critic.offset + critic.num_params, log_std_off);
    for (int l = 0; l < 3; l++) {
        CHECK_INT_EQ(actor.w_off[l] % 16, 0);
        CHECK_INT_EQ(critic.w_off[l] % 16, 0);
        CHECK_INT_EQ(actor.b_off[l], actor.w_off[l] + (size_t)actor.sizes[l] * actor.sizes[l + 1]);
        if (l > 0) CHECK(actor.w_off[l] >= actor.b_off[l - 1] + (size_t)actor.sizes[l]);
    }
    CHECK(critic.w_off[0] >= actor_end);

    float *p = nn_alloc_floats(cursor, NULL);
    CHECK(((uintptr_t)p % 64) == 0);
    for (size_t i = 0; i < cursor; i++) p[i] = 42.0f;
    calf_rng rng;
    calf_rng_seed(&rng, 7, 0, CALF_RNG_INIT);
    nn_mlp_init(&critic, p, sqrtf(2.0f), 1.0f, &rng, NULL);
    /* nothing outside the critic's span touched, biases and padding zero */
    CHECK(p[actor_end - 1] == 42.0f && p[log_std_off] == 42.0f);
    for (size_t i = critic.offset; i < critic.w_off[0]; i++) CHECK(p[i] == 0.0f);
    for (int l = 0; l < 3; l++)
        for (int o = 0; o < critic.sizes[l + 1]; o++) CHECK(p[critic.b_off[l] + o] == 0.0f);
    nn_mlp_init(&actor, p, sqrtf(2.0f), 0.01f, &rng, NULL);
    /* the policy head's columns have norm 0.01 */
    for (int o = 0; o < 2; o++) {
        double s = 0.0;
        for (int i = 0; i < 64; i++) {
            double v = p[actor.w_off[2] + (size_t)i * 2 + o];
            s += v * v;
        }
        CHECK_NEAR(sqrt(s), 0.01, 1e-7);
    }
    /* same stream, same bits */
    float *q = nn_alloc_floats(cursor, NULL);
    calf_rng_seed(&rng, 7, 0, CALF_RNG_INIT);
    nn_mlp_init(&critic, q, sqrtf(2.0f), 1.0f, &rng, NULL);
    nn_mlp_init(&actor, q, sqrtf(2.0f), 0.01f, &rng, NULL);
    CHECK(bits_equal(p, q, log_std_off));
    free(p);
    free(q);
}

static void test_orthogonal(void) {
    static const struct { int rows, cols; float gain; } cases[] = {
        {64, 64, 1.41421356f}, {4, 64, 1.41421356f}, {64, 4, 1.0f},
        {64, 2, 0.01f},        {64, 1, 1.0f},        {3, 5, 2.0f},
    };
    calf_rng rng;
    calf_rng_seed(&rng, 3, 0, CALF_RNG_INIT);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int rows = cases[c].rows, cols = cases[c].cols;
        double g2 = (double)cases[c].gain * cases[c].gain;
        float *w = malloc((size_t)rows * cols * sizeof *w);
        nn_orthogonal_init(w, rows, cols, cases[c].gain, &rng, NULL);
        /* W^T W (cols x cols) when rows >= cols, else W W^T (rows x rows) */
        int ns = rows >= cols ? cols : rows, nb = rows >= cols ? rows : cols;
        double maxerr = 0.0;
        for (int a = 0; a < ns; a++)
            for (int b = 0; b < ns; b++) {
                double s = 0.0;
                for (int k = 0; k < nb; k++) {
                    double u = rows >= cols ? w[k * cols + a] : w[a * cols + k];
                    double v = rows >= cols ? w[k * cols + b] : w[b * cols + k];
                    s += u * v;
                }
                double e = fabs(s - (a == b ? g2 : 0.0));
                if (e > maxerr) maxerr = e;
            }
        CHECK(maxerr <= 1e-6 * g2);
        /* not degenerate: entries vary in sign */
        int pos = 0;
        for (int i = 0; i < rows * cols; i++) pos += w[i] > 0;
        CHECK(rows * cols < 4 || (pos > 0 && pos < rows * cols));
        free(w);
    }
    /* deterministic per stream, different across streams */
    float a[64 * 64], b[64 * 64];
    calf_rng_seed(&rng, 1, 0, CALF_RNG_INIT);
    nn_orthogonal_init(a, 64, 64, 1.0f, &rng, NULL);
    calf_rng_seed(&rng, 1, 0, CALF_RNG_INIT);
    nn_orthogonal_init(b, 64, 64, 1.0f, &rng, NULL);
    CHECK(bits_equal(a, b, 64 * 64));
    calf_rng_seed(&rng, 2, 0, CALF_RNG_INIT);
    nn_orthogonal_init(b, 64, 64, 1.0f, &rng, NULL);
    CHECK(!bits_equal(a, b, 64 * 64));
}

/* ------------------------------------------------------------ row independence */

static void check_row_independence(int in, const int *hidden, int nh, int out,
                                   nn_activation act) {
    size_t cursor = 5; /* an MLP need not start at 0 */
    nn_mlp m;
    nn_mlp_layout(&m, in, hidden, nh, out, act, &cursor);
    float *p = nn_alloc_floats(cursor, NULL);
    calf_rng rng;
    calf_rng_seed(&rng, 11, 0, CALF_RNG_INIT);
    nn_mlp_init(&m, p, sqrtf(2.0f), 1.0f, &rng, NULL);
    for (int l = 0; l < m.num_layers; l++) fill(p + m.b_off[l], m.sizes[l + 1], -0.2f, 0.2f);

    enum { N = 37 };
    float *X = malloc(N * in * 4), *Y = malloc(N * out * 4), *y = malloc(N * out * 4);
    float *Z = malloc(N * in * 4);
    fill(X, (size_t)N * in, -2, 2);
    nn_cache c;
    nn_cache_init(&c, &m, N, NULL);
    nn_mlp_forward(&m, p, X, N, &c, Y);
    CHECK(bits_equal(Y, c.act[m.num_layers], (size_t)N * out));

    /* forward: each row alone, and inside batches of other sizes at other positions */
    int fwd_ok = 1;
    for (int r = 0; r < N; r++) {
        nn_mlp_forward(&m, p, X + r * in, 1, &c, y);
        if (!bits_equal(y, Y + r * out, out)) fwd_ok = 0;
    }
    const int sizes[] = {2, 3, 4, 5, 8, 9, 13, 31, 37};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int B = sizes[s];
        for (int start = 0; start < 5; start++) {
            int idx[N];
            for (int j = 0; j < B; j++) idx[j] = (start + j * 7) % N;
            for (int j = 0; j < B; j++) memcpy(Z + j * in, X + idx[j] * in, in * 4);
            nn_mlp_forward(&m, p, Z, B, &c, y);
            for (int j = 0; j < B; j++)
                if (!bits_equal(y + j * out, Y + idx[j] * out, out)) fwd_ok = 0;
        }
    }
    CHECK(fwd_ok);

    /* backward: rows [a, a+8) of the 37-row batch, versus the same rows at positions
     * [9, 17) of a 20-row batch, versus a batch of just those rows, versus one call per
     * row in ascending order (the order of accumulation is the same) */
    const int a = 3, cnt = 8;
    float *dy = malloc(cnt * out * 4);
    fill(dy, (size_t)cnt * out, -1, 1);
    float *g1 = nn_alloc_floats(cursor, NULL), *g2 = nn_alloc_floats(cursor, NULL),
          *g3 = nn_alloc_floats(cursor, NULL), *g4 = nn_alloc_floats(cursor, NULL),
          *g5 = nn_alloc_floats(cursor, NULL);
    float *dx1 = malloc(cnt * in * 4), *dx2 = malloc(cnt * in * 4), *dx3 = malloc(cnt * in * 4),
          *dx4 = malloc(cnt * in * 4);
    nn_mlp_forward(&m, p, X, N, &c, NULL);
    nn_mlp_backward(&m, p, &c, a, cnt, dy, g1, dx1);

    fill(Z, (size_t)20 * in, -2, 2);
    memcpy(Z + 9 * in, X + a * in, (size_t)cnt * in * 4);
    nn_mlp_forward(&m, p, Z, 20, &c, NULL);
    nn_mlp_backward(&m, p, &c, 0, cnt, dy, g5, NULL); /* other rows, then reuse the cache */
    nn_mlp_backward(&m, p, &c, 9, cnt, dy, g2, dx2);

    nn_mlp_forward(&m, p, X + a * in, cnt, &c, NULL);
    nn_mlp_backward(&m, p, &c, 0, cnt, dy, g3, dx3);

    nn_mlp_forward(&m, p, X, N, &c, NULL);
    for (int r = 0; r < cnt; r++)
        nn_mlp_backward(&m, p, &c, a + r, 1, dy + r * out, g4, dx4 + r * in);

    CHECK(bits_equal(g1, g2, cursor));
    CHECK(bits_equal(g1, g3, cursor));
    CHECK(bits_equal(g1, g4, cursor));
    CHECK(bits_equal(dx1, dx2, (size_t)cnt * in));
    CHECK(bits_equal(dx1, dx3, (size_t)cnt * in));
    CHECK(bits_equal(dx1, dx4, (size_t)cnt * in));
    /* gradients only inside the MLP's span, and not all zero */
    int inside = 1, nonzero = 0;
    for (size_t i = 0; i < cursor; i++) {
        if ((i < m.offset || i >= m.offset + m.num_params) && g1[i] != 0.0f) inside = 0;
        if (g1[i] != 0.0f) nonzero++;
    }
    CHECK(inside);
    CHECK(nonzero > 0);
    /* accumulation: backward into a non-zero buffer adds */
    memcpy(g5, g1, cursor * 4);
    nn_mlp_forward(&m, p, X, N, &c, NULL);
    nn_mlp_backward(&m, p, &c, a, cnt, dy, g5, NULL);
    int doubled = 1;
    for (size_t i = 0; i < cursor; i++)
        if (fabsf(g5[i] - 2.0f * g1[i]) > 1e-5f * (1.0f + fabsf(g1[i]))) doubled = 0;
    CHECK(doubled);
    /* _set writes the MLP's span over whatever was there (the bits of zeroing it and
     * accumulating) and leaves the rest of the array alone */
    for (size_t i = 0; i < cursor; i++) g5[i] = 1000.0f + (float)i;
    nn_mlp_forward(&m, p, X, N, &c, NULL);
    nn_mlp_backward_set(&m, p, &c, a, cnt, dy, g5, NULL);
    int same_inside = 1, kept_outside = 1;
    size_t written = 0;
    for (size_t i = 0; i < cursor; i++) {
        int in_layer = 0;
        for (int l = 0; l < m.num_layers; l++) {
            size_t w0 = m.w_off[l], b1 = m.b_off[l] + (size_t)m.sizes[l + 1];
            if (i >= w0 && i < b1) in_layer = 1; /* weights then biases, contiguous */
        }
        if (in_layer) {
            written++;
            if (!bits_equal(g5 + i, g1 + i, 1)) same_inside = 0;
        } else if (g5[i] != 1000.0f + (float)i) {
            kept_outside = 0; /* other nets' ranges and alignment padding */
        }
    }
    CHECK(same_inside);
    CHECK(kept_outside);
    /* _add over a "left sibling": left + g1 in the MLP's ranges, nothing else touched */
    float *left = nn_alloc_floats(cursor, NULL);
    fill(left, cursor, -1, 1);
    memcpy(g5, left, cursor * 4);
    nn_mlp_forward(&m, p, X, N, &c, NULL);
    nn_mlp_backward_add(&m, p, &c, a, cnt, dy, g5, NULL);
    int added = 1;
    for (size_t i = 0; i < cursor; i++) {
        float want = left[i];
        for (int l = 0; l < m.num_layers; l++)
            if (i >= m.w_off[l] && i < m.b_off[l] + (size_t)m.sizes[l + 1]) want = left[i] + g1[i];
        if (!bits_equal(g5 + i, &want, 1)) added = 0;
    }
    CHECK(added);
    free(left);
    CHECK(written > 0 && written < m.num_params); /* this layout has padding */

    nn_cache_free(&c);
    nn_cache_free(NULL);
    free(X), free(Y), free(y), free(Z), free(dy), free(p);
    free(g1), free(g2), free(g3), free(g4), free(g5), free(dx1), free(dx2), free(dx3), free(dx4);
}

static void test_row_independence(void) {
    const int h64[2] = {64, 64}, odd[2] = {13, 9}, wide[3] = {24, 17, 40};
    check_row_independence(4, h64, 2, 2, NN_ACT_TANH); /* ppo_cartpole actor */
    check_row_independence(4, h64, 2, 1, NN_ACT_TANH); /* ppo_cartpole critic */
    check_row_independence(5, odd, 2, 3, NN_ACT_RELU);
    check_row_independence(7, wide, 3, 9, NN_ACT_TANH);
    check_row_independence(3, h64, 0, 16, NN_ACT_TANH); /* a single linear layer */
}

/* ------------------------------------------------------------ finite differences */

/* Double-precision reference MLP (exact tanh); loss = sum_r sum_o g[r][o] y[r][o]. */
static double ref_loss(const nn_mlp *m, const double *p, const double *x, const float *g,
                       int B) {
    double h[2][128];
    double loss = 0.0;
    for (int r = 0; r < B; r++) {
        const double *cur = x + (size_t)r * m->sizes[0];
        int which = 0;
        for (int l = 0; l < m->num_layers; l++) {
            int in = m->sizes[l], out = m->sizes[l + 1];
            double *nxt = h[which];
            for (int o = 0; o < out; o++) {
                double acc = p[m->b_off[l] + o];
                for (int i = 0; i < in; i++) acc += cur[i] * p[m->w_off[l] + (size_t)i * out + o];
                if (l + 1 < m->num_layers)
                    acc = m->act == NN_ACT_TANH ? tanh(acc) : (acc > 0 ? acc : 0.0);
                nxt[o] = acc;
            }
            cur = nxt;
            which ^= 1;
        }
        for (int o = 0; o < m->sizes[m->num_layers]; o++) loss += g[r * m->sizes[m->num_layers] + o] * cur[o];
    }
    return loss;
}

static void check_fd(int in, const int *hidden, int nh, int out, nn_activation act, int B,
                     int max_params_checked) {
    size_t cursor = 0;
    nn_mlp m;
    nn_mlp_layout(&m, in, hidden, nh, out, act, &cursor);
    float *p = nn_alloc_floats(cursor, NULL), *grad = nn_alloc_floats(cursor, NULL);
    calf_rng rng;
    calf_rng_seed(&rng, 5, 0, CALF_RNG_INIT);
    nn_mlp_init(&m, p, 1.0f, 1.0f, &rng, NULL);
    for (int l = 0; l < m.num_layers; l++) fill(p + m.b_off[l], m.sizes[l + 1], -0.3f, 0.3f);
    float *x = malloc((size_t)B * in * 4), *g = malloc((size_t)B * out * 4),
          *dx = malloc((size_t)B * in * 4);
    fill(x, (size_t)B * in, -1.5f, 1.5f);
    fill(g, (size_t)B * out, -1, 1);
    nn_cache c;
    nn_cache_init(&c, &m, B, NULL);
    nn_mlp_forward(&m, p, x, B, &c, NULL);
    nn_mlp_backward(&m, p, &c, 0, B, g, grad, dx);

    double *pd = malloc(cursor * sizeof *pd), *xd = malloc((size_t)B * in * sizeof *xd);
    for (size_t i = 0; i < cursor; i++) pd[i] = p[i];
    for (int i = 0; i < B * in; i++) xd[i] = x[i];
    const double h = 1e-5;
    double worst = 0.0;
    /* parameters: every one for small nets, an even spread for big ones */
    size_t stride = cursor / (size_t)max_params_checked + 1;
    for (size_t i = m.offset; i < m.offset + m.num_params; i += stride) {
        double save = pd[i];
        pd[i] = save + h;
        double lp = ref_loss(&m, pd, xd, g, B);
        pd[i] = save - h;
        double lm = ref_loss(&m, pd, xd, g, B);
        pd[i] = save;
        double fd = (lp - lm) / (2 * h);
        double err = fabs(fd - grad[i]) / (1e-3 + fabs(fd));
        if (err > worst) worst = err;
        if (fabs(fd - grad[i]) > 2e-5 + 1e-4 * fabs(fd))
            fprintf(stderr, "param %zu: analytic %.9g fd %.9g\n", i, (double)grad[i], fd);
        CHECK(fabs(fd - grad[i]) <= 2e-5 + 1e-4 * fabs(fd));
    }
    for (int i = 0; i < B * in; i++) {
        double save = xd[i];
        xd[i] = save + h;
        double lp = ref_loss(&m, pd, xd, g, B);
        xd[i] = save - h;
        double lm = ref_loss(&m, pd, xd, g, B);
        xd[i] = save;
        double fd = (lp - lm) / (2 * h);
        if (fabs(fd - dx[i]) > 2e-5 + 1e-4 * fabs(fd))
            fprintf(stderr, "input %d: analytic %.9g fd %.9g\n", i, (double)dx[i], fd);
        CHECK(fabs(fd - dx[i]) <= 2e-5 + 1e-4 * fabs(fd));
    }
    printf("fd %d-[%d hidden]-%d %s: worst relative error %.2g\n", in, nh, out,
           act == NN_ACT_TANH ? "tanh" : "relu", worst);
    nn_cache_free(&c);
    free(p), free(grad), free(x), free(g), free(dx), free(pd), free(xd);
}

static void test_fd(void) {
    const int h1[1] = {10}, h2[2] = {16, 12}, h64[2] = {64, 64}, h9[1] = {9};
    check_fd(5, NULL, 0, 3, NN_ACT_TANH, 4, 1 << 30);  /* linear, small head */
    check_fd(6, NULL, 0, 11, NN_ACT_TANH, 3, 1 << 30); /* linear, vector path */
    check_fd(4, h1, 1, 8, NN_ACT_TANH, 5, 1 << 30);    /* tanh layer */
    check_fd(4, h9, 1, 8, NN_ACT_RELU, 5, 1 << 30);    /* relu layer */
    check_fd(4, h2, 2, 2, NN_ACT_TANH, 6, 1 << 30);    /* 2-hidden MLP */
    check_fd(3, h2, 2, 17, NN_ACT_RELU, 5, 1 << 30);
    check_fd(4, h64, 2, 2, NN_ACT_TANH, 8, 600);       /* the ppo_cartpole actor */
}

int main(void) {
    calf_rng_seed(&g_rng, 2024, 0, CALF_RNG_INIT);
    test_linear_order();
    test_strip_dx();
    test_transpose();
    test_tanh();
    test_relu();
    test_layout_init();
    test_orthogonal();
    test_row_independence();
    test_fd();
    return test_report("test_nn");
}
