#!/usr/bin/env bash
# e2e_mujoco.sh: the MuJoCo envs through the real binary. Without MuJoCo: they are not
# listed and naming one says how to get them (then the rest is skipped, saying why).
# With it: `calf env` prints the state each reset drew, and PPO on HalfCheetah-v4 (and
# Hopper-v4 and Humanoid-v4, whose episodes end and reset inside rollouts; Humanoid's
# saved state holds the derived arrays its 376 observations read) writes the same
# checkpoint bytes on --nproc 1..3, resumes on another process count exactly, and runs from any
# directory (the models are inside the binary). examples/ppo_halfcheetah.gin, whose
# observations are normalized and whose learning rate decays, does the same.
. "$(dirname "$0")/lib_e2e.sh"

CONF=$SRC/examples/ppo_pendulum.gin
if ! "$CALF" --version | grep -q "MuJoCo envs: built in"; then
    expect_exit 0 "$CALF" envs
    expect_not_in "$WORK/out" "HalfCheetah-v4"
    # the message says what the build did, in --version's words (turned off, or not found)
    note=$("$CALF" --version | sed -n 's/.*MuJoCo envs: \(.*\))$/\1/p')
    expect_exit 2 "$CALF" env HalfCheetah-v4
    expect_in "$WORK/err" "environment 'HalfCheetah-v4' needs MuJoCo, which this calf was built without ($note)"
    expect_exit 2 "$CALF" train --root_dir "$WORK/none" --conf "$CONF" \
        --conf_param "create_environment.env_name='Ant-v4'"
    expect_in "$WORK/err" "needs MuJoCo"
    report e2e_mujoco || exit 1
    echo "skipped: the rest needs a calf built with MuJoCo (apt-get install libmujoco-dev)"
    exit 77
fi

expect_exit 0 "$CALF" envs
for name in InvertedPendulum-v4 HalfCheetah-v4 Hopper-v4 Walker2d-v4 Ant-v4 \
    InvertedDoublePendulum-v4 Swimmer-v4 Reacher-v4 Pusher-v4 Humanoid-v4 HumanoidStandup-v4; do
    expect_in "$WORK/out" "$name"
done
expect_in "$WORK/out" "Ant-v4                       Box(-inf, inf, (27,), float32)   Box(-1..1, 8)                  1000"
expect_in "$WORK/out" "Humanoid-v4                  Box(-inf, inf, (376,), float32)  Box(-0.4..0.4, 17)             1000"
expect_in "$WORK/out" "Reacher-v4                   Box(-inf, inf, (11,), float32)   Box(-1..1, 2)                    50"

# calf env: each '# reset' line is followed by '# state' with nq + nv values (Ant: 15 +
# 14), qpos as drawn (its quaternion not yet normalized), %.17g
expect_exit 0 "$CALF" env Ant-v4 --seed 3 --steps 2
sed -n '4p' "$WORK/out" > "$WORK/state"
expect_in "$WORK/state" "# state "
expect_eq "$(awk '{print NF - 2}' "$WORK/state")" 29 "Ant-v4 state values"
if awk '{ s = $6*$6 + $7*$7 + $8*$8 + $9*$9; exit !(s < 0.999 || s > 1.001) }' "$WORK/state"; then ok
else bad "Ant-v4's drawn quaternion is already unit length: $(cat "$WORK/state")"; fi
# Humanoid: 24 + 23 values after each reset, and all 376 observations on a row
expect_exit 0 "$CALF" env Humanoid-v4 --seed 3 --steps 2
expect_eq "$(sed -n '4p' "$WORK/out" | awk '{print NF - 2}')" 47 "Humanoid-v4 state values"
expect_eq "$(sed -n '3p' "$WORK/out" | awk '{print NF - 2}')" 376 "Humanoid-v4 observations"
expect_exit 0 "$CALF" env Hopper-v4 --seed 1 --steps 300
resets=$(grep -c '^# reset' "$WORK/out")
expect_eq "$(grep -A1 '^# reset' "$WORK/out" | grep -c '^# state')" "$resets" "a state after every reset"
if [ "$resets" -gt 1 ]; then ok; else bad "Hopper-v4 never reset in 300 random steps"; fi
# the same output from any directory
(cd "$WORK" && "$CALF" env Hopper-v4 --seed 1 --steps 300 > "$WORK/out_elsewhere")
expect_same_file "$WORK/out" "$WORK/out_elsewhere"

