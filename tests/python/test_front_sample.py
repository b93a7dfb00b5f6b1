"""Sampling a trained policy: ``pol(obs, deterministic=False, seed=...)`` draws from the
policy's distribution (calf_policy_sample), row r from calf's stream (seed, r).

The values are checked on policies whose distribution is known exactly: PPO trained with
learning rate 0 keeps its initial networks, whose biases are 0, so on an all-zero
observation its logits are 0 (CartPole: each action 1/2) and its Gaussian's mean is 0
with the configured init_log_std (Pendulum). Each statistical check is run on the greedy
actions too (a sampler that forgot to sample) and must reject them.
"""

from __future__ import annotations

import math
import pathlib

import numpy as np
import pytest

import calf

N = 20_000  # rows of one call: each its own stream
LOG_STD = -0.5


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pathlib.Path]:
    base = tmp_path_factory.mktemp("runs")
    small = dict(n_envs=4, n_steps=8, batch_size=32, n_epochs=1, quiet=True, seed=1)
    calf.train(algorithm="ppo", env="CartPole-v1", total_timesteps=32, learning_rate=0.0,
               root_dir=base / "cartpole0", **small)
    calf.train(algorithm="ppo", env="Pendulum-v1", total_timesteps=32, learning_rate=0.0,
               root_dir=base / "pendulum0", **small,
               **{"ActorDistributionNetwork.init_log_std": LOG_STD})
    off = dict(n_envs=1, n_steps=1, batch_size=16, learning_starts=50, quiet=True, seed=1)
    calf.train(algorithm="sac", env="Pendulum-v1", total_timesteps=100, net_arch=[16],
               root_dir=base / "sac", **off)
    calf.train(algorithm="sac", env="CartPole-v1", total_timesteps=100, net_arch=[16],
               root_dir=base / "sac_discrete", **off)
    calf.train(algorithm="dqn", env="CartPole-v1", total_timesteps=100, net_arch=[16],
               root_dir=base / "dqn", **off)
    return {p.name: p for p in base.iterdir()}


def fair_coin(actions: np.ndarray) -> bool:
    """Whether (N,) draws in {0, 1} look like a fair coin's: within 5 standard deviations
    of N/2 (the draws are fixed by the seed, so this is no flaky test)."""
    ones = int(np.count_nonzero(actions == 1))
    return set(np.unique(actions)) <= {0, 1} and abs(ones - N / 2) < 5 * math.sqrt(N / 4)


def gaussian(u: np.ndarray, std: float) -> bool:
    """Whether (N,) draws look like normal(0, std): mean within 5 standard errors, the
    sample's std within 3%, about 68% within one std."""
    inside = np.count_nonzero(np.abs(u) < std) / u.size
    return (abs(float(u.mean())) < 5 * std / math.sqrt(u.size)
            and abs(float(u.std()) / std - 1) < 0.03 and abs(inside - 0.6827) < 0.02)


def test_discrete_frequencies(runs: dict[str, pathlib.Path]) -> None:
    with calf.load_policy(runs["cartpole0"]) as pol:
        assert pol.stochastic
        zeros = np.zeros((N, pol.obs_dim), dtype=np.float32)
        a = pol(zeros, deterministic=False, seed=7)
        assert a.shape == (N,) and a.dtype == np.int64
        assert fair_coin(a)
        # planted: the greedy actions (a sampler that forgot to sample) are rejected
        assert not fair_coin(pol(zeros))
        # among the actions a mask allows (the greedy action 0 masked out: always 1)
        only1 = np.tile(np.array([0, 1], dtype=np.uint8), (N, 1))
        assert np.all(pol(zeros, only1, deterministic=False, seed=7) == 1)
        half = np.tile(np.array([1, 1], dtype=np.uint8), (N, 1))
        assert np.array_equal(pol(zeros, half, deterministic=False, seed=7), a)


def test_continuous_moments(runs: dict[str, pathlib.Path]) -> None:
    with calf.load_policy(runs["pendulum0"]) as pol:
        zeros = np.zeros((N, pol.obs_dim), dtype=np.float32)
        assert np.all(pol(zeros) == 0.0)  # the mean: biases 0, tanh(0) = 0
        u = pol(zeros, deterministic=False, seed=7)
        assert u.shape == (N, 1) and u.dtype == np.float32
        assert gaussian(u[:, 0], math.exp(LOG_STD))
        # planted: the greedy actions, and draws of the wrong spread, are rejected
        assert not gaussian(pol(zeros)[:, 0], math.exp(LOG_STD))
        assert not gaussian(u[:, 0], math.exp(LOG_STD) * 1.05)


@pytest.mark.parametrize("run", ["cartpole0", "pendulum0", "sac", "sac_discrete"])
def test_seeds(runs: dict[str, pathlib.Path], run: str) -> None:
    with calf.load_policy(runs[run]) as pol:
        obs = np.random.default_rng(0).normal(size=(64, pol.obs_dim)).astype(np.float32)
        first = pol(obs, deterministic=False, seed=3)
        assert np.array_equal(pol(obs, deterministic=False, seed=3), first)  # the same seed
        assert not np.array_equal(pol(obs, deterministic=False, seed=4), first)
        # seed=None goes on from the last draws; seeding again starts over
        pol(obs, deterministic=False, seed=3)
        assert not np.array_equal(pol(obs, deterministic=False), first)
        assert np.array_equal(pol(obs, deterministic=False, seed=3), first)
        # row r draws from stream r: the first rows of a batch are a shorter batch's
        assert np.array_equal(pol(obs[:5], deterministic=False, seed=3), first[:5])
        assert np.array_equal(pol(obs[0], deterministic=False, seed=3), first[0])  # one row
        assert not np.array_equal(first, pol(obs))  # draws, not the greedy actions


def test_sampled_sac_within_bounds(runs: dict[str, pathlib.Path]) -> None:
    with calf.load_policy(runs["sac"]) as pol:
        obs = np.random.default_rng(1).normal(size=(N, pol.obs_dim)).astype(np.float32)
        u = pol(obs, deterministic=False, seed=1)
        assert np.all(np.abs(u) <= 2.0) and float(u.std()) > 0.05


def test_deterministic_policy(runs: dict[str, pathlib.Path]) -> None:
    # DQN's policy is the argmax of Q: its samples are its greedy actions
    with calf.load_policy(runs["dqn"]) as pol:
        assert not pol.stochastic
        obs = np.random.default_rng(0).normal(size=(64, pol.obs_dim)).astype(np.float32)
        assert np.array_equal(pol(obs, deterministic=False, seed=3), pol(obs))


def test_arguments(runs: dict[str, pathlib.Path]) -> None:
    with calf.load_policy(runs["cartpole0"]) as pol:
        obs = np.zeros((2, pol.obs_dim), dtype=np.float32)
        with pytest.raises(ValueError, match="seed= is for sampling"):
            pol(obs, seed=1)
        with pytest.raises(ValueError, match="out of range"):
            pol(obs, deterministic=False, seed=-1)
        with pytest.raises(TypeError, match="seed must be an integer"):
            pol(obs, deterministic=False, seed=1.5)
        pol(obs, deterministic=False, seed=2**64 - 1)  # the whole range
    with pytest.raises(ValueError, match="closed"):
        pol(obs, deterministic=False)
