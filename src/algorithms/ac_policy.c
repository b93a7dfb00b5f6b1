/* ac_policy.c: an actor-critic's policy outside its rollout (ac_policy.h): greedy and
 * sampled actions through the evaluation cache, the greedy rows' recurrent states, and
 * the export of the greedy policy; moved out of ppo.c as it was, so that another
 * on-policy algorithm acts with PPO's bits. */
#include "algorithms/ac_policy.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

int ac_policy_init(ac_policy *p, const ac_model *md, const obs_norm *onorm, calf_error *err) {
    memset(p, 0, sizeof *p);
    p->md = md;
    p->onorm = onorm;
    int rc = net_cache_init(&p->cache, &md->actor, AC_POLICY_ROWS, err);
    if (rc) return rc;
    if (!(p->head = mem_calloc((size_t)AC_POLICY_ROWS * md->head_dim, sizeof(float), err)) ||
        !(p->in = mem_calloc((size_t)AC_POLICY_ROWS * md->obs_dim, sizeof(float), err)))
        return CALF_ENOMEM;
    return CALF_OK;
}

void ac_policy_free(ac_policy *p) {
    if (!p) return;
    net_cache_free(&p->cache);
    ac_rec_state_free(&p->gstate);
    free(p->head);
    free(p->in);
    memset(p, 0, sizeof *p);
}

void ac_policy_act(ac_policy *p, const float *obs, const uint8_t *mask, int rows,
                   calf_rng *rng, int *act, float *u) {
    const ac_model *md = p->md;
    int od = md->obs_dim, hd = md->head_dim, ad = md->action_dim;
    for (int r0 = 0; r0 < rows; r0 += AC_POLICY_ROWS) {
        int b = rows - r0 < AC_POLICY_ROWS ? rows - r0 : AC_POLICY_ROWS;
        const float *x = obs + (size_t)r0 * od;
        if (p->onorm) {
            obs_norm_apply(p->onorm, x, b, p->in);
            x = p->in;
        }
        if (md->actor.state_size) {
            /* the rows' states, as ac_policy_reset started them and earlier calls left them */
            CALF_ASSERT(rows <= p->gstate.n);
            ac_rec_state rs = ac_rec_state_rows(&p->gstate, md, r0, b);
            ac_rec_step(md, md->g.params, &rs, x, NULL, b, &p->cache, p->head, NULL, NULL);
        } else {
            net_forward(&md->actor, md->g.params, x, b, &p->cache, p->head);
        }
        for (int k = 0; k < b; k++) {
            size_t r = (size_t)(r0 + k);
            const uint8_t *m = mask ? mask + r * md->num_actions : NULL;
            if (rng)
                (void)ac_model_sample(md, md->g.params, p->head + (size_t)k * hd, m, &rng[r],
                                      &act[r * md->action_ints], ad ? u + r * ad : NULL);
            else
                ac_model_mode(md, p->head + (size_t)k * hd, m, &act[r * md->action_ints],
                              ad ? u + r * ad : NULL);
        }
    }
}

int ac_policy_memory(const ac_policy *p) { return (int)p->md->actor.state_size; }

int ac_policy_reset(ac_policy *p, int rows, calf_error *err) {
    const ac_model *md = p->md;
    if (!md->actor.state_size) return CALF_OK;
    if (rows > p->gstate.n) {
        ac_rec_state_free(&p->gstate);
        int rc = ac_rec_state_init(&p->gstate, md, rows, err);
        if (rc) return rc;
    }
    ac_rec_state_zero(&p->gstate, md, 0, rows);
    return CALF_OK;
}

void ac_policy_reset_rows(ac_policy *p, const uint8_t *which, int rows) {
    if (!p->md->actor.state_size) return;
    CALF_ASSERT(rows <= p->gstate.n);
    net_state_reset(&p->md->actor, p->gstate.sa, which, rows);
}

/* On the observation normalized by the checkpoint's statistics, when configured: the
 * categorical's argmax (among the valid actions, with a mask; per sub-action, for
 * MultiDiscrete), or the Gaussian's mean (unclipped: the env clips). A recurrent actor
 * steps the caller's row state (export_c_net's NAME_step). */
int ac_policy_export_c(const ac_policy *p, export_c *x, calf_error *err) {
    const ac_model *md = p->md;
    int rc = export_c_net(x, "actor", &md->actor, md->g.params, err);
    if (rc) return rc;
    if (p->onorm) obs_norm_export_c(p->onorm, x, "obs_in");
    export_c_body_floats(x, md->head_dim, NULL, "head", NULL);
    /* a recurrent actor steps the row's state (calf_policy_step's), as ac_policy_act's */
    if (md->actor.state_size)
        export_c_body(x, "    actor_step(state, %s, head);\n", p->onorm ? "obs_in" : "obs");
    else
        export_c_body(x, "    actor_forward(%s, head);\n", p->onorm ? "obs_in" : "obs");
    if (md->num_action_dims > 0) {
        export_c_multi_argmax_return(x, "head", md->nvec, md->num_action_dims, md->masked);
    } else if (md->num_actions > 0) {
        if (md->masked) export_c_masked_argmax_return(x, "head", md->num_actions);
        else export_c_argmax_return(x, "head", md->num_actions);
    } else {
        export_c_body(x, "    for (int i = 0; i < %d; i++) action[i] = head[i]; /* the mean */\n"
                         "    return 0;\n", md->action_dim);
    }
    return CALF_OK;
}
