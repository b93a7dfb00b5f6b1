/* trainer.c: what every algorithm shares (ALF's RLTrainer): the iteration loop, stepping
 * this process's envs with auto-reset and their episode statistics, evaluation, the
 * summary cadence, checkpoints, the operative config, the rank log and stopping on
 * Ctrl-C. The algorithm (algorithm.h) acts, learns and owns its state; the launch (one
 * process, --nproc workers, MPI ranks) is job.c's. Every sum is over the global env
 * index, so a checkpoint's bytes never depend on how many processes made it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
#include "calf/version.h"
#include "training/algorithm.h"
#include "base/bytes.h"
#include "records/checkpoint.h"
#include "base/clock.h"
#include "parallel/comm.h"
#include "parallel/tree_sum.h"
#include "records/events_reader.h"
#include "base/fsutil.h"
#include "training/trainer.h"
#include "envs/vec_env.h"

/* Set by SIGINT/SIGTERM; read at the end of each iteration, where the ranks agree on
 * stopping (comm_agree) so that all of them stop after the same iteration. The one piece
 * of process-wide state besides the per-process context: a signal handler can reach
 * nothing else. */
static volatile sig_atomic_t stop_requested = 0;

static void on_stop_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

/* Per-env episode statistics of an iteration, summed over envs in canonical order. */
enum { EP_EPISODES, EP_RETURN, EP_LENGTH, NUM_EP_STATS };

/* The trainer's own settings, resolved once from the config. */
typedef struct trainer_params {
    int64_t num_checkpoints;     /* TrainerConfig.num_checkpoints */
    bool evaluate;               /* TrainerConfig.evaluate */
    int64_t eval_interval;
    int num_eval_episodes;
    int64_t summary_interval;
    double summaries_flush_secs;
    bool histograms;             /* TrainerConfig.summarize_grads_and_vars */
    int64_t check_interval;      /* TrainerConfig.ddp_paras_check_interval */
} trainer_params;

static trainer_params trainer_params_of(const calf_config *cfg) {
    return (trainer_params){
        .num_checkpoints = calf_config_int(cfg, CALF_CFG_NUM_CHECKPOINTS),
        .evaluate = calf_config_bool(cfg, CALF_CFG_EVALUATE),
        .eval_interval = calf_config_int(cfg, CALF_CFG_EVAL_INTERVAL),
        .num_eval_episodes = (int)calf_config_int(cfg, CALF_CFG_NUM_EVAL_EPISODES),
        .summary_interval = calf_config_int(cfg, CALF_CFG_SUMMARY_INTERVAL),
        .summaries_flush_secs = calf_config_float(cfg, CALF_CFG_SUMMARIES_FLUSH_SECS),
        .histograms = calf_config_bool(cfg, CALF_CFG_SUMMARIZE_GRADS_AND_VARS),
        .check_interval = calf_config_int(cfg, CALF_CFG_DDP_CHECK_INTERVAL),
    };
}

/* The rank log: whole lines through write(2). The first failed write is kept (and a line
 * that went out in part is cut off again); it stops the job at the end of the iteration. */
typedef struct rank_log {
    int fd;             /* -1 when not open */
    char *path;         /* malloc'd */
    off_t size;         /* bytes of whole lines in the file */
    calf_error err;     /* first failure; status CALF_OK while none */
} rank_log;

typedef struct trainer {
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
    int *act;                /* (count) */
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
    double last_avg_return;  /* last iteration with finished episodes */
    double start_time, last_progress;
    int64_t start_iteration;
    calf_error io_err;       /* this process's first failed write to its log or summaries */
    int stopped_by;          /* -1, or the rank whose failed write stopped the job */
    calf_error *err;
} trainer;

/* ---- logging ---------------------------------------------------------------- */

static int rank_log_open(rank_log *l, const char *root, int rank, calf_error *err) {
    size_t cap = strlen(root) + 64;
    l->path = calf_xmalloc(cap);
    snprintf(l->path, cap, "%s/log", root);
    int rc = fs_mkdir_p(l->path, err);
    if (rc) return rc;
    snprintf(l->path, cap, "%s/log/rank-%d.log", root, rank);
    l->fd = open(l->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    struct stat st;
    if (l->fd < 0 || fstat(l->fd, &st) != 0)
        return calf_error_set(err, CALF_EIO, "cannot open %s: %s", l->path, strerror(errno));
    l->size = st.st_size;
    return CALF_OK;
}

static void rank_log_line(rank_log *l, const char *line) {
    if (l->fd < 0 || l->err.status != CALF_OK) return;
    size_t n = strlen(line);
    char *buf = calf_xmalloc(n + 1);
    memcpy(buf, line, n);
    buf[n] = '\n';
    if (fs_write_all(l->fd, buf, n + 1, l->path, &l->err) == CALF_OK) {
        l->size += (off_t)(n + 1);
    } else {
        int cut = ftruncate(l->fd, l->size); /* best effort: the write error is reported */
        (void)cut;
    }
    free(buf);
}

/* Close; a failure to close is kept like a failed write. */
static void rank_log_close(rank_log *l) {
    if (l->fd >= 0 && close(l->fd) != 0 && l->err.status == CALF_OK)
        calf_error_set(&l->err, CALF_EIO, "close %s: %s", l->path, strerror(errno));
    l->fd = -1;
    free(l->path);
    l->path = NULL;
}

static void logf_(trainer *t, bool to_stderr, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void logf_(trainer *t, bool to_stderr, const char *fmt, ...) {
    char line[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    rank_log_line(&t->log, line);
    if (to_stderr && !t->quiet && calf_context_is_main()) fprintf(stderr, "%s\n", line);
}

/* ---- config ----------------------------------------------------------------- */

void trainer_env_lib_hint(const char *conf, char *buf, size_t size) {
    FILE *f = conf ? fopen(conf, "r") : NULL;
    if (!f) return;
    char line[4200];
    const char *tag = "# " ENV_LIB_COMMENT;
    size_t tag_len = strlen(tag), used = strlen(buf);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, tag, tag_len) != 0) continue;
        line[strcspn(line, "\r\n")] = '\0';
        const char *lib = line + tag_len;
        if (strstr(buf, lib)) continue; /* named already (a resume's --conf and config.gin) */
        int n = snprintf(buf + used, size - used, " --env_lib %s", lib);
        if (n < 0 || (size_t)n >= size - used) break;
        used += (size_t)n;
    }
    fclose(f);
}

