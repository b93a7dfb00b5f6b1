#!/usr/bin/env bash
# e2e_train.sh: single-process training end to end: the files a run leaves, summaries,
# checkpoints, exact resume, fallback past a corrupted checkpoint, config-digest refusal,
# calf play, the continuous-action path, and the machine's limits (ulimit -f, out of
# memory) as ordinary failures.
. "$(dirname "$0")/lib_e2e.sh"

cat > "$WORK/small.gin" <<'GIN'
include 'base.gin'
TrainerConfig.num_iterations = 6
GIN
cat > "$WORK/base.gin" <<'GIN'
create_environment.env_name = "CartPole-v1"
create_environment.num_parallel_environments = 8
TrainerConfig.random_seed = 3
TrainerConfig.unroll_length = 16
TrainerConfig.mini_batch_size = 32
TrainerConfig.num_updates_per_train_iter = 2
TrainerConfig.num_checkpoints = 3
TrainerConfig.evaluate = True
TrainerConfig.eval_interval = 3
TrainerConfig.num_eval_episodes = 2
TrainerConfig.summarize_grads_and_vars = True
PPOLoss.entropy_regularization = 0.01
Adam.gradient_clipping = 0.5
GIN

A=$WORK/a
expect_exit 0 "$CALF" train --quiet --root_dir "$A" --conf "$WORK/small.gin"
for f in config.gin log/rank-0.log train/algorithm/ckpt-2 train/algorithm/ckpt-4 train/algorithm/ckpt-6; do
    if [ -f "$A/$f" ]; then ok; else bad "missing $f"; fi
done
expect_eq "$(ls "$A"/train/events.out.tfevents.* | wc -l)" 1 "train events files"
expect_eq "$(ls "$A"/eval/events.out.tfevents.* | wc -l)" 1 "eval events files"
expect_eq "$(ls "$A"/log | wc -l)" 1 "log files"
expect_in "$A/log/rank-0.log" "rank 0/1: environments 0..7 (8 of 8)"
expect_in "$A/config.gin" "TrainerConfig.num_iterations = 6  # $WORK/small.gin:2"
expect_in "$A/config.gin" "create_environment.num_parallel_environments = 8  # $WORK/base.gin:2"

# every record of the events files checks out, with the tags users look for
expect_exit 0 "$CALF" events "$A"/train/events.out.tfevents.*
cp "$WORK/out" "$WORK/train_events"
for tag in "file_version brain.Event:2" "6 Metrics/AverageReturn" "6 Metrics/AverageEpisodeLength" \
           "6 Metrics/EnvironmentSteps 768" "6 Metrics/NumberOfEpisodes" "6 PPOLoss/pg_loss" \
           "6 PPOLoss/td_loss" "6 PPOLoss/entropy" "6 Optimizer/grad_norm" \
           "6 Perf/env_steps_per_sec" "6 Params/actor" "6 Grads/value"; do
    expect_in "$WORK/train_events" "$tag"
done
# ALF's Metrics_vs_EnvironmentSteps/X: the same values, the env-step count as step
# (128 per iteration here); EnvironmentSteps is not written against itself
for m in AverageReturn AverageEpisodeLength NumberOfEpisodes; do
    expect_in "$WORK/train_events" "768 Metrics_vs_EnvironmentSteps/$m "
    expect_eq "$(sed -n "s|^6 Metrics/$m ||p" "$WORK/train_events")" \
        "$(sed -n "s|^768 Metrics_vs_EnvironmentSteps/$m ||p" "$WORK/train_events")" "$m against env steps"
done
expect_not_in "$WORK/train_events" "Metrics_vs_EnvironmentSteps/EnvironmentSteps"
expect_exit 0 "$CALF" events "$A"/eval/events.out.tfevents.*
expect_in "$WORK/out" "3 Metrics/AverageReturn"
expect_in "$WORK/out" "6 Metrics/AverageReturn"
expect_in "$WORK/out" "768 Metrics_vs_EnvironmentSteps/AverageReturn "
expect_eq "$(sed -n 's|^6 Metrics/AverageReturn ||p' "$WORK/out")" \
    "$(sed -n 's|^768 Metrics_vs_EnvironmentSteps/AverageReturn ||p' "$WORK/out")" "eval return against env steps"

