/* trainer.c: the iteration loop every algorithm shares (ALF's RLTrainer), one process's
 * part of a run: stepping its envs with auto-reset and their episode statistics,
 * evaluation, the summary cadence, the progress line and when to checkpoint. Beside it
 * are its config (trainer_config.c), memory check (trainer_memory.c), checkpoints
 * (trainer_checkpoint.c), rank log (rank_log.c) and signals (trainer_signals.c). The
 * algorithm (algorithm.h) acts, learns and owns its state; the launch is job.c's. Every
 * sum is over the global env index, so a checkpoint's bytes never depend on how many
 * processes made it. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "calf/summary.h"
#include "calf/version.h"
#include "base/clock.h"
#include "base/fsutil.h"
#include "base/mem.h"
#include "base/testing.h"
#include "envs/vec_env.h"
#include "parallel/comm.h"
#include "parallel/tree_sum.h"
#include "records/checkpoint.h"
#include "records/events_writer.h"
#include "records/session_log.h"
#include "training/algorithm.h"
#include "training/rank_log.h"
#include "training/trainer.h"
#include "training/trainer_checkpoint.h"
#include "training/trainer_config.h"
#include "training/trainer_signals.h"

/* Per-env episode statistics of an iteration, summed over envs in canonical order. */
enum { EP_EPISODES, EP_RETURN, EP_LENGTH, NUM_EP_STATS };

/* The trainer's own settings, resolved once from the config. */
typedef struct trainer_params {
    int64_t num_checkpoints;     /* TrainerConfig.num_checkpoints */
    bool evaluate;               /* TrainerConfig.evaluate */
    int64_t eval_interval;
    int num_eval_episodes;
    int64_t eval_max_steps;      /* TrainerConfig.eval_max_episode_steps */
    int64_t summary_interval;
    double summaries_flush_secs;
    bool histograms;             /* TrainerConfig.summarize_grads_and_vars */
    int64_t check_interval;      /* TrainerConfig.ddp_paras_check_interval */
    int64_t initial_collect;     /* TrainerConfig.initial_collect_steps (the ETA's window) */
} trainer_params;


/* The most algorithm scalars one iteration hands back (PPO writes 6, SAC 9). */
#define TRAINER_MAX_METRICS 32

struct trainer {
    trainer_params p;
    const calf_config *cfg;
    comm *c;
    const char *root;
    rank_log log;
    bool quiet;
    int E, begin, count;     /* global envs; this process owns [begin, begin+count) */
    int T;                   /* unroll length */
    uint64_t seed;
    int64_t max_iterations;  /* 0: no limit */
    int64_t max_env_steps;   /* 0: no limit */
    int64_t total_iterations;/* the run's planned length, for checkpoints and ETA */
    const char *env_name;
    const calf_env_spec *spec;

    vec_env ve;
    const algorithm_ops *ops;
    algorithm *algo;
    /* one step of this process's envs */
    float *obs;              /* (count, obs_dim) what the step acted on */
    float *next_obs;         /* (count, obs_dim) a byte block's next observation as floats */
    uint8_t *obs8, *final8;  /* (count, obs_dim) a byte block's: what the step acted on, and
                                the step's final observations; NULL for a float block */
    int *act;                /* (count, action_ints) */
    float *u;                /* (count, max(action_dim, 1)) */
    float *rew;              /* (count) */
    uint8_t *term, *trunc;   /* (count) */
    float *final_obs;        /* (count, obs_dim) */
    double *ep_return;       /* (count) */
    int *ep_length;          /* (count) */
    double *ep_stats;        /* (count, NUM_EP_STATS) */

    int64_t iteration;       /* iterations completed */
    int64_t env_steps;       /* global env steps completed */
    int64_t total_episodes;

    calf_summary_writer *eval_writer; /* main process only, when evaluating */
    double eval_return;      /* last evaluation's average, NAN before */
    double eval_return_std;  /* its returns' population std (numpy's std) */
    double eval_length;      /* its episodes' mean length in steps */
    double last_avg_return;  /* last iteration with finished episodes */
    double start_time, last_progress, last_logged; /* progress: stderr's line, the rank log's */
    int64_t start_iteration;
    double eta_time[2];      /* the ETA's window: marks at least 30 s apart (progress) */
    int64_t eta_iteration[2];
    calf_error io_err;       /* this process's first failed write to its log or summaries */
    int stopped_by;          /* -1, or the rank whose failed write stopped the job */
    calf_error *err;         /* where failures go: own_err */
    calf_error own_err;
    bool report_via_comm;    /* workers of a job: comm_report_failure at close */
    bool ended;              /* the run is complete, stopped or failed: no more steps */
    bool handlers;           /* SIGINT/SIGTERM handlers installed; restored at close */
    bool guards_exit;        /* an exit() before close is reported (trainer_args.guard_exit) */
    struct sigaction old_int, old_term;
    calf_summary_writer *train_writer; /* main process only */

    /* the last iteration's metrics, and the algorithm's scalars they point at */
    calf_trainer_metrics metrics;
    bool evaluated;          /* this iteration evaluated */
    bool warned_eval_cap;    /* an evaluation episode reached eval_max_steps: said once */
    int num_metrics;
    char metric_names[TRAINER_MAX_METRICS][96];
    const char *metric_name_ptrs[TRAINER_MAX_METRICS];
    double metric_values[TRAINER_MAX_METRICS];
};

