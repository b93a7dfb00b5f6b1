"""calf from Python: calf's environments as a Gymnasium 1.x vector environment, the
stepwise trainer, and trained policies acting on NumPy arrays.

``calf.make_vec(name, num_envs, seed)`` returns a vector env stepped by calf's C library
into NumPy arrays (``calf._calf``), auto-resetting in the same step as calf's trainer
does (Gymnasium's SAME_STEP mode). When Gymnasium is importable it is a
``gymnasium.vector.VectorEnv`` with ``gymnasium.spaces``; when it is not, calf's own
minimal ``Box``/``Discrete``/``MultiDiscrete`` carry the same attributes.

``calf.load_policy(root_dir)`` opens a run's greedy policy, the one ``calf play`` runs;
``calf.train(conf, root_dir=...)`` runs the job ``calf train`` runs, and
``calf.Trainer(conf, root_dir=...)`` trains it one iteration at a time;
``calf.read_scalars(root_dir)`` reads a run's summaries as NumPy arrays, as TensorBoard
reads them. ``python3 -m calf`` is the ``calf`` program.
"""

from __future__ import annotations

import csv
import io
import math
import os
import pathlib
import warnings
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import numpy as np

from calf import _calf
from calf._envs import EnvError, register_env, raise_env_error

__version__: str = _calf.__version__
__all__ = [
    "Box",
    "Discrete",
    "EnvError",
    "MultiDiscrete",
    "Policy",
    "Scalars",
    "Trainer",
    "VecEnv",
    "env_names",
    "features",
    "load_policy",
    "make_vec",
    "register_env",
    "read_scalars",
    "train",
    "__version__",
]

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


def features() -> dict[str, str]:
    """What this build holds, as ``calf --version`` says.

    Returns ``{"mpi": note, "mujoco": note, "video": note}``; each note is ``"built
    in ..."`` or ``"not built: ..."`` saying why and how to get it.
    """
    return _calf.features()


def env_names() -> list[str]:
    """The registered environment names, built-ins first."""
    return _calf.env_names()


# ---- calf's minimal spaces, used when Gymnasium is not installed ----------------------


class _Space:
    """What calf's minimal spaces share: shape, dtype and a seedable generator."""

    shape: tuple[int, ...]
    dtype: np.dtype

    def __init__(self, shape: tuple[int, ...], dtype: Any, seed: int | None = None) -> None:
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        # As Gymnasium's spaces: no generator until one is asked for, so an unseeded
        # space holds no entropy (and pickles to the same bytes in every process).
        self._np_random: np.random.Generator | None = None
        if seed is not None:
            self.seed(seed)

    @property
    def np_random(self) -> np.random.Generator:
        """The generator ``sample()`` draws from; made from OS entropy when first used
        unless ``seed()`` made it."""
        if self._np_random is None:
            self._np_random = np.random.default_rng()
        return self._np_random

    def seed(self, seed: int | None = None) -> list[int | None]:
        """Reseed the generator that ``sample()`` draws from."""
        self._np_random = np.random.default_rng(seed)
        return [seed]

    def __contains__(self, x: Any) -> bool:
        return self.contains(x)

    def contains(self, x: Any) -> bool:  # pragma: no cover - every space overrides it
        raise NotImplementedError


