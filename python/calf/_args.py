"""How calf's Python functions take their arguments: paths as the str calf's C library
takes, seeds checked against the range calf's random streams take."""

from __future__ import annotations

import os

import numpy as np


def _check_seed(seed: int) -> int:
    """A seed as calf takes it: an integer in 0 .. 2**64 - 1."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"calf: seed must be an integer, got {seed!r}")
    if not 0 <= int(seed) < 2**64:
        raise ValueError(f"calf: seed {seed} is out of range 0..2**64-1")
    return int(seed)


def _fspath(path: str | os.PathLike | None) -> str | None:
    """A path argument as the str calf takes (None stays None)."""
    return None if path is None else os.fsdecode(os.fspath(path))