/* The message for an env the config names that is not registered: the lookup's, or,
 * when the run's config says a plug-in library registered it, which one to pass. */
static int unknown_env_error(const char *where, const char *env, const char *const *confs, int n,
                             const calf_error *why, calf_error *err) {
    char hint[2048] = "";
    for (int i = 0; i < n; i++) trainer_env_lib_hint(confs[i], hint, sizeof hint);
    if (!hint[0])
        return calf_error_set(err, CALF_EINVAL, "%s%s%s", where, where[0] ? ": " : "", why->msg);
    return calf_error_set(err, CALF_EINVAL,
                          "%s%senvironment '%s' is not registered; the run used a plug-in "
                          "library for it: pass it again with%s",
                          where, where[0] ? ": " : "", env, hint);
}

int calf_train_load_config(const calf_train_options *o, calf_config *cfg, calf_error *err) {
    calf_config_init(cfg);
    int rc;
    if (o->conf_path) {
        rc = calf_config_parse_file(cfg, o->conf_path, err);
    } else {
        char path[4096];
        if ((rc = fs_join(path, sizeof path, o->root_dir, "config.gin", err))) return rc;
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
    calf_error why;
    calf_error_clear(&why);
    const calf_env_class *cls = calf_env_lookup(env, &why);
    if (!cls) {
        char root_conf[4096] = "";
        if (o->root_dir) fs_join(root_conf, sizeof root_conf, o->root_dir, "config.gin", NULL);
        const char *confs[] = {o->conf_path, root_conf[0] ? root_conf : NULL};
        return unknown_env_error(cfg->origin[CALF_CFG_ENV_NAME], env, confs, 2, &why, err);
    }
    if (cls->spec.action_dim > 0 && cls->spec.num_actions > 0)
        return calf_error_set(err, CALF_EINVAL, "environment '%s' has both action kinds", env);
    const algorithm_ops *ops = trainer_algorithm(cfg);
    return ops->check ? ops->check(cfg, &cls->spec, err) : CALF_OK;
}


bool trainer_run_complete(const calf_config *cfg, int64_t iteration) {
    int64_t iters = calf_config_int(cfg, CALF_CFG_NUM_ITERATIONS);
    int64_t steps = calf_config_int(cfg, CALF_CFG_NUM_ENV_STEPS);
    int64_t per = calf_config_int(cfg, CALF_CFG_NUM_ENVS) * calf_config_int(cfg, CALF_CFG_UNROLL_LENGTH);
    if (iters > 0 && iteration >= iters) return true;
    /* env steps after `iteration` iterations, as the loop counts them (finished()) */
    return steps > 0 && per > 0 && iteration >= (steps + per - 1) / per;
}

const algorithm_ops *trainer_algorithm(const calf_config *cfg) {
    const algorithm_ops *ops = algorithm_find(calf_config_string(cfg, CALF_CFG_ALGORITHM_CTOR));
    CALF_ASSERT(ops != NULL); /* the config only takes the names algorithm_find knows */
    return ops;
}

/* The smallest of `*memory` and `bytes`; `what` names the bound when it is smaller. */
static void lower_bound(uint64_t *memory, const char **limit, uint64_t bytes, const char *what) {
    if (bytes < *memory) {
        *memory = bytes;
        *limit = what;
    }
}

/* The smallest `file` (a number of bytes, or "max") of `group` under `base` and of every
 * group above it; UINT64_MAX when none can be read. */
static uint64_t group_limit(const char *base, char *group, const char *file) {
    uint64_t least = UINT64_MAX;
    char path[4200], v[64];
    while (group[0] == '/') {
        snprintf(path, sizeof path, "%s%s/%s", base, group[1] ? group : "", file);
        FILE *m = fopen(path, "r");
        if (m && fgets(v, sizeof v, m)) {
            char *end;
            errno = 0;
            unsigned long long b = strtoull(v, &end, 10);
            if (errno == 0 && end != v && (*end == '\n' || *end == '\0') && b < least) least = b;
        }
        if (m) fclose(m);
        char *slash = strrchr(group, '/');
        if (slash == group) {
            if (!group[1]) break; /* the root, done */
            group[1] = '\0';
        } else {
            *slash = '\0';
        }
    }
    return least;
}

/* The memory limit of this process's cgroup (v2 memory.max, v1 memory.limit_in_bytes),
 * the smallest on the way to the root; UINT64_MAX when there is none or it cannot be
 * read. */
static uint64_t cgroup_memory_max(void) {
    uint64_t least = UINT64_MAX;
    char line[4096];
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return least;
    while (fgets(line, sizeof line, f)) { /* "ID:CONTROLLERS:PATH" */
        line[strcspn(line, "\n")] = '\0';
        char *c = strchr(line, ':'), *g = c ? strchr(c + 1, ':') : NULL;
        if (!g) continue;
        *g++ = '\0';
        uint64_t b = UINT64_MAX;
        if (strcmp(line, "0") == 0 && c[1] == '\0')
            b = group_limit("/sys/fs/cgroup", g, "memory.max");
        else if (strcmp(c + 1, "memory") == 0 || strstr(c + 1, ",memory") ||
                 strncmp(c + 1, "memory,", 7) == 0)
            b = group_limit("/sys/fs/cgroup/memory", g, "memory.limit_in_bytes");
        if (b < least) least = b;
    }
    fclose(f);
    return least;
}

int trainer_check_memory(const calf_config *cfg, int envs, calf_error *err) {
    const algorithm_ops *ops = trainer_algorithm(cfg);
    if (!ops->check_memory) return CALF_OK;
    const calf_env_class *cls = calf_env_lookup(calf_config_string(cfg, CALF_CFG_ENV_NAME), err);
    if (!cls) return CALF_EINVAL;
    uint64_t memory = UINT64_MAX;
    const char *limit = NULL;
    const char *test = getenv("CALF_TEST_MEMORY_BYTES"); /* tests: the machine's memory */
    if (test && *test) {
        char *end;
        errno = 0;
        unsigned long long t = strtoull(test, &end, 10);
        if (errno != 0 || *end != '\0')
            return calf_error_set(err, CALF_EINVAL, "CALF_TEST_MEMORY_BYTES='%s' is not a number",
                                  test);
        lower_bound(&memory, &limit, t, "this machine's memory");
    } else {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages > 0 && page > 0)
            lower_bound(&memory, &limit, (uint64_t)pages * (uint64_t)page, "this machine's memory");
        lower_bound(&memory, &limit, cgroup_memory_max(), "this process's cgroup (memory.max)");
        struct rlimit rl;
        if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
            lower_bound(&memory, &limit, (uint64_t)rl.rlim_cur,
                        "the address-space limit (ulimit -v)");
        if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
            lower_bound(&memory, &limit, (uint64_t)rl.rlim_cur, "the data limit (ulimit -d)");
    }
    if (memory == UINT64_MAX) return CALF_OK; /* nothing known: the allocation will tell */
    return ops->check_memory(cfg, &cls->spec, envs, memory, limit, err);
}

