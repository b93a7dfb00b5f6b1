"""Python environments trained by calf's C trainer.

``register_env(make_env)`` turns a factory of Gymnasium-API environments into a calf env
class (C hooks in _pyenv.c): each of a job's envs is a ``make_env()`` object created by
the process that owns it, seeded once with ``reset(seed=random_seed + i)`` for global env
index i (evaluation envs: ``random_seed + 2**40 + k``) and reset unseeded afterwards, so
its trajectory depends on (seed, i, actions) only. Checkpoints hold each env's pickle,
signed with this user's key (_ckpt_key.py): a resume unpickles only what that key
signed, unless trusted.
"""

from __future__ import annotations

import os
import pickle
import pickletools
import sys
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from calf import _calf
from calf._ckpt_key import load_key

_NO_LIMIT = 2**31 - 1  # the longest time limit calf's step counters hold
_MIN_STATE_BYTES = 4096
_MAX_STATE_BYTES = 1 << 20


class EnvError(RuntimeError):
    """A Python environment raised (or returned a wrong value) while calf stepped it.

    The message names the env's class and global index; ``__cause__`` is the env's own
    exception, with its traceback, when it was raised in this process.
    """


def _factory_name(make_env: Callable[[], Any]) -> str:
    module = getattr(make_env, "__module__", None) or "?"
    qual = getattr(make_env, "__qualname__", None) or type(make_env).__qualname__
    return f"py:{module}:{qual}"


# what a set may hold and still pickle in the same order in every process: values whose
# hash is their own (not str's, salted per process, nor an object's, its address)
_STABLE_HASH_OPS = frozenset({"BININT", "BININT1", "BININT2", "INT", "LONG", "LONG1", "LONG4",
                              "BINFLOAT", "FLOAT", "NEWTRUE", "NEWFALSE", "MEMOIZE", "PUT",
                              "BINPUT", "LONG_BINPUT", "FRAME"})


def _hash_ordered(data: bytes) -> bool:
    """Whether pickle `data` holds a set or frozenset of anything but numbers: its items
    come out in hash order, which differs between processes (PYTHONHASHSEED), so the
    same state pickles to different bytes."""
    ops, marks = [], []
    for op, _arg, _pos in pickletools.genops(data):
        if op.name in ("ADDITEMS", "FROZENSET") and marks:
            if any(o not in _STABLE_HASH_OPS for o in ops[marks[-1] + 1:]):
                return True
        if pickletools.markobject in op.stack_before and marks:
            marks.pop()
        if op.name == "MARK":
            marks.append(len(ops))
        ops.append(op.name)
    return False


def _hash_seed_fixed() -> bool:
    return os.environ.get("PYTHONHASHSEED", "random") not in ("random", "")


def _describe(space: Any) -> str:
    """The space as Gymnasium prints it (``Box(-1.0, 1.0, (3,), float32)``,
    ``Dict('a': Discrete(2))``): its own repr where it has one, else its class name."""
    if space is None:
        return "None"
    if type(space).__repr__ is not object.__repr__:
        return repr(space)
    return type(space).__name__


class _Obs(NamedTuple):
    """An observation space as calf's env spec takes it (include/calf/env.h)."""

    dim: int                              # obs_dim: the values of one observation
    shape3: tuple[int, int, int]          # obs_shape (H, W, C), or (0, 0, 0): a flat vector
    dtype: int                            # 0: float32, 1: uint8 (CALF_DTYPE_F32, _U8)
    high: int                             # uint8: the largest value (obs_high), else 0
    shape: tuple[int, ...] | None         # a Box's own shape, what reset/step return
    keys: tuple[Any, ...] | None          # a Dict's keys, in the order they are flattened
    part_shapes: tuple[tuple[int, ...], ...] | None  # the shape of each key's Box
    part_u8: tuple[bool, ...] | None = None  # whether each key's Box holds bytes


# Observation spaces calf cannot train. Those Gymnasium can flatten into a Box become
# trainable inside gymnasium.wrappers.FlattenObservation; these it cannot flatten.
_NOT_FLATTENABLE = frozenset({"Text", "Graph", "Sequence", "OneOf"})
_FLATTENABLE = frozenset({"Tuple", "Discrete", "MultiDiscrete", "MultiBinary", "Dict"})


