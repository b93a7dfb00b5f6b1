#!/usr/bin/env bash
# e2e_ddp.sh: the seed's testing section, automated: --nproc N splits the envs, only rank
# 0 writes summaries/checkpoints/config, checkpoints are byte-identical for N = 1..4 (even
# and uneven blocks), a 2-process checkpoint resumes on 3, a killed rank stops the job
# fast with nothing left behind, and Ctrl-C checkpoints and exits 130.
. "$(dirname "$0")/lib_e2e.sh"

CONF=$WORK/ppo64.gin   # the 64-env job this test was written for
ppo64_gin "$CONF"
run() { # run ROOT NPROC [more args]
    local root=$1 n=$2; shift 2
    expect_exit 0 "$CALF" train --quiet --root_dir "$root" --conf "$CONF" --nproc "$n" \
        --conf_param TrainerConfig.num_iterations=4 --conf_param TrainerConfig.eval_interval=2 "$@"
}

for n in 1 2 3 4; do run "$WORK/e64_$n" $n; done
for n in 2 3 4; do
    expect_same_file "$WORK/e64_1/train/algorithm/ckpt-4" "$WORK/e64_$n/train/algorithm/ckpt-4"
    expect_same_file "$WORK/e64_1/train/algorithm/ckpt-2" "$WORK/e64_$n/train/algorithm/ckpt-2"
done
# no flag is the same job as --nproc 1
expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/e64_noflag" --conf "$CONF" \
    --conf_param TrainerConfig.num_iterations=4 --conf_param TrainerConfig.eval_interval=2
expect_same_file "$WORK/e64_1/train/algorithm/ckpt-4" "$WORK/e64_noflag/train/algorithm/ckpt-4"
expect_in "$WORK/e64_noflag/log/rank-0.log" "rank 0/1: environments 0..63 (64 of 64)"

# the split is in the logs; rank 0 alone writes summaries, checkpoints and config
R=$WORK/e64_2
expect_in "$R/log/rank-0.log" "rank 0/2: environments 0..31 (32 of 64)"
expect_in "$R/log/rank-1.log" "rank 1/2: environments 32..63 (32 of 64)"
expect_eq "$(ls "$R"/train/events.out.tfevents.* | wc -l)" 1 "train events files (2 procs)"
expect_eq "$(ls "$R"/eval/events.out.tfevents.* | wc -l)" 1 "eval events files (2 procs)"
expect_eq "$(ls "$R"/log)" "$(printf 'rank-0.log\nrank-1.log')" "log files"
expect_eq "$(ls "$R")" "$(printf 'config.gin\neval\nlog\ntrain')" "root dir entries"
expect_in "$R/config.gin" "rank 1: environments 32..63 (32)"
# summaries describe the whole job, not rank 0's share
"$CALF" events "$R"/train/events.out.tfevents.* > "$WORK/ev2"
"$CALF" events "$WORK"/e64_1/train/events.out.tfevents.* > "$WORK/ev1"
expect_in "$WORK/ev2" "4 Metrics/EnvironmentSteps 8192"
grep -E 'Metrics/(AverageReturn|NumberOfEpisodes)|PPOLoss' "$WORK/ev1" > "$WORK/m1"
grep -E 'Metrics/(AverageReturn|NumberOfEpisodes)|PPOLoss' "$WORK/ev2" > "$WORK/m2"
expect_same_file "$WORK/m1" "$WORK/m2"

# uneven blocks: 65 envs
for n in 1 2 3 4; do
    run "$WORK/e65_$n" $n --conf_param create_environment.num_parallel_environments=65
done
for n in 2 3 4; do
    expect_same_file "$WORK/e65_1/train/algorithm/ckpt-4" "$WORK/e65_$n/train/algorithm/ckpt-4"
done
expect_in "$WORK/e65_2/log/rank-0.log" "rank 0/2: environments 0..32 (33 of 65)"

# a 2-process checkpoint at iteration 2 resumes on 3 processes to iteration 4, exactly
expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/resume" --conf "$CONF" --nproc 2 \
    --conf_param TrainerConfig.num_iterations=2 --conf_param TrainerConfig.eval_interval=2
