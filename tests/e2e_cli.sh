#!/usr/bin/env bash
# e2e_cli.sh: the calf command's options, usage errors and config errors (exit 2,
# file:line messages, nothing written to the root dir).
. "$(dirname "$0")/lib_e2e.sh"

expect_exit 0 "$CALF" --help
expect_in "$WORK/out" "usage: calf <command>"
expect_exit 0 "$CALF" --version
expect_in "$WORK/out" "calf 0.3.0"
expect_in "$WORK/out" "MPI backend"
# what --version says of a feature this build lacks: version.c compiled as a build with
# the feature turned off (-DCALF_WITH_MPI=OFF) and as one that did not find it
CC=${CC:-cc}
cat > "$WORK/note_main.c" <<'EOF'
#include <stdio.h>
#include "calf/version.h"
const char *kernels_describe(void); /* version.c's one call into the rest of calf */
const char *kernels_describe(void) { return "generic"; }
int main(void) {
    printf("%s|%s\n", calf_feature_note("mpi"), calf_feature_note("mujoco"));
    return calf_feature_note("gpu") != NULL;
}
EOF
for with in 0 1; do
    expect_exit 0 "$CC" -std=c11 -I"$SRC/include" -I"$SRC/src" -DCALF_HAVE_MPI=0 -DCALF_HAVE_MUJOCO=0 \
        -DCALF_WITH_MPI=$with -DCALF_WITH_MUJOCO=$with "$SRC/src/base/version.c" \
        "$WORK/note_main.c" -o "$WORK/note_$with"
    expect_exit 0 "$WORK/note_$with"
done
expect_eq "$("$WORK/note_0")" "not built: turned off at build time (-DCALF_WITH_MPI=OFF)|not built: turned off at build time (-DCALF_WITH_MUJOCO=OFF)" "a feature turned off"
expect_eq "$("$WORK/note_1" | cut -d'|' -f1)" "not built: MPI was not found at build time" "a feature not found"
expect_in "$WORK/out" "MuJoCo was not found at build time"
expect_exit 2 "$CALF"
expect_exit 2 "$CALF" frobnicate
expect_in "$WORK/err" "unknown command 'frobnicate'"
expect_exit 0 "$CALF" train --help
expect_in "$WORK/out" "--nproc N"
expect_in "$WORK/out" "Leave it out under mpirun/srun:"
expect_in "$WORK/out" "(both together are"
expect_exit 2 "$CALF" train --root_dir "$WORK/r" --bogus
expect_in "$WORK/err" "unknown option '--bogus'"
expect_exit 2 "$CALF" train --conf "$SRC/examples/ppo_cartpole.gin"
expect_in "$WORK/err" "missing required option --root_dir"
expect_exit 2 "$CALF" train --root_dir "$WORK/r" --conf "$SRC/examples/ppo_cartpole.gin" --nproc zero
expect_in "$WORK/err" "--nproc expects an integer"
expect_exit 2 "$CALF" train --root_dir "$WORK/r" --conf "$SRC/examples/ppo_cartpole.gin" --nproc ' 2'
expect_in "$WORK/err" "--nproc expects an integer in [1, 1024], got ' 2'"
expect_exit 2 "$CALF" train --root_dir "$WORK/r"
expect_in "$WORK/err" "missing --conf"
expect_exit 2 "$CALF" play
expect_in "$WORK/err" "missing required option --root_dir"
expect_exit 2 "$CALF" train --root_dir= --conf "$SRC/examples/ppo_cartpole.gin"
expect_in "$WORK/err" "calf train: empty --root_dir"
expect_exit 2 "$CALF" play --root_dir ""
expect_in "$WORK/err" "calf play: empty --root_dir"
expect_exit 2 "$CALF" play --checkpoint "$WORK/x"
expect_in "$WORK/err" "missing required option --root_dir"

