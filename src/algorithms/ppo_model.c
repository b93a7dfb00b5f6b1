/* ppo_model.c: PPO's actor-critic (ppo_model.h): its networks' layout in flat memory, its
 * initialisation, and the per-row policy distribution calls (categorical or diagonal
 * Gaussian). */
#include "algorithms/ppo_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/net_config.h"
#include "base/config.h"
#include "numerics/action_dist.h"

int ppo_model_init(ppo_model *md, const calf_config *cfg, const calf_env_spec *spec, adam_conf opt,
                   calf_error *err) {
    memset(md, 0, sizeof *md);
    md->obs_dim = spec->obs_dim;
    md->num_actions = spec->num_actions;
    md->action_dim = spec->action_dim;
    md->head_dim = spec->num_actions > 0 ? spec->num_actions : spec->action_dim;
    net_obs obs = net_obs_of(spec);
    net_spec as, vs;
    int rc;
    if ((rc = net_config_spec(cfg, CALF_CFG_ACTOR_CONV_LAYERS, CALF_CFG_ACTOR_LAYERS,
                              CALF_CFG_ACTOR_ACTIVATION, &obs, md->head_dim, &as, err)) ||
        (rc = net_config_spec(cfg, CALF_CFG_VALUE_CONV_LAYERS, CALF_CFG_VALUE_LAYERS,
                              CALF_CFG_VALUE_ACTIVATION, &obs, 1, &vs, err)))
        return rc;
    size_t cursor = 0;
    if ((rc = net_layout(&md->actor, &as, &cursor, err)) ||
        (rc = net_layout(&md->value, &vs, &cursor, err)))
        return rc;
    md->log_std_off = cursor;
    if (md->action_dim > 0) cursor += (size_t)md->action_dim;
    return param_group_init(&md->g, "PRMS", cursor, true, opt, err);
}

int ppo_model_check(const calf_config *cfg, const calf_env_spec *spec, calf_error *err) {
    net_obs obs = net_obs_of(spec);
    int head = spec->num_actions > 0 ? spec->num_actions : spec->action_dim, rc;
    if ((rc = net_config_check(cfg, CALF_CFG_ACTOR_CONV_LAYERS, CALF_CFG_ACTOR_LAYERS,
                               CALF_CFG_ACTOR_ACTIVATION, &obs, head, err)))
        return rc;
    return net_config_check(cfg, CALF_CFG_VALUE_CONV_LAYERS, CALF_CFG_VALUE_LAYERS,
                            CALF_CFG_VALUE_ACTIVATION, &obs, 1, err);
}

int ppo_model_init_params(ppo_model *md, const calf_config *cfg, uint64_t seed, calf_error *err) {
    calf_rng rng;
    calf_rng_seed(&rng, seed, 0, CALF_RNG_INIT);
    /* CleanRL / SB3: sqrt(2) hidden, 0.01 policy head, 1 value head */
    int rc = net_init(&md->actor, md->g.params, sqrtf(2.0f), 0.01f, &rng, err);
    if (rc == CALF_OK) rc = net_init(&md->value, md->g.params, sqrtf(2.0f), 1.0f, &rng, err);
    if (rc) return rc;
    for (int k = 0; k < md->action_dim; k++)
        md->g.params[md->log_std_off + k] = (float)calf_config_float(cfg, CALF_CFG_INIT_LOG_STD);
    return CALF_OK;
}

void ppo_model_free(ppo_model *md) {
    if (!md) return;
    param_group_free(&md->g);
    memset(md, 0, sizeof *md);
}

void ppo_model_use_state(ppo_model *md, float *params, float *m, float *v, float *grad) {
    param_group_use(&md->g, params, grad, m, v);
}

float ppo_model_sample(const ppo_model *md, const float *params, const float *head, calf_rng *rng,
                       int *action, float *u) {
    if (md->num_actions > 0) {
        *action = dist_categorical_sample(head, md->num_actions, rng);
        return dist_categorical_log_prob(head, md->num_actions, *action);
    }
    const float *log_std = params + md->log_std_off;
    *action = 0;
    dist_gaussian_sample(head, log_std, md->action_dim, rng, u);
    return dist_gaussian_log_prob(head, log_std, md->action_dim, u);
}

void ppo_model_mode(const ppo_model *md, const float *head, int *action, float *u) {
    if (md->num_actions > 0) *action = dist_categorical_mode(head, md->num_actions);
    else {
        *action = 0;
        dist_gaussian_mode(head, md->action_dim, u);
    }
}

void ppo_model_logp_entropy(const ppo_model *md, const float *params, const float *head, int action,
                            const float *u, float *logp, float *entropy,
                            dist_categorical_cache *cache) {
    if (md->num_actions > 0) {
        dist_categorical_eval(head, md->num_actions, action, logp, entropy, cache);
        return;
    }
    const float *log_std = params + md->log_std_off;
    *logp = dist_gaussian_log_prob(head, log_std, md->action_dim, u);
    *entropy = dist_gaussian_entropy(log_std, md->action_dim);
}

void ppo_model_dist_backward(const ppo_model *md, const float *params, const float *head,
                             int action, const float *u, float c_logp, float c_ent,
                             const dist_categorical_cache *cache, float *dhead, float *dlog_std) {
    if (md->num_actions > 0) {
        dist_categorical_grad_cached(head, md->num_actions, action, c_logp, c_ent, cache, dhead);
        return;
    }
    /* written per row; the trainer sums rows in order into the env's partial */
    for (int k = 0; k < md->action_dim; k++) dlog_std[k] = 0;
    dist_gaussian_grad(head, params + md->log_std_off, md->action_dim, u, c_logp, c_ent, dhead,
                       dlog_std);
}

uint64_t ppo_model_digest(const ppo_model *md) {
    uint64_t h = 0xcbf29ce484222325ULL;
    const float *arrays[3] = {md->g.params, md->g.m, md->g.v};
    for (int a = 0; a < 3; a++) {
        const unsigned char *p = (const unsigned char *)arrays[a];
        for (size_t i = 0; i < md->g.n * sizeof(float); i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    }
    return h;
}