def _box_part(space: Any) -> tuple[tuple[int, ...], bool, int] | None:
    """(shape, bytes, high) of a Box: bytes for dtype uint8 or bool, whose values calf keeps
    as bytes, high their largest (255 unless the bounds say less); None if not a Box."""
    shape = getattr(space, "shape", None)
    if type(space).__name__ != "Box" or shape is None:
        return None
    shape = tuple(int(d) for d in shape)
    dtype = np.dtype(getattr(space, "dtype", np.float32))
    if dtype not in (np.dtype(np.uint8), np.dtype(np.bool_)):
        return shape, False, 0
    high = np.asarray(getattr(space, "high", 255)).astype(np.float64)
    top = 1 if dtype == np.bool_ else int(high.max()) if high.size else 255
    return shape, True, top if 1 <= top <= 255 else 255


def _obs_spec(name: str, space: Any, supported: str) -> _Obs:
    """The spec of an observation space: a Box of any rank (its values in C order; rank 3
    an image (H, W, C) and rank 2 one of a channel (H, W, 1), which conv layers can read;
    uint8 and bool Boxes kept as bytes), or a Dict of Boxes, flattened in the Dict's key
    order, each Box in C order (what ``gymnasium.spaces.flatten`` does; Gymnasium sorts a
    Dict's keys). Else ValueError naming the space, and the wrapper that makes it a Box
    where there is one."""
    box = _box_part(space)
    if box is not None:
        shape, is_bytes, high = box
        dim = int(np.prod(shape, dtype=np.int64))
        if dim < 1 or any(d < 1 for d in shape):
            raise ValueError(f"{name}: observation_space Box of shape {shape} is empty; {supported}")
        shape3 = shape if len(shape) == 3 else shape + (1,) if len(shape) == 2 else (0, 0, 0)
        return _Obs(dim, shape3, int(is_bytes), high if is_bytes else 0, shape, None, None)
    kind = type(space).__name__
    parts = getattr(space, "spaces", None)
    if kind == "Dict" and isinstance(parts, Mapping) and len(parts) > 0:
        boxes = [(key, _box_part(part)) for key, part in parts.items()]
        for key, part in boxes:
            if part is None or not all(d >= 1 for d in part[0]):
                raise ValueError(
                    f"{name}: observation_space {_describe(space)} is not supported: its part "
                    f"{key!r} is {_describe(parts[key])}, not a Box; {supported}; "
                    "gymnasium.wrappers.FlattenObservation makes the whole a Box"
                )
        is_bytes = all(part[1] for _key, part in boxes)
        dim = sum(int(np.prod(part[0], dtype=np.int64)) for _key, part in boxes)
        high = max(part[2] for _key, part in boxes) if is_bytes else 0
        return _Obs(dim, (0, 0, 0), int(is_bytes), high, None,
                    tuple(key for key, _part in boxes), tuple(part[0] for _key, part in boxes),
                    tuple(bool(part[1]) for _key, part in boxes))
    flattenable = getattr(space, "is_np_flattenable", None)
    if flattenable is None:
        flattenable = kind in _FLATTENABLE and kind not in _NOT_FLATTENABLE
    how = ("wrap the env in gymnasium.wrappers.FlattenObservation, which makes it a Box"
           if flattenable else "no Gymnasium wrapper makes it a Box")
    raise ValueError(
        f"{name}: observation_space {_describe(space)} is not supported; {supported}; {how}"
    )


def _spaces(name: str, env: Any) -> tuple[_Obs, int, Any, Any]:
    """(observation spec, num_actions, low, high) from env's spaces, or ValueError saying
    what is supported. Spaces are read by their Gymnasium class names and attributes, so
    Gymnasium need not be importable here."""
    supported = (
        "calf trains envs with a Box observation space (any rank; float, or uint8 kept as "
        "bytes) or a Dict of such Boxes, and a Discrete (start 0), MultiDiscrete (1-D, "
        "start 0) or 1-D Box action space with finite bounds"
    )
    obs_space = getattr(env, "observation_space", None)
    act_space = getattr(env, "action_space", None)
    obs = _obs_spec(name, obs_space, supported)
    kind = type(act_space).__name__
    if kind == "Discrete":
        n, start = int(act_space.n), int(getattr(act_space, "start", 0))
        if start != 0 or n < 1:
            raise ValueError(
                f"{name}: action_space Discrete({n}, start={start}) is not supported; {supported}"
            )
        return obs, n, None, None
    if kind == "MultiDiscrete":
        nvec = _nvec(name, act_space, supported)
        return obs, int(sum(nvec)), None, None
    ashape = getattr(act_space, "shape", None)
    if kind == "Box" and ashape is not None and len(ashape) == 1 and ashape[0] >= 1:
        low = np.asarray(act_space.low, dtype=np.float32).reshape(-1)
        high = np.asarray(act_space.high, dtype=np.float32).reshape(-1)
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(low < high)):
            raise ValueError(
                f"{name}: action_space bounds must be finite with low < high (calf clips "
                f"actions to them); {supported}"
            )
        return obs, 0, low, high
    raise ValueError(f"{name}: action_space {_describe(act_space)} is not supported; {supported}")


