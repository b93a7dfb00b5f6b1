"""The vector env: ``make_vec`` and ``VecEnv``, a block of calf's environments stepped by
calf's C library into NumPy arrays, a ``gymnasium.vector.VectorEnv`` (SAME_STEP autoreset)
with Gymnasium's spaces when Gymnasium imports, calf's own (_spaces.py) when not."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from calf import _calf
from calf._args import _check_seed
from calf._spaces import Box, Dict, Discrete, MultiDiscrete

try:
    import gymnasium as _gym
    from gymnasium.vector import VectorEnv as _VectorEnvBase
    from gymnasium.vector.utils import batch_space as _batch_space

    _AUTORESET_SAME_STEP: Any = _gym.vector.AutoresetMode.SAME_STEP
except ImportError:
    _gym = None
    _VectorEnvBase = object
    _batch_space = None
    _AUTORESET_SAME_STEP = "SameStep"


def _obs_layout(name: str, obs_dim: int) -> tuple[tuple[int, ...], Any, int]:
    """(shape, dtype, high) of env ``name``'s observation as its space has it: a Python
    env's Box in its own shape, an image (H, W, C) in the spec's, else a flat (obs_dim,)
    vector (a Python env's Dict too, its Boxes in the order calf flattens them); uint8
    when the spec keeps bytes (high: the largest value), else float32 (high 0)."""
    form = _calf.obs_form(name)
    shape = form["box_shape"] or form["shape"] or (obs_dim,)
    dtype = np.uint8 if form["dtype"] == "uint8" else np.float32
    return tuple(int(d) for d in shape), dtype, int(form["high"])


# A Dict observation's part: (key, shape, dtype, offset, size) in the flat row
_Part = tuple[Any, tuple[int, ...], Any, int, int]


def _obs_parts(name: str) -> tuple[_Part, ...] | None:
    """A Dict env's parts in the order calf flattens them (the spec's obs_parts): a
    Python env's own keys and Box shapes, a C env's part names with (H, W, C) or (n,);
    uint8 parts as bytes. None for an env without named parts."""
    form = _calf.obs_form(name)
    if not form["parts"]:
        return None
    keys, shapes = form["dict_keys"], form["dict_shapes"]
    parts = []
    for k, (pname, shape3, dtype, offset) in enumerate(form["parts"]):
        if keys is not None:
            key, shape = keys[k], tuple(int(d) for d in shapes[k])
        else:
            key, shape = pname, tuple(int(d) for d in shape3) if shape3[1] else (int(shape3[0]),)
        size = int(np.prod(shape, dtype=np.int64))
        parts.append((key, shape, np.uint8 if dtype == "uint8" else np.float32, offset, size))
    return tuple(parts)


def _part_box(shape: tuple[int, ...], dtype: Any) -> Any:
    """One part's Box: bytes 0..255, floats over the whole real line."""
    box = _gym.spaces.Box if _gym is not None else Box
    return (box(0, 255, shape, np.uint8) if dtype == np.uint8 else
            box(-np.inf, np.inf, shape, np.float32))


def _block_spaces(
    raw: _calf.VecEnv, layout: tuple[tuple[int, ...], Any, int],
    parts: tuple[_Part, ...] | None = None,
) -> tuple[Any, Any, Any, Any]:
    """(single obs, single action, batched obs, batched action) spaces of a block (a
    Dict of its parts' Boxes for a Dict env)."""
    n = raw.num_envs
    shape, dtype, high = layout
    box = _gym.spaces.Box if _gym is not None else Box
    # bytes are 0..high; floats: calf's public API gives no bounds, the whole real line
    single_obs = (box(0, high, shape, np.uint8) if dtype == np.uint8 else
                  box(-np.inf, np.inf, shape, np.float32))
    if raw.action_dims:
        nvec = raw.action_nvec
        single_act = _gym.spaces.MultiDiscrete(nvec) if _gym else MultiDiscrete(nvec)
    elif raw.discrete:
        single_act = _gym.spaces.Discrete(raw.num_actions) if _gym else Discrete(raw.num_actions)
    else:
        single_act = box(raw.action_low, raw.action_high, (raw.action_dim,), np.float32)
    if parts is not None:
        single_obs = (_gym.spaces.Dict if _gym is not None else Dict)(
            {key: _part_box(pshape, pdtype) for key, pshape, pdtype, _o, _s in parts})
    if _batch_space is not None:
        return single_obs, single_act, _batch_space(single_obs, n), _batch_space(single_act, n)
    batch_obs = (Box(0, high, (n,) + shape, np.uint8) if dtype == np.uint8 else
                 Box(-np.inf, np.inf, (n,) + shape, np.float32))
    if parts is not None:
        batch_obs = Dict({key: _part_box((n,) + pshape, pdtype)
                          for key, pshape, pdtype, _o, _s in parts})
    if raw.action_dims:
        batch_act: Any = MultiDiscrete(np.tile(raw.action_nvec, (n, 1)))
    elif raw.discrete:
        batch_act: Any = MultiDiscrete(np.full(n, raw.num_actions))
    else:
        batch_act = Box(
            np.tile(raw.action_low, (n, 1)), np.tile(raw.action_high, (n, 1)),
            (n, raw.action_dim), np.float32,
        )
    return single_obs, single_act, batch_obs, batch_act


