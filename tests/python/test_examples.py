"""examples/python: each example runs from the build tree and prints what it should."""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys

import pytest

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


def test_tune(tmp_path) -> None:
    # a tiny search (3 trials on 2 processes, 8 iterations of 8 envs x 16 steps), and one
    # of its trials trained again from its parameters in another dir: the same bytes
    optuna = pytest.importorskip("optuna")
    root = tmp_path / "tune"
    out = run("tune.py", "--root", str(root), "--trials", "3", "--jobs", "2",
              "--timesteps", "1024", "--startup", "1")
    lines = out.splitlines()
    assert [x.split(":")[0] for x in lines[:3]] == ["trial 0", "trial 1", "trial 2"], out
    assert lines[3].startswith("3 trials (") and " on 2 processes in " in lines[3], out
    study = optuna.load_study(study_name="calf", storage=f"sqlite:///{root}/study.db")
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert done and lines[-1].startswith(f"best: {study.best_value:.1f} "), out
    spec = importlib.util.spec_from_file_location("tune", EXAMPLES / "tune.py")
    tune = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tune)
    for t in study.trials:  # each trial's dir is named by its parameters
        run_dir = root / tune.run_name(t.params, 1)
        assert (run_dir / "config.gin").exists(), run_dir
        gin = dict(line.split(" = ", 1) for line in (run_dir / "config.gin").read_text()
                   .splitlines() if " = " in line and not line.startswith("#"))
        assert gin["PPOLoss.gamma"] == f"{t.params['gamma']:.17g}  # --conf_param"
        assert gin["TrainerConfig.unroll_length"] == f"{t.params['n_steps']}  # --conf_param"
    best = study.best_trial
    again = tmp_path / "again"
    value = tune.train_trial(best.params, again, env="CartPole-v1", timesteps=1024, seed=1)
    assert value == pytest.approx(best.value, abs=0.05)
    name = tune.run_name(best.params, 1)
    assert checkpoint_bytes(again / name) == checkpoint_bytes(root / name)
    # planted: another seed is another run (the comparison can fail)
    tune.train_trial(best.params, again, env="CartPole-v1", timesteps=1024, seed=2)
    assert checkpoint_bytes(again / tune.run_name(best.params, 2)) != checkpoint_bytes(root / name)


def checkpoint_bytes(run_dir) -> bytes:
    (ckpt,) = (run_dir / "train" / "algorithm").glob("ckpt-*")
    return ckpt.read_bytes()
