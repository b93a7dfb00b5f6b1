#!/usr/bin/env bash
# novel.sh: what memory is worth on CartPoleNoVel-v1 (CartPole with its velocities
# zeroed). Trains examples/ppo_lstm_cartpole_novel.gin (an LSTM core in front of each
# network) for seeds 1..N, and the same file with both cores removed (the memoryless
# baseline: ActorDistributionNetwork.lstm_hidden_size=0 and ValueNetwork's), then plays
# each final policy for 100 episodes from start states the training never saw, as the
# README's results do (`calf play --num_episodes 100 --seed 777`). Prints a line per run,
# then min, median and max of each. What bench/README.md's CartPoleNoVel rows (and the
# result README.md states) were measured with.
#
#   bench/novel.sh CALF [N] [NPROC]
#
# Defaults: N 3 seeds, NPROC 1 process per run (any NPROC gives the same bytes). The runs
# stay in a temporary directory that is removed at the end (KEEP=1 keeps it).
set -u
CALF=$(realpath "$1")
N=${2:-3}
NPROC=${3:-1}
SRC=$(cd "$(dirname "$0")/.." && pwd)
CONF=$SRC/examples/ppo_lstm_cartpole_novel.gin
WORK=$(mktemp -d /tmp/calf_novel.XXXXXX)
if [ "${KEEP:-0}" = 1 ]; then echo "novel.sh: runs kept in $WORK"; else trap 'rm -rf "$WORK"' EXIT; fi
NOCORE=(--conf_param ActorDistributionNetwork.lstm_hidden_size=0 --conf_param ValueNetwork.lstm_hidden_size=0)

printf '%-8s %4s  %18s  %8s\n' policy seed "100 episodes, 777" "train s"
for kind in lstm none; do
    for s in $(seq 1 "$N"); do
        R=$WORK/$kind-s$s
        extra=()
        [ "$kind" = none ] && extra=("${NOCORE[@]}")
        t0=$(date +%s.%N)
        if ! "$CALF" train --quiet --nproc "$NPROC" --root_dir "$R" --conf "$CONF" \
            --conf_param TrainerConfig.random_seed="$s" "${extra[@]}" >"$WORK/out" 2>&1; then
            echo "novel.sh: $kind seed $s failed:" >&2; tail -3 "$WORK/out" >&2; exit 1
        fi
        t1=$(date +%s.%N)
        pl=$("$CALF" play --root_dir "$R" --num_episodes 100 --seed 777 |
             sed -n 's/^average return over [0-9]* episodes: //p')
        printf '%-8s %4d  %18s  %8.1f\n' "$kind" "$s" "${pl:-?}" "$(echo "$t1 - $t0" | bc)"
        echo "$pl" >>"$WORK/$kind"
    done
    sort -g "$WORK/$kind" | awk -v k="$kind" '{ v[NR] = $1 }
        END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
              printf "%s: min %.1f, median %.1f, max %.1f over %d seeds\n", k, v[1], m, v[NR], NR }'
done
