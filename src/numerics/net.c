/* net.c: networks as layers (net.h): the table of layer types (conv2d + ReLU, the MLP
 * block; the recurrent rows are net_rnn.c's), building a network from a spec, and the
 * forward (rows, or sequences through a core) and backward that walk its layers. */
#include "numerics/net.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

/* ---------------------------------------------------------------- conv2d + ReLU */

static int conv_layout(net_layer *l, const net_spec *spec, int index, size_t *cursor,
                       calf_error *err) {
    (void)spec, (void)index;
    const conv2d *shape = &l->conv; /* in_h/in_w/in_c and the conv's settings preset */
    conv2d c;
    int rc = conv2d_layout(&c, shape->in_h, shape->in_w, shape->in_c, shape->filters,
                           shape->kernel, shape->stride, shape->pad, cursor, err);
    if (rc) return rc;
    l->conv = c;
    l->in = (int)conv2d_in_size(&c);
    l->out = (int)conv2d_out_size(&c);
    return CALF_OK;
}

static size_t no_state(const net_layer *l) {
    (void)l;
    return 0;
}

static int conv_init(const net_layer *l, float *params, float hidden_gain, float out_gain,
                     calf_rng *rng, calf_error *err) {
    (void)out_gain; /* a conv is never the head */
    return conv2d_init(&l->conv, params, hidden_gain, rng, err);
}

/* PyTorch's Conv2d default: kaiming_uniform(a = sqrt(5)) is uniform in +-1/sqrt(fan_in),
 * the bias too; drawn here in W's storage order, then the bias. */
static void conv_init_fan_in(const net_layer *l, float *params, calf_rng *rng) {
    const conv2d *c = &l->conv;
    size_t nw = (size_t)conv2d_patch(c) * (size_t)c->filters;
    double b = 1.0 / sqrt((double)conv2d_patch(c));
    for (size_t k = 0; k < nw; k++) params[c->w_off + k] = (float)calf_rng_uniform_range(rng, -b, b);
    for (int k = 0; k < c->filters; k++)
        params[c->b_off + (size_t)k] = (float)calf_rng_uniform_range(rng, -b, b);
}

static int conv_cache_init(net_layer_cache *c, const net_layer *l, int max_T, int max_B,
                           calf_error *err) {
    return conv2d_cache_init(&c->conv, &l->conv, max_T * max_B, err);
}

static void conv_cache_free(net_layer_cache *c) { conv2d_cache_free(&c->conv); }

static void conv_forward(const net_layer *l, const float *params, uint64_t version,
                         const float *x, int B, net_layer_cache *c, float *y) {
    (void)version;
    conv2d_forward(&l->conv, params, x, B, &c->conv, y);
    nn_relu(y, y, (size_t)B * (size_t)l->out);
}

static void conv_backward(const net_layer *l, const float *params, net_layer_cache *c, int rb,
                          int rn, const float *y, float *dy, float *grad, net_grad_mode mode,
                          float *dx, float *scratch) {
    const conv2d *cv = &l->conv;
    nn_activation_backward(NN_ACT_RELU, y, dy, dy, (size_t)rn * (size_t)l->out);
    if (mode == NET_GRAD_ACC || !grad) {
        conv2d_backward(cv, params, &c->conv, rb, rn, dy, grad, dx);
        return;
    }
    if (mode == NET_GRAD_SET) {
        conv2d_backward_set(cv, params, &c->conv, rb, rn, dy, grad, dx);
        return;
    }
    /* ADD: the SET result into scratch, then grad + it. The layer is rebased to offset 0
     * for that call (its parameters read through params + offset, which the cache must
     * then hold as the forward's params) so scratch needs only the layer's span. */
    conv2d at0 = *cv;
    at0.w_off -= cv->offset, at0.b_off -= cv->offset, at0.offset = 0;
    const float *base = params + cv->offset;
    c->conv.params = base;
    conv2d_backward_set(&at0, base, &c->conv, rb, rn, dy, scratch, dx);
    c->conv.params = params;
    size_t nw = (size_t)conv2d_patch(cv) * (size_t)cv->filters;
    for (size_t k = 0; k < nw; k++) grad[cv->w_off + k] += scratch[at0.w_off + k];
    for (int k = 0; k < cv->filters; k++) grad[cv->b_off + (size_t)k] += scratch[at0.b_off + (size_t)k];
}