def _nvec(name: str, act_space: Any, supported: str) -> list[int]:
    """A MultiDiscrete action space's sizes, or ValueError: calf takes a 1-D one whose
    sub-actions start at 0 (Gymnasium's ``MultiDiscrete(nvec, start=...)``)."""
    nvec = np.asarray(act_space.nvec)
    start = np.asarray(getattr(act_space, "start", 0))
    if nvec.ndim != 1 or nvec.size < 1 or np.any(nvec < 1) or np.any(start != 0):
        raise ValueError(
            f"{name}: action_space {_describe(act_space)} is not supported; {supported}"
        )
    return [int(n) for n in nvec]


def _without_mask(space: Any) -> Any:
    """A Dict observation space without its ``action_mask`` key (calf reads the mask
    from there and trains on the rest): the one remaining space when one remains, else a
    Dict of the others; any other space as it is."""
    parts = getattr(space, "spaces", None)
    if type(space).__name__ != "Dict" or not isinstance(parts, dict) or "action_mask" not in parts:
        return space
    rest = {k: v for k, v in parts.items() if k != "action_mask"}
    if len(rest) == 1:
        return next(iter(rest.values()))
    return type(space)(rest)


def _action_mask_of(env: Any) -> bool:
    """Whether env masks its actions: a Dict observation space with an ``action_mask``
    key (PettingZoo's classic envs), or an ``action_mask`` in the info of ``reset``
    (Gymnasium's Taxi, CliffWalking). Where an env has both, the observation's is read:
    it belongs to the observation the policy acts on."""
    parts = getattr(getattr(env, "observation_space", None), "spaces", None)
    if isinstance(parts, dict) and "action_mask" in parts:
        return True
    out = env.reset(seed=0)
    info = out[1] if isinstance(out, tuple) and len(out) == 2 else None
    return isinstance(info, dict) and "action_mask" in info


class _MaskedView:
    """env's spaces as calf trains them: the observation without its action mask."""

    def __init__(self, env: Any) -> None:
        self.observation_space = _without_mask(getattr(env, "observation_space", None))
        self.action_space = getattr(env, "action_space", None)


def register_env(
    make_env: Callable[[], Any],
    name: str | None = None,
    *,
    max_episode_steps: int | None = None,
    state_bytes: int | None = None,
    quiet: bool = False,
) -> str:
    """Make ``make_env`` (a callable with no arguments returning a new Gymnasium-API env)
    a calf environment class and return its name, to put in a config's
    ``create_environment.env_name`` (``calf.train(env=...)`` and ``calf.Trainer(env=...)``
    do this for you).

    Observations: a Box of any rank, its values read in C order (a rank-3 Box is an image
    (H, W, C) and a rank-2 one an image of one channel, as conv layers read them); a
    uint8 or bool Box is kept as bytes in rollouts, replay buffers and checkpoints. A Dict
    of Boxes is one flat vector: the Dict's keys in its own order (Gymnasium sorts them),
    each Box's values in C order, which is ``gymnasium.spaces.flatten``'s vector and
    ``FlattenObservation``'s; kept as bytes when every Box is uint8 or bool. Tuple, Text,
    Graph and other spaces are refused, saying whether ``FlattenObservation`` makes them
    a Box.

    ``name``: default ``"py:MODULE:QUALNAME"`` of the factory. ``max_episode_steps``:
    default the env's ``spec.max_episode_steps`` (``gymnasium.make`` sets it); with
    neither, calf adds no time limit: the env's own truncation ends its episodes, and
    evaluation and play end one at ``TrainerConfig.eval_max_episode_steps`` (27,000)
    at the latest, warning once. ``state_bytes``: room each env's pickle has in a
    checkpoint; default eight times a fresh env's pickle, at least 4 KiB. One env is made,
    reset and pickled here to read its spaces and size; an env that cannot be pickled is
    said so on stderr (a resume then starts new episodes in its envs), and so is one whose
    pickle holds a set of strings or objects, which pickles in hash order: identical
    runs then write different checkpoints unless PYTHONHASHSEED is fixed. Registering the
    same name again with the same spaces replaces the factory. A MultiDiscrete action
    space trains as a factored categorical (PPO). An env masks its actions by returning
    ``info["action_mask"]`` from ``reset`` and ``step``, or with an ``action_mask`` key
    in a Dict observation (which is then left out of what the policy sees; a Dict
    with one other key trains on that key's space); the observation's wins when both
    are there. A mask is one number per action (nonzero: valid), or for MultiDiscrete
    either the concatenation or one array per sub-action. Videos and ``render()``
    draw an env through its own ``render()`` (make it with ``render_mode="rgb_array"``),
    scaled to the size asked, at its ``metadata["render_fps"]``. A checkpoint's pickles
    are signed with this user's key (``$CALF_KEY_FILE``, else
    ``$XDG_CONFIG_HOME/calf/key`` or ``~/.config/calf/key``, made here on first use).
    """
    return _register_env(make_env, name, max_episode_steps, state_bytes, quiet,
                         "max_episode_steps=")


