/* bench_train.c: end-to-end PPO training throughput (env steps per second of the whole
 * job) for examples/ppo_cartpole.gin on 1 and 2 local processes, median of several runs.
 * Usage: bench_train [CONF] [ITERATIONS] [REPEATS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "calf/train.h"

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
    const char *params[] = {iter_param, "TrainerConfig.evaluate=False",
                            "TrainerConfig.num_checkpoints=0", "TrainerConfig.summary_interval=1000000"};
    calf_config cfg;
    calf_error err;
    calf_train_options o = {.root_dir = "/nonexistent", .conf_path = conf, .conf_params = params,
                            .num_conf_params = 4, .nproc = 1, .quiet = true};
    if (calf_train_load_config(&o, &cfg, &err)) {
        fprintf(stderr, "bench_train: %s\n", err.msg);
        return 2;
    }
    double steps = (double)iters * (double)calf_config_int(&cfg, CALF_CFG_NUM_ENVS) *
                   (double)calf_config_int(&cfg, CALF_CFG_UNROLL_LENGTH);
    printf("%s: %ld iterations, %.0f env steps per run, median of %d runs\n", conf, iters, steps,
           repeats);
    printf("%-8s %14s %14s %8s\n", "nproc", "steps/s", "seconds", "speedup");
    /* runs alternate between 1 and 2 processes, so that the machine's slow spells
     * (it is shared) fall on both alike */
    double rates[2][50];
    for (int r = 0; r < repeats; r++) {
        for (int nproc = 1; nproc <= 2; nproc++) {
            char root[128];
            snprintf(root, sizeof root, "/tmp/calf_bench_train.%ld.%d.%d", (long)getpid(), nproc, r);
            o.root_dir = root;
            o.nproc = nproc;
            double t0 = bench_now();
            int rc = calf_train(&o, &err);
            double dt = bench_now() - t0;
            char cmd[256];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
            if (system(cmd) != 0) fprintf(stderr, "bench_train: could not remove %s\n", root);
            if (rc) {
                fprintf(stderr, "bench_train: training failed: %s\n", err.msg);
                return 1;
            }
            rates[nproc - 1][r] = steps / dt;
        }
    }
    double med[2];
    for (int k = 0; k < 2; k++) {
        qsort(rates[k], (size_t)repeats, sizeof rates[k][0], bench_cmp_double);
        med[k] = rates[k][repeats / 2];
        printf("%-8d %14.0f %14.3f %7.2fx\n", k + 1, med[k], steps / med[k], med[k] / med[0]);
    }
    return 0;
}
