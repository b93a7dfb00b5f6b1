/* export_c.c: the writer behind `calf export`: networks as C functions with their weights
 * in hex, calf_policy_act's body as the algorithm words it, and the arithmetic they call.
 * Each layer's output is the chain src/numerics/nn.h writes down (from the bias over the
 * inputs in ascending order, or eight lanes and a fixed tree for a head narrower than
 * NN_SMALL_OUT), each multiply-add fused as nn_madd is (always: fmaf), hidden tanh is
 * nn_tanh's approximation with its constants, and every constant is written in hex so it
 * reads back as the same bits. The file's head (which run, which env) is tools/export.c's. */
#include "numerics/export_c.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cmath.h"
#include "base/mem.h"

/* Running out of memory is sticky here, as in bytes_buf: the algorithm's calls return
 * nothing, and export_c_write checks once, after them. */
struct export_c {
    bytes_buf nets;      /* file scope: each network's weights and forward function */
    bytes_buf body;      /* calf_policy_act's statements */
    bool uses_tanh, uses_relu, uses_conv;
    calf_error oom;      /* a scratch allocation that failed; status CALF_OK while none */
};

/* ---- what algorithms call ------------------------------------------------------ */

static void put_vf(bytes_buf *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    CALF_ASSERT(n >= 0);
    char *at = (char *)bytes_buf_room(b, (size_t)n + 1);
    if (!at) return; /* b->failed */
    vsnprintf(at, (size_t)n + 1, fmt, ap);
    b->len--; /* keep the text without its terminator */
}

