"""calf.make_vec of an image env gives Gymnasium's observation space and arrays: MinAtar's
games (obs_shape (10, 10, C), uint8 in the env spec) as Box(0, obs_high, (10, 10, C),
uint8) and (N, 10, 10, C) uint8 observations, final observations included, read as bytes
(the games write them so) and holding the floats calf's C vector env writes when read as
floats; a Python env's Box in its own shape and dtype."""

from __future__ import annotations

import os
import sys

import numpy as np

import calf
from calf import _calf

sys.path.insert(0, os.path.dirname(__file__))
import pyenv_image_envs as im  # noqa: E402

N = 3


def test_minatar_observations_are_uint8_images_of_the_floats_calf_writes():
    name = "MinAtar/Breakout-v0"
    with calf.make_vec(name, N, seed=2) as v:
        space = v.single_observation_space
        assert space.shape == (10, 10, 4) and space.dtype == np.uint8
        assert int(space.low.min()) == 0 and int(space.high.max()) == 1
        assert v.observation_space.shape == (N, 10, 10, 4)
        assert v.observation_space.dtype == np.uint8
        assert v._raw.obs_high == 1  # make_vec reads the bytes the games write
        raw = _calf.VecEnv(name, N, 2, 0, None)  # the C block read as float rows
        want = np.empty((N, v.obs_dim), np.float32)
        raw.reset(want)
        obs, _ = v.reset()
        assert obs.shape == (N, 10, 10, 4) and obs.dtype == np.uint8 and obs.sum() > 0
        assert np.array_equal(obs.reshape(N, -1).astype(np.float32), want)
        rng = np.random.default_rng(0)
        ended = 0
        r2, t2, u2 = np.empty(N), np.empty(N, bool), np.empty(N, bool)
        final = np.empty((N, v.obs_dim), np.float32)
        for _ in range(300):  # long enough for Breakout episodes to end (a random paddle)
            a = rng.integers(6, size=N)
            obs, rew, term, trunc, infos = v.step(a)
            raw.step(a.astype(np.int32), want, r2, t2, u2, final)
            assert obs.dtype == np.uint8 and obs.shape == (N, 10, 10, 4)
            assert np.array_equal(obs.reshape(N, -1).astype(np.float32), want)
            assert np.array_equal(rew, r2) and np.array_equal(term, t2)
            for i in np.flatnonzero(infos.get("_final_obs", [])):
                f = infos["final_obs"][i]
                assert f.shape == (10, 10, 4) and f.dtype == np.uint8
                assert np.array_equal(f.reshape(-1).astype(np.float32), final[i])
                ended += 1
        assert ended > 0
        raw.close()


def test_the_raw_block_reads_a_uint8_envs_bytes_into_uint8_arrays():
    name = "MinAtar/SpaceInvaders-v1"
    fl, by = _calf.VecEnv(name, N, 5, 1, None), _calf.VecEnv(name, N, 5, 1, None)
    fo, bo = np.empty((N, fl.obs_dim), np.float32), np.empty((N, by.obs_dim), np.uint8)
    fl.reset(fo)
    by.reset(bo)
    assert np.array_equal(bo.astype(np.float32), fo)
    ff, bf = np.empty_like(fo), np.empty_like(bo)
    r, t, u = np.empty(N), np.empty(N, bool), np.empty(N, bool)
    r8, t8, u8 = np.empty(N), np.empty(N, bool), np.empty(N, bool)
    for k in range(200):
        a = np.full(N, k % 4, np.int32)
        fl.step(a, fo, r, t, u, ff)
        by.step(a, bo, r8, t8, u8, bf)
        assert np.array_equal(bo.astype(np.float32), fo)
        assert np.array_equal(bf.astype(np.float32), ff)
        assert np.array_equal(r, r8) and np.array_equal(t, t8)
    fl.close()
    by.close()
    cp = _calf.VecEnv("CartPole-v1", N, 5, 0, None)
    assert cp.obs_high == 0
    with __import__("pytest").raises(TypeError, match="float32"):
        cp.reset(np.empty((N, cp.obs_dim), np.uint8))  # a float env's rows are floats
    cp.close()


def _flat_painter():
    env = im.Painter(flat=True)  # its images as (6, 15) rows: a rank-2 uint8 Box
    env.observation_space = calf.Box(0, 255, (6, 15), np.uint8)
    return env


def test_a_python_envs_box_comes_back_in_its_own_shape_and_dtype():
    flat = calf.register_env(_flat_painter, name="py:painter_rows",
                             max_episode_steps=40)
    for name, shape in ((calf.register_env(im.make_painter, max_episode_steps=40), (6, 5, 3)),
                        (flat, (6, 15))):
        with calf.make_vec(name, 2, seed=5) as v:
            assert v.single_observation_space.shape == shape
            assert v.single_observation_space.dtype == np.uint8
            obs, _ = v.reset()
            want = np.stack([im.Painter(flat=shape == (6, 15)).reset(seed=5 + i)[0]
                             for i in range(2)])
            assert obs.dtype == np.uint8 and np.array_equal(obs, want)
    # a float env is as it was: (N, obs_dim) float32
    with calf.make_vec("CartPole-v1", 2) as v:
        obs, _ = v.reset()
        assert obs.shape == (2, 4) and obs.dtype == np.float32
        assert v.single_observation_space.shape == (4,)
