"""Observation spaces of Python environments (calf.register_env): a Box of any rank
(uint8 images kept as bytes, their shape and dtype in the env spec), a Dict of Boxes
flattened in its key order, and the spaces calf cannot train refused by name, with the
Gymnasium wrapper that makes them trainable where there is one."""

from __future__ import annotations

import filecmp
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import calf
from calf import _calf, _policy

sys.path.insert(0, os.path.dirname(__file__))
import pyenv_image_envs as im  # noqa: E402
from calf_runs import checkpoint_path as ckpt  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
SRC = HERE.parents[1]
PPO = SRC / "examples" / "ppo_cartpole.gin"
DQN = SRC / "examples" / "dqn_cartpole.gin"
OVERRIDES = {
    "create_environment.num_parallel_environments": 4,
    "TrainerConfig.unroll_length": 8,
    "TrainerConfig.mini_batch_size": 16,
    "TrainerConfig.num_updates_per_train_iter": 2,
    "TrainerConfig.num_checkpoints": 3,
    "TrainerConfig.evaluate": False,
    "Adam.lr_schedule": "constant",
}
DQN_OVERRIDES = {
    "create_environment.num_parallel_environments": 2,
    "TrainerConfig.unroll_length": 5,
    "TrainerConfig.initial_collect_steps": 20,
    "TrainerConfig.num_env_steps": 0,
    "TrainerConfig.replay_buffer_length": 30,
    "TrainerConfig.mini_batch_size": 8,
    "TrainerConfig.num_checkpoints": 2,
    "TrainerConfig.evaluate": False,
}

PAINTER = calf.register_env(im.make_painter, max_episode_steps=40)
ROVER = calf.register_env(im.make_rover, max_episode_steps=40)
BYTE_ROVER = calf.register_env(im.make_byte_rover, max_episode_steps=40)


def envs_listing(factory: str) -> str:
    """`python3 -m calf envs --env_py pyenv_image_envs:FACTORY`'s line for the env."""
    env = {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    r = subprocess.run(
        [sys.executable, "-m", "calf", "envs", "--env_py", f"pyenv_image_envs:{factory}",
         "--env_py_max_episode_steps", "40"],
        capture_output=True, text=True, env=env,
    )
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stdout.splitlines() if x.startswith(f"py:pyenv_image_envs:{factory} ")]
    assert len(lines) == 1, r.stdout
    return lines[0]


def test_an_image_box_reaches_the_spec_as_its_shape_and_bytes():
    assert "Box(0, 255, (6, 5, 3), uint8)" in envs_listing("make_painter")
    # the Box's high is the spec's obs_high
    assert "Box(0, 3, (6, 5, 3), uint8)" in envs_listing("make_small_painter")
    # a Dict is one flat vector: bytes when every part is
    assert "Box(-inf, inf, (8,), float32)" in envs_listing("make_rover")
    assert "Box(0, 255, (8,), uint8)" in envs_listing("make_byte_rover")


def test_observations_are_read_in_c_order_and_dict_key_order():
    v = calf.make_vec(PAINTER, 2, seed=5)
    obs, _ = v.reset()
    # make_vec gives the Box as the env does, (6, 5, 3) uint8 (before: (90,) float32 rows)
    want = [im.Painter().reset(seed=5 + i)[0] for i in range(2)]
    assert obs.shape == (2, 6, 5, 3) and obs.dtype == np.uint8
    assert np.array_equal(obs, np.stack(want))
    v.close()
    v = calf.make_vec(ROVER, 2, seed=3)
    obs, _ = v.reset()
    obs, *_ = v.step(np.array([2, 0]))
    # a Dict env's observations are a dict of its parts, each in its Box's shape and
    # dtype, in the Dict's own (sorted) key order: the order calf flattens them in
    assert list(obs) == ["map", "pos"] and list(v.single_observation_space.spaces) == ["map", "pos"]
    assert obs["map"].shape == (2, 2, 3) and obs["map"].dtype == np.uint8
    assert obs["pos"].shape == (2, 2) and obs["pos"].dtype == np.float32
    for i, a in enumerate((2, 0)):
        env = im.Rover()
        env.reset(seed=3 + i)
        o = env.step(a)[0]
        assert np.array_equal(obs["map"][i], o["map"]) and np.array_equal(obs["pos"][i], o["pos"])
        assert v.single_observation_space.contains({k: obs[k][i] for k in obs})
    v.close()


