/* bench_train.c: end-to-end PPO training throughput (env steps per second of the whole
 * job) for examples/ppo_cartpole.gin on 1 and 2 local processes, median of several runs,
 * beside two references with the same two cores busy and no communication at all:
 * - two independent copies of the one-process job at once: what the machine loses when
 *   both cores work (the ceiling for --nproc 2);
 * - two independent halves of the job at once (half the envs and half the minibatch
 *   each, the split --nproc 2 makes): that loss plus what smaller passes through the nets
 *   cost, so that --nproc 2 against it is what the communication costs.
 * Each repeat's figures are printed as it ends (to pool across runs), then the medians.
 * Usage: bench_train [CONF] [ITERATIONS] [REPEATS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "calf/train.h"

static void remove_dir(const char *root) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "bench_train: could not remove %s\n", root);
}

/* One training run in ROOT with nproc processes; seconds, or -1 on failure. */
static double timed_run(calf_train_options *o, const char *root, int nproc) {
    calf_error err;
    o->root_dir = root;
    o->nproc = nproc;
    double t0 = bench_now();
    int rc = calf_train(o, &err);
    double dt = bench_now() - t0;
    remove_dir(root);
    if (rc) {
        fprintf(stderr, "bench_train: training failed: %s\n", err.msg);
        return -1;
    }
    return dt;
}

/* Two one-process runs of o at the same time, each in its own forked process; the
 * seconds until both are done, or -1. */
