#!/usr/bin/env bash
# minatar_results.sh: issue 37's section-3 runs on MinAtar, in the background, and their
# table: PPO (examples/ppo_minatar_breakout.gin, 10M env steps) on all five games' -v1
# (minimal action sets, as gymnax plays them), and DQN (examples/dqn_minatar_breakout.gin,
# the MinAtar paper's, 5M frames) on Breakout-v0 and SpaceInvaders-v0 (full action sets,
# as the paper's), seeds 1-3 each; every run then plays 100 greedy episodes. Hours of
# work (21 runs): a development machine's, never CI's.
#
#   bench/minatar_results.sh start CALF OUT [NPROC] [WORKERS]   queue every run not yet done
#   bench/minatar_results.sh table OUT                          the table of what is done
#
# start returns at once; the runs go on in the background (nohup), WORKERS at a time
# (default 1), each on `--nproc NPROC` (default 1), nice'd; OUT/<run>/ holds its root dir,
# OUT/<run>.log its output, OUT/<run>.wall its wall seconds and OUT/<run>.play `calf play
# --num_episodes 100`'s output. A run with a .play file is done and not run again; one
# killed midway resumes from its last checkpoint. PPO_ITERATIONS and DQN_FRAMES, when set,
# shorten every run (a shortened run is not the issue's: say so beside its figures);
# MINATAR_GAMES and MINATAR_SEEDS (space-separated) pick fewer games and seeds.
# table: per run the final greedy evaluation (the run's last eval/ AverageReturn, 10
# episodes) and play's average over 100, the wall clock, then each game's mean over the
# seeds done beside the published figures (gymnax's PPO checkpoints, which play without
# sticky actions; the MinAtar paper's DQN curves, read at 5M frames).
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
GAMES=${MINATAR_GAMES:-Asterix Breakout Freeway Seaquest SpaceInvaders}
SEEDS=${MINATAR_SEEDS:-1 2 3}

# the runs, one line each: NAME EXAMPLE ENV SEED
runs() {
    local g s
    for g in $GAMES; do
        for s in $SEEDS; do echo "ppo_${g}_s$s ppo_minatar_breakout MinAtar/$g-v1 $s"; done
    done
    for g in $GAMES; do
        [ $g = Breakout ] || [ $g = SpaceInvaders ] || continue
        for s in $SEEDS; do echo "dqn_${g}_s$s dqn_minatar_breakout MinAtar/$g-v0 $s"; done
    done
}

# one_run CALF OUT NPROC NAME EXAMPLE ENV SEED: train (or resume), then play 100 episodes
one_run() {
    local calf=$1 out=$2 nproc=$3 name=$4 ex=$5 env=$6 seed=$7
    local extra=()
    [ -n "${PPO_ITERATIONS:-}" ] && [ "${ex#ppo}" != "$ex" ] &&
        extra+=(--conf_param "TrainerConfig.num_iterations=$PPO_ITERATIONS")
    [ -n "${DQN_FRAMES:-}" ] && [ "${ex#dqn}" != "$ex" ] &&
        extra+=(--conf_param "TrainerConfig.num_env_steps=$DQN_FRAMES")
    local t0 t1
    t0=$(date +%s.%N)
    nice -n 10 "$calf" train --quiet --nproc "$nproc" --root_dir "$out/$name" \
        --conf "$SRC/examples/$ex.gin" --conf_param "create_environment.env_name='$env'" \
        --conf_param "TrainerConfig.random_seed=$seed" "${extra[@]}" >"$out/$name.log" 2>&1 || {
        echo "train failed, exit $?" >>"$out/$name.log"
        return 1
    }
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f\n", b - a }' >"$out/$name.wall"
    nice -n 10 "$calf" play --root_dir "$out/$name" --num_episodes 100 >"$out/$name.play.tmp" 2>&1 &&
        mv "$out/$name.play.tmp" "$out/$name.play"
}