class Box(_Space):
    """A box of reals: ``low <= x <= high`` elementwise, of ``shape`` and ``dtype``.

    ``low``, ``high``: arrays of ``shape`` and ``dtype`` (float32 in calf); infinite
    bounds are allowed.
    """

    def __init__(
        self,
        low: Any,
        high: Any,
        shape: tuple[int, ...] | None = None,
        dtype: Any = np.float32,
        seed: int | None = None,
    ) -> None:
        if shape is None:
            shape = np.shape(low)
        super().__init__(shape, dtype, seed)
        self.low = np.broadcast_to(np.asarray(low, dtype=self.dtype), self.shape).copy()
        self.high = np.broadcast_to(np.asarray(high, dtype=self.dtype), self.shape).copy()

    def sample(self) -> np.ndarray:
        """A point of the box: uniform where both bounds are finite, else normal
        (shifted exponential on a half-bounded side), as Gymnasium draws."""
        low = self.low.astype(np.float64)
        high = self.high.astype(np.float64)
        out = self.np_random.normal(size=self.shape)
        lo_fin, hi_fin = np.isfinite(low), np.isfinite(high)
        both = lo_fin & hi_fin
        out[both] = self.np_random.uniform(low[both], high[both])
        lower_only = lo_fin & ~hi_fin
        out[lower_only] = low[lower_only] + self.np_random.exponential(size=lower_only.sum())
        upper_only = ~lo_fin & hi_fin
        out[upper_only] = high[upper_only] - self.np_random.exponential(size=upper_only.sum())
        return np.clip(out, low, high).astype(self.dtype)

    def contains(self, x: Any) -> bool:
        """Whether x has this shape and lies within the bounds."""
        x = np.asarray(x)
        return bool(
            x.shape == self.shape
            and np.can_cast(x.dtype, self.dtype)
            and np.all(x >= self.low)
            and np.all(x <= self.high)
        )

    def __repr__(self) -> str:
        return f"Box({self.low.min()}, {self.high.max()}, {self.shape}, {self.dtype})"


class Discrete(_Space):
    """The integers ``0 .. n-1`` (dtype int64, shape ``()``)."""

    def __init__(self, n: int, seed: int | None = None) -> None:
        super().__init__((), np.int64, seed)
        self.n = int(n)
        self.start = 0

    def sample(self) -> np.int64:
        """A uniformly drawn integer in ``0 .. n-1``."""
        return np.int64(self.np_random.integers(self.n))

    def contains(self, x: Any) -> bool:
        """Whether x is an integer in ``0 .. n-1``."""
        x = np.asarray(x)
        return bool(x.shape == () and x.dtype.kind in "iu" and 0 <= int(x) < self.n)

    def __repr__(self) -> str:
        return f"Discrete({self.n})"


class MultiDiscrete(_Space):
    """A vector of integers, element i in ``0 .. nvec[i]-1`` (dtype int64)."""

    def __init__(self, nvec: Any, seed: int | None = None) -> None:
        self.nvec = np.asarray(nvec, dtype=np.int64)
        super().__init__(self.nvec.shape, np.int64, seed)
        self.start = np.zeros_like(self.nvec)

    def sample(self) -> np.ndarray:
        """A uniformly drawn vector, shape ``nvec.shape``, int64."""
        return self.np_random.integers(self.nvec).astype(np.int64)

    def contains(self, x: Any) -> bool:
        """Whether x has this shape and each element lies in its range."""
        x = np.asarray(x)
        return bool(
            x.shape == self.shape
            and x.dtype.kind in "iu"
            and np.all(x >= 0)
            and np.all(x < self.nvec)
        )

    def __repr__(self) -> str:
        return f"MultiDiscrete({self.nvec})"


