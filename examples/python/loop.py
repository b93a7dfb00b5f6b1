"""loop.py: a loop over calf.make_vec, Gymnasium's vector-env API on calf's envs.

Steps NUM_ENVS envs of ENV for STEPS steps with NumPy actions (CartPole-v1: push
towards where the pole falls; any other env: uniform random actions from the action
space's bounds) and prints the episodes that ended and their mean return. Works with
or without Gymnasium installed.

usage: PYTHONPATH=build/python /usr/bin/python3 examples/python/loop.py [ENV [STEPS [NUM_ENVS]]]
"""

from __future__ import annotations

import sys

import numpy as np

import calf


def run(name: str = "CartPole-v1", steps: int = 2000, num_envs: int = 16, seed: int = 1) -> list[float]:
    """The returns of the episodes that ended within `steps` steps of every env."""
    rng = np.random.default_rng(seed)
    returns = np.zeros(num_envs)  # of each env's episode under way
    ended: list[float] = []
    with calf.make_vec(name, num_envs, seed=seed) as envs:
        space = envs.single_action_space
        obs, _ = envs.reset()  # (num_envs, obs_dim) float32
        for _ in range(steps):
            if name == "CartPole-v1":  # obs: cart x, cart v, pole angle, pole angular v
                actions = (obs[:, 2] + obs[:, 3] > 0).astype(np.int64)
            elif hasattr(space, "n"):  # Discrete(n)
                actions = rng.integers(space.n, size=num_envs)
            else:  # Box(low, high, (action_dim,))
                actions = rng.uniform(space.low, space.high, (num_envs, *space.shape))
            obs, rewards, terminations, truncations, infos = envs.step(actions)
            returns += rewards
            done = terminations | truncations  # those envs were reset in this step;
            ended.extend(returns[done].tolist())  # infos["final_obs"][i]: the last obs
            returns[done] = 0.0
    return ended


def main(argv: list[str]) -> int:
    name = argv[1] if len(argv) > 1 else "CartPole-v1"
    steps = int(argv[2]) if len(argv) > 2 else 2000
    num_envs = int(argv[3]) if len(argv) > 3 else 16
    ended = run(name, steps, num_envs)
    mean = f"{np.mean(ended):.2f}" if ended else "n/a"
    print(f"{name}: {num_envs} envs x {steps} steps, {len(ended)} episodes ended, "
          f"mean return {mean}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
