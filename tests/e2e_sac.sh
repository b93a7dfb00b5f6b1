#!/usr/bin/env bash
# e2e_sac.sh: SAC keeps calf's promise: short sac_pendulum runs (4 and 5 envs, a replay
# buffer that wraps) write the same checkpoint bytes on --nproc 1..4 and under MPI; a
# run stopped on 2 processes resumes on 3 to the uninterrupted run's bytes; with a slow
# process the others compute some of its envs (work sharing) and the bytes stay; discrete
# SAC too; play works; bad input is exit 2 with file:line and nothing written.
. "$(dirname "$0")/lib_e2e.sh"

cat >"$WORK/short.gin" <<EOF
include '$SRC/examples/sac_pendulum.gin'
TrainerConfig.num_env_steps = 0
TrainerConfig.num_iterations = 24
TrainerConfig.initial_collect_steps = 40
TrainerConfig.unroll_length = 2
TrainerConfig.num_updates_per_train_iter = 2
TrainerConfig.mini_batch_size = 32
TrainerConfig.replay_buffer_length = 30
TrainerConfig.num_checkpoints = 2
TrainerConfig.eval_interval = 12
TrainerConfig.num_eval_episodes = 2
TrainerConfig.summary_interval = 4
actor/ActorDistributionNetwork.fc_layer_params = (16, 16)
critic/CriticNetwork.joint_fc_layer_params = (16, 16)
EOF

for E in 4 5; do
    ENVS=(--conf_param create_environment.num_parallel_environments=$E)
    for n in 1 2 3 4; do
        expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/e$E.n$n" --conf "$WORK/short.gin" \
            "${ENVS[@]}" --nproc $n
        [ $n = 1 ] || expect_same_file "$WORK/e$E.n1/train/algorithm/ckpt-24" "$WORK/e$E.n$n/train/algorithm/ckpt-24"
    done
done
R=$WORK/e5.n1
expect_in "$R/config.gin" "TrainerConfig.algorithm_ctor = @SacAlgorithm"
expect_in "$R/config.gin" "# replay buffer: 30 transitions per env, 5 envs"
expect_in "$R/log/rank-0.log" "replay: 30 transitions stored per env (capacity 30"
expect_in "$R/log/rank-0.log" "42 updates" # iterations 3..23 (40 env steps collected first), 2 each
"$CALF" events "$R"/train/events.out.tfevents.* >"$WORK/ev" && ok || bad "events unreadable"
for tag in SacLoss/critic_loss SacLoss/actor_loss SacLoss/alpha_loss SacAlgorithm/alpha SacAlgorithm/entropy; do
    expect_in "$WORK/ev" " $tag "
done
expect_exit 0 "$CALF" play --root_dir "$R" --num_episodes 2
expect_in "$WORK/out" "average return over 2 episodes:"

# resume: 2 processes to iteration 10 (the buffer not yet full), then 3 to the end
RS=$WORK/resume
expect_exit 0 "$CALF" train --quiet --root_dir "$RS" --conf "$WORK/short.gin" \
    --conf_param create_environment.num_parallel_environments=5 \
    --conf_param TrainerConfig.num_iterations=10 --nproc 2
expect_exit 0 "$CALF" train --root_dir "$RS" --conf "$WORK/short.gin" \
    --conf_param create_environment.num_parallel_environments=5 --nproc 3
expect_in "$WORK/err" "resuming from"
expect_same_file "$WORK/e5.n1/train/algorithm/ckpt-24" "$RS/train/algorithm/ckpt-24"

# Adam.lr_schedule = 'linear' (the actor's, critics' and temperature's lr alike): the
# same bytes on 1 and 3 processes, not those of the constant lr; config.gin and the
# summaries say so; a resume within the planned run, from ckpt-12 on 2 processes, is exact
SCHED=(--conf_param create_environment.num_parallel_environments=5 --conf_param "Adam.lr_schedule='linear'")
for n in 1 3; do
    expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/sched$n" --conf "$WORK/short.gin" \
        "${SCHED[@]}" --nproc $n