def _spaces(raw: _calf.VecEnv) -> tuple[Any, Any, Any, Any]:
    """(single obs, single action, batched obs, batched action) spaces of a block."""
    n, od = raw.num_envs, raw.obs_dim
    box = _gym.spaces.Box if _gym is not None else Box
    # calf's public API gives no observation bounds: the whole real line, as a Box.
    single_obs = box(-np.inf, np.inf, (od,), np.float32)
    if raw.discrete:
        single_act = _gym.spaces.Discrete(raw.num_actions) if _gym else Discrete(raw.num_actions)
    else:
        single_act = box(raw.action_low, raw.action_high, (raw.action_dim,), np.float32)
    if _batch_space is not None:
        return single_obs, single_act, _batch_space(single_obs, n), _batch_space(single_act, n)
    batch_obs = Box(-np.inf, np.inf, (n, od), np.float32)
    if raw.discrete:
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

    Arrays: ``obs``: (num_envs, obs_dim) float32; ``rewards``: (num_envs,) float64;
    ``terminations``, ``truncations``: (num_envs,) bool; actions: (num_envs,) integers for
    a discrete env, (num_envs, action_dim) floats for a continuous one (clipped to the
    action bounds by calf). The returned arrays are new on every call.
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
        (
            self.single_observation_space,
            self.single_action_space,
            self.observation_space,
            self.action_space,
        ) = _spaces(self._raw)
        self.metadata: dict[str, Any] = {"autoreset_mode": _AUTORESET_SAME_STEP,
                                         "render_modes": ["rgb_array"]}
        self.render_mode = "rgb_array"
        self.closed = False
        if _gym is not None:
            self.autoreset_mode = _AUTORESET_SAME_STEP

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start new episodes in every env.

        With ``seed``: the block is reopened as a job seeded with ``seed`` (env i's
        stream from (seed, first_index + i), as calf's trainer seeds its envs), so the
        episodes are those of ``make_vec(name, num_envs, seed)``. Without: each env's
        next episode from its own stream (the first call after opening returns the
        episodes the open started). ``options`` is not supported (None or empty).

        Returns ``(obs, infos)``: obs (num_envs, obs_dim) float32, infos ``{}``.
        """
        if options:
            raise ValueError(f"calf.VecEnv.reset: options are not supported, got {options!r}")
        if seed is not None:
            raw = _calf.VecEnv(
                self._name, self.num_envs, _check_seed(seed), self._first_index, self._env_lib
            )
            self._raw.close()
            self._raw = raw
            if _gym is not None:
                super().reset(seed=seed)
        obs = np.empty((self.num_envs, self.obs_dim), dtype=np.float32)
        self._raw.reset(obs)
        return obs, {}

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every env once; an episode that ends is reset in the same step.

        Returns ``(obs, rewards, terminations, truncations, infos)``. For an env whose
        episode ended, obs holds the new episode's first observation and
        ``infos["final_obs"][i]`` the ended one's last ((obs_dim,) float32), with
        ``infos["_final_obs"][i]`` True; ``final_obs`` is an object array holding None for
        the other envs, and ``final_info``/``_final_info`` go with it, as Gymnasium's
        SyncVectorEnv in SAME_STEP mode. infos is ``{}`` when no episode ended.
        """
        # one call: the actions checked and converted, the step, new arrays and the
        # infos made in C (calf._calf.VecEnv.step_gym), no Python object per env
        a = actions if type(actions) is np.ndarray else np.asarray(actions)
        return self._raw.step_gym(a)

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


def _check_seed(seed: int) -> int:
    """A seed as calf takes it: an integer in 0 .. 2**64 - 1."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"calf: seed must be an integer, got {seed!r}")
    if not 0 <= int(seed) < 2**64:
        raise ValueError(f"calf: seed {seed} is out of range 0..2**64-1")
    return int(seed)


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


# ---- policies -------------------------------------------------------------------------


class Policy:
    """A trained run's greedy policy: ``pol(obs)`` computes what ``calf play`` computes.

    Attributes: ``obs_dim``; ``discrete``; ``num_actions`` (discrete: the choices, else
    0); ``action_dim`` (continuous: floats per action, else 0); ``env_name``;
    ``checkpoint`` (the file opened); ``iteration`` (its iteration). One thread at a
    time may call a policy; different policies are independent.
    """

    def __init__(
        self, root_dir: str | os.PathLike | None, checkpoint: str | os.PathLike | None = None
    ) -> None:
        self._raw = _calf.Policy(_fspath(root_dir), _fspath(checkpoint))
        self._root_dir = _fspath(root_dir)
        self.obs_dim: int = self._raw.obs_dim
        self.discrete: bool = self._raw.discrete
        self.num_actions: int = self._raw.num_actions
        self.action_dim: int = self._raw.action_dim
        self.env_name: str = self._raw.env_name
        self.checkpoint: str = self._raw.checkpoint
        self.iteration: int = self._raw.iteration

    def __call__(self, obs: Any) -> np.ndarray:
        """The greedy actions for ``obs``: (B, obs_dim) floats (converted to float32), or
        one (obs_dim,) row.

        Returns (B,) int64 for a discrete policy, (B, action_dim) float32 for a
        continuous one (the policy's actions, not clipped to the env's bounds); for a
        single row, () int64 or (action_dim,) float32. Row r's action depends only on
        row r. Observations are those the env returns: the policy normalizes them
        itself when the run did.
        """
        o = np.asarray(obs)
        one_row = o.ndim == 1
        if one_row:
            o = o[np.newaxis]
        if o.ndim != 2 or o.shape[1] != self.obs_dim:
            raise ValueError(
                f"calf.Policy: obs must have shape (B, {self.obs_dim}) or ({self.obs_dim},), "
                f"got {np.shape(obs)}"
            )
        if o.dtype.kind not in "fiub":
            raise TypeError(f"calf.Policy: obs must be numbers, got dtype {o.dtype}")
        o = np.ascontiguousarray(o, dtype=np.float32)
        if self.discrete:
            out = np.empty(o.shape[0], dtype=np.int32)
        else:
            out = np.empty((o.shape[0], self.action_dim), dtype=np.float32)
        self._raw.greedy(o, out)
        actions = out.astype(np.int64) if self.discrete else out
        return actions[0] if one_row else actions


    def record(self, path: str | os.PathLike, num_episodes: int = 1, seed: int = 0,
               width: int = 480, height: int = 480, max_frames: int = 0) -> str:
        """Play ``num_episodes`` greedy episodes from ``seed`` (``calf play --seed``) and
        record them as a video: MP4 (H.264) when ``path`` ends in ``.mp4``, an animated
        GIF when ``.gif``, at the env's frame rate, ``max_frames`` at most (0: all), as
        ``calf play --video`` does; returns calf play's report. The file is written whole
        at the end or not at all. Raises ValueError for a bad path, size or extension, an
        env that cannot be drawn or a calf without video support; OSError when the file
        cannot be written."""
        root = self._root_dir or str(pathlib.Path(self.checkpoint).resolve().parents[2])
        return _calf.play(root, self.checkpoint, int(num_episodes), _check_seed(seed),
                          _fspath(path), int(width), int(height), int(max_frames),
                          self.env_name.startswith("py:"))
    def close(self) -> None:
        """Release the policy; closing twice does nothing."""
        self._raw.close()

    @property
    def closed(self) -> bool:
        """True after close()."""
        return self._raw.closed

    def __enter__(self) -> Policy:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"calf.Policy({self.env_name}, checkpoint={self.checkpoint!r})"


def _fspath(path: str | os.PathLike | None) -> str | None:
    """A path argument as the str calf takes (None stays None)."""
    return None if path is None else os.fsdecode(os.fspath(path))


def load_policy(
    root_dir: str | os.PathLike | None,
    checkpoint: str | os.PathLike | None = None,
    *,
    env: Any = None,
) -> Policy:
    """The greedy policy of the run in ``root_dir``, as ``calf play --root_dir`` runs it.

    ``checkpoint``: None for the newest valid checkpoint in ROOT/train/algorithm (older
    ones are tried, with a warning on stderr, when a newer one is damaged), else that
    checkpoint file (``root_dir`` None: the run that holds it). A plug-in env's run needs
    the plug-in loaded first (``make_vec(..., env_lib=...)``), a Python env's its factory
    (``env=make_env``, registered as ``register_env`` does). Raises ValueError with
    calf's message for a missing or bad config, no checkpoint or a damaged one, an
    unregistered env; OSError when the checkpoint directory cannot be read.
    """
    if env is not None and not isinstance(env, str):
        register_env(env)
    return Policy(root_dir, checkpoint)


# ---- the stepwise trainer -------------------------------------------------------------


def _gin_value(binding: str, value: Any) -> str:
    """A Python value as gin text: bools True/False, strs quoted, tuples and lists as gin
    tuples, numbers by repr; raises ValueError naming the binding for anything else."""
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, str):
        if "\n" in value or ('"' in value and "'" in value):
            raise ValueError(
                f"calf: override {binding}: a gin string cannot hold a newline or both "
                f"quote characters, got {value!r}"
            )
        return f"'{value}'" if '"' in value else f'"{value}"'
    if isinstance(value, (int, np.integer)):
        return repr(int(value))
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            raise ValueError(f"calf: override {binding}: {value!r} is not a finite number")
        return repr(float(value))
    if isinstance(value, (tuple, list)):
        items = [_gin_value(binding, v) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    raise ValueError(
        f"calf: override {binding}: cannot write a {type(value).__name__} as gin "
        f"(bool, int, float, str or a tuple of them; or pass gin text as a str)"
    )


def _conf_params(overrides: Mapping[str, Any] | Iterable[str] | None) -> list[str]:
    """Overrides as calf's --conf_param strings ('Scope.param=value')."""
    if overrides is None:
        return []
    if isinstance(overrides, Mapping):
        return [f"{binding}={_gin_value(binding, v)}" for binding, v in overrides.items()]
    if isinstance(overrides, str):
        return [overrides]
    return list(overrides)


def _env_binding(env: Any) -> str:
    """The --conf_param naming the env class of ``env``: a factory of Python envs
    (registered here) or a registered class's name."""
    name = env if isinstance(env, str) else register_env(env)
    return "create_environment.env_name=" + _gin_value("create_environment.env_name", name)


class Trainer:
    """A training run stepped one iteration at a time (calf's stepwise trainer).

    ``conf``: a gin file; or ``conf_text``: the config as gin text (errors name it
    ``<conf_text>:LINE``); neither: ROOT/config.gin of an earlier run. ``overrides``: a
    dict of binding -> Python value (bool, int, float, str, tuples of them), written as
    gin, or an iterable of ``"Scope.param=value"`` gin text strings, both as
    ``--conf_param``. The run resumes from the newest valid checkpoint in ``root_dir``
    and holds its lock until ``close()``; stepped to the end it writes the files
    ``calf train`` writes for the same config, byte for byte. ``quiet``: no progress
    lines on stderr. Raises ValueError with calf's message ("file:line: ...") for bad
    input, OSError for I/O failures. One thread at a time may use a trainer.
    """

    def __init__(
        self,
        conf: str | os.PathLike | None = None,
        *,
        root_dir: str | os.PathLike,
        conf_text: str | None = None,
        overrides: Mapping[str, Any] | Iterable[str] | None = None,
        quiet: bool = True,
        env: Any = None,
    ) -> None:
        self.root_dir: str = _fspath(root_dir)
        params = _conf_params(overrides)
        if env is not None:
            params.append(_env_binding(env))
        self._raw = _calf.Trainer(self.root_dir, _fspath(conf), conf_text, params, bool(quiet))

    def step(self) -> dict[str, float | int]:
        """Run one iteration and return its metrics.

        Keys: ``iteration`` (completed, this one included), ``env_steps`` (of the whole
        run), ``episodes`` (ended in this iteration), ``total_episodes``: ints;
        ``average_return``, ``average_episode_length`` (over this iteration's ended
        episodes, NaN when none), ``eval_return`` (NaN when this iteration did not
        evaluate), ``steps_per_sec``: floats; and on iterations that write summaries the
        algorithm's scalars by their tag names (``"PPOLoss/pg_loss"``, ...), floats.
        Raises ValueError when the run is already done.
        """
        try:
            return self._raw.step()
        except (ValueError, OSError, RuntimeError) as e:
            raise_env_error(e)
            raise

    @property
    def done(self) -> bool:
        """True when the run has reached its end (num_iterations or num_env_steps)."""
        return self._raw.done

    @property
    def iteration(self) -> int:
        """Iterations completed so far, those a resume started from included."""
        return self._raw.iteration

    @property
    def closed(self) -> bool:
        """True after close()."""
        return self._raw.closed

    def checkpoint(self) -> None:
        """Write a checkpoint of the current iteration now (ROOT/train/algorithm/ckpt-N)."""
        self._raw.checkpoint()

    def close(self) -> None:
        """Close the run (flush its summaries, release the lock); twice does nothing."""
        self._raw.close()

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"calf.Trainer(root_dir={self.root_dir!r}, iteration={self.iteration})"


# ---- the whole job --------------------------------------------------------------------


def train(
    conf: str | os.PathLike | None = None,
    *,
    root_dir: str | os.PathLike,
    nproc: int = 1,
    overrides: Mapping[str, Any] | Iterable[str] | None = None,
    seed: int | None = None,
    quiet: bool = False,
    env: Any = None,
) -> None:
    """Run the training job ``calf train`` runs, to its end, in this process.

    ``conf``: a gin file (None: ROOT/config.gin of an earlier run); ``overrides``: as
    ``Trainer``'s (a dict of binding -> Python value, or ``"Scope.param=value"`` gin text
    strings), applied as ``--conf_param`` after the file; ``seed``: the run's
    ``TrainerConfig.random_seed``, over both. ``nproc``: local worker processes (forked
    from this one; they run calf's C code only), bit-identical to one. A ``root_dir``
    that holds checkpoints resumes from the newest valid one. The files written are
    ``calf train``'s for the same arguments, byte for byte. ``quiet``: no progress lines
    on stderr.

    Raises ValueError with calf's message ("file:line: ...") for bad input, OSError for
    I/O failures, RuntimeError when a worker fails (its message on stderr), and
    KeyboardInterrupt on Ctrl-C (SIGINT or SIGTERM) once the iteration under way has
    finished and its checkpoint is written, as ``calf train`` stops.

    ``env``: a factory of Python envs (``lambda: gymnasium.make("CartPole-v1")``,
    registered as ``register_env`` does) or a registered env's name, in place of the
    config's ``create_environment.env_name``. Each process makes its own envs with it
    (nproc workers are forked holding the GIL: other Python threads wait for the job).
    An env that raises stops the job: EnvError chained to its exception on one process,
    RuntimeError with the env's message and traceback on stderr from workers.
    """
    params = _conf_params(overrides)
    if env is not None:
        params.append(_env_binding(env))
    if seed is not None:
        params.append(f"TrainerConfig.random_seed={_check_seed(seed)}")
    if isinstance(nproc, bool) or not isinstance(nproc, (int, np.integer)):
        raise TypeError(f"calf.train: nproc must be an integer, got {nproc!r}")
    try:
        _calf.train(
            _fspath(root_dir), _fspath(conf), params, int(nproc), bool(quiet), env is not None
        )
    except (ValueError, OSError, RuntimeError) as e:
        raise_env_error(e)
        raise


# ---- summaries ------------------------------------------------------------------------


class Scalars(NamedTuple):
    """One tag's scalar summaries, in the order TensorBoard shows them.

    ``steps``: (N,) int64; ``wall_times``: (N,) float64 seconds since the epoch;
    ``values``: (N,) float32 (the events files' simple_value, exactly).
    """

    steps: np.ndarray
    wall_times: np.ndarray
    values: np.ndarray


_EVENTS_PREFIX = "events.out.tfevents."


def _scalars_of_csv(text: str) -> dict[str, Scalars]:
    """``calf events --csv`` text as {tag: Scalars}, tags in order of first appearance."""
    rows = csv.reader(io.StringIO(text, newline=""))
    header = next(rows, None)
    if header != ["tag", "step", "wall_time", "value"]:
        raise RuntimeError(f"calf.read_scalars: unexpected header {header!r}")
    cols: dict[str, tuple[list[int], list[float], list[float]]] = {}
    for tag, step, wall_time, value in rows:
        c = cols.setdefault(tag, ([], [], []))
        c[0].append(int(step))
        c[1].append(float(wall_time))
        c[2].append(float(value))
    return {
        tag: Scalars(
            np.array(st, dtype=np.int64), np.array(wt, dtype=np.float64),
            np.array(va, dtype=np.float32),
        )
        for tag, (st, wt, va) in cols.items()
    }


def read_scalars(root_dir: str | os.PathLike) -> dict[str, dict[str, Scalars]]:
    """A run's scalar summaries as NumPy arrays, read as TensorBoard reads them.

    As TensorBoard's ``--logdir root_dir``: each directory under ``root_dir`` (itself
    included) that holds events files is a run, named by its path relative to
    ``root_dir`` (``"train"``, ``"eval"`` for a calf run; ``"."`` for root_dir itself),
    its files read in name order as one, with the values a resume wrote again shown
    once (``calf events --csv``). Returns {run: {tag: Scalars}}, runs in name order.
    A file cut inside its last record (a crash while writing) is read up to it with a
    RuntimeWarning. Raises ValueError with calf's message for a damaged file, OSError
    for an unreadable one, FileNotFoundError when root_dir is not a directory.
    """
    root = _fspath(root_dir)
    if not os.path.isdir(root):
        raise FileNotFoundError(f"calf.read_scalars: {root}: not a directory")
    runs: dict[str, dict[str, Scalars]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        files = sorted(f for f in filenames if f.startswith(_EVENTS_PREFIX))
        if not files:
            continue
        text, warned = _calf.events_csv([os.path.join(dirpath, f) for f in files])
        for line in warned.splitlines():
            warnings.warn(line, RuntimeWarning, stacklevel=2)
        runs[os.path.relpath(dirpath, root)] = _scalars_of_csv(text)
    return dict(sorted(runs.items()))
