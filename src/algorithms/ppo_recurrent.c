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

static bool is_lstm(const rnn_cell *cell, int hidden) {
    return hidden > 0 && cell->kind == RNN_LSTM;
}

int ppo_rec_state_init(ppo_rec_state *s, const ppo_model *md, int n, calf_error *err) {
    memset(s, 0, sizeof *s);
    s->n = n;
    size_t rows = (size_t)(n > 0 ? n : 1);
    int Ha = md->acore_h, Hv = md->vcore_h;
    if ((Ha && !(s->ha = mem_calloc(rows * (size_t)Ha, sizeof(float), err))) ||
        (is_lstm(&md->acore, Ha) && !(s->ca = mem_calloc(rows * (size_t)Ha, sizeof(float), err))) ||
        (Hv && !(s->hv = mem_calloc(rows * (size_t)Hv, sizeof(float), err))) ||
        (is_lstm(&md->vcore, Hv) && !(s->cv = mem_calloc(rows * (size_t)Hv, sizeof(float), err)))) {
        ppo_rec_state_free(s);
        return CALF_ENOMEM;
    }
    return CALF_OK;
}

void ppo_rec_state_free(ppo_rec_state *s) {
    if (!s) return;
    free(s->ha);
    free(s->ca);
    free(s->hv);
    free(s->cv);
    memset(s, 0, sizeof *s);
}

/* The four parts in the order of one env's state_dim floats, with their widths. */
static void parts_of(const ppo_rec_state *s, const ppo_model *md, float *part[4], int width[4]) {
    part[0] = s->ha, width[0] = s->ha ? md->acore_h : 0;
    part[1] = s->ca, width[1] = s->ca ? md->acore_h : 0;
    part[2] = s->hv, width[2] = s->hv ? md->vcore_h : 0;
    part[3] = s->cv, width[3] = s->cv ? md->vcore_h : 0;
}

void ppo_rec_state_zero(ppo_rec_state *s, const ppo_model *md, int first, int count) {
    float *part[4];
    int width[4];
    parts_of(s, md, part, width);
    for (int k = 0; k < 4; k++)
        if (width[k])
            memset(part[k] + (size_t)first * width[k], 0, (size_t)count * width[k] * sizeof(float));
}

void ppo_rec_state_get(const ppo_rec_state *s, const ppo_model *md, int r, float *out) {
    float *part[4];
    int width[4];
    parts_of(s, md, part, width);
    for (int k = 0; k < 4; k++) {
        if (!width[k]) continue; /* a part this model has not (its pointer NULL) */
        memcpy(out, part[k] + (size_t)r * width[k], (size_t)width[k] * sizeof(float));
        out += width[k];
    }
}

void ppo_rec_state_set(ppo_rec_state *s, const ppo_model *md, int r, const float *in) {
    float *part[4];
    int width[4];
    parts_of(s, md, part, width);
    for (int k = 0; k < 4; k++) {
        if (!width[k]) continue;
        memcpy(part[k] + (size_t)r * width[k], in, (size_t)width[k] * sizeof(float));
        in += width[k];
    }
}

ppo_rec_state ppo_rec_state_rows(const ppo_rec_state *s, const ppo_model *md, int first, int n) {
    size_t a = (size_t)first * (size_t)md->acore_h, v = (size_t)first * (size_t)md->vcore_h;
    return (ppo_rec_state){.n = n,
                           .ha = s->ha ? s->ha + a : NULL,
                           .ca = s->ca ? s->ca + a : NULL,
                           .hv = s->hv ? s->hv + v : NULL,
                           .cv = s->cv ? s->cv + v : NULL};
}

void ppo_rec_state_put(const ppo_rec_state *s, const ppo_model *md, int r, unsigned char *out) {
    float *part[4];
    int width[4];
    parts_of(s, md, part, width);
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < width[k]; j++, out += 4)
            bytes_put_f32(out, part[k][(size_t)r * width[k] + j]);
}

bool ppo_rec_state_load(ppo_rec_state *s, const ppo_model *md, int r, const unsigned char *in) {
    float *part[4];
    int width[4];
    parts_of(s, md, part, width);
    size_t total = 0;
    for (int k = 0; k < 4; k++) total += (size_t)width[k];
    for (size_t j = 0; j < total; j++)
        if (!isfinite(bytes_get_f32(in + 4 * j))) return false;
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < width[k]; j++, in += 4)
            part[k][(size_t)r * width[k] + j] = bytes_get_f32(in);
    return true;
}

