/* trainer.c: the PPO training loop (rollout -> advantages -> minibatch updates ->
 * summaries -> checkpoints) and its launch: one process, --nproc N local workers, or
 * MPI ranks. Every random stream and every sum is defined over the global env index,
 * so the bytes of a checkpoint never depend on how many processes made it. */
#include <errno.h>
#include <math.h>
#include <sched.h>
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
#include "bytes.h"
#include "checkpoint.h"
#include "comm.h"
#include "fsutil.h"
#include "launcher.h"
#include "model.h"
#include "ppo_math.h"
#include "trainer.h"
#include "vec_env.h"

/* Set by SIGINT/SIGTERM; read at the end of each iteration, where the ranks agree on
 * stopping (comm_any) so that all of them stop after the same iteration. The one piece
 * of process-wide state besides the per-process context: a signal handler can reach
 * nothing else. */
static volatile sig_atomic_t stop_requested = 0;

static void on_stop_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

static double now_seconds(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0; /* cannot fail for this clock */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Per-env statistics summed over the iteration, then over envs in canonical order. */
enum { ST_PG, ST_TD, ST_ENT, ST_CLIP, ST_EPISODES, ST_RETURN, ST_LENGTH, NUM_STATS };

/* What the advantages and the update read of one rank's rollout: this process's own, or,
 * when the ranks share memory, a peer's, so that a rank that is ahead can compute some of
 * a slower rank's envs (their values and advantages, their minibatch partials: work
 * sharing; which rank computes an env's share never shows in the bits). Indices are
 * time-major over the rank's envs: t * count + e. */
typedef struct rollout_view {
    int begin, count;        /* the rank's envs */
    comm_claim *claim;       /* who takes which of its envs in the current round */
    float *obs;              /* (T, count, obs_dim) */
    int *act;                /* (T, count) */
    float *u;                /* (T, count, max(action_dim, 1)) continuous actions, unclipped */
    float *logp, *adv, *ret; /* (T, count) */
    float *rew;              /* (T, count) */
    uint8_t *term, *trunc;   /* (T, count) */
    float *trunc_obs;        /* (T, count, obs_dim) final observation where truncated */
    float *boot_obs;         /* (count, obs_dim) the observation after the last step */
    double *adv_sums;        /* (count, 2) sum and sum of squares of each env's advantages */
    int *perm;               /* (count, T) this epoch's shuffle of each env's timesteps */
    double *stats;           /* (count, NUM_STATS) */
} rollout_view;

/* Envs per forward pass, and the most a rank claims of its own at once, when sharing.
 * Claims never take more than half of what is left, so the end of a round is fine
 * grained whatever this is. On ppo_cartpole's --nproc 2, 2 was clearly slower than 4;
 * 6, 8, 12 and 16 were 0-3% faster, about what two identical builds differ by on this
 * machine; 8 keeps a rank's passes long (64 rows here). The bits do not depend on it. */
enum { SHARE_GROUP_ENVS = 8 };

/* Envs per pass through the value net for advantages without sharing: rows enough for
 * long passes, and a bounded copy of the rollout's observations. */
enum { ADV_GROUP_ENVS = 64 };

/* Pieces a rank takes from others in one minibatch that are published where they lie
 * (each needs its own set of tree buffers in shared memory); any further piece is
 * copied. Most minibatches see one or two. */
enum { STEAL_SETS = 3 };

/* A rank's slice of the gradient holds whole norm chunks (see grad_norm). */
_Static_assert(COMM_SLICE_ELEMS % NN_NORM_CHUNK == 0, "slices must hold whole norm chunks");

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

    /* rollout, time-major: index (t * count + e); obs, act, u, logp, adv, ret, perm and
     * stats live in views[own] (shared memory when sharing) */
    rollout_view *views;     /* (size) every rank's when sharing, else just this one's */
    rollout_view *own;
    void *view_mem;          /* own view's memory when private (else the comm's) */
    bool sharing;            /* ranks share memory: work sharing after the rollout */
    int group_envs;          /* envs per forward pass in the update */
    int adv_group;           /* envs per pass through the value net for advantages */
    uint32_t round;          /* work-shared rounds so far, advantages and minibatches (the
                              * claim tag; alike on every rank) */
    uint64_t params_version; /* bumped whenever md.params change (nn_mlp_forward_v) */
    comm_claim **claims;     /* (size) every rank's claim word, when sharing */
    comm_tree steal_shared[STEAL_SETS]; /* pieces taken from other ranks, by reference */
    comm_tree steal_tree;    /* and beyond STEAL_SETS of them, private */
    /* sharing: one model for all ranks, in shared memory; each rank clips and steps its
     * slice [opt_lo, opt_hi) of it, the slice of the gradient it completes */
    size_t opt_lo, opt_hi;
    unsigned char *shared_state; /* rank 0's region: params, m, v, then norm_parts */
    double *norm_parts;      /* (chunks of NN_NORM_CHUNK) squared gradient of each */
    int64_t shared_envs;     /* env partials this rank folded for other ranks */
    /* of comm.wait_s, what the update's three collectives per minibatch waited: for the
     * gradient's pieces, for its norm, for the other ranks' optimiser steps */
    double wait_grad_s, wait_norm_s, wait_step_s;
    bool test_slow;          /* CALF_TEST_SLOW_RANK names this rank (tests only) */
    float *obs;              /* = own->obs, ... */
    int *act;
    float *u;
    float *logp, *adv, *ret;
    float *rew;              /* = own->rew, ... */
    uint8_t *term, *trunc;
    float *trunc_obs;
    float *step_final;       /* (count, obs_dim) */
    double *step_ep_return;  /* (count) */
    int *step_ep_length;     /* (count) */
    float *head;             /* (cache_rows, head_dim) */
    float *vout;             /* (cache_rows) */
    float *rows_in;          /* (cache_rows, obs_dim) */

    /* advantages, adv_group envs at a time */
    float gamma, lambda;
    float *grp_obs;          /* (adv_group * (T + 1), obs_dim) */
    float *grp_val;          /* (adv_group * (T + 1)) each env's T values, then bootstraps */
    float *grp_next;         /* (adv_group * (T + 1)) the value after each step */
    int *grp_trunc;          /* (adv_group * (T + 1)) the group's steps cut by the time limit */
    float *grp_cut_val;      /* (adv_group * (T + 1)) V(final obs) of those */
    int64_t shared_adv_envs; /* envs whose advantages this rank computed for other ranks */

    /* minibatch */
    int *perm;               /* = own->perm */
    float *dhead;            /* (cache_rows, head_dim) */
    float *dval;             /* (cache_rows) */
    float *dlogstd;          /* (cache_rows, action_dim) */
    float *g_rew, *g_val, *g_next, *g_adv, *g_ret; /* (T) one env's rollout for GAE */
    uint8_t *g_term, *g_ended;                     /* (T) */
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
    const char *env = calf_config_string(cfg, CALF_CFG_ENV_NAME);
    if (!calf_env_find(env)) {
        char names[512];
        calf_env_list_names(names, sizeof names);
        const char *where = cfg->origin[CALF_CFG_ENV_NAME];
        return calf_error_set(err, CALF_EINVAL, "%s%sunknown environment '%s' (known: %s)",
                              where, where[0] ? ": " : "", env, names);
    }
    const calf_env_class *cls = calf_env_find(env);
    if (cls->spec.action_dim > 0 && cls->spec.num_actions > 0)
        return calf_error_set(err, CALF_EINVAL, "environment '%s' has both action kinds", env);
    return CALF_OK;
}

/* ---- setup ------------------------------------------------------------------ */

static void trainer_free(trainer *t) {
    vec_env_free(&t->ve);
    model_free(&t->md);
    nn_cache_free(&t->a_cache);
    nn_cache_free(&t->v_cache);
    comm_tree_free(&t->tree);
    comm_tree_free(&t->steal_tree);
    for (int i = 0; i < STEAL_SETS; i++) comm_tree_free(&t->steal_shared[i]);
    void *bufs[] = {t->act_rng, t->shuf_rng, t->view_mem, t->views, t->claims,
                    t->step_final, t->step_ep_return, t->step_ep_length, t->head, t->vout,
                    t->rows_in, t->dhead, t->dval, t->dlogstd, t->g_rew, t->g_val,
                    t->g_next, t->g_adv, t->g_ret, t->g_term, t->g_ended, t->grp_obs,
                    t->grp_val, t->grp_next, t->grp_trunc, t->grp_cut_val};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
}

