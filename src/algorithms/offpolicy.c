/* offpolicy.c: the replay-based algorithms' shared machinery (offpolicy.h): the rings,
 * their move to shared memory, sampling and gathering an update's rows, the per-env pass
 * into the canonical tree, the replay's part of checkpoints, and the loops over the
 * algorithm's parameter groups (digest, section, histograms). Written once here so
 * that SAC, TD3, DQN and DDPG keep the same bits-on-any-split promise the same way. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/offpolicy.h"
#include "calf/summary.h"
#include "algorithms/net_config.h"
#include "algorithms/offpolicy_math.h"
#include "base/bytes.h"
#include "base/mem.h"
#include "base/membudget.h"
#include "numerics/action_dist.h"

/* ---- settings ------------------------------------------------------------------- */

int offpolicy_check_mlp_only(const calf_config *cfg, const char *name, calf_error *err) {
    const calf_binding_id rows[] = {CALF_CFG_ACTOR_CONV_LAYERS, CALF_CFG_VALUE_CONV_LAYERS};
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++)
        if (calf_config_tuple_len(cfg, rows[k]) > 0)
            return calf_error_set(err, CALF_EINVAL,
                                  "%s: %s trains MLP networks only; %s is for PPOAlgorithm (and "
                                  "q/QNetwork.conv_layer_params for DqnAlgorithm)",
                                  config_where(cfg, rows[k]), name, calf_binding_name(rows[k]));
    return CALF_OK;
}

int64_t offpolicy_run_env_steps(const calf_config *cfg) {
    int64_t per_iter = calf_config_int(cfg, CALF_CFG_NUM_ENVS) * calf_config_int(cfg, CALF_CFG_UNROLL_LENGTH);
    int64_t iters = calf_config_int(cfg, CALF_CFG_NUM_ITERATIONS);
    int64_t steps = calf_config_int(cfg, CALF_CFG_NUM_ENV_STEPS);
    int64_t by_iters = iters > 0 && iters <= INT64_MAX / per_iter ? iters * per_iter : 0;
    if (steps > 0 && (by_iters == 0 || steps < by_iters)) return steps;
    return by_iters;
}

int offpolicy_check_action_space(const calf_config *cfg, const calf_env_spec *spec,
                                 const char *name, bool masks_ok, calf_error *err) {
    const char *env_at = cfg->origin[CALF_CFG_ENV_NAME];
    if (spec->num_action_dims > 0)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: %s cannot train a MultiDiscrete action space; %s "
                              "(create_environment.env_name%s%s) has one of %d sub-actions: "
                              "train it with @PPOAlgorithm",
                              config_where(cfg, CALF_CFG_ALGORITHM_CTOR), name, spec->name,
                              env_at[0] ? ", set at " : ", its default", env_at,
                              spec->num_action_dims);
    if (spec->action_mask && !masks_ok)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: %s cannot train with an action mask; %s "
                              "(create_environment.env_name%s%s) masks its actions: train it "
                              "with @PPOAlgorithm or @DqnAlgorithm",
                              config_where(cfg, CALF_CFG_ALGORITHM_CTOR), name, spec->name,
                              env_at[0] ? ", set at " : ", its default", env_at);
    return CALF_OK;
}

