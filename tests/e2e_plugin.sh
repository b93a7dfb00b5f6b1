#!/usr/bin/env bash
# e2e_plugin.sh: plug-in environments (--env_lib): the custom env example built as a shared
# object is listed, stepped, trained (1 process, --nproc 2 and MPI ranks give the same
# bytes), resumed and played by the stock calf; config.gin names the library, and a
# resume or play without it says which to pass; a missing file, a library without the
# register function, another ABI and a name clash are each exit 2 with their message.
. "$(dirname "$0")/lib_e2e.sh"

LIB=${CALF_PLUGIN_EXAMPLE:-$(dirname "$CALF")/libcustom_env_plugin.so}
if [ ! -f "$LIB" ]; then
    echo "e2e_plugin: FAIL: the example plug-in $LIB was not built" >&2
    exit 1
fi
LIB=$(realpath "$LIB")
CC=${CC:-cc}

cat > "$WORK/corridor.gin" <<'GIN'
create_environment.env_name = "Corridor-v0"
create_environment.num_parallel_environments = 8
TrainerConfig.random_seed = 5
TrainerConfig.unroll_length = 16
TrainerConfig.mini_batch_size = 32
TrainerConfig.num_updates_per_train_iter = 2
TrainerConfig.num_iterations = 3
TrainerConfig.num_checkpoints = 3
TrainerConfig.evaluate = True
TrainerConfig.eval_interval = 3
TrainerConfig.num_eval_episodes = 2
GIN

# envs and env see the plug-in's environment, and say where it came from
expect_exit 0 "$CALF" envs --env_lib "$LIB"
expect_in "$WORK/out" "Corridor-v0"
expect_in "$WORK/out" "$LIB"
expect_in "$WORK/out" "CartPole-v1"
expect_exit 0 "$CALF" env Corridor-v0 --steps 5 --env_lib="$LIB"
expect_in "$WORK/out" "# Corridor-v0 seed=0 index=0"
# the same library twice is loaded once
expect_exit 0 "$CALF" envs --env_lib "$LIB" --env_lib "$LIB"
expect_eq "$(grep -c Corridor-v0 "$WORK/out")" 1 "Corridor-v0 listed once"

# 3 iterations through the plug-in path: 1 process and --nproc 2 write the same bytes
expect_exit 0 "$CALF" train --quiet --env_lib "$LIB" --root_dir "$WORK/p1" --conf "$WORK/corridor.gin"
expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/p2" --conf "$WORK/corridor.gin" --nproc 2 \
    --env_lib "$LIB"
expect_same_file "$WORK/p1/train/algorithm/ckpt-3" "$WORK/p2/train/algorithm/ckpt-3"
expect_in "$WORK/p1/config.gin" "# env_lib: $LIB"
expect_in "$WORK/p1/config.gin" "create_environment.env_name = 'Corridor-v0'"

# play and export with the library; without it, they name it
expect_exit 0 "$CALF" play --root_dir "$WORK/p1" --num_episodes 2 --env_lib "$LIB"
expect_in "$WORK/out" "average return over 2 episodes"
expect_exit 2 "$CALF" play --root_dir "$WORK/p1" --num_episodes 2
expect_in "$WORK/err" "environment 'Corridor-v0' is not registered"
expect_in "$WORK/err" "pass it again with --env_lib $LIB"
expect_exit 2 "$CALF" export --root_dir "$WORK/p1"
expect_in "$WORK/err" "--env_lib $LIB"

# resume (a longer run) without the library: with and without --conf it names the library
expect_exit 2 "$CALF" train --quiet --root_dir "$WORK/p1" --conf_param TrainerConfig.num_iterations=4
expect_in "$WORK/err" "pass it again with --env_lib $LIB"
expect_exit 2 "$CALF" train --quiet --root_dir "$WORK/p1" --conf "$WORK/corridor.gin" \
    --conf_param TrainerConfig.num_iterations=4
expect_in "$WORK/err" "pass it again with --env_lib $LIB"
# with it, the resume continues as one run would have: 4 iterations at once are the same bytes
expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/p1" --env_lib "$LIB" \
    --conf_param TrainerConfig.num_iterations=4
