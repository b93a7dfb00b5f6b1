/* bench_sac.c: SAC training speed in updates per second (updates over the run's whole
 * wall time, the initial random collection included, as the PyTorch anchor counts them)
 * and peak resident memory, median of several runs, each in a process of its own:
 * - examples/sac_pendulum.gin on one process (ALF's sac_pendulum: 1 env, batch 64);
 * - the same with 8 envs and batch 256 on 1 and 2 processes, and the speedup;
 * - the other replay algorithms on their examples, shortened, on one process: TD3
 *   (examples/td3_pendulum.gin, 256x256, batch 256), DQN (dqn_cartpole.gin, 120x84,
 *   batch 128) and DDPG (ddpg_pendulum.gin, 100x100, batch 64), with peak RSS;
 * - with --anchor PATH, the PyTorch anchor (shared/anchors/torch_sac_pendulum.py, run with
 *   /usr/bin/python3) on the same number of env steps, and calf's ratio to it;
 * - with --mujoco instead: SAC and TD3 on HalfCheetah at 256x256 (examples/
 *   {sac,td3}_halfcheetah_1m.gin, 4,000 env steps after 1,000 collected), their update
 *   arithmetic in GFLOP/s (bench_util.h's FLOP count; bench_nn times the same calls), and
 *   with 2 envs and 2 updates per iteration on 1 and 2 processes, the speedup.
 * Usage: bench_sac [CONF] [REPEATS] [--anchor PATH [--anchor_steps N]]
 *        bench_sac --mujoco [REPEATS] */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "calf/train.h"

typedef struct run_result {
    double seconds, updates_per_s, peak_mib;
} run_result;

/* Train conf with the extra bindings in a child process; false on failure. The updates
 * come from the rank log's "replay: ... N updates" line. */
static bool timed_run(const char *conf, int nproc, const char *const *params, int nparams,
                      int r, run_result *out) {
    char root[160];
    snprintf(root, sizeof root, "/tmp/calf_bench_sac.%ld.%d.%d", (long)getpid(), nproc, r);
    fflush(NULL);
    double t0 = bench_now();
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        calf_train_options o = {.root_dir = root, .conf_path = conf, .conf_params = params,
                                .num_conf_params = nparams, .nproc = nproc, .quiet = true};
        calf_error err;
        int rc = calf_train(&o, &err);
        if (rc) fprintf(stderr, "bench_sac: training failed: %s\n", err.msg);
        _exit(rc ? 1 : 0);
    }
    int st = 0;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return false;
    out->seconds = bench_now() - t0;
    out->peak_mib = (double)ru.ru_maxrss / 1024.0;
    char path[256], line[512];
    snprintf(path, sizeof path, "%s/log/rank-0.log", root);
    FILE *f = fopen(path, "r");
    long long updates = -1;
    while (f && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "); ");
        if (strncmp(line, "replay: ", 8) == 0 && p) updates = strtoll(p + 3, NULL, 10);
    }
    if (f) fclose(f);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "bench_sac: could not remove %s\n", root);
    if (updates < 0) return false;
    out->updates_per_s = (double)updates / out->seconds;
    return true;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The anchor's "ups=X" over the same steps; -1 when it cannot run. */
static double run_anchor(const char *path, long steps) {
    char cmd[512], line[512];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' --steps %ld 2>/dev/null", path, steps);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    double ups = -1;
    while (fgets(line, sizeof line, p)) {
        const char *u = strstr(line, " ups=");
        if (u) ups = strtod(u + 5, NULL);
        fputs(line, stdout);
    }
    if (pclose(p) != 0) return -1;
    return ups;
}

/* Per-repeat figures of one configuration: updates/s on 1 process and its peak RSS,
 * the wide (or 2-env) variant on 1 and 2 processes, and their ratio. */
typedef struct series {
    double *one, *rss, *w1, *w2, *sp;
} series;