int offpolicy_check(const calf_config *cfg, const char *name, calf_error *err) {
    int64_t mbl = calf_config_int(cfg, CALF_CFG_MINI_BATCH_LENGTH);
    int64_t len = calf_config_int(cfg, CALF_CFG_REPLAY_BUFFER_LENGTH);
    if (mbl > len) { /* either line may be the one to change: name both */
        const char *len_at = cfg->origin[CALF_CFG_REPLAY_BUFFER_LENGTH];
        return calf_error_set(err, CALF_EINVAL,
                              "%s: TrainerConfig.mini_batch_length = %lld is larger than the replay "
                              "buffer (TrainerConfig.replay_buffer_length = %lld%s%s)",
                              config_where(cfg, CALF_CFG_MINI_BATCH_LENGTH), (long long)mbl,
                              (long long)len, len_at[0] ? ", set at " : ", its default", len_at);
    }
    if (mbl != 2)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: %s learns from one-step TD: TrainerConfig."
                              "mini_batch_length must be 2, got %lld",
                              config_where(cfg, CALF_CFG_MINI_BATCH_LENGTH), name, (long long)mbl);
    int64_t collect = calf_config_int(cfg, CALF_CFG_INITIAL_COLLECT_STEPS);
    int64_t run = offpolicy_run_env_steps(cfg);
    if (run > 0 && collect >= run)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: TrainerConfig.initial_collect_steps = %lld is not below the run's "
                              "%lld env steps: it would never learn",
                              config_where(cfg, CALF_CFG_INITIAL_COLLECT_STEPS), (long long)collect,
                              (long long)run);
    if (calf_config_int(cfg, CALF_CFG_MINI_BATCH_SIZE) > (1 << 20))
        return calf_error_set(err, CALF_EINVAL, "%s: %s takes at most %d samples per update",
                              config_where(cfg, CALF_CFG_MINI_BATCH_SIZE), name, 1 << 20);
    /* Not yet: the replay would hold observations normalized by the statistics of their
     * time. */
    if (calf_config_bool(cfg, CALF_CFG_NORMALIZE_OBS))
        return calf_error_set(err, CALF_EINVAL,
                              "%s: TrainerConfig.normalize_observations: %s does not "
                              "normalize observations (PPOAlgorithm does)",
                              config_where(cfg, CALF_CFG_NORMALIZE_OBS), name);
    return CALF_OK;
}

/* The rings are allocated whole at the start but filled as the run goes: one larger
 * than the machine would only fail hours in, when the kernel ends the process. This
 * refuses what cannot fit at all; it does not count the moment of a --nproc resume when
 * a process holds its loaded rings twice (offpolicy_start copies them to shared memory). */
int offpolicy_check_memory(const calf_config *cfg, const calf_env_spec *spec, int envs,
                           uint64_t memory, const char *limit, calf_error *err) {
    int64_t cap = calf_config_int(cfg, CALF_CFG_REPLAY_BUFFER_LENGTH);
    int ad = spec->action_dim > 0 ? spec->action_dim : 1;
    int md = spec->action_mask ? spec->num_actions : 0;
    size_t need = replay_bytes(envs, cap, spec->obs_dim, spec->obs_dtype, ad, md);
    if (need != 0 && (uint64_t)need <= memory) return CALF_OK;
    char want[32] = "more than a size_t holds", have[32];
    if (need) membudget_format((double)need, want, sizeof want);
    membudget_format((double)memory, have, sizeof have);
    return calf_error_set(err, CALF_EINVAL,
                          "%s: TrainerConfig.replay_buffer_length = %lld: the replay buffer needs %s "
                          "for the %d env%s on one machine, more than the %s of %s",
                          config_where(cfg, CALF_CFG_REPLAY_BUFFER_LENGTH), (long long)cap, want,
                          envs, envs == 1 ? "" : "s", have, limit);
}

/* ---- networks ------------------------------------------------------------------- */

int offpolicy_net(net *n, const calf_config *cfg, calf_binding_id fc_id, calf_binding_id act_id,
                  int in, int out, size_t *cursor, calf_error *err) {
    const config_value *v = config_get(cfg, fc_id);
    int hidden[CONFIG_MAX_TUPLE];
    CALF_ASSERT(v->n < NN_MAX_LAYERS);
    for (int i = 0; i < v->n; i++) hidden[i] = (int)v->ti[i];
    net_spec spec = net_spec_mlp(in, hidden, v->n, out,
                                 net_config_activation(calf_config_string(cfg, act_id)));
    return net_layout(n, &spec, cursor, err);
}

