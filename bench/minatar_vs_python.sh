#!/usr/bin/env bash
# minatar_vs_python.sh: MinAtar's games stepped by calf (bench_envs: one env through its
# byte hooks, and a block of 64 through vec_env_step_u8, the observations as bytes) beside MinAtar's own Python
# `Environment` on one core (random actions, `act()` then `state()` per step, as an agent
# loop needs the observation), in one run, with the ratio. MinAtar is not part of calf:
# fetch kenjyoung/MinAtar and give its checkout (pure Python on Debian's NumPy).
#
#   bench/minatar_vs_python.sh BUILD_DIR MINATAR_CHECKOUT [STEPS]
#
# STEPS: Python steps per game (default 200000). Both sides count CPU time of their own
# process, so a loaded machine slows both alike.
set -eu
BUILD=$(realpath "$1")
MINATAR=$(realpath "$2")
STEPS=${3:-200000}
PY=/usr/bin/python3
printf '%-14s %14s %14s %14s %10s\n' game "calf 1 env" "calf block" "MinAtar py" "ratio"
for game in Asterix Breakout Freeway Seaquest SpaceInvaders; do
    read -r one block < <("$BUILD/bench_envs" "MinAtar/$game-v0" |
        awk -v id="MinAtar/$game-v0" '$1 == id { print $2, $3 }')
    mgame=$(tr 'A-Z' 'a-z' <<<"$game" | sed 's/spaceinvaders/space_invaders/')
    py=$(PYTHONPATH="$MINATAR" "$PY" - "$mgame" "$STEPS" <<'PYEOF'
import sys, time
import numpy as np
from minatar import Environment
game, steps = sys.argv[1], int(sys.argv[2])
env = Environment(game, sticky_action_prob=0.1, difficulty_ramping=True)
env.seed(1)
env.reset()
acts = np.random.RandomState(2).randint(0, 6, size=steps)
t0 = time.process_time()
for a in acts:
    _, done = env.act(int(a))
    env.state()
    if done:
        env.reset()
dt = time.process_time() - t0
print(f"{steps / dt / 1e6:.4f}")
PYEOF
)
    awk -v g="$game" -v o="$one" -v b="$block" -v p="$py" \
        'BEGIN { printf "%-14s %12.2f M %12.2f M %12.4f M %9.0fx\n", g, o, b, p, o / p }'
done
echo "(calf: M env steps per CPU-second, median of bench_envs' repetitions; MinAtar: one run of $STEPS steps; ratio: calf's one env over MinAtar's)"