@pytest.mark.parametrize("env", [PAINTER, ROVER, BYTE_ROVER])
def test_image_and_dict_envs_train_deterministically_and_resume_exactly(tmp_path, env):
    def run(root, iterations, stop=None):
        with calf.Trainer(PPO, root_dir=root, env=env,
                          overrides={**OVERRIDES, "TrainerConfig.num_iterations": iterations}) as t:
            for _ in range((stop or iterations) - t.iteration):
                t.step()
            if stop:
                t.checkpoint()

    run(tmp_path / "a", 3)
    run(tmp_path / "b", 3, stop=2)
    run(tmp_path / "b", 3)
    assert filecmp.cmp(ckpt(tmp_path / "a", 3), ckpt(tmp_path / "b", 3), shallow=False)
    # the policy takes the env's own observations, and acts as on the flat float rows the
    # trainer's network read
    make = {PAINTER: im.Painter, ROVER: im.Rover, BYTE_ROVER: im.ByteRover}[env]
    seen = [make().reset(seed=s)[0] for s in range(5)]
    with calf.load_policy(tmp_path / "a") as pol:
        if env == PAINTER:
            obs = np.stack(seen)  # (5, 6, 5, 3) uint8
            rows = obs.reshape(5, -1).astype(np.float32)
            with pytest.raises(ValueError, match=r"must have shape \(B, 6, 5, 3\) or \(6, 5, 3\)"):
                pol(obs[:, :5])
        else:
            obs = {k: np.stack([o[k] for o in seen]) for k in ("pos", "map")}
            rows = np.stack([np.concatenate([o["map"].reshape(-1), o["pos"]]) for o in seen])
            rows = rows.astype(np.float32)
            with pytest.raises(ValueError, match=r"obs\['map'\] must have shape \(B, 2, 3\)"):
                pol({"pos": obs["pos"], "map": obs["map"][:, :1]})
            with pytest.raises(ValueError, match="obs has no key 'map'"):
                pol({"pos": obs["pos"]})
        # the floats handed to calf_policy_greedy are those rows, bit for bit
        got, one = _policy._rows(obs, pol.obs_dim, *pol._form)
        assert not one and got.dtype == np.float32 and got.flags.c_contiguous
        assert got.tobytes() == rows.tobytes()
        acts = pol(obs)
        assert acts.shape == (5,) and np.array_equal(acts, pol(rows))
        assert pol(seen[3]) == acts[3] and pol(rows[3]) == acts[3]


def test_dqn_keeps_an_image_envs_replay_as_bytes(tmp_path):
    def run(root, iterations, stop=None):
        # stop: a checkpoint there, the run planned as long (epsilon's schedule follows it)
        with calf.Trainer(DQN, root_dir=root, env=PAINTER,
                          overrides={**DQN_OVERRIDES, "TrainerConfig.num_iterations": iterations}) as t:
            for _ in range((stop or iterations) - t.iteration):
                t.step()
            if stop:
                t.checkpoint()

    run(tmp_path / "a", 8)
    data = pathlib.Path(ckpt(tmp_path / "a", 8)).read_bytes()
    assert b"RPL8" in data and b"RPE8" in data and b"RPLC" not in data
    run(tmp_path / "b", 8, stop=4)
    run(tmp_path / "b", 8)
    assert filecmp.cmp(ckpt(tmp_path / "a", 8), ckpt(tmp_path / "b", 8), shallow=False)


def test_a_value_outside_the_uint8_box_stops_the_run_naming_the_env(tmp_path):
    name = calf.register_env(im.make_bad_painter, max_episode_steps=40)
    with pytest.raises(ValueError) as e:
        with calf.Trainer(PPO, root_dir=tmp_path / "r", env=name,
                          overrides={**OVERRIDES, "TrainerConfig.num_iterations": 2}) as t:
            t.step()
    msg = str(e.value)
    assert f"environment {name}, env index " in msg
    assert "returned observation value obs[" in msg and "= 7, not an integer 0..3" in msg


class _Env:
    def __init__(self, obs):
        self.observation_space, self.action_space = obs, calf.Discrete(2)

    def reset(self, seed=None, options=None):
        return np.zeros(2), {}

    def close(self):
        pass


class _Flattenable:
    """A space that says, as Gymnasium's do, whether it flattens to a Box."""

    def __init__(self, yes):
        self.is_np_flattenable = yes

    def __repr__(self):
        return "Custom()"


@pytest.mark.parametrize(
    "space, printed, how",
    [
        (im.Tuple((calf.Discrete(2), calf.Box(0, 1, (2,), np.float32))),
         "observation_space Tuple(Discrete(2), Box(0.0, 1.0, (2,), float32)) is not supported",
         "wrap the env in gymnasium.wrappers.FlattenObservation, which makes it a Box"),
        (calf.Discrete(4), "observation_space Discrete(4) is not supported",
         "gymnasium.wrappers.FlattenObservation"),
        (im.Text(), "observation_space Text(1, 8, charset=abc) is not supported",
         "no Gymnasium wrapper makes it a Box"),
        (im.Dict({"a": calf.Discrete(3), "b": calf.Box(0, 1, (2,), np.float32)}),
         "its part 'a' is Discrete(3), not a Box",
         "gymnasium.wrappers.FlattenObservation makes the whole a Box"),
        (_Flattenable(True), "observation_space Custom() is not supported", "FlattenObservation"),
        (_Flattenable(False), "observation_space Custom() is not supported",
         "no Gymnasium wrapper makes it a Box"),
    ],
)
def test_spaces_calf_cannot_train_are_refused_with_the_wrapper(space, printed, how):
    with pytest.raises(ValueError) as e:
        calf.register_env(lambda: _Env(space), name="py:nope", max_episode_steps=10)
    msg = str(e.value)
    assert printed in msg and how in msg, msg
    assert "calf trains envs with a Box observation space (any rank" in msg