static trainer_params trainer_params_of(const calf_config *cfg) {
    return (trainer_params){
        .num_checkpoints = calf_config_int(cfg, CALF_CFG_NUM_CHECKPOINTS),
        .evaluate = calf_config_bool(cfg, CALF_CFG_EVALUATE),
        .eval_interval = calf_config_int(cfg, CALF_CFG_EVAL_INTERVAL),
        .num_eval_episodes = (int)calf_config_int(cfg, CALF_CFG_NUM_EVAL_EPISODES),
        .eval_max_steps = calf_config_int(cfg, CALF_CFG_EVAL_MAX_EPISODE_STEPS),
        .summary_interval = calf_config_int(cfg, CALF_CFG_SUMMARY_INTERVAL),
        .summaries_flush_secs = calf_config_float(cfg, CALF_CFG_SUMMARIES_FLUSH_SECS),
        .histograms = calf_config_bool(cfg, CALF_CFG_SUMMARIZE_GRADS_AND_VARS),
        .check_interval = calf_config_int(cfg, CALF_CFG_DDP_CHECK_INTERVAL),
        .initial_collect = calf_config_int(cfg, CALF_CFG_INITIAL_COLLECT_STEPS),
    };
}

/* ---- setup ------------------------------------------------------------------ */

static void trainer_free(trainer *t) {
    if (t->ops) t->ops->destroy(t->algo);
    vec_env_free(&t->ve);
    void *bufs[] = {t->obs, t->next_obs, t->obs8, t->final8, t->act, t->u, t->rew, t->term,
                    t->trunc, t->final_obs,
                    t->ep_return, t->ep_length, t->ep_stats};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
}

static int trainer_init(trainer *t, const calf_config *cfg, comm *c, calf_error *err) {
    t->p = trainer_params_of(cfg);
    t->cfg = cfg;
    t->c = c;
    t->E = (int)calf_config_int(cfg, CALF_CFG_NUM_ENVS);
    t->T = (int)calf_config_int(cfg, CALF_CFG_UNROLL_LENGTH);
    t->seed = (uint64_t)calf_config_int(cfg, CALF_CFG_RANDOM_SEED);
    t->max_iterations = calf_config_int(cfg, CALF_CFG_NUM_ITERATIONS);
    t->max_env_steps = calf_config_int(cfg, CALF_CFG_NUM_ENV_STEPS);
    int64_t per_iter = (int64_t)t->E * t->T;
    int64_t by_steps = t->max_env_steps > 0 ? (t->max_env_steps + per_iter - 1) / per_iter : 0;
    t->total_iterations = t->max_iterations;
    if (by_steps > 0 && (t->total_iterations == 0 || by_steps < t->total_iterations))
        t->total_iterations = by_steps;
    t->eval_return = NAN;
    t->last_avg_return = NAN;
    t->env_name = calf_config_string(cfg, CALF_CFG_ENV_NAME);
    t->spec = &calf_env_find(t->env_name)->spec;

    int rc = calf_split(t->E, comm_size(c), c->index, &t->begin, &t->count, err);
    if (rc == CALF_OK) rc = vec_env_init(&t->ve, t->env_name, t->seed, t->begin, t->count, err);
    if (rc) return rc;
    size_t n = (size_t)t->count, od = (size_t)t->spec->obs_dim;
    size_t ad = t->spec->action_dim > 0 ? (size_t)t->spec->action_dim : 1;
    if (!(t->obs = mem_calloc(n * od, sizeof(float), err)) ||
        !(t->act = mem_calloc(n * (size_t)calf_env_action_ints(t->spec), sizeof(int), err)) ||
        !(t->u = mem_calloc(n * ad, sizeof(float), err)) ||
        !(t->rew = mem_calloc(n, sizeof(float), err)) ||
        !(t->term = mem_calloc(n, 1, err)) ||
        !(t->trunc = mem_calloc(n, 1, err)) ||
        !(t->final_obs = mem_calloc(n * od, sizeof(float), err)) ||
        !(t->ep_return = mem_calloc(n, sizeof(double), err)) ||
        !(t->ep_length = mem_calloc(n, sizeof(int), err)) ||
        !(t->ep_stats = mem_calloc(n * NUM_EP_STATS, sizeof(double), err)))
        return CALF_ENOMEM; /* trainer_free frees what was made */
    /* A class that writes its uint8 observation as bytes steps so (a quarter of the
     * stores); the algorithms get the same values as floats, and the bytes to keep. */
    if (calf_env_find(t->env_name)->step_u8 &&
        (vec_env_use_u8(&t->ve, err) != CALF_OK ||
         !(t->next_obs = mem_calloc(n * od, sizeof(float), err)) ||
         !(t->obs8 = mem_calloc(n * od, 1, err)) || !(t->final8 = mem_calloc(n * od, 1, err))))
        return CALF_ENOMEM;
    t->ops = trainer_algorithm(cfg);
    algo_setup s = {.cfg = cfg, .spec = t->spec, .c = c, .E = t->E, .begin = t->begin,
                    .count = t->count, .T = t->T, .seed = t->seed,
                    .total_iterations = t->total_iterations};
    return t->ops->create(&s, &t->algo, err);
}

/* Every size that ranks must agree on, agreed before anything depends on it: the env
 * record (rank 0 gathers records of its own size into one file), the spaces (the
 * networks' shapes, the collectives' sizes) and the time limit. Each process of an MPI
 * job registers a Python env itself, sizing its checkpoint slot from its own fresh
 * pickle, so these can differ there. One collective; a job of one process agrees. */
