#!/usr/bin/env bash
# e2e_faults.sh: every write error stops the run, as SQLite proves it: a shim
# (tests/fault_shim.c, LD_PRELOAD) makes the k-th write/fsync/rename/open of a short
# ppo_cartpole run fail, for every k, once, for good (a full disk) and halfway through a
# write. Each case must exit 1 with a message naming the file, leave no temporary file
# and no half-written record or line, and a resume afterwards must reach a final
# checkpoint byte-equal to an uninterrupted run's. Then the cases the issue names: a
# failed summary write stops the job at that iteration (with a checkpoint), a full log/
# is exit 1, a disk-full config.gin names the errno, an MPI rank's full log stops the
# job. Skipped, saying why, where LD_PRELOAD cannot work (the sanitizer build).
# hundreds of short runs, each with a few fsyncs: on a RAM file system where there is one
[ -d /dev/shm ] && [ -w /dev/shm ] && export CALF_E2E_TMP=/dev/shm
. "$(dirname "$0")/lib_e2e.sh"

SHIM=${CALF_FAULT_SHIM:-}
if [ -z "$SHIM" ] || [ ! -f "$SHIM" ]; then
    echo "e2e_faults: skipped: the fault shim was not built (CALF_FAULT_SHIM is '${SHIM}'; run through ctest)"
    exit 77
fi
if ldd "$CALF" 2>/dev/null | grep -q libasan; then
    echo "e2e_faults: skipped: calf is built with AddressSanitizer, whose runtime must be the first library loaded, so an LD_PRELOAD shim cannot be put before it"
    exit 77
fi
# glibc's perturbation and the shim are independent; keep the runs quiet and short.
small_gin "$WORK/small.gin"
REF=$WORK/ref
expect_exit 0 "$CALF" train --quiet --root_dir "$REF" --conf "$WORK/small.gin"
FINAL=train/algorithm/ckpt-4

# shimmed ARGS...: run calf under the shim (settings come from CALF_FAULT_* in the caller)
shimmed() { LD_PRELOAD="$SHIM" "$@"; }

# The shim itself changes nothing: the counting run is the reference run.
# count_calls VAR ARGS...: run calf train ARGS under the shim, failing nothing; VAR gets
# the number of counted calls (CALF_FAULT_CALLS may narrow them)
count_calls() {
    local var=$1 root=$WORK/count_$1
    shift
    CALF_FAULT_COUNT=$WORK/n_$var shimmed "$CALF" train --quiet --root_dir "$root" "$@"
    expect_same_file "$REF/$FINAL" "$root/$FINAL"
    printf -v "$var" '%s' "$(cat "$WORK/n_$var")"
}
count_calls N1 --conf "$WORK/small.gin"
count_calls N2 --conf "$WORK/small.gin" --nproc 2
CALF_FAULT_CALLS=write count_calls NW --conf "$WORK/small.gin"
if [ "$N1" -ge 30 ] && [ "$N2" -gt "$N1" ] && [ "$NW" -lt "$N1" ]; then ok
else bad "counted calls: $N1 (1 process), $NW of them writes, $N2 (2 processes)"; fi

