#!/usr/bin/env bash
# e2e_actions.sh: action masks and MultiDiscrete actions end to end, on the tests' envs
# (tests/action_envs.c, a plug-in). PPO learns Test/MaskedChoice-v0's 16 an episode
# without ever taking the action that would pay 10 but is never valid (every row that
# play's greedy acted on is checked against its mask, and the checker is shown to reject
# a doctored row), Test/MultiChoice-v0's 32 with a factored categorical, and the masked
# MultiDiscrete env's 32; DQN on the masked env never takes an invalid action, exploring
# or greedy; the exported C file, given the masks, acts as play does; calf play
# --observations reads masks after the observation; SAC refuses a masked env and DQN a
# MultiDiscrete one, naming them, exit 2, before anything is written. PPO and DQN learn
# Test/DictChoice-v0 through a per-key encoder of its Dict observation.
. "$(dirname "$0")/lib_e2e.sh"

if [ ! -f "${CALF_ACTION_ENVS:-}" ]; then
    echo "skipped: CALF_ACTION_ENVS does not name the action_envs plug-in"
    exit 77
fi
LIB=(--env_lib "$CALF_ACTION_ENVS")
G=$SRC/tests/data/actions

# valid_rows DUMP OD "NVEC": each row of play's dump (OD observation numbers, then the
# mask, sum(NVEC) numbers, then one action per sub-action) takes only valid actions
valid_rows() {
    awk -v od="$2" -v nvec="$3" '
        BEGIN { D = split(nvec, nv, " "); for (d = 1; d <= D; d++) nA += nv[d] }
        { if (NF != od + nA + D) { bad++; next }
          off = od
          for (d = 1; d <= D; d++) {
              a = $(od + nA + d)
              if (a < 0 || a >= nv[d] || $(off + 1 + a) != 1) bad++
              off += nv[d] } rows++ }
        END { exit bad > 0 || rows == 0 }' "$1"
}

# average RUN_OUT: the average return calf play printed
average() { sed -n 's/^average return over [0-9]* episodes: \([0-9.-]*\)$/\1/p' "$1"; }

# train_play NAME GIN [CONF_PARAM...]: train, then play 10 episodes dumping the rows
train_play() {
    local name=$1 gin=$2
    shift 2
    local args=()
    for p in "$@"; do args+=(--conf_param "$p"); done
    expect_exit 0 "$CALF" train --quiet "${LIB[@]}" --root_dir "$WORK/$name" --conf "$gin" "${args[@]}"
    expect_exit 0 "$CALF" play "${LIB[@]}" --root_dir "$WORK/$name" --num_episodes 10 \
        --dump_actions "$WORK/$name.dump"
    cp "$WORK/out" "$WORK/$name.play"
}

# ---- PPO: the masked env, learnt, never an invalid action
train_play masked "$G/ppo_masked_choice.gin"
avg=$(average "$WORK/masked.play")
echo "PPO on Test/MaskedChoice-v0: greedy average return $avg (16 is every target; above 16 an invalid action)"
awk -v a="$avg" 'BEGIN { exit !(a >= 15 && a <= 16) }' && ok || bad "masked: average return $avg, not in [15, 16]"
valid_rows "$WORK/masked.dump" 4 "4" && ok || bad "masked: play took an invalid action"
# the checker rejects a row whose action its mask forbids (the action that pays 10)
sed '1s/ [0-9]*$/ 3/' "$WORK/masked.dump" >"$WORK/doctored.dump"
valid_rows "$WORK/doctored.dump" 4 "4" && bad "the mask checker passed a doctored row" || ok

# ---- a recurrent core with a mask or MultiDiscrete actions: refused, naming the line
for g in ppo_masked_choice ppo_multi_choice; do
    expect_exit 2 "$CALF" train --quiet "${LIB[@]}" --root_dir "$WORK/rec-$g" --conf "$G/$g.gin" \
        --conf_param ActorDistributionNetwork.lstm_hidden_size=8
    expect_in "$WORK/err" "ActorDistributionNetwork.lstm_hidden_size: Test/"
    expect_in "$WORK/err" "which PPO with a recurrent core does not train yet"