int ppo_rec_act_init(ppo_rec_act *w, const ppo_model *md, int max_rows, calf_error *err) {
    memset(w, 0, sizeof *w);
    w->max_rows = max_rows;
    int rc = CALF_OK;
    if (md->acore_h) rc = rnn_cache_init(&w->a_step, &md->acore, 1, max_rows, err);
    if (rc == CALF_OK && md->vcore_h) rc = rnn_cache_init(&w->v_step, &md->vcore, 1, max_rows, err);
    if (rc == CALF_OK) rc = ppo_rec_state_init(&w->peek, md, 1, err);
    if (rc == CALF_OK && !(w->peek_x = mem_calloc((size_t)md->obs_dim, sizeof(float), err)))
        rc = CALF_ENOMEM;
    if (rc) ppo_rec_act_free(w);
    return rc;
}

void ppo_rec_act_free(ppo_rec_act *w) {
    if (!w) return;
    rnn_cache_free(&w->a_step);
    rnn_cache_free(&w->v_step);
    ppo_rec_state_free(&w->peek);
    free(w->peek_x);
    memset(w, 0, sizeof *w);
}

void ppo_rec_step(const ppo_model *md, const float *params, ppo_rec_act *w, ppo_rec_state *s,
                  const float *x, const uint8_t *start, int n, net_cache *ac, float *head,
                  net_cache *vc, float *val) {
    CALF_ASSERT(n <= w->max_rows && n <= s->n);
    const float *xa = x, *xv = x;
    if (md->acore_h) {
        rnn_step(&md->acore, params, &w->a_step, x, start, n, s->ha, s->ca);
        xa = s->ha;
    }
    net_forward(&md->actor, params, xa, n, ac, head);
    if (!val) return;
    if (md->vcore_h) {
        rnn_step(&md->vcore, params, &w->v_step, x, start, n, s->hv, s->cv);
        xv = s->hv;
    }
    net_forward(&md->value, params, xv, n, vc, val);
}

float ppo_rec_peek_value(const ppo_model *md, const float *params, ppo_rec_act *w,
                         const ppo_rec_state *s, int r, const float *x, bool start,
                         net_cache *vc) {
    const float *xv = x;
    int H = md->vcore_h;
    if (H) {
        ppo_rec_state *p = &w->peek;
        if (start) {
            ppo_rec_state_zero(p, md, 0, 1);
        } else {
            memcpy(p->hv, s->hv + (size_t)r * H, (size_t)H * sizeof(float));
            if (p->cv) memcpy(p->cv, s->cv + (size_t)r * H, (size_t)H * sizeof(float));
        }
        rnn_step(&md->vcore, params, &w->v_step, x, NULL, 1, p->hv, p->cv);
        xv = p->hv;
    }
    float v;
    net_forward(&md->value, params, xv, 1, vc, &v);
    return v;
}

/* ---- one env's sequence ------------------------------------------------------------- */