/* ---------------------------------------------------------------- the MLP block */

static int mlp_layout(net_layer *l, const net_spec *spec, int index, size_t *cursor,
                      calf_error *err) {
    (void)spec, (void)index, (void)err;
    const nn_mlp *shape = &l->mlp; /* sizes, num_layers and act preset */
    int hidden[NN_MAX_LAYERS];
    for (int k = 0; k + 1 < shape->num_layers; k++) hidden[k] = shape->sizes[k + 1];
    nn_mlp m;
    nn_mlp_layout(&m, shape->sizes[0], hidden, shape->num_layers - 1,
                  shape->sizes[shape->num_layers], shape->act, cursor);
    l->mlp = m;
    l->in = m.sizes[0];
    l->out = m.sizes[m.num_layers];
    return CALF_OK;
}

static int mlp_init(const net_layer *l, float *params, float hidden_gain, float out_gain,
                    calf_rng *rng, calf_error *err) {
    return nn_mlp_init(&l->mlp, params, hidden_gain, l->act_out ? hidden_gain : out_gain, rng,
                       err);
}

/* nn.Linear's default: each layer's weights in storage order, then its biases. */
static void mlp_init_fan_in(const net_layer *l, float *params, calf_rng *rng) {
    const nn_mlp *m = &l->mlp;
    for (int k = 0; k < m->num_layers; k++) {
        int in = m->sizes[k], out = m->sizes[k + 1];
        double b = 1.0 / sqrt((double)in);
        for (int j = 0; j < in * out; j++)
            params[m->w_off[k] + (size_t)j] = (float)calf_rng_uniform_range(rng, -b, b);
        for (int j = 0; j < out; j++)
            params[m->b_off[k] + (size_t)j] = (float)calf_rng_uniform_range(rng, -b, b);
    }
}

static int mlp_cache_init(net_layer_cache *c, const net_layer *l, int max_T, int max_B,
                          calf_error *err) {
    return nn_cache_init(&c->mlp, &l->mlp, max_T * max_B, err);
}

static void mlp_cache_free(net_layer_cache *c) { nn_cache_free(&c->mlp); }

static void mlp_forward(const net_layer *l, const float *params, uint64_t version,
                        const float *x, int B, net_layer_cache *c, float *y) {
    nn_mlp_forward_v(&l->mlp, params, version, x, B, &c->mlp, y);
    if (l->act_out) nn_activate(l->mlp.act, y, (size_t)B * (size_t)l->out);
}

static void mlp_backward(const net_layer *l, const float *params, net_layer_cache *c, int rb,
                         int rn, const float *y, float *dy, float *grad, net_grad_mode mode,
                         float *dx, float *scratch) {
    (void)scratch;
    if (l->act_out) nn_activation_backward(l->mlp.act, y, dy, dy, (size_t)rn * (size_t)l->out);
    if (mode == NET_GRAD_ACC || !grad) nn_mlp_backward(&l->mlp, params, &c->mlp, rb, rn, dy, grad, dx);
    else if (mode == NET_GRAD_SET) nn_mlp_backward_set(&l->mlp, params, &c->mlp, rb, rn, dy, grad, dx);
    else nn_mlp_backward_add(&l->mlp, params, &c->mlp, rb, rn, dy, grad, dx);
}

/* ---------------------------------------------------------------- the table */