done
expect_same_file "$WORK/sched1/train/algorithm/ckpt-24" "$WORK/sched3/train/algorithm/ckpt-24"
if cmp -s "$WORK/e5.n1/train/algorithm/ckpt-24" "$WORK/sched1/train/algorithm/ckpt-24"; then
    bad "the linear schedule left the checkpoint as the constant lr's"
else ok; fi
expect_in "$WORK/sched1/config.gin" "# Adam.lr_schedule = 'linear': actor, critic and alpha lr 0.0005, 0.0005 and 0.0005 at iteration 0, down to 0 at iteration 24"
"$CALF" events "$WORK/sched1"/train/events.out.tfevents.* >"$WORK/ev" && ok || bad "events unreadable"
# the last summary (iteration 24) is of the 24th train, index 23: 5e-4 * (1 - 23/24)
expect_in "$WORK/ev" "24 Optimizer/critic_learning_rate 2.08333331e-05"
expect_in "$WORK/ev" "24 Optimizer/actor_learning_rate 2.08333331e-05"
mkdir -p "$WORK/sched_resume" && cp -r "$WORK/sched1/." "$WORK/sched_resume/"
rm "$WORK/sched_resume/train/algorithm/ckpt-24"
expect_exit 0 "$CALF" train --root_dir "$WORK/sched_resume" --conf "$WORK/short.gin" "${SCHED[@]}" --nproc 2
expect_in "$WORK/err" "resuming from $WORK/sched_resume/train/algorithm/ckpt-12"
expect_same_file "$WORK/sched1/train/algorithm/ckpt-24" "$WORK/sched_resume/train/algorithm/ckpt-24"

# the env records (the replay buffer) go to the file and back in chunks of envs, here of
# 2 and 3, which never line up with the processes' blocks: the same bytes, and the same
# resume
RC=$WORK/chunks
for k in 2 3; do
    rm -rf "$RC"
    CALF_TEST_HOOKS=ckpt_chunk_envs=$k expect_exit 0 "$CALF" train --quiet --root_dir "$RC" \
        --conf "$WORK/short.gin" --conf_param create_environment.num_parallel_environments=5 \
        --conf_param TrainerConfig.num_iterations=10 --nproc 3
    [ $k = 2 ] && cp "$RC/train/algorithm/ckpt-10" "$WORK/ckpt-10.k2"
    expect_same_file "$WORK/ckpt-10.k2" "$RC/train/algorithm/ckpt-10"
    CALF_TEST_HOOKS=ckpt_chunk_envs=$k expect_exit 0 "$CALF" train --quiet --root_dir "$RC" \
        --conf "$WORK/short.gin" --conf_param create_environment.num_parallel_environments=5 --nproc 2
    expect_same_file "$WORK/e5.n1/train/algorithm/ckpt-24" "$RC/train/algorithm/ckpt-24"
done

# work sharing (--nproc: the rings in shared memory): with a slow process, the others
# compute some of its envs' partials, and the bytes stay the same; continuous and, below,
# discrete
for slow in 0 1; do
    W=$WORK/steal$slow
    CALF_TEST_HOOKS=slow_rank=$slow expect_exit 0 "$CALF" train --quiet --root_dir "$W" --conf "$WORK/short.gin" \
        --conf_param create_environment.num_parallel_environments=5 --nproc 2
    expect_same_file "$WORK/e5.n1/train/algorithm/ckpt-24" "$W/train/algorithm/ckpt-24"
    other=$((1 - slow))
    took=$(sed -n 's/.*; \([0-9]*\) env partials computed for other processes/\1/p' "$W/log/rank-$other.log")
    if [ -n "$took" ] && [ "$took" -gt 0 ]; then ok; else bad "rank $other computed no env partials for the slow rank $slow ('$took')"; fi
done
expect_in "$WORK/e5.n2/log/rank-0.log" "work sharing: the rings in shared memory;"
expect_not_in "$WORK/e5.n1/log/rank-0.log" "work sharing"

# discrete SAC: softmax(Q / alpha) of the critics
cat >"$WORK/disc.gin" <<EOF
include '$SRC/examples/sac_cartpole.gin'
create_environment.num_parallel_environments = 5
TrainerConfig.num_iterations = 16
TrainerConfig.initial_collect_steps = 20
TrainerConfig.mini_batch_size = 16
TrainerConfig.replay_buffer_length = 12
TrainerConfig.eval_interval = 8
TrainerConfig.num_eval_episodes = 2
critic/CriticNetwork.joint_fc_layer_params = (16,)
EOF
for n in 1 3; do
    expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/d$n" --conf "$WORK/disc.gin" --nproc $n
