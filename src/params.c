/* params.c: named parameter groups with their own Adam (params.h). */
#include "params.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn.h"

void param_group_init(param_group *g, const char *tag, size_t n, bool trained, adam_conf opt) {
    memset(g, 0, sizeof *g);
    CALF_ASSERT(strlen(tag) == 4);
    memcpy(g->tag, tag, 5);
    g->n = n;
    g->opt = opt;
    g->params = nn_alloc_floats(n ? n : 1);
    if (trained) {
        g->grad = nn_alloc_floats(n ? n : 1);
        g->m = nn_alloc_floats(n ? n : 1);
        g->v = nn_alloc_floats(n ? n : 1);
    }
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
    double norm = nn_global_norm(g->grad, g->n);
    if (!isfinite(norm)) return false;
    nn_scale(g->grad, g->n, nn_clip_coef(norm, g->opt.max_norm));
    g->step++;
    nn_adam_step(g->params, g->grad, g->m, g->v, g->n, g->step, g->opt.lr, g->opt.beta1,
                 g->opt.beta2, g->opt.eps);
    return true;
}

static uint64_t fnv(uint64_t h, const float *x, size_t n) {
    const unsigned char *p = (const unsigned char *)x;
    for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

uint64_t param_group_digest(const param_group *g, uint64_t h) {
    h = fnv(h, g->params, g->n);
    if (g->m) h = fnv(fnv(h, g->m, g->n), g->v, g->n);
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
    if (g->m && step != want_step)
        return calf_error_set(err, CALF_EINVAL, "%s: %s: %lld optimizer steps, %lld expected", r->name,
                              g->tag, (long long)step, (long long)want_step);
    g->step = step;
    return CALF_OK;
}
