#!/usr/bin/env bash
# e2e_export.sh: `calf export` writes a C99 file that the system compiler builds with
# -std=c99 -Wall -Wextra -Werror -pedantic, and whose calf_policy_act gives calf's greedy
# actions (calf play --dump_actions) on the observations of played episodes and on those
# scaled far out of range (saturating every tanh): the same actions, continuous ones the
# same floats. (The bar could be 1e-5 for continuous actions, but the file does calf's
# arithmetic with the same libm here, and an export that fused one multiply-add too few
# stays within 1e-5 on most rows: only exact equality catches it.) Runs of a few iterations:
# PPO CartPole and Pendulum (also with observations normalized, clipped or not, and
# HalfCheetah where MuJoCo is in), SAC Pendulum and CartPole (discrete); and recurrent PPO
# (an LSTM, a GRU), whose file steps a state per row with a reset at episode starts,
# checked on play's episodes stepped together and one after another, with two planted
# mistakes (no reset, two gates swapped) that the check must reject; and a Dict observation
# encoded per key (tests/action_envs.c's Test/DictChoice-v0), feed-forward and before an
# LSTM, with planted mistakes in its concatenation; two threads calling such a file at once
# get what one at a time gets (its scratch on the stack; static scratch, planted, fails);
# calf_policy_step_masked, a recurrent masked policy's entry, and a Dict with a uint8
# image part, which no algorithm trains yet, as the writer writes them
# (tests/export_gen.c). The file is also built
# the ways that would break it if it let the compiler contract a * b + c (GCC's GNU mode
# with -O3 -march=native; clang, whose default contracts), and with -O0. On a full disk
# (/dev/full, and the fault shim's ENOSPC for a regular file) play's dump and export's
# file fail naming the file and the reason, and leave no file behind.
. "$(dirname "$0")/lib_e2e.sh"

if ! command -v cc >/dev/null; then echo "skipped: no C compiler (cc) to build the exported file"; exit 77; fi

# same_actions DUMP OUT OD DISCRETE: whether OUT's lines are DUMP's actions (after OD
# numbers), the same floats; what differs, and the counts, into $WORK/cmp
same_actions() {
    local rows_a rows_b
    rows_a=$(wc -l <"$1")
    rows_b=$(wc -l <"$2")
    if [ "$rows_a" != "$rows_b" ] || [ "$rows_a" = 0 ]; then
        echo "  $2: $rows_b rows, calf's $1 has $rows_a" >"$WORK/cmp"; return 1; fi
    paste -d'|' "$1" "$2" | awk -F'|' -v od="$3" -v disc="$4" '
        { n = split($1, a, " "); m = split($2, b, " ")
          if (m != n - od) { wrong++; next }
          for (i = 1; i <= m; i++) {
              x = a[od + i]; y = b[i]
              if (x "" == y "") { exact++; continue }
              d = x - y; if (d < 0) d = -d
              if (disc || d > 1e-5) wrong++; else near++
              if (wrong + near <= 3) print "  row " NR ": calf " x ", exported " y
          } }
        END { printf "  %d actions: %d the same floats, %d others within 1e-5, %d further off\n",
                     exact + near + wrong, exact, near, wrong
              exit wrong + near > 0 }' >"$WORK/cmp" 2>&1
}

# compare_actions DUMP OUT OD DISCRETE: OUT's lines are DUMP's actions, the same floats
compare_actions() {
    if same_actions "$@"; then ok; else bad "$2 differs from calf's actions"; fi
    cat "$WORK/cmp"
}

# The ways the file is built: strictly; GCC's GNU mode at -O3 for this CPU, which would
# contract a * b + c if the file let it; clang, whose default contracts (check_export
# adds -O0)
BUILDS=("cc -std=c99 -Wall -Wextra -Werror -O2" "cc -std=gnu99 -Wall -Werror -O3 -march=native")
if command -v clang >/dev/null; then BUILDS+=("clang -std=c99 -Wall -Wextra -Werror -O2 -march=native"); fi

