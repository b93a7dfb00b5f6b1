"""bench_pyenv.py: PPO training a plain-Python env through calf's bridge, beside the
same env stepped alone in a plain Python loop (issue: calf adds under 30% on top of
the env), and --nproc 2 beside one process.

    PYTHONPATH=build/python /usr/bin/python3 bench/bench_pyenv.py [ITERATIONS]

The env is examples/python/train_own_env.py's PyCartPole (Gymnasium's CartPole-v1
rules in plain Python); the job is examples/ppo_cartpole.gin (64 envs, 32 steps an
iteration) without evaluation. Figures are env steps per second of wall-clock time.
"""

from __future__ import annotations

import importlib.util
import pathlib
import shutil
import sys
import tempfile
import time

import calf

SRC = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("train_own_env", SRC / "examples" / "python" / "train_own_env.py")
example = importlib.util.module_from_spec(spec)
sys.modules["train_own_env"] = example  # pickles name the env's class by its module
spec.loader.exec_module(example)


def plain_loop(steps: int) -> float:
    """The env alone: one env, actions alternating, reset when an episode ends."""
    env = example.make_env()
    env.reset(seed=0)
    t0 = time.perf_counter()
    for k in range(steps):
        _, _, terminated, truncated, _ = env.step(k & 1)
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - t0)


def train(name: str, iterations: int, nproc: int) -> float:
    root = tempfile.mkdtemp(prefix="bench_pyenv.")
    try:
        t0 = time.perf_counter()
        calf.train(SRC / "examples" / "ppo_cartpole.gin", root_dir=root, env=name, nproc=nproc,
                   quiet=True, overrides={"TrainerConfig.num_iterations": iterations,
                                          "TrainerConfig.evaluate": False})
        return iterations * 64 * 32 / (time.perf_counter() - t0)
    finally:
        shutil.rmtree(root)


def main() -> None:
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    name = calf.register_env(example.make_env, max_episode_steps=500)
    alone = plain_loop(iterations * 64 * 32)
    one = train(name, iterations, 1)
    two = train(name, iterations, 2)
    print(f"PyCartPole alone in a plain Python loop: {alone:10.0f} steps/s")
    print(f"PPO through calf's bridge, 1 process:    {one:10.0f} steps/s  ({one / alone:.2f} of alone)")
    print(f"PPO through calf's bridge, --nproc 2:    {two:10.0f} steps/s  ({two / one:.2f}x 1 process)")


if __name__ == "__main__":
    main()
