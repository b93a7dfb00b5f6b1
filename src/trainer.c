/* trainer.c: the PPO training loop (rollout -> advantages -> minibatch updates ->
 * summaries -> checkpoints) and its launch: one process, --nproc N local workers, or
 * MPI ranks. Every random stream and every sum is defined over the global env index,
 * so the bytes of a checkpoint never depend on how many processes made it. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "calf/context.h"
#include "calf/summary.h"
#include "calf/train.h"
#include "checkpoint.h"
#include "comm.h"
#include "fsutil.h"
#include "launcher.h"
#include "model.h"
#include "ppo_math.h"
#include "trainer.h"
#include "vec_env.h"

/* Set by SIGINT/SIGTERM; read at the end of each iteration, where the ranks agree on
 * stopping (comm_any) so that all of them stop after the same iteration. */
static volatile sig_atomic_t stop_requested = 0;

static void on_stop_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Per-env statistics summed over the iteration, then over envs in canonical order. */
enum { ST_PG, ST_TD, ST_ENT, ST_CLIP, ST_EPISODES, ST_RETURN, ST_LENGTH, NUM_STATS };

typedef struct trainer {
    const calf_config *cfg;
    comm *c;
    const char *root;
    FILE *log;
    bool quiet;
    int E, begin, count;     /* global envs; this process owns [begin, begin+count) */
    int T;                   /* unroll length */
    int M;                   /* minibatches per epoch */
    int epochs;
    uint64_t seed;
    int64_t max_iterations;  /* 0: no limit */
    int64_t max_env_steps;   /* 0: no limit */
    int64_t total_iterations;/* the run's planned length, for checkpoints and ETA */

    vec_env ve;
    model md;
    calf_rng *act_rng;       /* (count) per-env action streams */
    calf_rng *shuf_rng;      /* (count) per-env minibatch streams */
    nn_cache a_cache, v_cache;
    int cache_rows;

    /* rollout, time-major: index (t * count + e) */
    float *obs;              /* (T, count, obs_dim) */
    int *act;                /* (T, count) */
    float *u;                /* (T, count, action_dim) continuous actions, unclipped */
    float *logp, *val, *next_val, *rew, *adv, *ret; /* (T, count) */
    uint8_t *term, *trunc;   /* (T, count) */
    float *trunc_obs;        /* (T, count, obs_dim) final observation where truncated */
    float *step_final;       /* (count, obs_dim) */
    double *step_ep_return;  /* (count) */
    int *step_ep_length;     /* (count) */
    float *head;             /* (cache_rows, head_dim) */
    float *vout;             /* (cache_rows) */
    float *rows_in;          /* (cache_rows, obs_dim) */
    size_t *trunc_idx;       /* (cache_rows) */

    /* minibatch */
    int *perm;               /* (count, T) */
    float *dhead;            /* (cache_rows, head_dim) */
    float *dval;             /* (cache_rows) */
    float *dlogstd;          /* (cache_rows, action_dim) */
    float *env_tmp;          /* (6 * T) GAE scratch for one env */
    comm_tree tree;

    double *stats;           /* (count, NUM_STATS) */
    double grad_norm_sum;
    int num_updates;

    int64_t iteration;       /* iterations completed */
    int64_t env_steps;       /* global env steps completed */
    int64_t adam_step;
    int64_t total_episodes;

    calf_summary_writer *eval_writer; /* main process only, when evaluating */
    double eval_return;      /* last evaluation's average, NAN before */
    double last_avg_return;  /* last iteration with finished episodes */
    double start_time, last_progress;
    int64_t start_iteration;
    int status;              /* result of the loop */
    calf_error *err;
} trainer;

/* ---- logging ---------------------------------------------------------------- */