# resume is exact: 3 iterations, then resume to 6, equals 6 straight
B=$WORK/b
expect_exit 0 "$CALF" train --quiet --root_dir "$B" --conf "$WORK/small.gin" \
    --conf_param TrainerConfig.num_iterations=3
expect_exit 0 "$CALF" train --root_dir "$B" --conf "$WORK/small.gin"
expect_in "$WORK/err" "resuming from $B/train/algorithm/ckpt-3 (iteration 3)"
expect_same_file "$A/train/algorithm/ckpt-6" "$B/train/algorithm/ckpt-6"
expect_eq "$(ls "$B"/train/events.out.tfevents.* | wc -l)" 2 "one events file per launch"

# resuming without --conf uses the operative config; a finished run has nothing to do
expect_exit 0 "$CALF" train --root_dir "$A"
expect_in "$WORK/err" "nothing to do"

# a changed config is refused (only run length and cadence may change)
expect_exit 2 "$CALF" train --root_dir "$B" --conf "$WORK/small.gin" --conf_param PPOLoss.gamma=0.9
expect_in "$WORK/err" "was written by a different config: PPOLoss.gamma = 0.9 (was 0.99) (only the run length"
# without the operative config beside it, which binding changed is not known
mv "$B/config.gin" "$WORK/b_config.gin"
expect_exit 2 "$CALF" train --root_dir "$B" --conf "$WORK/small.gin" --conf_param PPOLoss.gamma=0.9
expect_in "$WORK/err" "was written by a different config (only the run length"
mv "$WORK/b_config.gin" "$B/config.gin"

# a corrupted newest checkpoint is reported and the previous one used; the rerun
# iterations reproduce the lost checkpoint exactly
for how in flip truncate; do
    C=$WORK/c_$how
    cp -r "$A" "$C"
    if [ $how = flip ]; then
        printf '\x55' | dd of="$C/train/algorithm/ckpt-6" bs=1 seek=100 conv=notrunc 2>/dev/null
    else
        truncate -s 300 "$C/train/algorithm/ckpt-6"
    fi
    expect_exit 0 "$CALF" train --root_dir "$C" --conf "$WORK/small.gin"
    expect_in "$WORK/err" "ckpt-6"
    expect_in "$WORK/err" "resuming from $C/train/algorithm/ckpt-4 (iteration 4)"
    expect_same_file "$A/train/algorithm/ckpt-6" "$C/train/algorithm/ckpt-6"
done

# calf play on the run
expect_exit 0 "$CALF" play --root_dir "$A" --num_episodes 3
expect_in "$WORK/out" "episode 3: return"
expect_in "$WORK/out" "average return over 3 episodes:"
# --seed with the run's seed replays its last evaluation's episodes: the same average
EV=$(sed -n 's/^eval iter 6: average return \([-0-9.]*\) over 2 episodes$/\1/p' "$A/log/rank-0.log")
expect_exit 0 "$CALF" play --root_dir "$A" --num_episodes 2 --seed 3
expect_in "$WORK/out" "average return over 2 episodes: ${EV:-missing}"
expect_exit 2 "$CALF" play --root_dir "$WORK/nowhere"
expect_exit 2 "$CALF" play --root_dir "$A" --checkpoint "$WORK/small.gin"
expect_in "$WORK/err" "not a calf checkpoint"
# play's and events' output that cannot be written: exit 1, not a silent 0
expect_write_fails "error writing output" "$CALF" play --root_dir "$A" --num_episodes 1
expect_write_fails "events: write: No space left on device" \
    "$CALF" events "$A"/train/events.out.tfevents.*

