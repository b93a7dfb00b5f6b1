#!/usr/bin/env bash
# ab_train.sh: is build B's --nproc 2 faster than build A's? On a shared machine whose
# speed drifts within seconds, separate bench runs cannot tell a few percent apart;
# this alternates A and B (and a 1-process run of B for the speedup) in every repeat
# and counts how often B beats A.
# Usage: bench/ab_train.sh CALF_A CALF_B [REPEATS] [CONF]   (from the source dir)
set -euo pipefail
A=${1:?usage: bench/ab_train.sh CALF_A CALF_B [REPEATS] [CONF]}
B=${2:?usage: bench/ab_train.sh CALF_A CALF_B [REPEATS] [CONF]}
N=${3:-15}
CONF=${4:-examples/ppo_cartpole.gin}
ROOT=$(mktemp -d /tmp/calf_ab.XXXXXX)
trap 'rm -rf "$ROOT"' EXIT
ARGS=(--conf "$CONF" --quiet --conf_param TrainerConfig.evaluate=False
      --conf_param TrainerConfig.num_checkpoints=0 --conf_param TrainerConfig.summary_interval=1000000)
us() { # microseconds one training takes
    local s e
    s=$(date +%s%N)
    "$@" --root_dir "$ROOT/run" "${ARGS[@]}" >/dev/null
    e=$(date +%s%N)
    rm -rf "$ROOT/run"
    echo $(((e - s) / 1000))
}
for i in $(seq 1 "$N"); do
    a=$(us "$A" train --nproc 2)
    b=$(us "$B" train --nproc 2)
    one=$(us "$B" train --nproc 1)
    echo "$a $b $one"
done >"$ROOT/times"
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "$N repeats of ($CONF): A --nproc 2, B --nproc 2, B --nproc 1"
echo "median speedup over B's 1 process: A $(awk '{printf "%.3f\n", $3 / $1}' "$ROOT/times" | median)x," \
     "B $(awk '{printf "%.3f\n", $3 / $2}' "$ROOT/times" | median)x"
echo "B faster than A in $(awk '$2 < $1' "$ROOT/times" | wc -l) of $N repeats"
