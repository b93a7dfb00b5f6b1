/* ac_recurrent.c: an actor-critic's recurrent states (ac_recurrent.h): their rows, their
 * bytes in a checkpoint's env record, one acting step and the value's look-ahead. */
#include "algorithms/ac_recurrent.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/mem.h"

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
