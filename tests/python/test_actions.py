"""Action masks and MultiDiscrete actions of Python envs (calf.register_env) and of calf's
own handles (calf.VecEnv, calf.load_policy).

The masked envs raise when they are stepped with an action their mask forbids, so a run
that finishes proves that no invalid action was ever taken, exploring (PPO's samples, DQN's
epsilon draws) or greedy (evaluation). The mask comes from ``info["action_mask"]`` or from
an ``action_mask`` key of a Dict observation, which wins when an env gives both (shown by
an env whose two masks disagree); a resume is exact (the last mask is in the checkpoint).
"""

from __future__ import annotations

import filecmp
import os
import pathlib
import sys

import numpy as np
import pytest

import calf

sys.path.insert(0, os.path.dirname(__file__))
from calf_runs import checkpoint_path as ckpt  # noqa: E402

SRC = pathlib.Path(__file__).resolve().parents[2]
PPO = SRC / "examples" / "ppo_cartpole.gin"
DQN = SRC / "examples" / "dqn_cartpole.gin"
E = 4
OVERRIDES = {
    "create_environment.num_parallel_environments": E,
    "TrainerConfig.unroll_length": 16,
    "TrainerConfig.mini_batch_size": 32,
    "TrainerConfig.num_checkpoints": 4,
    "TrainerConfig.eval_interval": 2,
    "TrainerConfig.num_eval_episodes": 2,
    "Adam.lr_schedule": "constant",
}


class Dict:
    """The least of Gymnasium's Dict space calf reads: its class name and ``spaces``."""

    def __init__(self, spaces):
        self.spaces = dict(spaces)


class Choice:
    """Each step a target among 4 actions is shown; taking it pays 1. Action 3 is never
    valid and one other action is blocked each step. ``where``: the mask in "info", in
    the observation dict ("obs"), or in both, disagreeing ("both": the observation's
    blocks what info allows and the other way round), or in a Dict of two more keys
    ("parts": the mask key first, then "goal" (3,) and "time" (1,), the two flattened
    and the mask not; no key is also an attribute's name, whose shared string would pickle
    otherwise after a resume). Stepping an action the observation's
    (else info's) mask forbids raises. Episodes of 12 steps."""

    def __init__(self, where: str = "info") -> None:
        box = calf.Box(0.0, 1.0, (4,), np.float32)
        self.where = where
        mask = calf.Box(0, 1, (4,), np.int8)
        self.observation_space = (
            box if where == "info" else
            Dict({"action_mask": mask, "goal": calf.Box(0.0, 1.0, (3,), np.float32),
                  "time": calf.Box(0.0, 1.0, (1,), np.float32)}) if where == "parts" else
            Dict({"observation": box, "action_mask": mask}))
        self.action_space = calf.Discrete(4)
        self.rng = None
        self.target = self.blocked = self.t = 0

    def _draw(self):
        self.target = int(self.rng.integers(3))
        self.blocked = (self.target + 1 + int(self.rng.integers(2))) % 3

    def _mask(self, blocked):
        return np.array([j != blocked and j != 3 for j in range(4)], dtype=np.int8)

    def _out(self):
        obs = np.eye(4, dtype=np.float32)[self.target]
        obs[3] = self.t / 12
        mask = self._mask(self.blocked)
        other = self._mask((self.blocked + 1) % 3 if (self.blocked + 1) % 3 != self.target
                           else (self.blocked + 2) % 3)
        if self.where == "info":
            return obs, {"action_mask": mask}
        if self.where == "obs":
            return {"observation": obs, "action_mask": mask}, {}
        if self.where == "parts":
            return {"action_mask": mask, "goal": obs[:3], "time": obs[3:]}, {}
        return {"observation": obs, "action_mask": mask}, {"action_mask": other}

    def reset(self, seed=None, options=None):
        if seed is not None or self.rng is None:
            self.rng = np.random.default_rng(seed)
        self.t = 0
        self._draw()
        return self._out()

    def step(self, action):
        a = int(action)
        if a == 3 or a == self.blocked:
            raise ValueError(f"invalid action {a} taken (blocked {self.blocked})")
        reward = 1.0 if a == self.target else 0.0
        self.t += 1
        self._draw()
        obs, info = self._out()
        return obs, reward, self.t >= 12, False, info

    def close(self):
        pass


