#!/usr/bin/env bash
# e2e_eval_cap.sh: an env without a time limit (MinAtar's games, a Python env without
# one) under a policy that never loses: the trainer's evaluation and `calf play` end each
# episode at TrainerConfig.eval_max_episode_steps, count its return so far, and warn once,
# naming the env and the cap. The env is a plug-in whose episodes never end; without the
# cap the run and the play would never return (`timeout` only guards the harness: the
# checks are on the output; -k, since a trainer stuck in its evaluation only takes SIGTERM
# as "stop after this iteration").
. "$(dirname "$0")/lib_e2e.sh"

CC=${CC:-cc}
"$CC" -shared -fPIC -I"$SRC/include" -x c - -o "$WORK/forever.so" <<'C' || { bad "cc failed"; report e2e_eval_cap; exit 1; }
#include <stdint.h>
#include <string.h>
#include "calf/env.h"
/* One cell, reward 1 a step, never terminated, no time limit. */
static void r(void *s, calf_rng *g, float *o) { (void)s; (void)g; o[0] = 0; }
static int st(void *s, calf_rng *g, int a, const float *u, float *o, float *rew) {
    (void)s; (void)g; (void)a; (void)u; o[0] = 0; *rew = 1; return 0;
}
static int draw(const void *s, int w, int h, uint8_t *rgb, calf_error *e) {
    (void)s; (void)e; memset(rgb, 128, (size_t)w * h * 3); return CALF_OK;
}
static const calf_env_class cls = {
    .spec = {.name = "Forever-v0", .obs_dim = 1, .num_actions = 2,
             .max_episode_steps = INT32_MAX, .state_size = 4},
    .reset = r, .step = st, .render = draw, .render_fps = 30};
int calf_plugin_register(int abi_version, calf_error *err) {
    int rc = CALF_PLUGIN_CHECK_ABI(abi_version, err);
    return rc != CALF_OK ? rc : calf_env_register(&cls, err);
}
C

cat > "$WORK/forever.gin" <<'GIN'
create_environment.env_name = "Forever-v0"
create_environment.num_parallel_environments = 4
TrainerConfig.unroll_length = 8
TrainerConfig.mini_batch_size = 16
TrainerConfig.num_iterations = 2
TrainerConfig.evaluate = True
TrainerConfig.eval_interval = 1
TrainerConfig.num_eval_episodes = 3
TrainerConfig.eval_max_episode_steps = 40
GIN

# two evaluations, every episode capped: one warning, in the rank log and on stderr
expect_exit 0 timeout -k 10 100 "$CALF" train --env_lib "$WORK/forever.so" --root_dir "$WORK/run" \
    --conf "$WORK/forever.gin"
LINE="warning: Forever-v0: 3 of 3 greedy episodes reached TrainerConfig.eval_max_episode_steps = 40 before the env ended them"
expect_in "$WORK/err" "$LINE"
expect_eq "$(grep -c "eval_max_episode_steps" "$WORK/err")" 1 "warnings on stderr"
expect_eq "$(grep -c "eval_max_episode_steps" "$WORK/run/log/rank-0.log")" 1 "warnings in the rank log"
# the capped episodes' return counts: 40 steps of reward 1, in both evaluations
expect_eq "$(grep -c "average return 40.000 over 3 episodes" "$WORK/run/log/rank-0.log")" 2 \
    "evaluations that averaged the capped returns"
expect_in "$WORK/run/config.gin" "TrainerConfig.eval_max_episode_steps = 40  # $WORK/forever.gin:9"

# play reads the cap from the run's config.gin: ends, reports 40, warns once on stderr
expect_exit 0 timeout -k 10 100 "$CALF" play --env_lib "$WORK/forever.so" --root_dir "$WORK/run" \
    --num_episodes 5
expect_in "$WORK/out" "average return over 5 episodes: 40.000"
expect_in "$WORK/err" "calf play: warning: Forever-v0: 5 of 5 greedy episodes reached TrainerConfig.eval_max_episode_steps = 40"
expect_eq "$(grep -c "eval_max_episode_steps" "$WORK/err")" 1 "play's warnings"
# --video plays the same capped episodes, one after another
if "$CALF" --version | grep -q "^videos (calf play --video): built in"; then
    expect_exit 0 timeout -k 10 100 "$CALF" play --env_lib "$WORK/forever.so" --root_dir "$WORK/run" \
        --num_episodes 2 --video "$WORK/v.gif" --width 16 --height 16
    expect_in "$WORK/out" "average return over 2 episodes: 40.000"
    expect_in "$WORK/out" "82 frames"   # each episode: its reset and 40 steps
    expect_eq "$(grep -c "eval_max_episode_steps" "$WORK/err")" 1 "--video's warnings"
else
    echo "e2e_eval_cap: the --video check is skipped: no video support"
fi

# an env whose own time limit ends the episodes first is not capped, and says nothing
cat > "$WORK/cartpole.gin" <<'GIN'
create_environment.num_parallel_environments = 4
TrainerConfig.unroll_length = 8
TrainerConfig.mini_batch_size = 16
TrainerConfig.num_iterations = 1
TrainerConfig.evaluate = True
TrainerConfig.num_eval_episodes = 2
GIN
expect_exit 0 timeout -k 10 100 "$CALF" train --root_dir "$WORK/cp" --conf "$WORK/cartpole.gin"
expect_not_in "$WORK/err" "eval_max_episode_steps"
expect_exit 0 timeout -k 10 100 "$CALF" play --root_dir "$WORK/cp" --num_episodes 2
expect_not_in "$WORK/err" "eval_max_episode_steps"

report e2e_eval_cap
