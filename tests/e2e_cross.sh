# e2e_cross.sh: calf's own arithmetic gives the same bits on every CPU. Builds the calf
# program three ways (-DCALF_NATIVE=ON x86-64, the default portable x86-64 build, aarch64
# run under qemu-user), checks which kernel variant the portable one chooses, runs it
# forced to each variant (CALF_KERNELS=avx512, fma, generic; avx512 only where the CPU has
# AVX-512F and VL, with a printed note where not), and forced to generic with glibc's
# FMA/AVX2 variants turned off too, trains short ppo_cartpole, ppo_pendulum, sac_pendulum
# and DQN-with-RMSProp runs with each, and tiny conv (PPO and DQN on MinAtar/Breakout-v1's
# bytes, 4 filters) and recurrent (an LSTM on CartPoleNoVel-v1, GRUs on PendulumNoVel-v1)
# ones, and compares every checkpoint byte for byte with the native build's and the
# forced-generic one's, and a `calf env` dump of each MinAtar game with the native build's.
# MuJoCo envs stay per-platform and are not part of it.
# Needs gcc-aarch64-linux-gnu, libc6-dev-arm64-cross and qemu-user; skipped without.
# Before nn_madd fused everywhere and calf had its own transcendentals, all 33 of the
# native build's checkpoints here differed from the other builds'. A few minutes on 2 cores.
source "$(dirname "$0")/lib_e2e.sh"

AARCH64_CC=aarch64-linux-gnu-gcc
AARCH64_SYSROOT=/usr/aarch64-linux-gnu
missing=""
command -v cmake >/dev/null || missing="$missing cmake"
command -v "$AARCH64_CC" >/dev/null || missing="$missing $AARCH64_CC (gcc-aarch64-linux-gnu)"
[ -e "$AARCH64_SYSROOT/lib/libm.so.6" ] || missing="$missing $AARCH64_SYSROOT (libc6-dev-arm64-cross)"
command -v qemu-aarch64 >/dev/null || missing="$missing qemu-aarch64 (qemu-user)"
# It builds its own three programs, so the sanitizer suite's run would repeat the release
# suite's exactly.
if ldd "$CALF" 2>/dev/null | grep -q libasan; then missing=" a release build (this CALF is the sanitizer build's; the check builds its own)"; fi
if [ -n "$missing" ]; then
    echo "skipped: the cross-CPU check needs$missing"
    exit 77
fi

# build NAME CMAKE_ARGS...: the calf program alone, without MPI or MuJoCo (neither takes
# part in the arithmetic compared here)
build() {
    local name=$1; shift
    if ! cmake -S "$SRC" -B "$WORK/$name" -DCALF_WITH_MPI=OFF -DCALF_WITH_MUJOCO=OFF "$@" \
            >"$WORK/$name.log" 2>&1 ||
        ! cmake --build "$WORK/$name" --target calf -j2 >>"$WORK/$name.log" 2>&1; then
        bad "build $name failed:"; tail -20 "$WORK/$name.log" >&2
        return 1
    fi
    ok
}
build native -DCALF_NATIVE=ON || exit 1
build portable || exit 1 # the default: CALF_NATIVE off
build aarch64 -DCALF_NATIVE=OFF -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
    -DCMAKE_C_COMPILER="$AARCH64_CC" || exit 1

# Each run: one short job per config, small nets, no evaluation.
small_nets=(--conf_param 'ActorDistributionNetwork.fc_layer_params=(16,16)'
            --conf_param 'ValueNetwork.fc_layer_params=(16,16)'
            --conf_param TrainerConfig.evaluate=False)
# Conv (issue 36) on MinAtar/Breakout's 10x10x4 bytes, and recurrent PPO: tiny jobs, as
# what they check is the kernels' bits (conv2d, LSTM, GRU), not learning.
minatar=(--conf_param "create_environment.env_name='MinAtar/Breakout-v1'")
tiny_ppo=(--conf_param create_environment.num_parallel_environments=2
          --conf_param TrainerConfig.unroll_length=8 --conf_param TrainerConfig.mini_batch_size=8
          --conf_param TrainerConfig.num_updates_per_train_iter=2
          --conf_param TrainerConfig.num_iterations=2 --conf_param TrainerConfig.num_checkpoints=2)