def _register_env(
    make_env: Callable[[], Any],
    name: str | None,
    max_episode_steps: int | None,
    state_bytes: int | None,
    quiet: bool,
    limit_option: str,
) -> str:
    """register_env's work; ``limit_option`` is how the caller spells the time limit in
    its messages (``max_episode_steps=``, or the CLI's ``--env_py_max_episode_steps N``)."""
    if not callable(make_env):
        raise TypeError(f"calf.register_env: make_env must be callable, got {make_env!r}")
    name = name or _factory_name(make_env)
    try:
        env = make_env()
    except Exception as e:
        raise EnvError(f"{name}: the env factory raised {type(e).__name__}: {e}") from e
    try:
        obs, num_actions, low, high = _spaces(name, _MaskedView(env))
        act_space = getattr(env, "action_space", None)
        nvec = (_nvec(name, act_space, "") if type(act_space).__name__ == "MultiDiscrete"
                else None)
        masked = num_actions > 0 and _action_mask_of(env)
        if max_episode_steps is None:
            # without one, the env's own truncation ends its episodes, and evaluation
            # ends them at TrainerConfig.eval_max_episode_steps at the latest
            limit = getattr(getattr(env, "spec", None), "max_episode_steps", None)
            max_episode_steps = int(limit) if limit else _NO_LIMIT
        if not 1 <= max_episode_steps <= _NO_LIMIT:
            raise ValueError(
                f"{name}: {limit_option.split()[0].rstrip('=')} {max_episode_steps} not in "
                "[1, 2^31)"
            )
        if state_bytes is None:
            try:
                env.reset(seed=0)
                data = pickle.dumps(env, protocol=4)
                size = len(data)
                if not quiet and not _hash_seed_fixed() and _hash_ordered(data):
                    print(
                        f"calf: env {name} pickles a set of strings or objects, whose order "
                        "follows this process's hashing: identical runs can write different "
                        "checkpoints (run with PYTHONHASHSEED=0, or hold a sorted list; a set "
                        "of objects hashed by identity differs even then)",
                        file=sys.stderr,
                    )
            except Exception as e:  # an env that cannot be pickled still trains
                if not quiet:
                    print(
                        f"calf: env {name} cannot be pickled ({type(e).__name__}: {e}): "
                        "checkpoints will not hold its state, and a resume starts new "
                        "episodes in its envs",
                        file=sys.stderr,
                    )
                size = 0
            state_bytes = min(_MAX_STATE_BYTES, max(_MIN_STATE_BYTES, -(-8 * size // 4096) * 4096))
        fps = (getattr(env, "metadata", None) or {}).get("render_fps") or 0
    finally:
        close = getattr(env, "close", None)
        if close:
            close()
    key, key_file = load_key()
    return _calf.register_env(
        name, make_env, obs.dim, num_actions, low, high, max_episode_steps, int(state_bytes),
        float(fps), key, key_file, obs_shape=obs.shape3, obs_dtype=obs.dtype,
        obs_high=obs.high, box_shape=obs.shape, dict_keys=obs.keys,
        dict_shapes=obs.part_shapes, nvec=nvec, masked=masked, dict_u8=obs.part_u8,
    )


def raise_env_error(err: BaseException) -> None:
    """Re-raise calf's error ``err`` as EnvError chained to the env's own exception when
    an env in this process raised one; else do nothing."""
    cause = _calf.take_env_error()
    if isinstance(cause, KeyboardInterrupt):  # Ctrl-C while an env's Python code ran
        raise KeyboardInterrupt(f"interrupted inside an env: {err}") from cause
    if cause is not None:
        raise EnvError(str(err)) from cause