static double timed_pair(calf_train_options *o, int r) {
    double t0 = bench_now();
    pid_t pid[2];
    fflush(NULL);
    for (int k = 0; k < 2; k++) {
        pid[k] = fork();
        if (pid[k] < 0) return -1;
        if (pid[k] == 0) {
            char root[128];
            snprintf(root, sizeof root, "/tmp/calf_bench_train.%ld.pair%d.%d", (long)getpid(), k, r);
            _exit(timed_run(o, root, 1) < 0 ? 1 : 0);
        }
    }
    int failed = 0;
    for (int k = 0; k < 2; k++) {
        int st;
        if (waitpid(pid[k], &st, 0) != pid[k] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = 1;
    }
    return failed ? -1 : bench_now() - t0;
}

int main(int argc, char **argv) {
    const char *conf = argc > 1 ? argv[1] : "examples/ppo_cartpole.gin";
    long iters = argc > 2 ? strtol(argv[2], NULL, 10) : 100;
    int repeats = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 5;
    if (iters < 1 || repeats < 1 || repeats > 50) {
        fprintf(stderr, "usage: bench_train [CONF] [ITERATIONS>=1] [REPEATS 1..50]\n");
        return 2;
    }
    if (access(conf, R_OK) != 0) {
        fprintf(stderr, "bench_train: cannot read %s (run from the source dir or pass CONF)\n", conf);
        return 2;
    }
    char iter_param[64];
    snprintf(iter_param, sizeof iter_param, "TrainerConfig.num_iterations=%ld", iters);
    const char *params[6] = {iter_param, "TrainerConfig.num_env_steps=0", /* one budget */
                             "TrainerConfig.evaluate=False", "TrainerConfig.num_checkpoints=0",
                             "TrainerConfig.summary_interval=1000000"};
    calf_error err;
    calf_train_options o = {.root_dir = "/nonexistent", .conf_path = conf, .conf_params = params,
                            .num_conf_params = 5, .nproc = 1, .quiet = true};
    calf_config *cfg = calf_config_new(&err);
    if (!cfg || calf_train_load_config(&o, cfg, &err)) {
        fprintf(stderr, "bench_train: %s\n", err.msg);
        return 2;
    }
    int64_t envs = calf_config_int(cfg, CALF_CFG_NUM_ENVS);
    int64_t mbs = calf_config_int(cfg, CALF_CFG_MINI_BATCH_SIZE);
    double steps = (double)iters * (double)envs * (double)calf_config_int(cfg, CALF_CFG_UNROLL_LENGTH);
    calf_config_free(cfg);
    if (envs % 2 || mbs % 2) {
        fprintf(stderr, "bench_train: %s: the halves need an even number of envs and an even "
                        "mini_batch_size\n", conf);
        return 2;
    }
    /* the half job: what each process of --nproc 2 computes, as a job of its own */
    char half_envs[96], half_mbs[96];
    snprintf(half_envs, sizeof half_envs, "create_environment.num_parallel_environments=%lld",
             (long long)(envs / 2));
    snprintf(half_mbs, sizeof half_mbs, "TrainerConfig.mini_batch_size=%lld", (long long)(mbs / 2));
    const char *half_params[7] = {params[0], params[1], params[2], params[3], params[4],
                                  half_envs, half_mbs};
    calf_train_options half = o;
    half.conf_params = half_params;
    half.num_conf_params = sizeof half_params / sizeof half_params[0];
    printf("%s: %ld iterations, %.0f env steps per run, median of %d runs\n", conf, iters, steps,
           repeats);
    /* Runs alternate (1 process, 2 processes, two independent 1-process runs at once, two
     * independent halves at once), so that the machine's slow spells (it is shared) fall
     * on all alike. The speedup of a repeat is against the 1-process run of the same
     * repeat; its median is the figure least moved by the machine's drift. */
    enum { KINDS = 4 };
    double rates[KINDS][50], speedup[KINDS][50];
    for (int r = 0; r < repeats; r++) {
        for (int kind = 0; kind < KINDS; kind++) {
            char root[128];
            snprintf(root, sizeof root, "/tmp/calf_bench_train.%ld.%d.%d", (long)getpid(), kind, r);
            double dt = kind < 2 ? timed_run(&o, root, kind + 1)
                                 : timed_pair(kind == 2 ? &o : &half, r);
            if (dt < 0) return 1;
            /* a pair of whole jobs does the work twice; a pair of halves, once */
            rates[kind][r] = (kind == 2 ? 2 : 1) * steps / dt;
        }
        for (int kind = 0; kind < KINDS; kind++) speedup[kind][r] = rates[kind][r] / rates[0][r];
        /* each repeat as it ends: progress on a long bench, and figures to pool across runs */
        printf("repeat %2d/%d: --nproc 1 %.0f steps/s; --nproc 2 %.2fx, ceiling %.2fx, halves %.2fx\n",
               r + 1, repeats, rates[0][r], speedup[1][r], speedup[2][r], speedup[3][r]);
        fflush(stdout);
    }
    const char *names[KINDS] = {"--nproc 1", "--nproc 2", "2 x --nproc 1 at once (machine ceiling)",
                                "2 x half the job at once (no communication)"};
    printf("%-44s %12s %16s\n", "", "steps/s", "speedup vs 1");
    for (int kind = 0; kind < KINDS; kind++) {
        double med = bench_quantile(rates[kind], repeats, 0.5);
        double sp = bench_quantile(speedup[kind], repeats, 0.5);
        double lo = bench_quantile(speedup[kind], repeats, 0.0);
        double hi = bench_quantile(speedup[kind], repeats, 1.0);
        printf("%-44s %12.0f %7.2fx (%.2f-%.2f)\n", names[kind], med, sp, lo, hi);
    }
    /* --nproc 2 against each reference of the same repeat: against the ceiling, what the
     * split and the exchange cost with the machine's own loss divided out; against the
     * halves, what the exchange (and waiting for one another) costs */
    const char *ref_names[2] = {"--nproc 2 / ceiling", "--nproc 2 / halves"};
    for (int k = 0; k < 2; k++) {
        double eff[50];
        for (int r = 0; r < repeats; r++) eff[r] = rates[1][r] / rates[2 + k][r];
        printf("%-44s %12s %7.2fx (%.2f-%.2f)\n", ref_names[k], "", bench_quantile(eff, repeats, 0.5),
               bench_quantile(eff, repeats, 0.0), bench_quantile(eff, repeats, 1.0));
    }
    return 0;
}