# continuous and other discrete envs train and resume exactly too
for env in Pendulum-v1 Acrobot-v1 MountainCarContinuous-v0 MountainCar-v0; do
    P=$WORK/p_$env
    Q=$WORK/q_$env
    expect_exit 0 "$CALF" train --quiet --root_dir "$P" --conf "$WORK/base.gin" \
        --conf_param "create_environment.env_name='$env'" --conf_param TrainerConfig.num_iterations=4
    expect_exit 0 "$CALF" train --quiet --root_dir "$Q" --conf "$WORK/base.gin" \
        --conf_param "create_environment.env_name='$env'" --conf_param TrainerConfig.num_iterations=2
    expect_exit 0 "$CALF" train --quiet --root_dir "$Q" --conf "$WORK/base.gin" \
        --conf_param "create_environment.env_name='$env'" --conf_param TrainerConfig.num_iterations=4
    expect_same_file "$P/train/algorithm/ckpt-4" "$Q/train/algorithm/ckpt-4"
done
# Ctrl-C on one process: finish the iteration, checkpoint, exit 130, resume from there
I=$WORK/int1
interrupt_after "$I" "$CALF" train --quiet --root_dir "$I" --conf "$WORK/base.gin" \
    --conf_param TrainerConfig.num_iterations=1000000 --conf_param TrainerConfig.num_checkpoints=0
expect_eq "$INT_STATUS" 130 "exit status after SIGINT (one process)"
LAST=$(ls "$I"/train/algorithm | sed 's/ckpt-//' | sort -n | tail -1)
if [ -n "$LAST" ]; then ok; else bad "no checkpoint after SIGINT"; fi
expect_in "$I/log/rank-0.log" "interrupted: stopped after iteration $LAST"
# the first Ctrl-C says what a second one does (it ends the process by the signal)
expect_in "$WORK/int_err" "calf: interrupted: finishing this iteration and writing its checkpoint; Ctrl-C again stops at once, without it"

# A resume after a crash: what the dead launch wrote past its last checkpoint is cut from
# the events files on each tag's own axis (iterations; env steps for
# Metrics_vs_EnvironmentSteps/*), and no restart marker is written (one at K+1 would also
# hide every earlier env-step value), so every tag shows each step exactly once
TB=$WORK/marker
FOUR=(--conf "$WORK/base.gin" --conf_param TrainerConfig.num_iterations=4 --conf_param TrainerConfig.num_checkpoints=2)
expect_exit 0 "$CALF" train --quiet --root_dir "$TB" "${FOUR[@]}"
expect_exit 0 "$CALF" train --quiet --root_dir "$TB" "${FOUR[@]}" --conf_param TrainerConfig.num_iterations=6
"$CALF" events "$TB"/train/events.out.tfevents.* >"$WORK/tb" && ok || bad "events unreadable"
expect_eq "$(grep -c session_start "$WORK/tb")" 1 "markers after a clean resume (the run's start only)"
expect_eq "$(grep -c ' Metrics_vs_EnvironmentSteps/NumberOfEpisodes ' "$WORK/tb")" 6 "env-step values kept"
# the crash: a run of 6 iterations (checkpoints 2, 4, 6, evaluating every iteration)
# loses ckpt-4 and ckpt-6, and resumes from ckpt-2 over summaries through iteration 6
TB=$WORK/crash
SIX=(--conf "$WORK/base.gin" --conf_param TrainerConfig.num_iterations=6 --conf_param TrainerConfig.num_checkpoints=3
     --conf_param TrainerConfig.eval_interval=1)
expect_exit 0 "$CALF" train --quiet --root_dir "$TB" "${SIX[@]}"
rm "$TB"/train/algorithm/ckpt-6 "$TB"/train/algorithm/ckpt-4
expect_exit 0 "$CALF" train --quiet --root_dir "$TB" "${SIX[@]}"
expect_in "$TB/log/rank-0.log" "resuming from $TB/train/algorithm/ckpt-2 (iteration 2)"
for sub in train eval; do
    "$CALF" events "$TB"/$sub/events.out.tfevents.* >"$WORK/tb" && ok || bad "$sub events unreadable"
    expect_eq "$(grep -c session_start "$WORK/tb")" 1 "$sub markers after a crash-like resume"
    # every tag's steps, each once: 1..6 on iterations, 128..768 on env steps (8 envs x 16)
    awk '$2 != "session_start" && $1 != "file_version" {
             n[$2]++; if (seen[$2 " " $1]++) dup = dup " " $2 "@" $1 }
         END { for (t in n) print t, n[t]; if (dup) print "DUPLICATE" dup }' "$WORK/tb" >"$WORK/counts"
    expect_not_in "$WORK/counts" "DUPLICATE"
    awk '$1 ~ /^Metrics\/(EnvironmentSteps|NumberOfEpisodes|AverageReturn)$/ && $2 != 6 { print }
         $1 ~ /^Metrics_vs_EnvironmentSteps\/(NumberOfEpisodes|AverageReturn)$/ && $2 != 6 { print }' \
        "$WORK/counts" >"$WORK/short"
    if [ "$sub" = train ]; then
        expect_eq "$(grep -c '' "$WORK/short")" 0 "train tags with other than 6 steps: $(tr '\n' ' ' <"$WORK/short")"
    fi
