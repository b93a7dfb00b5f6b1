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
#include "training/registry.h"

/* What each network reads: the observation, or with a recurrent core (ppo_recurrent.h,
 * outside the net for now) the core's h, a flat vector of its width (so conv layers with
 * a core are refused, naming the conv row's line). */
static void core_inputs(const calf_env_spec *spec, int a_core, int v_core, net_obs *a,
                        net_obs *v) {
    net_obs obs = net_obs_of(spec);
    *a = a_core ? (net_obs){.dim = a_core} : obs;
    *v = v_core ? (net_obs){.dim = v_core} : obs;
}

int ppo_model_init(ppo_model *md, const calf_config *cfg, const calf_env_spec *spec, adam_conf opt,
                   calf_error *err) {
    memset(md, 0, sizeof *md);
    md->obs_dim = spec->obs_dim;
    md->num_actions = spec->num_actions;
    md->action_dim = spec->action_dim;
    md->num_action_dims = spec->num_action_dims;
    md->nvec = spec->num_action_dims > 0 ? spec->action_nvec : NULL;
    md->action_ints = calf_env_action_ints(spec);
    md->masked = spec->action_mask != 0;
    md->head_dim = spec->num_actions > 0 ? spec->num_actions : spec->action_dim;
    int a_lstm = (int)calf_config_int(cfg, CFG_PPO_ACTOR_LSTM);
    int v_lstm = (int)calf_config_int(cfg, CFG_PPO_VALUE_LSTM);
    md->acore_h = a_lstm ? a_lstm : (int)calf_config_int(cfg, CFG_PPO_ACTOR_GRU);
    md->vcore_h = v_lstm ? v_lstm : (int)calf_config_int(cfg, CFG_PPO_VALUE_GRU);
    net_obs aobs, vobs;
    core_inputs(spec, md->acore_h, md->vcore_h, &aobs, &vobs);
    net_spec as, vs;
    int rc;
    if ((rc = net_config_spec(cfg, CALF_CFG_ACTOR_CONV_LAYERS, CALF_CFG_ACTOR_LAYERS,
                              CALF_CFG_ACTOR_ACTIVATION, &aobs, md->head_dim, &as, err)) ||
        (rc = net_config_spec(cfg, CALF_CFG_VALUE_CONV_LAYERS, CALF_CFG_VALUE_LAYERS,
                              CALF_CFG_VALUE_ACTIVATION, &vobs, 1, &vs, err)))
        return rc;
    size_t cursor = 0;
    if ((rc = net_layout(&md->actor, &as, &cursor, err)) ||
        (rc = net_layout(&md->value, &vs, &cursor, err)))
        return rc;
    md->log_std_off = cursor;
    if (md->action_dim > 0) cursor += (size_t)md->action_dim;
    if (md->acore_h)
        rnn_layout(&md->acore, a_lstm ? RNN_LSTM : RNN_GRU, md->obs_dim, md->acore_h, &cursor);
    if (md->vcore_h)
        rnn_layout(&md->vcore, v_lstm ? RNN_LSTM : RNN_GRU, md->obs_dim, md->vcore_h, &cursor);
    md->state_dim = ppo_core_state(&md->acore, md->acore_h) + ppo_core_state(&md->vcore, md->vcore_h);
    return param_group_init(&md->g, "PRMS", cursor, true, opt, err);
}

int ppo_model_check(const calf_config *cfg, const calf_env_spec *spec, calf_error *err) {
    int a_core = (int)(calf_config_int(cfg, CFG_PPO_ACTOR_LSTM) + calf_config_int(cfg, CFG_PPO_ACTOR_GRU));
    int v_core = (int)(calf_config_int(cfg, CFG_PPO_VALUE_LSTM) + calf_config_int(cfg, CFG_PPO_VALUE_GRU));
    net_obs aobs, vobs;
    core_inputs(spec, a_core, v_core, &aobs, &vobs);
    int head = spec->num_actions > 0 ? spec->num_actions : spec->action_dim, rc;
    if ((rc = net_config_check(cfg, CALF_CFG_ACTOR_CONV_LAYERS, CALF_CFG_ACTOR_LAYERS,
                               CALF_CFG_ACTOR_ACTIVATION, &aobs, head, err)))
        return rc;
    return net_config_check(cfg, CALF_CFG_VALUE_CONV_LAYERS, CALF_CFG_VALUE_LAYERS,
                            CALF_CFG_VALUE_ACTIVATION, &vobs, 1, err);
}

int ppo_model_init_params(ppo_model *md, const calf_config *cfg, uint64_t seed, calf_error *err) {
    calf_rng rng;
    calf_rng_seed(&rng, seed, 0, CALF_RNG_INIT);
    /* CleanRL / SB3: sqrt(2) hidden, 0.01 policy head, 1 value head */
    int rc = net_init(&md->actor, md->g.params, sqrtf(2.0f), 0.01f, &rng, err);
    if (rc == CALF_OK) rc = net_init(&md->value, md->g.params, sqrtf(2.0f), 1.0f, &rng, err);
    /* the cores after the networks (CleanRL's LSTM init: orthogonal, gain 1, biases 0),
     * so that a config without them draws what it always drew */
    if (rc == CALF_OK && md->acore_h) rc = rnn_init(&md->acore, md->g.params, &rng, err);
    if (rc == CALF_OK && md->vcore_h) rc = rnn_init(&md->vcore, md->g.params, &rng, err);
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

float ppo_model_sample(const ppo_model *md, const float *params, const float *head,
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

void ppo_model_mode(const ppo_model *md, const float *head, const uint8_t *mask, int *action,
                    float *u) {
    if (md->num_action_dims > 0) dist_multi_mode(head, mask, md->nvec, md->num_action_dims, action);
    else if (md->num_actions > 0) *action = dist_categorical_mode_masked(head, mask, md->num_actions);
    else {
        *action = 0;
        dist_gaussian_mode(head, md->action_dim, u);
    }
}

void ppo_model_logp_entropy(const ppo_model *md, const float *params, const float *head,
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

void ppo_model_dist_backward(const ppo_model *md, const float *params, const float *head,
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

uint64_t ppo_model_digest(const ppo_model *md) {
    uint64_t h = 0xcbf29ce484222325ULL;
    const float *arrays[3] = {md->g.params, md->g.m, md->g.v};
    for (int a = 0; a < 3; a++) {
        const unsigned char *p = (const unsigned char *)arrays[a];
        for (size_t i = 0; i < md->g.n * sizeof(float); i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    }
    return h;
}
