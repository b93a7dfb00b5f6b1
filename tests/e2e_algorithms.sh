#!/usr/bin/env bash
# e2e_algorithms.sh: the conformance test every algorithm of the registry
# (src/training/registry.h) passes without test code of its own: for each name that
# TrainerConfig.algorithm_ctor accepts, its first example (examples/*.gin naming it; the
# default algorithm's may name none), shrunk to a few iterations of 5 envs with a replay
# buffer that wraps, writes the same checkpoint bytes on --nproc 1..4 and under MPI (when
# built with it), resumes from the 2-process run's middle checkpoint onto 3 processes to
# the same bytes, plays, exports a C file whose actions are play's, refuses a misspelled
# setting of its own with exit 2 and file:line, and on the other kind of action space
# either trains or is refused with exit 2 naming the line that chose it. The same parity
# and resume on each MinAtar game (PPO; DQN on Breakout), on PPO's loss options, and on the
# tests' plug-in envs (masks, MultiDiscrete, a Dict observation encoded per key).
. "$(dirname "$0")/lib_e2e.sh"

"$CALF" train --list-bindings >"$WORK/bindings" 2>&1 || bad "--list-bindings failed"
NAMES=$(sed -n 's/^ *reference one of \(@[A-Za-z0-9_|@]*\), default.*/\1/p' "$WORK/bindings" | head -1 | tr '|' ' ' | tr -d '@')
DEFAULT=$(sed -n 's/^ *reference one of @[A-Za-z0-9_|@]*, default @\([A-Za-z0-9_]*\).*/\1/p' "$WORK/bindings" | head -1)
[ -n "$NAMES" ] && [ -n "$DEFAULT" ] && ok || bad "no algorithm names in --list-bindings"
MPI=0
if "$CALF" --version | grep -q "MPI backend: built in" && command -v mpirun >/dev/null; then
    MPI=1
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # see e2e_mpi.sh
else
    echo "MPI parity skipped: calf built without MPI or no mpirun"
fi
HAVE_CC=0
command -v cc >/dev/null && HAVE_CC=1 || echo "export check skipped: no C compiler (cc)"

# parity NAME EX D [GIN-LINE...]: EX shrunk (plus the given lines) into D/short.gin
# writes the same checkpoint bytes on --nproc 1..4 and under MPI, and the 2-process run
# cut back to its middle checkpoint resumes on 3 processes to the same bytes. Every run
# gets the arguments in PARITY_ARGS (a plug-in's --env_lib).
PARITY_ARGS=()
parity() {
    local NAME=$1 EX=$2 D=$3
    shift 3
    mkdir -p "$D"
    cat >"$D/short.gin" <<GIN
include '$EX'
TrainerConfig.num_env_steps = 0
TrainerConfig.num_iterations = 12
create_environment.num_parallel_environments = 5
TrainerConfig.unroll_length = 2
TrainerConfig.initial_collect_steps = 20
TrainerConfig.replay_buffer_length = 15
TrainerConfig.mini_batch_size = 16
TrainerConfig.num_updates_per_train_iter = 2
TrainerConfig.num_checkpoints = 2
TrainerConfig.evaluate = False
TrainerConfig.summary_interval = 3
GIN
    printf '%s\n' "$@" >>"$D/short.gin"
    LAST=train/algorithm/ckpt-12
    for n in 1 2 3 4; do
        expect_exit 0 "$CALF" train --quiet "${PARITY_ARGS[@]}" --root_dir "$D/n$n" --conf "$D/short.gin" --nproc $n
        [ $n = 1 ] || expect_same_file "$D/n1/$LAST" "$D/n$n/$LAST"
    done
    if [ $MPI = 1 ]; then
        expect_exit 0 timeout 300 mpirun --oversubscribe -np 2 "$CALF" train --quiet \
            "${PARITY_ARGS[@]}" --root_dir "$D/mpi2" --conf "$D/short.gin"
        expect_same_file "$D/n1/$LAST" "$D/mpi2/$LAST"
    fi
    # resume: the 2-process run cut back to its ckpt-6 (transitions stored, the buffer
    # not yet wrapped), then 3 processes to the end. Cut back rather than run shorter: a
    # shorter run would be another plan (schedules over the run's length differ).
    mkdir -p "$D/resume" && cp -r "$D/n2/." "$D/resume/"
    rm "$D/resume/$LAST"
    expect_exit 0 "$CALF" train "${PARITY_ARGS[@]}" --root_dir "$D/resume" --conf "$D/short.gin" --nproc 3
    expect_in "$WORK/err" "resuming from $D/resume/train/algorithm/ckpt-6"
    expect_same_file "$D/n1/$LAST" "$D/resume/$LAST"
}