static const net_layer_type conv_type = {
    .name = "conv2d",
    .layout = conv_layout,
    .state_size = no_state,
    .init = conv_init,
    .init_fan_in = conv_init_fan_in,
    .cache_init = conv_cache_init,
    .cache_free = conv_cache_free,
    .forward = conv_forward,
    .backward = conv_backward,
    .export_c = "calf_conv2d",
};

static const net_layer_type mlp_type = {
    .name = "mlp",
    .layout = mlp_layout,
    .state_size = no_state,
    .init = mlp_init,
    .init_fan_in = mlp_init_fan_in,
    .cache_init = mlp_cache_init,
    .cache_free = mlp_cache_free,
    .forward = mlp_forward,
    .backward = mlp_backward,
    .export_c = "export_c_mlp",
};

/* One row per net_kind. */
static const net_layer_type *const net_layer_types[NET_NUM_KINDS] = {
    [NET_CONV2D] = &conv_type,
    [NET_MLP] = &mlp_type,
    [NET_LSTM] = &net_lstm_type,
    [NET_GRU] = &net_gru_type,
};

const net_layer_type *net_layer_type_of(net_kind k) {
    CALF_ASSERT(k >= 0 && k < NET_NUM_KINDS);
    return net_layer_types[k];
}

static const net_layer_type *type_of(const net_layer *l) {
    const net_layer_type *t = net_layer_type_of(l->kind);
    CALF_ASSERT(t);
    return t;
}

/* ---------------------------------------------------------------- building */

net_spec net_spec_mlp(int in, const int *hidden, int num_hidden, int out, nn_activation act) {
    CALF_ASSERT(num_hidden >= 0 && num_hidden < NN_MAX_LAYERS);
    net_spec s = {.in_dim = in, .in_scale = 1.0f, .num_fc = num_hidden, .act = act, .out = out};
    for (int k = 0; k < num_hidden; k++) s.fc[k] = hidden[k];
    return s;
}

static void mlp_shape(net_layer *l, int in, const int *hidden, int nh, int out,
                      nn_activation act, bool act_out) {
    memset(l, 0, sizeof *l);
    l->kind = NET_MLP;
    l->act_out = act_out;
    l->mlp.num_layers = nh + 1;
    l->mlp.sizes[0] = in;
    for (int k = 0; k < nh; k++) l->mlp.sizes[k + 1] = hidden[k];
    l->mlp.sizes[nh + 1] = out;
    l->mlp.act = act;
}

/* The spec's conv layers on an h x w x c input, appended to n's layers at *cursor;
 * *width: the last one's output floats per row (as it was without conv layers). */
static int layout_convs(net *n, const net_spec *spec, int h, int w, int c, size_t *cursor,
                        int *width, calf_error *err) {
    for (int k = 0; k < spec->num_conv; k++) {
        net_layer *l = &n->layer[n->num_layers];
        const net_conv_spec *cs = &spec->conv[k];
        l->kind = NET_CONV2D;
        l->conv = (conv2d){.in_h = h, .in_w = w, .in_c = c, .filters = cs->filters,
                           .kernel = cs->kernel, .stride = cs->stride, .pad = cs->pad};
        int rc = type_of(l)->layout(l, spec, n->num_layers, cursor, err);
        if (rc) return rc;
        h = l->conv.out_h, w = l->conv.out_w, c = l->conv.filters;
        *width = l->out;
        n->num_layers++;
    }
    return CALF_OK;
}

/* A per-key encoder's segments: 1..NET_MAX_SEGS of them, covering [0, in_dim) in order,
 * images of positive shapes (at most NET_MAX_IMAGE_PARTS, at least one) with the conv
 * layers to run on them, and no image input beside them. */
