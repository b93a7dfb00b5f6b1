#!/usr/bin/env bash
# e2e_examples.sh: every example trains and plays (ALF's train_play_test). Each
# examples/*.gin, found here by itself so none can land untested, trains a few
# iterations (run length, evaluation episodes and initial collection overridden, and for
# the MinAtar examples the batch: SMALL_BATCH below; nothing else) on 1 process
# and on --nproc 2, whose checkpoints must be the same bytes, and `calf play` runs the
# result. An example with one env runs both with two, as --nproc 2 needs. An example
# whose environment needs an optional dependency that this build lacks is skipped,
# saying which (OPTIONAL_ENVS below); any other unknown environment is a failure.
. "$(dirname "$0")/lib_e2e.sh"

# environment name -> what it needs, for environments calf builds only when that is there
declare -A OPTIONAL_ENVS=()
for env in InvertedPendulum-v4 HalfCheetah-v4 Hopper-v4 Walker2d-v4 Ant-v4 \
    InvertedDoublePendulum-v4 Swimmer-v4 Reacher-v4 Pusher-v4 Humanoid-v4 HumanoidStandup-v4; do
    OPTIONAL_ENVS[$env]="MuJoCo (apt-get install libmujoco-dev)"
done

# One evaluation episode, not the example's ten: HumanoidStandup's never end before 1,000
# steps, and its ten took half of this test's time.
QUICK=(TrainerConfig.num_iterations=3 TrainerConfig.num_env_steps=0 TrainerConfig.initial_collect_steps=1
    TrainerConfig.num_eval_episodes=1)
# The MinAtar examples' batches (PPO: 64 envs x 128 steps, 4 epochs of 1,024 through conv
# nets; DQN: a replay of 100,000) took tens of seconds a run here: their few iterations
# run on 4 envs x 8 steps, minibatches of 16 and a replay of 1,000.
SMALL_BATCH=(create_environment.num_parallel_environments=4 TrainerConfig.unroll_length=8
    TrainerConfig.mini_batch_size=16 TrainerConfig.replay_buffer_length=1000)

# train_run ROOT NPROC GIN [Scope.param=value]...
train_run() {
    local root=$1 nproc=$2 gin=$3
    shift 3
    expect_exit 0 "$CALF" train --quiet --nproc "$nproc" --root_dir "$root" --conf "$gin" \
        $(printf -- '--conf_param %s ' "${QUICK[@]}" "$@")
}

# same_checkpoints A B: the two runs wrote the same checkpoint files, byte for byte
same_checkpoints() {
    local a="$1/train/algorithm" b="$2/train/algorithm"
    local la lb
    la=$(cd "$a" 2>/dev/null && ls ckpt-* 2>/dev/null | tr '\n' ' ')
    lb=$(cd "$b" 2>/dev/null && ls ckpt-* 2>/dev/null | tr '\n' ' ')
    if [ -n "$la" ] && [ "$la" = "$lb" ]; then ok; else bad "checkpoints differ: '$la' vs '$lb'"; return; fi
    local f
    for f in $la; do expect_same_file "$a/$f" "$b/$f"; done
}

count=0
for gin in "$SRC"/examples/*.gin; do
    name=$(basename "$gin" .gin)
    count=$((count + 1))
    echo "== $name"
    R1="$WORK/$name-1" R2="$WORK/$name-2"
    extra=()
    case $name in *minatar*) extra=("${SMALL_BATCH[@]}") ;; esac
    "$CALF" train --quiet --root_dir "$R1" --conf "$gin" \
        $(printf -- '--conf_param %s ' "${QUICK[@]}" "${extra[@]}") >"$WORK/out" 2>"$WORK/err"
    status=$?
    env_name=$(sed -n "s/.*unknown environment '\([^']*\)'.*/\1/p; s/.*environment '\([^']*\)' needs .*/\1/p" \
        "$WORK/err" | head -1)
    if [ "$status" = 2 ] && [ -n "$env_name" ] && [ -n "${OPTIONAL_ENVS[$env_name]+x}" ]; then
        echo "skipped $name: $env_name needs ${OPTIONAL_ENVS[$env_name]}, which this build lacks"
        continue
    fi
    if [ "$status" = 0 ]; then ok; else bad "$name: exit $status on 1 process"; sed 's/^/  | /' "$WORK/err" >&2; continue; fi
    E=$(sed -n 's/^create_environment.num_parallel_environments = \([0-9]*\).*/\1/p' "$R1/config.gin")
    if [ -n "$E" ] && [ "$E" -lt 2 ]; then
        echo "  $E env: both runs with 2, for --nproc 2"
        extra=(create_environment.num_parallel_environments=2)
        rm -rf "$R1"
        train_run "$R1" 1 "$gin" "${extra[@]}"
    fi
    train_run "$R2" 2 "$gin" "${extra[@]}"
    same_checkpoints "$R1" "$R2"
    expect_exit 0 "$CALF" play --root_dir "$R2" --num_episodes 2
    expect_in "$WORK/out" "average return over 2 episodes"
    head -1 "$WORK/out" | sed 's/^/  /'
done
if [ "$count" -ge 5 ]; then ok; else bad "only $count examples found in $SRC/examples"; fi

report e2e_examples
