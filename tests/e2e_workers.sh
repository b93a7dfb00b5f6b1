#!/usr/bin/env bash
# e2e_workers.sh: the --nproc launcher's supervision of workers that do something no
# failure check sees: every worker exiting 0 in the middle of the job (a plug-in env
# calling exit(0)) is a failed job, exit 1 naming the ranks, no final checkpoint; a
# worker stopped by kill -STOP is named at once (the job waits for it, up to the 600 s
# collective timeout), and after kill -CONT the job ends with the bytes of one process.
# Event-driven: each wait is for a file's contents, with bounds no machine comes near.
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
# one process: its exit(0) in iteration 3 (8 envs x 16 steps an iteration) is exit 1 too
expect_exit 1 "$CALF" train --quiet --env_lib "$WORK/quitter.so" --root_dir "$WORK/q1" \
    --conf "$WORK/quitter.gin"
expect_in "$WORK/err" "calf: the process exited in the middle of iteration 3 (something it loaded called exit()): the run did not finish"
if [ -e "$WORK/q1/train/algorithm/ckpt-20" ]; then bad "a final checkpoint of a run that did not finish"; else ok; fi

# wait_for SECONDS COMMAND...: poll (0.05 s) until COMMAND succeeds; fails after SECONDS
wait_for() {
    local limit=$1 i
    shift
    for ((i = 0; i < limit * 20; i++)); do "$@" && return 0; sleep 0.05; done
    return 1
}

# the reference: one process
CONF=$SRC/examples/ppo_cartpole.gin
PARAMS=(--conf_param TrainerConfig.num_iterations=150 --conf_param TrainerConfig.evaluate=False)
expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/ref" --conf "$CONF" "${PARAMS[@]}"
# a worker stopped as soon as it exists
"$CALF" train --quiet --root_dir "$WORK/stop" --conf "$CONF" "${PARAMS[@]}" --nproc 2 \
    > "$WORK/stop.out" 2> "$WORK/stop.err" &
LAUNCHER=$!
has_workers() { [ "$(pgrep -P "$LAUNCHER" | wc -l)" -ge 2 ]; }
if wait_for 120 has_workers; then ok; else bad "no workers under the launcher after 120 s"; fi
VICTIM=$(pgrep -P "$LAUNCHER" | sort -n | tail -1)
kill -STOP "$VICTIM"
said() { grep -q "is stopped" "$WORK/stop.err"; }
if wait_for 120 said; then ok; else bad "nothing said of a stopped worker in 120 s"; fi
expect_in "$WORK/stop.err" "(pid $VICTIM) is stopped (SIGSTOP): the other ranks wait for it; kill -CONT $VICTIM resumes the job"
expect_eq "$(grep -c 'is stopped' "$WORK/stop.err")" 1 "said once"
if kill -0 "$LAUNCHER" 2>/dev/null; then ok; else bad "the job ended while a worker was stopped"; fi
kill -CONT "$VICTIM"
wait "$LAUNCHER"
expect_eq "$?" 0 "exit status after kill -CONT"
expect_same_file "$WORK/ref/train/algorithm/ckpt-150" "$WORK/stop/train/algorithm/ckpt-150"

report e2e_workers
