#!/usr/bin/env bash
# e2e_alloc_fail.sh: an allocation that fails on rank 1 of a 2-process job (the local
# backend's --nproc 2, and mpirun -np 2 where MPI is built in) ends the job promptly with
# exit 1 and that rank's "out of memory allocating N bytes (src/FILE:LINE)" message naming
# the rank; no process stays behind, no half-written file, the checkpoints written before
# are the uninterrupted run's bytes, and a resume ends on the uninterrupted run's bytes.
# The test hooks (calf/testing.h) pick the allocation: alloc_fail=1:K, rank 1's K-th
# (setup), and alloc_fail_iter=1:I, its first in iteration I (after checkpoints).
# Under MPI, rank 0 may be killed inside a checkpoint's write by the abort: its .tmp file
# is left, and the resume must remove it.
. "$(dirname "$0")/lib_e2e.sh"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # a failed rank exits holding memory
cat >"$WORK/run.gin" <<GIN
include '$SRC/examples/ppo_cartpole.gin'
TrainerConfig.num_env_steps = 0
TrainerConfig.num_iterations = 6
TrainerConfig.num_checkpoints = 3
TrainerConfig.evaluate = False
create_environment.num_parallel_environments = 4
TrainerConfig.unroll_length = 8
TrainerConfig.mini_batch_size = 16
GIN
LAST=train/algorithm/ckpt-6
expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/ref" --conf "$WORK/run.gin" --nproc 2

LAUNCHERS=local
if "$CALF" --version | grep -q "MPI backend: built in" && command -v mpirun >/dev/null; then
    LAUNCHERS="local mpi"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
else
    echo "MPI part skipped: calf built without MPI or no mpirun"
fi

# train LAUNCHER ROOT [HOOKS]: the job, with the given test hooks
train() {
    local hooks=${3:-}
    if [ "$1" = mpi ]; then
        CALF_TEST_HOOKS=$hooks timeout 120 mpirun --oversubscribe -np 2 -x CALF_TEST_HOOKS \
            "$CALF" train --quiet --root_dir "$2" --conf "$WORK/run.gin"
    else
        CALF_TEST_HOOKS=$hooks timeout 120 "$CALF" train --quiet --root_dir "$2" --conf "$WORK/run.gin" --nproc 2
    fi
}

# check LAUNCHER HOOK: the failure and what it leaves, then the resume
check() {
    local L=$1 K=$2 R=$WORK/$1-${2//[=:]/-}
    train "$L" "$R" "$K" >"$WORK/out" 2>"$WORK/err"
    local code=$?
    if [ $code = 1 ]; then ok; else bad "$L K=$K: exit $code (want 1)"; sed 's/^/  | /' "$WORK/err" >&2 | head; fi
    if grep -Eq "^calf: rank 1 failed: (exit status 1: )?out of memory allocating [0-9x ]+ bytes \(src/[a-z_/]+\.c:[0-9]+\)" "$WORK/err"; then ok
    else bad "$L K=$K: no message naming rank 1's allocation:"; sed 's/^/  | /' "$WORK/err" >&2 | head; fi
    if [ "$L" = mpi ] || [ -z "$(find "$R" -name '*.tmp*' 2>/dev/null)" ]; then ok; else bad "$L K=$K: left $(find "$R" -name '*.tmp*')"; fi
    if pgrep -f -- "--root_dir $R" >/dev/null; then bad "$L K=$K: a process stayed behind"; else ok; fi
    local n=$(last_ckpt "$R")
    [ -n "$n" ] && { expect_same_file "$WORK/ref/train/algorithm/ckpt-$n" "$R/train/algorithm/ckpt-$n"; echo "   $L K=$K: failed after ckpt-$n: $(grep -m1 'rank 1 failed' "$WORK/err")"; }
    [ -z "$n" ] && echo "   $L K=$K: failed before any checkpoint: $(grep -m1 'rank 1 failed' "$WORK/err")"
    train "$L" "$R" >"$WORK/out" 2>"$WORK/err" || bad "$L K=$K: the resume failed: $(tail -1 "$WORK/err")"
    expect_same_file "$WORK/ref/$LAST" "$R/$LAST"
    if [ -z "$(find "$R" -name '*.tmp*' 2>/dev/null)" ]; then ok; else bad "$L K=$K: the resume left $(find "$R" -name '*.tmp*')"; fi
}

for L in $LAUNCHERS; do
    echo "== $L"
    for K in alloc_fail=1:1 alloc_fail=1:5 alloc_fail=1:40 alloc_fail_iter=1:3 alloc_fail_iter=1:6; do
        check "$L" "$K"
    done
    [ -n "$(last_ckpt "$WORK/$L-alloc_fail_iter-1-3")" ] && ok || bad "$L: iteration 3's failure left no checkpoint"
done
report e2e_alloc_fail