# dump_envs OUT cmd...: 500 steps of each MinAtar game as `calf env` prints them, into OUT
dump_envs() {
    local out=$1; shift
    for game in Asterix Breakout Freeway Seaquest SpaceInvaders; do
        "$@" env "MinAtar/$game-v0" --seed 5 --index 3 --steps 500 >"$out/env-$game.txt" \
            2>>"$out.err" || return 1
    done
}
# train_all NAME cmd...: the three jobs with the calf program cmd..., into $WORK/run-NAME
train_all() {
    local name=$1; shift
    local out="$WORK/run-$name"
    "$@" train --quiet --root_dir "$out/ppo_cartpole" --conf "$SRC/examples/ppo_cartpole.gin" \
        "${small_nets[@]}" --conf_param TrainerConfig.num_iterations=4 >"$out.err" 2>&1 &&
    "$@" train --quiet --root_dir "$out/ppo_pendulum" --conf "$SRC/examples/ppo_pendulum.gin" \
        "${small_nets[@]}" --conf_param TrainerConfig.num_env_steps=0 \
        --conf_param TrainerConfig.num_iterations=3 >>"$out.err" 2>&1 &&
    "$@" train --quiet --root_dir "$out/sac_pendulum" --conf "$SRC/examples/sac_pendulum.gin" \
        --conf_param 'actor/ActorDistributionNetwork.fc_layer_params=(16,16)' \
        --conf_param 'critic/CriticNetwork.joint_fc_layer_params=(16,16)' \
        --conf_param TrainerConfig.evaluate=False --conf_param TrainerConfig.num_env_steps=0 \
        --conf_param TrainerConfig.initial_collect_steps=200 \
        --conf_param TrainerConfig.num_iterations=600 >>"$out.err" 2>&1 &&
    "$@" train --quiet --root_dir "$out/dqn_rmsprop" --conf "$SRC/examples/dqn_cartpole.gin" \
        --conf_param 'q/QNetwork.fc_layer_params=(16,16)' \
        --conf_param "DqnAlgorithm.optimizer='rmsprop'" --conf_param RMSprop.lr=2.5e-4 \
        --conf_param RMSprop.alpha=0.95 --conf_param RMSprop.eps=0.01 \
        --conf_param RMSprop.centered=True \
        --conf_param TrainerConfig.evaluate=False --conf_param TrainerConfig.num_env_steps=0 \
        --conf_param TrainerConfig.initial_collect_steps=200 \
        --conf_param TrainerConfig.num_iterations=100 >>"$out.err" 2>&1 &&
    "$@" train --quiet --root_dir "$out/conv_ppo" --conf "$SRC/examples/ppo_cartpole.gin" \
        "${small_nets[@]}" "${minatar[@]}" "${tiny_ppo[@]}" \
        --conf_param 'ActorDistributionNetwork.conv_layer_params=((4,3,1),(4,2,2,1))' \
        --conf_param 'ValueNetwork.conv_layer_params=((4,3,1),)' >>"$out.err" 2>&1 &&
    "$@" train --quiet --root_dir "$out/conv_dqn" --conf "$SRC/examples/dqn_cartpole.gin" \
        "${minatar[@]}" --conf_param 'q/QNetwork.conv_layer_params=((4,3,1),)' \
        --conf_param 'q/QNetwork.fc_layer_params=(16,)' --conf_param TrainerConfig.evaluate=False \
        --conf_param TrainerConfig.num_env_steps=0 --conf_param TrainerConfig.initial_collect_steps=30 \
        --conf_param TrainerConfig.mini_batch_size=16 --conf_param TrainerConfig.num_iterations=5 \
        --conf_param TrainerConfig.num_checkpoints=2 >>"$out.err" 2>&1 &&
    "$@" train --quiet --root_dir "$out/rppo_lstm" --conf "$SRC/examples/ppo_lstm_cartpole_novel.gin" \
        "${small_nets[@]}" "${tiny_ppo[@]}" --conf_param ActorDistributionNetwork.lstm_hidden_size=8 \
        --conf_param ValueNetwork.lstm_hidden_size=6 >>"$out.err" 2>&1 &&
    "$@" train --quiet --root_dir "$out/rppo_gru" --conf "$SRC/examples/ppo_lstm_cartpole_novel.gin" \
        "${small_nets[@]}" "${tiny_ppo[@]}" --conf_param "create_environment.env_name='PendulumNoVel-v1'" \
        --conf_param ActorDistributionNetwork.lstm_hidden_size=0 \
        --conf_param ActorDistributionNetwork.gru_hidden_size=6 \
        --conf_param ValueNetwork.lstm_hidden_size=0 \
        --conf_param ValueNetwork.gru_hidden_size=5 >>"$out.err" 2>&1 &&
    dump_envs "$out" "$@"
    local rc=$?
    if [ $rc = 0 ]; then ok; else bad "training with the $name build: exit $rc"; tail -5 "$out.err" >&2; fi
}
# The portable build names the variant it runs, takes CALF_KERNELS, and refuses one it
# does not have with one line (this CPU has AVX2 and FMA where fma is expected, and
# AVX-512F and VL where avx512 is; /proc/cpuinfo lists a feature only where the kernel
# saves its registers).
P="$WORK/portable/calf"
expect_exit 0 "$WORK/native/calf" --version
expect_in "$WORK/out" "kernels: native ("
fma=0 avx512=0
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && fma=1
[ $fma = 1 ] && grep -qw avx512f /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo && avx512=1
expect_exit 0 "$P" --version
if [ $avx512 = 1 ]; then expect_in "$WORK/out" "kernels: avx512 ("
elif [ $fma = 1 ]; then expect_in "$WORK/out" "kernels: fma ("
else expect_in "$WORK/out" "kernels: generic ("; fi
expect_exit 0 env CALF_KERNELS=generic "$P" --version
expect_in "$WORK/out" "kernels: generic ("
expect_exit 2 env CALF_KERNELS=neon "$P" train --root_dir "$WORK/refused" \
    --conf "$SRC/examples/ppo_cartpole.gin"