static int agree_on_sizes(trainer *t, calf_error *err) {
    if (comm_size(t->c) == 1) return CALF_OK;
    const calf_env_spec *sp = t->spec;
    uint64_t bounds = 14695981039346656037ull; /* FNV-1a of the bounds' bytes */
    for (int j = 0; j < sp->action_dim; j++) {
        float lh[2] = {sp->action_low[j], sp->action_high[j]};
        unsigned char b[sizeof lh];
        memcpy(b, lh, sizeof b);
        for (size_t k = 0; k < sizeof b; k++) bounds = (bounds ^ b[k]) * 1099511628211ull;
    }
    for (int d = 0; d < sp->num_action_dims; d++) /* MultiDiscrete sizes with the bounds */
        for (int k = 0; k < 4; k++)
            bounds = (bounds ^ (unsigned char)((unsigned)sp->action_nvec[d] >> (8 * k))) *
                     1099511628211ull;
    const int64_t vals[] = {(int64_t)(vec_env_record_size(&t->ve) +
                                      t->ops->env_record_size(t->algo)),
                            sp->obs_dim, sp->num_actions, sp->action_dim,
                            (int64_t)(bounds >> 1), sp->max_episode_steps, sp->num_action_dims,
                            sp->action_mask};
    static const char *const names[] = {"the env record size (bytes)", "the observation size",
                                        "the number of actions", "the action dimensions",
                                        "the action bounds (a hash of them)", "the time limit",
                                        "the MultiDiscrete sub-actions", "the action mask"};
    int which = -1;
    int rc = comm_check_agree(t->c, vals, names, (int)(sizeof vals / sizeof vals[0]), &which,
                              err);
    if (rc == CALF_OK || which < 0) return rc;
    char detail[sizeof err->msg];
    snprintf(detail, sizeof detail, "%s", err->msg);
    return calf_error_set(
        err, CALF_EINVAL, "environment %s: %s%s", t->env_name, detail,
        which == 0 ? " (a Python env's checkpoint slot is sized from each process's own fresh "
                     "pickle: fix it with register_env(state_bytes=N), or "
                     "--env_py_state_bytes N, the same on every rank)"
                   : " (each process made the env itself: make it the same on every rank)");
}

/* ---- checkpoints (trainer_checkpoint.h) -------------------------------------- */

/* What the checkpoint payload reads and writes of this process's run. */
static trainer_ckpt_view ckpt_view(trainer *t) {
    return (trainer_ckpt_view){.c = t->c, .root = t->root, .digest = calf_config_digest(t->cfg),
                               .keep = t->p.num_checkpoints, .E = t->E, .T = t->T,
                               .begin = t->begin, .count = t->count, .env_name = t->env_name,
                               .ve = &t->ve, .ops = t->ops, .algo = t->algo, .log = &t->log};
}

/* This iteration's checkpoint. Collective. */
static int write_checkpoint(trainer *t, calf_error *err) {
    trainer_ckpt_view v = ckpt_view(t);
    trainer_counters n = {t->iteration, t->env_steps, t->total_episodes};
    return trainer_checkpoint_write(&v, &n, err);
}

/* Resume from rs: the counters are the checkpoint's once it is read. Collective. */
static int load_checkpoint(trainer *t, const resume_state *rs, calf_error *err) {
    trainer_ckpt_view v = ckpt_view(t);
    trainer_counters n = {t->iteration, t->env_steps, t->total_episodes};
    int rc = trainer_checkpoint_load(&v, rs, &n, err);
    t->iteration = n.iteration;
    t->env_steps = n.env_steps;
    t->total_episodes = n.total_episodes;
    return rc;
}

/* ---- rollout ---------------------------------------------------------------- */

/* bytes as the floats they are */
static void widen(const uint8_t *b, size_t n, float *x) {
    for (size_t k = 0; k < n; k++) x[k] = (float)b[k];
}

/* T steps of this process's envs: the algorithm acts and sees what happened; episodes
 * that end are counted per env. A byte block's observations reach the algorithm as the
 * floats they are and as its bytes. */
static void rollout(trainer *t) {
    int n = t->count, od = t->spec->obs_dim, ad = t->spec->action_dim;
    memset(t->ep_stats, 0, (size_t)n * NUM_EP_STATS * sizeof(double));
    const size_t all = (size_t)n * (size_t)od;
    for (int s = 0; s < t->T; s++) {
        comm_progress(t->c);
        if (t->obs8) { /* the last step's next observation, widened already */
            if (s > 0) {
                float *x = t->obs;
                t->obs = t->next_obs, t->next_obs = x;
            } else {
                widen(t->ve.obs8, all, t->obs);
            }
            memcpy(t->obs8, t->ve.obs8, all);
        } else {
            memcpy(t->obs, t->ve.obs, all * sizeof(float));
        }
        t->ops->act(t->algo, t->iteration, s, t->obs, t->ve.mask, t->act, t->u);
        if (t->obs8) {
            vec_env_step_u8(&t->ve, t->act, ad ? t->u : NULL, t->rew, t->term, t->trunc,
                            t->final8, t->ep_return, t->ep_length);
            widen(t->final8, all, t->final_obs);
            widen(t->ve.obs8, all, t->next_obs);
        } else {
            vec_env_step(&t->ve, t->act, ad ? t->u : NULL, t->rew, t->term, t->trunc,
                         t->final_obs, t->ep_return, t->ep_length);
        }
        for (int e = 0; e < n; e++) {
            if (t->term[e] || t->trunc[e]) {
                double *st = t->ep_stats + (size_t)e * NUM_EP_STATS;
                st[EP_EPISODES] += 1;
                st[EP_RETURN] += t->ep_return[e];
                st[EP_LENGTH] += t->ep_length[e];
            }
        }
        algo_step st = {.s = s, .obs = t->obs, .act = t->act, .u = t->u, .reward = t->rew,
                        .terminated = t->term, .truncated = t->trunc, .final_obs = t->final_obs,
                        .next_obs = t->obs8 ? t->next_obs : t->ve.obs,
                        .next_mask = t->ve.final_mask, .obs8 = t->obs8,
                        .final_obs8 = t->final8, .next_obs8 = t->obs8 ? t->ve.obs8 : NULL};
        t->ops->observe(t->algo, &st);
    }
}