static void put_f(bytes_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put_f(bytes_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    put_vf(b, fmt, ap);
    va_end(ap);
}

void export_c_printf(bytes_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    put_vf(b, fmt, ap);
    va_end(ap);
}

void export_c_body(export_c *x, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    put_vf(&x->body, fmt, ap);
    va_end(ap);
}

const char *export_c_double(double v, char *buf) {
    CALF_ASSERT(isfinite(v));
    snprintf(buf, EXPORT_C_NUM, "%a", v);
    return buf;
}

const char *export_c_float(float v, char *buf) {
    /* a float's value as a double is exact, and so is its %a text read back as a float */
    CALF_ASSERT(isfinite(v));
    snprintf(buf, EXPORT_C_NUM, "%af", (double)v);
    return buf;
}

/* `static const float NAME[n] = {...};`, six values a line */
static void put_floats(bytes_buf *b, const char *name, const float *v, size_t n) {
    char num[EXPORT_C_NUM];
    put_f(b, "static const float %s[%zu] = {", name, n);
    for (size_t i = 0; i < n; i++)
        put_f(b, "%s%s%s", i % 6 ? " " : "\n    ", export_c_float(v[i], num), i + 1 < n ? "," : "");
    put_f(b, "\n};\n");
}

void export_c_mlp(export_c *x, const char *name, const nn_mlp *m, const float *params) {
    int L = m->num_layers;
    bytes_buf *b = &x->nets;
    const char *act = m->act == NN_ACT_TANH ? "tanh" : "relu";
    put_f(b, "\n/* network %s: %d", name, m->sizes[0]);
    for (int l = 1; l <= L; l++) put_f(b, " -> %d", m->sizes[l]);
    put_f(b, ", %s after each hidden layer; weights (out, in): row o feeds output o */\n", act);
    if (L > 1) {
        if (m->act == NN_ACT_TANH) x->uses_tanh = true;
        else x->uses_relu = true;
    }
    for (int l = 0; l < L; l++) {
        int in = m->sizes[l], out = m->sizes[l + 1];
        /* transposed, so that each output's chain reads its weights in order */
        float *wt = mem_alloc((size_t)in * (size_t)out * sizeof *wt, &x->oom);
        if (!wt) return;
        nn_transpose(params + m->w_off[l], in, out, wt);
        char arr[96];
        snprintf(arr, sizeof arr, "%s_w%d", name, l);
        put_floats(b, arr, wt, (size_t)in * (size_t)out);
        snprintf(arr, sizeof arr, "%s_b%d", name, l);
        put_floats(b, arr, params + m->b_off[l], (size_t)out);
        free(wt);
    }
    put_f(b, "\nstatic void %s_forward(const float *x, float *y) {\n", name);
    if (L > 1) {
        put_f(b, "    float");
        for (int l = 1; l < L; l++) put_f(b, "%s h%d[%d]", l > 1 ? "," : "", l, m->sizes[l]);
        put_f(b, ";\n");
    }
    for (int l = 0; l < L; l++) {
        char in[16], out[16];
        snprintf(in, sizeof in, l == 0 ? "x" : "h%d", l);
        snprintf(out, sizeof out, l + 1 == L ? "y" : "h%d", l + 1);
        put_f(b, "    calf_linear(%s, %s_w%d, %s_b%d, %d, %d, %s);\n", in, name, l, name, l, m->sizes[l],
              m->sizes[l + 1], out);
        if (l + 1 < L) put_f(b, "    calf_%s(%s, %d);\n", act, out, m->sizes[l + 1]);
    }
    put_f(b, "}\n");
}

int export_c_net(export_c *x, const char *name, const net *n, const float *params,
                 calf_error *err) {
    const char *missing = net_unexportable(n);
    if (missing)
        return calf_error_set(err, CALF_EINVAL,
                              "calf export: network %s has %s layers, which calf export cannot "
                              "write yet; calf play and calf.load_policy run this policy",
                              name, missing);
    const nn_mlp *m = net_as_mlp(n);
    if (m && (!n->in_u8 || n->in_scale == 1.0f)) {
        export_c_mlp(x, name, m, params);
        return CALF_OK;
    }
    /* conv layers (conv2d.h's chain per output, padding taps multiplied as +0, ReLU),
     * then the MLP, after x * in_scale for bytes given as floats (exact): net_forward_v */
    bytes_buf *b = &x->nets;
    char inner[96], arr[128], num[EXPORT_C_NUM];
    int L = n->num_layers;
    const nn_mlp *head = &n->layer[L - 1].mlp;
    CALF_ASSERT(n->layer[L - 1].kind == NET_MLP);
    snprintf(inner, sizeof inner, "%s_mlp", name);
    export_c_mlp(x, inner, head, params);
    for (int k = 0; k + 1 < L; k++) {
        const conv2d *c = &n->layer[k].conv;
        CALF_ASSERT(n->layer[k].kind == NET_CONV2D); /* net_unexportable passed it */
        put_f(b, "\n/* network %s, conv layer %d: %dx%dx%d -> %dx%dx%d, kernel %d, stride %d, "
                 "padding %d, ReLU; weights (kh, kw, c, f) */\n",
              name, k, c->in_h, c->in_w, c->in_c, c->out_h, c->out_w, c->filters, c->kernel,
              c->stride, c->pad);
        snprintf(arr, sizeof arr, "%s_c%d_w", name, k);
        put_floats(b, arr, params + c->w_off, (size_t)conv2d_patch(c) * (size_t)c->filters);
        snprintf(arr, sizeof arr, "%s_c%d_b", name, k);
        put_floats(b, arr, params + c->b_off, (size_t)c->filters);
        x->uses_conv = x->uses_relu = true;
    }
    put_f(b, "\nstatic void %s_forward(const float *x, float *y) {\n", name);
    const char *in = "x";
    if (n->in_u8 && n->in_scale != 1.0f) {
        put_f(b, "    static float s[%d];\n"
                 "    for (int i = 0; i < %d; i++) s[i] = x[i] * %s;\n",
              n->in, n->in, export_c_float(n->in_scale, num));
        in = "s";
    }
    for (int k = 0; k + 1 < L; k++) {
        const conv2d *c = &n->layer[k].conv;
        char src[16];
        snprintf(src, sizeof src, "c%d", k - 1);
        put_f(b, "    static float c%d[%zu];\n"
                 "    calf_conv2d(%s, %s_c%d_w, %s_c%d_b, %d, %d, %d, %d, %d, %d, %d, c%d);\n"
                 "    calf_relu(c%d, %zu);\n",
              k, conv2d_out_size(c), k == 0 ? in : src,
              name, k, name, k, c->in_h, c->in_w, c->in_c, c->filters, c->kernel, c->stride,
              c->pad, k, k, conv2d_out_size(c));
    }
    if (L > 1) snprintf(arr, sizeof arr, "c%d", L - 2);
    put_f(b, "    %s_forward(%s, y);\n}\n", inner, L > 1 ? arr : in);
    return CALF_OK;
}

void export_c_argmax_return(export_c *x, const char *v, int n) {
    export_c_body(x,
                  "    int best = 0;\n"
                  "    for (int j = 1; j < %d; j++)\n"
                  "        if (%s[j] > %s[best]) best = j;\n"
                  "    action[0] = (float)best;\n"
                  "    return best;\n",
                  n, v, v);
}

void export_c_masked_argmax_return(export_c *x, const char *v, int n) {
    export_c_body(x,
                  "    int best = -1;\n"
                  "    for (int j = 0; j < %d; j++)\n"
                  "        if ((!mask || mask[j]) && (best < 0 || %s[j] > %s[best])) best = j;\n"
                  "    action[0] = (float)best;\n"
                  "    return best;\n",
                  n, v, v);
}

void export_c_multi_argmax_return(export_c *x, const char *v, const int *nvec, int D,
                                  bool masked) {
    export_c_body(x, "    static const int nvec[%d] = {", D);
    for (int d = 0; d < D; d++) export_c_body(x, "%s%d", d ? ", " : "", nvec[d]);
    export_c_body(x,
                  "};\n"
                  "    for (int d = 0, off = 0; d < %d; off += nvec[d], d++) {\n"
                  "        int best = -1;\n"
                  "        for (int j = off; j < off + nvec[d]; j++)\n"
                  "            if (%s(best < 0 || %s[j] > %s[best])) best = j;\n"
                  "        action[d] = (float)(best - off);\n"
                  "    }\n"
                  "    return 0;\n",
                  D, masked ? "(!mask || mask[j]) && " : "", v, v);
}

/* ---- the file after its head ------------------------------------------------------- */

/* Floating-point contraction off, whatever the compiler's default: clang honours C99's
 * pragma, GCC ignores it (and warns) but takes its own. Then the arithmetic of nn.h. */
static const char prelude_pragmas[] =
    "#if defined(__clang__)\n"
    "#pragma STDC FP_CONTRACT OFF\n"
    "#elif defined(__GNUC__)\n"
    "#pragma GCC optimize(\"fp-contract=off\")\n"
    "#endif\n"
    "\n"
    "#include <float.h>\n"
    "#include <math.h>\n"
    "#include <stdint.h>\n"
    "#include <string.h>\n"
    "\n"
    "/* 16 (ISO/IEC TS 18661-3): only _Float16 is widened, to float; float stays float. GCC\n"
    " * says so in its GNU modes for CPUs with AVX512-FP16. */\n"
    "#if !defined(FLT_EVAL_METHOD) || (FLT_EVAL_METHOD != 0 && FLT_EVAL_METHOD != 16)\n"
    "#error \"calf policy: float arithmetic must be done in float (FLT_EVAL_METHOD 0 or 16: SSE on x86, not x87)\"\n"
    "#endif\n";

static const char prelude_linear[] =
    "\n/* y = x W + b for one row, in calf's order: an output of a layer with 8 or more\n"
    " * starts from its bias and adds x[i] w[i] for i ascending; one of a narrower layer sums\n"
    " * lane i % 8 in eight lanes, then ((s0+s1)+(s2+s3)) + ((s4+s5)+(s6+s7)), then the bias. */\n"
    "static void calf_linear(const float *x, const float *w, const float *b, int in, int out, float *y) {\n"
    "    for (int o = 0; o < out; o++) {\n"
    "        const float *wo = w + (size_t)o * (size_t)in;\n"
    "        if (out >= 8) {\n"
    "            float acc = b[o];\n"
    "            for (int i = 0; i < in; i++) acc = calf_madd(x[i], wo[i], acc);\n"
    "            y[o] = acc;\n"
    "        } else {\n"
    "            float s[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};\n"
    "            for (int i = 0; i < in; i++) s[i % 8] = calf_madd(x[i], wo[i], s[i % 8]);\n"
    "            y[o] = b[o] + (((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])));\n"
    "        }\n"
    "    }\n"
    "}\n";

/* A conv layer on one NHWC sample, in conv2d.h's order: an output starts from its bias
 * and adds patch[p] W[p][f] for p = (kh k + kw) C + c ascending, a padding tap as +0. */
static const char prelude_conv2d[] =
    "\nstatic void calf_conv2d(const float *x, const float *w, const float *b, int H, int W, int C,\n"
    "                        int F, int k, int s, int pad, float *y) {\n"
    "    int OH = (H + 2 * pad - k) / s + 1, OW = (W + 2 * pad - k) / s + 1;\n"
    "    for (int oh = 0; oh < OH; oh++)\n"
    "        for (int ow = 0; ow < OW; ow++)\n"
    "            for (int f = 0; f < F; f++) {\n"
    "                float acc = b[f];\n"
    "                for (int kh = 0; kh < k; kh++)\n"
    "                    for (int kw = 0; kw < k; kw++) {\n"
    "                        int ih = oh * s + kh - pad, iw = ow * s + kw - pad;\n"
    "                        int inside = ih >= 0 && ih < H && iw >= 0 && iw < W;\n"
    "                        for (int c = 0; c < C; c++) {\n"
    "                            float v = inside ? x[((size_t)ih * (size_t)W + (size_t)iw) * (size_t)C + (size_t)c] : 0.0f;\n"
    "                            acc = calf_madd(v, w[((size_t)(kh * k + kw) * (size_t)C + (size_t)c) * (size_t)F + (size_t)f], acc);\n"
    "                        }\n"
    "                    }\n"
    "                y[((size_t)oh * (size_t)OW + (size_t)ow) * (size_t)F + (size_t)f] = acc;\n"
    "            }\n"
    "}\n";

/* Whether the body's text holds name. */
static bool body_calls(const bytes_buf *body, const char *name) {
    size_t n = strlen(name);
    for (size_t i = 0; i + n <= body->len; i++)
        if (memcmp(body->data + i, name, n) == 0) return true;
    return false;
}

static void put_prelude(bytes_buf *b, const export_c *x) {
    bytes_buf_put_str(b, prelude_pragmas);
    put_f(b, "\n/* calf fuses its multiply-adds (fmaf, one rounding) on every CPU; this file does the\n"
             " * same. fmaf is exact on any machine; with hardware FMA (e.g. -mfma) it is also fast. */\n"
             "static float calf_madd(float a, float b, float c) { return fmaf(a, b, c); }\n");
    if (x->uses_tanh) {
        char c[EXPORT_C_NUM], p[7][EXPORT_C_NUM], q[4][EXPORT_C_NUM];
        const float pv[7] = {NN_TANH_P0, NN_TANH_P1, NN_TANH_P2, NN_TANH_P3,
                             NN_TANH_P4, NN_TANH_P5, NN_TANH_P6};
        const float qv[4] = {NN_TANH_Q0, NN_TANH_Q1, NN_TANH_Q2, NN_TANH_Q3};
        for (int k = 0; k < 7; k++) export_c_float(pv[k], p[k]);
        for (int k = 0; k < 4; k++) export_c_float(qv[k], q[k]);
        put_f(b,
              "\n/* calf's tanh (nn_tanh): a clamped rational approximation, within 2.6e-7 of tanh;\n"
              " * the clamp and the NaN pass-through work on the bits. */\n"
              "static float calf_tanh1(float v) {\n"
              "    const float c = %s;\n"
              "    uint32_t cb, ab, xb, rb;\n"
              "    float a = fabsf(v), x, x2, p, q, r;\n"
              "    memcpy(&cb, &c, sizeof cb);\n"
              "    memcpy(&ab, &a, sizeof ab);\n"
              "    xb = ab > cb ? cb : ab;\n"
              "    memcpy(&x, &xb, sizeof x);\n"
              "    x2 = x * x;\n"
              "    p = %s;\n"
              "    p = calf_madd(p, x2, %s);\n"
              "    p = calf_madd(p, x2, %s);\n"
              "    p = calf_madd(p, x2, %s);\n"
              "    p = calf_madd(p, x2, %s);\n"
              "    p = calf_madd(p, x2, %s);\n"
              "    p = calf_madd(p, x2, %s);\n"
              "    q = %s;\n"
              "    q = calf_madd(q, x2, %s);\n"
              "    q = calf_madd(q, x2, %s);\n"
              "    q = calf_madd(q, x2, %s);\n"
              "    r = copysignf((x * p) / q, v);\n"
              "    memcpy(&rb, &r, sizeof rb);\n"
              "    rb |= (0u - (uint32_t)(ab > 0x7f800000u)) & 0x7fc00000u;\n"
              "    memcpy(&r, &rb, sizeof r);\n"
              "    return r;\n"
              "}\n"
              "\n"
              "static void calf_tanh(float *x, int n) {\n"
              "    for (int i = 0; i < n; i++) x[i] = calf_tanh1(x[i]);\n"
              "}\n",
              export_c_float(NN_TANH_CLAMP, c), p[0], p[1], p[2], p[3], p[4], p[5], p[6], q[0], q[1],
              q[2], q[3]);
    }
    /* cm_tanh's own source, for an algorithm whose greedy action calls tanh in double */
    if (body_calls(&x->body, "calf_tanhd(")) {
        bytes_buf_put_str(b, "\n");
        bytes_buf_put_str(b, cm_src_cmath_tanh);
    }
    if (x->uses_relu)
        put_f(b, "\nstatic void calf_relu(float *x, int n) {\n"
                 "    for (int i = 0; i < n; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;\n"
                 "}\n");
    bytes_buf_put_str(b, prelude_linear);
    if (x->uses_conv) bytes_buf_put_str(b, prelude_conv2d);
}

export_c *export_c_new(calf_error *err) {
    export_c *x = mem_calloc(1, sizeof *x, err);
    if (x) calf_error_clear(&x->oom);
    return x;
}

void export_c_free(export_c *x) {
    if (!x) return;
    free(x->nets.data);
    free(x->body.data);
    free(x);
}

int export_c_write(const export_c *x, bool masked, bytes_buf *out, const char *what,
                   calf_error *err) {
    if (x->oom.status != CALF_OK)
        return calf_error_set(err, x->oom.status, "export: %s", x->oom.msg);
    put_prelude(out, x);
    unsigned char *at = x->nets.len ? bytes_buf_room(out, x->nets.len) : NULL;
    if (at) memcpy(at, x->nets.data, x->nets.len);
    if (masked)
        put_f(out, "\nint calf_policy_act_masked(const float *obs, const unsigned char *mask, "
                   "float *action) {\n");
    else
        put_f(out, "\nint calf_policy_act(const float *obs, float *action) {\n");
    at = x->body.len ? bytes_buf_room(out, x->body.len) : NULL;
    if (at) memcpy(at, x->body.data, x->body.len);
    put_f(out, "}\n");
    if (masked)
        put_f(out, "\nint calf_policy_act(const float *obs, float *action) {\n"
                   "    return calf_policy_act_masked(obs, 0, action);\n"
                   "}\n");
    if (x->nets.failed || x->body.failed || out->failed)
        return calf_error_set(err, CALF_ENOMEM,
                              "export: out of memory writing the C file of %s (%zu bytes so far)",
                              what, x->nets.len + x->body.len + out->len);
    return CALF_OK;
}
