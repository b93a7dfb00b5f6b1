#!/usr/bin/env bash
# e2e_slow_rank.sh: collective_timeout_secs tells a rank that works from one that is stuck.
# A rank that spends longer than the timeout between collectives while it works (the
# busy_rank test hook: comm_progress every 10 ms, as a long evaluation or a slow rollout
# does) does not end the job, which writes the uninterrupted run's bytes; a rank as silent
# as an env step that never returns (stuck_rank) ends it with exit 1 within the timeout,
# naming the rank. For the local backend's --nproc 2, and mpirun -np 2 where MPI is built.
. "$(dirname "$0")/lib_e2e.sh"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # an aborted rank exits holding memory
TIMEOUT=6 HOLD=18 # a hold three timeouts long, so a wait that ignored signs of life fails
cat >"$WORK/run.gin" <<GIN
include '$SRC/examples/ppo_cartpole.gin'
TrainerConfig.num_env_steps = 0
TrainerConfig.num_iterations = 4
TrainerConfig.num_checkpoints = 2
TrainerConfig.evaluate = False
TrainerConfig.collective_timeout_secs = $TIMEOUT
create_environment.num_parallel_environments = 4
TrainerConfig.unroll_length = 8
TrainerConfig.mini_batch_size = 16
GIN
LAST=train/algorithm/ckpt-4
expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/ref" --conf "$WORK/run.gin"

LAUNCHERS=local
if ldd "$CALF" 2>/dev/null | grep -q libasan; then
    # Each launcher waits out four 18 s holds; under the sanitizers the local one keeps
    # the memory checks on the waiting code, and the Release build checks mpirun's.
    echo "MPI part skipped: $CALF is built with AddressSanitizer; the Release build runs it"
elif "$CALF" --version | grep -q "MPI backend: built in" && command -v mpirun >/dev/null; then
    LAUNCHERS="local mpi"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
else
    echo "MPI part skipped: calf built without MPI or no mpirun"
fi

# train LAUNCHER ROOT HOOKS: the 2-process job with the given test hooks
train() {
    if [ "$1" = mpi ]; then
        CALF_TEST_HOOKS=$3 timeout 120 mpirun --oversubscribe -np 2 -x CALF_TEST_HOOKS \
            "$CALF" train --quiet --root_dir "$2" --conf "$WORK/run.gin"
    else
        CALF_TEST_HOOKS=$3 timeout 120 "$CALF" train --quiet --root_dir "$2" --conf "$WORK/run.gin" --nproc 2
    fi
}

for L in $LAUNCHERS; do
    for R in 0 1; do
        D=$WORK/$L-busy$R
        t0=$(date +%s)
        train "$L" "$D" "busy_rank=$R:$HOLD" >"$WORK/out" 2>"$WORK/err"
        code=$? took=$(($(date +%s) - t0))
        if [ $code = 0 ]; then ok; else bad "$L: rank $R busy for $HOLD s: exit $code (want 0)"; sed 's/^/  | /' "$WORK/err" >&2 | head -5; fi
        [ $took -ge $HOLD ] && ok || bad "$L: the busy job took $took s, under the hook's $HOLD s"
        expect_in "$D/log/rank-$R.log" "test hook: busy for $HOLD s"
        expect_same_file "$WORK/ref/$LAST" "$D/$LAST"
    done
    D=$WORK/$L-stuck
    t0=$(date +%s)
    train "$L" "$D" "stuck_rank=1:$HOLD" >"$WORK/out" 2>"$WORK/err"
    code=$? took=$(($(date +%s) - t0))
    expect_eq "$code" 1 "$L: exit status after rank 1 was stuck"
    [ $took -lt $HOLD ] && ok || bad "$L: the stuck job took $took s to end, not less than the hold's $HOLD s"
    expect_in "$D/log/rank-1.log" "test hook: stuck for $HOLD s"
    if [ "$L" = mpi ]; then
        expect_in "$WORK/err" "rank 1 (host $(hostname)) did not arrive (TrainerConfig.collective_timeout_secs)"
    else
        expect_in "$WORK/err" "timed out after $TIMEOUT s on rank 0 waiting for rank 1"
    fi
    if pgrep -f -- "--root_dir $D" >/dev/null; then bad "$L: a process stayed behind"; else ok; fi
done
report e2e_slow_rank