/* chunk m of T timesteps split into M nearly equal chunks: [*off, *off + *len) */
static void chunk_range(int T, int M, int m, int *off, int *len) {
    int base = T / M, extra = T % M;
    *off = m * base + (m < extra ? m : extra);
    *len = base + (m < extra ? 1 : 0);
}

/* Shared memory is handed out in whole cache lines. */
static size_t round64(size_t x) { return (x + 63) & ~(size_t)63; }

/* Lay out a view of `count` envs at base (NULL: only measure); returns its bytes. Every
 * rank computes every peer's layout alike from the peer's count. */
static size_t view_carve(rollout_view *v, unsigned char *base, int begin, int count, int T,
                         int od, int ad) {
    size_t off = 0, nt = (size_t)count * (size_t)T;
#define CARVE(field, bytes)                                         \
    do {                                                            \
        if (base) v->field = (void *)(base + off);                  \
        off += round64((size_t)(bytes));                            \
    } while (0)
    CARVE(claim, sizeof(comm_claim));
    CARVE(obs, nt * (size_t)od * sizeof(float));
    CARVE(act, nt * sizeof(int));
    CARVE(u, nt * (size_t)ad * sizeof(float));
    CARVE(logp, nt * sizeof(float));
    CARVE(adv, nt * sizeof(float));
    CARVE(ret, nt * sizeof(float));
    CARVE(rew, nt * sizeof(float));
    CARVE(term, nt);
    CARVE(trunc, nt);
    CARVE(trunc_obs, nt * (size_t)od * sizeof(float));
    CARVE(boot_obs, (size_t)count * (size_t)od * sizeof(float));
    CARVE(adv_sums, (size_t)count * 2 * sizeof(double));
    CARVE(perm, nt * sizeof(int));
    CARVE(stats, (size_t)count * NUM_STATS * sizeof(double));
#undef CARVE
    if (base) {
        v->begin = begin;
        v->count = count;
    }
    return off;
}

/* The model every rank steps a slice of when sharing, in rank 0's region: params, m, v,
 * then each norm chunk's squared gradient (the gradient itself is where the split sum
 * lands). shared_state_at(md, SHARED_END) is the region's size. */
enum { SHARED_PARAMS, SHARED_M, SHARED_V, SHARED_NORM_PARTS, SHARED_END };
static size_t shared_state_at(const model *md, int part) {
    size_t vec = round64(md->num_params * sizeof(float));
    size_t chunks = (md->num_params + NN_NORM_CHUNK - 1) / NN_NORM_CHUNK;
    return part <= SHARED_NORM_PARTS ? (size_t)part * vec : 3 * vec + chunks * sizeof(double);
}

/* Every rank's rollout in memory all ranks share (when the backend has it and the piece
 * sum fits its arena: the same answer everywhere), else this rank's own, private. */
static int views_init(trainer *t, calf_error *err) {
    comm *c = t->c;
    int P = comm_size(c), T = t->T, od = t->md.obs_dim;
    int ad = t->md.action_dim > 0 ? t->md.action_dim : 1;
    rollout_view scratch;
    t->sharing = P > 1 && comm_shares_memory(c) &&
                 comm_tree_pieces_supported(c, t->E, t->md.num_params);
    if (t->sharing) {
        /* Everything sharing puts in shared memory, every rank's, must fit in what is
         * left of it (the same sum on every rank, so all decide alike); else each rank
         * keeps its rollout to itself, as without shared memory. */
        size_t tree_bytes = round64(comm_tree_shared_bytes(t->E, t->md.num_params, STEAL_SETS));
        size_t need = round64(shared_state_at(&t->md, SHARED_END));
        for (int r = 0; r < P; r++) {
            int b = 0, n = 0;
            calf_split(t->E, P, r, &b, &n, NULL);
            size_t v = round64(view_carve(&scratch, NULL, b, n, T, od, ad));
            need = need > SIZE_MAX - v - tree_bytes ? SIZE_MAX : need + v + tree_bytes;
        }
        t->sharing = need <= comm_shared_left(c);
    }
    if (!t->sharing) {
        t->views = calf_xcalloc(1, sizeof *t->views);
        size_t bytes = view_carve(&scratch, NULL, t->begin, t->count, T, od, ad);
        t->view_mem = calf_xcalloc(1, bytes);
        view_carve(&t->views[0], t->view_mem, t->begin, t->count, T, od, ad);
        t->own = &t->views[0];
        return CALF_OK;
    }
    t->views = calf_xcalloc((size_t)P, sizeof *t->views);
    t->claims = calf_xcalloc((size_t)P, sizeof *t->claims);
    void **peers = calf_xcalloc((size_t)P, sizeof *peers);
    size_t bytes = view_carve(&scratch, NULL, t->begin, t->count, T, od, ad);
    int rc = comm_shared_alloc(c, bytes, peers, err);
    for (int r = 0; rc == CALF_OK && r < P; r++) {
        int b, n;
        if ((rc = calf_split(t->E, P, r, &b, &n, err))) break;
        view_carve(&t->views[r], peers[r], b, n, T, od, ad);
        t->claims[r] = t->views[r].claim;
    }
    free(peers);
    t->own = &t->views[c->index];
    comm_tree_init(&t->steal_tree, t->md.num_params, t->E, 0, 0);
    /* For tests/e2e_ddp.sh: the named rank dawdles over its own envs, so that the others
     * certainly take some of them. Results cannot depend on it; only timing does. */
    const char *slow = getenv("CALF_TEST_SLOW_RANK");
    char *end = NULL;
    long slow_rank = slow && *slow ? strtol(slow, &end, 10) : -1;
    t->test_slow = end && *end == '\0' && slow_rank == c->index;
    return rc;
}

