#!/usr/bin/env bash
# seeds.sh: how an example's final evaluation spreads over training seeds. Trains CONF
# once per seed 1..N (unchanged but for TrainerConfig.random_seed), then plays each final
# policy for EPISODES episodes from start states the training never evaluated on (calf
# play's default seed 0). Prints a line per seed, then how many final evaluations fall
# below BAR and the median. What bench/README.md's "sac_pendulum's final evaluation
# across seeds" was measured with.
#
#   bench/seeds.sh CALF [N] [CONF] [BAR] [EPISODES]
#
# Defaults: N 40, CONF examples/sac_pendulum.gin, BAR -200, EPISODES 100. The runs stay
# in a temporary directory that is removed at the end (KEEP=1 keeps it and says where).
set -u
CALF=$(realpath "$1")
N=${2:-40}
SRC=$(cd "$(dirname "$0")/.." && pwd)
CONF=$(realpath "${3:-$SRC/examples/sac_pendulum.gin}")
BAR=${4:--200}
EPISODES=${5:-100}
WORK=$(mktemp -d /tmp/calf_seeds.XXXXXX)
if [ "${KEEP:-0}" = 1 ]; then echo "seeds.sh: runs kept in $WORK"; else trap 'rm -rf "$WORK"' EXIT; fi

printf '%4s  %12s  %14s\n' seed "final eval" "$EPISODES episodes"
for s in $(seq 1 "$N"); do
    R=$WORK/s$s
    if ! "$CALF" train --quiet --root_dir "$R" --conf "$CONF" \
        --conf_param TrainerConfig.random_seed="$s" >"$WORK/out" 2>&1; then
        echo "seeds.sh: seed $s failed:" >&2; tail -3 "$WORK/out" >&2; exit 1
    fi
    ev=$(sed -n 's/^eval iter [0-9]*: average return \([-0-9.]*\) over.*/\1/p' "$R/log/rank-0.log" | tail -1)
    pl=$("$CALF" play --root_dir "$R" --num_episodes "$EPISODES" | sed -n 's/^average return over [0-9]* episodes: //p')
    printf '%4d  %12s  %14s\n' "$s" "${ev:-?}" "${pl:-?}"
    echo "$ev" >>"$WORK/evals"
done
sort -g "$WORK/evals" | awk -v bar="$BAR" -v n="$N" '
    { v[NR] = $1; if ($1 < bar) below++ }
    END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
          printf "%d of %d final evaluations below %s; median %.1f\n", below + 0, n, bar, m }'
