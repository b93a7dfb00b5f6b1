"""Python environments trained by calf's C trainer (calf.register_env, Trainer(env=)).

Envs from tests/python/pyenv_envs.py (calf's own spaces, no Gymnasium needed): their
spaces are checked at the start, each env is seeded once with random_seed + its global
index, a run is deterministic and a resume is exact (pickled env states in the
checkpoints), an env that cannot be pickled restarts its episodes on resume, and an env
that raises or returns a wrong value stops the run with the env index and its traceback.
"""

from __future__ import annotations

import filecmp
import os
import pathlib
import sys
import traceback

import numpy as np
import pytest

import calf

sys.path.insert(0, os.path.dirname(__file__))
import pyenv_envs  # noqa: E402
from calf_runs import checkpoint_path as ckpt  # noqa: E402

SRC = pathlib.Path(__file__).resolve().parents[2]
PPO = SRC / "examples" / "ppo_cartpole.gin"
SAC = SRC / "examples" / "sac_pendulum.gin"
E = 8
PPO_OVERRIDES = {
    "create_environment.num_parallel_environments": E,
    "TrainerConfig.unroll_length": 16,
    "TrainerConfig.mini_batch_size": 64,
    "TrainerConfig.num_checkpoints": 6,
    "TrainerConfig.eval_interval": 3,
    "TrainerConfig.num_eval_episodes": 2,
}

CORRIDOR = calf.register_env(pyenv_envs.make_corridor, max_episode_steps=60)
SWING = calf.register_env(pyenv_envs.make_swing, max_episode_steps=40)


def train(root, iterations, env=CORRIDOR, conf=PPO, overrides=PPO_OVERRIDES, stop=None):
    """Train to `iterations` (or stop after iteration `stop`, a checkpoint written)."""
    with calf.Trainer(
        conf, root_dir=root, env=env,
        overrides={**overrides, "TrainerConfig.num_iterations": iterations},
    ) as t:
        metrics = [t.step() for _ in range((stop or iterations) - t.iteration)]
        if stop:
            t.checkpoint()
    return metrics


def test_names_and_registration():
    assert CORRIDOR == "py:pyenv_envs:make_corridor"
    assert CORRIDOR in calf.env_names()
    # the same factory again: the same class, the factory replaced
    assert calf.register_env(pyenv_envs.make_corridor, max_episode_steps=60) == CORRIDOR
    with pytest.raises(ValueError, match="already registered with other spaces"):
        calf.register_env(pyenv_envs.make_corridor, max_episode_steps=61)


class _Space:
    def __init__(self, kind, **kw):
        self.__class__ = type(kind, (), {})
        self.__dict__.update(kw)


class _Env:
    def __init__(self, obs, act):
        self.observation_space, self.action_space = obs, act

    def reset(self, seed=None, options=None):
        return np.zeros(2), {}

    def close(self):
        pass


@pytest.mark.parametrize(
    "obs, act, what",
    [
        (calf.Box(-1, 1, (2, 2), np.float32), calf.Discrete(2), "observation_space Box"),
        (calf.Box(-1, 1, (2,), np.float32), calf.MultiDiscrete([2, 2]), "action_space MultiDiscrete"),
        (calf.Box(-1, 1, (2,), np.float32), calf.Box(-np.inf, np.inf, (1,), np.float32),
         "bounds must be finite"),
        (calf.Box(-1, 1, (2,), np.float32), calf.Box(-1, 1, (2, 1), np.float32), "action_space Box"),
        (_Space("Dict"), calf.Discrete(2), "observation_space Dict"),
    ],
)
def test_unsupported_spaces_are_refused(obs, act, what):
    with pytest.raises(ValueError, match=what) as e:
        calf.register_env(lambda: _Env(obs, act), name="py:bad", max_episode_steps=10)
    assert "calf trains envs with a 1-D Box observation space" in str(e.value)


def test_no_time_limit_is_refused():
    with pytest.raises(ValueError, match="no time limit"):
        calf.register_env(pyenv_envs.make_corridor, name="py:nolimit")


def test_factory_exception_is_an_env_error():
    def broken():
        raise OSError("no such simulator")

    with pytest.raises(calf.EnvError, match="factory raised OSError: no such simulator"):
        calf.register_env(broken, name="py:broken", max_episode_steps=5)


def test_each_env_is_seeded_once_with_seed_plus_index(tmp_path):
    del pyenv_envs.SEEDS[:]
    metrics = train(tmp_path / "r", 3)
    assert metrics[-1]["env_steps"] == 3 * 16 * E
    seeded = [s for s in pyenv_envs.SEEDS if s is not None]
    seed = 1  # ppo_cartpole.gin's TrainerConfig.random_seed
    # training envs 0..E-1 first, then the evaluation envs (index 2^40 + k)
    assert seeded[:E] == [seed + i for i in range(E)]
    assert seeded[E:] == [seed + 2**40 + k for k in range(len(seeded) - E)]
    assert len(seeded) > E  # iteration 3 evaluated
    # every later reset is unseeded: one per episode ended in training (and evaluation)
    ended = sum(m["episodes"] for m in metrics)
    assert ended > 0 and pyenv_envs.SEEDS.count(None) >= ended