static int trainer_init(trainer *t, const calf_config *cfg, comm *c, calf_error *err) {
    t->cfg = cfg;
    t->c = c;
    t->E = (int)calf_config_int(cfg, CALF_CFG_NUM_ENVS);
    t->T = (int)calf_config_int(cfg, CALF_CFG_UNROLL_LENGTH);
    t->epochs = (int)calf_config_int(cfg, CALF_CFG_NUM_UPDATES);
    t->seed = (uint64_t)calf_config_int(cfg, CALF_CFG_RANDOM_SEED);
    t->max_iterations = calf_config_int(cfg, CALF_CFG_NUM_ITERATIONS);
    t->max_env_steps = calf_config_int(cfg, CALF_CFG_NUM_ENV_STEPS);
    int64_t per_iter = (int64_t)t->E * t->T;
    int64_t by_steps = t->max_env_steps > 0 ? (t->max_env_steps + per_iter - 1) / per_iter : 0;
    t->total_iterations = t->max_iterations;
    if (by_steps > 0 && (t->total_iterations == 0 || by_steps < t->total_iterations))
        t->total_iterations = by_steps;
    /* minibatches: the global mini_batch_size, rounded to whole timesteps per env */
    int64_t mbs = calf_config_int(cfg, CALF_CFG_MINI_BATCH_SIZE);
    int64_t M = (per_iter + mbs - 1) / mbs;
    if (M < 1) M = 1;
    if (M > t->T) M = t->T;
    t->M = (int)M;
    t->eval_return = NAN;
    t->last_avg_return = NAN;
    t->params_version = 1;

    int rc = calf_split(t->E, comm_size(c), c->index, &t->begin, &t->count, err);
    if (rc) return rc;
    rc = vec_env_init(&t->ve, calf_config_string(cfg, CALF_CFG_ENV_NAME), t->seed, t->begin, t->count,
                      err);
    if (rc) return rc;
    const calf_env_class *cls = calf_env_find(calf_config_string(cfg, CALF_CFG_ENV_NAME));
    model_init(&t->md, cfg, &cls->spec);
    model_init_params(&t->md, cfg, t->seed);

    int n = t->count, T = t->T, od = t->md.obs_dim, hd = t->md.head_dim;
    int ad = t->md.action_dim > 0 ? t->md.action_dim : 1;
    if ((rc = views_init(t, err))) return rc;
    t->obs = t->own->obs;
    t->act = t->own->act;
    t->u = t->own->u;
    t->logp = t->own->logp;
    t->adv = t->own->adv;
    t->ret = t->own->ret;
    t->rew = t->own->rew;
    t->term = t->own->term;
    t->trunc = t->own->trunc;
    t->trunc_obs = t->own->trunc_obs;
    t->perm = t->own->perm;
    t->stats = t->own->stats;
    /* Without sharing a minibatch's rows go through the nets in one pass; with it, a few
     * envs at a time, so that another rank can take what is left. */
    t->group_envs = t->sharing ? SHARE_GROUP_ENVS : (n > 0 ? n : 1);
    int max_chunk = (T + t->M - 1) / t->M;
    int cache_envs = n > t->group_envs ? n : t->group_envs;
    t->cache_rows = cache_envs * max_chunk; /* >= n: a minibatch, or one timestep of every env */
    nn_cache_init(&t->a_cache, &t->md.actor, t->cache_rows);
    nn_cache_init(&t->v_cache, &t->md.value, t->cache_rows);

    t->act_rng = calf_xcalloc((size_t)n, sizeof *t->act_rng);
    t->shuf_rng = calf_xcalloc((size_t)n, sizeof *t->shuf_rng);
    for (int e = 0; e < n; e++) {
        calf_rng_seed(&t->act_rng[e], t->seed, (uint64_t)(t->begin + e), CALF_RNG_ACTION);
        calf_rng_seed(&t->shuf_rng[e], t->seed, (uint64_t)(t->begin + e), CALF_RNG_SHUFFLE);
    }
    /* advantages: sharing, a few envs at a time (what is left stays fine grained for
     * others to take); alone, many, for long passes through the value net */
    t->gamma = (float)calf_config_float(cfg, CALF_CFG_GAMMA);
    t->lambda = (float)calf_config_float(cfg, CALF_CFG_TD_LAMBDA);
    int alone = n < 1 ? 1 : n < ADV_GROUP_ENVS ? n : ADV_GROUP_ENVS;
    t->adv_group = t->sharing ? SHARE_GROUP_ENVS : alone;
    size_t grp_rows = (size_t)t->adv_group * (size_t)(T + 1);
    t->grp_obs = calf_xcalloc(grp_rows * (size_t)od, sizeof(float));
    t->grp_val = calf_xcalloc(grp_rows, sizeof(float));
    t->grp_next = calf_xcalloc(grp_rows, sizeof(float));
    t->grp_trunc = calf_xcalloc(grp_rows, sizeof(int));
    t->grp_cut_val = calf_xcalloc(grp_rows, sizeof(float));
    t->step_final = calf_xcalloc((size_t)n * (size_t)od, sizeof(float));
    t->step_ep_return = calf_xcalloc((size_t)n, sizeof(double));
    t->step_ep_length = calf_xcalloc((size_t)n, sizeof(int));
    size_t rows = (size_t)t->cache_rows;
    t->head = calf_xcalloc(rows * (size_t)hd, sizeof(float));
    t->vout = calf_xcalloc(rows, sizeof(float));
    t->rows_in = calf_xcalloc(rows * (size_t)od, sizeof(float));
    t->dhead = calf_xcalloc(rows * (size_t)hd, sizeof(float));
    t->dval = calf_xcalloc(rows, sizeof(float));
    t->dlogstd = calf_xcalloc(rows * (size_t)ad, sizeof(float));
    float **g[] = {&t->g_rew, &t->g_val, &t->g_next, &t->g_adv, &t->g_ret};
    for (size_t k = 0; k < sizeof g / sizeof g[0]; k++) *g[k] = calf_xcalloc((size_t)T, sizeof(float));
    t->g_term = calf_xcalloc((size_t)T, 1);
    t->g_ended = calf_xcalloc((size_t)T, 1);
    comm_tree_init(&t->tree, t->md.num_params, t->E, t->begin, t->count);
    t->opt_lo = 0;
    t->opt_hi = t->md.num_params;
    /* sharing: the other ranks read this rank's blocks where they are folded, its own
     * envs' and the first ones it takes from others */
    if (!t->sharing) return CALF_OK;
    rc = comm_tree_share_buffers(c, &t->tree, STEAL_SETS, err);
    for (int i = 0; rc == CALF_OK && i < STEAL_SETS; i++) {
        comm_tree_init(&t->steal_shared[i], t->md.num_params, t->E, 0, 0);
        comm_tree_share_set(&t->steal_shared[i], &t->tree, i + 1);
    }
    void **all = calf_xcalloc((size_t)c->size, sizeof *all);
    if (rc == CALF_OK)
        rc = comm_shared_alloc(c, c->index == 0 ? shared_state_at(&t->md, SHARED_END) : 0, all,
                               err);
    if (rc == CALF_OK) {
        t->shared_state = all[0];
        t->norm_parts = (double *)(void *)(t->shared_state +
                                           shared_state_at(&t->md, SHARED_NORM_PARTS));
        comm_slice(c, t->md.num_params, &t->opt_lo, &t->opt_hi);
    }
    free(all);
    return rc;
}

/* Sharing: from here on all ranks use one model in shared memory, with rank 0's values
 * (all hold the same: they initialised it alike or loaded the same checkpoint), and
 * the gradient is the vector the split sum lands in. */
static int share_model(trainer *t, calf_error *err) {
    model *md = &t->md;
    size_t n = md->num_params;
    float *params = (float *)(void *)(t->shared_state + shared_state_at(md, SHARED_PARAMS));
    float *m = (float *)(void *)(t->shared_state + shared_state_at(md, SHARED_M));
    float *v = (float *)(void *)(t->shared_state + shared_state_at(md, SHARED_V));
    if (t->c->index == 0) {
        memcpy(params, md->params, n * sizeof(float));
        memcpy(m, md->m, n * sizeof(float));
        memcpy(v, md->v, n * sizeof(float));
    }
    int rc = comm_barrier(t->c, err);
    if (rc == CALF_OK) model_use_state(md, params, m, v, comm_tree_shared_sum(&t->tree));
    return rc;
}

/* ---- rollout ---------------------------------------------------------------- */

/* values of `rows` observations (rows may exceed the cache: done in slices) */
static void value_of(trainer *t, const float *x, /* (rows, obs_dim) */ int rows,
                     float *out /* (rows) */) {
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
    /* what the advantages need besides: the observation each env's next step would see */
    memcpy(t->own->boot_obs, t->ve.obs, (size_t)n * od * sizeof(float));
}

/* ---- work sharing ----------------------------------------------------------- */

/* How long a rank out of work waits for another to open the round (see below) before it
 * leaves it the rest: long enough for a rollout that ends late or an evaluation on rank
 * 0, short next to collective_timeout_secs, which the round's closing collective
 * enforces if that rank has failed. */
static const double OPEN_WAIT_S = 0.02;

/* Envs of another rank's round tag that are left (0: none), whose in *victim, the first
 * in *first. A rank that has not opened the round yet (still in its rollout, say) has
 * all of its envs ahead of it, so rather than leave them to it, wait for it, yielding
 * the core to whoever needs it. Who computes what never shows in the bits. */
static int take_from_others(trainer *t, uint32_t tag, int *victim, int *first) {
    double give_up = -1.0;
    for (;;) {
        int unopened = 0;
        int k = comm_claim_back(t->claims, comm_size(t->c), t->c->index, tag, victim, first,
                                &unopened);
        if (k > 0 || unopened == 0) return k;
        double now = now_seconds();
        if (give_up < 0) give_up = now + OPEN_WAIT_S;
        else if (now > give_up) return 0;
        sched_yield();
    }
}

/* ---- advantages ------------------------------------------------------------- */

/* Values, GAE advantages and returns, and the advantage sums of envs [first, first+cnt)
 * of view v (cnt <= adv_group): V(obs) of every step, V(obs after the last step) to
 * bootstrap, and V(final obs) where an episode was cut by the time limit. Every value is
 * a row of its own through the net, so the bits depend neither on the grouping nor on
 * which rank runs it. */
