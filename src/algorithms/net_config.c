/* net_config.c: network specs from the config (net_config.h). */
#include "algorithms/net_config.h"

#include <string.h>

#include "base/config.h"

net_obs net_obs_of(const calf_env_spec *spec) {
    net_obs o = {.dim = spec->obs_dim};
    if (spec->obs_shape[0] > 0) /* an image: (H, W, C), H*W*C == obs_dim (registration checks) */
        o.h = spec->obs_shape[0], o.w = spec->obs_shape[1], o.c = spec->obs_shape[2];
    o.u8 = spec->obs_dtype == CALF_DTYPE_U8;
    o.high = spec->obs_high;
    o.num_parts = spec->num_obs_parts;
    o.parts = spec->obs_parts;
    return o;
}

/* A Dict observation's parts as "'image' (10, 10, 4) uint8, 'pos' (2) float32" into buf
 * (truncated to fit), and how many are images. */
static int describe_parts(const net_obs *obs, char *buf, size_t size) {
    int images = 0;
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < obs->num_parts; k++) {
        const calf_obs_part *p = &obs->parts[k];
        int image = p->shape[1] > 0;
        images += image;
        int n = image ? snprintf(buf + used, size - used, "%s'%s' (%d, %d, %d) %s", k ? ", " : "",
                                 p->name, p->shape[0], p->shape[1], p->shape[2],
                                 p->dtype == CALF_DTYPE_U8 ? "uint8" : "float32")
                      : snprintf(buf + used, size - used, "%s'%s' (%d) %s", k ? ", " : "",
                                 p->name, p->shape[0],
                                 p->dtype == CALF_DTYPE_U8 ? "uint8" : "float32");
        if (n < 0 || (size_t)n >= size - used) break; /* truncated; snprintf terminated it */
        used += (size_t)n;
    }
    return images;
}

/* Whether ns's conv layers fit an h x w image (a Dict's part named part), CALF_EINVAL
 * naming the row's line when one's kernel does not. */
static int check_fit(const calf_config *cfg, calf_binding_id conv_id, const net_spec *ns, int h,
                     int w, const char *part, calf_error *err) {
    for (int k = 0; k < ns->num_conv; k++) {
        const net_conv_spec *c = &ns->conv[k];
        if (h + 2 * c->pad < c->kernel || w + 2 * c->pad < c->kernel)
            return calf_error_set(err, CALF_EINVAL,
                                  "%s: %s: layer %d's kernel %d does not fit its %dx%d input "
                                  "(padding %d)%s%s%s",
                                  config_where(cfg, conv_id), calf_binding_name(conv_id), k + 1,
                                  c->kernel, h, w, c->pad, part ? " on the Dict's part '" : "",
                                  part ? part : "", part ? "'" : "");
        h = (h + 2 * c->pad - c->kernel) / c->stride + 1;
        w = (w + 2 * c->pad - c->kernel) / c->stride + 1;
    }
    return CALF_OK;
}

nn_activation net_config_activation(const char *name) {
    return strcmp(name, "relu") == 0 ? NN_ACT_RELU : NN_ACT_TANH;
}

int net_config_spec(const calf_config *cfg, calf_binding_id conv_id, calf_binding_id fc_id,
                    calf_binding_id act_id, const net_obs *obs, int out, net_spec *ns,
                    calf_error *err) {
    const config_value *cv = config_get(cfg, conv_id), *fv = config_get(cfg, fc_id);
    const char *act = calf_config_string(cfg, act_id);
    CALF_ASSERT(cv->n <= NET_MAX_CONV && fv->n < NN_MAX_LAYERS);
    int fc[NN_MAX_LAYERS];
    for (int k = 0; k < fv->n; k++) fc[k] = (int)fv->ti[k];
    *ns = net_spec_mlp(obs->dim, fc, fv->n, out, net_config_activation(act));
    ns->in_u8 = obs->u8;
    float scale8 = calf_config_is_none(cfg, CALF_CFG_UINT8_SCALE)
                       ? (float)(1.0 / (obs->high > 0 ? obs->high : 255))
                       : (float)calf_config_float(cfg, CALF_CFG_UINT8_SCALE);
    if (obs->u8) ns->in_scale = scale8;
    if (cv->n == 0) return CALF_OK;
    ns->num_conv = cv->n;
    for (int k = 0; k < cv->n; k++)
        ns->conv[k] = (net_conv_spec){.filters = (int)cv->ti[4 * k],
                                      .kernel = (int)cv->ti[4 * k + 1],
                                      .stride = (int)cv->ti[4 * k + 2],
                                      .pad = (int)cv->ti[4 * k + 3]};
    if (obs->h <= 0 && obs->num_parts > 0) {
        char parts[400];
        int images = describe_parts(obs, parts, sizeof parts);
        if (images == 0)
            return calf_error_set(err, CALF_EINVAL,
                                  "%s: %s needs an image observation, but this env's is a "
                                  "Dict with no image (H, W, C) part: %s",
                                  config_where(cfg, conv_id), calf_binding_name(conv_id),
                                  parts);
        if (images > NET_MAX_IMAGE_PARTS)
            return calf_error_set(err, CALF_EINVAL,
                                  "%s: %s on a Dict observation of %d image parts, more than "
                                  "the %d calf encodes: %s",
                                  config_where(cfg, conv_id), calf_binding_name(conv_id),
                                  images, NET_MAX_IMAGE_PARTS, parts);
        /* SB3's CombinedExtractor: each image part through a conv stack of its own, the
         * vector parts beside them (a run of them as one segment), in the parts' order */
        for (int k = 0; k < obs->num_parts; k++) {
            const calf_obs_part *p = &obs->parts[k];
            if (p->shape[1] > 0) {
                int rc = check_fit(cfg, conv_id, ns, p->shape[0], p->shape[1], p->name, err);
                if (rc) return rc;
                ns->seg[ns->num_segs++] = (net_seg){
                    .offset = p->offset, .size = p->shape[0] * p->shape[1] * p->shape[2],
                    .h = p->shape[0], .w = p->shape[1], .c = p->shape[2],
                    .scale = p->dtype == CALF_DTYPE_U8 && !obs->u8 ? scale8 : 1.0f};
            } else if (ns->num_segs > 0 && ns->seg[ns->num_segs - 1].h == 0) {
                ns->seg[ns->num_segs - 1].size += p->shape[0];
            } else {
                ns->seg[ns->num_segs++] =
                    (net_seg){.offset = p->offset, .size = p->shape[0], .scale = 1.0f};
            }
        }
        return CALF_OK;
    }
    if (obs->h <= 0)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: %s needs an image observation (an env with obs_shape H, W, "
                              "C), but this env's observation is a flat vector of %d floats",
                              config_where(cfg, conv_id), calf_binding_name(conv_id), obs->dim);
    ns->in_h = obs->h, ns->in_w = obs->w, ns->in_c = obs->c;
    return check_fit(cfg, conv_id, ns, obs->h, obs->w, NULL, err);
}

int net_config_check(const calf_config *cfg, calf_binding_id conv_id, calf_binding_id fc_id,
                     calf_binding_id act_id, const net_obs *obs, int out, calf_error *err) {
    net_spec s;
    net n;
    size_t cursor = 0;
    int rc = net_config_spec(cfg, conv_id, fc_id, act_id, obs, out, &s, err);
    return rc ? rc : net_layout(&n, &s, &cursor, err);
}