static int check_segs(const net_spec *spec, calf_error *err) {
    if (spec->num_segs > NET_MAX_SEGS || spec->num_conv < 1 || spec->in_h != 0)
        return calf_error_set(err, CALF_EINVAL,
                              "network: a Dict encoder of %d segments (at most %d) needs conv "
                              "layers and no image input beside it",
                              spec->num_segs, NET_MAX_SEGS);
    int at = 0, images = 0;
    for (int s = 0; s < spec->num_segs; s++) {
        const net_seg *g = &spec->seg[s];
        bool image = g->h > 0;
        images += image;
        if (g->offset != at || g->size < 1 ||
            (image ? g->w < 1 || g->c < 1 || (long long)g->h * g->w * g->c != g->size
                   : g->w != 0 || g->c != 0))
            return calf_error_set(err, CALF_EINVAL,
                                  "network: Dict encoder segment %d (columns %d + %d, shape %d, "
                                  "%d, %d) is not the next image or vector run",
                                  s, g->offset, g->size, g->h, g->w, g->c);
        at += g->size;
    }
    if (at != spec->in_dim || images < 1 || images > NET_MAX_IMAGE_PARTS)
        return calf_error_set(err, CALF_EINVAL,
                              "network: a Dict encoder's segments cover %d of %d inputs with %d "
                              "image parts (1..%d)",
                              at, spec->in_dim, images, NET_MAX_IMAGE_PARTS);
    return CALF_OK;
}

int net_layout(net *n, const net_spec *spec, size_t *cursor, calf_error *err) {
    memset(n, 0, sizeof *n);
    n->core = -1;
    if (spec->num_conv < 0 || spec->num_conv > NET_MAX_CONV || spec->num_fc < 0 ||
        spec->num_fc >= NN_MAX_LAYERS || spec->num_post_fc < 0 ||
        spec->num_post_fc >= NN_MAX_LAYERS || spec->in_dim <= 0 || spec->out <= 0)
        return calf_error_set(err, CALF_EINVAL,
                              "network: %d conv and %d+%d fc layers from %d inputs to %d outputs "
                              "(at most %d conv and %d fc layers per block)",
                              spec->num_conv, spec->num_fc, spec->num_post_fc, spec->in_dim,
                              spec->out, NET_MAX_CONV, NN_MAX_LAYERS - 1);
    if (spec->num_segs > 0) {
        int rc = check_segs(spec, err);
        if (rc) return rc;
    } else if (spec->num_conv > 0 &&
        (spec->in_h <= 0 || spec->in_w <= 0 || spec->in_c <= 0 ||
         (long long)spec->in_h * spec->in_w * spec->in_c != spec->in_dim))
        return calf_error_set(err, CALF_EINVAL,
                              "network: conv layers need an image observation (obs_shape H, W, "
                              "C), but the input is a flat vector of %d floats", spec->in_dim);
    bool core = spec->core_hidden > 0;
    if (core && (spec->core != NET_LSTM && spec->core != NET_GRU))
        return calf_error_set(err, CALF_EINVAL, "network: the recurrent core must be an LSTM or a GRU");
    if (core && !net_layer_type_of(spec->core))
        return calf_error_set(err, CALF_EINVAL,
                              "network: a %s core is not built into this calf",
                              spec->core == NET_LSTM ? "LSTM" : "GRU");
    n->in = spec->in_dim;
    n->in_u8 = spec->in_u8;
    n->in_scale = spec->in_u8 ? spec->in_scale : 1.0f;
    n->act = spec->act;
    n->offset = *cursor;
    int width = spec->in_dim;
    if (spec->num_segs == 0) {
        int rc = layout_convs(n, spec, spec->in_h, spec->in_w, spec->in_c, cursor, &width, err);
        if (rc) return rc;
    } else {
        /* the per-key encoder: each image part's conv stack in segment order, then the
         * concatenation's width */
        n->num_segs = spec->num_segs;
        int col = 0;
        for (int s = 0; s < spec->num_segs; s++) {
            net_seg *g = &n->seg[s];
            *g = spec->seg[s];
            g->first = n->num_layers, g->count = 0, g->width = g->size, g->col = col;
            if (g->h > 0) {
                int rc = layout_convs(n, spec, g->h, g->w, g->c, cursor, &g->width, err);
                if (rc) return rc;
                g->count = n->num_layers - g->first;
            }
            col += g->width;
        }
        n->trunk = n->num_layers;
        n->cat = width = col;
    }
    if (!core) {
        mlp_shape(&n->layer[n->num_layers], width, spec->fc, spec->num_fc, spec->out, spec->act,
                  false);
    } else {
        if (spec->num_fc > 0) {
            net_layer *l = &n->layer[n->num_layers];
            mlp_shape(l, width, spec->fc, spec->num_fc - 1, spec->fc[spec->num_fc - 1], spec->act,
                      true);
            type_of(l)->layout(l, spec, n->num_layers, cursor, err);
            width = l->out;
            n->num_layers++;
        }
        net_layer *l = &n->layer[n->num_layers];
        memset(l, 0, sizeof *l);
        l->kind = spec->core;
        l->in = width;
        l->out = spec->core_hidden;
        n->core = n->num_layers;
        n->core_deferred = spec->core_deferred;
        /* a deferred core's offsets are net_layout_core's; its shape is checked now */
        size_t at = 0;
        int rc = type_of(l)->layout(l, spec, n->num_layers, spec->core_deferred ? &at : cursor,
                                    err);
        if (rc) return rc;
        n->state_size += type_of(l)->state_size(l);
        width = l->out;
        n->num_layers++;
        mlp_shape(&n->layer[n->num_layers], width, spec->post_fc, spec->num_post_fc, spec->out,
                  spec->act, false);
    }
    net_layer *head = &n->layer[n->num_layers];
    type_of(head)->layout(head, spec, n->num_layers, cursor, err);
    n->num_layers++;
    n->out = spec->out;
    n->num_params = *cursor - n->offset;
    return CALF_OK;
}