# PPO: 5 envs (blocks of 2, 2, 1 on 3 processes), 4 iterations of 64 steps
run() { # run ROOT NPROC ENV ITERATIONS
    expect_exit 0 "$CALF" train --quiet --root_dir "$1" --conf "$CONF" --nproc "$2" \
        --conf_param "create_environment.env_name='$3'" \
        --conf_param create_environment.num_parallel_environments=5 \
        --conf_param TrainerConfig.unroll_length=64 --conf_param TrainerConfig.mini_batch_size=80 \
        --conf_param TrainerConfig.num_updates_per_train_iter=4 \
        --conf_param TrainerConfig.num_env_steps=0 \
        --conf_param TrainerConfig.num_iterations="$4" --conf_param TrainerConfig.eval_interval=2 \
        --conf_param TrainerConfig.num_eval_episodes=2
}
for env in HalfCheetah-v4 Hopper-v4 Humanoid-v4; do
    for n in 1 2 3; do run "$WORK/${env}_$n" $n $env 4; done
    for n in 2 3; do
        expect_same_file "$WORK/${env}_1/train/algorithm/ckpt-4" "$WORK/${env}_$n/train/algorithm/ckpt-4"
        expect_same_file "$WORK/${env}_1/train/algorithm/ckpt-2" "$WORK/${env}_$n/train/algorithm/ckpt-2"
    done
    # mid-episode (HalfCheetah's run 1,000 steps) checkpoint at 2 on 2 processes, resumed on 3
    run "$WORK/${env}_resume" 2 $env 2
    run "$WORK/${env}_resume" 3 $env 4
    expect_same_file "$WORK/${env}_1/train/algorithm/ckpt-4" "$WORK/${env}_resume/train/algorithm/ckpt-4"
done

# examples/ppo_halfcheetah.gin as it is (observations normalized, the learning rate
# decaying linearly), shortened: the same bytes on --nproc 1..3, the normalizer's section
# in them, and a resume from the 2-process run's checkpoint 2 on 3 processes exact (the
# schedule is over the run's planned length, so the copy keeps the same length)
HC=$SRC/examples/ppo_halfcheetah.gin
run_norm() { # run_norm ROOT NPROC
    expect_exit 0 "$CALF" train --quiet --root_dir "$1" --conf "$HC" --nproc "$2" \
        --conf_param create_environment.num_parallel_environments=5 \
        --conf_param TrainerConfig.unroll_length=64 --conf_param TrainerConfig.mini_batch_size=80 \
        --conf_param TrainerConfig.num_updates_per_train_iter=4 --conf_param TrainerConfig.num_env_steps=0 \
        --conf_param TrainerConfig.num_iterations=4 --conf_param TrainerConfig.eval_interval=2 \
        --conf_param TrainerConfig.num_eval_episodes=2
}
for n in 1 2 3; do run_norm "$WORK/norm_$n" $n; done
for n in 2 3; do
    for k in 1 2 4; do
        expect_same_file "$WORK/norm_1/train/algorithm/ckpt-$k" "$WORK/norm_$n/train/algorithm/ckpt-$k"
    done
done
if grep -q ONRM "$WORK/norm_1/train/algorithm/ckpt-4"; then ok; else bad "no ONRM section in the checkpoint"; fi
expect_in "$WORK/norm_1/config.gin" "observations normalized"
expect_in "$WORK/norm_1/config.gin" "down to 0 at iteration 4"
"$CALF" events "$WORK"/norm_1/train/events.out.tfevents.* > "$WORK/ev"
expect_in "$WORK/ev" "Optimizer/learning_rate"
# the learning rate of iteration k (0-based) is (float)(3e-4 * (1 - k/4)), written at step
# k + 1 (the values as Python prints float32(3e-4 * (1 - k / 4)) with %.9g)
lrs=$(awk '$2 == "Optimizer/learning_rate" {printf "%s ", $3}' "$WORK/ev")
expect_eq "$lrs" "0.000300000014 0.000224999996 0.000150000007 7.50000036e-05 " "learning rates"
cp -r "$WORK/norm_2" "$WORK/norm_resume"
rm "$WORK/norm_resume/train/algorithm/ckpt-3" "$WORK/norm_resume/train/algorithm/ckpt-4"
run_norm "$WORK/norm_resume" 3
expect_same_file "$WORK/norm_1/train/algorithm/ckpt-4" "$WORK/norm_resume/train/algorithm/ckpt-4"
# played with the checkpoint's statistics: the evaluation's return, on 1 process and 3
expect_exit 0 "$CALF" play --root_dir "$WORK/norm_3" --num_episodes 2
expect_in "$WORK/out" "average return over 2 episodes"
"$CALF" events "$WORK"/norm_1/eval/events.out.tfevents.* | awk '$2 == "Metrics/AverageReturn"' > "$WORK/ev1"
"$CALF" events "$WORK"/norm_3/eval/events.out.tfevents.* | awk '$2 == "Metrics/AverageReturn"' > "$WORK/ev3"
expect_same_file "$WORK/ev1" "$WORK/ev3"