done
expect_same_file "$WORK/d1/train/algorithm/ckpt-16" "$WORK/d3/train/algorithm/ckpt-16"
CALF_TEST_HOOKS=slow_rank=0 expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/dsteal" --conf "$WORK/disc.gin" --nproc 2
expect_same_file "$WORK/d1/train/algorithm/ckpt-16" "$WORK/dsteal/train/algorithm/ckpt-16"
took=$(sed -n 's/.*; \([0-9]*\) env partials computed for other processes/\1/p' "$WORK/dsteal/log/rank-1.log")
if [ -n "$took" ] && [ "$took" -gt 0 ]; then ok; else bad "discrete: rank 1 computed no env partials for the slow rank 0 ('$took')"; fi
expect_exit 0 "$CALF" play --root_dir "$WORK/d1" --num_episodes 2
# a target entropy below any policy's drives log alpha down by about the learning rate
# each update; once exp(log alpha) is 0 as a float, softmax(Q / alpha) is undefined: the
# job stops with exit 1 saying so (it used to abort in an assertion)
expect_exit 1 "$CALF" train --quiet --root_dir "$WORK/dalpha" --conf "$WORK/disc.gin" \
    --conf_param SacAlgorithm.target_entropy=-1 --conf_param alpha/Adam.lr=10
expect_in "$WORK/err" "where alpha = exp(log alpha) is 0 as a float"
expect_not_in "$WORK/err" "internal error"

# a replay buffer larger than the machine's memory (the memory_bytes test hook stands in for
# it): exit 2 before anything is written, rather than failing when the rings fill up
no_room() { # ROOT ENVS-ON-ONE-MACHINE: the run was refused and left nothing
    expect_in "$WORK/err" "$WORK/short.gin:8: TrainerConfig.replay_buffer_length = 30: the replay buffer needs"
    expect_in "$WORK/err" "for the $2 envs on one machine, more than the 2.0 KiB of this machine's memory"
    if [ -e "$1" ]; then bad "$1 was created"; else ok; fi
}
for n in 1 2; do
    CALF_TEST_HOOKS=memory_bytes=2048 expect_exit 2 "$CALF" train --root_dir "$WORK/no_room$n" \
        --conf "$WORK/short.gin" --nproc $n --conf_param create_environment.num_parallel_environments=5
    no_room "$WORK/no_room$n" 5
done
# a finished run needs no memory: still "nothing to do", exit 0
CALF_TEST_HOOKS=memory_bytes=2048 expect_exit 0 "$CALF" train --root_dir "$WORK/e5.n1" \
    --conf "$WORK/short.gin" --conf_param create_environment.num_parallel_environments=5
expect_in "$WORK/err" "nothing to do: the run in $WORK/e5.n1 is complete at iteration 24"
CALF_TEST_HOOKS=memory_bytes=2k expect_exit 2 "$CALF" train --root_dir "$WORK/no_room_k" --conf "$WORK/short.gin"
expect_in "$WORK/err" "calf: CALF_TEST_HOOKS: test hooks: memory_bytes='2k' is not a number in range"
# the smallest bound counts: here the address space (not under ASan, which reserves more
# address space than any such limit allows)
if ldd "$CALF" 2>/dev/null | grep -q libasan; then
    echo "e2e_sac: ulimit -v check skipped: AddressSanitizer reserves more address space than ulimit -v allows"
else
    (ulimit -v 300000; exec "$CALF" train --root_dir "$WORK/no_room_v" --conf "$WORK/short.gin" \
        --conf_param TrainerConfig.replay_buffer_length=20000000) 2>"$WORK/err"
    expect_eq $? 2 "exit status of a replay beyond ulimit -v"
    expect_in "$WORK/err" "more than the 293.0 MiB of the address-space limit (ulimit -v)"
    if [ -e "$WORK/no_room_v" ]; then bad "$WORK/no_room_v was created"; else ok; fi