adam_conf offpolicy_adam(const calf_config *cfg, double lr) {
    const config_value *betas = config_get(cfg, CALF_CFG_ADAM_BETAS);
    adam_conf opt = {.beta1 = (float)betas->tf[0], .beta2 = (float)betas->tf[1],
                     .eps = (float)calf_config_float(cfg, CALF_CFG_ADAM_EPS),
                     .max_norm = calf_config_float(cfg, CALF_CFG_GRADIENT_CLIPPING)};
    opt.lr = (float)lr;
    return opt;
}

int offpolicy_export_tanh_actor(export_c *x, const net *actor, const float *params, int A,
                                int head, const char *what, const float *lo, const float *hi,
                                calf_error *err) {
    char num[EXPORT_C_NUM];
    int rc = export_c_net(x, "actor", actor, params, err);
    if (rc) return rc;
    for (int side = 0; side < 2; side++) {
        export_c_body(x, "    static const double %s[%d] = {", side ? "bias" : "scale", A);
        for (int i = 0; i < A; i++) {
            double scale, bias;
            offpolicy_squash_affine(lo[i], hi[i], &scale, &bias);
            export_c_body(x, "%s%s", i ? ", " : "", export_c_double(side ? bias : scale, num));
        }
        export_c_body(x, "};\n");
    }
    export_c_body_floats(x, head, what, "head", NULL);
    export_c_body(x,
                  "    actor_forward(obs, head);\n"
                  "    for (int i = 0; i < %d; i++) action[i] = (float)(scale[i] * calf_tanhd((double)head[i]) + bias[i]);\n"
                  "    return 0;\n",
                  A);
    return CALF_OK;
}

void offpolicy_join_rows(const float *obs, int od, const float *u, int A, int rows, float *out) {
    for (int r = 0; r < rows; r++) {
        memcpy(out + (size_t)r * (od + A), obs + (size_t)r * od, (size_t)od * sizeof(float));
        memcpy(out + (size_t)r * (od + A) + od, u + (size_t)r * A, (size_t)A * sizeof(float));
    }
}

/* ---- lifecycle ------------------------------------------------------------------ */

/* Lay out a view of `count` envs at mem (NULL: only measure, v's pointers NULL) and
 * return its bytes, SIZE_MAX if they do not fit in a size_t: statistics, env_f and, with
 * `rings`, the replay rings. A view in shared memory has rings; a private view's rings
 * are the process's own (o->rb). Every process lays out every peer's view alike from the
 * peer's count. */
static size_t view_carve(offpolicy_view *v, const offpolicy *o, unsigned char *mem, int begin,
                         int count, bool rings) {
    size_t off = 0;
    v->stats = comm_carve(mem, &off, (size_t)count * (size_t)o->num_stats * sizeof(double));
    v->env_f = comm_carve(mem, &off, (size_t)count * sizeof(float));
    if (mem) {
        v->begin = begin;
        v->count = count;
    }
    if (!rings) return off;
    size_t ring = replay_bytes(count, o->rb.capacity, o->od, o->odt, o->rb.act_dim, o->md);
    if (ring == 0 || ring > SIZE_MAX - off) return SIZE_MAX;
    if (mem) {
        v->ring = mem + off;
        replay_init(&v->rb, o->E, begin, count, o->rb.capacity, o->od, o->odt, o->rb.act_dim,
                    o->md, v->ring);
    }
    return off + ring;
}