# run_builds NAME INPUT OD DISCRETE BUILD...: NAME's file built around tests/export_main.c
# by each BUILD (a compiler and its flags) and fed INPUT gives calf's actions
# ($WORK/NAME.calf, after OD observation numbers a line), the same floats
run_builds() {
    local name=$1 input=$2 od=$3 disc=$4 i=0 build
    shift 4
    for build in "$@"; do
        local exe="$WORK/$name.act$i"
        # shellcheck disable=SC2086
        expect_exit 0 $build -I"$WORK" -DCALF_POLICY_FILE="\"$name.c\"" "$SRC/tests/export_main.c" -o "$exe" -lm
        if [ -x "$exe" ]; then
            "$exe" <"$input" >"$WORK/$name.out$i" 2>"$WORK/$name.err$i" || bad "$name: $build: exit $?"
            echo " $build:"
            compare_actions "$WORK/$name.calf" "$WORK/$name.out$i" "$od" "$disc"
        fi
        i=$((i + 1))
    done
}

# check_export NAME CONF [Scope.param=value]...: train NAME for a few iterations, export
# it, build the file and compare its actions with calf's
check_export() {
    local name=$1 conf=$2
    shift 2
    local R="$WORK/$name" C="$WORK/$name.c"
    echo "== $name"
    [ -f "$conf" ] || conf=$SRC/examples/$conf
    expect_exit 0 "$CALF" train --quiet "${LIB[@]}" --root_dir "$R" --conf "$conf" \
        $(printf -- '--conf_param %s ' TrainerConfig.evaluate=False "$@")
    expect_exit 0 "$CALF" export "${LIB[@]}" --root_dir "$R" -o "$C"
    expect_in "$WORK/err" "calf export: wrote $C"
    [ -f "$C" ] || { bad "$name: no exported file"; return; }
    local od disc
    od=$(sed -n 's/^#define CALF_POLICY_OBS_DIM \([0-9]*\)$/\1/p' "$C")
    disc=$(sed -n 's/^#define CALF_POLICY_DISCRETE \([01]\)$/\1/p' "$C")
    [ -n "$od" ] && [ -n "$disc" ] || { bad "$name: no CALF_POLICY_OBS_DIM / CALF_POLICY_DISCRETE"; return; }
    # export writes to stdout without -o, the same text
    "$CALF" export "${LIB[@]}" --root_dir "$R" >"$WORK/$name.stdout.c" 2>/dev/null
    expect_same_file "$C" "$WORK/$name.stdout.c"
    # the file on its own, strictly
    expect_exit 0 cc -std=c99 -Wall -Wextra -Werror -pedantic -c "$C" -o "$WORK/$name.o"
    # calf's actions on played episodes and on their observations scaled by 10 and -1000
    expect_exit 0 "$CALF" play "${LIB[@]}" --root_dir "$R" --num_episodes 3 --dump_actions "$WORK/$name.play"
    awk -v od="$od" '{ s = ""; t = ""
                       for (i = 1; i <= od; i++) { s = s sprintf(" %.9g", 10 * $i); t = t sprintf(" %.9g", -1000 * $i) }
                       print substr(s, 2); print substr(t, 2) }' "$WORK/$name.play" >"$WORK/$name.far"
    expect_exit 0 "$CALF" play "${LIB[@]}" --root_dir "$R" --observations "$WORK/$name.far" --dump_actions "$WORK/$name.far_dump"
    cat "$WORK/$name.play" "$WORK/$name.far_dump" >"$WORK/$name.calf"
    run_builds "$name" "$WORK/$name.calf" "$od" "$disc" "${BUILDS[@]}" "cc -std=c99 -Wall -Werror -O0"
}