"$CALF" events "$WORK"/Hopper-v4_1/train/events.out.tfevents.* > "$WORK/ev"
episodes=$(awk '$2 == "Metrics/NumberOfEpisodes" {print $3}' "$WORK/ev" | tail -1)
if awk -v e="${episodes:-0}" 'BEGIN { exit !(e > 0) }'; then ok
else bad "Hopper-v4 finished no episode in 4 iterations (${episodes:-no metric})"; fi
# from another directory, with a relative root: the same bytes
(cd "$WORK" && "$CALF" train --quiet --root_dir rel --conf "$CONF" \
    --conf_param "create_environment.env_name='HalfCheetah-v4'" \
    --conf_param create_environment.num_parallel_environments=5 \
    --conf_param TrainerConfig.unroll_length=64 --conf_param TrainerConfig.mini_batch_size=80 \
    --conf_param TrainerConfig.num_updates_per_train_iter=4 --conf_param TrainerConfig.num_env_steps=0 \
    --conf_param TrainerConfig.num_iterations=4 --conf_param TrainerConfig.eval_interval=2 \
    --conf_param TrainerConfig.num_eval_episodes=2 >/dev/null 2>&1)
expect_same_file "$WORK/HalfCheetah-v4_1/train/algorithm/ckpt-4" "$WORK/rel/train/algorithm/ckpt-4"
# Many MuJoCo envs are checked against memory before anything is written: each env's
# simulator data, measured by making one (about 3 MiB resident for Hopper, more mapped).
# The memory_bytes test hook stands in for the machine's memory; ulimit -v bounds the mapping.
CALF_TEST_HOOKS=memory_bytes=1000000000 expect_exit 2 "$CALF" train --root_dir "$WORK/many" \
    --conf "$CONF" --conf_param "create_environment.env_name='Hopper-v4'" \
    --conf_param create_environment.num_parallel_environments=4096
expect_in "$WORK/err" "calf: --conf_param: create_environment.num_parallel_environments = 4096: the Hopper-v4 envs need"
expect_in "$WORK/err" "resident each), more than the 953.7 MiB of this machine's memory"
if [ -e "$WORK/many" ]; then bad "the refused run left $WORK/many"; else ok; fi
# 64 of them fit in that memory, and train
CALF_TEST_HOOKS=memory_bytes=1000000000 expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/fits" \
    --conf "$CONF" --conf_param "create_environment.env_name='Hopper-v4'" \
    --conf_param create_environment.num_parallel_environments=64 \
    --conf_param TrainerConfig.unroll_length=8 --conf_param TrainerConfig.num_env_steps=0 \
    --conf_param TrainerConfig.num_iterations=1
if ldd "$CALF" 2>/dev/null | grep -q libasan; then
    echo "e2e_mujoco: the ulimit -v case is skipped under AddressSanitizer (its shadow memory is mapped)"
else
    (ulimit -v 3000000 && "$CALF" train --root_dir "$WORK/mapped" --conf "$CONF" \
        --conf_param "create_environment.env_name='Hopper-v4'" \
        --conf_param create_environment.num_parallel_environments=4096 >"$WORK/out" 2>"$WORK/err")
    expect_eq "$?" 2 "exit status under ulimit -v"
    expect_in "$WORK/err" "mapped each), more than the 2.9 GiB of the address-space limit (ulimit -v)"
fi
report e2e_mujoco