done

# ---- PPO: MultiDiscrete, and MultiDiscrete with a mask
train_play multi "$G/ppo_multi_choice.gin"
avg=$(average "$WORK/multi.play")
echo "PPO on Test/MultiChoice-v0: greedy average return $avg (32 is every target)"
awk -v a="$avg" 'BEGIN { exit !(a >= 30 && a <= 32) }' && ok || bad "multi: average return $avg, not in [30, 32]"
train_play mmulti "$G/ppo_multi_choice.gin" "create_environment.env_name='Test/MaskedMultiChoice-v0'"
avg=$(average "$WORK/mmulti.play")
echo "PPO on Test/MaskedMultiChoice-v0: greedy average return $avg (32 is every target; above 32 an invalid action)"
awk -v a="$avg" 'BEGIN { exit !(a >= 30 && a <= 32) }' && ok || bad "masked multi: average return $avg, not in [30, 32]"
valid_rows "$WORK/mmulti.dump" 5 "3 2" && ok || bad "masked multi: play took an invalid action"

# ---- the exported C file, given the masks, and play --observations with masks
if command -v cc >/dev/null; then
    for run in masked:4:4 multi:5:0 mmulti:5:5; do
        IFS=: read -r name od na <<<"$run"
        expect_exit 0 "$CALF" export "${LIB[@]}" --root_dir "$WORK/$name" -o "$WORK/$name.c"
        expect_exit 0 cc -std=c99 -Wall -Wextra -Werror -pedantic -O2 -I"$WORK" \
            -DCALF_POLICY_FILE="\"$name.c\"" "$SRC/tests/export_main.c" -o "$WORK/$name.act" -lm
        "$WORK/$name.act" <"$WORK/$name.dump" >"$WORK/$name.exported" 2>"$WORK/err" ||
            { bad "$name: the exported policy failed"; sed 's/^/  | /' "$WORK/err" >&2; }
        awk -v k=$((od + na)) '{ s = ""; for (i = k + 1; i <= NF; i++) s = s (i > k + 1 ? " " : "") $i; print s }' \
            "$WORK/$name.dump" >"$WORK/$name.actions"
        expect_same_file "$WORK/$name.actions" "$WORK/$name.exported"
    done
else
    echo "export checks skipped: no C compiler (cc)"
fi
# --observations: each line the observation and its mask; every row made valid-but-one
awk '{ $5 = 0; $6 = 0; $7 = 1; $8 = 0; NF = 8; print }' "$WORK/masked.dump" >"$WORK/one.obs"
expect_exit 0 "$CALF" play "${LIB[@]}" --root_dir "$WORK/masked" --observations "$WORK/one.obs" \
    --dump_actions "$WORK/one.dump"
[ -s "$WORK/one.dump" ] && [ "$(awk '$9 != 2' "$WORK/one.dump" | wc -l)" = 0 ] && ok ||
    bad "play --observations did not take the one valid action"
awk '{ $5 = 0; $6 = 0; $7 = 0; $8 = 0; NF = 8; print }' "$WORK/masked.dump" | head -2 >"$WORK/none.obs"
expect_exit 2 "$CALF" play "${LIB[@]}" --root_dir "$WORK/masked" --observations "$WORK/none.obs" \
    --dump_actions "$WORK/none.dump"
expect_in "$WORK/err" "its mask allows no action"