expect_eq "$(cat "$WORK/err")" "calf: CALF_KERNELS=neon: not a kernel variant of this build (it has generic, fma, avx512, or auto)" \
    "the refusal of an unknown variant"
if [ $avx512 = 0 ]; then
    expect_exit 2 env CALF_KERNELS=avx512 "$P" train --root_dir "$WORK/refused" \
        --conf "$SRC/examples/ppo_cartpole.gin"
    expect_in "$WORK/err" "CALF_KERNELS=avx512: this CPU lacks AVX-512F or VL"
    echo "note: this CPU lacks AVX-512F or VL: the avx512 variant's checkpoints are not compared"
fi
expect_exit 2 env CALF_KERNELS=generic "$WORK/native/calf" train --root_dir "$WORK/refused" \
    --conf "$SRC/examples/ppo_cartpole.gin"
expect_in "$WORK/err" "not a kernel variant of this build (it has native, or auto)"

train_all native "$WORK/native/calf"
# (left to choose, the portable build runs the best of these, as --version said above)
[ $avx512 = 1 ] && CALF_KERNELS=avx512 train_all portable-avx512 "$P"
[ $fma = 1 ] && CALF_KERNELS=fma train_all portable-fma "$P"
CALF_KERNELS=generic train_all portable-generic "$P"
CALF_KERNELS=generic GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA \
    train_all portable-generic-nofma "$P"
train_all aarch64 qemu-aarch64 -L "$AARCH64_SYSROOT" "$WORK/aarch64/calf"

# Every checkpoint of every job, byte for byte, against the native build's and the
# forced-generic one's.
others="portable-generic-nofma aarch64"
[ $fma = 1 ] && others="$others portable-fma"
[ $avx512 = 1 ] && others="$others portable-avx512"
for job in ppo_cartpole ppo_pendulum sac_pendulum dqn_rmsprop conv_ppo conv_dqn rppo_lstm rppo_gru; do
    ckpts=$(cd "$WORK/run-native/$job/train/algorithm" 2>/dev/null && ls ckpt-*)
    [ -n "$ckpts" ] || { bad "$job: the native build wrote no checkpoint"; continue; }
    for ref in native portable-generic; do
        for other in $others $([ $ref = portable-generic ] && echo native); do
            for c in $ckpts; do
                if cmp -s "$WORK/run-$ref/$job/train/algorithm/$c" \
                          "$WORK/run-$other/$job/train/algorithm/$c"; then ok; else
                    bad "$job/$c: the $other run's checkpoint differs from the $ref run's"
                fi
            done
        done
    done
done

# MinAtar's games: the same observations, rewards and ends from each build (`calf env`
# dumps of 500 steps each, a game's whole stream: MT19937, the rules, the float writes).
for game in Asterix Breakout Freeway Seaquest SpaceInvaders; do
    [ -s "$WORK/run-native/env-$game.txt" ] || { bad "MinAtar/$game: the native build dumped nothing"; continue; }
    for other in $others portable-generic; do
        if cmp -s "$WORK/run-native/env-$game.txt" "$WORK/run-$other/env-$game.txt"; then ok; else
            bad "MinAtar/$game-v0: the $other build's \`calf env\` dump differs from the native build's"
        fi
    done
done

report e2e_cross