int offpolicy_init(offpolicy *o, const algo_setup *s, int num_stats, int noise_dim,
                   calf_error *err) {
    const calf_config *cfg = s->cfg;
    const calf_env_spec *spec = s->spec;
    o->c = s->c;
    o->E = s->E;
    o->begin = s->begin;
    o->count = s->count;
    o->T = s->T;
    o->seed = s->seed;
    o->od = spec->obs_dim;
    o->odt = spec->obs_dtype;
    o->A = spec->action_dim;
    o->nA = spec->num_actions;
    o->ad = o->A > 0 ? o->A : 1;
    o->md = spec->action_mask ? spec->num_actions : 0;
    o->lo = spec->action_low;
    o->hi = spec->action_high;
    o->B = (int)calf_config_int(cfg, CALF_CFG_MINI_BATCH_SIZE);
    o->U = (int)calf_config_int(cfg, CALF_CFG_NUM_UPDATES);
    o->initial_collect = calf_config_int(cfg, CALF_CFG_INITIAL_COLLECT_STEPS);
    o->num_stats = num_stats;
    o->noise_dim = noise_dim;
    /* a rollout step's rows or an update's, whichever is more */
    o->rows = o->count > o->B ? o->count : o->B;
    if (o->rows < 1) o->rows = 1;
    size_t R = (size_t)o->rows, od = (size_t)o->od, ad = (size_t)o->ad;
    size_t nd = noise_dim > 0 ? (size_t)noise_dim : 1;
    if (!(o->obs = mem_calloc(R * od, sizeof(float), err)) ||
        !(o->next = mem_calloc(R * od, sizeof(float), err)) ||
        !(o->act = mem_calloc(R * ad, sizeof(float), err)) ||
        !(o->rew = mem_calloc(R, sizeof(float), err)) ||
        !(o->term = mem_calloc(R, 1, err)) ||
        !(o->noise = mem_calloc(R * nd, sizeof(float), err)) ||
        (o->md > 0 && !(o->next_mask = mem_calloc(R, (size_t)o->md, err))))
        return CALF_ENOMEM;
    if (o->count == 0) return CALF_OK; /* acting only (calf play) */

    if (!(o->s_env = mem_calloc((size_t)o->B, sizeof(int), err)) ||
        !(o->s_pos = mem_calloc((size_t)o->B, sizeof(int64_t), err)) ||
        !(o->order = mem_calloc((size_t)o->B, sizeof(int), err)) ||
        !(o->offsets = mem_calloc((size_t)o->E + 1, sizeof(int), err)) ||
        !(o->act_rng = mem_calloc((size_t)o->count, sizeof *o->act_rng, err)))
        return CALF_ENOMEM;
    for (int e = 0; e < o->count; e++)
        calf_rng_seed(&o->act_rng[e], s->seed, (uint64_t)(o->begin + e), CALF_RNG_ACTION);
    int64_t cap = calf_config_int(cfg, CALF_CFG_REPLAY_BUFFER_LENGTH);
    int rc = replay_create(&o->rb, o->E, o->begin, o->count, cap, o->od, o->odt, o->ad, o->md,
                           err);
    if (rc) return rc;
    /* this process's view, private until offpolicy_start finds memory to share */
    o->nviews = 1;
    if (!(o->views = mem_calloc(1, sizeof *o->views, err))) return CALF_ENOMEM;
    o->own = &o->views[0];
    o->own_mem = mem_calloc(1, view_carve(o->own, o, NULL, o->begin, o->count, false), err);
    if (!o->own_mem) return CALF_ENOMEM;
    view_carve(o->own, o, o->own_mem, o->begin, o->count, false);
    o->own->rb = o->rb; /* its rings; offpolicy_sample copies the counters */
    o->stats = o->own->stats;
    return CALF_OK;
}

void offpolicy_set_groups(offpolicy *o, const char *tag, const offpolicy_group *groups, int n) {
    CALF_ASSERT(tag != NULL && strlen(tag) == 4 && n >= 0 && n <= OFFPOLICY_MAX_GROUPS);
    o->tag = tag;
    for (int k = 0; k < n; k++) o->groups[k] = groups[k];
    o->ngroups = n;
}

int offpolicy_add_tree(offpolicy *o, size_t n, calf_error *err) {
    CALF_ASSERT(o->ntrees < OFFPOLICY_MAX_TREES && o->count > 0);
    int i = o->ntrees++;
    o->tree_n[i] = n;
    return comm_tree_init(&o->tree[i], n, o->E, o->begin, o->count, err);
}