/* ---- setup ------------------------------------------------------------------ */

static void trainer_free(trainer *t) {
    if (t->ops) t->ops->destroy(t->algo);
    vec_env_free(&t->ve);
    void *bufs[] = {t->obs, t->act, t->u, t->rew, t->term, t->trunc, t->final_obs,
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
    t->obs = calf_xcalloc(n * od, sizeof(float));
    t->act = calf_xcalloc(n, sizeof(int));
    t->u = calf_xcalloc(n * ad, sizeof(float));
    t->rew = calf_xcalloc(n, sizeof(float));
    t->term = calf_xcalloc(n, 1);
    t->trunc = calf_xcalloc(n, 1);
    t->final_obs = calf_xcalloc(n * od, sizeof(float));
    t->ep_return = calf_xcalloc(n, sizeof(double));
    t->ep_length = calf_xcalloc(n, sizeof(int));
    t->ep_stats = calf_xcalloc(n * NUM_EP_STATS, sizeof(double));
    t->ops = trainer_algorithm(cfg);
    algo_setup s = {.cfg = cfg, .spec = t->spec, .c = c, .E = t->E, .begin = t->begin,
                    .count = t->count, .T = t->T, .seed = t->seed,
                    .total_iterations = t->total_iterations};
    return t->ops->create(&s, &t->algo, err);
}

/* ---- rollout ---------------------------------------------------------------- */

/* T steps of this process's envs: the algorithm acts and sees what happened; episodes
 * that end are counted per env. */
static void rollout(trainer *t) {
    int n = t->count, od = t->spec->obs_dim, ad = t->spec->action_dim;
    memset(t->ep_stats, 0, (size_t)n * NUM_EP_STATS * sizeof(double));
    for (int s = 0; s < t->T; s++) {
        memcpy(t->obs, t->ve.obs, (size_t)n * od * sizeof(float));
        t->ops->act(t->algo, t->iteration, s, t->obs, t->act, t->u);
        vec_env_step(&t->ve, t->act, ad ? t->u : NULL, t->rew, t->term, t->trunc, t->final_obs,
                     t->ep_return, t->ep_length);
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
                        .next_obs = t->ve.obs};
        t->ops->observe(t->algo, &st);
    }
}

/* ---- evaluation (main process only) ------------------------------------------ */

/* Greedy episodes on fresh envs. Eval envs use their own index range (2^40 + k) so they
 * never replay a training env's stream. */
