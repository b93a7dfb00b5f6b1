# lib_e2e.sh: helpers shared by the end-to-end tests (sourced, not run by ctest).
# Each test gets CALF (the binary) and SRC (the source dir) as $1 and $2.
set -u
CALF=$1
SRC=$2
# glibc fills what malloc hands out with this byte: a result that leans on fresh memory
# being zero (it often is, in a new process) differs from the 1-process run, or fails.
export MALLOC_PERTURB_=204
# CALF_E2E_TMP: where the scratch dir goes (default /tmp)
WORK=$(mktemp -d "${CALF_E2E_TMP:-/tmp}/calf_e2e.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
FAILS=0
CHECKS=0

ok() { CHECKS=$((CHECKS + 1)); }
bad() { CHECKS=$((CHECKS + 1)); FAILS=$((FAILS + 1)); echo "FAIL: $*" >&2; }

# expect_exit CODE cmd...: run cmd, check its exit status
expect_exit() {
    local want=$1; shift
    "$@" >"$WORK/out" 2>"$WORK/err"
    local got=$?
    if [ "$got" = "$want" ]; then ok; else
        bad "exit $got (want $want): $*"; sed 's/^/  | /' "$WORK/err" >&2 | head -20; fi
}
# expect_in FILE TEXT: FILE contains TEXT (fixed string)
expect_in() {
    if grep -qF -- "$2" "$1"; then ok; else bad "'$2' not in $1:"; sed 's/^/  | /' "$1" | head -20 >&2; fi
}
expect_not_in() {
    if grep -qF -- "$2" "$1"; then bad "'$2' unexpectedly in $1"; else ok; fi
}
expect_eq() {
    if [ "$1" = "$2" ]; then ok; else bad "$3: '$1' != '$2'"; fi
}
# expect_write_fails TEXT cmd...: cmd, its output going to a full disk (/dev/full), exits
# 1 saying TEXT; skipped, saying so, where /dev/full cannot be written
expect_write_fails() {
    local text=$1; shift
    if [ ! -w /dev/full ]; then echo "skipped, /dev/full is not writable here: $*"; return; fi
    "$@" >/dev/full 2>"$WORK/err"
    local got=$?
    if [ "$got" = 1 ]; then ok; else bad "exit $got (want 1) writing to /dev/full: $*"; fi
    expect_in "$WORK/err" "$text"
}
expect_same_file() {
    if cmp -s "$1" "$2"; then ok; else bad "files differ: $1 $2"; fi
}
report() {
    echo "$1: $CHECKS checks, $FAILS failed"
    [ "$FAILS" = 0 ]
}
# wait_for_line FILE TEXT SECONDS: wait (at most SECONDS) until FILE contains TEXT
wait_for_line() {
    local i
    for i in $(seq 1 $(($3 * 10))); do
        grep -qF -- "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
# log_pid LOG: the process id a rank's log records on its first line
log_pid() { sed -n 's/.*pid \([0-9]*\).*/\1/p' "$1" | head -1; }
# last_ckpt ROOT: the iteration of the newest checkpoint in ROOT's train/algorithm ("" if none)
last_ckpt() { ls "$1/train/algorithm" 2>/dev/null | sed -n 's/^ckpt-\([0-9]*\)$/\1/p' | sort -n | tail -n 1; }
# interrupt_after ROOT CMD...: run CMD in the background, send it one SIGINT once ROOT's
# rank-0 log shows iteration 2, and leave its exit status in INT_STATUS
interrupt_after() {
    local root=$1
    shift
    "$@" >"$WORK/int_out" 2>"$WORK/int_err" &
    local pid=$!
    wait_for_line "$root/log/rank-0.log" "iter 2" 10
    kill -INT $pid
    wait $pid
    INT_STATUS=$?
}
# ppo64_gin FILE: examples/ppo_cartpole.gin's networks and loss in the shape the example
# had before its re-tune to 8 envs (64 envs, minibatch 512, 4 epochs, a constant learning
# rate), for the tests written for a 64-env job: its blocks split 32/32, 22/21/21, 16 each
ppo64_gin() {
    cat >"$1" <<GIN
include '$SRC/examples/ppo_cartpole.gin'
create_environment.num_parallel_environments = 64
TrainerConfig.mini_batch_size = 512
TrainerConfig.num_updates_per_train_iter = 4
Adam.lr_schedule = 'constant'
GIN
}
# small_gin FILE: a ppo_cartpole run of 4 iterations of 4 envs x 8 steps with 8-unit
# networks, 2 checkpoints and 2 evaluations: the shortest run that still writes every file
small_gin() {
    cat >"$1" <<GIN
include '$SRC/examples/ppo_cartpole.gin'
create_environment.num_parallel_environments = 4
TrainerConfig.unroll_length = 8
TrainerConfig.mini_batch_size = 16
TrainerConfig.num_updates_per_train_iter = 1
TrainerConfig.num_iterations = 4
Adam.lr_schedule = 'constant'          # a resume to a longer run continues it exactly
TrainerConfig.num_checkpoints = 2
TrainerConfig.eval_interval = 2
TrainerConfig.num_eval_episodes = 1
ActorDistributionNetwork.fc_layer_params = (8,)
ValueNetwork.fc_layer_params = (8,)
GIN
}
