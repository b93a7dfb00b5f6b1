"""Trained policies: ``load_policy`` and ``Policy``, a run's greedy policy (calf's
``calf_policy``, what ``calf play`` runs) acting on NumPy arrays, or sampled from its
distribution with a seed, and its videos."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from calf import _calf
from calf._args import _check_seed, _fspath
from calf._envs import register_env


class Policy:
    """A trained run's greedy policy: ``pol(obs)`` computes what ``calf play`` computes.

    Attributes: ``obs_dim``; ``discrete``; ``num_actions`` (discrete: the choices, else
    0); ``action_dim`` (continuous: floats per action, else 0); ``action_dims`` and
    ``action_nvec`` (MultiDiscrete: the sub-actions and their (D,) int64 sizes, else 0
    and None); ``masked`` (the env masks its actions); ``env_name``;
    ``checkpoint`` (the file opened); ``iteration`` (its iteration); ``stochastic``
    (True when ``deterministic=False`` draws from a distribution); ``state_size``
    (floats of state each row carries: a recurrent policy's; else 0). One thread at a
    time may call a policy; different policies are independent.

    A recurrent policy (PPO with ``lstm_hidden_size`` or ``gru_hidden_size``) keeps a
    state per row, as ``calf play`` keeps one per episode: call ``reset(num_rows)`` when
    the episodes start (the first call does it itself), then once per step with every
    row, and ``reset(done)`` for the rows whose episode ended and began again. Greedy
    and sampled calls (``deterministic=False``) step the same state, as the training's
    rollout steps it while it samples.
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
        self.action_dims: int = self._raw.action_dims
        self.action_nvec: np.ndarray | None = self._raw.action_nvec
        self.masked: bool = self._raw.masked
        self.env_name: str = self._raw.env_name
        self.checkpoint: str = self._raw.checkpoint
        self.iteration: int = self._raw.iteration
        self.stochastic: bool = self._raw.stochastic
        self._form = _observation_form(self.env_name, self.obs_dim)
        self.state_size: int = self._raw.state_size

    def __call__(self, obs: Any, action_mask: Any = None, deterministic: bool = True,
                 seed: int | None = None) -> np.ndarray:
        """The greedy actions for ``obs``: a batch of observations as the env returns them,
        (B, *shape) (an image env's (B, H, W, C) uint8, a Python env's Box in its own
        shape; a Python env's Dict as a dict of (B, *shape) arrays, one per key, flattened
        in the key order calf trains in), or one observation (shape), or flat rows (B,
        obs_dim) or (obs_dim,); numbers of any dtype, converted to float32 (uint8 exactly).
        A wrong shape is a ValueError naming the shape expected. With
        ``deterministic=False``, actions drawn from the policy's
        distribution instead, as the training draws them (PPO's categorical, masked or
        per sub-action, or Gaussian; SAC's squashed Gaussian or softmax(min Q / alpha);
        DQN's, TD3's and DDPG's policies are deterministic, ``stochastic`` False, and
        draw their greedy actions). ``seed`` (sampling only): row r draws from calf's
        stream (seed, r), each call going on from the last until the next seed; the
        policy starts seeded with 0, so the same seed and the same calls give the same
        actions.

        Returns (B,) int64 for a discrete policy, (B, D) int64 for a MultiDiscrete one,
        (B, action_dim) float32 for a continuous one (the policy's actions, not clipped
        to the env's bounds); for a single row, () int64, (D,) int64 or (action_dim,)
        float32. ``action_mask``: (B, num_actions) (or one (num_actions,) row) of bools or
        numbers, nonzero where an action is valid, as the env returns it (a VecEnv's
        ``infos["action_mask"]``): the greedy action among the valid ones, as ``calf play``
        picks it (or drawn among them); None: every action valid. Row r's action depends
        only on row r (and its stream).
        Observations are those the env returns: the policy normalizes them itself when
        the run did.
        """
        if seed is not None:
            seed = _check_seed(seed)
            if deterministic:
                raise ValueError("calf.Policy: seed= is for sampling: give "
                                 "deterministic=False with it")
        o, one_row = _rows(obs, self.obs_dim, *self._form)
        mask = None
        if action_mask is not None:
            if not self.discrete:
                raise ValueError("calf.Policy: action_mask is for discrete policies")
            m = np.asarray(action_mask)
            if m.ndim == 1 and one_row:
                m = m[np.newaxis]
            if m.shape != (o.shape[0], self.num_actions):
                raise ValueError(
                    f"calf.Policy: action_mask must have shape ({o.shape[0]}, "
                    f"{self.num_actions}), got {np.shape(action_mask)}"
                )
            mask = np.ascontiguousarray(m != 0, dtype=np.uint8)
        if self.action_dims:
            out = np.empty((o.shape[0], self.action_dims), dtype=np.int32)
        elif self.discrete:
            out = np.empty(o.shape[0], dtype=np.int32)
        else:
            out = np.empty((o.shape[0], self.action_dim), dtype=np.float32)
        if deterministic:
            self._raw.greedy(o, out, mask)
        else:
            self._raw.sample(o, out, seed, mask)
        actions = out.astype(np.int64) if self.discrete else out
        return actions[0] if one_row else actions

    def reset(self, rows: Any) -> None:
        """Start episodes: ``rows`` an int, that many rows each starting one (their state
        zeroed); else a (B,) bool or int array, the rows where it is nonzero starting one
        (an env reset after its episode ended), the others keeping their state (B at most
        the rows of the last full reset). A policy without memory: nothing to do. Raises
        ValueError with calf's message for more rows than the state has."""
        if isinstance(rows, (int, np.integer)):
            self._raw.reset(int(rows))
            return
        which = np.asarray(rows)
        if which.ndim != 1 or which.dtype.kind not in "biu":
            raise ValueError(
                f"calf.Policy.reset: rows must be an int or a (B,) bool array, got "
                f"{which.dtype} of shape {which.shape}"
            )
        self._raw.reset(which.shape[0], np.ascontiguousarray(which != 0, dtype=np.uint8))

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


def _observation_form(
    env_name: str, obs_dim: int
) -> tuple[tuple[int, ...], tuple[Any, ...] | None, tuple[tuple[int, ...], ...] | None]:
    """(shape, dict keys, dict shapes) of env_name's observations: a Python env's Box
    shape, an image's (H, W, C), else (obs_dim,); a Python env's Dict keys and their
    shapes, in the order calf flattens them (else None). (obs_dim,) and None for an env
    this process has not registered."""
    try:
        form = _calf.obs_form(env_name)
    except ValueError:
        return (obs_dim,), None, None
    shape = form["box_shape"] or form["shape"] or (obs_dim,)
    return tuple(int(d) for d in shape), form["dict_keys"], form["dict_shapes"]


def _numbers(a: np.ndarray, what: str) -> np.ndarray:
    if a.dtype.kind not in "fiub":
        raise TypeError(f"calf.Policy: {what} must be numbers, got dtype {a.dtype}")
    return a


def _rows(
    obs: Any,
    obs_dim: int,
    shape: tuple[int, ...],
    keys: tuple[Any, ...] | None,
    shapes: tuple[tuple[int, ...], ...] | None,
) -> tuple[np.ndarray, bool]:
    """obs as (B, obs_dim) C-contiguous float32 rows (what calf_policy_greedy reads, the
    floats the trainer's network got) and whether it was one observation."""
    if keys is not None and isinstance(obs, Mapping):
        parts, batch = [], None
        for key, part in zip(keys, shapes):
            part = tuple(part)
            if key not in obs:
                raise ValueError(f"calf.Policy: obs has no key {key!r} (the env's Dict has "
                                 f"{list(keys)})")
            a = _numbers(np.asarray(obs[key]), f"obs[{key!r}]")
            b = None if a.shape == part else a.shape[0] if a.shape[1:] == part else -1
            if b == -1 or (parts and b != batch):
                raise ValueError(
                    f"calf.Policy: obs[{key!r}] must have shape (B, {', '.join(map(str, part))}"
                    f") with B as the other keys' (or {part} for one observation), got "
                    f"{a.shape}")
            batch = b
            size = int(np.prod(part, dtype=np.int64))
            parts.append(a.reshape(1 if b is None else b, size).astype(np.float32))
        return np.ascontiguousarray(np.concatenate(parts, axis=1)), batch is None
    o = np.asarray(obs)
    if o.shape == shape or (o.ndim == 1 and o.shape[0] == obs_dim):
        one_row, rows = True, o.reshape(1, obs_dim)
    elif o.shape[1:] == shape or (o.ndim == 2 and o.shape[1] == obs_dim):
        one_row, rows = False, o.reshape(o.shape[0], obs_dim)
    else:
        want = ", ".join(map(str, shape))
        flat = "" if shape == (obs_dim,) else f", or flat rows (B, {obs_dim}) or ({obs_dim},)"
        raise ValueError(
            f"calf.Policy: obs must have shape (B, {want}) or ({want}{',' if len(shape) == 1 else ''})"
            f"{flat}, got {np.shape(obs)}"
        )
    return np.ascontiguousarray(_numbers(rows, "obs"), dtype=np.float32), one_row


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
