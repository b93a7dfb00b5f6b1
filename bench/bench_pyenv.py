"""bench_pyenv.py: PPO training a plain-Python env through calf's bridge, beside the
same env stepped alone in a plain Python loop (issue: calf adds under 30% on top of
the env), and --nproc 2 beside one process.

    PYTHONPATH=build/python /usr/bin/python3 bench/bench_pyenv.py [ITERATIONS]

The envs are examples/python/train_own_env.py's PyCartPole (Gymnasium's CartPole-v1
rules in lean plain Python) and, when Gymnasium is importable (fetched beside the
project: CALF_GYMNASIUM_PATH=/path/to/Gymnasium), Gymnasium's own CartPole-v1; the job
is examples/ppo_cartpole.gin (64 envs, 32 steps an iteration) without evaluation, and
`calf train` of the same job on calf's C CartPole gives PPO's own cost per env step.
Figures are env steps per second of wall-clock time.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import calf

SRC = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("train_own_env", SRC / "examples" / "python" / "train_own_env.py")
example = importlib.util.module_from_spec(spec)
sys.modules["train_own_env"] = example  # pickles name the env's class by its module
spec.loader.exec_module(example)


def plain_loop(steps: int, make) -> float:
    """The env alone: one env, actions alternating, reset when an episode ends."""
    env = make()
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


def cli_rate(iterations: int) -> float:
    """`calf train` of the same job on calf's C CartPole: PPO's own cost per env step."""
    calf_bin = os.environ.get("CALF_BINARY", str(SRC / "build" / "calf"))
    root = tempfile.mkdtemp(prefix="bench_pyenv.")
    try:
        t0 = time.perf_counter()
        subprocess.run([calf_bin, "train", "--quiet", "--root_dir", root, "--conf",
                        str(SRC / "examples" / "ppo_cartpole.gin"), "--conf_param",
                        f"TrainerConfig.num_iterations={iterations}", "--conf_param",
                        "TrainerConfig.evaluate=False"], check=True)
        return iterations * 64 * 32 / (time.perf_counter() - t0)
    finally:
        shutil.rmtree(root)


def make_gymnasium_cartpole():
    import gymnasium

    return gymnasium.make("CartPole-v1")


def bench(label: str, make, name: str, iterations: int) -> None:
    alone = plain_loop(iterations * 64 * 32, make)
    one = train(name, iterations, 1)
    two = train(name, iterations, 2)
    print(f"{label} alone in a plain Python loop: {alone:10.0f} steps/s")
    print(f"  PPO through calf's bridge, 1 process: {one:10.0f} steps/s  ({one / alone:.2f} of alone)")
    print(f"  PPO through calf's bridge, --nproc 2: {two:10.0f} steps/s  ({two / one:.2f}x 1 process)")


def main() -> None:
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    cli = cli_rate(iterations)
    print(f"calf train on calf's C CartPole (PPO's own cost): {cli:10.0f} steps/s "
          f"({1e6 / cli:.1f} us per env step)")
    name = calf.register_env(example.make_env, max_episode_steps=500)
    bench("PyCartPole", example.make_env, name, iterations)
    if os.environ.get("CALF_GYMNASIUM_PATH"):
        sys.path.insert(0, os.environ["CALF_GYMNASIUM_PATH"])
    try:
        import gymnasium  # noqa: F401
    except ImportError:
        print("Gymnasium's CartPole-v1: skipped (set CALF_GYMNASIUM_PATH to a Gymnasium checkout)")
        return
    name = calf.register_env(make_gymnasium_cartpole)
    bench("Gymnasium's CartPole-v1", make_gymnasium_cartpole, name, iterations)


if __name__ == "__main__":
    main()