# play_export NAME D: D/n1's policy plays 2 episodes, and the C file calf export writes
# of it (compiled, fed play's observations) acts as play did. A recurrent policy's file
# steps a state per episode: play's dump holds both episodes' rows of each step in turn
# (row (k - 1) % 2 of line k), each reset before its first step (tests/export_main.c).
play_export() {
    local NAME=$1 D=$2
    expect_exit 0 "$CALF" play --root_dir "$D/n1" --num_episodes 2 --dump_actions "$D/play"
    expect_in "$WORK/out" "average return over 2 episodes:"
    if [ $HAVE_CC = 1 ]; then
        expect_exit 0 "$CALF" export --root_dir "$D/n1" -o "$D/policy.c"
        od=$(sed -n 's/^#define CALF_POLICY_OBS_DIM \([0-9]*\)$/\1/p' "$D/policy.c")
        expect_exit 0 cc -std=c99 -Wall -Wextra -Werror -O2 -I"$D" -DCALF_POLICY_FILE='"policy.c"' \
            "$SRC/tests/export_main.c" -o "$D/act" -lm
        if grep -q '^#define CALF_POLICY_STATE_SIZE' "$D/policy.c"; then
            awk '{ print (NR - 1) % 2, (NR <= 2), $0 }' "$D/play" >"$D/play.in"
        else cp "$D/play" "$D/play.in"; fi
        if [ -x "$D/act" ] && [ -n "$od" ]; then
            "$D/act" <"$D/play.in" >"$D/act.out" 2>"$D/act.err" || bad "$NAME: the exported policy failed"
            awk -v od="$od" '{ s = ""; for (i = od + 1; i <= NF; i++) s = s (i > od + 1 ? " " : "") $i; print s }' \
                "$D/play" >"$D/play.actions"
            if cmp -s "$D/play.actions" "$D/act.out" && [ -s "$D/act.out" ]; then ok; else
                bad "$NAME: the exported policy's actions differ from play's"; fi
        else bad "$NAME: no exported program"; fi
    fi
}

ENVS=$("$CALF" envs)
for NAME in $NAMES; do
    echo "== $NAME"
    # its examples name it; those of the default algorithm may name none. Only examples
    # whose env this build has (a build without MuJoCo has no HalfCheetah-v4).
    EX=$(for f in "$SRC"/examples/*.gin; do
             env=$(sed -n 's/^create_environment.env_name = "\(.*\)".*/\1/p' "$f")
             grep -q "^$env " <<<"$ENVS" || continue
             if grep -q "^TrainerConfig.algorithm_ctor = @$NAME\$" "$f" ||
                { [ "$NAME" = "$DEFAULT" ] && ! grep -q "^TrainerConfig.algorithm_ctor" "$f"; }; then
                 echo "$f"; fi
         done | sort | head -1)
    if [ -z "$EX" ]; then bad "$NAME: no example in examples/ (every algorithm has one)"; continue; fi
    echo "   from $EX"
    D=$WORK/$NAME
    parity "$NAME" "$EX" "$D"
    # play, and the exported file acting as play does
    play_export "$NAME" "$D"
    # conv layers: PPO's and DQN's on a flat observation are refused naming the line (it
    # needs an image); SAC, TD3 and DDPG train MLPs only and refuse them by name
    CONV_ROW=ActorDistributionNetwork.conv_layer_params
    [ "$NAME" = DqnAlgorithm ] && CONV_ROW=q/QNetwork.conv_layer_params
    printf "include '%s'\n%s = ((4, 3, 1),)\n" "$D/short.gin" "$CONV_ROW" >"$D/conv.gin"
    expect_exit 2 "$CALF" train --quiet --root_dir "$D/conv" --conf "$D/conv.gin"
    expect_in "$WORK/err" "$D/conv.gin:2:"
    case $NAME in
    PPOAlgorithm | DqnAlgorithm) expect_in "$WORK/err" "needs an image observation" ;;
    *) expect_in "$WORK/err" "$NAME trains MLP networks only" ;;
    esac
    [ "$(wc -l <"$WORK/err")" = 1 ] && ok || bad "$NAME: the conv refusal is not one line"
    [ ! -e "$D/conv/train" ] && ok || bad "$NAME: a refused conv config left files"
    # bad input: a misspelled setting of its own, exit 2 naming the file and line
    ROW=$(grep -o "^$NAME\.[a-z_]*" "$WORK/bindings" | head -1)
    [ -n "$ROW" ] || ROW="$NAME.target_update_tau"
    printf "include '%s'\n%sx = 1\n" "$D/short.gin" "$ROW" >"$D/typo.gin"
    expect_exit 2 "$CALF" train --quiet --root_dir "$D/typo" --conf "$D/typo.gin"
    expect_in "$WORK/err" "$D/typo.gin:2:"
    [ ! -e "$D/typo/train" ] && ok || bad "$NAME: a refused config left files"
    # the other kind of action space: it trains, or it is refused with exit 2 naming the
    # line that chose the algorithm, before anything is written
    ENV=$(sed -n "s/^create_environment.env_name = '\([^']*\)'.*/\1/p" "$D/n1/config.gin")
    [ -n "$ENV" ] && ok || bad "$NAME: no env name in config.gin"
    if "$CALF" envs | grep -q "^$ENV .*Discrete("; then OTHER=Pendulum-v1; else OTHER=CartPole-v1; fi
    printf "include '%s'\ncreate_environment.env_name = '%s'\n" "$D/short.gin" "$OTHER" >"$D/other.gin"
    "$CALF" train --quiet --root_dir "$D/other" --conf "$D/other.gin" \
        --conf_param TrainerConfig.num_iterations=3 >"$WORK/out" 2>"$WORK/err"
    code=$?
    if [ $code = 0 ]; then ok
    elif [ $code = 2 ] && grep -qF "$EX:" "$WORK/err" && [ ! -e "$D/other/train" ]; then
        ok; echo "   $OTHER refused: $(head -1 "$WORK/err")"
    else bad "$NAME on $OTHER: exit $code"; sed 's/^/  | /' "$WORK/err" >&2; fi