/* ---- evaluation (main process only) ------------------------------------------ */

/* Greedy episodes on fresh envs. Eval envs use their own index range (2^40 + k) so they
 * never replay a training env's stream. An episode the env has not ended after max_steps
 * steps ends there (an env without a time limit would otherwise run for ever under a
 * policy that never loses). */
int trainer_evaluate_greedy(const algorithm_ops *ops, algorithm *algo, comm *c,
                            const char *env_name, uint64_t seed, int episodes, int64_t max_steps,
                            double *returns, int64_t *lengths,
                            double *average, int *capped, calf_error *err) {
    const calf_env_class *cls = calf_env_lookup(env_name, err);
    if (!cls) return CALF_EINVAL;
    int od = cls->spec.obs_dim, ad = cls->spec.action_dim, nA = cls->spec.num_actions;
    int ai = calf_env_action_ints(&cls->spec);
    bool masked = cls->spec.action_mask != 0;
    calf_env *envs = mem_calloc((size_t)episodes, sizeof *envs, err);
    float *obs = mem_calloc((size_t)episodes * od, sizeof(float), err);         /* (episodes, obs_dim) */
    int *act = mem_calloc((size_t)episodes * ai, sizeof(int), err);             /* (episodes, ai) */
    float *u = mem_calloc((size_t)episodes * (ad ? ad : 1), sizeof(float), err); /* (episodes, action_dim) */
    uint8_t *done = mem_calloc((size_t)episodes, 1, err);
    int64_t *steps = mem_calloc((size_t)episodes, sizeof(int64_t), err);        /* (episodes) */
    uint8_t *mask = masked ? mem_calloc((size_t)episodes, (size_t)nA, err) : NULL; /* (episodes, nA) */
    int rc = envs && obs && act && u && done && steps && (mask || !masked) ? CALF_OK : CALF_ENOMEM;
    *capped = 0;
    int made = 0; /* envs initialised, to free */
    for (int k = 0; k < episodes && rc == CALF_OK; k++, made++) {
        rc = calf_env_init(&envs[k], env_name, seed, ((uint64_t)1 << 40) + (uint64_t)k, err);
        if (rc == CALF_OK) calf_env_reset(&envs[k], obs + (size_t)k * od);
        if (rc == CALF_OK && mask) calf_env_action_mask(&envs[k], mask + (size_t)k * nA);
        returns[k] = 0;
    }
    /* a policy with memory starts every row's episode here */
    if (rc == CALF_OK && ops->greedy_reset) rc = ops->greedy_reset(algo, episodes, err);
    if (rc == CALF_OK) {
        int left = episodes;
        while (left > 0) {
            if (c) comm_progress(c);
            ops->greedy(algo, obs, mask, episodes, act, u);
            for (int k = 0; k < episodes; k++) {
                if (done[k]) continue;
                int term = 0, trunc = 0;
                float rew = 0;
                calf_env_step_actions(&envs[k], act + (size_t)k * ai, ad ? u + (size_t)k * ad : NULL,
                                      obs + (size_t)k * od, &rew, &term, &trunc);
                if (mask && !term && !trunc) calf_env_action_mask(&envs[k], mask + (size_t)k * nA);
                returns[k] += rew;
                bool at_cap = !term && !trunc && ++steps[k] >= max_steps;
                if (term || trunc || at_cap) {
                    if (lengths) lengths[k] = steps[k] + !at_cap; /* the ending step counts */
                    done[k] = 1;
                    left--;
                    *capped += at_cap;
                }
            }
        }
        double total = 0;
        for (int k = 0; k < episodes; k++) total += returns[k];
        *average = total / episodes;
    }
    for (int k = 0; k < made; k++) calf_env_free(&envs[k]);
    free(envs);
    free(obs);
    free(act);
    free(u);
    free(done);
    free(steps);
    free(mask);
    return rc;
}

