#!/usr/bin/env bash
# e2e_rundir.sh: the root dir as a hostile user meets it: one writer at a time (a second
# `calf train` is refused at once, exit 2, naming the holder, with nothing written; the
# lock dies with its holder, also for --nproc and MPI jobs), a dead run's temporary files
# removed by the next one, a killed run's events files readable and its resume exact,
# path limits checked before anything is written, a run dir with symbolic links in it
# refused, and a finished run on a read-only mount that has nothing to do.
. "$(dirname "$0")/lib_e2e.sh"

small_gin "$WORK/small.gin"
LONG=(--conf_param TrainerConfig.num_iterations=100000000 --conf_param TrainerConfig.num_checkpoints=0)
snapshot() { (cd "$1" && find . -printf '%p %s %T@\n' | sort && cat .lock); }
HOST=$(hostname)

# ---- one writer per root dir
R=$WORK/shared
"$CALF" train --quiet --root_dir "$R" --conf "$WORK/small.gin" "${LONG[@]}" 2>"$WORK/a_err" &
A=$!
wait_for_line "$R/log/rank-0.log" "iter 2" 20
kill -STOP $A # so that whatever changes in the dir now is the second run's doing
snapshot "$R" > "$WORK/snap1"
expect_exit 2 "$CALF" train --root_dir "$R" --conf "$WORK/small.gin" --conf_param TrainerConfig.random_seed=2
expect_in "$WORK/err" "--root_dir $R is in use by another run: pid $A on host $HOST (calf train), since"
expect_eq "$(wc -l < "$WORK/err")" 1 "lines of the refusal"
snapshot "$R" > "$WORK/snap2"
expect_same_file "$WORK/snap1" "$WORK/snap2"
# resuming it (no --conf) is refused alike, before its config.gin is read into a new run
expect_exit 2 "$CALF" train --root_dir "$R"
expect_in "$WORK/err" "is in use by another run: pid $A"
# the lock dies with its holder: after SIGKILL the next run takes the directory at once
kill -CONT $A
kill -9 $A
{ wait $A; } 2>/dev/null
expect_exit 0 "$CALF" train --quiet --root_dir "$R" --conf "$WORK/small.gin"
expect_in "$R/.lock" "pid "

# --nproc: the launching process holds it (and the workers it forked); SIGKILL frees it
R=$WORK/shared_n
"$CALF" train --quiet --nproc 2 --root_dir "$R" --conf "$WORK/small.gin" "${LONG[@]}" 2>/dev/null &
A=$!
wait_for_line "$R/log/rank-1.log" "iter 2" 20
expect_exit 2 "$CALF" train --root_dir "$R" --conf "$WORK/small.gin"
expect_in "$WORK/err" "pid $A on host $HOST (calf train --nproc 2)"
kill -9 $A
{ wait $A; } 2>/dev/null
# its workers die with it (PR_SET_PDEATHSIG) and the lock with the last of them
for _ in $(seq 1 50); do
    "$CALF" train --quiet --root_dir "$R" --conf "$WORK/small.gin" >/dev/null 2>"$WORK/err" && break
    sleep 0.1
done
expect_not_in "$WORK/err" "in use"
if [ -f "$R/train/algorithm/ckpt-4" ]; then ok; else bad "no run after the --nproc holder was killed"; fi

# MPI: rank 0 holds it for the job
if "$CALF" --version | grep -q "MPI backend: built in" && command -v mpirun >/dev/null; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # see e2e_mpi.sh
    R=$WORK/shared_mpi
    timeout 120 mpirun --oversubscribe -np 2 "$CALF" train --quiet --root_dir "$R" \
        --conf "$WORK/small.gin" "${LONG[@]}" >/dev/null 2>&1 &
    M=$!
    wait_for_line "$R/log/rank-1.log" "iter 2" 30
    W0=$(log_pid "$R/log/rank-0.log")
    expect_exit 2 "$CALF" train --root_dir "$R" --conf "$WORK/small.gin"
    expect_in "$WORK/err" "pid $W0 on host $HOST (calf train, rank 0 of 2 MPI ranks)"
    expect_exit 2 timeout 60 mpirun --oversubscribe -np 2 "$CALF" train --root_dir "$R" \
        --conf "$WORK/small.gin"
    expect_eq "$(grep -c "is in use by another run: pid $W0" "$WORK/err")" 1 "MPI refusal reported once"
    kill -9 "$W0"
    { wait $M; } 2>/dev/null
    for _ in $(seq 1 50); do
        "$CALF" train --quiet --root_dir "$R" --conf "$WORK/small.gin" >/dev/null 2>"$WORK/err" && break
        sleep 0.1
    done
    if [ -f "$R/train/algorithm/ckpt-4" ]; then ok; else bad "no run after MPI rank 0 was killed: $(cat "$WORK/err")"; fi
else
    echo "e2e_rundir: MPI lock checks skipped: calf was built without MPI or mpirun is missing"
fi