done
steps=$(awk '$2 == "Metrics_vs_EnvironmentSteps/AverageReturn" {printf "%s ", $1}' "$WORK/tb")
expect_eq "$steps" "128 256 384 512 640 768 " "eval's env-step axis after the crash-like resume"

# memory does not grow with the number of iterations (not measurable under ASan)
if ldd "$CALF" 2>/dev/null | grep -q libasan; then
    echo "e2e_train: peak-RSS check skipped under AddressSanitizer"
else
    for n in 5 60; do
        expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/rss$n" --conf "$WORK/base.gin" \
            --conf_param TrainerConfig.num_iterations=$n
    done
    R5=$(sed -n 's/.*peak RSS \([0-9.]*\) MiB.*/\1/p' "$WORK/rss5/log/rank-0.log")
    R60=$(sed -n 's/.*peak RSS \([0-9.]*\) MiB.*/\1/p' "$WORK/rss60/log/rank-0.log")
    if awk -v a="$R5" -v b="$R60" 'BEGIN { exit !(a > 0 && b < 50 && b - a < 1.0) }'; then ok
    else bad "peak RSS $R5 MiB after 5 iterations, $R60 MiB after 60"; fi
fi
# ulimit -f: exit 1 saying so (it was death by SIGXFSZ), no temp file, resume exact
R=$WORK/fsize
(ulimit -f 8; exec "$CALF" train --quiet --root_dir "$R" --conf "$SRC/examples/ppo_cartpole.gin" \
    --conf_param TrainerConfig.num_iterations=2) 2>"$WORK/err"
expect_eq $? 1 "exit status past ulimit -f"
expect_in "$WORK/err" "$R/train/algorithm/ckpt-1.tmp."
expect_in "$WORK/err" "File too large"
expect_eq "$(find "$R" -name '*.tmp*')" "" "temporary files past ulimit -f"
expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/fsize_ref" --conf "$SRC/examples/ppo_cartpole.gin" \
    --conf_param TrainerConfig.num_iterations=2
expect_exit 0 "$CALF" train --quiet --root_dir "$R" --conf "$SRC/examples/ppo_cartpole.gin" \
    --conf_param TrainerConfig.num_iterations=2
expect_same_file "$WORK/fsize_ref/train/algorithm/ckpt-2" "$R/train/algorithm/ckpt-2"

# out of memory: exit 1 with an ordinary message (it was an abort, exit 134)
if ldd "$CALF" 2>/dev/null | grep -q libasan; then
    echo "e2e_train: out-of-memory check skipped: AddressSanitizer reserves more address space than ulimit -v allows"
else
    BIG='(1024,1024,1024,1024,1024,1024,1024)'
    (ulimit -v 100000; exec "$CALF" train --quiet --root_dir "$WORK/oom" --conf "$SRC/examples/ppo_cartpole.gin" \
        --conf_param "ActorDistributionNetwork.fc_layer_params=$BIG" \
        --conf_param "ValueNetwork.fc_layer_params=$BIG") 2>"$WORK/err"
    expect_eq $? 1 "exit status out of memory"
    expect_in "$WORK/err" "calf: out of memory allocating"
    expect_not_in "$WORK/err" "internal error"
    expect_eq "$(find "$WORK/oom" -name '*.tmp*')" "" "temporary files after running out of memory"
fi

report e2e_train