static series series_alloc(int repeats) {
    series v;
    double **all[] = {&v.one, &v.rss, &v.w1, &v.w2, &v.sp};
    for (int i = 0; i < 5; i++) *all[i] = calloc((size_t)repeats, sizeof(double));
    return v;
}

static void series_free(series *v) { free(v->one), free(v->rss), free(v->w1), free(v->w2), free(v->sp); }

/* The --mujoco part: SAC and TD3 on HalfCheetah at 256x256. */
static int bench_mujoco(int repeats) {
    static const struct {
        const char *name, *conf;
        int td3;
    } algos[] = {{"SAC", "examples/sac_halfcheetah_1m.gin", 0},
                 {"TD3", "examples/td3_halfcheetah_1m.gin", 1}};
    const char *one[] = {"TrainerConfig.evaluate=False", "TrainerConfig.num_checkpoints=0",
                         "TrainerConfig.initial_collect_steps=1000",
                         "TrainerConfig.num_env_steps=4000"};
    const char *two[] = {"TrainerConfig.evaluate=False", "TrainerConfig.num_checkpoints=0",
                         "TrainerConfig.initial_collect_steps=1000",
                         "TrainerConfig.num_env_steps=5000",
                         "create_environment.num_parallel_environments=2",
                         "TrainerConfig.num_updates_per_train_iter=2"};
    series v = series_alloc(repeats);
    double *u1 = v.one, *rss = v.rss, *w1 = v.w1, *w2 = v.w2, *sp = v.sp;
    int rc = 0;
    for (size_t k = 0; k < sizeof algos / sizeof algos[0] && rc == 0; k++) {
        double flop = bench_update_flop(17, 6, 256, 256, algos[k].td3);
        for (int r = 0; r < repeats; r++) {
            run_result a, b, c;
            if (!timed_run(algos[k].conf, 1, one, 4, r, &a) ||
                !timed_run(algos[k].conf, 1, two, 6, r, &b) ||
                !timed_run(algos[k].conf, 2, two, 6, r, &c)) {
                fprintf(stderr, "bench_sac: a run of %s failed (calf built with MuJoCo?)\n",
                        algos[k].conf);
                rc = 1;
                break;
            }
            u1[r] = a.updates_per_s, rss[r] = a.peak_mib;
            w1[r] = b.updates_per_s, w2[r] = c.updates_per_s;
            sp[r] = c.updates_per_s / b.updates_per_s;
            printf("repeat %d: %s HalfCheetah 256x256: %.0f updates/s (%.1f GFLOP/s, peak RSS "
                   "%.0f MiB); 2 envs: %.0f on 1 process, %.0f on 2 (%.2fx)\n",
                   r + 1, algos[k].name, a.updates_per_s, a.updates_per_s * flop * 1e-9,
                   a.peak_mib, b.updates_per_s, c.updates_per_s, sp[r]);
            fflush(stdout);
        }
        if (rc) break;
        double m = median(u1, repeats);
        printf("%s HalfCheetah 256x256, median of %d: %.0f updates/s on 1 process = %.1f GFLOP/s "
               "of update arithmetic (%.1f MFLOP/update), peak RSS %.0f MiB; 2 envs: %.0f "
               "updates/s on 1 process, %.0f on 2, speedup %.2fx\n",
               algos[k].name, repeats, m, m * flop * 1e-9, flop * 1e-6, median(rss, repeats),
               median(w1, repeats), median(w2, repeats), median(sp, repeats));
        fflush(stdout);
    }
    series_free(&v);
    return rc;
}

