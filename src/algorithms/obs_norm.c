/* obs_norm.c: the observation normalizer of obs_norm.h: per-env shifted sums, a merge of
 * their canonical-order total into running statistics in double, and normalization as
 * a fixed float chain (the same chain `calf export` writes). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/obs_norm.h"

#include "base/mem.h"

static void refresh(obs_norm *z) {
    for (int i = 0; i < z->dim; i++) {
        if (z->count == 0) {
            z->shift[i] = 0.0f;
            z->scale[i] = 1.0f;
            continue;
        }
        double var = z->m2[i] / (double)z->count;
        z->shift[i] = (float)z->mean[i];
        z->scale[i] = (float)(1.0 / sqrt((var > 0 ? var : 0) + OBS_NORM_EPS));
    }
}

int obs_norm_init(obs_norm *z, int dim, float clip, calf_error *err) {
    memset(z, 0, sizeof *z);
    z->dim = dim;
    z->clip = clip;
    size_t n = dim > 0 ? (size_t)dim : 1;
    if (!(z->mean = mem_calloc(n, sizeof(double), err)) ||
        !(z->m2 = mem_calloc(n, sizeof(double), err)) ||
        !(z->shift = mem_calloc(n, sizeof(float), err)) ||
        !(z->scale = mem_calloc(n, sizeof(float), err))) {
        obs_norm_free(z);
        return CALF_ENOMEM;
    }
    refresh(z);
    return CALF_OK;
}

void obs_norm_free(obs_norm *z) {
    if (!z) return;
    free(z->mean);
    free(z->m2);
    free(z->shift);
    free(z->scale);
    memset(z, 0, sizeof *z);
}

void obs_norm_accumulate(const obs_norm *z, const float *x, double *acc) {
    int d = z->dim;
    for (int i = 0; i < d; i++) {
        double dx = (double)x[i] - z->mean[i];
        acc[i] += dx;
        acc[d + i] += dx * dx;
    }
}

void obs_norm_merge(obs_norm *z, int64_t n, const double *sum) {
    CALF_ASSERT(n > 0 && z->count <= INT64_MAX - n);
    int d = z->dim;
    double nb = (double)n, na = (double)z->count, N = na + nb;
    for (int i = 0; i < d; i++) {
        double s1 = sum[i], s2 = sum[d + i];
        double mean_b = z->mean[i] + s1 / nb;
        double m2_b = s2 - s1 * s1 / nb;
        if (m2_b < 0) m2_b = 0; /* rounding: a sum of squares is never negative */
        double delta = mean_b - z->mean[i];
        z->mean[i] += delta * nb / N;
        z->m2[i] += m2_b + delta * delta * na * nb / N;
    }
    z->count += n;
    refresh(z);
}

void obs_norm_apply(const obs_norm *z, const float *x, int rows, float *y) {
    int d = z->dim;
    float c = z->clip;
    for (size_t r = 0; r < (size_t)rows; r++)
        for (int i = 0; i < d; i++) {
            size_t k = r * (size_t)d + (size_t)i;
            float v = (x[k] - z->shift[i]) * z->scale[i];
            if (c > 0) v = v < -c ? -c : v > c ? c : v;
            y[k] = v;
        }
}

void obs_norm_save(const obs_norm *z, ckpt_buf *b) {
    ckpt_put_tag(b, "ONRM");
    ckpt_put_u64(b, (uint64_t)z->dim);
    ckpt_put_i64(b, z->count);
    for (int i = 0; i < z->dim; i++) ckpt_put_f64(b, z->mean[i]);
    for (int i = 0; i < z->dim; i++) ckpt_put_f64(b, z->m2[i]);
}

int obs_norm_load(obs_norm *z, ckpt_reader *r, int64_t want_count, calf_error *err) {
    uint64_t dim = 0;
    int64_t count = 0;
    ckpt_get_tag(r, "ONRM");
    ckpt_get_u64(r, &dim);
    ckpt_get_i64(r, &count);
    if (r->status) return r->status;
    if (dim != (uint64_t)z->dim)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: ONRM: observation normalizer of %llu dimensions, the env has %d",
                              r->name, (unsigned long long)dim, z->dim);
    if (count != want_count)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: ONRM: %lld observations merged, the iteration implies %lld",
                              r->name, (long long)count, (long long)want_count);
    size_t n = (size_t)z->dim;
    double *mean = mem_calloc(n ? n : 1, sizeof(double), err);
    double *m2 = mean ? mem_calloc(n ? n : 1, sizeof(double), err) : NULL;
    if (!m2) {
        free(mean);
        return CALF_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) ckpt_get_f64(r, &mean[i]);
    for (size_t i = 0; i < n; i++) ckpt_get_f64(r, &m2[i]);
    int rc = r->status;
    for (size_t i = 0; rc == CALF_OK && i < n; i++)
        if (!isfinite(mean[i]) || !isfinite(m2[i]) || m2[i] < 0 ||
            (count == 0 && (mean[i] != 0 || m2[i] != 0)))
            rc = calf_error_set(err, CALF_EINVAL,
                                "%s: ONRM: dimension %zu has mean %g and squared deviations %g",
                                r->name, i, mean[i], m2[i]);
    if (rc == CALF_OK) {
        memcpy(z->mean, mean, n * sizeof(double));
        memcpy(z->m2, m2, n * sizeof(double));
        z->count = count;
        refresh(z);
    }
    free(mean);
    free(m2);
    return rc;
}

void obs_norm_export_c(const obs_norm *z, export_c *x, const char *out) {
    char num[EXPORT_C_NUM];
    const char *names[2] = {"obs_shift", "obs_scale"};
    const float *vals[2] = {z->shift, z->scale};
    for (int k = 0; k < 2; k++) {
        export_c_body(x, "    static const float %s[%d] = {", names[k], z->dim);
        for (int i = 0; i < z->dim; i++)
            export_c_body(x, "%s%s", i ? ", " : "", export_c_float(vals[k][i], num));
        export_c_body(x, "};\n");
    }
    /* obs_norm_apply's chain: subtract, multiply (each rounded to float), clamp */
    export_c_body_floats(x, z->dim, "the observation normalized as calf's statistics say", out,
                         NULL);
    export_c_body(x,
                  "    for (int i = 0; i < %d; i++) {\n"
                  "        float v = (obs[i] - obs_shift[i]) * obs_scale[i];\n",
                  z->dim);
    if (z->clip > 0) {
        const char *c = export_c_float(z->clip, num);
        export_c_body(x, "        v = v < -%s ? -%s : v > %s ? %s : v;\n", c, c, c, c);
    }
    export_c_body(x, "        %s[i] = v;\n    }\n", out);
}
