#!/usr/bin/env bash
# e2e_slurm.sh: calf under Slurm, on a one-node cluster this test starts on 127.0.0.1 from
# Debian's packages (slurmctld, slurmd, slurm-client, slurm-wlm-basic-plugins with its
# mpi_pmix plugin; AuthType=auth/none, so no munge) and stops by pid when it ends:
#   srun --mpi=pmix -n 2 and -n 3 write the checkpoint of --nproc 1; srun without an MPI
#   plugin is refused; the README's sbatch script, ended by its time limit's --signal,
#   checkpoints, exits 130 and requeues itself, resumes, survives scancel, and ends on the
#   bytes of an uninterrupted run; a task killed with -9 ends the job, named.
# Skipped, saying why, without the packages or without calf's MPI backend.
. "$(dirname "$0")/lib_e2e.sh"

for tool in slurmctld slurmd srun sbatch squeue scontrol scancel; do
    if ! command -v $tool >/dev/null; then
        echo "e2e_slurm: skipped: $tool not found (apt-get install slurmctld slurmd slurm-client slurm-wlm-basic-plugins)"
        exit 77
    fi
done
if ! "$CALF" --version | grep -q "MPI backend: built in"; then
    echo "e2e_slurm: skipped: calf was built without MPI (install libopenmpi-dev and openmpi-bin)"
    exit 77
fi
# What this test checks is the launcher's (srun's ranks, sbatch's signal and requeue), and
# the training it launches is the code every other test runs under the sanitizers; its
# cluster costs 90 s there, so the Release build runs it.
if ldd "$CALF" 2>/dev/null | grep -q libasan; then
    echo "e2e_slurm: skipped: $CALF is built with AddressSanitizer; the Release build runs it"
    exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# ---- the cluster: one node, "calfnode", four CPUs (two cores here, oversubscribed) ----
S=$WORK/slurm
mkdir -p "$S/state" "$S/spool"
PORT=$((20000 + RANDOM % 20000))
HOST=$(hostname -s)
export SLURM_CONF=$S/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=calftest
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MailProg=/bin/true
SlurmdParameters=config_overrides
NodeName=calfnode NodeHostname=$(hostname) NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=debug Nodes=calfnode Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF

stop_daemon() { # pid file: TERM, then KILL after 10 s
    local pid
    pid=$(cat "$1" 2>/dev/null) || return 0
    kill "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
}
cleanup() {
    scancel --quiet --user=root 2>/dev/null
    stop_daemon "$S/slurmd.pid"
    stop_daemon "$S/slurmctld.pid"
    pkill -9 -f "$WORK/" 2>/dev/null # a task the daemons left behind (none should be)
    rm -rf "$WORK"
}
trap cleanup EXIT
show_logs() { for f in "$S"/*.log; do echo "--- $f" >&2; tail -n 15 "$f" >&2; done; }

slurmctld -f "$SLURM_CONF" && slurmd -f "$SLURM_CONF" -N calfnode || {
    show_logs; echo "e2e_slurm: FAIL: the Slurm daemons did not start" >&2; exit 1; }
up=0
for _ in $(seq 1 300); do
    if sinfo -h -o '%T' 2>/dev/null | grep -qx idle; then up=1; break; fi
    sleep 0.1
done
if [ $up = 0 ]; then show_logs; echo "e2e_slurm: FAIL: the node never came up" >&2; exit 1; fi
if ! srun --mpi=list 2>&1 | grep -q pmix; then
    echo "e2e_slurm: skipped: srun lists no pmix plugin"
    exit 77
fi

# job_state ID: the job's state (one line), "" once it has left the queue
job_state() { printf '%s\n' "$(squeue -h -j "$1" -o '%T' 2>/dev/null)"; }
# wait_job ID SECONDS PATTERN: wait until the job's state matches PATTERN (grep -E)
wait_job() {
    local i
    for i in $(seq 1 $(($2 * 5))); do
        job_state "$1" | grep -qxE "$3" && return 0
        sleep 0.2
    done
    return 1
}
# no_calf_left DIR: no process runs with DIR on its command line
no_calf_left() {
    if pgrep -f "$1" >/dev/null; then bad "processes left behind for $1: $(pgrep -af "$1")"; else ok; fi
}

CONF=$SRC/examples/ppo_cartpole.gin
SHORT=(--conf_param TrainerConfig.num_iterations=4 --conf_param TrainerConfig.evaluate=False)

# ---- srun --mpi=pmix: N tasks are one job, with the bytes of one process --------------
expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/local1" --conf "$CONF" "${SHORT[@]}"
for n in 2 3; do
    expect_exit 0 timeout 300 srun --mpi=pmix -n $n "$CALF" train --quiet \
        --root_dir "$WORK/srun$n" --conf "$CONF" "${SHORT[@]}"
    expect_same_file "$WORK/local1/train/algorithm/ckpt-4" "$WORK/srun$n/train/algorithm/ckpt-4"
    for ((r = 0; r < n; r++)); do
        expect_in "$WORK/srun$n/log/rank-$r.log" "rank $r/$n: environments"
    done
done

# ---- srun without an MPI plugin (MpiDefault=none): refused, nothing written ------------
expect_exit 2 timeout 120 srun -n 2 "$CALF" train --quiet --root_dir "$WORK/noplugin" \
    --conf "$CONF" "${SHORT[@]}"
expect_in "$WORK/err" "srun started 2 tasks without an MPI plugin"
expect_in "$WORK/err" "srun --mpi=pmix"
[ ! -e "$WORK/noplugin" ] && ok || bad "srun without --mpi=pmix wrote $WORK/noplugin"

# ---- a task killed with -9 ends the job, naming the task and its node ------------------
timeout 300 srun --mpi=pmix -n 2 "$CALF" train --quiet --root_dir "$WORK/killed" --conf "$CONF" \
    --conf_param TrainerConfig.num_iterations=0 --conf_param TrainerConfig.num_env_steps=1000000000000 \
    >"$WORK/killed.out" 2>&1 &
SRUN=$!
if wait_for_line "$WORK/killed/log/rank-1.log" "environments" 120; then
    kill -9 "$(log_pid "$WORK/killed/log/rank-1.log")"
    t0=$(date +%s)
    wait $SRUN
    took=$(($(date +%s) - t0))
    # Slurm's KillWait (30 s) bounds it; an MPI job that ignores the dead task hangs instead
    [ $took -le 60 ] && ok || bad "the job took $took s to end after a task was killed"
    expect_in "$WORK/killed.out" "calfnode: task 1: Killed"
else
    bad "the job to kill never started"; kill $SRUN; wait $SRUN
fi
no_calf_left "$WORK/killed"

# ---- the README's sbatch script: time limit, requeue, scancel, resume ----------------
# The script as the README gives it, with this build's paths for the user's.
awk '/^#!\/bin\/bash$/ { on = 1 } on && /^```$/ { exit } on' "$SRC/README.md" >"$WORK/job.sh"
sed -i -e "s#build/calf#$CALF#" -e "s#/shared/runs/cartpole#$WORK/preempt#" \
    -e "s#examples/ppo_cartpole.gin#$CONF#" "$WORK/job.sh"
for want in "#SBATCH --signal=TERM@" "#SBATCH --requeue" "srun --mpi=pmix $CALF train" \
            "scontrol requeue"; do
    expect_in "$WORK/job.sh" "$want"
done
OUT=$WORK/job.out
# One minute's limit (the shortest Slurm has), the signal 30 s before it; a run with no end.
FOREVER=(--conf_param TrainerConfig.num_iterations=0 --conf_param TrainerConfig.num_env_steps=1000000000000
         --conf_param TrainerConfig.evaluate=False --conf_param "Adam.lr_schedule='constant'")
JOB=$(sbatch --parsable --ntasks=2 --time=1 --signal=TERM@30 --output="$OUT" "$WORK/job.sh" \
      "${FOREVER[@]}")
CKPTS=$WORK/preempt/train/algorithm
if [ -z "$JOB" ]; then
    bad "sbatch did not submit the README's script"
elif ! wait_job "$JOB" 120 "RUNNING"; then
    bad "job $JOB never ran (state: $(job_state "$JOB"))"; show_logs
elif ! wait_job "$JOB" 240 "PENDING"; then # requeued by the script itself: pending again
    bad "job $JOB was not requeued after its time limit (state: $(job_state "$JOB"))"; show_logs
else
    K=$(sed -n 's/^interrupted: stopped after iteration \([0-9]*\), checkpoint written$/\1/p' "$OUT")
    expect_in "$OUT" "Exited with exit code 130"
    if [ -n "$K" ] && [ -f "$CKPTS/ckpt-$K" ]; then ok; else bad "no checkpoint at the time limit"; cat "$OUT" >&2; fi
    # Slurm holds a requeued job for a while (BeginTime); start it now
    scontrol update JobId="$JOB" StartTime=now
    if wait_for_line "$OUT" "resuming from $CKPTS/ckpt-$K (iteration $K)" 120 &&
       wait_for_line "$OUT" "iter $((K + 1))/" 120; then
        scancel "$JOB"
        wait_job "$JOB" 120 "|CANCELLED|COMPLETED" || bad "job $JOB still there after scancel: $(job_state "$JOB")"
        no_calf_left "$WORK/preempt"
        # (its last lines may not reach the output: srun is cancelled with the job)
        J=$(last_ckpt "$WORK/preempt")
        [ -n "$J" ] && [ "$J" -gt "$K" ] && [ -f "$CKPTS/ckpt-$J" ] && ok ||
            { bad "scancel left no checkpoint after $K"; cat "$OUT" >&2; }
        # a second sbatch of the same script ends the run; an uninterrupted one must match it
        END=$((J + 3))
        BOUNDED=(--conf_param TrainerConfig.num_iterations=$END --conf_param TrainerConfig.evaluate=False
                 --conf_param "Adam.lr_schedule='constant'")
        expect_exit 0 timeout 300 sbatch --wait --ntasks=2 --output="$WORK/job2.out" "$WORK/job.sh" "${BOUNDED[@]}"
        expect_in "$WORK/job2.out" "resuming from $CKPTS/ckpt-$J (iteration $J)"
        expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/straight" --conf "$CONF" "${BOUNDED[@]}"
        expect_same_file "$WORK/straight/train/algorithm/ckpt-$END" "$CKPTS/ckpt-$END"
    else
        bad "the requeued job did not resume from ckpt-$K"; cat "$OUT" >&2; show_logs
    fi
fi
no_calf_left "$WORK/preempt"

report e2e_slurm