static void advantages_group(trainer *t, rollout_view *v, int first, int cnt) {
    CALF_ASSERT(cnt >= 0 && cnt <= t->adv_group);
    int T = t->T, vn = v->count, od = t->md.obs_dim;
    size_t row_bytes = (size_t)od * sizeof(float);
    /* rows k*T + s: env first+k at step s; rows cnt*T + k: its bootstrap observation */
    for (int k = 0; k < cnt; k++)
        for (int s = 0; s < T; s++)
            memcpy(t->grp_obs + ((size_t)k * T + s) * od,
                   v->obs + ((size_t)s * vn + (size_t)(first + k)) * od, row_bytes);
    memcpy(t->grp_obs + (size_t)cnt * T * od, v->boot_obs + (size_t)first * od, cnt * row_bytes);
    value_of(t, t->grp_obs, cnt * (T + 1), t->grp_val);
    int cut = 0;
    for (int k = 0; k < cnt; k++)
        for (int s = 0; s < T; s++) {
            size_t r = (size_t)k * T + s, i = (size_t)s * vn + (size_t)(first + k);
            t->grp_next[r] = s + 1 < T ? t->grp_val[r + 1] : t->grp_val[(size_t)cnt * T + k];
            if (v->trunc[i]) {
                memcpy(t->grp_obs + (size_t)cut * od, v->trunc_obs + i * od, row_bytes);
                t->grp_trunc[cut++] = (int)r;
            }
        }
    if (cut > 0) {
        value_of(t, t->grp_obs, cut, t->grp_cut_val);
        for (int j = 0; j < cut; j++) t->grp_next[t->grp_trunc[j]] = t->grp_cut_val[j];
    }
    for (int k = 0; k < cnt; k++) {
        int e = first + k;
        for (int s = 0; s < T; s++) {
            size_t r = (size_t)k * T + s, i = (size_t)s * vn + (size_t)e;
            t->g_rew[s] = v->rew[i];
            t->g_val[s] = t->grp_val[r];
            t->g_next[s] = t->grp_next[r];
            t->g_term[s] = v->term[i];
            t->g_ended[s] = (uint8_t)(v->term[i] | v->trunc[i]);
        }
        ppo_gae(T, t->g_rew, t->g_val, t->g_next, t->g_term, t->g_ended, t->gamma, t->lambda,
                t->g_adv, t->g_ret);
        double *sums = v->adv_sums + 2 * (size_t)e;
        sums[0] = sums[1] = 0;
        for (int s = 0; s < T; s++) {
            size_t i = (size_t)s * vn + (size_t)e;
            v->adv[i] = t->g_adv[s];
            v->ret[i] = t->g_ret[s];
            sums[0] += t->g_adv[s];
            sums[1] += (double)t->g_adv[s] * t->g_adv[s];
        }
    }
}

/* The same for envs [first, first+cnt) of v, adv_group at a time. */
static void advantages_envs(trainer *t, rollout_view *v, int first, int cnt) {
    for (int g = first; g < first + cnt; g += t->adv_group)
        advantages_group(t, v, g, first + cnt - g < t->adv_group ? first + cnt - g : t->adv_group);
}

/* Every env's advantages and returns, normalised over the whole batch when configured.
 * Sharing, a rank that is done with its own envs takes the back half of what a slower
 * rank has left, so a rank that finished its rollout first does not just wait. */