int net_layout_core(net *n, size_t *cursor, calf_error *err) {
    if (n->core < 0 || !n->core_deferred) return CALF_OK;
    net_layer *l = &n->layer[n->core];
    return type_of(l)->layout(l, NULL, n->core, cursor, err);
}

int net_init(const net *n, float *params, float hidden_gain, float out_gain, calf_rng *rng,
             calf_error *err) {
    for (int k = 0; k < n->num_layers; k++) {
        if (k == n->core && n->core_deferred) continue; /* net_init_core's */
        int rc = type_of(&n->layer[k])->init(&n->layer[k], params, hidden_gain, out_gain, rng, err);
        if (rc) return rc;
    }
    return CALF_OK;
}

int net_init_core(const net *n, float *params, calf_rng *rng, calf_error *err) {
    if (n->core < 0 || !n->core_deferred) return CALF_OK;
    const net_layer *l = &n->layer[n->core];
    return type_of(l)->init(l, params, 1.0f, 1.0f, rng, err);
}

void net_init_fan_in(const net *n, float *params, calf_rng *rng) {
    for (int k = 0; k < n->num_layers; k++)
        type_of(&n->layer[k])->init_fan_in(&n->layer[k], params, rng);
}

/* ---------------------------------------------------------------- cache */

int net_cache_init(net_cache *c, const net *n, int max_rows, calf_error *err) {
    return net_cache_init_seq(c, n, 1, max_rows, err);
}