int trainer_evaluate_greedy(const algorithm_ops *ops, algorithm *algo, const char *env_name,
                            uint64_t seed, int episodes, double *returns, double *average,
                            calf_error *err) {
    const calf_env_class *cls = calf_env_lookup(env_name, err);
    if (!cls) return CALF_EINVAL;
    int od = cls->spec.obs_dim, ad = cls->spec.action_dim;
    calf_env *envs = calf_xcalloc((size_t)episodes, sizeof *envs);
    float *obs = calf_xcalloc((size_t)episodes * od, sizeof(float));         /* (episodes, obs_dim) */
    int *act = calf_xcalloc((size_t)episodes, sizeof(int));                  /* (episodes) */
    float *u = calf_xcalloc((size_t)episodes * (ad ? ad : 1), sizeof(float)); /* (episodes, action_dim) */
    uint8_t *done = calf_xcalloc((size_t)episodes, 1);
    int rc = CALF_OK;
    for (int k = 0; k < episodes && rc == CALF_OK; k++) {
        rc = calf_env_init(&envs[k], env_name, seed, ((uint64_t)1 << 40) + (uint64_t)k, err);
        if (rc == CALF_OK) calf_env_reset(&envs[k], obs + (size_t)k * od);
        returns[k] = 0;
    }
    if (rc == CALF_OK) {
        int left = episodes;
        while (left > 0) {
            ops->greedy(algo, obs, episodes, act, u);
            for (int k = 0; k < episodes; k++) {
                if (done[k]) continue;
                int term = 0, trunc = 0;
                float rew = 0;
                calf_env_step(&envs[k], act[k], ad ? u + (size_t)k * ad : NULL,
                              obs + (size_t)k * od, &rew, &term, &trunc);
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
    free(envs);
    free(obs);
    free(act);
    free(u);
    free(done);
    return rc;
}

/* ---- checkpoints ------------------------------------------------------------ */

/* Payload: "META" (layout, iteration, env steps, episodes, envs, and the head's size:
 * the bytes up to the first env record), the algorithm's own sections, "ENVS" with the
 * record size, then one record per env in global order (the env's, then the
 * algorithm's). The records, which hold SAC's replay buffer, travel between the
 * processes and the file in chunks (chunk_envs), so no process ever holds all of them. */
#define CKPT_LAYOUT_VERSION 2u
#define META_BYTES 48   /* "META", u32 layout, i64 x 3, u64 envs, u64 head size */
#define MAX_HEAD_BYTES ((uint64_t)1 << 32) /* the head is parameters, not replay */

static size_t env_record_size(const trainer *t) {
    return vec_env_record_size(&t->ve) + t->ops->env_record_size(t->algo);
}

/* Envs per chunk of records: about 64 MiB, at least one env. CALF_TEST_CKPT_CHUNK_ENVS
 * sets it (tests make chunks small to exercise their edges); the bytes never depend on
 * it. */
static int chunk_envs(size_t rec) {
    const char *v = getenv("CALF_TEST_CKPT_CHUNK_ENVS");
    char *end = NULL;
    long k = v && *v ? strtol(v, &end, 10) : 0;
    if (end && *end == '\0' && k >= 1 && k <= INT32_MAX) return (int)k;
    size_t per = ((size_t)64 << 20) / (rec ? rec : 1);
    return per < 1 ? 1 : per > INT32_MAX ? INT32_MAX : (int)per;
}

/* This process's envs within [c0, c1): [*lo, *hi) as local indices. */
static void overlap(const trainer *t, int c0, int c1, int *lo, int *hi) {
    int a = t->begin > c0 ? t->begin : c0, b = t->begin + t->count < c1 ? t->begin + t->count : c1;
    *lo = a - t->begin;
    *hi = (b > a ? b : a) - t->begin;
}

static int write_checkpoint(trainer *t, calf_error *err) {
    bool main = calf_context_is_main();
    size_t rec = env_record_size(t), vrec = vec_env_record_size(&t->ve);
    int per = chunk_envs(rec);
    ckpt_writer w;
    int wrc = CALF_OK; /* the file's status, rank 0's; the gathers go on regardless */
    bool open = false;
    char dir[4096], path[4200];
    /* the chunk buffers before the temporary file: running out of memory (exit 1) then
     * leaves nothing half-written */
    int span = per < t->E ? per : t->E;
    unsigned char *local = calf_xcalloc((size_t)span, rec); /* this process's part of a chunk */
    unsigned char *all = main ? calf_xcalloc((size_t)span, rec) : NULL;
    if (main) {
        ckpt_buf b;
        ckpt_buf_init(&b);
        ckpt_put_tag(&b, "META");
        ckpt_put_u32(&b, CKPT_LAYOUT_VERSION);
        ckpt_put_i64(&b, t->iteration);
        ckpt_put_i64(&b, t->env_steps);
        ckpt_put_i64(&b, t->total_episodes);
        ckpt_put_u64(&b, (uint64_t)t->E);
        ckpt_put_u64(&b, 0); /* the head's size, filled in below */
        t->ops->save(t->algo, &b);
        ckpt_put_tag(&b, "ENVS");
        ckpt_put_u64(&b, rec);
        bytes_put_le(b.data + META_BYTES - 8, (uint64_t)b.len, 8);
        wrc = fs_join(dir, sizeof dir, t->root, "train/algorithm", err);
        if (wrc == CALF_OK) wrc = ckpt_path(path, sizeof path, dir, t->iteration, err);
        if (wrc == CALF_OK)
            wrc = ckpt_writer_open(&w, path, calf_config_digest(t->cfg), t->iteration,
                                   (uint64_t)b.len + (uint64_t)t->E * rec, err);
        open = wrc == CALF_OK;
        if (open) wrc = ckpt_writer_put(&w, b.data, b.len, err);
        open = wrc == CALF_OK;
        ckpt_buf_free(&b);
    }
    int rc = CALF_OK;
    for (int c0 = 0; c0 < t->E && rc == CALF_OK; c0 += per) {
        int c1 = t->E - c0 > per ? c0 + per : t->E, lo, hi;
        overlap(t, c0, c1, &lo, &hi);
        for (int e = lo; e < hi; e++) {
            unsigned char *p = local + (size_t)(e - lo) * rec;
            vec_env_save_record(&t->ve, e, p);
            t->ops->save_env(t->algo, e, p + vrec);
        }
        rc = comm_gather_records(t->c, local, rec, hi - lo, c1 - c0, all, err);
        if (rc == CALF_OK && open) {
            wrc = ckpt_writer_put(&w, all, (size_t)(c1 - c0) * rec, err);
            open = wrc == CALF_OK;
        }
    }
    free(local);
    free(all);
    if (open) {
        if (rc == CALF_OK) wrc = ckpt_writer_commit(&w, err);
        else ckpt_writer_abort(&w);
    }
    if (rc == CALF_OK) rc = wrc;
    if (rc == CALF_OK && main) {
        logf_(t, false, "checkpoint %s", path);
        /* the new checkpoint is safe; failing to remove an old one only costs disk */
        int64_t keep = t->p.num_checkpoints;
        calf_error perr;
        if (ckpt_prune(dir, keep > 0 ? (int)keep : 1, t->iteration, &perr) != CALF_OK)
            logf_(t, true, "warning: %s", perr.msg);
    }
    return rc;
}

#define MAX_ITERATION 1000000000000LL /* TrainerConfig.num_iterations' bound */

typedef struct ckpt_meta {
    int64_t iteration, env_steps, total_episodes;
    uint64_t num_envs, head_bytes;
} ckpt_meta;

/* *out = a * b for a, b >= 0; false when the product does not fit. */
static bool mul_fits(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0 || (b > 0 && a > INT64_MAX / b)) return false;
    *out = a * b;
    return true;
}

/* The head of checkpoint `path` (validated before: ckpt_read_head): META's size field,
 * then that many bytes. *head is malloc'd, the caller frees it. */
static int read_head(const char *path, const ckpt_header *hdr, unsigned char **head,
                     size_t *n, calf_error *err) {
    unsigned char meta[META_BYTES];
    *head = NULL;
    *n = 0;
    if (hdr->payload_size < META_BYTES)
        return calf_error_set(err, CALF_EINVAL, "%s: payload too short for its META section", path);
    int rc = ckpt_read_range(path, 0, meta, sizeof meta, err);
    if (rc) return rc;
    uint64_t hb = bytes_get_le(meta + META_BYTES - 8, 8);
    if (hb < META_BYTES || hb > hdr->payload_size || hb > MAX_HEAD_BYTES)
        return calf_error_set(err, CALF_EINVAL, "%s: head of %llu bytes in a %llu-byte payload",
                              path, (unsigned long long)hb,
                              (unsigned long long)hdr->payload_size);
    *head = calf_xmalloc((size_t)hb);
    *n = (size_t)hb;
    rc = ckpt_read_range(path, 0, *head, (size_t)hb, err);
    if (rc) {
        free(*head);
        *head = NULL;
    }
    return rc;
}

/* The META section and the algorithm's sections that follow it, checked against the
 * file header's iteration (a file pieced together from two checkpoints fails here) and
 * against the config: E envs, T steps each per iteration. */
static int read_meta_algo(ckpt_reader *r, const char *name, int64_t header_iteration, int E,
                          int T, ckpt_meta *m, const algorithm_ops *ops, algorithm *algo,
                          calf_error *err) {
    uint32_t layout = 0;
    ckpt_get_tag(r, "META");
    ckpt_get_u32(r, &layout);
    if (r->status == CALF_OK && layout != CKPT_LAYOUT_VERSION)
        return calf_error_set(err, CALF_EINVAL, "%s: unsupported checkpoint layout %u", name, layout);
    ckpt_get_i64(r, &m->iteration);
    ckpt_get_i64(r, &m->env_steps);
    ckpt_get_i64(r, &m->total_episodes);
    ckpt_get_u64(r, &m->num_envs);
    ckpt_get_u64(r, &m->head_bytes);
    if (r->status) return r->status;
    if (m->iteration != header_iteration)
        return calf_error_set(err, CALF_EINVAL, "%s: iteration %lld inside, %lld in the header", name,
                              (long long)m->iteration, (long long)header_iteration);
    if (m->iteration < 0 || m->iteration > MAX_ITERATION || m->env_steps < 0 ||
        m->total_episodes < 0 || m->total_episodes > m->env_steps)
        return calf_error_set(err, CALF_EINVAL, "%s: counters out of range", name);
    if (m->num_envs != (uint64_t)E)
        return calf_error_set(err, CALF_EINVAL, "%s: checkpoint has %llu environments, config %d",
                              name, (unsigned long long)m->num_envs, E);
    /* the counters follow from the iteration; anything else is a damaged or foreign file
     * (an iteration whose counters would not fit in 64 bits is one too) */
    int64_t want_steps;
    if (!mul_fits(m->iteration, (int64_t)E * T, &want_steps) || m->env_steps != want_steps)
        return calf_error_set(err, CALF_EINVAL,
                              "%s: counters do not match iteration %lld of this config", name,
                              (long long)m->iteration);
    return ops->load(algo, r, m->iteration, err);
}

int trainer_load_policy(const calf_config *cfg, const char *path, const ckpt_header *hdr,
                        const algorithm_ops **ops, algorithm **algo, calf_error *err) {
    *ops = trainer_algorithm(cfg);
    *algo = NULL;
    const calf_env_class *cls = calf_env_lookup(calf_config_string(cfg, CALF_CFG_ENV_NAME), err);
    if (!cls) return CALF_EINVAL;
    int E = (int)calf_config_int(cfg, CALF_CFG_NUM_ENVS);
    int T = (int)calf_config_int(cfg, CALF_CFG_UNROLL_LENGTH);
    algo_setup s = {.cfg = cfg, .spec = &cls->spec, .c = NULL, .E = E, .begin = 0, .count = 0,
                    .T = T, .seed = (uint64_t)calf_config_int(cfg, CALF_CFG_RANDOM_SEED)};
    unsigned char *head = NULL;
    size_t n = 0;
    int rc = read_head(path, hdr, &head, &n, err);
    if (rc == CALF_OK) rc = (*ops)->create(&s, algo, err);
    if (rc == CALF_OK) {
        ckpt_reader r;
        ckpt_reader_init(&r, head, n, path, err);
        ckpt_meta m;
        rc = read_meta_algo(&r, path, hdr->iteration, E, T, &m, *ops, *algo, err);
    }
    free(head);
    if (rc && *algo) {
        (*ops)->destroy(*algo);
        *algo = NULL;
    }
    return rc;
}

/* Load env records [c0, c1) (global) of `chunk` that this process owns. */
static int load_records(trainer *t, const unsigned char *chunk, int c0, int c1, size_t rec,
                        const char *name, calf_error *err) {
    int lo, hi;
    overlap(t, c0, c1, &lo, &hi);
    size_t vrec = vec_env_record_size(&t->ve);
    for (int e = lo; e < hi; e++) {
        const unsigned char *p = chunk + (size_t)(t->begin + e - c0) * rec;
        calf_error verr;
        int rc = vec_env_load_record(&t->ve, e, p, &verr);
        if (rc) return calf_error_set(err, rc, "%s: %s", name, verr.msg);
        if ((rc = t->ops->load_env(t->algo, e, p + vrec, name, err))) return rc;
    }
    return CALF_OK;
}

/* Resume from rs: each process reads the head and its own envs' records from the file,
 * or, where only rank 0 reads files (MPI ranks, which may not share a file system), rank
 * 0 reads and sends the head, then every record chunk by chunk. */
static int load_checkpoint(trainer *t, const resume_state *rs, calf_error *err) {
    const char *name = rs->path;
    unsigned char *head = NULL;
    size_t n = 0;
    int rc = CALF_OK;
    if (!rs->via_rank0 || t->c->index == 0) rc = read_head(rs->path, &rs->hdr, &head, &n, err);
    if (rs->via_rank0) {
        int64_t msg[2] = {rc, (int64_t)n};
        int brc = comm_broadcast(t->c, msg, sizeof msg, 0, err);
        if (brc) return brc;
        if (msg[0] != CALF_OK) {
            if (t->c->index != 0) calf_error_set(err, (int)msg[0], "%s: rank 0 could not read it", name);
            free(head);
            return (int)msg[0];
        }
        if (t->c->index != 0) head = calf_xmalloc((size_t)msg[1] ? (size_t)msg[1] : 1);
        n = (size_t)msg[1];
        if ((rc = comm_broadcast(t->c, head, n, 0, err))) {
            free(head);
            return rc;
        }
    }
    if (rc) return rc;
    ckpt_reader r;
    ckpt_reader_init(&r, head, n, name, err);
    ckpt_meta m;
    rc = read_meta_algo(&r, name, rs->hdr.iteration, t->E, t->T, &m, t->ops, t->algo, err);
    uint64_t rec = 0;
    if (rc == CALF_OK) {
        ckpt_get_tag(&r, "ENVS");
        ckpt_get_u64(&r, &rec);
        rc = ckpt_reader_finish(&r);
    }
    free(head);
    if (rc) return rc;
    if (rec != env_record_size(t))
        return calf_error_set(err, CALF_EINVAL, "%s: env record size %llu, expected %zu", name,
                              (unsigned long long)rec, env_record_size(t));
    if (rs->hdr.payload_size != m.head_bytes + (uint64_t)t->E * rec)
        return calf_error_set(err, CALF_EINVAL, "%s: env records do not fill the payload", name);
    t->iteration = m.iteration;
    t->env_steps = m.env_steps;
    t->total_episodes = m.total_episodes;
    int per = chunk_envs(rec);
    if (!rs->via_rank0) {
        /* this process's block of the records, which are in global env order */
        unsigned char *buf = calf_xmalloc(rec * (size_t)(per < t->count ? per : t->count ? t->count : 1));
        for (int c0 = t->begin; c0 < t->begin + t->count && rc == CALF_OK; c0 += per) {
            int c1 = t->begin + t->count - c0 > per ? c0 + per : t->begin + t->count;
            rc = ckpt_read_range(name, m.head_bytes + (uint64_t)c0 * rec, buf,
                                 (size_t)(c1 - c0) * rec, err);
            if (rc == CALF_OK) rc = load_records(t, buf, c0, c1, rec, name, err);
        }
        free(buf);
        return rc;
    }
    /* every rank takes part in every chunk's broadcast and keeps its own records; a
     * failure on any rank is agreed on after the chunk, so none waits for the others */
    unsigned char *buf = calf_xmalloc(rec * (size_t)(per < t->E ? per : t->E));
    for (int c0 = 0; c0 < t->E && rc == CALF_OK; c0 += per) {
        int c1 = t->E - c0 > per ? c0 + per : t->E;
        size_t bytes = (size_t)(c1 - c0) * rec;
        int64_t st = CALF_OK;
        if (t->c->index == 0) st = ckpt_read_range(name, m.head_bytes + (uint64_t)c0 * rec, buf, bytes, err);
        if ((rc = comm_broadcast(t->c, &st, sizeof st, 0, err))) break;
        if (st != CALF_OK) {
            if (t->c->index != 0) calf_error_set(err, (int)st, "%s: rank 0 could not read it", name);
            rc = (int)st;
            break;
        }
        if ((rc = comm_broadcast(t->c, buf, bytes, 0, err))) break;
        int lrc = load_records(t, buf, c0, c1, rec, name, err), any = 0;
        if ((rc = comm_any(t->c, lrc != CALF_OK, &any, err))) break;
        if (any) rc = lrc != CALF_OK ? lrc : CALF_EINVAL;
    }
    free(buf);
    return rc;
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
    rank_log_line(&t->log, line);
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
    double *returns = calf_xcalloc((size_t)episodes, sizeof(double));
    double avg = 0;
    int rc = trainer_evaluate_greedy(t->ops, t->algo, t->env_name, t->seed, episodes, returns,
                                     &avg, err);
    free(returns);
    if (rc) return rc;
    t->eval_return = avg;
    logf_(t, false, "eval iter %lld: average return %.3f over %d episodes",
          (long long)t->iteration, avg, episodes);
    if (t->eval_writer) {
        double wall = (double)time(NULL);
        calf_summary_writer_add_scalar(t->eval_writer, "Metrics/AverageReturn", t->iteration,
                                       wall, avg);
        calf_summary_writer_add_scalar(t->eval_writer, "Metrics_vs_EnvironmentSteps/AverageReturn",
                                       t->env_steps, wall, avg);
        calf_summary_writer_add_scalar(t->eval_writer, "Metrics/EnvironmentSteps", t->iteration,
                                       wall, (double)t->env_steps);
        calf_error werr; /* a failed write is the writer's to keep: see io_failed */
        calf_summary_writer_flush(t->eval_writer, &werr);
    }
    return CALF_OK;
}

/* Push the summaries written so far to the file (main process); a failure is kept by
 * the writer and seen by io_failed. */
static void flush_summaries(void) {
    calf_summary_writer *w = calf_summary_current();
    calf_error werr;
    if (w) calf_summary_writer_flush(w, &werr);
}

/* Has this process failed to write its log or (main process) its summaries? The first
 * such failure is kept in t->io_err. */
static bool io_failed(trainer *t) {
    calf_summary_writer *w = calf_summary_current();
    if (t->io_err.status == CALF_OK && t->log.err.status != CALF_OK) t->io_err = t->log.err;
    if (t->io_err.status == CALF_OK && w) calf_summary_writer_status(w, &t->io_err);
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
        logf_(t, false, "stopped after iteration %lld: rank %d could not write a file",
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

static int train_iteration(trainer *t, bool *stop) {
    calf_error *err = t->err;
    double t0 = calf_monotonic_s();
    rollout(t);
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
    /* io_failed after each writer's turn: the message is the first failure in time */
    if (t->iteration % t->p.summary_interval == 0) {
        write_summaries(t, g, sps);
        rc = t->ops->summarize(t->algo, t->iteration, t->p.histograms, err);
        if (rc) return rc;
        io_failed(t);
    }
    if (calf_context_is_main() && t->p.evaluate &&
        (t->iteration % t->p.eval_interval == 0 || finished(t))) {
        if ((rc = evaluate(t, err))) return rc;
        io_failed(t);
    }
    /* everything up to the checkpoint's iteration is on disk before it is */
    bool planned = checkpoint_due(t) || finished(t);
    if (planned) flush_summaries();
    /* One agreement per iteration: Ctrl-C on any rank, or a failed write on any rank
     * (its log, or rank 0's summaries), stops every rank after this iteration, with a
     * checkpoint. */
    int who = -1, any_stop = 0;
    rc = comm_agree(t->c, stop_requested != 0, io_failed(t), &any_stop, &who, err);
    if (rc) return rc;
    *stop = any_stop != 0 || who >= 0;
    /* processes that each hold a copy of the parameters prove they agree; a digest of 0
     * says they share one copy */
    int64_t check = t->p.check_interval;
    uint64_t d = comm_size(t->c) > 1 && check > 0 && t->iteration % check == 0
                     ? t->ops->digest(t->algo) : 0;
    if (d != 0 && (rc = comm_check_equal(t->c, &d, sizeof d, err))) return rc;
    if (planned || *stop) {
        if (!planned) flush_summaries();
        calf_error cerr;
        calf_error_clear(&cerr);
        rc = write_checkpoint(t, who >= 0 ? &cerr : err);
        if (who >= 0) return stop_for_io(t, who, rc, &cerr);
        if (rc) return rc;
    }
    progress(t, sps, finished(t) || *stop);
    return CALF_OK;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether this launch writes TensorBoard's restart marker into ROOT/sub: always on a
 * fresh run (a run's first marker is its start: only later ones purge), and on a resume
 * from iteration K only when an earlier launch wrote an iteration-stepped value past K
 * (it died after its last checkpoint). A marker at K+1 purges every earlier value with
 * step K+1 or more, whatever its tag, so writing one needlessly would hide the earlier
 * launches' Metrics_vs_EnvironmentSteps values, whose steps are env steps. A file that
 * cannot be read counts as needing one. */
static bool restart_needed(const trainer *t, const char *sub) {
    if (t->iteration == 0) return true;
    char dir[4096], path[4400];
    calf_error err;
    if (fs_join(dir, sizeof dir, t->root, sub, &err) != CALF_OK) return true;
    DIR *d = opendir(dir);
    if (!d) return true;
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, "events.out.tfevents.", 20) != 0) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            char **grown = calf_xmalloc(cap * sizeof *grown);
            if (n) memcpy(grown, names, n * sizeof *grown);
            free(names);
            names = grown;
        }
        size_t len = strlen(e->d_name);
        names[n] = calf_xmalloc(len + 1);
        memcpy(names[n++], e->d_name, len + 1);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names); /* launch order: names start with the time */
    events_run run;
    events_run_init(&run);
    bool needed = false;
    for (size_t i = 0; i < n && !needed; i++)
        needed = snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path ||
                 events_run_read_file(&run, path, NULL, &err) != CALF_OK;
    for (size_t i = 0; i < run.num_entries && !needed; i++) {
        const events_entry *en = &run.entries[i];
        needed = en->what == EVENTS_ENTRY_VALUE && !en->purged && en->step > t->iteration &&
                 strncmp(en->text, "Metrics_vs_", 11) != 0;
    }
    events_run_free(&run);
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return needed;
}

static int train_loop(void *arg) {
    trainer *t = arg;
    t->start_time = calf_monotonic_s();
    t->start_iteration = t->iteration;
    t->last_progress = 0;
    /* TensorBoard's restart marker: readers drop what an earlier launch wrote for the
     * steps this one writes again (a run that died after its last checkpoint) */
    if (calf_context_is_main() && restart_needed(t, "train"))
        calf_summary_session_start(t->iteration + 1);
    if (t->eval_writer && restart_needed(t, "eval"))
        calf_summary_writer_add_session_start(t->eval_writer, t->iteration + 1, (double)time(NULL));
    while (!finished(t)) {
        bool stop = false;
        int64_t iteration = t->iteration + 1;
        int rc = train_iteration(t, &stop);
        if (rc == CALF_EINTR) /* the launcher gave up waiting for the iteration to end */
            logf_(t, true, "interrupted: stopped during iteration %lld, which has no "
                  "checkpoint; a new run resumes from the last one", (long long)iteration);
        if (rc) return rc;
        if (t->stopped_by >= 0) return CALF_OK; /* another rank's failure, reported there */
        if (stop && !finished(t)) {
            logf_(t, true, "interrupted: stopped after iteration %lld, checkpoint written",
                  (long long)t->iteration);
            return CALF_EINTR;
        }
    }
    return CALF_OK;
}

/* ---- one process's run ---------------------------------------------------------- */

static int write_operative_config(const trainer *t, const char *root, calf_error *err) {
    char path[4096];
    int rc = fs_join(path, sizeof path, root, "config.gin", err);
    if (rc) return rc;
    /* The split: a line per rank, or beyond 16 ranks a line per run of equal blocks
     * (calf_split's blocks differ by at most one, so there are at most two runs). */
    char line[512];
    int N = comm_size(t->c);
    bytes_buf hb = {0};
    snprintf(line, sizeof line,
             "operative config written by calf %s: every binding's final value\n"
             "values are global; num_parallel_environments = %d split over %d process%s:",
             calf_version(), t->E, N, N == 1 ? "" : "es");
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
    /* Where the env came from when a plug-in registered it: a resume or `calf play`
     * that lacks the library says which (trainer_env_lib_hint). */
    for (int i = 0; i < calf_env_library_count(); i++) {
        bytes_buf_put_str(&hb, "\n" ENV_LIB_COMMENT);
        bytes_buf_put_str(&hb, calf_env_library_at(i));
    }
    if (t->ops->describe) {
        char text[1024];
        t->ops->describe(t->algo, text, sizeof text);
        if (text[0]) {
            bytes_buf_put_str(&hb, "\n");
            bytes_buf_put_str(&hb, text);
        }
    }
    *bytes_buf_grow(&hb, 1) = '\0';
    const char *header = (const char *)hb.data;
    /* built in memory, then written with write(2): a failure is seen with its errno */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) calf_out_of_memory(1, 0);
    rc = calf_config_write(t->cfg, f, header);
    if (fclose(f) != 0) calf_out_of_memory(1, len);
    free(hb.data);
    if (rc == CALF_OK) rc = fs_write_file_atomic(path, text, len, err);
    else calf_error_set(err, rc, "%s: cannot format the config", path);
    free(text);
    return rc;
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

static int open_eval_writer(trainer *t, const char *root, calf_error *err) {
    char evdir[4096];
    int rc = fs_join(evdir, sizeof evdir, root, "eval", err);
    if (rc) return rc;
    t->eval_writer =
        calf_summary_writer_open(evdir, t->p.summaries_flush_secs, err);
    return t->eval_writer ? CALF_OK : (err->status ? err->status : CALF_EIO);
}

int trainer_worker(comm *c, void *arg) {
    trainer_args *wa = arg;
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
    t.log.fd = -1;
    t.stopped_by = -1;
    int rc = rank_log_open(&t.log, o->root_dir, rank, &err);
    if (rc == CALF_OK) rc = trainer_init(&t, wa->cfg, c, &err);
    if (rc == CALF_OK) {
        /* The host too: an MPI job's ranks run on several machines, and a log (written on a
         * shared file system) must say which one to look at. */
        char host[256];
        if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "(unknown)");
        host[sizeof host - 1] = '\0';
        logf_(&t, false, "calf %s: backend %s, pid %ld on host %s", calf_version(),
              comm_backend_name(c), (long)getpid(), host);
        if (c->note) logf_(&t, false, "%s", c->note);
        logf_(&t, comm_size(c) > 1, "rank %d/%d: environments %d..%d (%d of %d)", rank,
              comm_size(c), t.begin, t.begin + t.count - 1, t.count, t.E);
    }
    if (rc == CALF_OK && wa->rs->found) {
        rc = load_checkpoint(&t, wa->rs, &err);
        if (rc == CALF_OK)
            logf_(&t, true, "resuming from %s (iteration %lld)", wa->rs->path,
                  (long long)t.iteration);
    }
    if (rc == CALF_OK && t.ops->start) rc = t.ops->start(t.algo, &err);
    if (rc == CALF_OK && io_failed(&t)) rc = calf_error_set(&err, CALF_EIO, "%s", t.io_err.msg);
    if (rc == CALF_OK && calf_context_is_main()) rc = write_operative_config(&t, o->root_dir, &err);
    if (rc == CALF_OK && finished(&t)) {
        logf_(&t, true, "nothing to do: the run is complete at iteration %lld",
              (long long)t.iteration);
    } else if (rc == CALF_OK) {
        if (calf_context_is_main() && t.p.evaluate)
            rc = open_eval_writer(&t, o->root_dir, &err);
        char trdir[4096];
        if (rc == CALF_OK) rc = fs_join(trdir, sizeof trdir, o->root_dir, "train", &err);
        if (rc == CALF_OK)
            rc = calf_summary_run(trdir, t.p.summaries_flush_secs,
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
    if (rc == CALF_OK && t.stopped_by < 0) {
        struct rusage ru;
        double peak_mib = getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss / 1024.0 : -1;
        logf_(&t, false, "done at iteration %lld (peak RSS %.1f MiB)", (long long)t.iteration,
              peak_mib);
        if (t.ops->report) {
            char text[2048];
            t.ops->report(t.algo, calf_monotonic_s() - t.start_time, text, sizeof text);
            for (char *line = text, *nl; *line; line = nl + 1) {
                if (!(nl = strchr(line, '\n'))) break;
                *nl = '\0';
                logf_(&t, false, "%s", line);
            }
        }
    }
    /* the last lines of a finished run are writes too */
    if (rc == CALF_OK || rc == CALF_EINTR) rank_log_close(&t.log);
    if ((rc == CALF_OK || rc == CALF_EINTR) && t.log.err.status != CALF_OK) {
        err = t.log.err;
        rc = err.status;
    }
    if (rc != CALF_OK && rc != CALF_EINTR) {
        if (!err.msg[0]) calf_error_set(&err, rc, "training failed with status %d", rc);
        logf_(&t, false, "error: %s", err.msg);
        if (wa->report_via_comm) comm_report_failure(c, err.msg);
        else wa->err = err;
    }
    rank_log_close(&t.log);
    restore_stop_handlers(&old_int, &old_term);
    trainer_free(&t);
    return calf_exit_code(rc);
}