done
# MinAtar's games under the default algorithm and DQN (their checkpoints carry each env's
# generator and game state): the same parity and resume.
for GAME in Asterix Breakout Freeway Seaquest SpaceInvaders; do
    grep -q "^MinAtar/$GAME-v1 " <<<"$ENVS" || { echo "MinAtar/$GAME skipped: not in calf envs"; continue; }
    for NAME in $DEFAULT DqnAlgorithm; do
        [ "$NAME" = DqnAlgorithm ] && [ "$GAME" != Breakout ] && continue
        EX=$(grep -l "^TrainerConfig.algorithm_ctor = @$NAME\$" "$SRC"/examples/*.gin | head -1)
        [ "$NAME" = "$DEFAULT" ] && EX=$SRC/examples/ppo_cartpole.gin
        echo "== $NAME on MinAtar/$GAME-v1 from $EX"
        parity "$NAME" "$EX" "$WORK/minatar-$GAME-$NAME" "create_environment.env_name = 'MinAtar/$GAME-v1'"
    done
done
# Conv networks (issue 36): a conv PPO and a conv DQN on MinAtar/Breakout's 10x10x4
# images, the same parity and resume, play, and the exported C acting as play does.
# Skipped while this build's MinAtar has no image shape in its env spec (obs_shape).
CONV_OK=0
if grep -q "^MinAtar/Breakout-v1 " <<<"$ENVS"; then
    printf "include '%s'\ncreate_environment.env_name = 'MinAtar/Breakout-v1'\nValueNetwork.conv_layer_params = ((4, 3, 1),)\nTrainerConfig.num_iterations = 1\n" \
        "$SRC/examples/ppo_cartpole.gin" >"$WORK/conv-probe.gin"
    if "$CALF" train --quiet --root_dir "$WORK/conv-probe" --conf "$WORK/conv-probe.gin" \
        >"$WORK/out" 2>"$WORK/err"; then CONV_OK=1
    elif grep -q "needs an image observation" "$WORK/err"; then
        echo "conv parity skipped: MinAtar/Breakout-v1 has no obs_shape in this build"
    else bad "conv probe on MinAtar/Breakout-v1 failed"; sed 's/^/  | /' "$WORK/err" >&2; fi
fi
if [ $CONV_OK = 1 ]; then
    for NAME in $DEFAULT DqnAlgorithm; do
        EX=$(grep -l "^TrainerConfig.algorithm_ctor = @$NAME\$" "$SRC"/examples/*.gin | head -1)
        [ "$NAME" = "$DEFAULT" ] && EX=$SRC/examples/ppo_cartpole.gin
        D=$WORK/conv-$NAME
        echo "== conv $NAME on MinAtar/Breakout-v1 from $EX"
        if [ "$NAME" = DqnAlgorithm ]; then
            parity "$NAME" "$EX" "$D" "create_environment.env_name = 'MinAtar/Breakout-v1'" \
                "q/QNetwork.conv_layer_params = ((4, 3, 1),)" "q/QNetwork.fc_layer_params = (16,)"
        else
            parity "$NAME" "$EX" "$D" "create_environment.env_name = 'MinAtar/Breakout-v1'" \
                "ActorDistributionNetwork.conv_layer_params = ((4, 3, 1), (4, 2, 2, 1))" \
                "ValueNetwork.conv_layer_params = ((4, 3, 1),)" \
                "ActorDistributionNetwork.fc_layer_params = (16,)" "ValueNetwork.fc_layer_params = (16,)"
        fi
        play_export "conv $NAME" "$D"
    done
fi
# Recurrent PPO (issue 36): each env's core state carried through the rollout, zeroed
# where an episode starts and kept in the env's record; minibatches of whole env sequences
# drawn per epoch (4 of 5 envs here), the same plan on any number of processes. An LSTM on
# CartPoleNoVel-v1, and GRUs on PendulumNoVel-v1 (continuous) with observations normalized.
EX=$SRC/examples/ppo_lstm_cartpole_novel.gin
RECURRENT=("TrainerConfig.unroll_length = 8" "TrainerConfig.mini_batch_size = 12")
echo "== recurrent PPO (LSTM) from $EX"
parity PPOAlgorithm "$EX" "$WORK/rppo-lstm" "${RECURRENT[@]}" \
    "ActorDistributionNetwork.lstm_hidden_size = 8" "ValueNetwork.lstm_hidden_size = 6"
grep -q "4 minibatches per epoch of whole env sequences" "$WORK/rppo-lstm/n1/config.gin" && ok ||
    bad "recurrent PPO: config.gin does not say its minibatch plan"
echo "== recurrent PPO (GRU, continuous) from $EX"
parity PPOAlgorithm "$EX" "$WORK/rppo-gru" "${RECURRENT[@]}" \
    "create_environment.env_name = 'PendulumNoVel-v1'" "TrainerConfig.normalize_observations = True" \
    "ActorDistributionNetwork.lstm_hidden_size = 0" "ActorDistributionNetwork.gru_hidden_size = 6" \
    "ValueNetwork.lstm_hidden_size = 0" "ValueNetwork.gru_hidden_size = 5"
if [ $CONV_OK = 1 ]; then
    # conv -> fc -> LSTM -> head (CleanRL's ppo_atari_lstm shape, tiny) on Breakout's images
    echo "== recurrent PPO (conv + LSTM) on MinAtar/Breakout-v1 from $EX"
    parity PPOAlgorithm "$EX" "$WORK/rppo-conv" "${RECURRENT[@]}" \
        "create_environment.env_name = 'MinAtar/Breakout-v1'" "TrainerConfig.normalize_observations = False" \
        "ActorDistributionNetwork.conv_layer_params = ((4, 3, 1),)" "ActorDistributionNetwork.pre_fc_layer_params = (16,)" \
        "ActorDistributionNetwork.lstm_hidden_size = 8" "ActorDistributionNetwork.fc_layer_params = ()" \
        "ValueNetwork.conv_layer_params = ((4, 3, 1),)" "ValueNetwork.pre_fc_layer_params = (16,)" \
        "ValueNetwork.lstm_hidden_size = 6" "ValueNetwork.fc_layer_params = (8,)"
    play_export "recurrent conv PPO" "$WORK/rppo-conv"
fi
# PPO's loss options that the examples leave off: advantages normalized per minibatch
# (each minibatch's sums added over envs in canonical order) and the value loss clipped
# (the rollout's values kept): the same parity and resume, without a core and with an
# LSTM (its minibatches whole sequences). tests/test_ppo.c checks that each changes a run.
PPO_OPTS=("PPOLoss.advantage_normalization_scope = 'minibatch'" "PPOLoss.value_clipping = 0.2")
echo "== PPO with per-minibatch advantages and value clipping"
parity PPOAlgorithm "$SRC/examples/ppo_cartpole.gin" "$WORK/ppo-opts" "${PPO_OPTS[@]}"
parity PPOAlgorithm "$EX" "$WORK/rppo-opts" "${RECURRENT[@]}" "${PPO_OPTS[@]}" \
    "ActorDistributionNetwork.lstm_hidden_size = 8" "ValueNetwork.lstm_hidden_size = 6"
# pre_fc_layer_params without a core is refused, naming the line
printf "include '%s'\nActorDistributionNetwork.lstm_hidden_size = 0\nActorDistributionNetwork.pre_fc_layer_params = (4,)\n" "$WORK/rppo-lstm/short.gin" >"$WORK/prefc.gin"
expect_exit 2 "$CALF" train --quiet --root_dir "$WORK/prefc" --conf "$WORK/prefc.gin"
expect_in "$WORK/err" "$WORK/prefc.gin:3: ActorDistributionNetwork.pre_fc_layer_params: fc layers before a recurrent core"
# a recurrent policy plays (each episode's state from zero) and exports with a state per
# row (tests/e2e_export.sh checks the file's floats)
expect_exit 0 "$CALF" play --root_dir "$WORK/rppo-lstm/n1" --num_episodes 3
expect_in "$WORK/out" "average return over 3 episodes:"
expect_exit 0 "$CALF" export --root_dir "$WORK/rppo-lstm/n1" -o "$WORK/rppo.c"
expect_in "$WORK/rppo.c" "#define CALF_POLICY_STATE_SIZE 16 /* floats of state per row */"
# an LSTM and a GRU in one network is refused, naming the line
printf "include '%s'\nActorDistributionNetwork.gru_hidden_size = 4\n" "$WORK/rppo-lstm/short.gin" >"$WORK/both.gin"
expect_exit 2 "$CALF" train --quiet --root_dir "$WORK/both" --conf "$WORK/both.gin"
expect_in "$WORK/err" "$WORK/both.gin:2: ActorDistributionNetwork.gru_hidden_size and ActorDistributionNetwork.lstm_hidden_size"

# A masked and a MultiDiscrete PPO config on the tests' envs (tests/action_envs.c, a
# plug-in; tests/e2e_actions.sh shows what they learn): the same parity and resume; and
# PPO and DQN with a per-key encoder on its Dict env. And a
# masked DQN, whose replay keeps each transition's next mask (its env records, read back
# on another split) for the TD target's max; the target network copied every 4 updates.
if [ -f "${CALF_ACTION_ENVS:-}" ]; then
    PARITY_ARGS=(--env_lib "$CALF_ACTION_ENVS")
    for G in ppo_masked_choice ppo_multi_choice; do
        echo "== $DEFAULT on the action envs from $G.gin"
        parity "$DEFAULT" "$SRC/tests/data/actions/$G.gin" "$WORK/actions-$G" \
            "create_environment.env_name = '$([ $G = ppo_multi_choice ] && echo Test/MaskedMultiChoice-v0 || echo Test/MaskedChoice-v0)'"
    done
    echo "== DqnAlgorithm on the masked action env from dqn_cartpole.gin"
    parity DqnAlgorithm "$SRC/examples/dqn_cartpole.gin" "$WORK/actions-dqn" \
        "create_environment.env_name = 'Test/MaskedChoice-v0'" "q/QNetwork.fc_layer_params = (16,)" \
        "DqnAlgorithm.target_update_period = 4"
    grep -q RPEM "$WORK/actions-dqn/n1/train/algorithm/ckpt-12" && ok ||
        bad "masked DQN: the checkpoint has no replay records with next masks (RPEM)"
    # A Dict observation encoded per key (Test/DictChoice-v0: a vector, a 4x4 image
    # through its conv layer, a vector, concatenated): PPO and DQN, the same parity and
    # resume, and play.
    echo "== $DEFAULT on the Dict env from ppo_dict_choice.gin"
    parity "$DEFAULT" "$SRC/tests/data/actions/ppo_dict_choice.gin" "$WORK/dict-ppo" \
        "ActorDistributionNetwork.fc_layer_params = (16,)" "ValueNetwork.fc_layer_params = (8,)"
    echo "== DqnAlgorithm on the Dict env from dqn_cartpole.gin"
    parity DqnAlgorithm "$SRC/examples/dqn_cartpole.gin" "$WORK/dict-dqn" \
        "create_environment.env_name = 'Test/DictChoice-v0'" "q/QNetwork.conv_layer_params = ((4, 2, 2),)" \
        "q/QNetwork.fc_layer_params = (16,)"
    for D in dict-ppo dict-dqn; do
        expect_exit 0 "$CALF" play "${PARITY_ARGS[@]}" --root_dir "$WORK/$D/n1" --num_episodes 2
        expect_in "$WORK/out" "average return over 2 episodes:"
    done
    PARITY_ARGS=()
else
    echo "action envs skipped: CALF_ACTION_ENVS does not name the action_envs plug-in"
fi
report e2e_algorithms