start() {
    local calf out nproc workers
    calf=$(realpath "$1") out=$(realpath -m "$2") nproc=${3:-1} workers=${4:-1}
    mkdir -p "$out" || exit 1
    local todo="$out/queue"
    runs | while read -r name ex env seed; do
        [ -e "$out/$name.play" ] || echo "$name $ex $env $seed"
    done >"$todo"
    echo "$(wc -l <"$todo") runs queued in $out, $workers at a time on --nproc $nproc"
    local w
    for ((w = 0; w < workers; w++)); do
        # worker w takes every workers-th line of the queue
        nohup bash -c '
            . "$0" --functions
            awk -v w="$1" -v n="$2" "(NR - 1) % n == w" "$3/queue" |
                while read -r name ex env seed; do one_run "$4" "$3" "$5" "$name" "$ex" "$env" "$seed"; done
        ' "$0" "$w" "$workers" "$out" "$calf" "$nproc" >"$out/worker$w.log" 2>&1 &
    done
}

# last_eval DIR: the last AverageReturn of DIR's evaluation events (empty when none)
last_eval() {
    local f=("$1"/eval/events.out.tfevents.*)
    [ -e "${f[0]}" ] || return 0
    "$CALF_BIN" events "${f[@]}" 2>/dev/null | awk '$2 == "Metrics/AverageReturn" { v = $3 } END { if (v != "") printf "%.2f", v }'
}

table() {
    local out=$1
    CALF_BIN=${CALF:-$SRC/build/calf}
    printf '%-22s %-24s %12s %12s %10s\n' run env "final eval" "play x100" "wall s"
    runs | while read -r name ex env seed; do
        [ -d "$out/$name" ] || continue
        local ev play wall
        ev=$(last_eval "$out/$name")
        play=$(sed -n 's/^average return over 100 episodes: //p' "$out/$name.play" 2>/dev/null)
        wall=$(cat "$out/$name.wall" 2>/dev/null)
        printf '%-22s %-24s %12s %12s %10s\n' "$name" "$env" "${ev:--}" "${play:-running}" "${wall:--}"
    done
    echo
    printf '%-6s %-14s %6s %14s %14s   %s\n' algo game seeds "eval (mean)" "play (mean)" published
    local a g
    for a in ppo dqn; do
        for g in $GAMES; do
            [ $a = dqn ] && [ $g != Breakout ] && [ $g != SpaceInvaders ] && continue
            local n=0 se=0 sp=0 s
            for s in $SEEDS; do
                [ -e "$out/${a}_${g}_s$s.play" ] || continue
                n=$((n + 1))
                se=$(awk -v a="$se" -v b="$(last_eval "$out/${a}_${g}_s$s")" 'BEGIN { print a + b }')
                sp=$(awk -v a="$sp" -v b="$(sed -n 's/^average return over 100 episodes: //p' "$out/${a}_${g}_s$s.play")" 'BEGIN { print a + b }')
            done
            local ref
            case $a-$g in
            ppo-Asterix) ref="gymnax PPO 15 (no sticky actions)" ;;
            ppo-Breakout) ref="gymnax PPO 28 (no sticky actions)" ;;
            ppo-Freeway) ref="gymnax PPO 58 (no sticky actions)" ;;
            ppo-SpaceInvaders) ref="gymnax PPO 131 (no sticky actions)" ;;
            ppo-Seaquest) ref="(gymnax: none)" ;;
            dqn-*) ref="MinAtar paper's DQN curve at 5M frames" ;;
            esac
            [ $n = 0 ] && { printf '%-6s %-14s %6s %14s %14s   %s\n' $a $g 0 - - "$ref"; continue; }
            awk -v a=$a -v g=$g -v n=$n -v se="$se" -v sp="$sp" -v r="$ref" \
                'BEGIN { printf "%-6s %-14s %6d %14.2f %14.2f   %s\n", a, g, n, se / n, sp / n, r }'
        done
    done
}

case ${1:-} in
--functions) ;; # sourced by a worker
start)
    [ $# -ge 3 ] || { echo "usage: $0 start CALF OUT [NPROC] [WORKERS]" >&2; exit 2; }
    shift
    start "$@"
    ;;
table)
    [ $# -ge 2 ] || { echo "usage: $0 table OUT" >&2; exit 2; }
    table "$2"
    ;;
*)
    sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
