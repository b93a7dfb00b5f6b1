/* ac_model.c: the actor-critic (ac_model.h): its networks' layout in flat memory, its
 * initialisation, and the per-row policy distribution calls (categorical or diagonal
 * Gaussian). */
#include "algorithms/ac_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/net_config.h"
#include "base/config.h"
#include "calf/summary.h"
#include "numerics/action_dist.h"

/* One network's spec: net_config's (conv layers, fc layers, the head), and with a core
 * the fc layers moved after it (fc_layer_params follow the core) and pre_fc_layer_params
 * before it; the core deferred (ac_model.h says why). */
static int spec_of(const calf_config *cfg, const ac_net_rows *r, const net_obs *obs, int out,
                   net_spec *ns, calf_error *err) {
    int rc = net_config_spec(cfg, r->conv, r->fc, r->act, obs, out, ns, err);
    if (rc) return rc;
    int lstm = (int)calf_config_int(cfg, r->lstm), gru = (int)calf_config_int(cfg, r->gru);
    if (!lstm && !gru) return CALF_OK;
    ns->core = lstm ? NET_LSTM : NET_GRU;
    ns->core_hidden = lstm ? lstm : gru;
    ns->core_deferred = true;
    ns->num_post_fc = ns->num_fc;
    memcpy(ns->post_fc, ns->fc, sizeof ns->fc);
    const config_value *pre = config_get(cfg, r->pre_fc);
    CALF_ASSERT(pre->n < NN_MAX_LAYERS);
    ns->num_fc = pre->n;
    for (int k = 0; k < pre->n; k++) ns->fc[k] = (int)pre->ti[k];
    return CALF_OK;
}

static int specs_of(const calf_config *cfg, const ac_model_rows *rows,
                    const calf_env_spec *spec, net_spec *as, net_spec *vs, calf_error *err) {
    net_obs obs = net_obs_of(spec);
    int head = spec->num_actions > 0 ? spec->num_actions : spec->action_dim, rc;
    if ((rc = spec_of(cfg, &rows->actor, &obs, head, as, err))) return rc;
    return spec_of(cfg, &rows->value, &obs, 1, vs, err);
}

int ac_model_init(ac_model *md, const calf_config *cfg, const ac_model_rows *rows,
                  const calf_env_spec *spec, adam_conf opt, calf_error *err) {
    memset(md, 0, sizeof *md);
    md->obs_dim = spec->obs_dim;
    md->num_actions = spec->num_actions;
    md->action_dim = spec->action_dim;
    md->num_action_dims = spec->num_action_dims;
    md->nvec = spec->num_action_dims > 0 ? spec->action_nvec : NULL;
    md->action_ints = calf_env_action_ints(spec);
    md->masked = spec->action_mask != 0;
    md->head_dim = spec->num_actions > 0 ? spec->num_actions : spec->action_dim;
    net_spec as, vs;
    size_t cursor = 0;
    int rc;
    if ((rc = specs_of(cfg, rows, spec, &as, &vs, err)) ||
        (rc = net_layout(&md->actor, &as, &cursor, err)) ||
        (rc = net_layout(&md->value, &vs, &cursor, err)))
        return rc;
    md->log_std_off = cursor;
    if (md->action_dim > 0) cursor += (size_t)md->action_dim;
    if ((rc = net_layout_core(&md->actor, &cursor, err)) ||
        (rc = net_layout_core(&md->value, &cursor, err)))
        return rc;
    md->state_dim = (int)(md->actor.state_size + md->value.state_size);
    return param_group_init(&md->g, "PRMS", cursor, true, opt, err);
}

/* A network's core is one LSTM or one GRU of at least 3 units, and pre_fc layers come
 * before one. */
static int check_core(const calf_config *cfg, const ac_net_rows *r, calf_error *err) {
    const calf_binding_id rows[2] = {r->lstm, r->gru};
    int64_t lstm = calf_config_int(cfg, r->lstm), gru = calf_config_int(cfg, r->gru);
    if (lstm > 0 && gru > 0)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: %s and %s (%s) are both set: a network's core is an "
                              "LSTM or a GRU, not both",
                              calf_config_origin(cfg, r->gru), calf_binding_name(r->gru),
                              calf_binding_name(r->lstm), calf_config_origin(cfg, r->lstm));
    for (int j = 0; j < 2; j++) {
        int64_t h = j ? gru : lstm;
        if (h > 0 && h < 3)
            return calf_error_set(err, CALF_EINVAL,
                                  "%s: %s = %lld: a recurrent core needs at least 3 units",
                                  calf_config_origin(cfg, rows[j]), calf_binding_name(rows[j]),
                                  (long long)h);
    }
    if (lstm == 0 && gru == 0 && config_get(cfg, r->pre_fc)->n > 0)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: %s: fc layers before a recurrent core, but the network has "
                              "none (set %s or %s)",
                              calf_config_origin(cfg, r->pre_fc), calf_binding_name(r->pre_fc),
                              calf_binding_name(r->lstm), calf_binding_name(r->gru));
    return CALF_OK;
}

int ac_model_check(const calf_config *cfg, const ac_model_rows *rows, const calf_env_spec *spec,
                   calf_error *err) {
    net_spec as, vs;
    net n;
    size_t cursor = 0;
    int rc;
    if ((rc = check_core(cfg, &rows->actor, err)) || (rc = check_core(cfg, &rows->value, err)) ||
        (rc = specs_of(cfg, rows, spec, &as, &vs, err)) ||
        (rc = net_layout(&n, &as, &cursor, err)))
        return rc;
    return net_layout(&n, &vs, &cursor, err);
}