void trainer_eval_cap_warning(char *buf, size_t cap, const char *env_name, int64_t max_steps,
                              int capped, int episodes) {
    snprintf(buf, cap,
             "warning: %s: %d of %d greedy episodes reached "
             "TrainerConfig.eval_max_episode_steps = %lld before the env ended them; they end "
             "there, their return so far counted (said once)",
             env_name, capped, episodes, (long long)max_steps);
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
    int64_t k = t->p.num_checkpoints, total = t->total_iterations;
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
    double now = calf_monotonic_s();
    bool tty = isatty(STDERR_FILENO);
    double every = tty ? 0.2 : 5.0;
    char eta[32], ret[32], ev[48] = "";
    /* The ETA follows the last 30 to 60 s, not the run's average: an off-policy run's
     * first iterations only collect, many times faster than the ones that train, so
     * the window also starts again where the collection ends. */
    int64_t collect = t->p.initial_collect;
    bool collect_ended = collect > 0 && t->env_steps >= collect &&
                         t->env_steps - (int64_t)t->E * t->T < collect;
    if (collect_ended) { /* "?" for this one line: no trained iteration timed yet */
        for (int i = 0; i < 2; i++) t->eta_time[i] = now, t->eta_iteration[i] = t->iteration;
    } else if (now - t->eta_time[1] >= 30.0) {
        t->eta_time[0] = t->eta_time[1], t->eta_iteration[0] = t->eta_iteration[1];
        t->eta_time[1] = now, t->eta_iteration[1] = t->iteration;
    }
    double per_iter = (now - t->eta_time[0]) / (double)(t->iteration - t->eta_iteration[0]);
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
    /* The rank log takes the first iterations of each start (the lines that tell a run
     * is training), then one line every 5 s like a pipe, and the last: a line per
     * iteration made a million-step run's log 90 MB. */
    if (force || t->iteration - t->start_iteration <= 10 || now - t->last_logged >= 5.0) {
        t->last_logged = now;
        rank_log_line(&t->log, line);
    }
    if (t->quiet || !comm_is_main(t->c)) return;
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

/* ALF's StepMetric.gen_summaries: a metric is written against the iteration as
 * Metrics/X and against the environment steps as Metrics_vs_EnvironmentSteps/X, so
 * TensorBoard can plot it over either; EnvironmentSteps is not plotted against itself. */
#define METRIC_TAGS(name) "Metrics/" name, "Metrics_vs_EnvironmentSteps/" name

static void write_metric(const trainer *t, const char *tag, const char *vs_tag, double v) {
    calf_summary_scalar(tag, t->iteration, v);
    calf_summary_scalar(vs_tag, t->env_steps, v);
}

static void write_summaries(trainer *t, const double *g, double steps_per_sec) {
    int64_t step = t->iteration;
    if (g[EP_EPISODES] > 0) {
        write_metric(t, METRIC_TAGS("AverageReturn"), g[EP_RETURN] / g[EP_EPISODES]);
        write_metric(t, METRIC_TAGS("AverageEpisodeLength"), g[EP_LENGTH] / g[EP_EPISODES]);
    }
    calf_summary_scalar("Metrics/EnvironmentSteps", step, (double)t->env_steps);
    write_metric(t, METRIC_TAGS("NumberOfEpisodes"), (double)t->total_episodes);
    calf_summary_scalar("Perf/env_steps_per_sec", step, steps_per_sec);
}

static int evaluate(trainer *t, calf_error *err) {
    int episodes = t->p.num_eval_episodes;
    double *returns = mem_calloc((size_t)episodes, sizeof(double), err);
    int64_t *lengths = returns ? mem_calloc((size_t)episodes, sizeof(int64_t), err) : NULL;
    if (!lengths) {
        free(returns);
        return CALF_ENOMEM;
    }
    double avg = 0;
    int capped = 0;
    int rc = trainer_evaluate_greedy(t->ops, t->algo, t->c, t->env_name, t->seed, episodes,
                                     t->p.eval_max_steps, returns, lengths, &avg, &capped, err);
    double sq = 0, steps = 0; /* the spread and the length, as SB3's evaluate_policy reports */
    for (int k = 0; rc == CALF_OK && k < episodes; k++) {
        sq += (returns[k] - avg) * (returns[k] - avg);
        steps += (double)lengths[k];
    }
    free(returns);
    free(lengths);
    if (rc) return rc;
    t->eval_return_std = sqrt(sq / episodes);
    t->eval_length = steps / episodes;
    if (capped && !t->warned_eval_cap) {
        char line[512];
        trainer_eval_cap_warning(line, sizeof line, t->env_name, t->p.eval_max_steps, capped,
                                 episodes);
        rank_log_printf(&t->log, true, "%s", line);
        t->warned_eval_cap = true;
    }
    t->eval_return = avg;
    t->evaluated = true;
    rank_log_printf(&t->log, false, "eval iter %lld: average return %.3f over %d episodes",
                    (long long)t->iteration, avg, episodes);
    if (t->eval_writer) {
        double wall = (double)time(NULL);
        calf_summary_writer_add_scalar(t->eval_writer, "Metrics/AverageReturn", t->iteration,
                                       wall, avg);
        calf_summary_writer_add_scalar(t->eval_writer, "Metrics_vs_EnvironmentSteps/AverageReturn",
                                       t->env_steps, wall, avg);
        calf_summary_writer_add_scalar(t->eval_writer, "Metrics/AverageEpisodeLength",
                                       t->iteration, wall, t->eval_length);
        calf_summary_writer_add_scalar(t->eval_writer,
                                       "Metrics_vs_EnvironmentSteps/AverageEpisodeLength",
                                       t->env_steps, wall, t->eval_length);
        calf_summary_writer_add_scalar(t->eval_writer, "Metrics/EnvironmentSteps", t->iteration,
                                       wall, (double)t->env_steps);
        calf_error werr; /* a failed write is the writer's to keep: see io_failed */
        calf_summary_writer_flush(t->eval_writer, &werr);
    }
    return CALF_OK;
}

/* Push the summaries written so far to the file (main process); a failure is kept by
 * the writer and seen by io_failed. */
static void flush_summaries(trainer *t) {
    calf_error werr;
    if (t->train_writer) calf_summary_writer_flush(t->train_writer, &werr);
}

/* Has this process failed to write its log or (main process) its summaries? The first
 * such failure is kept in t->io_err. */
static bool io_failed(trainer *t) {
    if (t->io_err.status == CALF_OK && t->log.err.status != CALF_OK) t->io_err = t->log.err;
    if (t->io_err.status == CALF_OK && t->train_writer)
        calf_summary_writer_status(t->train_writer, &t->io_err);
    if (t->io_err.status == CALF_OK && t->eval_writer)
        calf_summary_writer_status(t->eval_writer, &t->io_err);
    return t->io_err.status != CALF_OK;
}

/* The job stops after this iteration because rank `who` failed to write: that rank fails
 * with its message (and whether the checkpoint was written), the others stop quietly so
 * that the launcher reports the cause. ckpt_rc/ckpt_err: the checkpoint's outcome. */
static int stop_for_io(trainer *t, int who, int ckpt_rc, const calf_error *ckpt_err) {
    if (who != t->c->index) {
        t->stopped_by = who;
        rank_log_printf(&t->log, false,
                        "stopped after iteration %lld: rank %d could not write a file",
                        (long long)t->iteration, who);
        if (ckpt_rc != CALF_OK) *t->err = *ckpt_err;
        return ckpt_rc;
    }
    if (ckpt_rc == CALF_OK)
        return calf_error_set(t->err, CALF_EIO, "%s; stopped after iteration %lld, checkpoint written",
                              t->io_err.msg, (long long)t->iteration);
    return calf_error_set(t->err, CALF_EIO, "%s; stopped after iteration %lld, and no checkpoint: %s",
                          t->io_err.msg, (long long)t->iteration, ckpt_err->msg);
}

/* Metrics: the algorithm's scalars as its summarize writes them (summary_listen). */
static void listen_metric(void *arg, const char *tag, double value) {
    trainer *t = arg;
    int k = t->num_metrics;
    if (k >= TRAINER_MAX_METRICS) return;
    snprintf(t->metric_names[k], sizeof t->metric_names[k], "%s", tag);
    t->metric_name_ptrs[k] = t->metric_names[k];
    t->metric_values[k] = value;
    t->num_metrics = k + 1;
}

static int train_iteration(trainer *t, bool *stop) {
    calf_error *err = t->err;
    double t0 = calf_monotonic_s();
    rollout(t);
    if (vec_env_fault(&t->ve, err) != CALF_OK) return err->status;
    int rc = t->ops->train(t->algo, t->iteration, err);
    if (rc) return rc;
    t->iteration++;
    t->env_steps += (int64_t)t->E * t->T;
    double g[NUM_EP_STATS];
    rc = comm_tree_sum_f64(t->c, t->E, t->begin, t->count, t->ep_stats, NUM_EP_STATS, g, err);
    if (rc) return rc;
    t->total_episodes += (int64_t)g[EP_EPISODES];
    if (g[EP_EPISODES] > 0) t->last_avg_return = g[EP_RETURN] / g[EP_EPISODES];
    double sps = (double)t->E * t->T / (calf_monotonic_s() - t0);
    t->num_metrics = 0;
    t->evaluated = false;
    /* io_failed after each writer's turn: the message is the first failure in time */
    if (t->iteration % t->p.summary_interval == 0) {
        write_summaries(t, g, sps);
        summary_listen(listen_metric, t);
        rc = t->ops->summarize(t->algo, t->iteration, t->p.histograms, err);
        summary_listen(NULL, NULL);
        if (rc) return rc;
        io_failed(t);
    }
    if (comm_is_main(t->c) && t->p.evaluate &&
        (t->iteration % t->p.eval_interval == 0 || finished(t))) {
        if ((rc = evaluate(t, err))) return rc;
        io_failed(t);
    }
    /* everything up to the checkpoint's iteration is on disk before it is */
    bool planned = checkpoint_due(t) || finished(t);
    if (planned) flush_summaries(t);
    /* One agreement per iteration: Ctrl-C on any rank, or a failed write on any rank
     * (its log, or rank 0's summaries), stops every rank after this iteration, with a
     * checkpoint. */
    int who = -1, any_stop = 0;
    rc = comm_agree(t->c, trainer_signals_stop_requested(), io_failed(t), &any_stop, &who, err);
    if (rc) return rc;
    *stop = any_stop != 0 || who >= 0;
    /* processes that each hold a copy of the parameters prove they agree; a digest of 0
     * says they share one copy */
    int64_t check = t->p.check_interval;
    uint64_t d = comm_size(t->c) > 1 && check > 0 && t->iteration % check == 0
                     ? t->ops->digest(t->algo) : 0;
    if (d != 0 && (rc = comm_check_equal(t->c, &d, sizeof d, err))) return rc;
    if (planned || *stop) {
        if (!planned) flush_summaries(t);
        calf_error cerr;
        calf_error_clear(&cerr);
        rc = write_checkpoint(t, who >= 0 ? &cerr : err);
        if (who >= 0) return stop_for_io(t, who, rc, &cerr);
        if (rc) return rc;
    }
    progress(t, sps, finished(t) || *stop);
    calf_trainer_metrics *m = &t->metrics;
    m->iteration = t->iteration;
    m->env_steps = t->env_steps;
    m->episodes = (int64_t)g[EP_EPISODES];
    m->total_episodes = t->total_episodes;
    m->average_return = g[EP_EPISODES] > 0 ? g[EP_RETURN] / g[EP_EPISODES] : NAN;
    m->average_episode_length = g[EP_EPISODES] > 0 ? g[EP_LENGTH] / g[EP_EPISODES] : NAN;
    m->eval_return = t->evaluated ? t->eval_return : NAN;
    m->eval_return_std = t->evaluated ? t->eval_return_std : NAN;
    m->eval_episode_length = t->evaluated ? t->eval_length : NAN;
    m->eval_episodes = t->evaluated ? t->p.num_eval_episodes : 0;
    m->steps_per_sec = sps;
    m->num_algorithm_metrics = t->num_metrics;
    m->algorithm_metric_names = t->metric_name_ptrs;
    m->algorithm_metric_values = t->metric_values;
    return CALF_OK;
}

/* ---- one process's run ---------------------------------------------------------- */

static int open_eval_writer(trainer *t, const char *root, calf_error *err) {
    char evdir[4096];
    int rc = fs_join(evdir, sizeof evdir, root, "eval", err);
    if (rc) return rc;
    t->eval_writer =
        calf_summary_writer_open(evdir, t->p.summaries_flush_secs, err);
    return t->eval_writer ? CALF_OK : (err->status ? err->status : CALF_EIO);
}

int trainer_open(trainer **out, comm *c, const trainer_args *wa) {
    const calf_train_options *o = wa->o;
    trainer *t = calloc(1, sizeof *t);
    *out = t;
    if (!t) return CALF_ENOMEM; /* trainer_close(NULL) returns it */
    calf_error_clear(&t->own_err);
    t->err = &t->own_err;
    calf_error *err = t->err;
    t->root = o->root_dir;
    t->quiet = o->quiet;
    t->c = c;
    t->report_via_comm = wa->report_via_comm;
    t->log.fd = -1;
    t->log.echo = !o->quiet && comm_is_main(c);
    t->stopped_by = -1;
    if (wa->handle_signals) {
        /* the notice comes from the process the user sees: calf train's own (never its
         * --nproc workers, whose launcher says it), or a quiet-less stepwise trainer */
        if (!trainer_signals_install(&t->old_int, &t->old_term,
                                     comm_is_main(c) && strcmp(comm_backend_name(c), "local") != 0 &&
                                         (wa->guard_exit || !o->quiet))) {
            t->ended = true;
            return calf_error_set(t->err, CALF_EINVAL, "%s", TRAINER_SIGNALS_TAKEN);
        }
        t->handlers = true;
    }
    comm_set_timeout(c, calf_config_float(wa->cfg, CALF_CFG_COLLECTIVE_TIMEOUT));

    int rank = c->index;
    int rc = rank_log_open(&t->log, o->root_dir, rank, err);
    if (rc == CALF_OK) rc = trainer_init(t, wa->cfg, c, err);
    if (rc == CALF_OK) rc = agree_on_sizes(t, err);
    if (rc == CALF_OK) {
        /* The host too: an MPI job's ranks run on several machines, and a log (written on a
         * shared file system) must say which one to look at. */
        char host[256];
        if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "(unknown)");
        host[sizeof host - 1] = '\0';
        rank_log_printf(&t->log, false, "calf %s: backend %s, pid %ld on host %s",
                        calf_version(), comm_backend_name(c), (long)getpid(), host);
        if (c->note) rank_log_printf(&t->log, false, "%s", c->note);
        rank_log_printf(&t->log, comm_size(c) > 1, "rank %d/%d: environments %d..%d (%d of %d)",
                        rank, comm_size(c), t->begin, t->begin + t->count - 1, t->count, t->E);
    }
    if (rc == CALF_OK && wa->rs->found) {
        rc = load_checkpoint(t, wa->rs, err);
        if (rc == CALF_OK)
            rank_log_printf(&t->log, true, "resuming from %s (iteration %lld)", wa->rs->path,
                            (long long)t->iteration);
    }
    if (rc == CALF_OK && t->ops->start) rc = t->ops->start(t->algo, err);
    if (rc == CALF_OK && io_failed(t)) rc = calf_error_set(err, CALF_EIO, "%s", t->io_err.msg);
    if (rc == CALF_OK && comm_is_main(t->c))
        rc = trainer_config_write(t->cfg, t->E, comm_size(c), t->ops, t->algo, o->root_dir, err);
    if (rc == CALF_OK && finished(t)) {
        rank_log_printf(&t->log, true, "nothing to do: the run is complete at iteration %lld",
                        (long long)t->iteration);
        t->ended = true;
        return CALF_OK;
    }
    /* A resume: what earlier launches wrote past the checkpoint goes, on each tag's own
     * step axis, before this launch writes those steps again (session_log.h) */
    if (rc == CALF_OK && comm_is_main(t->c) && t->iteration > 0)
        rc = session_trim(o->root_dir, "train", t->iteration, t->env_steps, err);
    if (rc == CALF_OK && comm_is_main(t->c) && t->iteration > 0)
        rc = session_trim(o->root_dir, "eval", t->iteration, t->env_steps, err);
    if (rc == CALF_OK && comm_is_main(t->c) && t->p.evaluate)
        rc = open_eval_writer(t, o->root_dir, err);
    char trdir[4096];
    if (rc == CALF_OK) rc = fs_join(trdir, sizeof trdir, o->root_dir, "train", err);
    /* Only the main process writes summaries; the others open no writer, which would
     * already create the directory and a file (the seed's design choice 2). */
    if (rc == CALF_OK && comm_is_main(t->c)) {
        calf_error oerr;
        calf_error_clear(&oerr);
        t->train_writer = calf_summary_writer_open(trdir, t->p.summaries_flush_secs, &oerr);
        if (!t->train_writer) rc = calf_error_set(err, oerr.status ? oerr.status : CALF_EIO, "%s",
                                                  oerr.msg);
    }
    if (rc) {
        t->ended = true;
        return rc;
    }
    t->start_time = calf_monotonic_s();
    t->start_iteration = t->iteration;
    for (int i = 0; i < 2; i++) t->eta_time[i] = t->start_time, t->eta_iteration[i] = t->iteration;
    t->last_progress = 0;
    if (wa->guard_exit) t->guards_exit = trainer_signals_guard_exit(&t->iteration);
    /* a run's start is a SessionLog START at step 1, as TensorBoard's writers mark it (it
     * drops nothing: nothing comes before it); a resume writes none (see above) */
    if (t->train_writer && t->iteration == 0)
        calf_summary_writer_add_session_start(t->train_writer, 1, calf_clock_s(CLOCK_REALTIME));
    if (t->eval_writer && t->iteration == 0)
        calf_summary_writer_add_session_start(t->eval_writer, 1, (double)time(NULL));
    return CALF_OK;
}