def test_runs_are_deterministic_and_resume_exact(tmp_path):
    train(tmp_path / "a", 6)
    train(tmp_path / "b", 6)
    train(tmp_path / "c", 3)
    train(tmp_path / "c", 6)  # resumed from ckpt-3
    for n in (3, 6):
        assert filecmp.cmp(ckpt(tmp_path / "a", n), ckpt(tmp_path / "b", n), shallow=False)
        assert filecmp.cmp(ckpt(tmp_path / "a", n), ckpt(tmp_path / "c", n), shallow=False)
    # the checkpoint holds each env's pickle, mid-episode
    data = ckpt(tmp_path / "a", 6).read_bytes()
    assert data.count(b"CPY2") == E
    assert b"pyenv_envs" in data and b"Corridor" in data


def test_sac_on_a_continuous_python_env_resumes_exactly(tmp_path):
    overrides = {
        "TrainerConfig.initial_collect_steps": 50,
        "TrainerConfig.num_env_steps": 0,
        "TrainerConfig.num_checkpoints": 4,
        "TrainerConfig.eval_interval": 100,
        "TrainerConfig.num_eval_episodes": 1,
        "TrainerConfig.summary_interval": 20,
    }
    train(tmp_path / "a", 120, SWING, SAC, overrides)
    train(tmp_path / "b", 60, SWING, SAC, overrides)
    train(tmp_path / "b", 120, SWING, SAC, overrides)
    assert filecmp.cmp(ckpt(tmp_path / "a", 120), ckpt(tmp_path / "b", 120), shallow=False)


def test_unpicklable_env_restarts_its_episodes_on_resume(tmp_path, capfd):
    name = calf.register_env(pyenv_envs.make_unpicklable, max_episode_steps=60)
    assert "cannot be pickled" in capfd.readouterr().err
    train(tmp_path / "u", 2, name)
    assert ckpt(tmp_path / "u", 2).read_bytes().count(b"CPY2\xff\xff\xff\xff") == E
    capfd.readouterr()
    metrics = train(tmp_path / "u", 4, name)
    err = capfd.readouterr().err
    assert err.count("the checkpoint holds no state for it") == E
    assert "env 0 (py:pyenv_envs:make_unpicklable)" in err
    assert metrics[-1]["iteration"] == 4


FAULTY = calf.register_env(pyenv_envs.make_faulty, max_episode_steps=60)


@pytest.mark.parametrize(
    "mode, message",
    [
        (None, "raised ValueError: corridor broke at step"),
        ("shape", "returned an observation of 1 dimension (first 3), not shape (2,)"),
        ("nan", "returned a non-finite observation (obs[0] = nan)"),
        ("tuple", "returned something other than Gymnasium's 5-tuple"),
    ],
)
def test_env_failures_stop_the_run_naming_the_env(tmp_path, mode, message):
    index = 5
    pyenv_envs.Faulty.target_seed, pyenv_envs.Faulty.mode = 1 + index, mode
    root = tmp_path / "f"
    with pytest.raises(calf.EnvError if mode is None else ValueError) as e:
        train(root, 3, FAULTY)  # iteration 1 ends at step 16, the fault comes at 20
    msg = str(e.value)
    assert f"environment {FAULTY}, env index {index}: step " in msg
    assert message in msg and "the environment is at fault" in msg
    if mode is None:
        assert isinstance(e.value.__cause__, ValueError)
        assert "pyenv_envs.py:" in msg  # where it was raised
        tb = "".join(traceback.format_tb(e.value.__cause__.__traceback__))
        assert "raise ValueError" in tb and "in step" in tb
    # the last checkpoint stays: the run's policy loads from it
    names = sorted(p.name for p in (root / "train" / "algorithm").iterdir() if p.name.startswith("ckpt-"))
    assert names == ["ckpt-1"]
    pol = calf.load_policy(root)
    assert pol.checkpoint.endswith("ckpt-1")
    assert pol(np.zeros((3, 2), np.float32)).shape == (3,)


REPLAY = {
    "TrainerConfig.initial_collect_steps": 40,
    "TrainerConfig.num_env_steps": 0,
    "TrainerConfig.num_checkpoints": 2,
    "TrainerConfig.eval_interval": 1000,
    "TrainerConfig.num_eval_episodes": 1,
    "TrainerConfig.summary_interval": 20,
    "TrainerConfig.mini_batch_size": 32,
}


@pytest.mark.parametrize(
    "example, env, iterations",
    [("td3_pendulum.gin", SWING, 100), ("ddpg_pendulum.gin", SWING, 100),
     ("dqn_cartpole.gin", CORRIDOR, 12)],
)
def test_every_replay_algorithm_trains_a_python_env_and_resumes_exactly(
        tmp_path, example, env, iterations):
    conf = SRC / "examples" / example
    train(tmp_path / "a", iterations, env, conf, REPLAY)
    # the same run stopped half-way (schedules span the whole run: DQN's epsilon)
    train(tmp_path / "b", iterations, env, conf, REPLAY, stop=iterations // 2)
    train(tmp_path / "b", iterations, env, conf, REPLAY)
    assert filecmp.cmp(ckpt(tmp_path / "a", iterations), ckpt(tmp_path / "b", iterations),
                       shallow=False)
    pol = calf.load_policy(tmp_path / "a")
    assert pol.env_name == env