class VecEnv(_VectorEnvBase):
    """A block of calf's environments as a Gymnasium 1.x vector env (SAME_STEP autoreset).

    Env i of the block is env ``first_index + i`` of a calf job of ``name`` seeded with
    ``seed``: its stream is calf's stream of (seed, first_index + i), the same as
    ``calf env NAME --seed S --index I`` and the trainer's env of that index.

    Arrays: ``obs``: (num_envs, *shape) of the observation space: an image env's
    (num_envs, H, W, C) uint8 (MinAtar's games: (num_envs, 10, 10, C), values 0..1), a
    Python env's Box in its own shape and dtype (uint8 and bool Boxes as uint8), a Dict
    env's a dict of its parts' (num_envs, *shape) arrays (a Python env's keys and Box
    shapes; uint8 parts as uint8, the others float32), else (num_envs, obs_dim) float32;
    ``rewards``: (num_envs,) float64;
    ``terminations``, ``truncations``: (num_envs,) bool; actions: (num_envs,) integers for
    a discrete env, (num_envs, D) integers for a MultiDiscrete one, (num_envs, action_dim)
    floats for a continuous one (clipped to the action bounds by calf). The returned
    arrays are new on every call. An env that masks its actions returns them in every
    reset's and step's infos: ``infos["action_mask"]`` (num_envs, num_actions) bool, the
    actions valid in the state obs shows (MultiDiscrete: each sub-action's slice in turn),
    with ``infos["_action_mask"]`` all True, as Gymnasium's vector infos go.
    """

    def __init__(
        self,
        name: str,
        num_envs: int,
        seed: int = 0,
        env_lib: str | None = None,
        first_index: int = 0,
        render_size: tuple[int, int] = (480, 480),
    ) -> None:
        self._name, self._env_lib, self._first_index = name, env_lib, first_index
        self.render_size: tuple[int, int] = (int(render_size[0]), int(render_size[1]))
        if env_lib is not None:
            _export_calf_to_plugins()
        self._raw = _calf.VecEnv(name, num_envs, _check_seed(seed), first_index, env_lib)
        self.num_envs: int = self._raw.num_envs
        self.obs_dim: int = self._raw.obs_dim
        self.max_episode_steps: int = self._raw.max_episode_steps
        self._layout = _obs_layout(self._raw.name, self.obs_dim)
        # the C side writes (num_envs, obs_dim) rows, float32 or a uint8 env's bytes
        # (read as bytes: the env writes them so, MinAtar's games), reshaped or
        # converted only when the space is not that
        self._parts = _obs_parts(self._raw.name)
        self._flat = (self._parts is None and self._layout[0] == (self.obs_dim,)
                      and self._layout[1] == np.float32)
        (
            self.single_observation_space,
            self.single_action_space,
            self.observation_space,
            self.action_space,
        ) = _block_spaces(self._raw, self._layout, self._parts)
        self.metadata: dict[str, Any] = {"autoreset_mode": _AUTORESET_SAME_STEP,
                                         "render_modes": ["rgb_array"]}
        self.render_mode = "rgb_array"
        self.closed = False
        if _gym is not None:
            self.autoreset_mode = _AUTORESET_SAME_STEP

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start new episodes in every env.

        With ``seed``: the block is reopened as a job seeded with ``seed`` (env i's
        stream from (seed, first_index + i), as calf's trainer seeds its envs), so the
        episodes are those of ``make_vec(name, num_envs, seed)``. Without: each env's
        next episode from its own stream (the first call after opening returns the
        episodes the open started). ``options`` is not supported (None or empty).

        Returns ``(obs, infos)``: obs (num_envs, *single_observation_space.shape) of its
        dtype, infos ``{}`` (an env with an action mask: its ``action_mask`` and
        ``_action_mask``).
        """
        if options:
            raise ValueError(f"calf.VecEnv.reset: options are not supported, got {options!r}")
        if self.closed:  # a seed would otherwise open a new block behind close()'s back
            raise ValueError("calf.VecEnv: the env is closed")
        if seed is not None:
            raw = _calf.VecEnv(
                self._name, self.num_envs, _check_seed(seed), self._first_index, self._env_lib
            )
            self._raw.close()
            self._raw = raw
            if _gym is not None:
                super().reset(seed=seed)
        obs = np.empty((self.num_envs, self.obs_dim),
                       dtype=np.uint8 if self._raw.obs_high else np.float32)
        self._raw.reset(obs)
        obs = self._present(obs)
        mask = self._raw.action_mask
        if mask is None:
            return obs, {}
        return obs, {"action_mask": mask, "_action_mask": np.ones(self.num_envs, dtype=bool)}

    def step(
        self, actions: Any
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every env once; an episode that ends is reset in the same step.

        Returns ``(obs, rewards, terminations, truncations, infos)``. For an env whose
        episode ended, obs holds the new episode's first observation and
        ``infos["final_obs"][i]`` the ended one's last (one observation, as obs's rows), with
        ``infos["_final_obs"][i]`` True; ``final_obs`` is an object array holding None for
        the other envs, and ``final_info``/``_final_info`` go with it, as Gymnasium's
        SyncVectorEnv in SAME_STEP mode. infos is ``{}`` when no episode ended.

        Raises ValueError, naming the env, when an env gives a non-finite observation or
        reward (a Python env's failure among them). The step happened all the same, for every env: the exception's ``results`` is
        the tuple above, so no env's reward, termination or final observation is lost.
        """
        # one call: the actions checked and converted, the step, new arrays and the
        # infos made in C (calf._calf.VecEnv.step_gym), no Python object per env
        a = actions if type(actions) is np.ndarray else np.asarray(actions)
        if self._flat:
            return self._raw.step_gym(a)
        try:
            results = self._raw.step_gym(a)
        except ValueError as e:
            if getattr(e, "results", None) is not None:
                e.results = self._present_step(e.results)
            raise
        return self._present_step(results)

    def _present(self, obs: np.ndarray) -> Any:
        """(num_envs, obs_dim) rows (or one row; float32, or a uint8 env's bytes) as the
        observation space has them: a Dict env's as a dict of each part's (num_envs,
        *shape) array."""
        lead = obs.shape[:-1]
        if self._parts is not None:
            return {key: obs[..., off:off + size].astype(dtype).reshape(lead + shape)
                    for key, shape, dtype, off, size in self._parts}
        shape, dtype, _high = self._layout
        return obs.astype(dtype, copy=False).reshape(lead + shape)

    def _present_step(self, results: tuple) -> tuple:
        """step_gym's results with obs and infos["final_obs"]'s rows presented."""
        obs, rewards, terms, truncs, infos = results
        final = infos.get("final_obs")
        if final is not None:
            for i in np.flatnonzero(infos["_final_obs"]):
                final[i] = self._present(final[i])
        return self._present(obs), rewards, terms, truncs, infos

    def render(self) -> tuple[np.ndarray, ...]:
        """Each env's current state drawn as Gymnasium's ``rgb_array`` mode draws it: a
        ``(height, width, 3)`` uint8 array per env (``render_size`` is (width, height),
        480x480 by default). Drawing never changes what a step computes. Raises
        ValueError for an env that cannot be drawn (a plug-in or Python env without a
        render hook) or a calf built without video support (naming what to install)."""
        frames = self._raw.render(*self.render_size)
        self.metadata["render_fps"] = self._raw.render_fps
        return frames

    def close(self, **kwargs: Any) -> None:
        """Release the envs; closing twice does nothing."""
        if self.closed:
            return
        self.close_extras(**kwargs)
        self.closed = True

    def close_extras(self, **kwargs: Any) -> None:
        """Release calf's envs (Gymnasium calls this from close())."""
        self._raw.close()

    def __enter__(self) -> VecEnv:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"calf.VecEnv({self._name}, num_envs={self.num_envs})"


def _export_calf_to_plugins() -> None:
    """Make the extension's calf_* functions visible to the plug-ins calf loads.

    Python loads extension modules with RTLD_LOCAL, so a plug-in's calls into calf
    (calf_env_register, ...) would not resolve; reopening the loaded module with
    RTLD_GLOBAL | RTLD_NOLOAD adds it to the global scope (it exports only calf_* and its
    init function, python/calf/_calf.map). Done once, on the first env_lib.
    """
    global _calf_exported
    if _calf_exported:
        return
    import ctypes

    ctypes.CDLL(_calf.__file__, mode=os.RTLD_GLOBAL | os.RTLD_NOLOAD)
    _calf_exported = True


_calf_exported = False


def make_vec(
    name: str,
    num_envs: int,
    seed: int = 0,
    env_lib: str | None = None,
    render_size: tuple[int, int] = (480, 480),
) -> VecEnv:
    """``num_envs`` envs of calf's environment ``name`` as a Gymnasium vector env.

    ``name``: a built-in env (``env_names()``) or one the plug-in ``env_lib`` registers.
    Env i is env i of a calf job seeded with ``seed`` (``calf env NAME --seed S --index
    i``). Raises ValueError with calf's message for an unknown name (the message lists
    the known ones) or a bad count, MemoryError when the envs do not fit.
    """
    return VecEnv(name, num_envs, seed, env_lib, render_size=render_size)