class Multi:
    """MultiDiscrete (3, 2): targets for both sub-actions, one point for each hit; with
    ``masked``, choice 2 of the first is never valid (a tuple of per-sub-action masks, as
    Gymnasium's MultiDiscrete takes them) and raises when taken."""

    def __init__(self, masked: bool = False) -> None:
        self.masked = masked
        self.observation_space = calf.Box(0.0, 1.0, (5,), np.float32)
        self.action_space = calf.MultiDiscrete([3, 2])
        self.rng = None
        self.target = (0, 0)
        self.t = 0

    def _out(self):
        obs = np.zeros(5, dtype=np.float32)
        obs[self.target[0]] = 1
        obs[2 + self.target[1]] = 1
        obs[4] = self.t / 12
        info = {"action_mask": (np.array([1, 1, 0], np.int8), np.ones(2, np.int8))}
        return obs, info if self.masked else {}

    def reset(self, seed=None, options=None):
        if seed is not None or self.rng is None:
            self.rng = np.random.default_rng(seed)
        self.t = 0
        self.target = (int(self.rng.integers(2)), int(self.rng.integers(2)))
        return self._out()

    def step(self, action):
        a = np.asarray(action)
        assert a.shape == (2,) and a.dtype == np.int64, (a.shape, a.dtype)
        if self.masked and a[0] == 2:
            raise ValueError("invalid first sub-action 2 taken")
        reward = float(a[0] == self.target[0]) + float(a[1] == self.target[1])
        self.t += 1
        self.target = (int(self.rng.integers(2)), int(self.rng.integers(2)))
        obs, info = self._out()
        return obs, reward, self.t >= 12, False, info

    def close(self):
        pass


def make_info():
    return Choice("info")


def make_obs():
    return Choice("obs")


def make_both():
    return Choice("both")


def make_parts():
    return Choice("parts")


def make_multi():
    return Multi()


def make_masked_multi():
    return Multi(masked=True)


def train(root, iterations, env, conf=PPO, overrides=OVERRIDES, stop=None):
    with calf.Trainer(conf, root_dir=root, env=env,
                      overrides={**overrides, "TrainerConfig.num_iterations": iterations}) as t:
        metrics = [t.step() for _ in range((stop or iterations) - t.iteration)]
        if stop:
            t.checkpoint()
    return metrics


@pytest.mark.parametrize("factory", [make_info, make_obs, make_both, make_parts])
def test_masked_python_env_never_steps_an_invalid_action_and_resumes_exactly(tmp_path, factory):
    env = calf.register_env(factory)
    metrics = train(tmp_path / "a", 8, env)
    assert all(m["episodes"] >= 0 for m in metrics)
    train(tmp_path / "b", 4, env)
    train(tmp_path / "b", 8, env)  # resumed from ckpt-4: the masks came back with the envs
    assert filecmp.cmp(ckpt(tmp_path / "a", 8), ckpt(tmp_path / "b", 8), shallow=False)
    # the greedy policy, given the env's masks, picks only valid actions
    pol = calf.load_policy(tmp_path / "a", env=factory)
    assert pol.masked and pol.num_actions == 4
    obs = np.eye(4, dtype=np.float32)[[0, 1, 2, 0]]
    mask = np.array([[1, 0, 0, 0], [0, 0, 1, 0], [1, 1, 1, 0], [0, 1, 0, 0]], dtype=bool)
    acts = pol(obs, action_mask=mask)
    assert acts.dtype == np.int64
    assert all(mask[r, a] for r, a in enumerate(acts))
    assert acts[0] == 0 and acts[1] == 2 and acts[3] == 1
    assert pol(obs[0], action_mask=mask[0]) == 0
    with pytest.raises(ValueError, match="allows no action"):
        pol(obs, action_mask=np.zeros((4, 4), dtype=bool))


