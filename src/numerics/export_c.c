/* export_c.c: the writer behind `calf export`: networks as C functions with their weights
 * in hex, calf_policy_act's body as the algorithm words it, and the arithmetic they call.
 * Each layer's output is the chain src/numerics/nn.h writes down (from the bias over the
 * inputs in ascending order, or eight lanes and a fixed tree for a head narrower than
 * NN_SMALL_OUT), each multiply-add fused as nn_madd is (always: fmaf), hidden tanh is
 * nn_tanh's approximation with its constants (also in the LSTM's and GRU's gates, in
 * rnn.h's order), and every constant is written in hex so it reads back as the same bits.
 * Scratch is automatic arrays, never static: threads may call the file at once. The
 * file's head (which run, which env) is tools/export.c's. */
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
    bool uses_tanh, uses_relu, uses_conv, uses_lstm, uses_gru;
    int state_size;      /* floats of state a row carries (a network with a core); 0: none */
    size_t stack;        /* bytes of the arrays the networks' functions and the body declare
                            (scratch on the caller's stack: no static buffer, so calls are
                            reentrant) */
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

void export_c_body_floats(export_c *x, int n, const char *comment, ...) {
    CALF_ASSERT(n > 0);
    va_list ap;
    va_start(ap, comment);
    put_f(&x->body, "    float");
    int k = 0;
    for (const char *name; (name = va_arg(ap, const char *)) != NULL; k++) {
        put_f(&x->body, "%s %s[%d]", k ? "," : "", name, n);
        x->stack += (size_t)n * sizeof(float);
    }
    va_end(ap);
    CALF_ASSERT(k > 0);
    if (comment) put_f(&x->body, "; /* %s */\n", comment);
    else put_f(&x->body, ";\n");
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
        for (int l = 1; l < L; l++) {
            put_f(b, "%s h%d[%d]", l > 1 ? "," : "", l, m->sizes[l]);
            x->stack += (size_t)m->sizes[l] * sizeof(float);
        }
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

/* Conv layer k of network name: its shape as a comment and its weights, name_c{k}_w/_b. */
static void put_conv_arrays(export_c *x, const char *name, const conv2d *c, int k,
                            const float *params) {
    bytes_buf *b = &x->nets;
    char arr[128];
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

/* A scratch array of n floats, `float NAME[n]` (NAME fmt_name with k), in the function
 * being written: on the calling thread's stack, counted in x->stack. */
static void put_scratch(export_c *x, const char *fmt_name, int k, size_t n) {
    put_f(&x->nets, "    float ");
    put_f(&x->nets, fmt_name, k);
    put_f(&x->nets, "[%zu];\n", n);
    x->stack += n * sizeof(float);
}

/* Conv layer k's call on `in`, into c{k}, then its ReLU. */
static void put_conv_call(export_c *x, const char *name, const conv2d *c, int k,
                          const char *in) {
    put_scratch(x, "c%d", k, conv2d_out_size(c));
    put_f(&x->nets, "    calf_conv2d(%s, %s_c%d_w, %s_c%d_b, %d, %d, %d, %d, %d, %d, %d, c%d);\n"
             "    calf_relu(c%d, %zu);\n",
          in, name, k, name, k, c->in_h, c->in_w, c->in_c, c->filters,
          c->kernel, c->stride, c->pad, k, k, conv2d_out_size(c));
}

/* x * in_scale into s, for an observation of bytes given as floats (exact); "s" or "x". */
static const char *put_scaled_input(export_c *x, const net *n) {
    if (!n->in_u8 || n->in_scale == 1.0f) return "x";
    char num[EXPORT_C_NUM];
    put_scratch(x, "s", 0, (size_t)n->in);
    put_f(&x->nets, "    for (int i = 0; i < %d; i++) s[i] = x[i] * %s;\n", n->in,
          export_c_float(n->in_scale, num));
    return "s";
}

/* A Dict's per-key encoder (net.h's segments) on `in`, into e (n->cat floats), which the
 * trunk reads: each segment in turn, an image part's columns (times its scale, one
 * rounding, where that is not 1) through its own conv stack into its columns of e, a run
 * of vector parts copied as it is. Returns "e". */
static const char *put_encoder(export_c *x, const char *name, const net *n, const char *in) {
    bytes_buf *b = &x->nets;
    char num[EXPORT_C_NUM], src[64];
    put_scratch(x, "e", 0, (size_t)n->cat);
    for (int s = 0; s < n->num_segs; s++) {
        const net_seg *g = &n->seg[s];
        if (g->count == 0) {
            put_f(b, "    /* segment %d: columns %d..%d, vector parts, to e[%d..%d] */\n"
                     "    memcpy(e + %d, %s + %d, %d * sizeof(float));\n",
                  s, g->offset, g->offset + g->size - 1, g->col, g->col + g->width - 1, g->col,
                  in, g->offset, g->size);
            continue;
        }
        put_f(b, "    /* segment %d: columns %d..%d, an image part %dx%dx%d, its conv stack to "
                 "e[%d..%d] */\n",
              s, g->offset, g->offset + g->size - 1, g->h, g->w, g->c, g->col,
              g->col + g->width - 1);
        if (g->scale != 1.0f) {
            put_scratch(x, "g%d", s, (size_t)g->size);
            put_f(b, "    for (int i = 0; i < %d; i++) g%d[i] = %s[%d + i] * %s;\n", g->size, s, in,
                  g->offset, export_c_float(g->scale, num));
            snprintf(src, sizeof src, "g%d", s);
        } else {
            snprintf(src, sizeof src, "%s + %d", in, g->offset);
        }
        for (int k = g->first; k < g->first + g->count; k++) {
            CALF_ASSERT(n->layer[k].kind == NET_CONV2D);
            put_conv_call(x, name, &n->layer[k].conv, k, src);
            snprintf(src, sizeof src, "c%d", k);
        }
        put_f(b, "    memcpy(e + %d, %s, %d * sizeof(float));\n", g->col, src, g->width);
    }
    return "e";
}

/* A network with a recurrent core as NAME_step (export_c.h): its MLP blocks as functions
 * of their own (the block before the core activating its output too, as net.h's act_out),
 * its conv layers' and core's weights, and the step that runs the layers in turn, the
 * core's h (then c, for an LSTM) at its offset in the row's state, the core's output
 * the new h. */
static void export_c_net_step(export_c *x, const char *name, const net *n, const float *params) {
    bytes_buf *b = &x->nets;
    char fn[96], arr[128];
    CALF_ASSERT(x->state_size == 0); /* one network with memory a file: the caller's state */
    x->state_size = (int)n->state_size;
    int L = n->num_layers;
    for (int k = 0; k < L; k++) {
        const net_layer *l = &n->layer[k];
        if (l->kind == NET_MLP) {
            snprintf(fn, sizeof fn, "%s_m%d", name, k);
            export_c_mlp(x, fn, &l->mlp, params);
            if (l->act_out && l->mlp.act == NN_ACT_TANH) x->uses_tanh = true;
            else if (l->act_out) x->uses_relu = true;
        } else if (l->kind == NET_CONV2D) {
            put_conv_arrays(x, name, &l->conv, k, params);
        } else {
            const rnn_cell *c = &l->cell;
            CALF_ASSERT(l->kind == NET_LSTM || l->kind == NET_GRU);
            bool lstm = l->kind == NET_LSTM;
            put_f(b, "\n/* network %s, layer %d: %s of %d units on %d inputs, gates %s; weights "
                     "(gate unit, in): row q H + j feeds unit j of gate q */\n",
                  name, k, lstm ? "LSTM" : "GRU", c->hidden, c->in, lstm ? "i, f, g, o" : "r, z, n");
            float *wt = mem_alloc((size_t)c->gates * (size_t)(c->in > c->hidden ? c->in : c->hidden) *
                                      sizeof *wt, &x->oom);
            if (!wt) return;
            nn_transpose(params + c->w_ih_off, c->in, c->gates, wt);
            snprintf(arr, sizeof arr, "%s_r%d_wih", name, k);
            put_floats(b, arr, wt, (size_t)c->in * (size_t)c->gates);
            snprintf(arr, sizeof arr, "%s_r%d_bih", name, k);
            put_floats(b, arr, params + c->b_ih_off, (size_t)c->gates);
            nn_transpose(params + c->w_hh_off, c->hidden, c->gates, wt);
            snprintf(arr, sizeof arr, "%s_r%d_whh", name, k);
            put_floats(b, arr, wt, (size_t)c->hidden * (size_t)c->gates);
            snprintf(arr, sizeof arr, "%s_r%d_bhh", name, k);
            put_floats(b, arr, params + c->b_hh_off, (size_t)c->gates);
            free(wt);
            x->uses_tanh = true;
            if (lstm) x->uses_lstm = true;
            else x->uses_gru = true;
        }
    }
    put_f(b, "\n/* network %s, one step of one row: state (%zu floats) read and written */\n"
             "static void %s_step(float *state, const float *x, float *y) {\n",
          name, n->state_size, name);
    char in[32], out[32];
    snprintf(in, sizeof in, "%s", put_scaled_input(x, n));
    if (n->num_segs > 0) snprintf(in, sizeof in, "%s", put_encoder(x, name, n, in));
    size_t at = 0; /* the core's part of the row's state */
    for (int k = n->trunk; k < L; k++) {
        const net_layer *l = &n->layer[k];
        if (l->kind == NET_CONV2D) {
            put_conv_call(x, name, &l->conv, k, in);
            snprintf(out, sizeof out, "c%d", k);
        } else if (l->kind == NET_MLP && k + 1 == L) {
            put_f(b, "    %s_m%d_forward(%s, y);\n", name, k, in);
            break;
        } else if (l->kind == NET_MLP) {
            put_scratch(x, "m%d", k, (size_t)l->out);
            put_f(b, "    %s_m%d_forward(%s, m%d);\n", name, k, in, k);
            if (l->act_out)
                put_f(b, "    calf_%s(m%d, %d);\n", l->mlp.act == NN_ACT_TANH ? "tanh" : "relu", k,
                      l->out);
            snprintf(out, sizeof out, "m%d", k);
        } else {
            const rnn_cell *c = &l->cell;
            bool lstm = l->kind == NET_LSTM;
            put_scratch(x, "ax%d", k, (size_t)c->gates);
            put_scratch(x, "ah%d", k, (size_t)c->gates);
            put_f(b, "    calf_%s(%s, %s_r%d_wih, %s_r%d_bih, %s_r%d_whh, %s_r%d_bhh, %d, %d, ax%d, "
                     "ah%d, state + %zu",
                  lstm ? "lstm" : "gru", in, name, k, name, k, name, k, name, k, c->in, c->hidden,
                  k, k, at);
            if (lstm) put_f(b, ", state + %zu", at + (size_t)c->hidden);
            put_f(b, ");\n");
            snprintf(out, sizeof out, "(state + %zu)", at);
            at += (size_t)(lstm ? 2 : 1) * (size_t)c->hidden;
        }
        snprintf(in, sizeof in, "%s", out);
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
    if (n->state_size) {
        export_c_net_step(x, name, n, params);
        return CALF_OK;
    }
    const nn_mlp *m = net_as_mlp(n);
    if (m && (!n->in_u8 || n->in_scale == 1.0f)) {
        export_c_mlp(x, name, m, params);
        return CALF_OK;
    }
    /* conv layers (conv2d.h's chain per output, padding taps multiplied as +0, ReLU; a
     * Dict's each image part through its own), then the MLP, after x * in_scale for bytes
     * given as floats (exact): net_forward_v */
    bytes_buf *b = &x->nets;
    char inner[96], src[32];
    int L = n->num_layers;
    const nn_mlp *head = &n->layer[L - 1].mlp;
    CALF_ASSERT(n->layer[L - 1].kind == NET_MLP);
    snprintf(inner, sizeof inner, "%s_mlp", name);
    export_c_mlp(x, inner, head, params);
    for (int k = 0; k + 1 < L; k++) {
        CALF_ASSERT(n->layer[k].kind == NET_CONV2D); /* net_unexportable passed it */
        put_conv_arrays(x, name, &n->layer[k].conv, k, params);
    }
    put_f(b, "\nstatic void %s_forward(const float *x, float *y) {\n", name);
    snprintf(src, sizeof src, "%s", put_scaled_input(x, n));
    if (n->num_segs > 0) {
        snprintf(src, sizeof src, "%s", put_encoder(x, name, n, src));
    } else {
        for (int k = 0; k + 1 < L; k++) {
            put_conv_call(x, name, &n->layer[k].conv, k, src);
            snprintf(src, sizeof src, "c%d", k);
        }
    }
    put_f(b, "    %s_forward(%s, y);\n}\n", inner, src);
    return CALF_OK;
}

int export_c_state_size(const export_c *x) { return x->state_size; }

size_t export_c_stack_bytes(const export_c *x) { return x->stack; }

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

/* The recurrent cells for one row, in rnn.h's order: the input and hidden products each
 * calf_linear's chain from its bias (4H or 3H >= 8 outputs), then the gates elementwise;
 * sigma(v) = madd(0.5, tanh(0.5 v), 0.5). */
static const char prelude_lstm[] =
    "\n/* calf's LSTM step (src/numerics/rnn.h, PyTorch's equations), gates i, f, g, o:\n"
    " * a = (x W_ih + b_ih) + (h W_hh + b_hh); i, f, o = sigma(a), g = tanh(a);\n"
    " * c = madd(f, c, i g); h = o tanh(c). ax, ah: 4H floats of scratch. */\n"
    "static void calf_lstm(const float *x, const float *wih, const float *bih, const float *whh,\n"
    "                      const float *bhh, int in, int H, float *ax, float *ah, float *h, float *c) {\n"
    "    calf_linear(x, wih, bih, in, 4 * H, ax);\n"
    "    calf_linear(h, whh, bhh, H, 4 * H, ah);\n"
    "    for (int j = 0; j < 4 * H; j++) {\n"
    "        float a = ax[j] + ah[j];\n"
    "        ax[j] = j >= 2 * H && j < 3 * H ? calf_tanh1(a) : calf_madd(0.5f, calf_tanh1(0.5f * a), 0.5f);\n"
    "    }\n"
    "    for (int j = 0; j < H; j++) {\n"
    "        float ig = ax[j], fg = ax[H + j], gg = ax[2 * H + j], og = ax[3 * H + j];\n"
    "        c[j] = calf_madd(fg, c[j], ig * gg);\n"
    "        h[j] = og * calf_tanh1(c[j]);\n"
    "    }\n"
    "}\n";

static const char prelude_gru[] =
    "\n/* calf's GRU step (src/numerics/rnn.h, PyTorch's equations), gates r, z, n:\n"
    " * r, z = sigma((x W_ih + b_ih) + (h W_hh + b_hh)); n = tanh(madd(r, ah_n, ax_n));\n"
    " * h = madd(z, h - n, n). ax, ah: 3H floats of scratch. */\n"
    "static void calf_gru(const float *x, const float *wih, const float *bih, const float *whh,\n"
    "                     const float *bhh, int in, int H, float *ax, float *ah, float *h) {\n"
    "    calf_linear(x, wih, bih, in, 3 * H, ax);\n"
    "    calf_linear(h, whh, bhh, H, 3 * H, ah);\n"
    "    for (int j = 0; j < 2 * H; j++) ax[j] = calf_madd(0.5f, calf_tanh1(0.5f * (ax[j] + ah[j])), 0.5f);\n"
    "    for (int j = 0; j < H; j++) {\n"
    "        float rg = ax[j], zg = ax[H + j], ng = calf_tanh1(calf_madd(rg, ah[2 * H + j], ax[2 * H + j]));\n"
    "        h[j] = calf_madd(zg, h[j] - ng, ng);\n"
    "    }\n"
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
    if (x->uses_lstm) bytes_buf_put_str(b, prelude_lstm);
    if (x->uses_gru) bytes_buf_put_str(b, prelude_gru);
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
    /* a policy with memory steps the caller's state: calf_policy_step, no calf_policy_act */
    const char *fn = x->state_size ? "calf_policy_step" : "calf_policy_act";
    const char *st = x->state_size ? "float *state, " : "";
    if (masked)
        put_f(out, "\nint %s_masked(%sconst float *obs, const unsigned char *mask, float *action) {\n",
              fn, st);
    else
        put_f(out, "\nint %s(%sconst float *obs, float *action) {\n", fn, st);
    at = x->body.len ? bytes_buf_room(out, x->body.len) : NULL;
    if (at) memcpy(at, x->body.data, x->body.len);
    put_f(out, "}\n");
    if (masked)
        put_f(out, "\nint %s(%sconst float *obs, float *action) {\n"
                   "    return %s_masked(%sobs, 0, action);\n"
                   "}\n",
              fn, st, fn, x->state_size ? "state, " : "");
    if (x->state_size)
        put_f(out, "\nvoid calf_policy_reset(float *state) {\n"
                   "    for (int i = 0; i < %d; i++) state[i] = 0.0f;\n"
                   "}\n",
              x->state_size);
    if (x->nets.failed || x->body.failed || out->failed)
        return calf_error_set(err, CALF_ENOMEM,
                              "export: out of memory writing the C file of %s (%zu bytes so far)",
                              what, x->nets.len + x->body.len + out->len);
    return CALF_OK;
}