def test_an_observation_of_another_shape_is_the_envs_fault(tmp_path):
    class Flat(im.Painter):
        def __init__(self):
            super().__init__(flat=True)

    name = calf.register_env(Flat, name="py:flat_painter", max_episode_steps=40)
    v = calf.make_vec(name, 1)
    with pytest.raises(ValueError, match=r"returned an observation of 2 dimensions \(first 6\), "
                                         r"not shape \(6, 5, 3\)"):
        v.reset()
    v.close()


class _Parts:
    """A Dict observation of ``spaces`` (its parts all zero), two actions, 5 steps."""

    def __init__(self, spaces):
        self.observation_space = im.Dict(spaces)
        self.action_space = calf.Discrete(2)
        self.t = 0

    def _obs(self):
        return {k: np.zeros(b.shape, b.dtype) for k, b in self.observation_space.spaces.items()}

    def reset(self, seed=None, options=None):
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 0.0, False, self.t >= 5, {}


def make_scout():
    """An image part and a vector part, the image first in key order."""
    return _Parts({"image": calf.Box(0, 255, (6, 5, 3), np.uint8),
                   "pos": calf.Box(-1.0, 1.0, (2,), np.float32)})


def make_vectors():
    """Two vector parts: nothing conv layers could read."""
    return _Parts({"a": calf.Box(-1.0, 1.0, (3,), np.float32),
                   "b": calf.Box(0, 9, (2,), np.uint8)})


def test_a_dicts_parts_are_named_in_the_env_spec():
    # (name, (H, W, C) of an image or (n, 0, 0) of a vector, dtype, offset): a rank-2 Box
    # is an image of one channel, as a Box observation of rank 2 is
    assert _calf.obs_form(ROVER)["parts"] == [("map", (2, 3, 1), "uint8", 0),
                                             ("pos", (2, 0, 0), "float32", 6)]
    assert _calf.obs_form(BYTE_ROVER)["parts"] == [("map", (2, 3, 1), "uint8", 0),
                                                  ("pos", (2, 0, 0), "uint8", 6)]
    scout = calf.register_env(make_scout)
    assert _calf.obs_form(scout)["parts"] == [("image", (6, 5, 3), "uint8", 0),
                                             ("pos", (2, 0, 0), "float32", 90)]
    # a Box env and a built-in have none
    assert _calf.obs_form(PAINTER)["parts"] == []
    assert _calf.obs_form("MinAtar/Breakout-v0")["parts"] == []


def test_conv_layers_on_a_dict_without_an_image_are_refused_naming_its_parts(tmp_path):
    conv = {**OVERRIDES, "TrainerConfig.num_iterations": 1,
            "ActorDistributionNetwork.conv_layer_params": ((4, 2, 1),)}
    with pytest.raises(ValueError, match=r"conv_layer_params needs an image observation, but "
                       r"this env's is a Dict with no image \(H, W, C\) part: 'a' \(3\) "
                       r"float32, 'b' \(2\) uint8"):
        calf.Trainer(PPO, root_dir=tmp_path / "v", env=calf.register_env(make_vectors),
                     overrides=conv)


def test_a_dicts_image_part_goes_through_conv_layers(tmp_path):
    # the per-key encoder: ROVER's 'map' (2, 3, 1) uint8 through each network's conv
    # layer (scaled by 1/255 there, as a uint8 observation is), 'pos' beside it; the same
    # bits on a second run, and other bits than the fc-only networks
    conv = {**OVERRIDES, "TrainerConfig.num_iterations": 3,
            "ActorDistributionNetwork.conv_layer_params": ((3, 2, 1),),
            "ValueNetwork.conv_layer_params": ((2, 2, 1),)}
    for root, over in (("a", conv), ("b", conv), ("flat", {**conv, **{
            "ActorDistributionNetwork.conv_layer_params": (),
            "ValueNetwork.conv_layer_params": ()}})):
        with calf.Trainer(PPO, root_dir=tmp_path / root, env=ROVER, overrides=over) as t:
            for _ in range(3):
                t.step()
    assert filecmp.cmp(ckpt(tmp_path / "a", 3), ckpt(tmp_path / "b", 3), shallow=False)
    assert not filecmp.cmp(ckpt(tmp_path / "a", 3), ckpt(tmp_path / "flat", 3), shallow=False)
    seen = [im.Rover().reset(seed=s)[0] for s in range(4)]
    with calf.load_policy(tmp_path / "a") as pol:
        obs = {k: np.stack([o[k] for o in seen]) for k in ("pos", "map")}
        rows = np.stack([np.concatenate([o["map"].reshape(-1), o["pos"]]) for o in seen])
        acts = pol(obs)
        assert acts.shape == (4,) and np.array_equal(acts, pol(rows.astype(np.float32)))