# check_export_recurrent NAME CONF [Scope.param=value]...: a recurrent policy (its state
# per row, calf_policy_step and calf_policy_reset). play's 3 episodes step together, a
# call of 3 rows each step from one reset (its dump: row k % 3 of line k); the exported
# file is fed (export_main's "row start" prefix) those lines with the rows' states apart,
# then each episode's lines one after another through one row reset at each episode's
# start, then play --observations' rows (each one a first step); every action the same
# floats as calf's. Then two planted mistakes the check rejects: a reset that leaves the
# state as it is, and the first two gates swapped.
check_export_recurrent() {
    local name=$1 conf=$2
    shift 2
    local R="$WORK/$name" C="$WORK/$name.c"
    echo "== $name"
    [ -f "$conf" ] || conf=$SRC/examples/$conf
    expect_exit 0 "$CALF" train --quiet "${LIB[@]}" --root_dir "$R" --conf "$conf" \
        $(printf -- '--conf_param %s ' TrainerConfig.evaluate=False "$@")
    expect_exit 0 "$CALF" export "${LIB[@]}" --root_dir "$R" -o "$C"
    [ -f "$C" ] || { bad "$name: no exported file"; return; }
    local od disc ss
    od=$(sed -n 's/^#define CALF_POLICY_OBS_DIM \([0-9]*\)$/\1/p' "$C")
    disc=$(sed -n 's/^#define CALF_POLICY_DISCRETE \([01]\)$/\1/p' "$C")
    ss=$(sed -n 's/^#define CALF_POLICY_STATE_SIZE \([0-9]*\) .*/\1/p' "$C")
    [ -n "$od" ] && [ -n "$disc" ] && [ -n "$ss" ] || { bad "$name: no OBS_DIM / DISCRETE / STATE_SIZE"; return; }
    expect_in "$C" " * void calf_policy_reset(float *state)"
    expect_exit 0 cc -std=c99 -Wall -Wextra -Werror -pedantic -c "$C" -o "$WORK/$name.o"
    expect_exit 0 "$CALF" play "${LIB[@]}" --root_dir "$R" --num_episodes 3 --dump_actions "$WORK/$name.play"
    awk -v od="$od" '{ s = ""; for (i = 1; i <= od; i++) s = s sprintf(" %.9g", 10 * $i); print substr(s, 2) }' \
        "$WORK/$name.play" >"$WORK/$name.far"
    expect_exit 0 "$CALF" play "${LIB[@]}" --root_dir "$R" --observations "$WORK/$name.far" --dump_actions "$WORK/$name.far_dump"
    # the three streams, and calf's lines in the same order
    { awk '{ print (NR - 1) % 3, (NR <= 3), $0 }' "$WORK/$name.play"
      for e in 0 1 2; do awk -v e=$e '(NR - 1) % 3 == e { print 0, !seen++, $0 }' "$WORK/$name.play"; done
      awk '{ print 0, 1, $0 }' "$WORK/$name.far_dump"; } >"$WORK/$name.in"
    cut -d' ' -f3- "$WORK/$name.in" >"$WORK/$name.calf"
    run_builds "$name" "$WORK/$name.in" "$od" "$disc" "${BUILDS[@]}"
    # planted: calf_policy_reset zeroes nothing; the first two gates (i, f or r, z) swapped
    rejects_mutants "$name" "$WORK/$name.in" "$od" "$disc" 's/state\[i\] = 0\.0f;/(void)state;/' \
        's/float ig = ax\[j\], fg = ax\[H + j\]/float fg = ax[j], ig = ax[H + j]/; s/float rg = ax\[j\], zg = ax\[H + j\]/float zg = ax[j], rg = ax[H + j]/'
}

# rejects_mutants NAME INPUT OD DISCRETE SED...: each sed script plants a mistake in NAME's
# exported file; built and fed INPUT (the lines calf's actions in $WORK/NAME.calf answer),
# its actions must differ from calf's
rejects_mutants() {
    local name=$1 input=$2 od=$3 disc=$4 C="$WORK/$1.c" mutant
    shift 4
    for mutant in "$@"; do
        sed "$mutant" "$C" >"$WORK/$name.mutant.c"
        if cmp -s "$C" "$WORK/$name.mutant.c"; then bad "$name: the mutant ($mutant) changed nothing"; continue; fi
        expect_exit 0 cc -std=c99 -O2 -I"$WORK" -DCALF_POLICY_FILE="\"$name.mutant.c\"" "$SRC/tests/export_main.c" \
            -o "$WORK/$name.mutant" -lm
        "$WORK/$name.mutant" <"$input" >"$WORK/$name.mutant.out" 2>/dev/null
        if same_actions "$WORK/$name.calf" "$WORK/$name.mutant.out" "$od" "$disc"; then
            bad "$name: the check passed a planted mistake ($mutant)"; else ok; fi
    done
}