# check_case WHAT ROOT STATUS ANY: after a run that the shim made fail (its log in
# $WORK/flog, stderr in $WORK/ferr): exit 1; stderr names the file the shim failed (the
# first one, or with ANY=1 any of them: processes that hit a full disk at once race to
# report); no temporary file; events files and logs whole; the resume is exact.
check_case() {
    local what=$1 root=$2 status=$3 any=$4 named=0 f
    [ "$status" = 1 ] || { bad "$what: exit $status (want 1)"; sed 's/^/  | /' "$WORK/ferr" | head -5 >&2; }
    if [ ! -s "$WORK/flog" ]; then bad "$what: the shim failed no call"; return; fi
    while read -r _ _ f; do
        # a directory fsync'd after a rename is named as the file renamed into it
        if grep -qF -- "$f" "$WORK/ferr"; then named=1; break; fi
        [ "$any" = 1 ] || break
    done < "$WORK/flog"
    [ $named = 1 ] || { bad "$what: stderr does not name $(head -1 "$WORK/flog")"; sed 's/^/  | /' "$WORK/ferr" | head -5 >&2; }
    local tmps
    tmps=$(find "$root" -name '*.tmp*')
    [ -z "$tmps" ] || bad "$what: temporary files left: $tmps"
    for f in "$root"/train/events.out.tfevents.* "$root"/eval/events.out.tfevents.*; do
        [ -e "$f" ] || continue
        if ! "$CALF" events "$f" >/dev/null 2>"$WORK/everr" || [ -s "$WORK/everr" ]; then
            bad "$what: $f does not read cleanly: $(head -1 "$WORK/everr")"
        fi
    done
    for f in "$root"/log/*.log; do
        [ -s "$f" ] || continue
        [ "$(tail -c 1 "$f" | od -An -c | tr -d ' ')" = '\n' ] || bad "$what: $f ends inside a line"
    done
    if "$CALF" train --quiet --root_dir "$root" --conf "$WORK/small.gin" 2>"$WORK/rerr"; then
        cmp -s "$REF/$FINAL" "$root/$FINAL" || bad "$what: the resumed run's $FINAL differs"
    else
        bad "$what: resume failed: $(head -1 "$WORK/rerr")"
    fi
    ok
}

# every k, one process: once (odd k ENOSPC, even k EIO) and for good; and every write
# cut short, the rest of it failing
for mode in once persist short; do
    n=$N1 calls=write,fsync,rename,open
    [ $mode = short ] && n=$NW calls=write
    for k in $(seq 1 "$n"); do
        R=$WORK/f1
        rm -rf "$R" "$WORK/flog"
        e=ENOSPC; [ $((k % 2)) = 0 ] && e=EIO
        CALF_FAULT_MODE=$mode CALF_FAULT_K=$k CALF_FAULT_ERRNO=$e CALF_FAULT_LOG=$WORK/flog \
            CALF_FAULT_CALLS=$calls \
            shimmed "$CALF" train --quiet --root_dir "$R" --conf "$WORK/small.gin" 2>"$WORK/ferr"
        check_case "1 process, $mode, call $k ($e)" "$R" $? 0
    done
done
# --nproc 2: every third k (the order of the two workers' calls varies), once and for good
for mode in once persist; do
    for k in $(seq 1 3 "$N2"); do
        R=$WORK/f2
        rm -rf "$R" "$WORK/flog"
        CALF_FAULT_MODE=$mode CALF_FAULT_K=$k CALF_FAULT_LOG=$WORK/flog \
            shimmed "$CALF" train --quiet --nproc 2 --root_dir "$R" --conf "$WORK/small.gin" 2>"$WORK/ferr"
        check_case "--nproc 2, $mode, call $k" "$R" $? 1
    done
done

# A failed summary write stops the job at that iteration, after a checkpoint: the train
# events file's disk is full from its 30th write on (records go out one by one here)
R=$WORK/summary
CALF_FAULT_PATH=/train/events CALF_FAULT_CALLS=write CALF_FAULT_MODE=persist CALF_FAULT_K=30 \
    CALF_FAULT_LOG=$WORK/flog shimmed "$CALF" train --quiet --root_dir "$R" --conf "$WORK/small.gin" \
    --conf_param TrainerConfig.num_iterations=8 --conf_param TrainerConfig.num_checkpoints=1 \
    --conf_param TrainerConfig.summaries_flush_secs=0 2>"$WORK/err"
expect_eq $? 1 "exit status after a failed summary write"
expect_in "$WORK/err" "summary: write $R/train/events.out.tfevents."
expect_in "$WORK/err" "No space left on device; stopped after iteration"
STOP=$(sed -n 's/.*stopped after iteration \([0-9]*\), checkpoint written.*/\1/p' "$WORK/err")
if [ -n "$STOP" ] && [ "$STOP" -lt 8 ] && [ -f "$R/train/algorithm/ckpt-$STOP" ]; then ok
else bad "no checkpoint at the iteration the summaries failed (stopped at '$STOP')"; ls "$R/train/algorithm" >&2; fi
expect_eq "$(ls "$R/train/algorithm")" "ckpt-$STOP" "checkpoints after the failed summary write"
expect_exit 0 "$CALF" events "$R"/train/events.out.tfevents.*
expect_not_in "$WORK/err" "warning"

# A full log/: exit 1 naming the log (it was exit 0 with a cut log), from the first line
# or from the 3rd (iteration 1's progress), where the job stops after the next iteration
# with a checkpoint
for k in 1 3; do
    R=$WORK/log$k
    CALF_FAULT_PATH=/log/ CALF_FAULT_CALLS=write CALF_FAULT_MODE=persist CALF_FAULT_K=$k \
        shimmed "$CALF" train --quiet --root_dir "$R" --conf "$WORK/small.gin" 2>"$WORK/err"
    expect_eq $? 1 "exit status with log/ full from its write $k"
    expect_in "$WORK/err" "write $R/log/rank-0.log: No space left on device"
done
expect_in "$WORK/err" "stopped after iteration 2, checkpoint written"

# A disk-full config.gin names the errno (it said "write failed") and leaves no temp file
R=$WORK/conf
CALF_FAULT_PATH=config.gin CALF_FAULT_CALLS=write CALF_FAULT_K=1 \
    shimmed "$CALF" train --quiet --root_dir "$R" --conf "$WORK/small.gin" 2>"$WORK/err"
expect_eq $? 1 "exit status when config.gin cannot be written"
expect_in "$WORK/err" "write $R/config.gin.tmp."
expect_in "$WORK/err" ": No space left on device"
expect_eq "$(find "$R" -name '*.tmp*')" "" "temporary files after a failed config.gin"

# MPI: rank 1's log fills up; every rank stops after that iteration, rank 0 writes the
# checkpoint, and rank 1 reports the file (each rank counts its own calls here; the
# first three writes to the log are its header lines, which training does not reach)
if "$CALF" --version | grep -q "MPI backend: built in" && command -v mpirun >/dev/null; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    R=$WORK/mpi
    timeout 120 mpirun --oversubscribe -np 2 -x LD_PRELOAD="$SHIM" -x CALF_FAULT_PATH=/log/rank-1.log \
        -x CALF_FAULT_CALLS=write -x CALF_FAULT_MODE=persist -x CALF_FAULT_K=4 \
        "$CALF" train --quiet --root_dir "$R" --conf "$WORK/small.gin" >/dev/null 2>"$WORK/err"
    if [ $? != 0 ]; then ok; else bad "mpirun exit 0 after rank 1's log filled up"; fi
    expect_in "$WORK/err" "calf: rank 1 failed: write $R/log/rank-1.log: No space left on device; stopped after iteration 2, checkpoint written"
    expect_eq "$(ls "$R/train/algorithm")" "ckpt-2" "checkpoints after rank 1's log filled up"
    expect_in "$R/log/rank-0.log" "stopped after iteration 2: rank 1 could not write a file"
    expect_exit 0 "$CALF" train --quiet --root_dir "$R" --conf "$WORK/small.gin"
    expect_same_file "$REF/$FINAL" "$R/$FINAL"
else
    echo "e2e_faults: MPI check skipped: calf was built without MPI or mpirun is missing"
fi
report e2e_faults