/* A process's view in shared memory, rings and all (work_share_layout). */
static size_t share_carve(void *view, unsigned char *base, int begin, int count, void *ctx) {
    return view_carve(view, ctx, base, begin, count, true);
}

int offpolicy_start(offpolicy *o, calf_error *err) {
    comm *c = o->c;
    int P = comm_size(c);
    work_share_layout lay = {sizeof(offpolicy_view), share_carve, o};
    for (int i = 0; i < o->ntrees; i++)
        if (!comm_tree_pieces_supported(c, o->E, o->tree_n[i])) return CALF_OK;
    if (!work_share_fits(c, o->E, 0, &lay)) return CALF_OK;
    /* what this process needs, before the collective */
    offpolicy_view *views = mem_calloc((size_t)P, sizeof *views, err);
    if (!views) return CALF_ENOMEM;
    int rc = CALF_OK;
    for (int i = 0; i < o->ntrees && rc == CALF_OK; i++)
        rc = comm_tree_init(&o->steal[i], o->tree_n[i], o->E, 0, 0, err);
    if (rc == CALF_OK) rc = work_share_init(&o->share, c, o->E, &lay, views, err);
    if (rc) {
        free(views); /* the steal trees and the share: offpolicy_free */
        return rc;
    }
    offpolicy_view *own = &views[c->index];
    /* the rings, stored transitions and all, then the counters */
    memcpy(own->ring, o->rb.owned,
           replay_bytes(o->count, o->rb.capacity, o->od, o->odt, o->rb.act_dim, o->md));
    own->rb.stored = o->rb.stored;
    own->rb.next_slot = o->rb.next_slot;
    memset(own->stats, 0, (size_t)o->count * (size_t)o->num_stats * sizeof(double));
    replay_free(&o->rb);
    o->rb = own->rb;
    free(o->own_mem);
    o->own_mem = NULL;
    free(o->views);
    o->views = views;
    o->nviews = P;
    o->own = own;
    o->stats = own->stats;
    o->sharing = true;
    return CALF_OK;
}

void offpolicy_free(offpolicy *o) {
    replay_free(&o->rb);
    for (int i = 0; i < OFFPOLICY_MAX_TREES; i++) {
        comm_tree_free(&o->tree[i]);
        comm_tree_free(&o->steal[i]);
    }
    work_share_free(&o->share);
    void *bufs[] = {o->act_rng, o->s_env, o->s_pos, o->order, o->offsets, o->obs, o->next,
                    o->act, o->rew, o->term, o->noise, o->next_mask, o->own_mem, o->views};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    memset(o, 0, sizeof *o);
}

int offpolicy_create(size_t size, int (*init)(algorithm *a, const algo_setup *s, calf_error *err),
                     void (*destroy)(algorithm *a), const algo_setup *s, algorithm **out,
                     calf_error *err) {
    *out = mem_calloc(1, size, err);
    if (!*out) return CALF_ENOMEM;
    int rc = init(*out, s, err);
    if (rc) {
        destroy(*out);
        *out = NULL;
    }
    return rc;
}

/* ---- acting --------------------------------------------------------------------- */

bool offpolicy_act_random(offpolicy *o, int64_t iteration, int s, const uint8_t *mask, int *act,
                          float *u) {
    int64_t steps_before = (iteration * o->T + s) * (int64_t)o->E;
    if (steps_before >= o->initial_collect) return false;
    int A = o->A;
    for (int e = 0; e < o->count; e++) {
        if (A == 0)
            act[e] = dist_masked_uniform(mask ? mask + (size_t)e * o->nA : NULL, o->nA,
                                         &o->act_rng[e]);
        for (int i = 0; i < A; i++)
            u[(size_t)e * A + i] = (float)calf_rng_uniform_range(&o->act_rng[e], o->lo[i], o->hi[i]);
    }
    return true;
}