int net_cache_init_seq(net_cache *c, const net *n, int max_T, int max_B, calf_error *err) {
    CALF_ASSERT(max_T > 0 && max_B > 0);
    memset(c, 0, sizeof *c);
    c->max_rows = max_T * max_B;
    c->max_T = max_T;
    c->max_B = max_B;
    size_t R = (size_t)c->max_rows, widest = (size_t)n->in, conv_params = 0;
    if ((size_t)n->cat > widest) widest = (size_t)n->cat; /* the trunk's dx */
    int rc = CALF_OK;
    for (int k = 0; k < n->num_layers && rc == CALF_OK; k++) {
        const net_layer *l = &n->layer[k];
        if ((size_t)l->out > widest) widest = (size_t)l->out;
        if (l->kind == NET_CONV2D && l->conv.num_params > conv_params)
            conv_params = l->conv.num_params;
        rc = type_of(l)->cache_init(&c->lc[k], l, max_T, max_B, err);
        if (rc == CALF_OK && k + 1 < n->num_layers &&
            !(c->out[k] = nn_alloc_floats(R * (size_t)l->out, err)))
            rc = CALF_ENOMEM;
    }
    if (rc == CALF_OK && n->in_u8 && !(c->in = nn_alloc_floats(R * (size_t)n->in, err)))
        rc = CALF_ENOMEM;
    if (rc == CALF_OK && n->num_layers > 1 &&
        (!(c->d[0] = nn_alloc_floats(R * widest, err)) ||
         !(c->d[1] = nn_alloc_floats(R * widest, err))))
        rc = CALF_ENOMEM;
    if (rc == CALF_OK && conv_params && !(c->gsum = nn_alloc_floats(conv_params, err)))
        rc = CALF_ENOMEM;
    for (int k = 0; k < 3 && rc == CALF_OK && n->num_segs > 0; k++)
        if (!(c->e[k] = nn_alloc_floats(R * widest, err))) rc = CALF_ENOMEM;
    if (rc == CALF_OK && n->num_segs > 0 && !(c->cat = nn_alloc_floats(R * (size_t)n->cat, err)))
        rc = CALF_ENOMEM;
    if (rc) net_cache_free(c);
    return rc;
}

void net_cache_free(net_cache *c) {
    if (!c) return;
    /* every kind's cache: a zeroed one frees as a no-op (a layer type keeps its state in
     * one of net_layer_cache's fields) */
    for (int k = 0; k < NET_MAX_LAYERS; k++) {
        nn_cache_free(&c->lc[k].mlp);
        conv2d_cache_free(&c->lc[k].conv);
        rnn_cache_free(&c->lc[k].rnn);
        free(c->lc[k].st);
        free(c->out[k]);
    }
    free(c->in), free(c->d[0]), free(c->d[1]), free(c->gsum), free(c->cat);
    free(c->e[0]), free(c->e[1]), free(c->e[2]);
    memset(c, 0, sizeof *c);
}

/* ---------------------------------------------------------------- forward */

/* The per-key encoder on R rows of x: each segment's columns, an image's through its conv
 * stack (outputs kept in c->out for backward), into c->cat in segment order (net.h). */
static const float *encode(const net *n, const float *params, uint64_t version, const float *x,
                           int R, net_cache *c) {
    size_t in = (size_t)n->in, cat = (size_t)n->cat;
    for (int s = 0; s < n->num_segs; s++) {
        const net_seg *g = &n->seg[s];
        size_t size = (size_t)g->size, width = (size_t)g->width;
        const float *h = x + g->offset; /* a vector run: its columns as they are */
        size_t stride = in;
        if (g->count > 0) {
            float *gx = c->e[2];
            for (int r = 0; r < R; r++)
                for (size_t i = 0; i < size; i++)
                    gx[(size_t)r * size + i] = x[(size_t)r * in + (size_t)g->offset + i] * g->scale;
            h = gx;
            for (int k = g->first; k < g->first + g->count; k++) {
                const net_layer *l = &n->layer[k];
                type_of(l)->forward(l, params, version, h, R, &c->lc[k], c->out[k]);
                h = c->out[k];
            }
            stride = width;
        }
        for (int r = 0; r < R; r++)
            memcpy(c->cat + (size_t)r * cat + (size_t)g->col, h + (size_t)r * stride,
                   width * sizeof *h);
    }
    return c->cat;
}

/* The layers on x (T steps of B rows; feed-forward layers see T * B rows), already floats
 * the first layer reads; recurrent layers read and write their part of each row's state. */
