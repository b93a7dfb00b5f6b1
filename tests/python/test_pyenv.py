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
import re
import subprocess
import sys
import traceback

import numpy as np
import pytest

import calf

sys.path.insert(0, os.path.dirname(__file__))
import pyenv_envs  # noqa: E402
from calf_runs import checkpoint_path as ckpt  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
SRC = HERE.parents[1]
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
    "Adam.lr_schedule": "constant",  # a resume to a longer run continues it exactly
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
        (_Space("Tuple"), calf.Discrete(2), "observation_space Tuple"),
        (calf.Box(-1, 1, (2,), np.float32), calf.MultiDiscrete([[2, 2], [2, 2]]),
         "action_space MultiDiscrete"),
        (calf.Box(-1, 1, (2,), np.float32), calf.Box(-np.inf, np.inf, (1,), np.float32),
         "bounds must be finite"),
        (calf.Box(-1, 1, (2,), np.float32), calf.Box(-1, 1, (2, 1), np.float32), "action_space Box"),
        (_Space("Dict"), calf.Discrete(2), "observation_space Dict"),
    ],
)
def test_unsupported_spaces_are_refused(obs, act, what):
    with pytest.raises(ValueError, match=what) as e:
        calf.register_env(lambda: _Env(obs, act), name="py:bad", max_episode_steps=10)
    assert "calf trains envs with a Box observation space (any rank" in str(e.value)


def test_no_time_limit_is_the_envs_own():
    # an env without spec.max_episode_steps trains as it is: its own truncation ends its
    # episodes (evaluation caps them at TrainerConfig.eval_max_episode_steps)
    name = calf.register_env(pyenv_envs.make_corridor, name="py:nolimit")
    v = calf.make_vec(name, 1)
    assert v.max_episode_steps == 2**31 - 1
    v.close()
    with pytest.raises(ValueError, match=r"max_episode_steps 0 not in \[1, 2\^31\)"):
        calf.register_env(pyenv_envs.make_corridor, name="py:nolimit", max_episode_steps=0)


class _NoClose:
    """A Gymnasium-API env without close(), which Gymnasium's Env does not require."""

    def __init__(self):
        self.observation_space = calf.Box(-1, 1, (2,), np.float32)
        self.action_space = calf.Discrete(2)

    def reset(self, seed=None, options=None):
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), 0.0, False, False, {}


def test_an_env_without_close_is_fine(capfd):
    name = calf.register_env(_NoClose, name="py:noclose", max_episode_steps=5)
    v = calf.make_vec(name, 3)
    v.reset()
    v.close()
    assert "close()" not in capfd.readouterr().err


@pytest.mark.parametrize(
    "obs, act, printed",
    [
        (_Space("Graph"), calf.Discrete(2), "observation_space Graph is not supported"),
        (calf.Box(-1, 1, (2,), np.float32), calf.MultiDiscrete([2, 0]),
         "action_space MultiDiscrete([2 0]) is not supported"),
        (None, calf.Discrete(2), "observation_space None is not supported"),
    ],
)
def test_spaces_print_as_gymnasium_prints_them(obs, act, printed):
    with pytest.raises(ValueError) as e:
        calf.register_env(lambda: _Env(obs, act), name="py:bad", max_episode_steps=10)
    assert printed in str(e.value)
    assert "DictNone" not in str(e.value) and "MultiDiscrete(2,)" not in str(e.value)


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


def test_a_nan_in_one_env_loses_no_envs_step():
    """VecEnv.step raises for env 1's NaN, and the exception holds every env's results of
    that step: env 0's episode ended there (its reward, termination and final
    observation) and env 2 went on."""
    name = calf.register_env(pyenv_envs.make_clock, max_episode_steps=60, quiet=True)
    envs = calf.make_vec(name, 3, seed=0)
    envs.reset(seed=0)
    for _ in range(2):
        envs.step(np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match="env index 1: step 3") as e:
        envs.step(np.zeros(3, dtype=np.int64))
    obs, rewards, term, trunc, infos = e.value.results
    assert rewards[0] == 3.0 and rewards[2] == 23.0
    assert term.tolist() == [True, False, False] and not trunc.any()
    assert infos["_final_obs"].tolist() == [True, False, False]
    assert infos["final_obs"][0].tolist() == [3.0, 0.0] and infos["final_obs"][2] is None
    assert obs[0].tolist() == [0.0, 0.0] and obs[2].tolist() == [3.0, 2.0]
    assert np.isnan(obs[1, 0])
    envs.close()