expect_exit 0 "$CALF" train --quiet --root_dir "$WORK/p4" --conf "$WORK/corridor.gin" --env_lib "$LIB" \
    --conf_param TrainerConfig.num_iterations=4
expect_same_file "$WORK/p1/train/algorithm/ckpt-4" "$WORK/p4/train/algorithm/ckpt-4"

# a config cannot load code: there is no binding for a library
expect_exit 2 "$CALF" train --quiet --root_dir "$WORK/cfg" --conf "$WORK/corridor.gin" \
    --conf_param "create_environment.env_lib='$LIB'"
expect_in "$WORK/err" "unknown binding 'create_environment.env_lib'"

# MPI ranks each load the library themselves (they run the same command line)
if "$CALF" --version | grep -q "MPI backend: built in" && command -v mpirun >/dev/null; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    expect_exit 0 env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        timeout 120 mpirun --oversubscribe -np 2 "$CALF" train --quiet --env_lib "$LIB" \
        --root_dir "$WORK/mpi" --conf "$WORK/corridor.gin" # detect_leaks: see e2e_mpi.sh
    expect_same_file "$WORK/p2/train/algorithm/ckpt-3" "$WORK/mpi/train/algorithm/ckpt-3"
else
    echo "e2e_plugin: the MPI check is skipped: no MPI backend or no mpirun"
fi

# ---- the errors, each exit 2 with its message --------------------------------------
expect_exit 2 "$CALF" train --quiet --env_lib "$WORK/missing.so" --root_dir "$WORK/e" \
    --conf "$WORK/corridor.gin"
expect_in "$WORK/err" "--env_lib $WORK/missing.so: No such file or directory"
expect_exit 2 "$CALF" envs --env_lib
expect_in "$WORK/err" "--env_lib needs a value"
echo "not a shared object" > "$WORK/text.so"
expect_exit 2 "$CALF" envs --env_lib "$WORK/text.so"
expect_in "$WORK/err" "--env_lib $WORK/text.so: cannot load it:"

build_plugin() { # NAME: build $WORK/NAME.so from stdin
    "$CC" -shared -fPIC -I"$SRC/include" -x c - -o "$WORK/$1.so" || { bad "cc failed for $1"; return 1; }
}
build_plugin nosym <<'C'
int calf_plugin_registr(int abi_version) { return abi_version; }
C
expect_exit 2 "$CALF" play --env_lib "$WORK/nosym.so" --root_dir "$WORK/p1"
expect_in "$WORK/err" "--env_lib $WORK/nosym.so: not a calf plug-in: it defines no function calf_plugin_register"

# built against headers of another ABI
build_plugin oldabi <<'C'
#include "calf/env.h"
#undef CALF_PLUGIN_ABI_VERSION
#define CALF_PLUGIN_ABI_VERSION 999
int calf_plugin_register(int abi_version, calf_error *err) {
    return CALF_PLUGIN_CHECK_ABI(abi_version, err);
}
C
expect_exit 2 "$CALF" env --env_lib "$WORK/oldabi.so" CartPole-v1
expect_in "$WORK/err" "--env_lib $WORK/oldabi.so: built for calf plug-in ABI version 999, but this calf has version"

# names that clash with a built-in, with another library's, and a library that adds nothing
for kind in builtin corridor; do
    name=CartPole-v1
    [ $kind = corridor ] && name=Corridor-v0
    build_plugin clash_$kind <<C
#include "calf/env.h"
static void r(void *s, calf_rng *g, float *o) { (void)s; (void)g; o[0] = 0; }
static int st(void *s, calf_rng *g, int a, const float *u, float *o, float *rew) {
    (void)s; (void)g; (void)a; (void)u; o[0] = 0; *rew = 0; return 1;
}
static const calf_env_class cls = {
    .spec = {.name = "$name", .obs_dim = 1, .num_actions = 2, .max_episode_steps = 5,
             .state_size = 4},
    .reset = r, .step = st};
int calf_plugin_register(int abi_version, calf_error *err) {
    int rc = CALF_PLUGIN_CHECK_ABI(abi_version, err);
    return rc != CALF_OK ? rc : calf_env_register(&cls, err);
}
C
done
expect_exit 2 "$CALF" envs --env_lib "$WORK/clash_builtin.so"
expect_in "$WORK/err" "--env_lib $WORK/clash_builtin.so: env 'CartPole-v1' is already registered (a built-in environment)"
expect_exit 2 "$CALF" train --env_lib "$LIB" --env_lib "$WORK/clash_corridor.so" --root_dir "$WORK/e" \
    --conf "$WORK/corridor.gin"