# the options, their checks and every --help come from one command table (cli/commands.c)
expect_exit 0 "$CALF" --help
expect_in "$WORK/out" "  --env_lib LIB  (train, play, export, env, envs; repeatable) first load the plug-in"
expect_in "$WORK/out" "  plot     draw runs' learning curves as one SVG file:"
expect_exit 0 "$CALF" play --help
expect_in "$WORK/out" "  --width W, --height H the video's size in pixels (default 480x480)"
expect_in "$WORK/out" "  for checking an exported policy (calf export) against calf:"
expect_exit 0 "$CALF" plot --help
expect_in "$WORK/out" "  --x iterations   x = the iteration (the events' step)"
expect_exit 0 "$CALF" events -h
expect_in "$WORK/out" "  --raw   every record as stored; nothing dropped"
expect_exit 2 "$CALF" plot "$WORK" --x minutes
expect_in "$WORK/err" "calf plot: --x expects steps, iterations or seconds, got 'minutes'"
expect_exit 2 "$CALF" plot "$WORK" --output=
expect_in "$WORK/err" "calf plot: -o needs a file name"
expect_exit 2 "$CALF" play --root_dir "$WORK/r" --seed=-1
expect_in "$WORK/err" "calf: --seed expects an integer in [0, 4000000000000000000], got '-1'"
expect_exit 2 "$CALF" export --root_dir "$WORK/r" --output
expect_in "$WORK/err" "calf: option --output needs a value"
expect_exit 2 "$CALF" env CartPole-v1 --steps
expect_in "$WORK/err" "calf env: --steps wants an integer in 0..100000000, got ''"
expect_exit 2 "$CALF" env --seed 18446744073709551616 CartPole-v1
expect_in "$WORK/err" "calf env: --seed wants an integer in 0..2^64-1, got '18446744073709551616'"
expect_exit 2 "$CALF" envs --bogus
expect_in "$WORK/err" "calf envs: unexpected argument '--bogus' (try --help)"
expect_exit 2 "$CALF" events --bogus
expect_eq "$(cat "$WORK/err")" "calf events: unknown option '--bogus'
usage: calf events [--raw] [--csv] FILE..." "events' answer to an unknown option"
# --env_lib is taken first, wherever it stands, with the program's own message
expect_exit 2 "$CALF" env --env_lib
expect_in "$WORK/err" "calf: option --env_lib needs a value"

expect_exit 0 "$CALF" train --list-bindings
for b in create_environment.env_name create_environment.num_parallel_environments \
         TrainerConfig.random_seed TrainerConfig.num_iterations TrainerConfig.num_env_steps \
         TrainerConfig.unroll_length TrainerConfig.mini_batch_size \
         TrainerConfig.num_updates_per_train_iter TrainerConfig.num_checkpoints \
         TrainerConfig.evaluate TrainerConfig.eval_interval TrainerConfig.num_eval_episodes \
         TrainerConfig.summary_interval PPOLoss.gamma Adam.lr \
         ActorDistributionNetwork.fc_layer_params ValueNetwork.fc_layer_params; do
    expect_in "$WORK/out" "$b"
done

# a typo'd binding: file:line, a suggestion, exit 2, nothing in the root dir
printf '# my config\nTrainerConfig.num_iteration = 3\n' > "$WORK/typo.gin"
expect_exit 2 "$CALF" train --root_dir "$WORK/typo_root" --conf "$WORK/typo.gin"
expect_in "$WORK/err" "typo.gin:2: unknown binding 'TrainerConfig.num_iteration' (did you mean 'TrainerConfig.num_iterations'?)"
if [ -e "$WORK/typo_root" ]; then bad "root dir created for a rejected config"; else ok; fi

printf 'PPOLoss.gamma = 2.0\n' > "$WORK/bounds.gin"
expect_exit 2 "$CALF" train --root_dir "$WORK/b_root" --conf "$WORK/bounds.gin"
expect_in "$WORK/err" "bounds.gin:1: 'PPOLoss.gamma': value 2 out of bounds [0, 1]"
printf "create_environment.env_name = 'NoSuchEnv-v0'\n" > "$WORK/env.gin"
expect_exit 2 "$CALF" train --root_dir "$WORK/e_root" --conf "$WORK/env.gin"
expect_in "$WORK/err" "env.gin:1: unknown environment 'NoSuchEnv-v0' (known: CartPole-v1"
expect_exit 2 "$CALF" train --root_dir "$WORK/m_root" --conf "$WORK/missing.gin"
expect_in "$WORK/err" "missing.gin: cannot open"
expect_exit 2 "$CALF" train --root_dir "$WORK/p_root" --conf "$SRC/examples/ppo_cartpole.gin" \
    --conf_param 'Adam.lr=fast'
expect_in "$WORK/err" "--conf_param 'Adam.lr=fast': 'Adam.lr' expects a number, got 'fast'"
expect_exit 2 "$CALF" train --root_dir "$WORK/n_root" --conf "$SRC/examples/ppo_cartpole.gin" \
    --conf_param 'create_environment.num_parallel_environments=4' --nproc 8