fi

# MPI, where built in
if "$CALF" --version | grep -q "MPI backend: built in" && command -v mpirun >/dev/null; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # see e2e_mpi.sh
    expect_exit 0 timeout 120 mpirun --oversubscribe -np 2 "$CALF" train --quiet \
        --root_dir "$WORK/mpi" --conf "$WORK/short.gin" \
        --conf_param create_environment.num_parallel_environments=5
    expect_same_file "$WORK/e5.n1/train/algorithm/ckpt-24" "$WORK/mpi/train/algorithm/ckpt-24"
    # resume 2 -> 3 ranks, rank 0 sending the records in chunks of 2 envs
    M=$WORK/mpi_resume
    CALF_TEST_HOOKS=ckpt_chunk_envs=2 expect_exit 0 timeout 120 mpirun --oversubscribe -np 2 \
        -x CALF_TEST_HOOKS "$CALF" train --quiet --root_dir "$M" --conf "$WORK/short.gin" \
        --conf_param create_environment.num_parallel_environments=5 --conf_param TrainerConfig.num_iterations=10
    CALF_TEST_HOOKS=ckpt_chunk_envs=2 expect_exit 0 timeout 120 mpirun --oversubscribe -np 3 \
        -x CALF_TEST_HOOKS "$CALF" train --quiet --root_dir "$M" --conf "$WORK/short.gin" \
        --conf_param create_environment.num_parallel_environments=5
    expect_same_file "$WORK/e5.n1/train/algorithm/ckpt-24" "$M/train/algorithm/ckpt-24"
    # rank 0 checks the envs of every rank on its machine (here both ranks: all 5)
    CALF_TEST_HOOKS=memory_bytes=2048 expect_exit 2 timeout 120 mpirun --oversubscribe -np 2 \
        -x CALF_TEST_HOOKS "$CALF" train --root_dir "$WORK/no_room_mpi" --conf "$WORK/short.gin" \
        --conf_param create_environment.num_parallel_environments=5
    no_room "$WORK/no_room_mpi" 5
else
    echo "e2e_sac: the MPI part skipped: calf was built without MPI or mpirun is missing"
fi

# bad input: exit 2, file:line, nothing written
bad_input() { # NAME TEXT GIN-LINE...
    local name=$1 text=$2
    shift 2
    { echo "include '$WORK/short.gin'"; printf '%s\n' "$@"; } >"$WORK/$name.gin"
    expect_exit 2 "$CALF" train --root_dir "$WORK/bad_$name" --conf "$WORK/$name.gin"
    expect_in "$WORK/err" "$text"
    if [ -e "$WORK/bad_$name" ]; then bad "$name: $WORK/bad_$name was created"; else ok; fi
}
bad_input algo "$WORK/algo.gin:2: unknown reference '@SacAlgorithmm' for 'TrainerConfig.algorithm_ctor' (did you mean '@SacAlgorithm'?)" \
    "TrainerConfig.algorithm_ctor = @SacAlgorithmm"
bad_input length "$WORK/length.gin:2: TrainerConfig.mini_batch_length = 40 is larger than the replay buffer (TrainerConfig.replay_buffer_length = 30, set at $WORK/short.gin:8)" \
    "TrainerConfig.mini_batch_length = 40"
# the buffer's own line too, where that is the value that changed
bad_input buffer "$WORK/buffer.gin:3: TrainerConfig.mini_batch_length = 2 is larger than the replay buffer (TrainerConfig.replay_buffer_length = 1, set at $WORK/buffer.gin:2)" \
    "TrainerConfig.replay_buffer_length = 1" "TrainerConfig.mini_batch_length = 2"
bad_input collect "$WORK/collect.gin:2: TrainerConfig.initial_collect_steps = 240 is not below the run's 240 env steps" \
    "TrainerConfig.initial_collect_steps = 240" "create_environment.num_parallel_environments = 5"
bad_input norm "$WORK/norm.gin:3: TrainerConfig.normalize_observations: SacAlgorithm does not normalize observations (PPOAlgorithm does)" \
    "# SAC's replay would hold observations normalized by old statistics" "TrainerConfig.normalize_observations = True"
report e2e_sac