static void run(const net *n, const float *params, uint64_t version, const float *x,
                const uint8_t *start, const float *state0, float *stateT, int T, int B,
                net_cache *c, float *y) {
    int R = T * B;
    CALF_ASSERT(T >= 1 && B >= 0 && R <= c->max_rows);
    CALF_ASSERT(n->state_size == 0 || (T <= c->max_T && B <= c->max_B));
    const float *in = n->num_segs > 0 ? encode(n, params, version, x, R, c) : x;
    size_t at = 0; /* this layer's part of a row's state */
    for (int k = n->trunk; k < n->num_layers; k++) {
        const net_layer *l = &n->layer[k];
        const net_layer_type *t = type_of(l);
        /* the head may write nowhere: its output stays in its cache (net_output) */
        float *out = k + 1 < n->num_layers ? c->out[k] : y;
        if (t->forward_seq) {
            t->forward_seq(l, params, in, start, state0 ? state0 + at : NULL,
                           stateT ? stateT + at : NULL, n->state_size, T, B, &c->lc[k], out);
            at += t->state_size(l);
        } else {
            t->forward(l, params, version, in, R, &c->lc[k], out);
        }
        in = out;
    }
    c->rows = R;
    c->params = params;
}

/* x as the first layer reads it: floats holding byte values (evaluation, play) scaled as
 * bytes are, into c->in */
static const float *scaled_in(const net *n, const float *x, int rows, net_cache *c) {
    if (!n->in_u8) return x;
    CALF_ASSERT(rows <= c->max_rows);
    size_t m = (size_t)rows * (size_t)n->in;
    for (size_t i = 0; i < m; i++) c->in[i] = x[i] * n->in_scale;
    return c->in;
}

void net_forward_v(const net *n, const float *params, uint64_t version, const float *x, int B,
                   net_cache *c, float *y) {
    CALF_ASSERT(n->state_size == 0); /* a core steps through net_forward_seq / net_step */
    run(n, params, version, scaled_in(n, x, B, c), NULL, NULL, NULL, 1, B, c, y);
}

void net_forward_seq(const net *n, const float *params, uint64_t version, const float *x,
                     const uint8_t *start, const float *state0, int T, int B, net_cache *c,
                     float *y, float *stateT) {
    run(n, params, version, scaled_in(n, x, T * B, c), start, state0, stateT, T, B, c, y);
}

void net_step(const net *n, const float *params, const float *x, const uint8_t *start, int B,
              float *state, net_cache *c, float *y) {
    run(n, params, 0, scaled_in(n, x, B, c), start, state, state, 1, B, c, y);
}

void net_state_reset(const net *n, float *state, const uint8_t *start, int B) {
    size_t S = n->state_size;
    if (S == 0) return;
    for (int b = 0; b < B; b++)
        if (!start || start[b]) memset(state + (size_t)b * S, 0, S * sizeof *state);
}

void net_forward(const net *n, const float *params, const float *x, int B, net_cache *c,
                 float *y) {
    net_forward_v(n, params, 0, x, B, c, y);
}

void net_forward_u8_v(const net *n, const float *params, uint64_t version, const uint8_t *x,
                      int B, net_cache *c, float *y) {
    CALF_ASSERT(n->in_u8 && B <= c->max_rows);
    size_t m = (size_t)B * (size_t)n->in;
    for (size_t i = 0; i < m; i++) c->in[i] = (float)x[i] * n->in_scale;
    CALF_ASSERT(n->state_size == 0);
    run(n, params, version, c->in, NULL, NULL, NULL, 1, B, c, y);
}

const float *net_output(const net *n, const net_cache *c) {
    const net_layer *head = &n->layer[n->num_layers - 1];
    return c->lc[n->num_layers - 1].mlp.act[head->mlp.num_layers];
}

/* ---------------------------------------------------------------- backward */

/* The per-key encoder's backward on rows [rb, rb + rn): dcat (rn, cat) split back into
 * each segment's dy, an image's through its conv stack, dx (rn, in) written when not
 * NULL (net.h). */