int ac_model_init_params(ac_model *md, const calf_config *cfg, const ac_model_rows *rows,
                         uint64_t seed, calf_error *err) {
    calf_rng rng;
    calf_rng_seed(&rng, seed, 0, CALF_RNG_INIT);
    /* CleanRL / SB3: sqrt(2) hidden, 0.01 policy head, 1 value head */
    int rc = net_init(&md->actor, md->g.params, sqrtf(2.0f), 0.01f, &rng, err);
    if (rc == CALF_OK) rc = net_init(&md->value, md->g.params, sqrtf(2.0f), 1.0f, &rng, err);
    /* the cores after the networks (CleanRL's LSTM init: orthogonal, gain 1, biases 0),
     * so that a config without them draws what it always drew */
    if (rc == CALF_OK) rc = net_init_core(&md->actor, md->g.params, &rng, err);
    if (rc == CALF_OK) rc = net_init_core(&md->value, md->g.params, &rng, err);
    if (rc) return rc;
    for (int k = 0; k < md->action_dim; k++)
        md->g.params[md->log_std_off + k] = (float)calf_config_float(cfg, rows->init_log_std);
    return CALF_OK;
}

void ac_model_free(ac_model *md) {
    if (!md) return;
    param_group_free(&md->g);
    memset(md, 0, sizeof *md);
}

void ac_model_use_state(ac_model *md, float *params, float *m, float *v, float *grad) {
    param_group_use(&md->g, params, grad, m, v);
}

float ac_model_sample(const ac_model *md, const float *params, const float *head,
                      const uint8_t *mask, calf_rng *rng, int *action, float *u) {
    if (md->num_action_dims > 0) {
        float logp;
        dist_multi_sample(head, mask, md->nvec, md->num_action_dims, rng, action);
        dist_multi_eval(head, mask, md->nvec, md->num_action_dims, action, &logp, NULL);
        return logp;
    }
    if (md->num_actions > 0) {
        float logp;
        *action = dist_categorical_sample_masked(head, mask, md->num_actions, rng);
        dist_categorical_eval_masked(head, mask, md->num_actions, *action, &logp, NULL, NULL);
        return logp;
    }
    const float *log_std = params + md->log_std_off;
    *action = 0;
    dist_gaussian_sample(head, log_std, md->action_dim, rng, u);
    return dist_gaussian_log_prob(head, log_std, md->action_dim, u);
}

void ac_model_mode(const ac_model *md, const float *head, const uint8_t *mask, int *action,
                   float *u) {
    if (md->num_action_dims > 0) dist_multi_mode(head, mask, md->nvec, md->num_action_dims, action);
    else if (md->num_actions > 0) *action = dist_categorical_mode_masked(head, mask, md->num_actions);
    else {
        *action = 0;
        dist_gaussian_mode(head, md->action_dim, u);
    }
}

void ac_model_logp_entropy(const ac_model *md, const float *params, const float *head,
                           const uint8_t *mask, const int *action, const float *u, float *logp,
                           float *entropy, dist_categorical_cache *cache) {
    if (md->num_action_dims > 0) {
        if (cache) cache->n = 0; /* nothing cached: the backward recomputes the same numbers */
        dist_multi_eval(head, mask, md->nvec, md->num_action_dims, action, logp, entropy);
        return;
    }
    if (md->num_actions > 0) {
        dist_categorical_eval_masked(head, mask, md->num_actions, *action, logp, entropy, cache);
        return;
    }
    const float *log_std = params + md->log_std_off;
    *logp = dist_gaussian_log_prob(head, log_std, md->action_dim, u);
    *entropy = dist_gaussian_entropy(log_std, md->action_dim);
}

void ac_model_dist_backward(const ac_model *md, const float *params, const float *head,
                            const uint8_t *mask, const int *action, const float *u, float c_logp,
                            float c_ent, const dist_categorical_cache *cache, float *dhead,
                            float *dlog_std) {
    if (md->num_action_dims > 0) {
        dist_multi_grad(head, mask, md->nvec, md->num_action_dims, action, c_logp, c_ent, dhead);
        return;
    }
    if (md->num_actions > 0) {
        dist_categorical_grad_masked(head, mask, md->num_actions, *action, c_logp, c_ent, cache,
                                     dhead);
        return;
    }
    /* written per row; the trainer sums rows in order into the env's partial */
    for (int k = 0; k < md->action_dim; k++) dlog_std[k] = 0;
    dist_gaussian_grad(head, params + md->log_std_off, md->action_dim, u, c_logp, c_ent, dhead,
                       dlog_std);
}

uint64_t ac_model_digest(const ac_model *md) {
    uint64_t h = 0xcbf29ce484222325ULL;
    const float *arrays[3] = {md->g.params, md->g.m, md->g.v};
    for (int a = 0; a < 3; a++) {
        const unsigned char *p = (const unsigned char *)arrays[a];
        for (size_t i = 0; i < md->g.n * sizeof(float); i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    }
    return h;
}

void ac_model_histograms(const ac_model *md, int64_t step) {
    calf_summary_histogram("Params/actor", step, md->g.params + md->actor.offset,
                           md->actor.num_params);
    calf_summary_histogram("Params/value", step, md->g.params + md->value.offset,
                           md->value.num_params);
    calf_summary_histogram("Grads/actor", step, md->g.grad + md->actor.offset,
                           md->actor.num_params);
    calf_summary_histogram("Grads/value", step, md->g.grad + md->value.offset,
                           md->value.num_params);
}
