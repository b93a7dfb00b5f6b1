/* ppo_recurrent.c: PPO with recurrent cores (ppo_recurrent.h): per-env states while
 * acting, the look-ahead values of truncated and bootstrapped steps, and one env's
 * sequence forward and backward in the update. */
#include "algorithms/ppo_recurrent.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/ppo_math.h"
#include "base/bytes.h"
#include "base/mem.h"
#include "numerics/action_dist.h"

int ac_rec_state_init(ac_rec_state *s, const ac_model *md, int n, calf_error *err) {
    memset(s, 0, sizeof *s);
    s->n = n;
    size_t rows = (size_t)(n > 0 ? n : 1), Sa = md->actor.state_size, Sv = md->value.state_size;
    if ((Sa && !(s->sa = mem_calloc(rows * Sa, sizeof(float), err))) ||
        (Sv && !(s->sv = mem_calloc(rows * Sv, sizeof(float), err)))) {
        ac_rec_state_free(s);
        return CALF_ENOMEM;
    }
    return CALF_OK;
}

void ac_rec_state_free(ac_rec_state *s) {
    if (!s) return;
    free(s->sa);
    free(s->sv);
    memset(s, 0, sizeof *s);
}

/* The two parts in the order of one env's state_dim floats, with their widths (0 for a
 * network without a core, whose pointer is NULL). */
static void parts_of(const ac_rec_state *s, const ac_model *md, float *part[2],
                     size_t width[2]) {
    part[0] = s->sa, width[0] = md->actor.state_size;
    part[1] = s->sv, width[1] = md->value.state_size;
}

void ac_rec_state_zero(ac_rec_state *s, const ac_model *md, int first, int count) {
    float *part[2];
    size_t width[2];
    parts_of(s, md, part, width);
    for (int k = 0; k < 2; k++)
        if (width[k])
            memset(part[k] + (size_t)first * width[k], 0, (size_t)count * width[k] * sizeof(float));
}

void ac_rec_state_get(const ac_rec_state *s, const ac_model *md, int r, float *out) {
    float *part[2];
    size_t width[2];
    parts_of(s, md, part, width);
    for (int k = 0; k < 2; k++) {
        if (!width[k]) continue;
        memcpy(out, part[k] + (size_t)r * width[k], width[k] * sizeof(float));
        out += width[k];
    }
}

void ac_rec_state_set(ac_rec_state *s, const ac_model *md, int r, const float *in) {
    float *part[2];
    size_t width[2];
    parts_of(s, md, part, width);
    for (int k = 0; k < 2; k++) {
        if (!width[k]) continue;
        memcpy(part[k] + (size_t)r * width[k], in, width[k] * sizeof(float));
        in += width[k];
    }
}

ac_rec_state ac_rec_state_rows(const ac_rec_state *s, const ac_model *md, int first, int n) {
    size_t a = (size_t)first * md->actor.state_size, v = (size_t)first * md->value.state_size;
    return (ac_rec_state){.n = n, .sa = s->sa ? s->sa + a : NULL, .sv = s->sv ? s->sv + v : NULL};
}

void ac_rec_state_put(const ac_rec_state *s, const ac_model *md, int r, unsigned char *out) {
    float *part[2];
    size_t width[2];
    parts_of(s, md, part, width);
    for (int k = 0; k < 2; k++)
        for (size_t j = 0; j < width[k]; j++, out += 4)
            bytes_put_f32(out, part[k][(size_t)r * width[k] + j]);
}

bool ac_rec_state_load(ac_rec_state *s, const ac_model *md, int r, const unsigned char *in) {
    float *part[2];
    size_t width[2];
    parts_of(s, md, part, width);
    size_t total = width[0] + width[1];
    for (size_t j = 0; j < total; j++)
        if (!isfinite(bytes_get_f32(in + 4 * j))) return false;
    for (int k = 0; k < 2; k++)
        for (size_t j = 0; j < width[k]; j++, in += 4)
            part[k][(size_t)r * width[k] + j] = bytes_get_f32(in);
    return true;
}

int ac_rec_act_init(ac_rec_act *w, const ac_model *md, calf_error *err) {
    memset(w, 0, sizeof *w);
    return ac_rec_state_init(&w->peek, md, 1, err);
}

void ac_rec_act_free(ac_rec_act *w) {
    if (!w) return;
    ac_rec_state_free(&w->peek);
}

void ac_rec_step(const ac_model *md, const float *params, ac_rec_state *s, const float *x,
                 const uint8_t *start, int n, net_cache *ac, float *head, net_cache *vc,
                 float *val) {
    CALF_ASSERT(n <= s->n);
    net_step(&md->actor, params, x, start, n, s->sa, ac, head);
    if (val) net_step(&md->value, params, x, start, n, s->sv, vc, val);
}

float ac_rec_peek_value(const ac_model *md, const float *params, ac_rec_act *w,
                        const ac_rec_state *s, int r, const float *x, bool start,
                        net_cache *vc) {
    size_t S = md->value.state_size;
    float *p = w->peek.sv;
    if (S) memcpy(p, s->sv + (size_t)r * S, S * sizeof(float));
    uint8_t st = start ? 1 : 0;
    float v;
    net_step(&md->value, params, x, &st, 1, p, vc, &v);
    return v;
}

/* ---- one env's sequence ------------------------------------------------------------- */

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
                  ppo_seq_work *w, const ppo_seq *sq, const ppo_seq_weights *lw, float *grad,
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
        ppo_sample_loss(logp, sq->logp[j], sq->adv[j], ent, w->val[j], sq->ret[j], lw->clip,
                        lw->td_w, lw->ent_w, lw->scale, &res);
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
