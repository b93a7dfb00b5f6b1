"""examples/python: each example runs from the build tree and prints what it should."""

from __future__ import annotations

import pathlib
import subprocess
import sys

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"


def run(script: str, *args: str) -> str:
    r = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_loop() -> None:
    # the pole-following push keeps CartPole up: almost every episode reaches the
    # 500-step limit (16 envs x 2000 steps: 64 episodes, the same ones every run)
    assert run("loop.py") == (
        "CartPole-v1: 16 envs x 2000 steps, 64 episodes ended, mean return 488.28\n"
    )
    out = run("loop.py", "Pendulum-v1", "400", "2")  # 200-step episodes, random torques
    assert out.startswith("Pendulum-v1: 2 envs x 400 steps, 4 episodes ended, mean return -")


def test_train_own_env(tmp_path) -> None:
    # plain-Python CartPole trained by calf's PPO: solved, the same figures every run
    out = run("train_own_env.py", str(tmp_path / "run"))
    lines = out.splitlines()
    # (the example's own 391 iterations since its re-tune; the last iteration may end no
    # episode, so its training return can be nan: the greedy evaluation is what counts)
    assert lines[-2].startswith("iteration 391: 100096 env steps, "), out
    assert lines[-2].endswith(", eval 500.0"), out
    assert lines[-1] == "greedy episode from seed 777: return 500", out