# check_threads NAME TEXT: NAME's file says TEXT of its threads, and two threads calling it
# at once on different observations (tests/export_threads.c, NAME's lines) get what calls
# one at a time get. Planted: its scratch arrays static, as they were, which the threads
# overwrite; it must fail: up to 20 tries of 2 x 36,000 calls, each stopping at its first
# difference (on a machine this loaded one in a few tries shows; until one does, it runs
# again rather than time anything).
check_threads() {
    local name=$1 text=$2 try caught=0
    expect_in "$WORK/$name.c" "$text"
    sed 's/^    float \([a-z][a-z0-9]*\[[0-9]*\];\)$/    static float \1/' "$WORK/$name.c" >"$WORK/$name.static.c"
    expect_in "$WORK/$name.static.c" "    static float c0["
    local f
    for f in "$name.c" "$name.static.c"; do
        expect_exit 0 cc -std=c99 -Wall -Wextra -Werror -pedantic -O2 -pthread -I"$WORK" -DCALF_POLICY_FILE="\"$f\"" \
            "$SRC/tests/export_threads.c" -o "$WORK/$f.threads" -lm
    done
    if "$WORK/$name.c.threads" <"$WORK/$name.calf" >"$WORK/threads.out" 2>&1; then ok; else
        bad "$name: threads calling the file at once got other actions"; fi
    cat "$WORK/threads.out"
    for try in $(seq 20); do
        if ! "$WORK/$name.static.c.threads" <"$WORK/$name.calf" >"$WORK/threads.out" 2>&1; then caught=1; break; fi
    done
    sed 's/^/  static scratch: /' "$WORK/threads.out"
    [ $caught = 1 ] && ok || bad "$name: the thread check passed the file with static scratch"
}

LIB=() # --env_lib for the tests' plug-in envs
check_export ppo_cartpole ppo_cartpole.gin TrainerConfig.num_iterations=3
# -o over a read-only file: refused, the file left as it was (play's --video alike)
echo precious > "$WORK/ro.c"
chmod 444 "$WORK/ro.c"
expect_exit 1 "$CALF" export --root_dir "$WORK/ppo_cartpole" -o "$WORK/ro.c"
expect_in "$WORK/err" "cannot write $WORK/ro.c: it is read-only (mode 0444), and calf does not replace it"
expect_eq "$(cat "$WORK/ro.c") $(stat -c %a "$WORK/ro.c")" "precious 444" "the read-only file"
check_export ppo_pendulum ppo_pendulum.gin TrainerConfig.num_iterations=2 TrainerConfig.num_env_steps=0
# observations normalized (running statistics, clipped to +-3: the scaled rows clip)
check_export ppo_pendulum_norm ppo_pendulum.gin TrainerConfig.num_iterations=2 TrainerConfig.num_env_steps=0 \
    TrainerConfig.normalize_observations=True ObservationNormalizer.clipping=3.0
expect_in "$WORK/ppo_pendulum_norm.c" "static const float obs_shift[3]"
# the statistics are the checkpoint's: not the identity after two iterations
if grep -q 'obs_scale\[3\] = {0x1p+0f, 0x1p+0f, 0x1p+0f}' "$WORK/ppo_pendulum_norm.c"; then
    bad "ppo_pendulum_norm: the exported scale is still 1"; else ok; fi
check_export ppo_pendulum_noclip ppo_pendulum.gin TrainerConfig.num_iterations=2 TrainerConfig.num_env_steps=0 \
    TrainerConfig.normalize_observations=True
if "$CALF" --version | grep -q "MuJoCo envs: built in"; then
    check_export ppo_halfcheetah ppo_halfcheetah.gin TrainerConfig.num_iterations=2 TrainerConfig.num_env_steps=0 \
        TrainerConfig.unroll_length=64 TrainerConfig.num_eval_episodes=1
else
    echo "skipped ppo_halfcheetah: needs a calf built with MuJoCo (apt-get install libmujoco-dev)"
fi
check_export sac_pendulum sac_pendulum.gin TrainerConfig.num_iterations=300 TrainerConfig.num_env_steps=0 \
    TrainerConfig.initial_collect_steps=100
check_export sac_cartpole sac_cartpole.gin TrainerConfig.num_iterations=30 TrainerConfig.initial_collect_steps=64

# recurrent policies: an LSTM on CartPoleNoVel (discrete), a GRU after an fc layer on
# PendulumNoVel (continuous: every bit shows) with observations normalized
RNN=(TrainerConfig.num_iterations=2 TrainerConfig.unroll_length=16 create_environment.num_parallel_environments=2
     TrainerConfig.mini_batch_size=32 TrainerConfig.num_updates_per_train_iter=2)