int ppo_seq_work_init(ppo_seq_work *w, const ppo_model *md, int max_T, calf_error *err) {
    memset(w, 0, sizeof *w);
    w->max_T = max_T;
    size_t T = (size_t)max_T, hd = (size_t)md->head_dim;
    size_t ad = (size_t)(md->action_dim > 0 ? md->action_dim : 1);
    size_t Ha = (size_t)(md->acore_h ? md->acore_h : 1), Hv = (size_t)(md->vcore_h ? md->vcore_h : 1);
    int rc = CALF_OK;
    if (md->acore_h) rc = rnn_cache_init(&w->ra, &md->acore, max_T, 1, err);
    if (rc == CALF_OK && md->vcore_h) rc = rnn_cache_init(&w->rv, &md->vcore, max_T, 1, err);
    if (rc == CALF_OK) rc = net_cache_init(&w->ac, &md->actor, max_T, err);
    if (rc == CALF_OK) rc = net_cache_init(&w->vc, &md->value, max_T, err);
    if (rc == CALF_OK &&
        (!(w->ya = mem_calloc(T * Ha, sizeof(float), err)) ||
         !(w->yv = mem_calloc(T * Hv, sizeof(float), err)) ||
         !(w->dya = mem_calloc(T * Ha, sizeof(float), err)) ||
         !(w->dyv = mem_calloc(T * Hv, sizeof(float), err)) ||
         !(w->head = mem_calloc(T * hd, sizeof(float), err)) ||
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
    rnn_cache_free(&w->ra);
    rnn_cache_free(&w->rv);
    net_cache_free(&w->ac);
    net_cache_free(&w->vc);
    void *bufs[] = {w->ya, w->yv, w->dya, w->dyv, w->head, w->dhead, w->val, w->dval, w->dlogstd};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    memset(w, 0, sizeof *w);
}

void ppo_seq_grad(const ppo_model *md, const float *params, uint64_t version,
                  ppo_seq_work *w, const ppo_seq *sq, const ppo_seq_weights *lw, float *grad,
                  bool add, double *stats) {
    int T = sq->T, hd = md->head_dim, ad = md->action_dim;
    int Ha = md->acore_h, Hv = md->vcore_h;
    CALF_ASSERT(T >= 1 && T <= w->max_T);
    const float *sa = sq->state0, *sv = sq->state0 + ppo_core_state(&md->acore, Ha);
    const float *xa = sq->obs, *xv = sq->obs;
    if (Ha) {
        rnn_forward(&md->acore, params, &w->ra, sq->obs, sq->start, sa,
                    is_lstm(&md->acore, Ha) ? sa + Ha : NULL, T, 1, w->ya, NULL, NULL);
        xa = w->ya;
    }
    if (Hv) {
        rnn_forward(&md->vcore, params, &w->rv, sq->obs, sq->start, sv,
                    is_lstm(&md->vcore, Hv) ? sv + Hv : NULL, T, 1, w->yv, NULL, NULL);
        xv = w->yv;
    }
    net_forward_v(&md->actor, params, version, xa, T, &w->ac, w->head);
    net_forward_v(&md->value, params, version, xv, T, &w->vc, w->val);
    for (int j = 0; j < T; j++) {
        const float *h = w->head + (size_t)j * hd;
        const float *u = ad ? sq->u + (size_t)j * ad : NULL;
        float logp, ent;
        dist_categorical_cache dc;
        ppo_model_logp_entropy(md, params, h, NULL, &sq->act[j], u, &logp, &ent, &dc);
        ppo_sample_result res;
        ppo_sample_loss(logp, sq->logp[j], sq->adv[j], ent, w->val[j], sq->ret[j], lw->clip,
                        lw->td_w, lw->ent_w, lw->scale, &res);
        ppo_model_dist_backward(md, params, h, NULL, &sq->act[j], u, res.dlogp, res.dentropy, &dc,
                                w->dhead + (size_t)j * hd, ad ? w->dlogstd + (size_t)j * ad : NULL);
        w->dval[j] = res.dvalue;
        stats[0] += res.pg_loss;
        stats[1] += res.td_loss;
        stats[2] += ent;
        stats[3] += res.clipped;
    }
    if (add) {
        net_backward_add(&md->actor, params, &w->ac, 0, T, w->dhead, grad, Ha ? w->dya : NULL);
        net_backward_add(&md->value, params, &w->vc, 0, T, w->dval, grad, Hv ? w->dyv : NULL);
    } else {
        net_backward_set(&md->actor, params, &w->ac, 0, T, w->dhead, grad, Ha ? w->dya : NULL);
        net_backward_set(&md->value, params, &w->vc, 0, T, w->dval, grad, Hv ? w->dyv : NULL);
    }
    rnn_grad_mode mode = add ? RNN_GRAD_ADD : RNN_GRAD_SET;
    if (Ha) rnn_backward(&md->acore, params, &w->ra, w->dya, NULL, NULL, grad, mode, NULL, NULL, NULL);
    if (Hv) rnn_backward(&md->vcore, params, &w->rv, w->dyv, NULL, NULL, grad, mode, NULL, NULL, NULL);
    for (int a = 0; a < ad; a++) {
        float sum = 0.0f;
        for (int j = 0; j < T; j++) sum = sum + w->dlogstd[(size_t)j * ad + a];
        float *p = grad + md->log_std_off + a;
        *p = add ? *p + sum : sum;
    }
}