expect_in "$WORK/err" "--env_lib $WORK/clash_corridor.so: env 'Corridor-v0' is already registered by library $LIB"
build_plugin empty <<'C'
#include "calf/env.h"
int calf_plugin_register(int abi_version, calf_error *err) { return CALF_PLUGIN_CHECK_ABI(abi_version, err); }
C
expect_exit 2 "$CALF" envs --env_lib "$WORK/empty.so"
expect_in "$WORK/err" "--env_lib $WORK/empty.so: it registered no environment"
[ ! -e "$WORK/e" ] && ok || bad "a failed --env_lib left $WORK/e behind"

# a plug-in rebuilt with another observation size: the resume says so, not only where the
# checkpoint's numbers stop fitting
for obs in 1 2; do
    build_plugin "grow$obs" <<C
#include "calf/env.h"
static void r(void *s, calf_rng *g, float *o) { (void)s; (void)g; for (int i = 0; i < $obs; i++) o[i] = 0; }
static int st(void *s, calf_rng *g, int a, const float *u, float *o, float *rew) {
    (void)s; (void)g; (void)u;
    for (int i = 0; i < $obs; i++) o[i] = (float)a;
    *rew = (float)a;
    return 0;
}
static const calf_env_class cls = {
    .spec = {.name = "Grow-v0", .obs_dim = $obs, .num_actions = 2, .max_episode_steps = 20,
             .state_size = 4},
    .reset = r, .step = st};
int calf_plugin_register(int abi_version, calf_error *err) {
    int rc = CALF_PLUGIN_CHECK_ABI(abi_version, err);
    return rc != CALF_OK ? rc : calf_env_register(&cls, err);
}
C
done
cp "$WORK/grow1.so" "$WORK/grow.so"
expect_exit 0 "$CALF" train --quiet --env_lib "$WORK/grow.so" --root_dir "$WORK/grow" \
    --conf "$WORK/corridor.gin" --conf_param "create_environment.env_name='Grow-v0'" \
    --conf_param TrainerConfig.evaluate=False
cp "$WORK/grow2.so" "$WORK/grow.so"
expect_exit 2 "$CALF" train --quiet --env_lib "$WORK/grow.so" --root_dir "$WORK/grow" \
    --conf_param TrainerConfig.num_iterations=4
expect_in "$WORK/err" "the checkpoint does not fit environment 'Grow-v0' of plug-in $WORK/grow.so as it is now (observation size 2, 2 actions): was the plug-in rebuilt with another observation or action size?"

# ---- plug-in ABI 3 and 4: older plug-ins still load, the spaces added are checked ----
# tests/plugin_abi2.c built against the frozen ABI-2 headers (tests/abi2/calf/), the frozen
# ABI-3 ones (tests/abi3/calf/) and this calf's: the loader reads an old build's class in
# its version's layout, tells its create_at its own class object, drops an ABI-2 build's
# step_many (a planted NaN: the job would stop), and the builds train to the same bytes,
# on 1 and 2 processes
"$CC" -shared -fPIC -I"$SRC/tests/abi2" "$SRC/tests/plugin_abi2.c" -o "$WORK/stairs2.so" \
    || bad "cc failed for the ABI-2 plug-in"
"$CC" -shared -fPIC -I"$SRC/tests/abi3" "$SRC/tests/plugin_abi2.c" -o "$WORK/stairs3.so" \
    || bad "cc failed for the ABI-3 build of the plug-in"
"$CC" -shared -fPIC -I"$SRC/include" "$SRC/tests/plugin_abi2.c" -o "$WORK/stairs4.so" \
    || bad "cc failed for the ABI-4 build of the plug-in"
expect_exit 0 "$CALF" envs --env_lib "$WORK/stairs2.so"
expect_in "$WORK/out" "Stairs-v0 "
expect_in "$WORK/out" "Box(-inf, inf, (3,), float32)"
stairs="--conf_param create_environment.env_name='Stairs-v0'"
expect_exit 0 "$CALF" train --quiet --env_lib "$WORK/stairs2.so" --root_dir "$WORK/s2" \
    --conf "$WORK/corridor.gin" $stairs