bool trainer_done(const trainer *t) { return t->ended; }

int64_t trainer_iteration(const trainer *t) { return t->iteration; }

const calf_trainer_metrics *trainer_metrics(const trainer *t) {
    return t->metrics.iteration > 0 ? &t->metrics : NULL;
}

/* The hold_rank test hook: rank R spends its second iteration's first S seconds working
 * (busy, comm_progress every 10 ms: a long evaluation) or stuck (silent: an env step that
 * never returns), so that tests can show which one the other ranks' waits take for stuck. */
static void testing_hold(trainer *t, int64_t iteration) {
    const testing_hooks *h = testing_hooks_get();
    int rank = comm_rank(t->c) < 0 ? 0 : comm_rank(t->c);
    if (h->hold_secs <= 0 || h->hold_rank != rank || iteration != 2) return;
    rank_log_printf(&t->log, false, "test hook: %s for %g s", h->hold_busy ? "busy" : "stuck",
                    h->hold_secs);
    for (double until = calf_monotonic_s() + h->hold_secs; calf_monotonic_s() < until;) {
        if (h->hold_busy) comm_progress(t->c);
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 10000000};
        nanosleep(&ts, NULL);
    }
}

int trainer_step(trainer *t) {
    CALF_ASSERT(!t->ended);
    bool stop = false;
    int64_t iteration = t->iteration + 1;
    testing_note_iteration(iteration);
    testing_hold(t, iteration);
    calf_summary_writer *prev = calf_summary_set_current(t->train_writer);
    int rc = train_iteration(t, &stop);
    calf_summary_set_current(prev);
    if (rc == CALF_EINTR) /* the launcher gave up waiting for the iteration to end */
        rank_log_printf(&t->log, true, "interrupted: stopped during iteration %lld, which has "
                        "no checkpoint; a new run resumes from the last one", (long long)iteration);
    if (rc == CALF_OK && t->stopped_by < 0 && stop && !finished(t)) {
        rank_log_printf(&t->log, true,
                        "interrupted: stopped after iteration %lld, checkpoint written",
                        (long long)t->iteration);
        rc = CALF_EINTR;
    }
    /* a failure ends the run, and so does another rank's (t->stopped_by, reported there) */
    if (rc != CALF_OK || t->stopped_by >= 0 || finished(t)) t->ended = true;
    return rc;
}