def test_a_pickle_that_outgrows_its_slot_says_the_env_the_sizes_and_the_remedy(tmp_path, capfd):
    name = calf.register_env(pyenv_envs.make_growing, max_episode_steps=60, state_bytes=4096)
    capfd.readouterr()
    train(tmp_path / "g", 1, name)
    err = capfd.readouterr().err
    assert "calf: env 0 (py:pyenv_envs:make_growing): its pickle (" in err
    assert ("bytes) outgrew the 4056 bytes its checkpoint slot holds, so checkpoints do not "
            "hold its state and a resume starts a new episode there; a run started with "
            "register_env(state_bytes=") in err and "--env_py_state_bytes" in err
    train(tmp_path / "g", 2, name)
    err = capfd.readouterr().err
    assert "env 0 (py:pyenv_envs:make_growing): the checkpoint holds no state for it (its " \
        "pickle, " in err
    assert "bytes, outgrew the 4056 bytes of its slot); it starts a new episode (a run " \
        "started with register_env(state_bytes=" in err
    assert "could not be pickled" not in err


def test_a_grown_fresh_pickle_names_the_state_bytes_that_resume(tmp_path):
    """A new version of an env's code pickles larger, so register_env sizes its slot
    otherwise: the resume names the env, both sizes and the state_bytes that resume it,
    and that resumes it."""
    root = tmp_path / "p"
    args = ["train", "--env_py", "pyenv_envs:make_padded", "--env_py_max_episode_steps", "60",
            "--conf", str(PPO), "--root_dir", str(root), "--quiet"]
    for k, v in {**PPO_OVERRIDES, "TrainerConfig.num_iterations": 1}.items():
        args += ["--conf_param", f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}"]

    def run(*more, size):
        environ = {**os.environ, "PADDED_SIZE": str(size),
                   "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
        return subprocess.run([sys.executable, "-m", "calf", *args, *more], capture_output=True,
                              text=True, env=environ, timeout=600)

    assert run(size=1000).returncode == 0
    args[args.index("TrainerConfig.num_iterations=1")] = "TrainerConfig.num_iterations=2"
    r = run(size=3000)
    assert r.returncode == 2
    m = re.search(r"env record size \d+, this run's \d+: environment py:pyenv_envs:make_padded "
                  r"saves (\d+) bytes of state per env now, the checkpoint's records hold (\d+) "
                  r"\(a Python env's room is sized from a fresh pickle unless given: resume with "
                  r"register_env\(state_bytes=(\d+)\) or --env_py_state_bytes (\d+)\)", r.stderr)
    assert m, r.stderr
    now, theirs = int(m[1]), int(m[2])
    assert now > theirs and m[3] == m[4] == str(theirs)
    r = run("--env_py_state_bytes", str(theirs), size=3000)
    assert r.returncode == 0, r.stderr
    assert ckpt(root, 2).exists()


def test_a_set_of_strings_in_the_pickle_is_said_to_make_runs_differ(capfd):
    """A set of strings pickles in hash order, salted per process: two processes pickle
    the same Tagged state to different bytes unless PYTHONHASHSEED is fixed, and
    register_env says so (for no other env here)."""
    capfd.readouterr()
    calf.register_env(pyenv_envs.make_tagged, max_episode_steps=60)
    calf.register_env(pyenv_envs.make_corridor, name="py:corridor-again", max_episode_steps=60)
    err = capfd.readouterr().err
    assert err.count("pickles a set") == 1
    assert ("calf: env py:pyenv_envs:make_tagged pickles a set of strings or objects, whose "
            "order follows this process's hashing: identical runs can write different "
            "checkpoints (run with PYTHONHASHSEED=0") in err

    def pickled(seed):
        probe = ("import pickle, sys, pyenv_envs, calf; e = pyenv_envs.make_tagged(); "
                 "e.reset(seed=0); sys.stdout.write(pickle.dumps(e, protocol=4).hex()); "
                 "calf.register_env(pyenv_envs.make_tagged, max_episode_steps=60)")
        environ = {**os.environ, "PYTHONHASHSEED": seed,
                   "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
        r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           env=environ, timeout=120)
        assert r.returncode == 0, r.stderr
        return r.stdout, r.stderr

    assert len({pickled(str(s))[0] for s in range(1, 7)}) > 1  # what it warns of
    fixed = [pickled("0") for _ in range(2)]
    assert fixed[0][0] == fixed[1][0] and "pickles a set" not in fixed[0][1]