static void logf_(trainer *t, bool to_stderr, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void logf_(trainer *t, bool to_stderr, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (t->log) {
        fprintf(t->log, "%s\n", line);
        fflush(t->log);
    }
    if (to_stderr && !t->quiet && calf_context_is_main()) fprintf(stderr, "%s\n", line);
}

static int join_path(char *out, size_t cap, const char *a, const char *b, calf_error *err) {
    int n = snprintf(out, cap, "%s/%s", a, b);
    if (n < 0 || (size_t)n >= cap)
        return calf_error_set(err, CALF_EINVAL, "path too long: %s/%s", a, b);
    return CALF_OK;
}

/* ---- config ----------------------------------------------------------------- */

int calf_train_load_config(const calf_train_options *o, calf_config *cfg, calf_error *err) {
    calf_config_init(cfg);
    int rc;
    if (o->conf_path) {
        rc = calf_config_parse_file(cfg, o->conf_path, err);
    } else {
        char path[4096];
        if ((rc = join_path(path, sizeof path, o->root_dir, "config.gin", err))) return rc;
        if (access(path, F_OK) != 0)
            return calf_error_set(err, CALF_EINVAL,
                                  "missing --conf (and %s does not exist to resume from)", path);
        rc = calf_config_parse_file(cfg, path, err);
    }
    if (rc) return rc == CALF_EIO ? CALF_EINVAL : rc;
    for (int i = 0; i < o->num_conf_params; i++)
        if ((rc = calf_config_apply_param(cfg, o->conf_params[i], err))) return rc;
    if ((rc = calf_config_validate(cfg, err))) return rc;
    const char *env = calf_config_string(cfg, CFG_ENV_NAME);
    if (!calf_env_find(env)) {
        char names[512];
        calf_env_list_names(names, sizeof names);
        const char *where = cfg->origin[CFG_ENV_NAME];
        return calf_error_set(err, CALF_EINVAL, "%s%sunknown environment '%s' (known: %s)",
                              where, where[0] ? ": " : "", env, names);
    }
    const calf_env_class *cls = calf_env_find(env);
    if (cls->spec.action_dim > 0 && cls->spec.num_actions > 0)
        return calf_error_set(err, CALF_EINVAL, "environment '%s' has both action kinds", env);
    return CALF_OK;
}

/* ---- setup ------------------------------------------------------------------ */

static void *xcalloc_(size_t count, size_t size) { return calf_xcalloc(count, size); }

static void trainer_free(trainer *t) {
    vec_env_free(&t->ve);
    model_free(&t->md);
    nn_cache_free(&t->a_cache);
    nn_cache_free(&t->v_cache);
    comm_tree_free(&t->tree);
    void *bufs[] = {t->act_rng, t->shuf_rng, t->obs, t->act, t->u, t->logp, t->val, t->next_val,
                    t->rew, t->adv, t->ret, t->term, t->trunc, t->trunc_obs, t->step_final,
                    t->step_ep_return, t->step_ep_length, t->head, t->vout, t->rows_in, t->trunc_idx,
                    t->perm, t->dhead, t->dval, t->dlogstd, t->env_tmp, t->stats};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
}

/* chunk m of T timesteps split into M nearly equal chunks: [*off, *off + *len) */
static void chunk_range(int T, int M, int m, int *off, int *len) {
    int base = T / M, extra = T % M;
    *off = m * base + (m < extra ? m : extra);
    *len = base + (m < extra ? 1 : 0);
}

static int trainer_init(trainer *t, const calf_config *cfg, comm *c, calf_error *err) {
    t->cfg = cfg;
    t->c = c;
    t->E = (int)calf_config_int(cfg, CFG_NUM_ENVS);
    t->T = (int)calf_config_int(cfg, CFG_UNROLL_LENGTH);
    t->epochs = (int)calf_config_int(cfg, CFG_NUM_UPDATES);
    t->seed = (uint64_t)calf_config_int(cfg, CFG_RANDOM_SEED);
    t->max_iterations = calf_config_int(cfg, CFG_NUM_ITERATIONS);
    t->max_env_steps = calf_config_int(cfg, CFG_NUM_ENV_STEPS);
    int64_t per_iter = (int64_t)t->E * t->T;
    int64_t by_steps = t->max_env_steps > 0 ? (t->max_env_steps + per_iter - 1) / per_iter : 0;
    t->total_iterations = t->max_iterations;
    if (by_steps > 0 && (t->total_iterations == 0 || by_steps < t->total_iterations))
        t->total_iterations = by_steps;
    /* minibatches: the global mini_batch_size, rounded to whole timesteps per env */
    int64_t mbs = calf_config_int(cfg, CFG_MINI_BATCH_SIZE);
    int64_t M = (per_iter + mbs - 1) / mbs;
    if (M < 1) M = 1;
    if (M > t->T) M = t->T;
    t->M = (int)M;
    t->eval_return = NAN;
    t->last_avg_return = NAN;

    int rc = calf_split(t->E, comm_size(c), c->index, &t->begin, &t->count, err);
    if (rc) return rc;
    rc = vec_env_init(&t->ve, calf_config_string(cfg, CFG_ENV_NAME), t->seed, t->begin, t->count,
                      err);
    if (rc) return rc;
    const calf_env_class *cls = calf_env_find(calf_config_string(cfg, CFG_ENV_NAME));
    model_init(&t->md, cfg, &cls->spec);
    model_init_params(&t->md, cfg, t->seed);

    int n = t->count, T = t->T, od = t->md.obs_dim, hd = t->md.head_dim;
    int ad = t->md.action_dim > 0 ? t->md.action_dim : 1;
    int max_chunk = (T + t->M - 1) / t->M;
    t->cache_rows = n * max_chunk > n ? n * max_chunk : n;
    nn_cache_init(&t->a_cache, &t->md.actor, t->cache_rows);
    nn_cache_init(&t->v_cache, &t->md.value, t->cache_rows);

    t->act_rng = xcalloc_((size_t)n, sizeof *t->act_rng);
    t->shuf_rng = xcalloc_((size_t)n, sizeof *t->shuf_rng);
    for (int e = 0; e < n; e++) {
        calf_rng_seed(&t->act_rng[e], t->seed, (uint64_t)(t->begin + e), CALF_RNG_ACTION);
        calf_rng_seed(&t->shuf_rng[e], t->seed, (uint64_t)(t->begin + e), CALF_RNG_SHUFFLE);
    }
    size_t nt = (size_t)n * (size_t)T;
    t->obs = xcalloc_(nt * (size_t)od, sizeof(float));
    t->act = xcalloc_(nt, sizeof(int));
    t->u = xcalloc_(nt * (size_t)ad, sizeof(float));
    t->logp = xcalloc_(nt, sizeof(float));
    t->val = xcalloc_(nt, sizeof(float));
    t->next_val = xcalloc_(nt, sizeof(float));
    t->rew = xcalloc_(nt, sizeof(float));
    t->adv = xcalloc_(nt, sizeof(float));
    t->ret = xcalloc_(nt, sizeof(float));
    t->term = xcalloc_(nt, 1);
    t->trunc = xcalloc_(nt, 1);
    t->trunc_obs = xcalloc_(nt * (size_t)od, sizeof(float));
    t->step_final = xcalloc_((size_t)n * (size_t)od, sizeof(float));
    t->step_ep_return = xcalloc_((size_t)n, sizeof(double));
    t->step_ep_length = xcalloc_((size_t)n, sizeof(int));
    size_t rows = (size_t)t->cache_rows;
    t->head = xcalloc_(rows * (size_t)hd, sizeof(float));
    t->vout = xcalloc_(rows, sizeof(float));
    t->rows_in = xcalloc_(rows * (size_t)od, sizeof(float));
    t->trunc_idx = xcalloc_(rows, sizeof(size_t));
    t->perm = xcalloc_(nt, sizeof(int));
    t->dhead = xcalloc_(rows * (size_t)hd, sizeof(float));
    t->dval = xcalloc_(rows, sizeof(float));
    t->dlogstd = xcalloc_(rows * (size_t)ad, sizeof(float));
    t->env_tmp = xcalloc_((size_t)T * 6, sizeof(float));
    t->stats = xcalloc_((size_t)n * NUM_STATS, sizeof(double));
    comm_tree_init(&t->tree, t->md.num_params, t->E, t->begin, t->count);
    return CALF_OK;
}

/* ---- rollout ---------------------------------------------------------------- */

/* values of `rows` observations (rows may exceed the cache: done in slices) */
static void value_of(trainer *t, const float *x, int rows, float *out) {
    int od = t->md.obs_dim;
    for (int r0 = 0; r0 < rows; r0 += t->cache_rows) {
        int b = rows - r0 < t->cache_rows ? rows - r0 : t->cache_rows;
        nn_mlp_forward(&t->md.value, t->md.params, x + (size_t)r0 * od, b, &t->v_cache, out + r0);
    }
}

static void rollout(trainer *t) {
    model *md = &t->md;
    int n = t->count, od = md->obs_dim, hd = md->head_dim, ad = md->action_dim;
    for (int s = 0; s < t->T; s++) {
        size_t base = (size_t)s * n;
        memcpy(t->obs + base * od, t->ve.obs, (size_t)n * od * sizeof(float));
        nn_mlp_forward(&md->actor, md->params, t->ve.obs, n, &t->a_cache, t->head);
        for (int e = 0; e < n; e++) {
            size_t i = base + (size_t)e;
            t->logp[i] = model_sample(md, md->params, t->head + (size_t)e * hd, &t->act_rng[e],
                                      &t->act[i], ad ? t->u + i * ad : NULL);
        }
        vec_env_step(&t->ve, t->act + base, ad ? t->u + base * ad : NULL, t->rew + base,
                     t->term + base, t->trunc + base, t->step_final, t->step_ep_return,
                     t->step_ep_length);
        for (int e = 0; e < n; e++) {
            size_t i = base + (size_t)e;
            if (t->trunc[i])
                memcpy(t->trunc_obs + i * od, t->step_final + (size_t)e * od, od * sizeof(float));
            if (t->term[i] || t->trunc[i]) {
                double *st = t->stats + (size_t)e * NUM_STATS;
                st[ST_EPISODES] += 1;
                st[ST_RETURN] += t->step_ep_return[e];
                st[ST_LENGTH] += t->step_ep_length[e];
            }
        }
    }
    /* values: V(obs_t) for every step, V(obs after the last step) to bootstrap, and
     * V(final obs) where an episode was cut by the time limit */
    value_of(t, t->obs, n * t->T, t->val);
    float *boot = t->vout;
    value_of(t, t->ve.obs, n, boot);
    for (int s = 0; s < t->T; s++)
        for (int e = 0; e < n; e++) {
            size_t i = (size_t)s * n + e;
            t->next_val[i] = s + 1 < t->T ? t->val[i + n] : boot[e];
        }
    size_t total = (size_t)n * t->T;
    int k = 0;
    for (size_t i = 0; i <= total; i++) {
        if (i < total && t->trunc[i]) {
            memcpy(t->rows_in + (size_t)k * od, t->trunc_obs + i * od, od * sizeof(float));
            t->trunc_idx[k++] = i;
        }
        if (k == t->cache_rows || (i == total && k > 0)) {
            nn_mlp_forward(&md->value, md->params, t->rows_in, k, &t->v_cache, t->vout);
            for (int j = 0; j < k; j++) t->next_val[t->trunc_idx[j]] = t->vout[j];
            k = 0;
        }
    }
}

/* ---- advantages ------------------------------------------------------------- */

static int compute_advantages(trainer *t, calf_error *err) {
    int n = t->count, T = t->T;
    float gamma = (float)calf_config_float(t->cfg, CFG_GAMMA);
    float lambda = (float)calf_config_float(t->cfg, CFG_TD_LAMBDA);
    float *r = t->env_tmp, *v = r + T, *nv = v + T, *a = nv + T, *ret = a + T;
    uint8_t *term = (uint8_t *)(ret + T), *ended = term + T;
    double *sums = xcalloc_((size_t)n * 2, sizeof(double));
    for (int e = 0; e < n; e++) {
        for (int s = 0; s < T; s++) {
            size_t i = (size_t)s * n + e;
            r[s] = t->rew[i];
            v[s] = t->val[i];
            nv[s] = t->next_val[i];
            term[s] = t->term[i];
            ended[s] = (uint8_t)(t->term[i] | t->trunc[i]);
        }
        ppo_gae(T, r, v, nv, term, ended, gamma, lambda, a, ret);
        for (int s = 0; s < T; s++) {
            size_t i = (size_t)s * n + e;
            t->adv[i] = a[s];
            t->ret[i] = ret[s];
            sums[2 * e] += a[s];
            sums[2 * e + 1] += (double)a[s] * a[s];
        }
    }
    int rc = CALF_OK;
    if (calf_config_bool(t->cfg, CFG_NORMALIZE_ADVANTAGES)) {
        double tot[2];
        rc = comm_tree_sum_f64(t->c, t->E, t->begin, n, sums, 2, tot, err);
        if (rc == CALF_OK) {
            double N = (double)t->E * T;
            double mean = tot[0] / N;
            double var = tot[1] / N - mean * mean;
            float fmean = (float)mean;
            float inv = (float)(1.0 / (sqrt(var > 0 ? var : 0) + 1e-8));
            for (size_t i = 0; i < (size_t)n * T; i++) t->adv[i] = (t->adv[i] - fmean) * inv;
        }
    }
    free(sums);
    return rc;
}

/* ---- PPO update --------------------------------------------------------------- */

static void shuffle_env(calf_rng *rng, int *perm, int T) {
    for (int i = 0; i < T; i++) perm[i] = i;
    for (int i = T - 1; i > 0; i--) {
        int j = (int)calf_rng_below(rng, (uint32_t)(i + 1));
        int tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
}

static int update(trainer *t, calf_error *err) {
    model *md = &t->md;
    int n = t->count, T = t->T, od = md->obs_dim, hd = md->head_dim, ad = md->action_dim;
    float clip = (float)calf_config_float(t->cfg, CFG_RATIO_CLIPPING);
    float td_w = (float)calf_config_float(t->cfg, CFG_TD_LOSS_WEIGHT);
    float ent_w = (float)calf_config_float(t->cfg, CFG_ENTROPY_REG);
    float lr = (float)calf_config_float(t->cfg, CFG_ADAM_LR);
    const calf_config_value *betas = calf_config_get(t->cfg, CFG_ADAM_BETAS);
    float eps = (float)calf_config_float(t->cfg, CFG_ADAM_EPS);
    double max_norm = calf_config_float(t->cfg, CFG_GRADIENT_CLIPPING);

    for (int epoch = 0; epoch < t->epochs; epoch++) {
        for (int e = 0; e < n; e++) shuffle_env(&t->shuf_rng[e], t->perm + (size_t)e * T, T);
        for (int mb = 0; mb < t->M; mb++) {
            int off, len;
            chunk_range(T, t->M, mb, &off, &len);
            int rows = n * len;
            /* rows grouped by env: env e's timesteps are rows [e*len, (e+1)*len) */
            for (int e = 0; e < n; e++)
                for (int j = 0; j < len; j++) {
                    size_t i = (size_t)t->perm[(size_t)e * T + off + j] * n + e;
                    memcpy(t->rows_in + ((size_t)e * len + j) * od, t->obs + i * od,
                           od * sizeof(float));
                }
            nn_mlp_forward(&md->actor, md->params, t->rows_in, rows, &t->a_cache, t->head);
            nn_mlp_forward(&md->value, md->params, t->rows_in, rows, &t->v_cache, t->vout);
            float scale = 1.0f / ((float)t->E * (float)len);
            for (int e = 0; e < n; e++) {
                double *st = t->stats + (size_t)e * NUM_STATS;
                for (int j = 0; j < len; j++) {
                    int r = e * len + j;
                    size_t i = (size_t)t->perm[(size_t)e * T + off + j] * n + e;
                    const float *h = t->head + (size_t)r * hd;
                    float logp, ent;
                    model_logp_entropy(md, md->params, h, t->act[i], ad ? t->u + i * ad : NULL,
                                       &logp, &ent);
                    ppo_sample_result res;
                    ppo_sample_loss(logp, t->logp[i], t->adv[i], ent, t->vout[r], t->ret[i],
                                    clip, td_w, ent_w, scale, &res);
                    model_dist_backward(md, md->params, h, t->act[i], ad ? t->u + i * ad : NULL,
                                        res.dlogp, res.dentropy, t->dhead + (size_t)r * hd,
                                        ad ? t->dlogstd + (size_t)r * ad : NULL);
                    t->dval[r] = res.dvalue;
                    st[ST_PG] += res.pg_loss;
                    st[ST_TD] += res.td_loss;
                    st[ST_ENT] += ent;
                    st[ST_CLIP] += res.clipped;
                }
            }
            /* per-env partial gradients, folded in canonical env order */
            for (int e = 0; e < n; e++) {
                float *leaf = comm_tree_leaf(&t->tree);
                int r0 = e * len;
                nn_mlp_backward(&md->actor, md->params, &t->a_cache, r0, len,
                                t->dhead + (size_t)r0 * hd, leaf, NULL);
                nn_mlp_backward(&md->value, md->params, &t->v_cache, r0, len, t->dval + r0, leaf,
                                NULL);
                for (int j = 0; j < len && ad; j++)
                    for (int k = 0; k < ad; k++)
                        leaf[md->log_std_off + k] += t->dlogstd[(size_t)(r0 + j) * ad + k];
                comm_tree_push(&t->tree);
            }
            int rc = comm_tree_allreduce(t->c, &t->tree, md->grad, err);
            if (rc) return rc;
            t->grad_norm_sum += nn_clip_grad_norm(md->grad, md->num_params, max_norm);
            t->num_updates++;
            t->adam_step++;
            nn_adam_step(md->params, md->grad, md->m, md->v, md->num_params, t->adam_step, lr,
                         (float)betas->tf[0], (float)betas->tf[1], eps);
        }
    }
    return CALF_OK;
}

/* ---- evaluation (main process only) ------------------------------------------ */

/* Average return of `episodes` greedy episodes on fresh envs. Eval envs use their own
 * index range (2^40 + k) so they never replay a training env's stream. */
double calf_evaluate_greedy(const model *md, const char *env_name, uint64_t seed, int episodes,
                            double *returns, calf_error *err) {
    calf_env *envs = xcalloc_((size_t)episodes, sizeof *envs);
    nn_cache cache;
    memset(&cache, 0, sizeof cache);
    int od = md->obs_dim, hd = md->head_dim, ad = md->action_dim;
    float *obs = xcalloc_((size_t)episodes * od, sizeof(float));
    float *head = xcalloc_((size_t)episodes * hd, sizeof(float));
    float *u = xcalloc_((size_t)(ad ? ad : 1), sizeof(float));
    uint8_t *done = xcalloc_((size_t)episodes, 1);
    double total = NAN;
    int rc = CALF_OK;
    for (int k = 0; k < episodes && rc == CALF_OK; k++) {
        rc = calf_env_init(&envs[k], env_name, seed, ((uint64_t)1 << 40) + (uint64_t)k, err);
        if (rc == CALF_OK) calf_env_reset(&envs[k], obs + (size_t)k * od);
        returns[k] = 0;
    }
    if (rc == CALF_OK) {
        nn_cache_init(&cache, &md->actor, episodes);
        int left = episodes;
        while (left > 0) {
            nn_mlp_forward(&md->actor, md->params, obs, episodes, &cache, head);
            for (int k = 0; k < episodes; k++) {
                if (done[k]) continue;
                int a = 0, term = 0, trunc = 0;
                float rew = 0;
                model_mode(md, head + (size_t)k * hd, &a, u);
                calf_env_step(&envs[k], a, u, obs + (size_t)k * od, &rew, &term, &trunc);
                returns[k] += rew;
                if (term || trunc) {
                    done[k] = 1;
                    left--;
                }
            }
        }
        total = 0;
        for (int k = 0; k < episodes; k++) total += returns[k];
        total /= episodes;
    }
    for (int k = 0; k < episodes; k++) calf_env_free(&envs[k]);
    nn_cache_free(&cache);
    free(envs);
    free(obs);
    free(head);
    free(u);
    free(done);
    return total;
}

/* ---- checkpoints ------------------------------------------------------------ */

#define CKPT_LAYOUT_VERSION 1u
#define RNG_BYTES (sizeof(calf_rng))

/* One env's record in a checkpoint: the env (vec_env's record), then its action and
 * shuffle streams. */
static size_t env_record_size(const trainer *t) {
    return vec_env_record_size(&t->ve) + 2 * RNG_BYTES;
}

static int write_checkpoint(trainer *t, calf_error *err) {
    size_t rec = env_record_size(t);
    unsigned char *local = xcalloc_((size_t)t->count, rec);
    for (int e = 0; e < t->count; e++) {
        unsigned char *p = local + (size_t)e * rec;
        vec_env_save_record(&t->ve, e, p);
        memcpy(p + vec_env_record_size(&t->ve), &t->act_rng[e], RNG_BYTES);
        memcpy(p + vec_env_record_size(&t->ve) + RNG_BYTES, &t->shuf_rng[e], RNG_BYTES);
    }
    unsigned char *all = calf_context_is_main() ? xcalloc_((size_t)t->E, rec) : NULL;
    int rc = comm_gather_records(t->c, local, rec, t->count, t->E, all, err);
    if (rc == CALF_OK && calf_context_is_main()) {
        model *md = &t->md;
        ckpt_buf b;
        ckpt_buf_init(&b);
        ckpt_put_tag(&b, "META");
        ckpt_put_u32(&b, CKPT_LAYOUT_VERSION);
        ckpt_put_i64(&b, t->iteration);
        ckpt_put_i64(&b, t->env_steps);
        ckpt_put_i64(&b, t->adam_step);
        ckpt_put_i64(&b, t->total_episodes);
        ckpt_put_u64(&b, (uint64_t)t->E);
        ckpt_put_tag(&b, "PRMS");
        ckpt_put_f32s(&b, md->params, md->num_params);
        ckpt_put_tag(&b, "ADAM");
        ckpt_put_f32s(&b, md->m, md->num_params);
        ckpt_put_f32s(&b, md->v, md->num_params);
        ckpt_put_tag(&b, "ENVS");
        ckpt_put_u64(&b, rec);
        ckpt_put_bytes(&b, all, (size_t)t->E * rec);
        char dir[4096], path[4200];
        rc = join_path(dir, sizeof dir, t->root, "train/algorithm", err);
        if (rc == CALF_OK) rc = ckpt_path(path, sizeof path, dir, t->iteration, err);
        if (rc == CALF_OK)
            rc = ckpt_write_atomic(path, calf_config_digest(t->cfg), t->iteration, b.data, b.len,
                                   err);
        if (rc == CALF_OK) {
            int64_t keep = calf_config_int(t->cfg, CFG_NUM_CHECKPOINTS);
            rc = ckpt_prune(dir, keep > 0 ? (int)keep : 1, err);
            logf_(t, false, "checkpoint %s", path);
        }
        ckpt_buf_free(&b);
    }
    free(local);
    free(all);
    return rc;
}

int trainer_read_params(const unsigned char *payload, size_t n, const char *name, model *md,
                        int64_t *iteration, calf_error *err) {
    ckpt_reader r;
    ckpt_reader_init(&r, payload, n, name, err);
    uint32_t layout = 0;
    int64_t it = 0, unused;
    uint64_t E;
    ckpt_get_tag(&r, "META");
    ckpt_get_u32(&r, &layout);
    if (r.status == CALF_OK && layout != CKPT_LAYOUT_VERSION)
        return calf_error_set(err, CALF_EINVAL, "%s: unsupported checkpoint layout %u", name,
                              layout);
    ckpt_get_i64(&r, &it);
    ckpt_get_i64(&r, &unused);
    ckpt_get_i64(&r, &unused);
    ckpt_get_i64(&r, &unused);
    ckpt_get_u64(&r, &E);
    ckpt_get_tag(&r, "PRMS");
    ckpt_get_f32s(&r, md->params, md->num_params);
    if (r.status) return r.status;
    if (iteration) *iteration = it;
    return CALF_OK;
}

static int load_checkpoint(trainer *t, const unsigned char *payload, size_t n, const char *name,
                           calf_error *err) {
    model *md = &t->md;
    ckpt_reader r;
    ckpt_reader_init(&r, payload, n, name, err);
    uint32_t layout = 0;
    uint64_t E = 0, rec = 0;
    ckpt_get_tag(&r, "META");
    ckpt_get_u32(&r, &layout);
    if (r.status == CALF_OK && layout != CKPT_LAYOUT_VERSION)
        return calf_error_set(err, CALF_EINVAL, "%s: unsupported checkpoint layout %u", name,
                              layout);
    ckpt_get_i64(&r, &t->iteration);
    ckpt_get_i64(&r, &t->env_steps);
    ckpt_get_i64(&r, &t->adam_step);
    ckpt_get_i64(&r, &t->total_episodes);
    ckpt_get_u64(&r, &E);
    if (r.status) return r.status;
    if (E != (uint64_t)t->E)
        return calf_error_set(err, CALF_EINVAL, "%s: checkpoint has %llu environments, config %d",
                              name, (unsigned long long)E, t->E);
    if (t->iteration < 0 || t->env_steps < 0 || t->adam_step < 0 || t->total_episodes < 0)
        return calf_error_set(err, CALF_EINVAL, "%s: negative counters in checkpoint", name);
    ckpt_get_tag(&r, "PRMS");
    ckpt_get_f32s(&r, md->params, md->num_params);
    ckpt_get_tag(&r, "ADAM");
    ckpt_get_f32s(&r, md->m, md->num_params);
    ckpt_get_f32s(&r, md->v, md->num_params);
    ckpt_get_tag(&r, "ENVS");
    ckpt_get_u64(&r, &rec);
    if (r.status) return r.status;
    if (rec != env_record_size(t))
        return calf_error_set(err, CALF_EINVAL, "%s: env record size %llu, expected %zu", name,
                              (unsigned long long)rec, env_record_size(t));
    /* skip to this process's block of records */
    if (r.pos + (size_t)t->E * rec != r.len)
        return calf_error_set(err, CALF_EINVAL, "%s: env records do not fill the payload", name);
    const unsigned char *base = r.p + r.pos + (size_t)t->begin * rec;
    for (int e = 0; e < t->count; e++) {
        const unsigned char *p = base + (size_t)e * rec;
        int rc = vec_env_load_record(&t->ve, e, p, err);
        if (rc) return rc;
        memcpy(&t->act_rng[e], p + vec_env_record_size(&t->ve), RNG_BYTES);
        memcpy(&t->shuf_rng[e], p + vec_env_record_size(&t->ve) + RNG_BYTES, RNG_BYTES);
    }
    return CALF_OK;
}

/* ---- the loop ----------------------------------------------------------------- */

static bool finished(const trainer *t) {
    if (t->max_iterations > 0 && t->iteration >= t->max_iterations) return true;
    if (t->max_env_steps > 0 && t->env_steps >= t->max_env_steps) return true;
    return false;
}

static bool checkpoint_due(const trainer *t) {
    int64_t k = calf_config_int(t->cfg, CFG_NUM_CHECKPOINTS);
    if (k <= 0 || t->total_iterations <= 0) return false;
    int64_t interval = t->total_iterations / k;
    if (interval < 1) interval = 1;
    return t->iteration % interval == 0;
}

static void format_duration(double s, char *buf, size_t cap) {
    if (!(s >= 0) || s > 1e8) {
        snprintf(buf, cap, "?");
        return;
    }
    long v = (long)(s + 0.5);
    if (v >= 3600) snprintf(buf, cap, "%ld:%02ld:%02ld", v / 3600, (v / 60) % 60, v % 60);
    else snprintf(buf, cap, "%ld:%02ld", v / 60, v % 60);
}

static void progress(trainer *t, double steps_per_sec, bool force) {
    double now = now_seconds();
    bool tty = isatty(STDERR_FILENO);
    double every = tty ? 0.2 : 5.0;
    char eta[32], ret[32], ev[48] = "";
    double per_iter = (now - t->start_time) / (double)(t->iteration - t->start_iteration);
    format_duration(t->total_iterations > 0 ? per_iter * (double)(t->total_iterations - t->iteration)
                                            : -1,
                    eta, sizeof eta);
    if (isnan(t->last_avg_return)) snprintf(ret, sizeof ret, "-");
    else snprintf(ret, sizeof ret, "%.1f", t->last_avg_return);
    if (!isnan(t->eval_return)) snprintf(ev, sizeof ev, "  eval %.1f", t->eval_return);
    char total[32] = "";
    if (t->total_iterations > 0) snprintf(total, sizeof total, "/%lld", (long long)t->total_iterations);
    char line[512];
    snprintf(line, sizeof line, "iter %lld%s  env steps %lld  %.0f steps/s  return %s%s  eta %s",
             (long long)t->iteration, total, (long long)t->env_steps, steps_per_sec, ret, ev, eta);
    if (t->log) {
        fprintf(t->log, "%s\n", line);
        fflush(t->log);
    }
    if (t->quiet || !calf_context_is_main()) return;
    if (!force && now - t->last_progress < every) return;
    t->last_progress = now;
    if (tty) {
        /* a live bar on a terminal; plain lines (above) for logs and pipes */
        char bar[24] = "";
        if (t->total_iterations > 0) {
            int fill = (int)(20 * t->iteration / t->total_iterations);
            bar[0] = '[';
            for (int i = 0; i < 20; i++) bar[1 + i] = i < fill ? '#' : '.';
            bar[21] = ']';
            bar[22] = ' ';
            bar[23] = '\0';
        }
        fprintf(stderr, "\r\033[K%s%s%s", bar, line, force ? "\n" : "");
    } else {
        fprintf(stderr, "%s\n", line);
    }
}

static void write_summaries(trainer *t, const double *g, double steps_per_sec) {
    int64_t step = t->iteration;
    double samples = (double)t->epochs * t->E * t->T;
    if (g[ST_EPISODES] > 0) {
        calf_summary_scalar("Metrics/AverageReturn", step, g[ST_RETURN] / g[ST_EPISODES]);
        calf_summary_scalar("Metrics/AverageEpisodeLength", step, g[ST_LENGTH] / g[ST_EPISODES]);
    }
    calf_summary_scalar("Metrics/EnvironmentSteps", step, (double)t->env_steps);
    calf_summary_scalar("Metrics/NumberOfEpisodes", step, (double)t->total_episodes);
    calf_summary_scalar("PPOLoss/pg_loss", step, g[ST_PG] / samples);
    calf_summary_scalar("PPOLoss/td_loss", step, g[ST_TD] / samples);
    calf_summary_scalar("PPOLoss/entropy", step, g[ST_ENT] / samples);
    calf_summary_scalar("PPOLoss/clip_fraction", step, g[ST_CLIP] / samples);
    calf_summary_scalar("Optimizer/grad_norm", step,
                        t->num_updates ? t->grad_norm_sum / t->num_updates : 0);
    calf_summary_scalar("Perf/env_steps_per_sec", step, steps_per_sec);
    if (calf_config_bool(t->cfg, CFG_SUMMARIZE_GRADS_AND_VARS)) {
        model *md = &t->md;
        calf_summary_histogram("Params/actor", step, md->params + md->actor.offset,
                               md->actor.num_params);
        calf_summary_histogram("Params/value", step, md->params + md->value.offset,
                               md->value.num_params);
        calf_summary_histogram("Grads/actor", step, md->grad + md->actor.offset,
                               md->actor.num_params);
        calf_summary_histogram("Grads/value", step, md->grad + md->value.offset,
                               md->value.num_params);
    }
}

static int evaluate(trainer *t, calf_error *err) {
    int episodes = (int)calf_config_int(t->cfg, CFG_NUM_EVAL_EPISODES);
    double *returns = xcalloc_((size_t)episodes, sizeof(double));
    double avg = calf_evaluate_greedy(&t->md, calf_config_string(t->cfg, CFG_ENV_NAME), t->seed,
                                      episodes, returns, err);
    free(returns);
    if (isnan(avg)) return err->status ? err->status : CALF_EINVAL;
    t->eval_return = avg;
    logf_(t, false, "eval iter %lld: average return %.3f over %d episodes",
          (long long)t->iteration, avg, episodes);
    if (t->eval_writer) {
        double wall = (double)time(NULL);
        calf_summary_writer_add_scalar(t->eval_writer, "Metrics/AverageReturn", t->iteration,
                                       wall, avg);
        calf_summary_writer_add_scalar(t->eval_writer, "Metrics/EnvironmentSteps", t->iteration,
                                       wall, (double)t->env_steps);
        int rc = calf_summary_writer_flush(t->eval_writer, err);
        if (rc) return rc;
    }
    return CALF_OK;
}

static int train_iteration(trainer *t, bool *stop) {
    calf_error *err = t->err;
    double t0 = now_seconds();
    memset(t->stats, 0, (size_t)t->count * NUM_STATS * sizeof(double));
    t->grad_norm_sum = 0;
    t->num_updates = 0;
    rollout(t);
    int rc = compute_advantages(t, err);
    if (rc == CALF_OK) rc = update(t, err);
    if (rc) return rc;
    t->iteration++;
    t->env_steps += (int64_t)t->E * t->T;
    double g[NUM_STATS];
    rc = comm_tree_sum_f64(t->c, t->E, t->begin, t->count, t->stats, NUM_STATS, g, err);
    if (rc) return rc;
    t->total_episodes += (int64_t)g[ST_EPISODES];
    if (g[ST_EPISODES] > 0) t->last_avg_return = g[ST_RETURN] / g[ST_EPISODES];
    int any = 0;
    rc = comm_any(t->c, stop_requested != 0, &any, err);
    if (rc) return rc;
    *stop = any != 0;
    double sps = (double)t->E * t->T / (now_seconds() - t0);
    if (t->iteration % calf_config_int(t->cfg, CFG_SUMMARY_INTERVAL) == 0)
        write_summaries(t, g, sps);
    if (calf_context_is_main() && calf_config_bool(t->cfg, CFG_EVALUATE) &&
        t->iteration % calf_config_int(t->cfg, CFG_EVAL_INTERVAL) == 0) {
        if ((rc = evaluate(t, err))) return rc;
    }
    int64_t check = calf_config_int(t->cfg, CFG_DDP_CHECK_INTERVAL);
    if (comm_size(t->c) > 1 && check > 0 && t->iteration % check == 0) {
        uint64_t d = model_digest(&t->md);
        if ((rc = comm_check_equal(t->c, &d, sizeof d, err))) return rc;
    }
    if (checkpoint_due(t) || finished(t) || *stop)
        if ((rc = write_checkpoint(t, err))) return rc;
    progress(t, sps, finished(t) || *stop);
    return CALF_OK;
}

static int train_loop(void *arg) {
    trainer *t = arg;
    t->start_time = now_seconds();
    t->start_iteration = t->iteration;
    t->last_progress = 0;
    while (!finished(t)) {
        bool stop = false;
        int rc = train_iteration(t, &stop);
        if (rc) return rc;
        if (stop) {
            logf_(t, true, "interrupted: stopped after iteration %lld, checkpoint written",
                  (long long)t->iteration);
            return CALF_EINTR;
        }
    }
    return CALF_OK;
}

/* ---- launch ------------------------------------------------------------------ */

typedef struct resume_state {
    bool found;
    char path[4096];
    ckpt_header hdr;
    unsigned char *payload; /* (n) owned */
    size_t n;
} resume_state;

/* The newest valid checkpoint under root, refused when its config differs in anything
 * but run length and cadence. Warnings about skipped (corrupt) files go to stderr. */
static int find_resume(const char *root, const calf_config *cfg, resume_state *rs,
                       calf_error *err) {
    memset(rs, 0, sizeof *rs);
    char dir[4096];
    int rc = join_path(dir, sizeof dir, root, "train/algorithm", err);
    if (rc) return rc;
    rc = ckpt_find_latest_valid(dir, rs->path, sizeof rs->path, &rs->hdr, &rs->payload, &rs->n,
                                &rs->found, stderr, err);
    if (rc) return rc;
    if (rs->found && rs->hdr.digest != calf_config_digest(cfg)) {
        free(rs->payload);
        rs->payload = NULL;
        rs->found = false;
        return calf_error_set(err, CALF_EINVAL,
                              "%s was written by a different config (only the run length, "
                              "evaluation, summary and checkpoint settings may change when "
                              "resuming); use a fresh --root_dir",
                              rs->path);
    }
    return CALF_OK;
}

typedef struct worker_args {
    const calf_train_options *o;
    const calf_config *cfg;
    resume_state *rs;  /* filled before the launch (MPI: on rank 0 inside the worker) */
    bool mpi;
} worker_args;

static int exit_code_of(int status) {
    switch (status) {
    case CALF_OK: return 0;
    case CALF_EINVAL: return 2;
    case CALF_EINTR: return 130;
    default: return 1;
    }
}

static int write_operative_config(const trainer *t, const char *root, calf_error *err) {
    char path[4096], tmp[4200];
    int rc = join_path(path, sizeof path, root, "config.gin", err);
    if (rc) return rc;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return calf_error_set(err, CALF_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    char header[2048];
    int N = comm_size(t->c), off;
    off = snprintf(header, sizeof header,
                   "operative config written by calf %s: every binding's final value\n"
                   "values are global; num_parallel_environments = %d split over %d process%s:",
                   CALF_VERSION, t->E, N, N == 1 ? "" : "es");
    for (int r = 0; r < N && off < (int)sizeof header - 64; r++) {
        int b, c;
        calf_split(t->E, N, r, &b, &c, NULL);
        off += snprintf(header + off, sizeof header - (size_t)off, "\n  rank %d: environments %d..%d (%d)",
                        r, b, b + c - 1, c);
    }
    rc = calf_config_write(t->cfg, f, header);
    if (fclose(f) != 0 || rc != CALF_OK) {
        remove(tmp);
        return calf_error_set(err, CALF_EIO, "%s: write failed", tmp);
    }
    if (rename(tmp, path) != 0) {
        remove(tmp);
        return calf_error_set(err, CALF_EIO, "%s: cannot rename: %s", path, strerror(errno));
    }
    return CALF_OK;
}

/* MPI ranks may not share a file system: rank 0 reads the checkpoint, everyone gets it. */
static int broadcast_resume(comm *c, resume_state *rs, const char *root, const calf_config *cfg,
                            calf_error *err) {
    int64_t hdr[3] = {0, 0, 0}; /* status, found, n */
    if (c->index == 0) {
        calf_error local;
        calf_error_clear(&local);
        int rc = find_resume(root, cfg, rs, &local);
        hdr[0] = rc;
        hdr[1] = rs->found;
        hdr[2] = (int64_t)rs->n;
        if (rc) *err = local;
    }
    int rc = comm_broadcast(c, hdr, sizeof hdr, 0, err);
    if (rc) return rc;
    if (hdr[0]) {
        if (c->index != 0) calf_error_set(err, (int)hdr[0], "%s", ""); /* reported by rank 0 */
        return (int)hdr[0];
    }
    if (!hdr[1]) return CALF_OK;
    if (c->index != 0) {
        rs->found = true;
        rs->n = (size_t)hdr[2];
        rs->payload = calf_xmalloc(rs->n);
        snprintf(rs->path, sizeof rs->path, "checkpoint from rank 0");
    }
    return comm_broadcast(c, rs->payload, rs->n, 0, err);
}

static int train_worker(comm *c, void *arg) {
    worker_args *wa = arg;
    const calf_train_options *o = wa->o;
    calf_error err;
    calf_error_clear(&err);
    trainer t;
    memset(&t, 0, sizeof t);
    t.root = o->root_dir;
    t.quiet = o->quiet;
    t.err = &err;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    comm_set_timeout(c, calf_config_float(wa->cfg, CFG_COLLECTIVE_TIMEOUT));

    int rank = c->index;
    char logdir[4096], logpath[4200];
    int rc = join_path(logdir, sizeof logdir, o->root_dir, "log", &err);
    if (rc == CALF_OK) rc = fs_mkdir_p(logdir, &err);
    if (rc == CALF_OK) {
        snprintf(logpath, sizeof logpath, "%s/rank-%d.log", logdir, rank);
        t.log = fopen(logpath, "a");
        if (!t.log) rc = calf_error_set(&err, CALF_EIO, "%s: cannot open: %s", logpath, strerror(errno));
    }
    if (rc == CALF_OK) rc = trainer_init(&t, wa->cfg, c, &err);
    if (rc == CALF_OK) {
        logf_(&t, false, "calf %s: backend %s, pid %ld", CALF_VERSION, comm_backend_name(c),
              (long)getpid());
        logf_(&t, comm_size(c) > 1, "rank %d/%d: environments %d..%d (%d of %d)", rank,
              comm_size(c), t.begin, t.begin + t.count - 1, t.count, t.E);
    }
    if (rc == CALF_OK && wa->mpi) rc = broadcast_resume(c, wa->rs, o->root_dir, wa->cfg, &err);
    if (rc == CALF_OK && wa->rs->found) {
        rc = load_checkpoint(&t, wa->rs->payload, wa->rs->n, wa->rs->path, &err);
        if (rc == CALF_OK)
            logf_(&t, true, "resuming from %s (iteration %lld)", wa->rs->path,
                  (long long)t.iteration);
    }
    if (rc == CALF_OK && calf_context_is_main()) rc = write_operative_config(&t, o->root_dir, &err);
    if (rc == CALF_OK && calf_context_is_main() && calf_config_bool(wa->cfg, CFG_EVALUATE)) {
        char evdir[4096];
        rc = join_path(evdir, sizeof evdir, o->root_dir, "eval", &err);
        if (rc == CALF_OK) {
            t.eval_writer = calf_summary_writer_open(
                evdir, calf_config_float(wa->cfg, CFG_SUMMARIES_FLUSH_SECS), &err);
            if (!t.eval_writer) rc = err.status ? err.status : CALF_EIO;
        }
    }
    if (rc == CALF_OK) {
        if (finished(&t)) {
            logf_(&t, true, "nothing to do: the run is complete at iteration %lld",
                  (long long)t.iteration);
        } else {
            char trdir[4096];
            rc = join_path(trdir, sizeof trdir, o->root_dir, "train", &err);
            if (rc == CALF_OK)
                rc = calf_summary_run(trdir, calf_config_float(wa->cfg, CFG_SUMMARIES_FLUSH_SECS),
                                      train_loop, &t, &err);
        }
    }
    if (t.eval_writer) {
        calf_error cerr;
        int crc = calf_summary_writer_close(t.eval_writer, &cerr);
        if (crc && rc == CALF_OK) {
            rc = crc;
            err = cerr;
        }
    }
    if (rc == CALF_OK) {
        struct rusage ru;
        double peak_mib = getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss / 1024.0 : -1;
        logf_(&t, false, "done at iteration %lld (peak RSS %.1f MiB)", (long long)t.iteration,
              peak_mib);
    }
    if (rc != CALF_OK && rc != CALF_EINTR && err.msg[0]) {
        logf_(&t, false, "error: %s", err.msg);
        comm_report_failure(c, err.msg);
    }
    if (t.log) fclose(t.log);
    trainer_free(&t);
    return exit_code_of(rc);
}

static int status_of_exit(int code) {
    switch (code) {
    case 0: return CALF_OK;
    case 2: return CALF_EINVAL;
    case 130: return CALF_EINTR;
    default: return CALF_ECOMM;
    }
}

static int train_mpi(const calf_train_options *o, calf_error *err) {
    comm *c = NULL;
    int rc = comm_mpi_init(&c, NULL, NULL, err);
    if (rc) return rc;
    calf_config cfg;
    calf_error local;
    calf_error_clear(&local);
    rc = calf_train_load_config(o, &cfg, &local);
    int b, n;
    if (rc == CALF_OK)
        rc = calf_split((int)calf_config_int(&cfg, CFG_NUM_ENVS), comm_size(c), 0, &b, &n, &local);
    if (rc) {
        /* every rank finds the same error; one reports it */
        if (c->index == 0) *err = local;
        else calf_error_clear(err);
        comm_finalize(c);
        return rc;
    }
    resume_state rs;
    memset(&rs, 0, sizeof rs);
    worker_args wa = {o, &cfg, &rs, true};
    int code = train_worker(c, &wa);
    free(rs.payload);
    comm_finalize(c);
    calf_error_clear(err);
    return status_of_exit(code);
}

int calf_train(const calf_train_options *o, calf_error *err) {
    calf_error_clear(err);
    if (comm_mpi_launched()) return train_mpi(o, err);
    calf_config cfg;
    int rc = calf_train_load_config(o, &cfg, err);
    if (rc) return rc;
    int nproc = o->nproc > 1 ? o->nproc : 1;
    int b, n;
    if ((rc = calf_split((int)calf_config_int(&cfg, CFG_NUM_ENVS), nproc, 0, &b, &n, err)))
        return rc;
    resume_state rs;
    if ((rc = find_resume(o->root_dir, &cfg, &rs, err))) return rc;
    worker_args wa = {o, &cfg, &rs, false};
    int code;
    if (nproc == 1) {
        comm *c = NULL;
        comm_single(&c);
        code = train_worker(c, &wa);
        comm_finalize(c);
    } else {
        code = launcher_run(nproc, train_worker, &wa, err);
        if (code == 1 && err->msg[0]) {
            free(rs.payload);
            return CALF_EIO;
        }
    }
    free(rs.payload);
    calf_error_clear(err);
    return status_of_exit(code);
}
