#!/usr/bin/env bash
# e2e_oversub.sh: far more processes than cores. A tiny job at --nproc 64 (two envs per
# process, 16-unit nets, 2 iterations) finishes within a bound that only holds when
# waiting workers leave the cores to the ones that work, and its checkpoint is --nproc 1's;
# `calf train` warns that --nproc exceeds the cores; SIGTERM at --nproc 64, mid-iteration,
# ends the job within 5 s with exit 130 and no process left (also under the sanitizer). The
# SIGTERM lands inside iteration 1 on any machine: that iteration is 1.28 million rounds.
. "$(dirname "$0")/lib_e2e.sh"

export LC_ALL=C # EPOCHREALTIME's decimal point
: "${EPOCHREALTIME:?e2e_oversub needs bash 5 (EPOCHREALTIME)}"
N=64
CPUS=$(getconf _NPROCESSORS_ONLN)
# The bound for the whole 64-process job. Measured on a 2-core machine: 1-3 s in Release,
# about 10 s under AddressSanitizer (each process maps its shadow memory); before waiting
# workers yielded, such jobs took minutes at 256 processes and more.
LIMIT=40
if ldd "$CALF" 2>/dev/null | grep -q libasan; then LIMIT=120; fi

CONF=$WORK/tiny.gin
cat >"$CONF" <<EOF
create_environment.env_name = "CartPole-v1"
create_environment.num_parallel_environments = $((2 * N))
TrainerConfig.random_seed = 3
TrainerConfig.unroll_length = 4
TrainerConfig.mini_batch_size = 256
TrainerConfig.num_updates_per_train_iter = 2
TrainerConfig.num_iterations = 2
TrainerConfig.evaluate = False
TrainerConfig.num_checkpoints = 1
TrainerConfig.summary_interval = 1
ActorDistributionNetwork.fc_layer_params = (16,)
ValueNetwork.fc_layer_params = (16,)
EOF

# one process and $N: the same checkpoint, within the bound
expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/one" --conf "$CONF"
expect_not_in "$WORK/err" "warning"
T0=$EPOCHREALTIME
expect_exit 0 timeout -k 5 "$LIMIT" "$CALF" train --quiet --root_dir "$WORK/many" --conf "$CONF" --nproc $N
T1=$EPOCHREALTIME
took=$(awk -v a="$T0" -v b="$T1" 'BEGIN { printf "%.1f", b - a }')
echo "e2e_oversub: --nproc $N on $CPUS cores: $took s (bound $LIMIT s)"
expect_same_file "$WORK/one/train/algorithm/ckpt-2" "$WORK/many/train/algorithm/ckpt-2"
expect_eq "$(ls "$WORK"/many/log | wc -l)" $N "one log per rank"
if [ "$CPUS" -lt $N ]; then
    expect_in "$WORK/err" "calf: warning: --nproc $N exceeds the $CPUS cores online"
    expect_in "$WORK/err" "(the result is the same)"
else
    echo "e2e_oversub: $CPUS cores: no warning expected at --nproc $N"
    expect_not_in "$WORK/err" "warning"
fi
# no warning while every worker has a core
if [ "$CPUS" -ge 2 ]; then
    expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/two" --conf "$CONF" --nproc 2
    expect_not_in "$WORK/err" "warning"
    expect_same_file "$WORK/one/train/algorithm/ckpt-2" "$WORK/two/train/algorithm/ckpt-2"
fi

# SIGTERM at --nproc $N in the middle of a long run: exit 130 within 5 s, nothing left.
# The signal must land inside iteration 1 however fast the machine is, so that iteration
# is made of work no machine finishes in seconds: a trivial rollout (2 envs of 8 steps per
# rank), then 10,000 updates of 128 minibatches, each a collective of all $N ranks (1.28
# million rounds). Every rank is inside one of those rounds within moments of starting, so
# the job is stopped mid-iteration, without waiting for the iteration to end.
S=$WORK/term
"$CALF" train --quiet --root_dir "$S" --conf "$CONF" --nproc $N \
    --conf_param TrainerConfig.unroll_length=8 \
    --conf_param TrainerConfig.mini_batch_size=8 \
    --conf_param TrainerConfig.num_updates_per_train_iter=10000 \
    --conf_param TrainerConfig.num_iterations=1000 >"$WORK/term_out" 2>"$WORK/term_err" &
LPID=$!
# rank 0 writes config.gin once every rank has set up, just before the first iteration
for i in $(seq 1 $((LIMIT * 10))); do
    [ -e "$S/config.gin" ] && break
    sleep 0.1
done
if [ -e "$S/config.gin" ]; then ok; else bad "no config.gin after $LIMIT s"; fi
T0=$EPOCHREALTIME # a builtin: no fork between the clock and the signal
kill -TERM $LPID
# a launcher that ignores it (as before) is killed after 15 s, and its workers with it
( sleep 15; kill -KILL $LPID 2>/dev/null ) &
WATCHDOG=$!
wait $LPID
CODE=$?
T1=$EPOCHREALTIME
kill $WATCHDOG 2>/dev/null
wait $WATCHDOG 2>/dev/null
took=$(awk -v a="$T0" -v b="$T1" 'BEGIN { printf "%.2f", b - a }')
echo "e2e_oversub: SIGTERM at --nproc $N: exit $CODE after $took s"
expect_eq "$CODE" 130 "exit status after SIGTERM"
if awk -v t="$took" 'BEGIN { exit !(t < 5) }'; then ok; else bad "the job took $took s to end after SIGTERM"; fi
# the workers are forked, not exec'd: their command line is the launcher's
left=$(pgrep -c -f -- "--root_dir $S " || true)
expect_eq "$left" 0 "processes left after SIGTERM"
expect_in "$S/log/rank-0.log" "interrupted: stopped during iteration 1, which has no checkpoint"
expect_not_in "$WORK/term_err" "failed"

report e2e_oversub