run "$WORK/resume" 3
expect_same_file "$WORK/e64_1/train/algorithm/ckpt-4" "$WORK/resume/train/algorithm/ckpt-4"

# continuous actions: Pendulum on 1 and 3 processes
for n in 1 3; do
    run "$WORK/pend_$n" $n --conf_param "create_environment.env_name='Pendulum-v1'" \
        --conf_param create_environment.num_parallel_environments=10
done
expect_same_file "$WORK/pend_1/train/algorithm/ckpt-4" "$WORK/pend_3/train/algorithm/ckpt-4"

# work sharing: a slow rank's envs are partly folded by the others, and the bits stay
# those of one process (discrete and continuous actions)
CALF_TEST_HOOKS=slow_rank=1 run "$WORK/slow_2" 2
expect_same_file "$WORK/e64_1/train/algorithm/ckpt-4" "$WORK/slow_2/train/algorithm/ckpt-4"
took=$(sed -n 's/.*this rank folded \([0-9]*\) env partials.*/\1/p' "$WORK/slow_2/log/rank-0.log")
if [ "${took:-0}" -gt 0 ]; then ok; else bad "rank 0 took no envs from slow rank 1 (${took:-no line})"; fi
took=$(sed -n 's/.*computed the advantages of \([0-9]*\) envs of other ranks.*/\1/p' "$WORK/slow_2/log/rank-0.log")
if [ "${took:-0}" -gt 0 ]; then ok; else bad "rank 0 computed no advantages for slow rank 1 (${took:-no line})"; fi
# each rank's log ends with its time spent waiting for the others; rank 0 waited for the
# slow rank's last envs in minibatches (the slow rank's naps), so the gradient's share is
# not zero, and the shares add up to no more than the whole. (How large a share is a
# matter of timing: a host stall can land anywhere, so it is not asserted.)
waits=$(sed -n 's/^waited \([0-9.]*\) s in collectives for other ranks (.*): \([0-9.]*\) s for the gradient, \([0-9.]*\) s for its norm, \([0-9.]*\) s for the optimiser step$/\1 \2 \3 \4/p' \
    "$WORK/slow_2/log/rank-0.log")
if echo "${waits:-none}" | awk 'NF == 4 && $2 > 0 && $2 + $3 + $4 <= $1 + 0.003 {ok = 1}
                               END {exit !ok}'; then
    ok
else
    bad "rank 0's waits (all, gradient, norm, step) are '${waits:-no line}'"
fi
CALF_TEST_HOOKS=slow_rank=0 run "$WORK/pend_slow_3" 3 --conf_param "create_environment.env_name='Pendulum-v1'" \
    --conf_param create_environment.num_parallel_environments=10
expect_same_file "$WORK/pend_1/train/algorithm/ckpt-4" "$WORK/pend_slow_3/train/algorithm/ckpt-4"
took=$(cat "$WORK"/pend_slow_3/log/rank-[12].log | sed -n 's/.*this rank folded \([0-9]*\) env partials.*/\1/p' | awk '{s += $1} END {print s + 0}')
if [ "$took" -gt 0 ]; then ok; else bad "ranks 1 and 2 took no envs from slow rank 0"; fi
# episodes cut by Pendulum's 200-step limit: with 200-step unrolls every env's last step
# of every iteration is cut, so each env whose advantages another rank computes (slow
# rank 0, with enough envs for many groups, makes that certain) has its final
# observation's value computed there
for n in 1 3; do
    CALF_TEST_HOOKS=slow_rank=0 run "$WORK/cut_$n" $n --conf_param "create_environment.env_name='Pendulum-v1'" \
        --conf_param create_environment.num_parallel_environments=40 \
        --conf_param TrainerConfig.unroll_length=200
done
expect_same_file "$WORK/cut_1/train/algorithm/ckpt-4" "$WORK/cut_3/train/algorithm/ckpt-4"
took=$(cat "$WORK"/cut_3/log/rank-[12].log | sed -n 's/.*computed the advantages of \([0-9]*\) envs of other ranks.*/\1/p' | awk '{s += $1} END {print s + 0}')
if [ "$took" -gt 0 ]; then ok; else bad "ranks 1 and 2 computed no advantages for slow rank 0"; fi