check_export_recurrent ppo_lstm_novel ppo_lstm_cartpole_novel.gin "${RNN[@]}" \
    ActorDistributionNetwork.lstm_hidden_size=8 ValueNetwork.lstm_hidden_size=4 \
    'ActorDistributionNetwork.fc_layer_params=(8,)' 'ValueNetwork.fc_layer_params=(8,)'
check_export_recurrent ppo_gru_novel ppo_lstm_cartpole_novel.gin "${RNN[@]}" \
    "create_environment.env_name='PendulumNoVel-v1'" \
    ActorDistributionNetwork.lstm_hidden_size=0 ActorDistributionNetwork.gru_hidden_size=6 \
    'ActorDistributionNetwork.pre_fc_layer_params=(8,)' 'ActorDistributionNetwork.fc_layer_params=(8,)' \
    ValueNetwork.lstm_hidden_size=0 ValueNetwork.gru_hidden_size=4 'ValueNetwork.fc_layer_params=(8,)'
expect_in "$WORK/ppo_gru_novel.c" "static const float obs_shift[3]"

# a Dict observation encoded per key (Test/DictChoice-v0 of tests/action_envs.c: 'step',
# a 4x4 'image' through its conv layer, 'flip'; concatenated in that order), as
# e2e_actions trains it: feed-forward, and before an LSTM. Planted: the two vector parts
# swapped in the concatenation, the image read one column early.
if [ -f "${CALF_ACTION_ENVS:-}" ]; then
    LIB=(--env_lib "$CALF_ACTION_ENVS")
    DICT=$SRC/tests/data/actions/ppo_dict_choice.gin
    check_export ppo_dict "$DICT" TrainerConfig.num_iterations=3
    expect_in "$WORK/ppo_dict.c" "memcpy(e + 33, x + 17, 1 * sizeof(float));"
    rejects_mutants ppo_dict "$WORK/ppo_dict.calf" 18 1 \
        's/memcpy(e + 0, x + 0, /memcpy(e + 0, x + 17, /; s/memcpy(e + 33, x + 17, /memcpy(e + 33, x + 0, /' \
        's/calf_conv2d(x + 1, /calf_conv2d(x + 0, /'
    check_export_recurrent ppo_dict_lstm "$DICT" TrainerConfig.num_iterations=2 \
        ActorDistributionNetwork.lstm_hidden_size=8 ValueNetwork.lstm_hidden_size=4
    # scratch on the stack, its bound stated: e (34), c0 (32), the MLP's h1 (32), the head (4)
    expect_in "$WORK/ppo_dict.c" "#define CALF_POLICY_STACK_BYTES 408 "
    check_threads ppo_dict "threads may call it at once"
    check_threads ppo_dict_lstm "threads may step different rows at once"
    LIB=()
else
    echo "skipped the Dict checks: CALF_ACTION_ENVS does not name the action_envs plug-in"
fi

# Policies nothing trains yet, as the export writer writes them (tests/export_gen.c, with
# a mask over 4 actions): calf_policy_step_masked of a recurrent one (an fc layer, an LSTM
# or a GRU; 3 rows stepped together with episode starts and masks drawn per line), and a
# Dict with a uint8 image part of a float observation (scaled by 1/255 before its conv),
# each giving calf's masked actions. Planted: the mask ignored; a reset that zeroes
# nothing; the image part's scale left out.
if [ -x "${CALF_EXPORT_GEN:-}" ]; then
    for kind in lstm gru dict8; do
        name=masked_$kind
        echo "== $name"
        expect_exit 0 "$CALF_EXPORT_GEN" $kind "$WORK/$name.c" "$WORK/$name.in" "$WORK/$name.calf"
        if [ $kind = dict8 ]; then
            expect_in "$WORK/$name.c" "int calf_policy_act_masked(const float *obs, const unsigned char *mask, float *action) {"
            planted='s/g1\[i\] = x\[2 + i\] \* [^;]*;/g1[i] = x[2 + i];/'
        else
            expect_in "$WORK/$name.c" "int calf_policy_step_masked(float *state, const float *obs, const unsigned char *mask, float *action) {"
            planted='s/state\[i\] = 0\.0f;/(void)state;/'
        fi
        if [ $kind = lstm ]; then run_builds "$name" "$WORK/$name.in" 0 1 "${BUILDS[@]}"
        else run_builds "$name" "$WORK/$name.in" 0 1 "${BUILDS[0]}"; fi
        rejects_mutants "$name" "$WORK/$name.in" 0 1 's/(!mask || mask\[j\]) && //' "$planted"
    done
