#!/usr/bin/env bash
# portable.sh: the default build (portable: the hot kernels' variant chosen at start,
# src/numerics/kernels.h) against -DCALF_NATIVE=ON, side by side. Builds both trees, then
# in every repeat runs each workload with each build in turn (a shared machine's speed
# drifts within seconds), and prints medians: ppo_cartpole (20 iterations), sac_pendulum
# (3,000 env steps) and, with MuJoCo, bench_sac --mujoco's one-process SAC run made
# shorter (sac_halfcheetah_1m.gin at 256x256, 1,000 updates after 1,000 random steps);
# BENCH_SAC_MUJOCO=1 adds the whole `bench_sac --mujoco 1` (SAC and TD3, six runs: about
# 2 minutes a build on an idle machine). The portable build forced to its fallback
# (CALF_KERNELS=generic) runs ppo and sac_pendulum GENERIC_REPEATS times (default 1: it
# is many times slower).
# Usage: bench/portable.sh [REPEATS] [WORK_DIR]   (from the source dir)
set -euo pipefail
N=${1:-3}
WORK=${2:-/tmp/calf_portable_bench}
GENERIC_REPEATS=${GENERIC_REPEATS:-1}
BENCH_SAC_MUJOCO=${BENCH_SAC_MUJOCO:-0}
mkdir -p "$WORK"
build() { # build NAME CMAKE_ARGS...: the calf program and bench_sac
    local name=$1; shift
    if ! { cmake -S . -B "$WORK/$name" -DCMAKE_BUILD_TYPE=Release -DCALF_WITH_MPI=OFF \
               -DCALF_WITH_VIDEO=OFF -DCALF_WITH_PYTHON=OFF "$@" &&
           cmake --build "$WORK/$name" --target calf bench_sac -j2; } >"$WORK/$name.log" 2>&1; then
        tail -20 "$WORK/$name.log" >&2
        exit 1
    fi
}
build portable -DCALF_NATIVE=OFF
build native -DCALF_NATIVE=ON
MUJOCO=0
"$WORK/native/calf" --version | grep -q "MuJoCo envs: built in" && MUJOCO=1
echo "portable: $("$WORK/portable/calf" --version | sed -n 's/^kernels: //p')"
echo "native:   $("$WORK/native/calf" --version | sed -n 's/^kernels: //p')"

QUIET=(--quiet --conf_param TrainerConfig.evaluate=False --conf_param TrainerConfig.num_checkpoints=0)
PPO=(--conf examples/ppo_cartpole.gin --conf_param TrainerConfig.num_iterations=20 "${QUIET[@]}")
SAC=(--conf examples/sac_pendulum.gin --conf_param TrainerConfig.num_iterations=0
     --conf_param TrainerConfig.num_env_steps=3000 "${QUIET[@]}")
CHEETAH=(--conf examples/sac_halfcheetah_1m.gin --conf_param TrainerConfig.num_iterations=0
         --conf_param TrainerConfig.initial_collect_steps=1000
         --conf_param TrainerConfig.num_env_steps=2000 "${QUIET[@]}")
# train LABEL BUILD WORKLOAD [ENV...]: appends "wall_s cpu_s" of one training to $WORK/LABEL
train() {
    local label=$1 calf=$WORK/$2/calf workload=$3; shift 3
    local -n args=$workload
    rm -rf "$WORK/run"
    env "$@" /usr/bin/time -f "%e %U %S" -o "$WORK/time" "$calf" train --root_dir "$WORK/run" \
        "${args[@]}" >/dev/null
    awk '{printf "%.3f %.3f\n", $1, $2 + $3}' "$WORK/time" >>"$WORK/$label"
}
# sac_mujoco LABEL BUILD: appends SAC's and TD3's updates/s of one bench_sac --mujoco 1
sac_mujoco() {
    "$WORK/$2/bench_sac" --mujoco 1 >"$WORK/out"
    echo "$(sed -n 's/^SAC HalfCheetah.*median of 1: \([0-9]*\) updates.*/\1/p' "$WORK/out")" \
         "$(sed -n 's/^TD3 HalfCheetah.*median of 1: \([0-9]*\) updates.*/\1/p' "$WORK/out")" \
         >>"$WORK/$1"
}
rm -f "$WORK"/{ppo,sac,cheetah,mj}-*
for i in $(seq 1 "$N"); do
    for b in portable native; do train "ppo-$b" "$b" PPO X=1; done
    for b in portable native; do train "sac-$b" "$b" SAC X=1; done
    if [ $MUJOCO = 1 ]; then for b in portable native; do train "cheetah-$b" "$b" CHEETAH X=1; done; fi
    if [ $MUJOCO = 1 ] && [ "$BENCH_SAC_MUJOCO" = 1 ]; then
        for b in portable native; do sac_mujoco "mj-$b" "$b"; done
    fi
    if [ "$i" -le "$GENERIC_REPEATS" ]; then
        train ppo-generic portable PPO CALF_KERNELS=generic
        train sac-generic portable SAC CALF_KERNELS=generic
    fi
    echo "repeat $i of $N done" >&2
done

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
col() { cut -d' ' -f"$2" "$WORK/$1" | median; } # col FILE FIELD: the median of a column
echo "medians of $N repeats, wall s / cpu s (portable's speed relative to native: native's time / portable's)"
for w in ppo sac; do
    name=$([ $w = ppo ] && echo "ppo_cartpole 20 iterations" || echo "sac_pendulum 3000 steps")
    pw=$(col "$w-portable" 1) pc=$(col "$w-portable" 2) nw=$(col "$w-native" 1) nc=$(col "$w-native" 2)
    gw=$(col "$w-generic" 1) gc=$(col "$w-generic" 2)
    printf "%-28s portable %6.2f / %6.2f   native %6.2f / %6.2f   portable/native %.2f (wall) %.2f (cpu)\n" \
        "$name" "$pw" "$pc" "$nw" "$nc" "$(echo "$nw / $pw" | bc -l)" "$(echo "$nc / $pc" | bc -l)"
    printf "%-28s forced generic %6.2f / %6.2f (%d runs): %.1fx native's cpu time\n" "" "$gw" "$gc" \
        "$GENERIC_REPEATS" "$(echo "$gc / $nc" | bc -l)"
done
if [ $MUJOCO = 1 ]; then
    pw=$(col cheetah-portable 1) pc=$(col cheetah-portable 2)
    nw=$(col cheetah-native 1) nc=$(col cheetah-native 2)
    printf "%-28s portable %6.2f / %6.2f   native %6.2f / %6.2f   portable/native %.2f (wall) %.2f (cpu)\n" \
        "sac_halfcheetah 1000 updates" "$pw" "$pc" "$nw" "$nc" "$(echo "$nw / $pw" | bc -l)" \
        "$(echo "$nc / $pc" | bc -l)"
fi
if [ $MUJOCO = 1 ] && [ "$BENCH_SAC_MUJOCO" = 1 ]; then
    for f in 1 2; do
        name=$([ $f = 1 ] && echo SAC || echo TD3)
        p=$(col mj-portable $f) n=$(col mj-native $f)
        printf "%-28s portable %6.0f   native %6.0f updates/s   portable/native %.2f\n" \
            "bench_sac --mujoco $name" "$p" "$n" "$(echo "$p / $n" | bc -l)"
    done
fi
