/* onpolicy.c: the on-policy core (onpolicy.h): the rollout view's layout and the
 * advantages and the minibatch plan, moved out of ppo.c as they were, so that another on-policy algorithm
 * reuses them with PPO's bits. */
#include "algorithms/onpolicy.h"

#include <stdlib.h>
#include <string.h>

#include "algorithms/ppo_math.h"
#include "base/mem.h"
#include "parallel/comm.h"

size_t onpolicy_view_carve(onpolicy_view *v, unsigned char *base, int begin, int count, int T,
                           int od, int ad, int sd, bool u8, int ai, int mask_bytes,
                           int num_stats) {
    size_t off = 0, nt = (size_t)count * (size_t)T;
    size_t of = u8 ? 0 : sizeof(float), ob = u8 ? 1 : 0; /* bytes of a float, a byte value */
    v->obs = comm_carve(base, &off, nt * (size_t)od * of);
    v->obs8 = comm_carve(base, &off, nt * (size_t)od * ob);
    v->trunc_obs8 = comm_carve(base, &off, nt * (size_t)od * ob);
    v->boot_obs8 = comm_carve(base, &off, (size_t)count * (size_t)od * ob);
    v->act = comm_carve(base, &off, nt * (size_t)ai * sizeof(int));
    v->u = comm_carve(base, &off, nt * (size_t)ad * sizeof(float));
    v->logp = comm_carve(base, &off, nt * sizeof(float));
    v->adv = comm_carve(base, &off, nt * sizeof(float));
    v->ret = comm_carve(base, &off, nt * sizeof(float));
    v->rew = comm_carve(base, &off, nt * sizeof(float));
    v->term = comm_carve(base, &off, nt);
    v->trunc = comm_carve(base, &off, nt);
    v->trunc_obs = comm_carve(base, &off, nt * (size_t)od * of);
    v->boot_obs = comm_carve(base, &off, (size_t)count * (size_t)od * of);
    v->adv_sums = comm_carve(base, &off, (size_t)count * 2 * sizeof(double));
    v->perm = comm_carve(base, &off, nt * sizeof(int));
    v->stats = comm_carve(base, &off, (size_t)count * (size_t)num_stats * sizeof(double));
    size_t rec = sd > 0 ? 1 : 0; /* the recurrent parts: none without cores */
    v->start = comm_carve(base, &off, rec * nt);
    v->state0 = comm_carve(base, &off, (size_t)count * (size_t)sd * sizeof(float));
    v->val = comm_carve(base, &off, rec * nt * sizeof(float));
    v->cut_val = comm_carve(base, &off, rec * nt * sizeof(float));
    v->boot_val = comm_carve(base, &off, rec * (size_t)count * sizeof(float));
    v->mask = comm_carve(base, &off, nt * (size_t)mask_bytes);
    if (!mask_bytes) v->mask = NULL;
    if (base) {
        v->begin = begin;
        v->count = count;
    }
    return off;
}

/* ---- advantages ---- */

int onpolicy_gae_init(onpolicy_gae *g, int T, calf_error *err) {
    float **f[] = {&g->rew, &g->val, &g->next, &g->adv, &g->ret};
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++)
        if (!(*f[k] = mem_calloc((size_t)T, sizeof(float), err))) return CALF_ENOMEM;
    if (!(g->term = mem_calloc((size_t)T, 1, err)) || !(g->ended = mem_calloc((size_t)T, 1, err)))
        return CALF_ENOMEM;
    return CALF_OK;
}

void onpolicy_gae_free(onpolicy_gae *g) {
    void *bufs[] = {g->rew, g->val, g->next, g->adv, g->ret, g->term, g->ended};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    memset(g, 0, sizeof *g);
}

void onpolicy_gae_env(onpolicy_gae *g, onpolicy_view *v, int e, int T, float gamma,
                      float lambda) {
    int vn = v->count;
    for (int s = 0; s < T; s++) {
        size_t i = (size_t)s * vn + (size_t)e;
        g->rew[s] = v->rew[i];
        g->term[s] = v->term[i];
        g->ended[s] = (uint8_t)(v->term[i] | v->trunc[i]);
    }
    ppo_gae(T, g->rew, g->val, g->next, g->term, g->ended, gamma, lambda, g->adv, g->ret);
    double *sums = v->adv_sums + 2 * (size_t)e;
    sums[0] = sums[1] = 0;
    for (int s = 0; s < T; s++) {
        size_t i = (size_t)s * vn + (size_t)e;
        v->adv[i] = g->adv[s];
        v->ret[i] = g->ret[s];
        sums[0] += g->adv[s];
        sums[1] += (double)g->adv[s] * g->adv[s];
    }
}

/* ---- the minibatch plan ---- */

void onpolicy_chunk_range(int T, int M, int m, int *off, int *len) {
    int base = T / M, extra = T % M;
    *off = m * base + (m < extra ? m : extra);
    *len = base + (m < extra ? 1 : 0);
}

int onpolicy_minibatches_of(int E, int T, int64_t mini_batch_size) {
    int64_t M = ((int64_t)E * T + mini_batch_size - 1) / mini_batch_size;
    if (M < 1) M = 1;
    if (M > T) M = T;
    return (int)M;
}

int onpolicy_sequence_minibatches_of(int E, int T, int64_t mini_batch_size) {
    int64_t M = ((int64_t)E * T + mini_batch_size - 1) / mini_batch_size;
    if (M < 1) M = 1;
    if (M > E) M = E;
    return (int)M;
}

void onpolicy_shuffle(calf_rng *rng, int *perm, int T) {
    for (int i = 0; i < T; i++) perm[i] = i;
    for (int i = T - 1; i > 0; i--) {
        int j = (int)calf_rng_below(rng, (uint32_t)(i + 1));
        int tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
}