def test_a_dicts_action_mask_key_is_the_mask_and_its_other_keys_the_observation():
    # the mask key is left out of the observation: goal (3,) then time (1,)
    env = calf.register_env(make_parts)
    with calf.make_vec(env, 2, seed=3) as v:
        obs, infos = v.reset()
        assert list(obs) == ["goal", "time"]
        assert obs["goal"].shape == (2, 3) and obs["time"].shape == (2, 1)
        want = [Choice("parts").reset(seed=3 + i) for i in range(2)]
        for key in ("goal", "time"):
            assert np.array_equal(obs[key], np.stack([o[key] for o, _info in want]))
        assert np.array_equal(infos["action_mask"],
                              np.stack([o["action_mask"] for o, _info in want]).astype(bool))


def test_dqn_on_a_masked_python_env_explores_and_acts_only_validly(tmp_path):
    env = calf.register_env(make_info)
    overrides = {
        "create_environment.num_parallel_environments": 2,
        "TrainerConfig.initial_collect_steps": 40,
        "TrainerConfig.num_env_steps": 0,
        "TrainerConfig.num_checkpoints": 1,
        "TrainerConfig.evaluate": True,
        "TrainerConfig.eval_interval": 10,
        "TrainerConfig.num_eval_episodes": 2,
    }
    train(tmp_path / "dqn", 30, env, DQN, overrides)


def test_multidiscrete_python_env_trains_resumes_and_acts(tmp_path):
    for factory in (make_multi, make_masked_multi):
        env = calf.register_env(factory)
        train(tmp_path / f"a{factory.__name__}", 6, env)
        train(tmp_path / f"b{factory.__name__}", 3, env)
        train(tmp_path / f"b{factory.__name__}", 6, env)
        assert filecmp.cmp(ckpt(tmp_path / f"a{factory.__name__}", 6),
                           ckpt(tmp_path / f"b{factory.__name__}", 6), shallow=False)
        pol = calf.load_policy(tmp_path / f"a{factory.__name__}", env=factory)
        assert pol.action_dims == 2 and list(pol.action_nvec) == [3, 2]
        acts = pol(np.zeros((3, 5), dtype=np.float32))
        assert acts.shape == (3, 2) and acts.dtype == np.int64
        assert np.all(acts >= 0) and np.all(acts < [3, 2])
        # first sub-action 2 masked out: never chosen
        mask = np.array([[0, 0, 1, 1, 1]] * 3, dtype=bool)
        assert np.all(pol(np.zeros((3, 5), np.float32), action_mask=mask)[:, 0] == 2)


def test_vec_env_gives_multidiscrete_spaces_and_masks_in_infos():
    env = calf.register_env(make_masked_multi)
    with calf.make_vec(env, 3, seed=5) as v:
        assert v.single_action_space.shape == (2,)
        assert list(v.single_action_space.nvec) == [3, 2]
        obs, infos = v.reset()
        assert infos["action_mask"].shape == (3, 5) and infos["action_mask"].dtype == bool
        assert infos["action_mask"][:, 2].sum() == 0 and infos["_action_mask"].all()
        obs, rew, term, trunc, infos = v.step(np.array([[0, 1], [1, 0], [0, 0]]))
        assert rew.shape == (3,) and infos["action_mask"].shape == (3, 5)
        with pytest.raises(ValueError, match="shape"):
            v.step(np.zeros(3, dtype=np.int64))
        with pytest.raises(ValueError, match=r"sub-action 1 of row 0 \(env index 0\) is 2, not in 0..1"):
            v.step(np.array([[0, 2], [0, 0], [0, 0]]))


def test_sac_refuses_a_masked_env_and_dqn_a_multidiscrete_one(tmp_path):
    masked = calf.register_env(make_info)
    with pytest.raises(ValueError, match="SacAlgorithm cannot train with an action mask"):
        train(tmp_path / "sac", 2, masked, SRC / "examples" / "sac_cartpole.gin", {})
    multi = calf.register_env(make_multi)
    with pytest.raises(ValueError, match="DqnAlgorithm cannot train a MultiDiscrete"):
        train(tmp_path / "dqn", 2, multi, DQN, {"TrainerConfig.num_env_steps": 0})