# many more processes than cores (24 on this 2-core machine, 1000 envs): still the bits of
# one process, and config.gin states the split in two lines instead of 24
for n in 1 24; do
    expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/many_$n" --conf "$CONF" --nproc "$n" \
        --conf_param TrainerConfig.num_iterations=1 \
        --conf_param create_environment.num_parallel_environments=1000
done
expect_same_file "$WORK/many_1/train/algorithm/ckpt-1" "$WORK/many_24/train/algorithm/ckpt-1"
expect_in "$WORK/many_24/config.gin" "#   ranks 0..15: environments 0..671 (42 each)"
expect_in "$WORK/many_24/config.gin" "#   ranks 16..23: environments 672..999 (41 each)"
expect_eq "$(ls "$WORK"/many_24/log | wc -l)" 24 "one log per rank (24 processes)"

# kill -9 of rank 1 mid-run: the launcher exits non-zero within 5 s, no worker remains
K=$WORK/kill
"$CALF" train --quiet --root_dir "$K" --conf "$CONF" --nproc 2 \
    --conf_param TrainerConfig.num_iterations=1000000 >"$WORK/kill_out" 2>"$WORK/kill_err" &
LPID=$!
wait_for_line "$K/log/rank-1.log" "iter 2" 10
W1=$(log_pid "$K/log/rank-1.log")
W0=$(log_pid "$K/log/rank-0.log")
if [ -n "$W1" ] && [ -n "$W0" ]; then ok; else bad "worker pids not in the logs"; fi
T0=$(date +%s.%N)
kill -9 "$W1"
wait $LPID
CODE=$?
T1=$(date +%s.%N)
if [ "$CODE" != 0 ]; then ok; else bad "launcher exited 0 after a rank was killed"; fi
if awk -v a="$T0" -v b="$T1" 'BEGIN { exit !(b - a < 5) }'; then ok; else bad "launcher took $(awk -v a="$T0" -v b="$T1" 'BEGIN{print b-a}') s"; fi
expect_in "$WORK/kill_err" "rank 1 failed"
expect_in "$WORK/kill_err" "SIGKILL"
if kill -0 "$W0" 2>/dev/null || kill -0 "$W1" 2>/dev/null; then bad "a worker is still running"; else ok; fi

# kill -9 of the launcher itself: its workers die with it (PR_SET_PDEATHSIG)
P=$WORK/parent
"$CALF" train --quiet --root_dir "$P" --conf "$CONF" --nproc 2 \
    --conf_param TrainerConfig.num_iterations=1000000 >/dev/null 2>&1 &
LPID=$!
wait_for_line "$P/log/rank-1.log" "iter 2" 10
W0=$(log_pid "$P/log/rank-0.log")
W1=$(log_pid "$P/log/rank-1.log")
kill -9 $LPID
wait $LPID 2>/dev/null
running() { # a process that exists and is not a zombie
    [ -r "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat")" != Z ]
}
for _ in $(seq 1 50); do running "$W0" || running "$W1" || break; sleep 0.1; done
if [ -n "$W0" ] && [ -n "$W1" ] && ! running "$W0" && ! running "$W1"; then ok
else bad "workers $W0 $W1 still running after the launcher was killed"; fi

# Ctrl-C: finish the iteration, checkpoint, exit 130
I=$WORK/int
interrupt_after "$I" "$CALF" train --quiet --root_dir "$I" --conf "$CONF" --nproc 2 \
    --conf_param TrainerConfig.num_iterations=1000000 --conf_param TrainerConfig.num_checkpoints=0
expect_eq "$INT_STATUS" 130 "exit status after SIGINT"
if ls "$I"/train/algorithm/ckpt-* >/dev/null 2>&1; then ok; else bad "no checkpoint after SIGINT"; fi
# and the interrupted run resumes where it stopped
LAST=$(ls "$I"/train/algorithm | sed 's/ckpt-//' | sort -n | tail -1)
expect_exit 0 "$CALF" train --root_dir "$I" --conf_param TrainerConfig.num_iterations=$((LAST + 1))
expect_in "$WORK/err" "(iteration $LAST)"
report e2e_ddp