void offpolicy_observe(offpolicy *o, const algo_step *st) {
    const float *act = st->u;
    if (o->A == 0) {
        for (int e = 0; e < o->count; e++) o->act[e] = (float)st->act[e];
        act = o->act;
    }
    if (st->obs8 && st->final_obs8 && o->rb.obs_dtype == CALF_DTYPE_U8) /* the block's bytes */
        replay_add_step_u8(&o->rb, st->obs8, act, st->reward, st->terminated, st->final_obs8,
                           st->next_mask);
    else
        replay_add_step(&o->rb, st->obs, act, st->reward, st->terminated, st->final_obs,
                        st->next_mask);
}

/* ---- updates -------------------------------------------------------------------- */

bool offpolicy_learning(const offpolicy *o, int64_t iteration) {
    return (iteration + 1) * (int64_t)o->E * o->T >= o->initial_collect;
}

/* Learning starts in the first iteration after which the job has taken
 * initial_collect_steps env steps. */
int64_t offpolicy_updates_after(const offpolicy *o, int64_t iterations) {
    int64_t per_iter = (int64_t)o->E * o->T;
    int64_t first = o->initial_collect > 0 ? (o->initial_collect + per_iter - 1) / per_iter - 1 : 0;
    return iterations > first ? (iterations - first) * o->U : 0;
}

int offpolicy_train(offpolicy *o, int64_t iteration, int (*update)(void *ctx, int u, calf_error *err),
                    void *ctx, calf_error *err) {
    o->iteration = iteration;
    offpolicy_clear_stats(o);
    if (!offpolicy_learning(o, iteration)) return CALF_OK;
    for (int u = 0; u < o->U; u++) {
        int rc = update(ctx, u, err);
        if (rc) return rc;
    }
    return CALF_OK;
}

void offpolicy_clear_stats(offpolicy *o) {
    memset(o->stats, 0, (size_t)o->count * (size_t)o->num_stats * sizeof(double));
}

void offpolicy_sample(offpolicy *o, int64_t iteration, int u) {
    replay_sample(o->seed, iteration, u, o->E, o->rb.stored, o->B, o->s_env, o->s_pos);
    o->stream = replay_stream_index(iteration, u);
    o->gathered.view = NULL; /* new samples */
    for (int r = 0; r < o->nviews; r++) { /* envs step in lockstep: one set of counters */
        o->views[r].rb.stored = o->rb.stored;
        o->views[r].rb.next_slot = o->rb.next_slot;
    }
}

/* The noise of sample j of the update: its own stream, so any process draws it alike. */
static void sample_noise(const offpolicy *o, int j, float *noise) {
    calf_rng r;
    calf_rng_seed(&r, o->seed, o->stream * 0x9E3779B97F4A7C15ULL + (uint64_t)j, CALF_RNG_NOISE);
    for (int i = 0; i < o->noise_dim; i++) noise[i] = (float)calf_rng_normal(&r);
}

int offpolicy_gather(offpolicy *o, const offpolicy_view *v, int first, int k) {
    /* a later pass over the group an earlier one just gathered (always, without sharing)
     * finds its rows still there: the passes write only other arrays */
    const struct offpolicy_rows *g = &o->gathered;
    if (g->view == v && g->first == first && g->k == k) return g->n;
    int n = replay_select_owned(o->B, o->s_env, v->begin + first, k, o->offsets, o->order);
    replay_gather(&v->rb, n, o->order, o->s_env, o->s_pos, o->obs, o->act, o->rew, o->term,
                  o->next, o->next_mask);
    for (int r = 0; r < n; r++) sample_noise(o, o->order[r], o->noise + (size_t)r * o->noise_dim);
    o->gathered = (struct offpolicy_rows){v, first, k, n};
    return n;
}

/* An offpolicy_pass_fn as a work_share_pass: envs of a process's view. */
typedef struct shared_pass_ctx {
    offpolicy *o;
    offpolicy_pass_fn pass;
    void *ctx;
} shared_pass_ctx;

static void pass_of_view(void *ctx, int rank, int first, int count, comm_tree *tree) {
    const shared_pass_ctx *pc = ctx;
    pc->pass(pc->ctx, &pc->o->views[rank], first, count, tree);
}

