"""Train a Gymnasium-API environment of your own with calf's C trainer.

CartPole written in plain Python (Gymnasium's CartPole-v1 rules), trained with PPO by
calf, then played greedily. Gymnasium is not needed: its spaces are used when it is
installed, calf's minimal ones (the same attributes) when not.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/train_own_env.py [ROOT_DIR]
"""

from __future__ import annotations

import math
import pathlib
import sys

import numpy as np

import calf

try:
    from gymnasium.spaces import Box, Discrete
except ImportError:
    Box, Discrete = calf.Box, calf.Discrete


class PyCartPole:
    """Gymnasium's CartPole-v1: push the cart left or right to keep the pole up."""

    def __init__(self) -> None:
        high = np.array([4.8, np.finfo(np.float32).max, 0.418, np.finfo(np.float32).max],
                        dtype=np.float32)
        self.observation_space = Box(-high, high, dtype=np.float32)
        self.action_space = Discrete(2)
        self.np_random: np.random.Generator | None = None
        self.state = np.zeros(4)

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None or self.np_random is None:
            self.np_random = np.random.default_rng(seed)
        self.state = self.np_random.uniform(-0.05, 0.05, size=4)
        return self.state.astype(np.float32), {}

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot**2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos**2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * x_acc
        theta, theta_dot = theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc
        self.state = np.array([x, x_dot, theta, theta_dot])
        terminated = bool(x < -2.4 or x > 2.4 or theta < -0.2095 or theta > 0.2095)
        return self.state.astype(np.float32), 1.0, terminated, False, {}

    def close(self) -> None:
        pass


def make_env() -> PyCartPole:
    return PyCartPole()


def main() -> None:
    root = sys.argv[1] if len(sys.argv) > 1 else "runs/py_cartpole"
    # the factory becomes calf env class "py:__main__:make_env"; 500 steps per episode
    name = calf.register_env(make_env, max_episode_steps=500)
    conf = pathlib.Path(__file__).resolve().parents[1] / "ppo_cartpole.gin"
    with calf.Trainer(conf, root_dir=root, env=name) as trainer:  # the example's 391 iterations
        while not trainer.done:
            m = trainer.step()
            if m["iteration"] % 50 == 0 or trainer.done:
                print(f"iteration {m['iteration']}: {m['env_steps']} env steps, "
                      f"average return {m['average_return']:.1f}, eval {m['eval_return']:.1f}")
    policy = calf.load_policy(root)
    env = make_env()
    obs, _ = env.reset(seed=777)
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(int(policy(obs[None])[0]))
        total += reward
        done = terminated or truncated or total >= 500
    print(f"greedy episode from seed 777: return {total:.0f}")


if __name__ == "__main__":
    main()