static int compute_advantages(trainer *t, calf_error *err) {
    int n = t->count, T = t->T, rc;
    if (!t->sharing) {
        advantages_envs(t, t->own, 0, n);
    } else {
        uint32_t tag = ++t->round;
        comm_claim_open(t->own->claim, tag, n);
        int first, k, victim;
        while ((k = comm_claim_front(t->own->claim, tag, t->adv_group, &first)) > 0) {
            /* longer than in a minibatch: the others first finish their own advantages */
            if (t->test_slow) nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
            advantages_envs(t, t->own, first, k);
        }
        while ((k = take_from_others(t, tag, &victim, &first)) > 0) {
            advantages_envs(t, &t->views[victim], first, k);
            t->shared_adv_envs += k;
        }
        /* everyone's advantages are in place before any are summed, normalised or read */
        if ((rc = comm_barrier(t->c, err))) return rc;
    }
    if (!calf_config_bool(t->cfg, CALF_CFG_NORMALIZE_ADVANTAGES)) return CALF_OK;
    /* whole-batch mean and (population) std, summed over envs in canonical order */
    double tot[2];
    rc = comm_tree_sum_f64(t->c, t->E, t->begin, n, t->own->adv_sums, 2, tot, err);
    if (rc) return rc;
    double N = (double)t->E * T;
    double mean = tot[0] / N;
    double var = tot[1] / N - mean * mean;
    float fmean = (float)mean;
    float inv = (float)(1.0 / (sqrt(var > 0 ? var : 0) + 1e-8));
    for (size_t i = 0; i < (size_t)n * T; i++) t->adv[i] = (t->adv[i] - fmean) * inv;
    return CALF_OK;
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

typedef struct loss_weights {
    float clip, td_w, ent_w, scale;
} loss_weights;

/* Forward, per-sample loss and per-env backward for envs [first, first+cnt) of view v
 * (indices within v) on timesteps [off, off+len) of their shuffles, each env's partial
 * gradient folded into tree in env order. The envs' loss statistics are added to v's.
 * The result depends only on the parameters and v's data, not on who runs it. */
static void minibatch_envs(trainer *t, const rollout_view *v, int first, int cnt, int off,
                           int len, const loss_weights *w, comm_tree *tree) {
    model *md = &t->md;
    int T = t->T, vn = v->count, od = md->obs_dim, hd = md->head_dim, ad = md->action_dim;
    int adim = ad > 0 ? ad : 1;
    for (int g0 = first; g0 < first + cnt; g0 += t->group_envs) {
        int g = first + cnt - g0 < t->group_envs ? first + cnt - g0 : t->group_envs;
        int rows = g * len;
        /* rows grouped by env: env g0+k's timesteps are rows [k*len, (k+1)*len) */
        for (int k = 0; k < g; k++)
            for (int j = 0; j < len; j++) {
                size_t i = (size_t)v->perm[(size_t)(g0 + k) * T + off + j] * vn + (size_t)(g0 + k);
                memcpy(t->rows_in + ((size_t)k * len + j) * od, v->obs + i * od,
                       od * sizeof(float));
            }
        nn_mlp_forward_v(&md->actor, md->params, t->params_version, t->rows_in, rows,
                         &t->a_cache, t->head);
        nn_mlp_forward_v(&md->value, md->params, t->params_version, t->rows_in, rows,
                         &t->v_cache, t->vout);
        for (int k = 0; k < g; k++) {
            int e = g0 + k;
            double *st = v->stats + (size_t)e * NUM_STATS;
            for (int j = 0; j < len; j++) {
                int r = k * len + j;
                size_t i = (size_t)v->perm[(size_t)e * T + off + j] * vn + (size_t)e;
                const float *h = t->head + (size_t)r * hd;
                const float *u = ad ? v->u + i * adim : NULL;
                float logp, ent;
                dist_categorical_cache dc;
                model_logp_entropy(md, md->params, h, v->act[i], u, &logp, &ent, &dc);
                ppo_sample_result res;
                ppo_sample_loss(logp, v->logp[i], v->adv[i], ent, t->vout[r], v->ret[i], w->clip,
                                w->td_w, w->ent_w, w->scale, &res);
                model_dist_backward(md, md->params, h, v->act[i], u, res.dlogp, res.dentropy, &dc,
                                    t->dhead + (size_t)r * hd,
                                    ad ? t->dlogstd + (size_t)r * ad : NULL);
                t->dval[r] = res.dvalue;
                st[ST_PG] += res.pg_loss;
                st[ST_TD] += res.td_loss;
                st[ST_ENT] += ent;
                st[ST_CLIP] += res.clipped;
            }
        }
        /* Each env's partial overwrites every parameter of the model (the rest of the
         * leaf is padding, which stays zero), so a leaf needs no clearing; and an env
         * whose left sibling is on the tree's stack is added into it by the kernels. */
        for (int k = 0; k < g; k++) {
            int r0 = k * len;
            float *left = comm_tree_left_sibling(tree);
            float *leaf = left ? left : comm_tree_leaf_raw(tree);
            if (left) {
                nn_mlp_backward_add(&md->actor, md->params, &t->a_cache, r0, len,
                                    t->dhead + (size_t)r0 * hd, leaf, NULL);
                nn_mlp_backward_add(&md->value, md->params, &t->v_cache, r0, len, t->dval + r0,
                                    leaf, NULL);
            } else {
                nn_mlp_backward_set(&md->actor, md->params, &t->a_cache, r0, len,
                                    t->dhead + (size_t)r0 * hd, leaf, NULL);
                nn_mlp_backward_set(&md->value, md->params, &t->v_cache, r0, len, t->dval + r0,
                                    leaf, NULL);
            }
            for (int a = 0; a < ad; a++) {
                float sum = 0.0f;
                for (int j = 0; j < len; j++) sum = sum + t->dlogstd[(size_t)(r0 + j) * ad + a];
                float *p = leaf + md->log_std_off + a;
                *p = left ? *p + sum : sum;
            }
            if (left) comm_tree_push_into_left(tree);
            else comm_tree_push(tree);
        }
    }
}

/* One minibatch's gradient into md->grad. Without shared memory each rank folds its own
 * envs and the tree is completed across ranks. With it, each rank takes its own envs a
 * group at a time and, once out of them, takes the back half of what a slower rank has
 * left, so no rank idles while another works; the pieces (its own read where they lie)
 * complete the same tree, each rank only its slice [opt_lo, opt_hi) of md->grad, the
 * sum all ranks share. */
static int minibatch_gradient(trainer *t, int off, int len, const loss_weights *w,
                              calf_error *err) {
    model *md = &t->md;
    if (!t->sharing) {
        minibatch_envs(t, t->own, 0, t->count, off, len, w, &t->tree);
        return comm_tree_allreduce(t->c, &t->tree, md->grad, err);
    }
    uint32_t tag = ++t->round;
    comm_tree_pieces pieces;
    int rc = comm_tree_pieces_open(t->c, &pieces, t->E, md->num_params, &t->tree, err);
    if (rc) return rc;
    comm_claim_open(t->own->claim, tag, t->count);
    comm_tree_restart(&t->tree, t->begin, t->count);
    int first, k, victim, steals = 0;
    while ((k = comm_claim_front(t->own->claim, tag, t->group_envs, &first)) > 0) {
        if (t->test_slow) nanosleep(&(struct timespec){0, 200 * 1000}, NULL);
        minibatch_envs(t, t->own, first, k, off, len, w, &t->tree);
    }
    comm_tree_pieces_put(&pieces, &t->tree);
    while ((k = take_from_others(t, tag, &victim, &first)) > 0) {
        const rollout_view *v = &t->views[victim];
        comm_tree *st = steals < STEAL_SETS ? &t->steal_shared[steals] : &t->steal_tree;
        steals++;
        comm_tree_restart(st, v->begin + first, k);
        minibatch_envs(t, v, first, k, off, len, w, st);
        comm_tree_pieces_put(&pieces, st);
        t->shared_envs += k;
    }
    float *sum;
    rc = comm_tree_pieces_fold(t->c, &pieces, &sum, err);
    CALF_ASSERT(rc != CALF_OK || sum == md->grad);
    return rc;
}

/* The norm of the whole gradient (nn_global_norm's bits). Sharing, each rank sums the
 * norm chunks of its slice and, after a barrier, all add every chunk's in order. */
static int grad_norm(trainer *t, double *norm, calf_error *err) {
    model *md = &t->md;
    size_t n = md->num_params, chunks = (n + NN_NORM_CHUNK - 1) / NN_NORM_CHUNK;
    if (!t->sharing) {
        *norm = nn_global_norm(md->grad, n);
        return CALF_OK;
    }
    for (size_t at = t->opt_lo; at < t->opt_hi; at += NN_NORM_CHUNK) {
        size_t len = t->opt_hi - at < NN_NORM_CHUNK ? t->opt_hi - at : NN_NORM_CHUNK;
        t->norm_parts[at / NN_NORM_CHUNK] = nn_sum_sq(md->grad + at, len);
    }
    int rc = comm_barrier(t->c, err);
    if (rc == CALF_OK) *norm = nn_norm_of_chunks(t->norm_parts, chunks);
    return rc;
}

static int update(trainer *t, calf_error *err) {
    model *md = &t->md;
    int n = t->count, T = t->T;
    loss_weights w = {
        .clip = (float)calf_config_float(t->cfg, CALF_CFG_RATIO_CLIPPING),
        .td_w = (float)calf_config_float(t->cfg, CALF_CFG_TD_LOSS_WEIGHT),
        .ent_w = (float)calf_config_float(t->cfg, CALF_CFG_ENTROPY_REG),
    };
    float lr = (float)calf_config_float(t->cfg, CALF_CFG_ADAM_LR);
    const calf_config_value *betas = calf_config_get(t->cfg, CALF_CFG_ADAM_BETAS);
    float eps = (float)calf_config_float(t->cfg, CALF_CFG_ADAM_EPS);
    double max_norm = calf_config_float(t->cfg, CALF_CFG_GRADIENT_CLIPPING);

    for (int epoch = 0; epoch < t->epochs; epoch++) {
        for (int e = 0; e < n; e++) shuffle_env(&t->shuf_rng[e], t->perm + (size_t)e * T, T);
        for (int mb = 0; mb < t->M; mb++) {
            int off, len;
            chunk_range(T, t->M, mb, &off, &len);
            w.scale = 1.0f / ((float)t->E * (float)len);
            double waited = t->c->wait_s;
            int rc = minibatch_gradient(t, off, len, &w, err);
            if (rc) return rc;
            t->wait_grad_s += t->c->wait_s - waited;
            waited = t->c->wait_s;
            double norm;
            if ((rc = grad_norm(t, &norm, err))) return rc;
            t->wait_norm_s += t->c->wait_s - waited;
            if (!isfinite(norm))
                return calf_error_set(err, CALF_EIO,
                                      "iteration %lld: the gradient is not finite (training "
                                      "diverged); try a smaller Adam.lr or Adam.gradient_clipping",
                                      (long long)t->iteration + 1);
            t->grad_norm_sum += norm;
            t->num_updates++;
            t->adam_step++;
            t->params_version++;
            /* clip and step this rank's slice (all of it without sharing) */
            size_t lo = t->opt_lo, cnt = t->opt_hi - t->opt_lo;
            nn_scale(md->grad + lo, cnt, nn_clip_coef(norm, max_norm));
            nn_adam_step(md->params + lo, md->grad + lo, md->m + lo, md->v + lo, cnt,
                         t->adam_step, lr, (float)betas->tf[0], (float)betas->tf[1], eps);
            /* the next forward pass reads every rank's slice */
            waited = t->c->wait_s;
            if (t->sharing && (rc = comm_barrier(t->c, err))) return rc;
            t->wait_step_s += t->c->wait_s - waited;
        }
    }
    return CALF_OK;
}

/* ---- evaluation (main process only) ------------------------------------------ */

/* Greedy episodes on fresh envs. Eval envs use their own index range (2^40 + k) so they
 * never replay a training env's stream. */
int trainer_evaluate_greedy(const model *md, const char *env_name, uint64_t seed, int episodes,
                            double *returns, double *average, calf_error *err) {
    calf_env *envs = calf_xcalloc((size_t)episodes, sizeof *envs);
    nn_cache cache;
    memset(&cache, 0, sizeof cache);
    int od = md->obs_dim, hd = md->head_dim, ad = md->action_dim;
    float *obs = calf_xcalloc((size_t)episodes * od, sizeof(float));  /* (episodes, obs_dim) */
    float *head = calf_xcalloc((size_t)episodes * hd, sizeof(float)); /* (episodes, head_dim) */
    float *u = calf_xcalloc((size_t)(ad ? ad : 1), sizeof(float));    /* (action_dim) */
    uint8_t *done = calf_xcalloc((size_t)episodes, 1);
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
        double total = 0;
        for (int k = 0; k < episodes; k++) total += returns[k];
        *average = total / episodes;
    }
    for (int k = 0; k < episodes; k++) calf_env_free(&envs[k]);
    nn_cache_free(&cache);
    free(envs);
    free(obs);
    free(head);
    free(u);
    free(done);
    return rc;
}

/* ---- checkpoints ------------------------------------------------------------ */

#define CKPT_LAYOUT_VERSION 1u
#define RNG_BYTES 32 /* a calf_rng: four u64 words, little-endian */

