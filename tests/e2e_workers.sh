#!/usr/bin/env bash
# e2e_workers.sh: the --nproc launcher's supervision of workers that do something no
# failure check sees: every worker exiting 0 in the middle of the job (a plug-in env
# calling exit(0)) is a failed job, exit 1 naming the ranks, no final checkpoint.
. "$(dirname "$0")/lib_e2e.sh"

CC=${CC:-cc}
if ! command -v "$CC" >/dev/null; then echo "skipped: no C compiler ($CC) to build a plug-in"; exit 77; fi

# Quitter-v0: a one-float env whose process exits with status 0 at its 300th step
"$CC" -shared -fPIC -I"$SRC/include" -x c - -o "$WORK/quitter.so" <<'C' || bad "cc failed for quitter"
#include <stdlib.h>
#include "calf/env.h"
static long steps;
static void r(void *s, calf_rng *g, float *o) { (void)s; (void)g; o[0] = 0; }
static int st(void *s, calf_rng *g, int a, const float *u, float *o, float *rew) {
    (void)s; (void)g; (void)u;
    if (++steps == 300) exit(0);
    o[0] = (float)a;
    *rew = (float)a;
    return 0;
}
static const calf_env_class cls = {
    .spec = {.name = "Quitter-v0", .obs_dim = 1, .num_actions = 2, .max_episode_steps = 20,
             .state_size = 4},
    .reset = r, .step = st};
int calf_plugin_register(int abi_version, calf_error *err) {
    int rc = CALF_PLUGIN_CHECK_ABI(abi_version, err);
    return rc != CALF_OK ? rc : calf_env_register(&cls, err);
}
C
cat > "$WORK/quitter.gin" <<'GIN'
create_environment.env_name = "Quitter-v0"
create_environment.num_parallel_environments = 8
TrainerConfig.unroll_length = 16
TrainerConfig.mini_batch_size = 32
TrainerConfig.num_iterations = 20
TrainerConfig.num_checkpoints = 2
TrainerConfig.evaluate = False
GIN

# both workers exit 0 in iteration 5 (8 envs, 4 per worker, 16 steps an iteration)
expect_exit 1 "$CALF" train --quiet --env_lib "$WORK/quitter.so" --root_dir "$WORK/q" \
    --conf "$WORK/quitter.gin" --nproc 2
expect_in "$WORK/err" "failed: exit status 0 before its job finished"
expect_in "$WORK/err" "calf: the job did not finish: 2 ranks exited with status 0 in the middle of it (ranks 0 1)"
if [ -e "$WORK/q/train/algorithm/ckpt-20" ]; then bad "a final checkpoint of a job that did not finish"; else ok; fi

report e2e_workers