static void decode(const net *n, const float *params, net_cache *c, int rb, int rn,
                   const float *dcat, float *grad, float *dx, net_grad_mode mode) {
    size_t in = (size_t)n->in, cat = (size_t)n->cat;
    for (int s = 0; s < n->num_segs; s++) {
        const net_seg *g = &n->seg[s];
        size_t size = (size_t)g->size, width = (size_t)g->width, col = (size_t)g->col;
        if (g->count == 0) {
            for (int r = 0; dx && r < rn; r++)
                memcpy(dx + (size_t)r * in + (size_t)g->offset, dcat + (size_t)r * cat + col,
                       size * sizeof *dx);
            continue;
        }
        float *d = c->e[0];
        for (int r = 0; r < rn; r++)
            memcpy(d + (size_t)r * width, dcat + (size_t)r * cat + col, width * sizeof *d);
        int next = 1;
        for (int k = g->first + g->count - 1; k >= g->first; k--) {
            const net_layer *l = &n->layer[k];
            float *below = k > g->first ? c->e[next] : dx ? c->e[2] : NULL;
            const float *y = c->out[k] + (size_t)rb * (size_t)l->out;
            type_of(l)->backward(l, params, &c->lc[k], rb, rn, y, d, grad, mode, below, c->gsum);
            d = below;
            next ^= 1;
        }
        for (int r = 0; dx && r < rn; r++)
            for (size_t i = 0; i < size; i++)
                dx[(size_t)r * in + (size_t)g->offset + i] = c->e[2][(size_t)r * size + i] * g->scale;
    }
}

static void backward(const net *n, const float *params, net_cache *c, int rb, int rn,
                     const float *dy, float *grad, float *dx, net_grad_mode mode) {
    CALF_ASSERT(c->params == params && rb >= 0 && rn >= 0 && rb + rn <= c->rows);
    CALF_ASSERT(!(dx && n->in_u8));
    int L = n->num_layers;
    /* dy of the head; each layer's dx is the dy of the one below, in c->d[0] and c->d[1]
     * in turn (a layer may overwrite its dy: an activation's derivative) */
    float *d = (float *)dy; /* the head is an MLP without act_out: it leaves dy as it is */
    int next = 0;
    for (int k = L - 1; k >= n->trunk; k--) {
        const net_layer *l = &n->layer[k];
        float *below = k > 0 ? c->d[next] : dx;
        const float *y = k < L - 1 ? c->out[k] + (size_t)rb * (size_t)l->out : NULL;
        type_of(l)->backward(l, params, &c->lc[k], rb, rn, y, d, grad, mode, below, c->gsum);
        d = below;
        next ^= 1;
    }
    if (n->num_segs > 0) decode(n, params, c, rb, rn, d, grad, dx, mode);
}

void net_backward(const net *n, const float *params, net_cache *c, int row_begin, int row_count,
                  const float *dy, float *grad, float *dx) {
    backward(n, params, c, row_begin, row_count, dy, grad, dx, NET_GRAD_ACC);
}

void net_backward_set(const net *n, const float *params, net_cache *c, int row_begin,
                      int row_count, const float *dy, float *grad, float *dx) {
    backward(n, params, c, row_begin, row_count, dy, grad, dx, NET_GRAD_SET);
}

void net_backward_add(const net *n, const float *params, net_cache *c, int row_begin,
                      int row_count, const float *dy, float *grad, float *dx) {
    backward(n, params, c, row_begin, row_count, dy, grad, dx, NET_GRAD_ADD);
}

/* ---------------------------------------------------------------- views */

const nn_mlp *net_as_mlp(const net *n) {
    return n->num_layers == 1 && n->layer[0].kind == NET_MLP ? &n->layer[0].mlp : NULL;
}

const char *net_unexportable(const net *n) {
    for (int k = 0; k < n->num_layers; k++)
        if (!type_of(&n->layer[k])->export_c) return type_of(&n->layer[k])->name;
    return NULL;
}