# ---- a dead run's temporary files go when the next run takes the lock (and only they)
R=$WORK/temps
expect_exit 0 "$CALF" train --quiet --root_dir "$R" --conf "$WORK/small.gin" --conf_param TrainerConfig.num_iterations=2
for f in train/algorithm/ckpt-3.tmp.4242 train/algorithm/ckpt-7.tmp.4243 config.gin.tmp.4242 \
         train/algorithm/ckpt-3.tmp.x notes.tmp.1; do
    echo partial > "$R/$f"
done
expect_exit 0 "$CALF" train --root_dir "$R" --conf "$WORK/small.gin"
expect_in "$WORK/err" "calf: removed $R/train/algorithm/ckpt-3.tmp.4242, left half-written by a run that died"
expect_in "$WORK/err" "calf: removed $R/config.gin.tmp.4242"
expect_eq "$(cd "$R" && find . -name '*.tmp.*' | sort | tr '\n' ' ')" "./notes.tmp.1 ./train/algorithm/ckpt-3.tmp.x " \
    "temporary files left (only what is not calf's)"
if [ -f "$R/train/algorithm/ckpt-4" ]; then ok; else bad "the resumed run did not finish"; fi

# ---- a run dir whose parts are symbolic links is refused, naming them, before calf
# writes through one: a planted .lock, rank log or checkpoint directory would otherwise
# have it overwrite, append to or delete another file (the victims here)
plant_run() { # plant_run DIR: a finished small run to plant links into
    expect_exit 0 "$CALF" train --quiet --root_dir "$1" --conf "$WORK/small.gin" --conf_param TrainerConfig.num_iterations=2
}
echo precious > "$WORK/victim_file"
mkdir -p "$WORK/victim_dir"
echo precious > "$WORK/victim_dir/ckpt-3.tmp.4242"
echo precious > "$WORK/victim_dir/notes"
victims() { (cd "$WORK" && find victim_file victim_dir -printf '%p %s %T@ %m\n' | sort && cat victim_file victim_dir/*); }
victims > "$WORK/victims_before"
for part in .lock log/rank-0.log train/algorithm; do
    R=$WORK/links_$(echo "$part" | tr '/.' '__')
    plant_run "$R"
    rm -rf "${R:?}/$part"
    if [ "$part" = train/algorithm ]; then ln -s "$WORK/victim_dir" "$R/$part"
    else ln -s "$WORK/victim_file" "$R/$part"; fi
    expect_exit 2 "$CALF" train --root_dir "$R" --conf "$WORK/small.gin" --conf_param TrainerConfig.num_iterations=4
    expect_in "$WORK/err" "--root_dir $R has symbolic links where calf writes: $R/$part;"
    expect_eq "$(wc -l < "$WORK/err")" 1 "lines of the refusal of a link at $part"
    victims > "$WORK/victims_after"
    expect_same_file "$WORK/victims_before" "$WORK/victims_after"
    if [ -L "$R/$part" ]; then ok; else bad "the link at $part was removed"; fi
done
# several links: each named, on the one line
R=$WORK/links_many
plant_run "$R"
rm -f "$R/.lock" "$R/log/rank-0.log"
ln -s "$WORK/victim_file" "$R/.lock"
ln -s "$WORK/victim_file" "$R/log/rank-0.log"
expect_exit 2 "$CALF" train --root_dir "$R" --conf "$WORK/small.gin" --conf_param TrainerConfig.num_iterations=4
expect_in "$WORK/err" "$R/.lock, $R/log/rank-0.log;"
expect_eq "$(wc -l < "$WORK/err")" 1 "lines of the refusal of two links"
victims > "$WORK/victims_after"
expect_same_file "$WORK/victims_before" "$WORK/victims_after"

# ---- a run killed while writing (a checkpoint every 100 iterations, every summary
# record written at once): its events files read back (a cut last record would be a
# warning), and the resume, to a few iterations past its newest checkpoint, is exact
R=$WORK/killed
"$CALF" train --quiet --root_dir "$R" --conf "$WORK/small.gin" \
    --conf_param TrainerConfig.num_iterations=10000000 --conf_param TrainerConfig.num_checkpoints=100000 \
    --conf_param TrainerConfig.summaries_flush_secs=0 &
A=$!
wait_for_line "$R/log/rank-0.log" "checkpoint $R/train/algorithm/ckpt-200" 30
kill -9 $A
{ wait $A; } 2>/dev/null
expect_exit 0 "$CALF" events "$R"/train/events.out.tfevents.*
LAST=$(last_ckpt "$R")
END=$((LAST + 30))
expect_exit 0 "$CALF" train --root_dir "$R" --conf "$WORK/small.gin" --conf_param TrainerConfig.num_iterations=$END
expect_in "$WORK/err" "resuming from $R/train/algorithm/ckpt-$LAST"
expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/kref" --conf "$WORK/small.gin" \
    --conf_param TrainerConfig.num_iterations=$END
expect_same_file "$WORK/kref/train/algorithm/ckpt-$END" "$R/train/algorithm/ckpt-$END"
expect_exit 0 "$CALF" events "$R"/train/events.out.tfevents.*
# the two launches show each step once
expect_eq "$(grep -c ' Metrics/EnvironmentSteps ' "$WORK/out")" $END "steps shown after the resume"

# ---- path limits, before anything is written
P=$WORK/deep/$(printf 'd%.0s' $(seq 1 200))
while [ ${#P} -lt 4050 ]; do P=$P/$(printf 'e%.0s' $(seq 1 200)); done
P=${P:0:4050}
expect_exit 2 "$CALF" train --root_dir "$P" --conf "$WORK/small.gin"
expect_in "$WORK/err" "characters cut ...]"
expect_in "$WORK/err" "is too long: 4050 characters, and the files calf writes under it add up to 256 more to a path of at most 4095 (PATH_MAX); use a shorter one"
if [ "$(wc -c < "$WORK/err")" -le 1100 ]; then ok; else bad "message of $(wc -c < "$WORK/err") bytes"; fi
if [ -e "$WORK/deep" ]; then bad "a directory was created for a root dir that is too long"; else ok; fi
expect_exit 2 "$CALF" train --root_dir "$WORK/deep/$(printf 'n%.0s' $(seq 1 300))/run" --conf "$WORK/small.gin"
expect_in "$WORK/err" "a name in it is 300 characters long, more than the 255 a file system allows (NAME_MAX)"
if [ -e "$WORK/deep" ]; then bad "a directory was created for a name that is too long"; else ok; fi
echo x > "$WORK/afile"
expect_exit 2 "$CALF" train --root_dir "$WORK/afile/sub" --conf "$WORK/small.gin"
expect_in "$WORK/err" "--root_dir $WORK/afile/sub: $WORK/afile is not a directory"

# ---- a finished run on a read-only mount has nothing to do (exit 0); one that is not
# finished cannot continue there (exit 1)
R=$WORK/ro/run
expect_exit 0 "$CALF" train --quiet --root_dir "$R" --conf "$WORK/small.gin"
if unshare -m true 2>/dev/null; then
    unshare -m bash -c 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" &&
        "$2" train --root_dir "$3" >"$4/ro_out" 2>"$4/ro_err"; echo $? > "$4/ro_rc";
        "$2" train --root_dir "$3" --conf_param TrainerConfig.num_iterations=6 2>"$4/ro_err2"; echo $? > "$4/ro_rc2"' \
        _ "$WORK/ro" "$CALF" "$R" "$WORK"
    expect_eq "$(cat "$WORK/ro_rc")" 0 "exit status of a finished run on a read-only mount"
    expect_in "$WORK/ro_err" "calf: nothing to do: the run in $R is complete at iteration 4"
    expect_eq "$(cat "$WORK/ro_rc2")" 1 "exit status of an unfinished run on a read-only mount"
    expect_in "$WORK/ro_err2" "--root_dir $R cannot be written (Read-only file system): the run cannot continue there"
else
    echo "e2e_rundir: read-only mount checks skipped: cannot make a mount namespace here (needs root)"
fi
# ---- a file system without fcntl locks (an NFS mount without lockd; the fault shim makes
# every lock request fail with ENOLCK): the run goes on, unlocked, with a warning, and
# leaves the temp files alone (one may be a live run's); the result is the usual one
if [ -n "${CALF_FAULT_SHIM:-}" ] && [ -f "$CALF_FAULT_SHIM" ] && ! ldd "$CALF" 2>/dev/null | grep -q libasan; then
    expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/lockref" --conf "$WORK/small.gin"
    N=$WORK/nolock
    mkdir -p "$N/train/algorithm"
    echo partial > "$N/train/algorithm/ckpt-9.tmp.4242"
    expect_exit 0 env LD_PRELOAD="$CALF_FAULT_SHIM" CALF_FAULT_LOCK=ENOLCK \
        "$CALF" train --quiet --root_dir "$N" --conf "$WORK/small.gin"
    expect_in "$WORK/err" "calf: warning: cannot lock $N/.lock (No locks available): its file system has no locks, so a second run on this --root_dir would not be refused; make sure there is none"
    expect_eq "$(wc -l < "$WORK/err")" 1 "lines on stderr of the unlocked run"
    expect_same_file "$WORK/lockref/train/algorithm/ckpt-4" "$N/train/algorithm/ckpt-4"
    expect_eq "$(cat "$N/train/algorithm/ckpt-9.tmp.4242")" partial "a temp file the unlocked run found"
    expect_in "$N/.lock" "pid "
    # any other lock failure is an error naming the file, with nothing written
    expect_exit 1 env LD_PRELOAD="$CALF_FAULT_SHIM" CALF_FAULT_LOCK=EIO \
        "$CALF" train --root_dir "$WORK/lockeio" --conf "$WORK/small.gin"
    expect_in "$WORK/err" "cannot lock $WORK/lockeio/.lock: Input/output error"
    if [ -e "$WORK/lockeio/config.gin" ]; then bad "config.gin written after a failed lock"; else ok; fi
else
    echo "e2e_rundir: unlocked file system checks skipped: no fault shim (ctest sets CALF_FAULT_SHIM) or calf is built with AddressSanitizer"
fi
report e2e_rundir