expect_in "$WORK/err" "8 processes but only 4 environments"
expect_exit 2 "$CALF" train --root_dir "$WORK/l_root" --conf "$SRC/examples/ppo_cartpole.gin" \
    --conf_param 'ActorDistributionNetwork.fc_layer_params=(8,8,8,8,8,8,8,8)'
expect_in "$WORK/err" "takes at most 7 elements, got 8"
expect_exit 2 "$CALF" train --root_dir "$WORK/t_root" --conf "$SRC/examples/ppo_cartpole.gin" \
    --conf_param 'Adam.lr=0.1 PPOLoss.gamma=0.5'
expect_in "$WORK/err" "expected one 'Scope.param=value'"
echo x > "$WORK/afile"
expect_exit 2 "$CALF" train --root_dir "$WORK/afile" --conf "$SRC/examples/ppo_cartpole.gin"
expect_in "$WORK/err" "--root_dir $WORK/afile is not a directory"
for d in b_root e_root m_root p_root n_root l_root t_root; do
    if [ -e "$WORK/$d" ]; then bad "$d created for a rejected config"; else ok; fi
done

: > "$WORK/empty.tfevents"
expect_exit 2 "$CALF" events "$WORK/empty.tfevents"
expect_in "$WORK/err" "empty file, not an events file"
expect_exit 2 "$CALF" events "$WORK/nonexistent.tfevents"
expect_exit 0 "$CALF" envs
expect_in "$WORK/out" "CartPole-v1"
expect_in "$WORK/out" "Pendulum-v1"
expect_in "$WORK/out" "Box(-2..2, 1)"
expect_in "$WORK/out" "Discrete(3)"
# observation spaces as Gymnasium prints a Box: MinAtar's images are bytes of 0 and 1
expect_eq "$(grep '^CartPole-v1 ' "$WORK/out" | grep -c 'Box(-inf, inf, (4,), float32) ')" 1 "CartPole's space"
expect_eq "$(grep '^MinAtar/Seaquest-v1 ' "$WORK/out" | grep -c 'Box(0, 1, (10, 10, 10), uint8) ')" 1 "Seaquest's space"
expect_exit 0 "$CALF" env MinAtar/Freeway-v0 --steps 1
expect_in "$WORK/out" "# MinAtar/Freeway-v0 seed=0 index=0: observation space Box(0, 1, (10, 10, 7), uint8), action space Discrete(6)"

# calf env: one line per step, deterministic for (seed, index), resets after an episode
expect_exit 0 "$CALF" env CartPole-v1 --seed 7 --index 3 --steps 40
cp "$WORK/out" "$WORK/env1"
expect_exit 0 "$CALF" env CartPole-v1 --seed 7 --index 3 --steps 40
expect_same_file "$WORK/env1" "$WORK/out"
expect_eq "$(grep -vc '^#' "$WORK/env1")" 40 "step lines"
expect_eq "$(grep -v '^#' "$WORK/env1" | awk '{print NF}' | sort -u)" 9 "fields per CartPole step line"
expect_exit 0 "$CALF" env CartPole-v1 --seed 7 --index 4 --steps 40
if cmp -s "$WORK/env1" "$WORK/out"; then bad "index does not change the stream"; else ok; fi
expect_exit 0 "$CALF" env Pendulum-v1 --steps 201
expect_eq "$(grep -v '^#' "$WORK/out" | awk '$NF == 1' | wc -l)" 1 "Pendulum truncates once in 201 steps"
expect_exit 2 "$CALF" env NoSuchEnv-v0
expect_in "$WORK/err" "NoSuchEnv-v0"
expect_in "$WORK/err" "CartPole-v1"
expect_exit 2 "$CALF" env CartPole-v1 --steps -3
expect_exit 2 "$CALF" env CartPole-v1 --frobnicate
# an error is one line, whatever the name it quotes holds
expect_exit 2 "$CALF" env "$(printf 'Cart\nPole')"
expect_eq "$(wc -l <"$WORK/err")" 1 "lines of the error for a name with a newline"
expect_in "$WORK/err" "Cart Pole"

# output that cannot be written is a failure (exit 1, one line), not a silent success
expect_write_fails "error writing output" "$CALF" --help
expect_write_fails "error writing output" "$CALF" --version
expect_write_fails "error writing output" "$CALF" envs
expect_write_fails "error writing output" "$CALF" env CartPole-v1 --steps 3
expect_write_fails "error writing output" "$CALF" train --list-bindings
report e2e_cli
