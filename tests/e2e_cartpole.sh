#!/usr/bin/env bash
# e2e_cartpole.sh: the README's main job: examples/ppo_cartpole.gin for its full 391
# iterations. It must learn (greedy evaluation far above a random policy's ~22), leave
# exactly one events file in train/ and one in eval/ with ALF's tags, and play back.
. "$(dirname "$0")/lib_e2e.sh"

R=$WORK/cartpole
T0=$(date +%s)
expect_exit 0 "$CALF" train --root_dir "$R" --conf "$SRC/examples/ppo_cartpole.gin"
T1=$(date +%s)
expect_in "$WORK/err" "iter 391/391"
# the rank log keeps iterations 1..10, the last, and at most one line per 5 s between
expect_in "$R/log/rank-0.log" "iter 10/391"
expect_in "$R/log/rank-0.log" "iter 391/391"
LINES=$(grep -c '^iter ' "$R/log/rank-0.log")
if [ "$LINES" -ge 11 ] && [ "$LINES" -le $((11 + (T1 - T0) / 5 + 1)) ]; then ok
else bad "rank log: $LINES progress lines in $((T1 - T0)) s"; fi
expect_eq "$(ls "$R"/train/events.out.tfevents.* | wc -l)" 1 "train events files"
expect_eq "$(ls "$R"/eval/events.out.tfevents.* | wc -l)" 1 "eval events files"
expect_eq "$(ls "$R"/train/algorithm | tr '\n' ' ')" "ckpt-157 ckpt-235 ckpt-313 ckpt-391 ckpt-79 " "checkpoints kept"
"$CALF" events "$R"/train/events.out.tfevents.* > "$WORK/train_ev" && ok || bad "train events unreadable"
# returns and lengths are written for the iterations in which some episode ended: once
# episodes last 500 steps, 8 envs x 32 steps end none in about every other iteration
for tag in Metrics/AverageReturn Metrics/AverageEpisodeLength; do
    N=$(grep -c " $tag " "$WORK/train_ev")
    if [ "$N" -ge 100 ] && [ "$N" -lt 391 ]; then ok; else bad "$tag: $N records"; fi
done
for tag in Metrics/EnvironmentSteps Metrics/NumberOfEpisodes PPOLoss/pg_loss PPOLoss/td_loss PPOLoss/entropy \
           Optimizer/grad_norm Perf/env_steps_per_sec; do
    expect_eq "$(grep -c " $tag " "$WORK/train_ev")" 391 "$tag records"
done
expect_in "$WORK/train_ev" "391 Metrics/EnvironmentSteps 100096"
# ALF's Metrics_vs_EnvironmentSteps/X: one record for each Metrics/X record
for m in AverageReturn AverageEpisodeLength NumberOfEpisodes; do
    expect_eq "$(grep -c " Metrics_vs_EnvironmentSteps/$m " "$WORK/train_ev")" \
        "$(grep -c " Metrics/$m " "$WORK/train_ev")" "Metrics_vs_EnvironmentSteps/$m records"
done
expect_in "$WORK/train_ev" "100096 Metrics_vs_EnvironmentSteps/NumberOfEpisodes"
"$CALF" events "$R"/eval/events.out.tfevents.* > "$WORK/eval_ev" && ok || bad "eval events unreadable"
expect_eq "$(grep -c ' Metrics/AverageReturn ' "$WORK/eval_ev")" 20 "eval records (every 20 iterations, and the last)"
expect_eq "$(grep -c ' Metrics_vs_EnvironmentSteps/AverageReturn ' "$WORK/eval_ev")" 20 \
    "eval records against env steps"
BEST=$(awk '$2 == "Metrics/AverageReturn" && $3 > m { m = $3 } END { print m + 0 }' "$WORK/eval_ev")
if awk -v b="$BEST" 'BEGIN { exit !(b >= 400) }'; then ok; else bad "best evaluation return $BEST < 400: not learning"; fi
expect_exit 0 "$CALF" play --root_dir "$R" --num_episodes 5
expect_in "$WORK/out" "average return over 5 episodes:"
report e2e_cartpole
