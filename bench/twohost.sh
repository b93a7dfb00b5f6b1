#!/usr/bin/env bash
# twohost.sh: ppo_cartpole on 2 MPI ranks across two simulated hosts (tests/lib_twohost.sh:
# network namespaces, a veth pair, Open MPI over TCP) against the same job on one host,
# over loopback TCP and over shared memory (vader), alternated in every repeat so that the
# machine's drift falls on all alike. Needs root. Prints each run's wall time, then per
# kind the median, and each kind over loopback TCP (time of loopback / time of the kind).
#
#   bench/twohost.sh CALF [REPEATS] [KIND...]
#
# Kinds: veth (across hosts, no binding), veth-spin (the same with mpi_yield_when_idle 0:
# waiting ranks spin instead of calf's default, yielding), veth-bound (Open MPI's default
# binding: each host binds its first rank to core 0), lo (loopback TCP, no binding),
# lo-spin, lo-bound (default binding), vader (shared memory), vader-spin, start-veth and
# start-lo (an empty job: what starting costs). Default: veth veth-spin lo lo-spin vader
# vader-spin start-veth start-lo. Also CONF (default examples/ppo_cartpole.gin),
# PARAMS (extra --conf_param bindings) and BENCH_NP (ranks, default 2) from the environment.
set -u
CALF=$(realpath "$1")
REPEATS=${2:-5}
shift $(($# >= 2 ? 2 : 1))
KINDS=("$@")
[ ${#KINDS[@]} -gt 0 ] || KINDS=(veth veth-spin lo lo-spin vader vader-spin start-veth start-lo)
SRC=$(cd "$(dirname "$0")/.." && pwd)
CONF=${CONF:-$SRC/examples/ppo_cartpole.gin}
NP=${BENCH_NP:-2}
WORK=$(mktemp -d /tmp/calf_twohost.XXXXXX)
. "$SRC/tests/lib_twohost.sh"
trap 'twohost_down; rm -rf "$WORK"' EXIT
if ! twohost_up; then echo "twohost.sh: $TWOHOST_WHY" >&2; exit 1; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TCP_LO=(--mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
SPIN=(--mca mpi_yield_when_idle 0)

run_kind() {
    local kind=$1 root=$WORK/run
    rm -rf "$root"
    local job=("$CALF" train --quiet --root_dir "$root" --conf "$CONF")
    local p
    for p in ${PARAMS:-}; do job+=(--conf_param "$p"); done
    case $kind in
    veth) "$TWOHOST_MPIRUN" -np "$NP" "${job[@]}" ;;
    veth-spin) "$TWOHOST_MPIRUN" "${SPIN[@]}" -np "$NP" "${job[@]}" ;;
    veth-bound) TWOHOST_BIND=core "$TWOHOST_MPIRUN" -np "$NP" "${job[@]}" ;;
    lo) mpirun --oversubscribe --bind-to none "${TCP_LO[@]}" -np "$NP" "${job[@]}" ;;
    lo-spin) mpirun --oversubscribe --bind-to none "${TCP_LO[@]}" "${SPIN[@]}" -np "$NP" "${job[@]}" ;;
    lo-bound) mpirun --oversubscribe "${TCP_LO[@]}" -np "$NP" "${job[@]}" ;;
    vader) mpirun --oversubscribe --bind-to none -np "$NP" "${job[@]}" ;;
    vader-spin) mpirun --oversubscribe --bind-to none "${SPIN[@]}" -np "$NP" "${job[@]}" ;;
    start-veth) "$TWOHOST_MPIRUN" -np "$NP" true ;;
    start-lo) mpirun --oversubscribe --bind-to none "${TCP_LO[@]}" -np "$NP" true ;;
    *) echo "twohost.sh: unknown kind '$kind'" >&2; return 2 ;;
    esac
}

declare -A TIMES
echo "load: $(uptime | sed 's/.*load/load/')"
for r in $(seq 1 "$REPEATS"); do
    line="repeat $r:"
    for kind in "${KINDS[@]}"; do
        t0=$EPOCHREALTIME
        if ! run_kind "$kind" >"$WORK/out" 2>&1; then
            echo "twohost.sh: $kind failed:" >&2
            tail -n 5 "$WORK/out" >&2
            exit 1
        fi
        dt=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')
        TIMES[$kind]="${TIMES[$kind]:-} $dt"
        line="$line $kind $dt s"
    done
    echo "$line"
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "load: $(uptime | sed 's/.*load/load/')"
LO=""
[ -n "${TIMES[lo]:-}" ] && LO=$(echo "${TIMES[lo]}" | median)
for kind in "${KINDS[@]}"; do
    m=$(echo "${TIMES[$kind]}" | median)
    if [ -n "$LO" ] && [ "${kind#start}" = "$kind" ]; then
        echo "$kind: median $m s, loopback TCP / $kind = $(awk -v a="$LO" -v b="$m" 'BEGIN { printf "%.2f", a / b }')"
    else
        echo "$kind: median $m s"
    fi
done