int main(int argc, char **argv) {
    const char *conf = "examples/sac_pendulum.gin", *anchor = NULL;
    int repeats = 5;
    long anchor_steps = 4000;
    int pos = 0;
    bool mujoco = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mujoco") == 0) mujoco = true;
        else if (strcmp(argv[i], "--anchor") == 0 && i + 1 < argc) anchor = argv[++i];
        else if (strcmp(argv[i], "--anchor_steps") == 0 && i + 1 < argc)
            anchor_steps = strtol(argv[++i], NULL, 10);
        else if (pos++ == 0 && !mujoco) conf = argv[i];
        else repeats = (int)strtol(argv[i], NULL, 10);
    }
    if (repeats < 1) repeats = 1;
    if (mujoco) return bench_mujoco(repeats);
    const char *quiet[] = {"TrainerConfig.evaluate=False"};
    const char *wide[] = {"TrainerConfig.evaluate=False",
                          "create_environment.num_parallel_environments=8",
                          "TrainerConfig.mini_batch_size=256"};
    series v = series_alloc(repeats);
    double *ups1 = v.one, *rss1 = v.rss, *w1 = v.w1, *w2 = v.w2, *sp = v.sp;
    for (int r = 0; r < repeats; r++) {
        run_result a, b, c;
        if (!timed_run(conf, 1, quiet, 1, r, &a) || !timed_run(conf, 1, wide, 3, r, &b) ||
            !timed_run(conf, 2, wide, 3, r, &c)) {
            fprintf(stderr, "bench_sac: a run failed\n");
            return 1;
        }
        ups1[r] = a.updates_per_s;
        rss1[r] = a.peak_mib;
        w1[r] = b.updates_per_s;
        w2[r] = c.updates_per_s;
        sp[r] = c.updates_per_s / b.updates_per_s;
        printf("repeat %d: %s %.0f updates/s (%.2f s, peak RSS %.1f MiB); 8 envs, batch 256: "
               "%.0f updates/s on 1 process, %.0f on 2 (%.2fx)\n",
               r + 1, conf, a.updates_per_s, a.seconds, a.peak_mib, b.updates_per_s,
               c.updates_per_s, sp[r]);
        fflush(stdout);
    }
    double m1 = median(ups1, repeats);
    printf("median of %d: %.0f updates/s on 1 process, peak RSS %.1f MiB; 8 envs, batch 256: "
           "%.0f updates/s on 1 process, %.0f on 2, speedup %.2fx\n",
           repeats, m1, median(rss1, repeats), median(w1, repeats), median(w2, repeats),
           median(sp, repeats));
    /* the other algorithms: enough steps for a few thousand updates each */
    static const struct {
        const char *conf, *steps;
    } others[] = {
        {"examples/td3_pendulum.gin", "TrainerConfig.num_env_steps=3000"},
        {"examples/dqn_cartpole.gin", "TrainerConfig.num_env_steps=40000"},
        {"examples/ddpg_pendulum.gin", "TrainerConfig.num_env_steps=4000"},
    };
    for (size_t k = 0; k < sizeof others / sizeof others[0]; k++) {
        const char *params[] = {"TrainerConfig.evaluate=False", others[k].steps};
        for (int r = 0; r < repeats; r++) {
            run_result a;
            if (!timed_run(others[k].conf, 1, params, 2, r, &a)) {
                fprintf(stderr, "bench_sac: a run of %s failed\n", others[k].conf);
                return 1;
            }
            w1[r] = a.updates_per_s;
            rss1[r] = a.peak_mib;
        }
        printf("%s (%s), median of %d: %.0f updates/s on 1 process, peak RSS %.1f MiB\n",
               others[k].conf, others[k].steps, repeats, median(w1, repeats),
               median(rss1, repeats));
        fflush(stdout);
    }
    if (anchor) {
        double ups = run_anchor(anchor, anchor_steps);
        if (ups > 0)
            printf("anchor (PyTorch, one thread, %ld env steps): %.0f updates/s; calf %.1fx\n",
                   anchor_steps, ups, m1 / ups);
        else
            printf("anchor: could not run %s with /usr/bin/python3 (python3-torch installed?)\n",
                   anchor);
    }
    series_free(&v);
    return 0;
}