/* One env's record in a checkpoint: the env (vec_env's record), then its action and
 * shuffle streams. */
static size_t env_record_size(const trainer *t) {
    return vec_env_record_size(&t->ve) + 2 * RNG_BYTES;
}

static void put_rng(unsigned char *p, const calf_rng *r) {
    for (int w = 0; w < 4; w++) bytes_put_le(p + 8 * w, r->s[w], 8);
}

/* A stream of all zeros never leaves zero: only a damaged file holds one. */
static int get_rng(const unsigned char *p, calf_rng *r, const char *name, int env, calf_error *err) {
    uint64_t any = 0;
    for (int w = 0; w < 4; w++) {
        r->s[w] = bytes_get_le(p + 8 * w, 8);
        any |= r->s[w];
    }
    if (!any) return calf_error_set(err, CALF_EINVAL, "%s: env %d has an all-zero random stream", name, env);
    return CALF_OK;
}

static int write_checkpoint(trainer *t, calf_error *err) {
    size_t rec = env_record_size(t), vrec = vec_env_record_size(&t->ve);
    unsigned char *local = calf_xcalloc((size_t)t->count, rec); /* (count, rec) */
    for (int e = 0; e < t->count; e++) {
        unsigned char *p = local + (size_t)e * rec;
        vec_env_save_record(&t->ve, e, p);
        put_rng(p + vrec, &t->act_rng[e]);
        put_rng(p + vrec + RNG_BYTES, &t->shuf_rng[e]);
    }
    unsigned char *all = calf_context_is_main() ? calf_xcalloc((size_t)t->E, rec) : NULL;
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
            logf_(t, false, "checkpoint %s", path);
            /* the new checkpoint is safe; failing to remove an old one only costs disk */
            int64_t keep = calf_config_int(t->cfg, CALF_CFG_NUM_CHECKPOINTS);
            calf_error perr;
            if (ckpt_prune(dir, keep > 0 ? (int)keep : 1, t->iteration, &perr) != CALF_OK)
                logf_(t, true, "warning: %s", perr.msg);
        }
        ckpt_buf_free(&b);
    }
    free(local);
    free(all);
    return rc;
}

#define MAX_ITERATION 1000000000000LL /* TrainerConfig.num_iterations' bound */

static bool all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

typedef struct ckpt_meta {
    int64_t iteration, env_steps, adam_step, total_episodes;
    uint64_t num_envs;
} ckpt_meta;

/* The META section and the parameters that follow it; checks the iteration against the
 * file header's (a file pieced together from two checkpoints fails here). */
static int read_meta_params(ckpt_reader *r, const char *name, int64_t header_iteration,
                            ckpt_meta *m, model *md, calf_error *err) {
    uint32_t layout = 0;
    ckpt_get_tag(r, "META");
    ckpt_get_u32(r, &layout);
    if (r->status == CALF_OK && layout != CKPT_LAYOUT_VERSION)
        return calf_error_set(err, CALF_EINVAL, "%s: unsupported checkpoint layout %u", name, layout);
    ckpt_get_i64(r, &m->iteration);
    ckpt_get_i64(r, &m->env_steps);
    ckpt_get_i64(r, &m->adam_step);
    ckpt_get_i64(r, &m->total_episodes);
    ckpt_get_u64(r, &m->num_envs);
    ckpt_get_tag(r, "PRMS");
    ckpt_get_f32s(r, md->params, md->num_params);
    if (r->status) return r->status;
    if (m->iteration != header_iteration)
        return calf_error_set(err, CALF_EINVAL, "%s: iteration %lld inside, %lld in the header", name,
                              (long long)m->iteration, (long long)header_iteration);
    if (m->iteration < 0 || m->iteration > MAX_ITERATION || m->env_steps < 0 ||
        m->adam_step < 0 || m->total_episodes < 0 || m->total_episodes > m->env_steps)
        return calf_error_set(err, CALF_EINVAL, "%s: counters out of range", name);
    if (!all_finite(md->params, md->num_params))
        return calf_error_set(err, CALF_EINVAL, "%s: parameters are not finite", name);
    return CALF_OK;
}

int trainer_read_params(const unsigned char *payload, size_t n, const char *name,
                        int64_t header_iteration, model *md, calf_error *err) {
    ckpt_reader r;
    ckpt_reader_init(&r, payload, n, name, err);
    ckpt_meta m;
    return read_meta_params(&r, name, header_iteration, &m, md, err);
}

/* *out = a * b for a, b >= 0; false when the product does not fit. */
static bool mul_fits(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0 || (b > 0 && a > INT64_MAX / b)) return false;
    *out = a * b;
    return true;
}

static int load_checkpoint(trainer *t, const unsigned char *payload, size_t n, const char *name,
                           int64_t header_iteration, calf_error *err) {
    model *md = &t->md;
    ckpt_reader r;
    ckpt_reader_init(&r, payload, n, name, err);
    ckpt_meta m;
    int rc = read_meta_params(&r, name, header_iteration, &m, md, err);
    t->params_version++; /* the parameters were overwritten */
    if (rc) return rc;
    if (m.num_envs != (uint64_t)t->E)
        return calf_error_set(err, CALF_EINVAL, "%s: checkpoint has %llu environments, config %d",
                              name, (unsigned long long)m.num_envs, t->E);
    /* the counters follow from the iteration; anything else is a damaged or foreign file
     * (an iteration whose counters would not fit in 64 bits is one too) */
    int64_t steps_per_iter = (int64_t)t->E * t->T, updates_per_iter = (int64_t)t->epochs * t->M;
    int64_t want_steps, want_updates;
    if (!mul_fits(m.iteration, steps_per_iter, &want_steps) ||
        !mul_fits(m.iteration, updates_per_iter, &want_updates) || m.env_steps != want_steps ||
        m.adam_step != want_updates)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: counters do not match iteration %lld of this config", name,
                              (long long)m.iteration);
    t->iteration = m.iteration;
    t->env_steps = m.env_steps;
    t->adam_step = m.adam_step;
    t->total_episodes = m.total_episodes;
    uint64_t rec = 0;
    ckpt_get_tag(&r, "ADAM");
    ckpt_get_f32s(&r, md->m, md->num_params);
    ckpt_get_f32s(&r, md->v, md->num_params);
    ckpt_get_tag(&r, "ENVS");
    ckpt_get_u64(&r, &rec);
    if (r.status) return r.status;
    if (!all_finite(md->m, md->num_params) || !all_finite(md->v, md->num_params))
        return calf_error_set(err, CALF_EINVAL, "%s: optimizer state is not finite", name);
    if (rec != env_record_size(t))
        return calf_error_set(err, CALF_EINVAL, "%s: env record size %llu, expected %zu", name,
                              (unsigned long long)rec, env_record_size(t));
    if (r.len - r.pos != (size_t)t->E * rec)
        return calf_error_set(err, CALF_EINVAL, "%s: env records do not fill the payload", name);
    /* this process's block of the records, which are in global env order */
    const unsigned char *base = r.p + r.pos + (size_t)t->begin * rec;
    size_t vrec = vec_env_record_size(&t->ve);
    for (int e = 0; e < t->count; e++) {
        const unsigned char *p = base + (size_t)e * rec;
        calf_error verr;
        if ((rc = vec_env_load_record(&t->ve, e, p, &verr)))
            return calf_error_set(err, rc, "%s: %s", name, verr.msg);
        if ((rc = get_rng(p + vrec, &t->act_rng[e], name, t->begin + e, err))) return rc;
        if ((rc = get_rng(p + vrec + RNG_BYTES, &t->shuf_rng[e], name, t->begin + e, err))) return rc;
    }
    return CALF_OK;
}

/* ---- the loop ----------------------------------------------------------------- */

static bool finished(const trainer *t) {
    if (t->max_iterations > 0 && t->iteration >= t->max_iterations) return true;
    if (t->max_env_steps > 0 && t->env_steps >= t->max_env_steps) return true;
    return false;
}

/* num_checkpoints spread evenly: due when iteration * k / total passes a whole number,
 * so k checkpoints fall on the run (the last on its final iteration). */