int offpolicy_pass(offpolicy *o, int tree, offpolicy_pass_fn pass, void *ctx, float *out,
                   calf_error *err) {
    CALF_ASSERT(tree >= 0 && tree < o->ntrees);
    if (!o->sharing) {
        pass(ctx, o->own, 0, o->count, &o->tree[tree]);
        return comm_tree_allreduce(o->c, &o->tree[tree], out, err);
    }
    comm_tree_pieces pieces;
    shared_pass_ctx pc = {o, pass, ctx};
    work_share_trees trees = {&o->tree[tree], NULL, 0, &o->steal[tree]};
    int rc = work_share_sum_round(&o->share, &pieces, o->tree_n[tree], &trees, 500 * 1000,
                                  pass_of_view, &pc, &o->shared_envs, err);
    if (rc) return rc;
    return comm_tree_pieces_sum(o->c, &pieces, out, err);
}

int offpolicy_sum_stats(offpolicy *o, double *g, calf_error *err) {
    return comm_tree_sum_f64(o->c, o->E, o->begin, o->count, o->stats, o->num_stats, g, err);
}

/* ---- checkpoints ---------------------------------------------------------------- */

void offpolicy_save_counters(const offpolicy *o, ckpt_buf *b) { replay_save_counters(&o->rb, b); }

int offpolicy_load_counters(offpolicy *o, ckpt_reader *r, int64_t iteration, calf_error *err) {
    if (o->count == 0) { /* acting only: the replay is not built; skip its counters */
        ckpt_get_tag(r, replay_counters_tag(o->odt, o->md > 0));
        unsigned char skip[8 * 3 + 4 * 2];
        return ckpt_get_bytes(r, skip, sizeof skip);
    }
    if (replay_load_counters(&o->rb, r) != CALF_OK) return r->status;
    /* the counters follow from the iteration too */
    int64_t steps = iteration * o->T;
    int64_t want_stored = steps < o->rb.capacity ? steps : o->rb.capacity;
    if (o->rb.stored != want_stored)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: the replay buffer holds %lld transitions per env, iteration %lld "
                              "implies %lld",
                              r->name, (long long)o->rb.stored, (long long)iteration,
                              (long long)want_stored);
    return CALF_OK;
}

void offpolicy_save(const offpolicy *o, ckpt_buf *b) {
    ckpt_put_tag(b, o->tag);
    ckpt_put_i64(b, o->updates);
    for (int k = 0; k < o->ngroups; k++) param_group_save(o->groups[k].g, b);
    offpolicy_save_counters(o, b);
}

int offpolicy_load(offpolicy *o, ckpt_reader *r, int64_t iteration, calf_error *err) {
    int64_t updates = 0, want = offpolicy_updates_after(o, iteration);
    ckpt_get_tag(r, o->tag);
    ckpt_get_i64(r, &updates);
    if (r->status) return r->status;
    if (updates != want)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: counters do not match iteration %lld of this config", r->name,
                              (long long)iteration);
    for (int k = 0; k < o->ngroups; k++) {
        const offpolicy_group *g = &o->groups[k];
        int rc = param_group_load(g->g, r, want / (g->step_period > 0 ? g->step_period : 1), err);
        if (rc) return rc;
    }
    o->updates = updates;
    return offpolicy_load_counters(o, r, iteration, err);
}

uint64_t offpolicy_digest(const offpolicy *o) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int k = 0; k < o->ngroups; k++) h = param_group_digest(o->groups[k].g, h);
    return h;
}

void offpolicy_histograms(const offpolicy *o, int64_t step) {
    char tag[64];
    for (int k = 0; k < o->ngroups; k++) {
        const offpolicy_group *g = &o->groups[k];
        if (!g->name) continue;
        snprintf(tag, sizeof tag, "Params/%s", g->name);
        calf_summary_histogram(tag, step, g->g->params, g->g->n);
        if (!g->grads) continue;
        snprintf(tag, sizeof tag, "Grads/%s", g->name);
        calf_summary_histogram(tag, step, g->g->grad, g->g->n);
    }
}