expect_exit 0 "$CALF" train --quiet --env_lib "$WORK/stairs3.so" --root_dir "$WORK/s3" \
    --conf "$WORK/corridor.gin" $stairs
expect_exit 0 "$CALF" train --quiet --env_lib "$WORK/stairs4.so" --root_dir "$WORK/s4" \
    --conf "$WORK/corridor.gin" $stairs
expect_exit 0 "$CALF" train --quiet --env_lib "$WORK/stairs2.so" --root_dir "$WORK/s2n2" \
    --conf "$WORK/corridor.gin" $stairs --nproc 2
expect_same_file "$WORK/s3/train/algorithm/ckpt-3" "$WORK/s2/train/algorithm/ckpt-3"
expect_same_file "$WORK/s4/train/algorithm/ckpt-3" "$WORK/s2/train/algorithm/ckpt-3"
expect_same_file "$WORK/s3/train/algorithm/ckpt-3" "$WORK/s2n2/train/algorithm/ckpt-3"
expect_exit 0 "$CALF" play --root_dir "$WORK/s2" --num_episodes 2 --env_lib "$WORK/stairs2.so"
expect_in "$WORK/out" "average return over 2 episodes"
# the planted NaN is real: with its step_many kept (built with ABI 4, which calls it) the
# job stops on it
"$CC" -shared -fPIC -I"$SRC/include" -DSTAIRS_KEEP_STEP_MANY "$SRC/tests/plugin_abi2.c" \
    -o "$WORK/stairs_nan.so" || bad "cc failed for the planted step_many"
expect_exit 2 "$CALF" train --quiet --env_lib "$WORK/stairs_nan.so" --root_dir "$WORK/snan" \
    --conf "$WORK/corridor.gin" $stairs
expect_in "$WORK/err" "non-finite observation"
# versions other than 2 to 4 are refused, saying which this calf loads
for v in 1 5; do
    build_plugin "abi$v" <<C
#include "calf/env.h"
int calf_plugin_register(int abi_version, calf_error *err) {
    return calf_plugin_check_abi(abi_version, $v, err);
}
C
    expect_exit 2 "$CALF" envs --env_lib "$WORK/abi$v.so"
    expect_in "$WORK/err" "--env_lib $WORK/abi$v.so: built for calf plug-in ABI version $v, but this calf has version 4 (and loads versions 2 to 4)"
done
# MultiDiscrete actions and masks: the spec says them, with the hooks that go with them
# (step_multi, action_mask); a plug-in that sets a field without its hook is refused at
# load, naming both (tests/e2e_actions.sh trains the ones that have them)
for kind in nvec mask; do
    build_plugin "space_$kind" <<C
#include "calf/env.h"
static void r(void *s, calf_rng *g, float *o) { (void)s; (void)g; o[0] = 0; }
static int st(void *s, calf_rng *g, int a, const float *u, float *o, float *rew) {
    (void)s; (void)g; (void)a; (void)u; o[0] = 0; *rew = 0; return 1;
}
static const int nvec[2] = {2, 3};
static const calf_env_class cls = {
    .spec = {.name = "Space-$kind", .obs_dim = 1, .num_actions = 5, .max_episode_steps = 5,
             .state_size = 4,
             $([ $kind = nvec ] && echo ".num_action_dims = 2, .action_nvec = nvec" || echo ".action_mask = 1")},
    .reset = r, .step = st};
int calf_plugin_register(int abi_version, calf_error *err) {
    int rc = CALF_PLUGIN_CHECK_ABI(abi_version, err);
    return rc != CALF_OK ? rc : calf_env_register(&cls, err);
}
C
    expect_exit 2 "$CALF" envs --env_lib "$WORK/space_$kind.so"
    if [ $kind = nvec ]; then
        expect_in "$WORK/err" "env 'Space-nvec': a MultiDiscrete action needs action_nvec and step_multi"
    else
        expect_in "$WORK/err" "env 'Space-mask': spec.action_mask (1) and the action_mask hook go together"
    fi
done

report e2e_plugin