# ---- DQN on the masked env: exploring (epsilon 1 at first) and greedy, never invalid.
# A random valid action pays 1 in 2 (below 16 an episode); one invalid action in an
# episode pays 10, so every training episode's return stays at most 16.
cat >"$WORK/dqn.gin" <<GIN
include '$SRC/examples/dqn_cartpole.gin'
create_environment.env_name = 'Test/MaskedChoice-v0'
TrainerConfig.num_env_steps = 0
TrainerConfig.num_iterations = 60
TrainerConfig.initial_collect_steps = 200
TrainerConfig.evaluate = False
TrainerConfig.num_checkpoints = 1
TrainerConfig.summary_interval = 1
GIN
expect_exit 0 "$CALF" train "${LIB[@]}" --root_dir "$WORK/dqn" --conf "$WORK/dqn.gin"
expect_exit 0 "$CALF" events --csv "$WORK"/dqn/train/events.out.tfevents.*
grep -E '(^|,)Metrics/AverageReturn,' "$WORK/out" >"$WORK/dqn.returns"
[ -s "$WORK/dqn.returns" ] && awk -F, '{ if ($NF + 0 > 16) bad++ } END { exit bad > 0 }' "$WORK/dqn.returns" &&
    ok || bad "DQN on the masked env: a training episode's return above 16 (an invalid action)"
expect_exit 0 "$CALF" play "${LIB[@]}" --root_dir "$WORK/dqn" --num_episodes 5 --dump_actions "$WORK/dqn.dump"
valid_rows "$WORK/dqn.dump" 4 "4" && ok || bad "DQN's greedy took an invalid action"

# ---- what cannot train them is refused by name, before anything is written
printf "include '%s'\ncreate_environment.env_name = 'Test/MaskedChoice-v0'\n" \
    "$SRC/examples/sac_cartpole.gin" >"$WORK/sac.gin"
expect_exit 2 "$CALF" train --quiet "${LIB[@]}" --root_dir "$WORK/sac" --conf "$WORK/sac.gin"
expect_in "$WORK/err" "SacAlgorithm cannot train with an action mask; Test/MaskedChoice-v0"
[ ! -e "$WORK/sac/train" ] && ok || bad "a refused SAC config left files"
printf "include '%s'\ncreate_environment.env_name = 'Test/MultiChoice-v0'\n" \
    "$SRC/examples/dqn_cartpole.gin" >"$WORK/dqnmd.gin"
expect_exit 2 "$CALF" train --quiet "${LIB[@]}" --root_dir "$WORK/dqnmd" --conf "$WORK/dqnmd.gin"
expect_in "$WORK/err" "DqnAlgorithm cannot train a MultiDiscrete action space; Test/MultiChoice-v0"

# ---- a Dict observation encoded per key (Test/DictChoice-v0: 'step', a 4x4 'image',
# 'flip'): PPO and DQN with a conv layer on the image and the vectors beside it learn
# 16 an episode, which needs both the image and the flag (the image alone: about 8).
# (tests/e2e_export.sh checks the exported file of such a policy.)
train_play dict "$G/ppo_dict_choice.gin"
avg=$(average "$WORK/dict.play")
echo "PPO on Test/DictChoice-v0: greedy average return $avg (16 is every target, about 8 the image alone)"
awk -v a="$avg" 'BEGIN { exit !(a >= 13 && a <= 16) }' && ok || bad "dict PPO: average return $avg, not in [13, 16]"
cat >"$WORK/dqn-dict.gin" <<GIN
include '$SRC/examples/dqn_cartpole.gin'
create_environment.env_name = 'Test/DictChoice-v0'
create_environment.num_parallel_environments = 4
q/QNetwork.conv_layer_params = ((8, 2, 2),)
q/QNetwork.fc_layer_params = (32,)
TrainerConfig.num_env_steps = 12000
TrainerConfig.initial_collect_steps = 1000
TrainerConfig.evaluate = False
TrainerConfig.num_checkpoints = 1
critic/Adam.lr = 1e-3
OneStepTDLoss.gamma = 0.5
DqnAlgorithm.exploration_fraction = 0.3
GIN
train_play dict-dqn "$WORK/dqn-dict.gin"
avg=$(average "$WORK/dict-dqn.play")
echo "DQN on Test/DictChoice-v0: greedy average return $avg"
awk -v a="$avg" 'BEGIN { exit !(a >= 13 && a <= 16) }' && ok || bad "dict DQN: average return $avg, not in [13, 16]"
report e2e_actions
