/* param_group.c: named parameter groups (param_group.h): their flat arrays, each group's
 * optimizer step with its own settings and step count (adam.h, or rmsprop.h where the
 * group's settings choose RMSProp), digest and checkpoint. */
#include "numerics/param_group.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "numerics/nn.h"
#include "numerics/rmsprop.h"

int param_group_init(param_group *g, const char *tag, size_t n, bool trained, adam_conf opt,
                     calf_error *err) {
    memset(g, 0, sizeof *g);
    CALF_ASSERT(strlen(tag) == 4);
    memcpy(g->tag, tag, 5);
    g->n = n;
    g->opt = opt;
    if (!(g->params = nn_alloc_floats(n ? n : 1, err))) return CALF_ENOMEM;
    if (trained && (!(g->grad = nn_alloc_floats(n ? n : 1, err)) ||
                    !(g->m = nn_alloc_floats(n ? n : 1, err)) ||
                    !(g->v = nn_alloc_floats(n ? n : 1, err))))
        return CALF_ENOMEM; /* param_group_free frees what was made */
    return CALF_OK;
}

static void free_arrays(param_group *g) {
    if (g->external) return;
    free(g->params);
    free(g->grad);
    free(g->m);
    free(g->v);
}

void param_group_free(param_group *g) {
    if (!g) return;
    free_arrays(g);
    memset(g, 0, sizeof *g);
}

void param_group_use(param_group *g, float *params, float *grad, float *m, float *v) {
    CALF_ASSERT(!g->external && g->grad != NULL);
    free_arrays(g);
    g->params = params;
    g->grad = grad;
    g->m = m;
    g->v = v;
    g->external = true;
}

bool param_group_step(param_group *g) {
    CALF_ASSERT(g->grad != NULL);
    double norm = adam_global_norm(g->grad, g->n);
    if (!isfinite(norm)) return false;
    param_group_step_slice(g, 0, g->n, norm);
    return true;
}

void param_group_step_slice(param_group *g, size_t lo, size_t hi, double norm) {
    CALF_ASSERT(g->grad != NULL && lo <= hi && hi <= g->n);
    size_t n = hi - lo;
    adam_scale(g->grad + lo, n, adam_clip_coef(norm, g->opt.max_norm));
    g->step++;
    if (g->opt.kind == OPTIM_RMSPROP)
        rmsprop_step(g->params + lo, g->grad + lo, g->m + lo, g->v + lo, n, -g->opt.lr,
                     g->opt.alpha, g->opt.one_minus_alpha, g->opt.eps, g->opt.centered);
    else
        adam_step(g->params + lo, g->grad + lo, g->m + lo, g->v + lo, n, g->step, g->opt.lr,
                  g->opt.beta1, g->opt.beta2, g->opt.eps);
}

/* FNV-1a's step on 64-bit words (two floats each, the odd one out alone) in four lanes,
 * each lane's product folded by a shift, the lanes then mixed into h: all that matters is
 * that two processes' copies that differ in any bit get different digests, and this runs
 * over every parameter and both Adam moments every ddp_paras_check_interval iterations,
 * at a word per multiply rather than a byte. */
static uint64_t digest_floats(uint64_t h, const float *x, size_t n) {
    const uint64_t prime = 0x100000001b3ULL;
    uint64_t lane[4] = {h ^ 0x9E3779B97F4A7C15ULL, h ^ 0xC2B2AE3D27D4EB4FULL,
                        h ^ 0x165667B19E3779F9ULL, h ^ 0x27D4EB2F165667C5ULL};
    const unsigned char *p = (const unsigned char *)x;
    size_t words = n / 2, i = 0;
    for (; i + 4 <= words; i += 4)
        for (int k = 0; k < 4; k++) {
            uint64_t w;
            memcpy(&w, p + 8 * (i + (size_t)k), 8);
            lane[k] = (lane[k] ^ w) * prime;
            lane[k] ^= lane[k] >> 29;
        }
    for (; i < words; i++) {
        uint64_t w;
        memcpy(&w, p + 8 * i, 8);
        lane[0] = (lane[0] ^ w) * prime;
        lane[0] ^= lane[0] >> 29;
    }
    if (n % 2) {
        uint32_t w;
        memcpy(&w, p + 8 * words, 4);
        lane[1] = ((lane[1] ^ w) * prime) ^ 0xff;
    }
    for (int k = 0; k < 4; k++) h = ((h ^ lane[k]) * prime) ^ ((h ^ lane[k]) >> 31);
    return (h ^ (uint64_t)n) * prime;
}

uint64_t param_group_digest(const param_group *g, uint64_t h) {
    h = digest_floats(h, g->params, g->n);
    if (g->m) h = digest_floats(digest_floats(h, g->m, g->n), g->v, g->n);
    return h;
}

void param_group_save(const param_group *g, ckpt_buf *b) {
    ckpt_put_tag(b, g->tag);
    ckpt_put_f32s(b, g->params, g->n);
    if (!g->m) return;
    ckpt_put_i64(b, g->step);
    ckpt_put_f32s(b, g->m, g->n);
    ckpt_put_f32s(b, g->v, g->n);
}

static bool all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

int param_group_load(param_group *g, ckpt_reader *r, int64_t want_step, calf_error *err) {
    ckpt_get_tag(r, g->tag);
    ckpt_get_f32s(r, g->params, g->n);
    int64_t step = 0;
    if (g->m) {
        ckpt_get_i64(r, &step);
        ckpt_get_f32s(r, g->m, g->n);
        ckpt_get_f32s(r, g->v, g->n);
    }
    if (r->status) return r->status;
    if (!all_finite(g->params, g->n))
        return calf_error_set(err, CALF_EINVAL, "%s: %s parameters are not finite", r->name, g->tag);
    if (g->m && (!all_finite(g->m, g->n) || !all_finite(g->v, g->n)))
        return calf_error_set(err, CALF_EINVAL, "%s: %s optimizer state is not finite", r->name,
                              g->tag);
    for (size_t i = 0; g->m && i < g->n; i++) /* a mean of squares: its root must exist */
        if (g->v[i] < 0.0f)
            return calf_error_set(err, CALF_EINVAL,
                                  "%s: %s optimizer state has a negative second moment", r->name,
                                  g->tag);
    if (g->m && step != want_step)
        return calf_error_set(err, CALF_EINVAL, "%s: %s: %lld optimizer steps, %lld expected", r->name,
                              g->tag, (long long)step, (long long)want_step);
    g->step = step;
    return CALF_OK;
}