int trainer_checkpoint_now(trainer *t) {
    if (t->train_writer) {
        calf_error werr;
        calf_summary_writer_flush(t->train_writer, &werr); /* a failure is the writer's */
    }
    if (t->eval_writer) {
        calf_error werr;
        calf_summary_writer_flush(t->eval_writer, &werr);
    }
    int rc = write_checkpoint(t, t->err);
    if (rc == CALF_OK && io_failed(t)) rc = calf_error_set(t->err, CALF_EIO, "%s", t->io_err.msg);
    return rc;
}

const calf_error *trainer_error(const trainer *t) { return t->err; }

int trainer_close(trainer *t, int rc, calf_error *err_out) {
    if (!t) { /* trainer_open could not allocate it */
        if (rc) calf_error_set(err_out, rc, "out of memory allocating the trainer's state");
        return rc;
    }
    if (t->guards_exit) trainer_signals_unguard_exit();
    calf_error *err = t->err;
    /* what the summaries held up to the end, the train writer's failure if it is first */
    if (t->train_writer) {
        calf_error cerr;
        calf_error_clear(&cerr);
        int crc = calf_summary_writer_close(t->train_writer, rc == CALF_OK ? &cerr : NULL);
        t->train_writer = NULL;
        if (crc && rc == CALF_OK) {
            rc = crc;
            *err = cerr;
        }
    }
    if (t->eval_writer) {
        calf_error cerr;
        int crc = calf_summary_writer_close(t->eval_writer, &cerr);
        t->eval_writer = NULL;
        if (crc && rc == CALF_OK) {
            rc = crc;
            *err = cerr;
        }
    }
    if (rc == CALF_OK && t->stopped_by < 0 && t->ops) {
        struct rusage ru;
        double peak_mib = getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss / 1024.0 : -1;
        rank_log_printf(&t->log, false, "done at iteration %lld (peak RSS %.1f MiB)",
                        (long long)t->iteration, peak_mib);
        if (t->ops->report && t->start_time > 0) {
            char text[2048];
            t->ops->report(t->algo, calf_monotonic_s() - t->start_time, text, sizeof text);
            for (char *line = text, *nl; *line; line = nl + 1) {
                if (!(nl = strchr(line, '\n'))) break;
                *nl = '\0';
                rank_log_printf(&t->log, false, "%s", line);
            }
        }
    }
    /* the last lines of a finished run are writes too */
    if (rc == CALF_OK || rc == CALF_EINTR) rank_log_close(&t->log);
    if ((rc == CALF_OK || rc == CALF_EINTR) && t->log.err.status != CALF_OK) {
        *err = t->log.err;
        rc = err->status;
    }
    if (rc != CALF_OK && rc != CALF_EINTR) {
        if (!err->msg[0]) calf_error_set(err, rc, "training failed with status %d", rc);
        rank_log_printf(&t->log, false, "error: %s", err->msg);
        if (t->report_via_comm) comm_report_failure(t->c, err->msg);
    }
    if (err_out) *err_out = *err;
    rank_log_close(&t->log);
    if (t->handlers) trainer_signals_restore(&t->old_int, &t->old_term);
    trainer_free(t);
    free(t);
    return rc;
}

int trainer_worker(comm *c, void *arg) {
    trainer_args *wa = arg;
    trainer *t;
    int rc = trainer_open(&t, c, wa);
    while (rc == CALF_OK && !trainer_done(t)) rc = trainer_step(t);
    return calf_exit_code(trainer_close(t, rc, &wa->err));
}