else
    echo "skipped the export writer's own policies: CALF_EXPORT_GEN does not name tests/export_gen.c's program"
fi

# a run dir whose name would end the file's opening comment
ODD="$WORK/odd */ name"
mkdir -p "$WORK/odd *" && cp -r "$WORK/ppo_cartpole" "$ODD"
expect_exit 0 "$CALF" export --root_dir "$ODD" -o "$WORK/odd.c"
expect_exit 0 cc -std=c99 -Wall -Wextra -Werror -pedantic -c "$WORK/odd.c" -o "$WORK/odd.o"

# bad input: exit 2 naming what
expect_exit 2 "$CALF" export
expect_in "$WORK/err" "missing required option --root_dir"
expect_exit 2 "$CALF" export --root_dir "$WORK/nothing_here"
expect_in "$WORK/err" "nothing_here/config.gin"
expect_exit 2 "$CALF" export --root_dir "$WORK/ppo_cartpole" --bogus
expect_in "$WORK/err" "unknown option '--bogus'"
expect_exit 1 "$CALF" export --root_dir "$WORK/ppo_cartpole" -o "$WORK/no/such/dir/p.c"
expect_in "$WORK/err" "no/such/dir/p.c"
expect_exit 2 "$CALF" play --root_dir "$WORK/ppo_cartpole" --observations "$WORK/ppo_cartpole.far"
expect_in "$WORK/err" "--observations needs --dump_actions"
printf '1 2 3\n' >"$WORK/short.obs"
expect_exit 2 "$CALF" play --root_dir "$WORK/ppo_cartpole" --observations "$WORK/short.obs" --dump_actions "$WORK/x"
expect_in "$WORK/err" "short.obs:1: expected 4 numbers"

# a full disk: the file is named with the system's reason, and no file (empty or partial)
# is left; /dev/full, a device, is written straight (never replaced by a rename)
expect_exit 1 "$CALF" play --root_dir "$WORK/ppo_cartpole" --num_episodes 2 --dump_actions /dev/full
expect_in "$WORK/err" "cannot write /dev/full: No space left on device"
expect_not_in "$WORK/out" "average return"
expect_exit 1 "$CALF" export --root_dir "$WORK/ppo_cartpole" -o /dev/full
expect_in "$WORK/err" "cannot write /dev/full: No space left on device"
[ -c /dev/full ] && ok || bad "/dev/full is no longer a device"
expect_write_fails "error writing output: calf play's report: No space left on device" \
    "$CALF" play --root_dir "$WORK/ppo_cartpole" --num_episodes 2
SHIM=${CALF_FAULT_SHIM:-}
if [ -n "$SHIM" ] && [ -f "$SHIM" ] && ! ldd "$CALF" 2>/dev/null | grep -q libasan; then
    for out in dump.txt policy.c; do
        if [ $out = dump.txt ]; then
            cmd=(play --root_dir "$WORK/ppo_cartpole" --num_episodes 2 --dump_actions "$WORK/full/$out")
        else
            cmd=(export --root_dir "$WORK/ppo_cartpole" -o "$WORK/full/$out")
        fi
        mkdir -p "$WORK/full"
        expect_exit 1 env LD_PRELOAD="$SHIM" CALF_FAULT_PATH=/full/ CALF_FAULT_CALLS=write \
            CALF_FAULT_MODE=persist CALF_FAULT_K=1 "$CALF" "${cmd[@]}"
        expect_in "$WORK/err" "cannot write $WORK/full/$out: write $WORK/full/$out.tmp."
        expect_in "$WORK/err" ": No space left on device"
        expect_eq "$(ls -A "$WORK/full")" "" "files left after a full disk"
    done
else
    echo "the full-disk checks of regular files are skipped: no fault shim (run through ctest) or an ASan build"
fi

report e2e_export