static bool checkpoint_due(const trainer *t) {
    int64_t k = calf_config_int(t->cfg, CALF_CFG_NUM_CHECKPOINTS), total = t->total_iterations;
    if (k <= 0 || total <= 0 || t->iteration > total) return false;
    return t->iteration * k / total > (t->iteration - 1) * k / total;
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
    if (calf_config_bool(t->cfg, CALF_CFG_SUMMARIZE_GRADS_AND_VARS)) {
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
    int episodes = (int)calf_config_int(t->cfg, CALF_CFG_NUM_EVAL_EPISODES);
    double *returns = calf_xcalloc((size_t)episodes, sizeof(double));
    double avg = 0;
    int rc = trainer_evaluate_greedy(&t->md, calf_config_string(t->cfg, CALF_CFG_ENV_NAME), t->seed,
                                     episodes, returns, &avg, err);
    free(returns);
    if (rc) return rc;
    t->eval_return = avg;
    logf_(t, false, "eval iter %lld: average return %.3f over %d episodes",
          (long long)t->iteration, avg, episodes);
    if (t->eval_writer) {
        double wall = (double)time(NULL);
        calf_summary_writer_add_scalar(t->eval_writer, "Metrics/AverageReturn", t->iteration,
                                       wall, avg);
        calf_summary_writer_add_scalar(t->eval_writer, "Metrics/EnvironmentSteps", t->iteration,
                                       wall, (double)t->env_steps);
        rc = calf_summary_writer_flush(t->eval_writer, err);
    }
    return rc;
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
    if (t->iteration % calf_config_int(t->cfg, CALF_CFG_SUMMARY_INTERVAL) == 0)
        write_summaries(t, g, sps);
    if (calf_context_is_main() && calf_config_bool(t->cfg, CALF_CFG_EVALUATE) &&
        (t->iteration % calf_config_int(t->cfg, CALF_CFG_EVAL_INTERVAL) == 0 || finished(t))) {
        if ((rc = evaluate(t, err))) return rc;
    }
    /* Ranks that share memory step one model (every rank reads the same bytes), so there
     * is nothing to compare; the check guards the backends where each holds its own copy. */
    int64_t check = calf_config_int(t->cfg, CALF_CFG_DDP_CHECK_INTERVAL);
    if (comm_size(t->c) > 1 && !t->sharing && check > 0 && t->iteration % check == 0) {
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
        if (stop && !finished(t)) {
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
    struct stat st;
    if (stat(root, &st) == 0 && !S_ISDIR(st.st_mode))
        return calf_error_set(err, CALF_EINVAL, "--root_dir %s is not a directory", root);
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
    resume_state *rs;       /* found and validated before the workers start */
    bool report_via_comm;   /* workers of a job: comm_report_failure; one process: err */
    calf_error err;         /* one process: the failure, returned by calf_train */
} worker_args;

static int write_operative_config(const trainer *t, const char *root, calf_error *err) {
    char path[4096], tmp[4200];
    int rc = join_path(path, sizeof path, root, "config.gin", err);
    if (rc) return rc;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return calf_error_set(err, CALF_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    /* The split: a line per rank, or beyond 16 ranks a line per run of equal blocks
     * (calf_split's blocks differ by at most one, so there are at most two runs). */
    char line[512];
    int N = comm_size(t->c);
    bytes_buf hb = {0};
    snprintf(line, sizeof line,
             "operative config written by calf %s: every binding's final value\n"
             "values are global; num_parallel_environments = %d split over %d process%s:",
             CALF_VERSION, t->E, N, N == 1 ? "" : "es");
    bytes_buf_put_str(&hb, line);
    for (int r = 0; r < N;) {
        int b, c, last = r;
        calf_split(t->E, N, r, &b, &c, NULL);
        if (N > 16)
            for (int q = r + 1, bq, cq; q < N && (calf_split(t->E, N, q, &bq, &cq, NULL), cq == c); q++)
                last = q;
        if (last == r) {
            snprintf(line, sizeof line, "\n  rank %d: environments %d..%d (%d)", r, b, b + c - 1, c);
        } else {
            int bl, cl;
            calf_split(t->E, N, last, &bl, &cl, NULL);
            snprintf(line, sizeof line, "\n  ranks %d..%d: environments %d..%d (%d each)", r, last,
                     b, bl + cl - 1, c);
        }
        bytes_buf_put_str(&hb, line);
        r = last + 1;
    }
    int off0, len0, offl, lenl;
    chunk_range(t->T, t->M, 0, &off0, &len0);
    chunk_range(t->T, t->M, t->M - 1, &offl, &lenl);
    snprintf(line, sizeof line,
             "\nmini_batch_size = %lld: %d minibatches per epoch, each %d..%d timesteps from "
             "every env (%d..%d samples)",
             (long long)calf_config_int(t->cfg, CALF_CFG_MINI_BATCH_SIZE), t->M, lenl, len0,
             t->E * lenl, t->E * len0);
    bytes_buf_put_str(&hb, line);
    *bytes_buf_grow(&hb, 1) = '\0';
    const char *header = (const char *)hb.data;
    rc = calf_config_write(t->cfg, f, header);
    free(hb.data);
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

/* Agree on stopping after Ctrl-C; a second Ctrl-C gets the default action (SA_RESETHAND),
 * as the launcher's second Ctrl-C kills its workers. */
static void install_stop_handlers(struct sigaction *old_int, struct sigaction *old_term) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    stop_requested = 0;
    /* cannot fail for these signals and a valid handler */
    CALF_ASSERT(sigaction(SIGINT, &sa, old_int) == 0);
    CALF_ASSERT(sigaction(SIGTERM, &sa, old_term) == 0);
}

static void restore_stop_handlers(const struct sigaction *old_int, const struct sigaction *old_term) {
    CALF_ASSERT(sigaction(SIGINT, old_int, NULL) == 0);
    CALF_ASSERT(sigaction(SIGTERM, old_term, NULL) == 0);
}

static int open_log(trainer *t, const char *root, int rank, calf_error *err) {
    char logdir[4096], logpath[4200];
    int rc = join_path(logdir, sizeof logdir, root, "log", err);
    if (rc == CALF_OK) rc = fs_mkdir_p(logdir, err);
    if (rc) return rc;
    snprintf(logpath, sizeof logpath, "%s/rank-%d.log", logdir, rank);
    t->log = fopen(logpath, "a");
    if (!t->log) return calf_error_set(err, CALF_EIO, "%s: cannot open: %s", logpath, strerror(errno));
    return CALF_OK;
}

static int open_eval_writer(trainer *t, const char *root, calf_error *err) {
    char evdir[4096];
    int rc = join_path(evdir, sizeof evdir, root, "eval", err);
    if (rc) return rc;
    t->eval_writer =
        calf_summary_writer_open(evdir, calf_config_float(t->cfg, CALF_CFG_SUMMARIES_FLUSH_SECS), err);
    return t->eval_writer ? CALF_OK : (err->status ? err->status : CALF_EIO);
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
    struct sigaction old_int, old_term;
    install_stop_handlers(&old_int, &old_term);
    comm_set_timeout(c, calf_config_float(wa->cfg, CALF_CFG_COLLECTIVE_TIMEOUT));

    int rank = c->index;
    int rc = open_log(&t, o->root_dir, rank, &err);
    if (rc == CALF_OK) rc = trainer_init(&t, wa->cfg, c, &err);
    if (rc == CALF_OK) {
        logf_(&t, false, "calf %s: backend %s, pid %ld", CALF_VERSION, comm_backend_name(c),
              (long)getpid());
        logf_(&t, comm_size(c) > 1, "rank %d/%d: environments %d..%d (%d of %d)", rank,
              comm_size(c), t.begin, t.begin + t.count - 1, t.count, t.E);
    }
    if (rc == CALF_OK && wa->rs->found) {
        rc = load_checkpoint(&t, wa->rs->payload, wa->rs->n, wa->rs->path, wa->rs->hdr.iteration,
                             &err);
        if (rc == CALF_OK)
            logf_(&t, true, "resuming from %s (iteration %lld)", wa->rs->path,
                  (long long)t.iteration);
    }
    if (rc == CALF_OK && t.sharing) rc = share_model(&t, &err);
    if (rc == CALF_OK && calf_context_is_main()) rc = write_operative_config(&t, o->root_dir, &err);
    if (rc == CALF_OK && finished(&t)) {
        logf_(&t, true, "nothing to do: the run is complete at iteration %lld",
              (long long)t.iteration);
    } else if (rc == CALF_OK) {
        if (calf_context_is_main() && calf_config_bool(wa->cfg, CALF_CFG_EVALUATE))
            rc = open_eval_writer(&t, o->root_dir, &err);
        char trdir[4096];
        if (rc == CALF_OK) rc = join_path(trdir, sizeof trdir, o->root_dir, "train", &err);
        if (rc == CALF_OK)
            rc = calf_summary_run(trdir, calf_config_float(wa->cfg, CALF_CFG_SUMMARIES_FLUSH_SECS),
                                  train_loop, &t, &err);
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
        if (t.sharing)
            logf_(&t, false,
                  "work sharing: this rank folded %lld env partials and computed the "
                  "advantages of %lld envs of other ranks",
                  (long long)t.shared_envs, (long long)t.shared_adv_envs);
        /* what the other ranks cost this one: time in collectives until all had arrived,
         * most of it in the update's three per minibatch */
        if (comm_size(c) > 1 && c->ops->measures_waits) {
            double run_s = now_seconds() - t.start_time;
            logf_(&t, false,
                  "waited %.3f s in collectives for other ranks (%.1f%% of %.3f s): %.3f s "
                  "for the gradient, %.3f s for its norm, %.3f s for the optimiser step",
                  c->wait_s, run_s > 0 ? 100.0 * c->wait_s / run_s : 0.0, run_s,
                  t.wait_grad_s, t.wait_norm_s, t.wait_step_s);
        }
    }
    if (rc != CALF_OK && rc != CALF_EINTR) {
        if (!err.msg[0]) calf_error_set(&err, rc, "training failed with status %d", rc);
        logf_(&t, false, "error: %s", err.msg);
        if (wa->report_via_comm) comm_report_failure(c, err.msg);
        else wa->err = err;
    }
    if (t.log && fclose(t.log) != 0 && rc == CALF_OK) {
        rc = calf_error_set(&wa->err, CALF_EIO, "%s/log/rank-%d.log: write failed", o->root_dir, rank);
        if (wa->report_via_comm) comm_report_failure(c, wa->err.msg);
    }
    restore_stop_handlers(&old_int, &old_term);
    trainer_free(&t);
    return calf_exit_code(rc);
}

/* The launcher's exit status back as a status (its messages are already on stderr). */
static int status_of_exit(int code) {
    switch (code) {
    case 0: return CALF_OK;
    case 2: return CALF_EINVAL;
    case 130: return CALF_EINTR;
    default: return CALF_ECOMM;
    }
}

/* Rank 0 holds the config text and the checkpoint; ranks on other machines may see
 * neither, so both are sent to them. Every rank leaves with the same status; errors
 * are rank 0's to report. */
static int mpi_share_setup(comm *c, const calf_train_options *o, calf_config *cfg,
                           resume_state *rs, calf_error *err) {
    int64_t head[3] = {CALF_OK, 0, 0}; /* status, config text bytes, checkpoint bytes */
    char *text = NULL;
    size_t text_len = 0;
    if (c->index == 0) {
        int rc = calf_train_load_config(o, cfg, err);
        if (rc == CALF_OK) {
            int b, n;
            rc = calf_split((int)calf_config_int(cfg, CALF_CFG_NUM_ENVS), comm_size(c), 0, &b, &n, err);
        }
        if (rc == CALF_OK) rc = find_resume(o->root_dir, cfg, rs, err);
        if (rc == CALF_OK) {
            FILE *f = open_memstream(&text, &text_len);
            if (!f || calf_config_write(cfg, f, NULL) != CALF_OK || fclose(f) != 0)
                rc = calf_error_set(err, CALF_ENOMEM, "cannot serialise the config");
        }
        head[0] = rc;
        head[1] = (int64_t)text_len;
        head[2] = rs->found ? (int64_t)rs->n : -1;
    }
    int rc = comm_broadcast(c, head, sizeof head, 0, err);
    if (rc == CALF_OK && head[0] != CALF_OK) {
        if (c->index != 0) calf_error_clear(err); /* rank 0 reports it */
        rc = (int)head[0];
    }
    if (rc == CALF_OK && c->index != 0) text = calf_xcalloc((size_t)head[1] + 1, 1);
    if (rc == CALF_OK) rc = comm_broadcast(c, text, (size_t)head[1], 0, err);
    if (rc == CALF_OK && c->index != 0) {
        calf_config_init(cfg);
        rc = calf_config_parse_string(cfg, text, "config from rank 0", err);
    }
    if (rc == CALF_OK && head[2] >= 0) {
        if (c->index != 0) {
            rs->found = true;
            rs->n = (size_t)head[2];
            rs->payload = calf_xmalloc(rs->n);
            snprintf(rs->path, sizeof rs->path, "%s/train/algorithm (via rank 0)", o->root_dir);
        }
        rc = comm_broadcast(c, rs->payload, rs->n, 0, err);
        if (rc == CALF_OK) rc = comm_broadcast(c, &rs->hdr, sizeof rs->hdr, 0, err);
    }
    free(text);
    return rc;
}

/* Under mpirun a process that exits non-zero gets the whole job killed, and output
 * written after MPI_Finalize can be lost with it: rank 1 may leave before rank 0 has
 * printed a word. So a setup error is printed here, before the finalize that every rank
 * passes together; rank 0's is printed by rank 0 alone. */
static int train_mpi(const calf_train_options *o, calf_error *err) {
    comm *c = NULL;
    int rc = comm_mpi_init(&c, NULL, NULL, err);
    if (rc) return rc;
    calf_config cfg;
    resume_state rs;
    memset(&rs, 0, sizeof rs);
    if (o->nproc <= 1)
        rc = mpi_share_setup(c, o, &cfg, &rs, err);
    else if (c->index != 0)
        rc = CALF_EINVAL; /* every rank refuses; rank 0 says why */
    else
        rc = calf_error_set(err, CALF_EINVAL,
                            "--nproc %d under an MPI launcher: the launcher decides the number of "
                            "processes (use mpirun -np N without --nproc)",
                            o->nproc);
    if (rc) {
        if (err->msg[0]) { /* rank 0's, or a rank's own failure (others cleared theirs) */
            if (c->index == 0) fprintf(stderr, "calf: %s\n", err->msg);
            else fprintf(stderr, "calf: rank %d: %s\n", c->index, err->msg);
            fflush(stderr);
        }
        calf_error_clear(err);
        free(rs.payload);
        comm_finalize(c);
        return rc;
    }
    worker_args wa = {o, &cfg, &rs, true, {0, ""}};
    int code = train_worker(c, &wa);
    free(rs.payload);
    comm_finalize(c);
    calf_error_clear(err);
    return status_of_exit(code);
}

int calf_train(const calf_train_options *o, calf_error *err) {
    calf_error_clear(err);
    if (!o->root_dir || !o->root_dir[0])
        return calf_error_set(err, CALF_EINVAL, "--root_dir is empty");
    if (comm_mpi_launched()) return train_mpi(o, err);
    calf_config cfg;
    int rc = calf_train_load_config(o, &cfg, err);
    if (rc) return rc;
    int nproc = o->nproc > 1 ? o->nproc : 1;
    int b, n;
    if ((rc = calf_split((int)calf_config_int(&cfg, CALF_CFG_NUM_ENVS), nproc, 0, &b, &n, err)))
        return rc;
    resume_state rs;
    if ((rc = find_resume(o->root_dir, &cfg, &rs, err))) return rc;
    worker_args wa = {o, &cfg, &rs, nproc > 1, {0, ""}};
    if (nproc == 1) {
        comm *c = NULL;
        comm_single(&c);
        int code = train_worker(c, &wa);
        comm_finalize(c);
        free(rs.payload);
        *err = wa.err;
        if (code == 0) return CALF_OK;
        if (code == 130) return CALF_EINTR;
        return wa.err.status ? wa.err.status : CALF_EIO;
    }
    int code = launcher_run(nproc, train_worker, &wa, err);
    free(rs.payload);
    if (code == 1 && err->msg[0]) return err->status ? err->status : CALF_EIO; /* launcher itself */
    calf_error_clear(err); /* the workers' messages are on stderr already */
    return status_of_exit(code);
}
