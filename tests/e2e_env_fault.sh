#!/usr/bin/env bash
# e2e_env_fault.sh: an environment that returns a NaN or infinite reward or observation is
# reported as the environment's fault (exit 2: the environment is bad input), naming it,
# its plug-in and the env index that did it, not an iteration later as a gradient that is
# not finite. A plug-in compiled here registers two such classes (PPO on a discrete one
# whose reward turns NaN, SAC on a continuous one whose observation turns infinite); each
# env turns bad at a step drawn at its reset, so the env that does it first is found with
# `calf env`, per index.
. "$(dirname "$0")/lib_e2e.sh"

CC=${CC:-cc}
if ! command -v "$CC" >/dev/null; then echo "skipped: no C compiler ($CC) for the plug-in"; exit 77; fi

"$CC" -shared -fPIC -I"$SRC/include" -x c - -o "$WORK/bad_envs.so" <<'C' || { echo "FAIL: cc" >&2; exit 1; }
#include <math.h>
#include "calf/env.h"
typedef struct { int t, bad_at; } st;
static void reset(void *s, calf_rng *g, float *obs) {
    st *x = s;
    x->t = 0;
    x->bad_at = 3 + (int)calf_rng_below(g, 12);
    obs[0] = 0;
    obs[1] = 1;
}
static int step(st *x, float *obs, float *reward, int bad_reward) {
    x->t++;
    int bad = x->t >= x->bad_at;
    obs[0] = (float)x->t;
    obs[1] = bad && !bad_reward ? INFINITY : 1;
    *reward = bad && bad_reward ? NAN : 1;
    return 0;
}
static int step_nan(void *s, calf_rng *g, int a, const float *u, float *obs, float *reward) {
    (void)g; (void)a; (void)u;
    return step(s, obs, reward, 1);
}
static int step_inf(void *s, calf_rng *g, int a, const float *u, float *obs, float *reward) {
    (void)g; (void)a; (void)u;
    return step(s, obs, reward, 0);
}
static const float lo[1] = {-1}, hi[1] = {1};
static const calf_env_class nan_reward = {
    .spec = {.name = "NanReward-v0", .obs_dim = 2, .num_actions = 2, .max_episode_steps = 100,
             .state_size = sizeof(st)},
    .reset = reset, .step = step_nan};
static const calf_env_class inf_obs = {
    .spec = {.name = "InfObs-v0", .obs_dim = 2, .action_dim = 1, .action_low = lo,
             .action_high = hi, .max_episode_steps = 100, .state_size = sizeof(st)},
    .reset = reset, .step = step_inf};
int calf_plugin_register(int abi_version, calf_error *err) {
    int rc = CALF_PLUGIN_CHECK_ABI(abi_version, err);
    if (rc == CALF_OK) rc = calf_env_register(&nan_reward, err);
    return rc == CALF_OK ? calf_env_register(&inf_obs, err) : rc;
}
C
LIB=$(realpath "$WORK/bad_envs.so")

# first_bad NAME COLUMN: the env index (of 0..3, seed 7) whose value in COLUMN of `calf env`'s
# rows is first not finite (the earliest step; the lowest index on a tie), and that step
first_bad() {
    local i best_i=-1 best_t=999 t
    for i in 0 1 2 3; do
        "$CALF" env "$1" --env_lib "$LIB" --seed 7 --index $i --steps 20 >"$WORK/env_$i" || return 1
        t=$(awk -v c="$2" '!/^#/ && ($c ~ /nan|inf/) { print $1; exit }' "$WORK/env_$i")
        [ -n "$t" ] && [ "$t" -lt "$best_t" ] && { best_t=$t; best_i=$i; }
    done
    echo "$best_i $best_t"
}

# NanReward-v0 rows: step action obs0 obs1 reward ...; InfObs-v0: step u obs0 obs1 reward ...
read -r nan_i nan_t < <(first_bad NanReward-v0 5)
read -r inf_i inf_t < <(first_bad InfObs-v0 4)
[ "$nan_i" -ge 0 ] && [ "$inf_i" -ge 0 ] && ok || bad "calf env shows no bad value: $nan_i $inf_i"
echo "first bad reward: env $nan_i at step $nan_t; first bad observation: env $inf_i at step $inf_t"

cat >"$WORK/ppo.gin" <<'GIN'
create_environment.env_name = "NanReward-v0"
create_environment.num_parallel_environments = 4
TrainerConfig.random_seed = 7
TrainerConfig.unroll_length = 16
TrainerConfig.mini_batch_size = 32
TrainerConfig.num_iterations = 3
TrainerConfig.evaluate = False
GIN
expect_exit 2 "$CALF" train --quiet --env_lib "$LIB" --root_dir "$WORK/ppo" --conf "$WORK/ppo.gin"
expect_in "$WORK/err" "environment NanReward-v0 of plug-in $LIB, env index $nan_i: step $nan_t of its episode returned a non-finite reward (nan)"
expect_in "$WORK/err" "the environment is at fault, not training"
expect_not_in "$WORK/err" "gradient"
# the job's processes each check their own envs: two processes say the same
expect_exit 2 "$CALF" train --quiet --env_lib "$LIB" --root_dir "$WORK/ppo2" --conf "$WORK/ppo.gin" --nproc 2
expect_in "$WORK/err" "environment NanReward-v0 of plug-in $LIB, env index"
expect_not_in "$WORK/err" "gradient"

cat >"$WORK/sac.gin" <<GIN
include '$(realpath "$SRC")/examples/sac_pendulum.gin'
create_environment.env_name = "InfObs-v0"
create_environment.num_parallel_environments = 4
TrainerConfig.random_seed = 7
TrainerConfig.initial_collect_steps = 8
TrainerConfig.num_env_steps = 0
TrainerConfig.num_iterations = 30
TrainerConfig.evaluate = False
GIN
expect_exit 2 "$CALF" train --quiet --env_lib "$LIB" --root_dir "$WORK/sac" --conf "$WORK/sac.gin"
expect_in "$WORK/err" "environment InfObs-v0 of plug-in $LIB, env index $inf_i: step $inf_t of its episode returned a non-finite observation (obs[1] = inf)"

report e2e_env_fault
