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

const char *net_config_where(const calf_config *cfg, calf_binding_id id) {
    const char *o = calf_config_origin(cfg, id);
    return o[0] ? o : "config";
}

int net_config_spec(const calf_config *cfg, calf_binding_id conv_id, calf_binding_id fc_id,
                    calf_binding_id act_id, const net_obs *obs, int out, net_spec *ns,
                    calf_error *err) {
    const config_value *cv = config_get(cfg, conv_id), *fv = config_get(cfg, fc_id);
    const char *act = calf_config_string(cfg, act_id);
    CALF_ASSERT(cv->n <= NET_MAX_CONV && fv->n < NN_MAX_LAYERS);
    int fc[NN_MAX_LAYERS];
    for (int k = 0; k < fv->n; k++) fc[k] = (int)fv->ti[k];
    *ns = net_spec_mlp(obs->dim, fc, fv->n, out,
                       strcmp(act, "relu") == 0 ? NN_ACT_RELU : NN_ACT_TANH);
    ns->in_u8 = obs->u8;
    if (obs->u8)
        ns->in_scale = calf_config_is_none(cfg, CALF_CFG_UINT8_SCALE)
                           ? (float)(1.0 / (obs->high > 0 ? obs->high : 255))
                           : (float)calf_config_float(cfg, CALF_CFG_UINT8_SCALE);
    if (cv->n == 0) return CALF_OK;
    if (obs->h <= 0 && obs->num_parts > 0) {
        char parts[400];
        int images = describe_parts(obs, parts, sizeof parts);
        return calf_error_set(err, CALF_EINVAL,
                              images == 0
                                  ? "%s: %s needs an image observation, but this env's is a "
                                    "Dict with no image (H, W, C) part: %s"
                                  : "%s: %s on a Dict observation (%s): encoding its image "
                                    "part by conv layers and its other parts beside them is "
                                    "not built yet; wrap the env to give the image alone",
                              net_config_where(cfg, conv_id), calf_binding_name(conv_id), parts);
    }
    if (obs->h <= 0)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: %s needs an image observation (an env with obs_shape H, W, "
                              "C), but this env's observation is a flat vector of %d floats",
                              net_config_where(cfg, conv_id), calf_binding_name(conv_id), obs->dim);
    ns->in_h = obs->h, ns->in_w = obs->w, ns->in_c = obs->c;
    ns->num_conv = cv->n;
    int h = obs->h, w = obs->w;
    for (int k = 0; k < cv->n; k++) {
        net_conv_spec *c = &ns->conv[k];
        *c = (net_conv_spec){.filters = (int)cv->ti[4 * k], .kernel = (int)cv->ti[4 * k + 1],
                             .stride = (int)cv->ti[4 * k + 2], .pad = (int)cv->ti[4 * k + 3]};
        if (h + 2 * c->pad < c->kernel || w + 2 * c->pad < c->kernel)
            return calf_error_set(err, CALF_EINVAL,
                                  "%s: %s: layer %d's kernel %d does not fit its %dx%d input "
                                  "(padding %d)",
                                  net_config_where(cfg, conv_id), calf_binding_name(conv_id), k + 1,
                                  c->kernel, h, w, c->pad);
        h = (h + 2 * c->pad - c->kernel) / c->stride + 1;
        w = (w + 2 * c->pad - c->kernel) / c->stride + 1;
    }
    return CALF_OK;
}

int net_config_check(const calf_config *cfg, calf_binding_id conv_id, calf_binding_id fc_id,
                     calf_binding_id act_id, const net_obs *obs, int out, calf_error *err) {
    net_spec s;
    net n;
    size_t cursor = 0;
    int rc = net_config_spec(cfg, conv_id, fc_id, act_id, obs, out, &s, err);
    return rc ? rc : net_layout(&n, &s, &cursor, err);
}
