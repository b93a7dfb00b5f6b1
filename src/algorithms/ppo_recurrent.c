/* ppo_recurrent.c: PPO's update with recurrent cores (ppo_recurrent.h): one env's
 * sequence forward, its clipped loss and backward through time. */
#include "algorithms/ppo_recurrent.h"

#include <stdlib.h>
#include <string.h>

#include "algorithms/ppo_math.h"
#include "base/mem.h"
#include "numerics/action_dist.h"

int ppo_seq_work_init(ppo_seq_work *w, const ac_model *md, int max_T, calf_error *err) {
    memset(w, 0, sizeof *w);
    w->max_T = max_T;
    size_t T = (size_t)max_T, hd = (size_t)md->head_dim;
    size_t ad = (size_t)(md->action_dim > 0 ? md->action_dim : 1);
    int rc = net_cache_init_seq(&w->ac, &md->actor, max_T, 1, err);
    if (rc == CALF_OK) rc = net_cache_init_seq(&w->vc, &md->value, max_T, 1, err);
    if (rc == CALF_OK &&
        (!(w->head = mem_calloc(T * hd, sizeof(float), err)) ||
         !(w->dhead = mem_calloc(T * hd, sizeof(float), err)) ||
         !(w->val = mem_calloc(T, sizeof(float), err)) ||
         !(w->dval = mem_calloc(T, sizeof(float), err)) ||
         !(w->dlogstd = mem_calloc(T * ad, sizeof(float), err))))
        rc = CALF_ENOMEM;
    if (rc) ppo_seq_work_free(w);
    return rc;
}

void ppo_seq_work_free(ppo_seq_work *w) {
    if (!w) return;
    net_cache_free(&w->ac);
    net_cache_free(&w->vc);
    void *bufs[] = {w->head, w->dhead, w->val, w->dval, w->dlogstd};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    memset(w, 0, sizeof *w);
}

void ppo_seq_grad(const ac_model *md, const float *params, uint64_t version,
                  ppo_seq_work *w, const ppo_seq *sq, const ppo_loss_weights *lw, float *grad,
                  bool add, double *stats) {
    int T = sq->T, hd = md->head_dim, ad = md->action_dim;
    CALF_ASSERT(T >= 1 && T <= w->max_T);
    const float *sa = sq->state0, *sv = sq->state0 + md->actor.state_size;
    net_forward_seq(&md->actor, params, version, sq->obs, sq->start, sa, T, 1, &w->ac, w->head,
                    NULL);
    net_forward_seq(&md->value, params, version, sq->obs, sq->start, sv, T, 1, &w->vc, w->val,
                    NULL);
    for (int j = 0; j < T; j++) {
        const float *h = w->head + (size_t)j * hd;
        const float *u = ad ? sq->u + (size_t)j * ad : NULL;
        float logp, ent;
        dist_categorical_cache dc;
        ac_model_logp_entropy(md, params, h, NULL, &sq->act[j], u, &logp, &ent, &dc);
        ppo_sample_result res;
        ppo_sample_loss(logp, sq->logp[j], sq->adv[j], ent, w->val[j],
                        lw->value_clip > 0 ? sq->val[j] : 0.0f, sq->ret[j], lw, &res);
        ac_model_dist_backward(md, params, h, NULL, &sq->act[j], u, res.dlogp, res.dentropy, &dc,
                               w->dhead + (size_t)j * hd, ad ? w->dlogstd + (size_t)j * ad : NULL);
        w->dval[j] = res.dvalue;
        stats[0] += res.pg_loss;
        stats[1] += res.td_loss;
        stats[2] += ent;
        stats[3] += res.clipped;
    }
    /* every parameter of each network, its core's included, by the mode */
    if (add) {
        net_backward_add(&md->actor, params, &w->ac, 0, T, w->dhead, grad, NULL);
        net_backward_add(&md->value, params, &w->vc, 0, T, w->dval, grad, NULL);
    } else {
        net_backward_set(&md->actor, params, &w->ac, 0, T, w->dhead, grad, NULL);
        net_backward_set(&md->value, params, &w->vc, 0, T, w->dval, grad, NULL);
    }
    for (int a = 0; a < ad; a++) {
        float sum = 0.0f;
        for (int j = 0; j < T; j++) sum = sum + w->dlogstd[(size_t)j * ad + a];
        float *p = grad + md->log_std_off + a;
        *p = add ? *p + sum : sum;
    }
}
