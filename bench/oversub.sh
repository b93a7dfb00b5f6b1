#!/usr/bin/env bash
# oversub.sh: how `calf train --nproc N` behaves with far more processes than cores. One
# fixed job (ppo_cartpole with 1,024 envs and 8 steps each per iteration, so that every
# N up to 1,024 can split it) is run at each N; time per iteration should grow about
# linearly with processes per core, not faster.
# Usage: bench/oversub.sh [--term] CALF [LIMIT_S] [N...]   (from the source dir; defaults:
# 120 s, N = 2 16 64 128 256 512 1024). Each run is killed after LIMIT_S seconds.
# --term: instead, start a 1,000-iteration run at each N, send SIGTERM 2 s after rank 0
# has written config.gin (every rank is set up: the first iteration is under way) and
# time until the launcher exits (bash builtins only, so the clock forks nothing).
set -uo pipefail
export LC_ALL=C # EPOCHREALTIME's decimal point
TERM_MODE=0
if [ "${1:-}" = --term ]; then TERM_MODE=1; shift; fi
CALF=${1:?usage: bench/oversub.sh [--term] CALF [LIMIT_S] [N...]}
LIMIT=${2:-120}
shift $(($# >= 2 ? 2 : $#))
NS=("$@")
[ ${#NS[@]} -gt 0 ] || NS=(2 16 64 128 256 512 1024)
ROOT=$(mktemp -d /tmp/calf_oversub.XXXXXX)
trap 'rm -rf "$ROOT"' EXIT
ITERS=3
E=1024
T=8
cpus=$(getconf _NPROCESSORS_ONLN)
ARGS=(--conf examples/ppo_cartpole.gin
      --conf_param create_environment.num_parallel_environments=$E
      --conf_param TrainerConfig.unroll_length=$T
      --conf_param TrainerConfig.evaluate=False
      --conf_param TrainerConfig.num_checkpoints=0
      --conf_param TrainerConfig.summary_interval=1000000)
if [ $TERM_MODE = 1 ]; then
    echo "SIGTERM during the first iteration: ppo_cartpole, $E envs x $T steps, $cpus cores"
    printf '%6s %6s %10s %6s\n' nproc exit seconds left
    for n in "${NS[@]}"; do
        rm -rf "$ROOT/run"
        "$CALF" train --quiet --root_dir "$ROOT/run" --nproc "$n" "${ARGS[@]}" \
            --conf_param TrainerConfig.num_iterations=1000 >/dev/null 2>"$ROOT/err" &
        pid=$!
        for i in $(seq 1 $((LIMIT * 10))); do
            [ -e "$ROOT/run/config.gin" ] && break
            sleep 0.1
        done
        sleep 2
        s=$EPOCHREALTIME
        kill -TERM $pid
        ( sleep "$LIMIT"; kill -KILL $pid 2>/dev/null ) &
        watchdog=$!
        wait $pid
        rc=$?
        e=$EPOCHREALTIME
        kill $watchdog 2>/dev/null
        wait $watchdog 2>/dev/null
        left=$(pgrep -c -f -- "--root_dir $ROOT/run " || true)
        printf '%6d %6d %10.2f %6s\n' "$n" "$rc" "$(echo "$e - $s" | bc -l)" "$left"
    done
    exit 0
fi
echo "ppo_cartpole, $E envs x $T steps per iteration, $ITERS iterations, $cpus cores, limit $LIMIT s"
printf '%6s %8s %10s  %s\n' nproc wall_s status "seconds per iteration (1, 2, 3)"
for n in "${NS[@]}"; do
    rm -rf "$ROOT/run"
    s=$(date +%s%N)
    timeout -k 5 "$LIMIT" "$CALF" train --quiet --root_dir "$ROOT/run" --nproc "$n" "${ARGS[@]}" \
        --conf_param TrainerConfig.num_iterations=$ITERS >/dev/null 2>"$ROOT/err"
    rc=$?
    e=$(date +%s%N)
    # the rank-0 log's progress lines: "iter k/3  env steps S  R steps/s ..."
    per=$(awk -v steps=$((E * T)) '/^iter [0-9]+\/[0-9]+ .* steps\/s/ {
              for (i = 1; i < NF; i++) if ($(i + 1) == "steps/s") printf "%.3f ", steps / $i }' \
          "$ROOT/run/log/rank-0.log" 2>/dev/null)
    printf '%6d %8.2f %10s  %s\n' "$n" "$(echo "($e - $s) / 1000000000" | bc -l)" \
        "$([ $rc = 0 ] && echo ok || echo "exit $rc")" "${per:-none}"
done
