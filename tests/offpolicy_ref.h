/* offpolicy_ref.h: what the replay algorithms' tests (test_sac, test_dpg, test_dqn) share
 * to recompute an update in double: an MLP forward on the algorithm's float parameters,
 * a parameter group read back from the algorithm's checkpoint section, and synthetic
 * transitions. */
#ifndef CALF_OFFPOLICY_REF_H
#define CALF_OFFPOLICY_REF_H

#include <stdbool.h>
#include <stdlib.h>

#include "training/algorithm.h"
#include "numerics/nn.h"
#include "records/checkpoint.h"

/* m on float parameters p laid out as nn_mlp_layout lays them (weights row-major (in,
 * out), then biases), in double; ReLU after every hidden layer (at most 64 units). */
static inline void ref_mlp_forward(const nn_mlp *m, const float *p, const double *x, double *out) {
    double buf[2][64];
    const double *in = x;
    for (int l = 0; l < m->num_layers; l++) {
        int ni = m->sizes[l], no = m->sizes[l + 1];
        double *o = l == m->num_layers - 1 ? out : buf[l & 1];
        for (int j = 0; j < no; j++) {
            double s = p[m->b_off[l] + (size_t)j];
            for (int k = 0; k < ni; k++) s += in[k] * (double)p[m->w_off[l] + (size_t)k * no + (size_t)j];
            o[j] = l == m->num_layers - 1 || s > 0.0 ? s : 0.0;
        }
        in = o;
    }
}

/* A group's section (param_group_save): params, and when trained Adam's step count and
 * moments; m (if not NULL) receives the first moment. */
static inline void ref_read_group(ckpt_reader *r, const char *tag, float *p, size_t n,
                                  bool trained, float *m) {
    ckpt_get_tag(r, tag);
    ckpt_get_f32s(r, p, n);
    if (!trained) return;
    int64_t step;
    ckpt_get_i64(r, &step);
    float *skip = calloc(n ? n : 1, sizeof(float));
    ckpt_get_f32s(r, m ? m : skip, n);
    ckpt_get_f32s(r, skip, n); /* v */
    free(skip);
}

/* The algorithm's checkpoint section (ops->save) into b, r opened on it past its counter
 * tag and updates (read into *updates): the groups follow. Free b with ckpt_buf_free. */
static inline void ref_section_open(const algorithm_ops *ops, const algorithm *a,
                                    const char *tag, ckpt_buf *b, ckpt_reader *r,
                                    calf_error *err, int64_t *updates) {
    ckpt_buf_init(b);
    ops->save(a, b);
    ckpt_reader_init(r, b->data, b->len, tag, err);
    ckpt_get_tag(r, tag);
    ckpt_get_i64(r, updates);
}

/* The synthetic transition of env e at step t for a 1-dim continuous action: obs and
 * next_obs (od each) smooth in (e, t, i), the action inside Pendulum's bounds, a reward
 * around -1. */
static inline void ref_transition(int e, int t, int od, bool terminated, float *obs, float *u,
                                  float *r, uint8_t *term, float *next) {
    for (int i = 0; i < od; i++) {
        obs[i] = (float)sin(1.3 * e + 0.7 * t + 0.9 * i);
        next[i] = (float)cos(0.4 * e + 1.1 * t + 0.5 * i);
    }
    u[0] = (float)(1.5 * sin(2.1 * e + 0.3 * t));
    *r = (float)(-1.0 - 0.5 * cos(0.8 * e + t));
    *term = terminated;
}

#endif