size_t offpolicy_env_record_size(const offpolicy *o) {
    return BYTES_RNG + replay_env_record_bytes(&o->rb);
}

void offpolicy_save_env(const offpolicy *o, int e, unsigned char *rec) {
    bytes_put_rng(rec, &o->act_rng[e]);
    replay_save_env(&o->rb, o->begin + e, rec + BYTES_RNG);
}

int offpolicy_load_env(offpolicy *o, int e, const unsigned char *rec, const char *name,
                       calf_error *err) {
    if (!bytes_get_rng(rec, &o->act_rng[e]))
        return calf_error_set(err, CALF_EINVAL, "%s: env %d has an all-zero random stream", name,
                              o->begin + e);
    ckpt_reader r;
    ckpt_reader_init(&r, rec + BYTES_RNG, replay_env_record_bytes(&o->rb), name, err);
    if (replay_load_env(&o->rb, &r, o->begin + e) != CALF_OK) return r.status;
    return ckpt_reader_finish(&r);
}

/* ---- describe, report ----------------------------------------------------------- */

void offpolicy_describe(const offpolicy *o, char *text, size_t cap) {
    char all[32], per[32];
    double per_env =
        (double)replay_bytes(1, o->rb.capacity, o->od, o->odt, o->rb.act_dim, o->md);
    membudget_format(per_env * o->E, all, sizeof all);
    membudget_format(per_env, per, sizeof per);
    snprintf(text, cap,
             "replay buffer: %lld transitions per env, %d envs: %s in all (%s per env); each "
             "update samples %d of them uniformly",
             (long long)o->rb.capacity, o->E, all, per, o->B);
}

void offpolicy_report(const offpolicy *o, double run_s, char *text, size_t cap) {
    char mine[32];
    membudget_format((double)replay_bytes(o->count, o->rb.capacity, o->od, o->odt, o->rb.act_dim,
                                          o->md),
                     mine, sizeof mine);
    snprintf(text, cap,
             "replay: %lld transitions stored per env (capacity %lld, %s on this process); "
             "%lld updates, %.0f updates/s\n",
             (long long)o->rb.stored, (long long)o->rb.capacity, mine, (long long)o->updates,
             run_s > 0 ? (double)o->updates / run_s : 0.0);
    size_t len = strlen(text);
    if (o->sharing && len < cap)
        snprintf(text + len, cap - len,
                 "work sharing: the rings in shared memory; %lld env partials computed for "
                 "other processes\n",
                 (long long)o->shared_envs);
}

/* ---- algorithm_ops on the core ---------------------------------------------------- */

int offpolicy_ops_start(algorithm *a, calf_error *err) { return offpolicy_start((offpolicy *)a, err); }

void offpolicy_ops_observe(algorithm *a, const algo_step *st) { offpolicy_observe((offpolicy *)a, st); }

uint64_t offpolicy_ops_digest(const algorithm *a) { return offpolicy_digest((const offpolicy *)a); }

void offpolicy_ops_save(const algorithm *a, ckpt_buf *b) { offpolicy_save((const offpolicy *)a, b); }

size_t offpolicy_ops_env_record_size(const algorithm *a) {
    return offpolicy_env_record_size((const offpolicy *)a);
}

void offpolicy_ops_save_env(const algorithm *a, int e, unsigned char *rec) {
    offpolicy_save_env((const offpolicy *)a, e, rec);
}

int offpolicy_ops_load_env(algorithm *a, int e, const unsigned char *rec, const char *name,
                           calf_error *err) {
    return offpolicy_load_env((offpolicy *)a, e, rec, name, err);
}

void offpolicy_ops_report(const algorithm *a, double run_s, char *text, size_t cap) {
    offpolicy_report((const offpolicy *)a, run_s, text, cap);
}
