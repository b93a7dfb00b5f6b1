"""A run's summaries: ``read_scalars`` and ``Scalars``, the scalars of a run's events
files as NumPy arrays, read by calf's events reader as TensorBoard reads them."""

from __future__ import annotations

import os
import stat
import warnings
from typing import NamedTuple

import numpy as np

from calf import _calf
from calf._args import _fspath


class Scalars(NamedTuple):
    """One tag's scalar summaries, in the order TensorBoard shows them.

    ``steps``: (N,) int64; ``wall_times``: (N,) float64 seconds since the epoch;
    ``values``: (N,) float32 (the events files' simple_value, exactly).
    """

    steps: np.ndarray
    wall_times: np.ndarray
    values: np.ndarray


_EVENTS_PREFIX = "events.out.tfevents."


def read_scalars(root_dir: str | os.PathLike) -> dict[str, dict[str, Scalars]]:
    """A run's scalar summaries as NumPy arrays, read as TensorBoard reads them.

    As TensorBoard's ``--logdir root_dir``: each directory under ``root_dir`` (itself
    included) that holds events files is a run, named by its path relative to
    ``root_dir`` (``"train"``, ``"eval"`` for a calf run; ``"."`` for root_dir itself),
    its files read in name order as one, with the values a resume wrote again shown
    once (``calf events --csv``). Returns {run: {tag: Scalars}}, runs in name order.
    A file cut inside its last record (a crash while writing) is read up to it with a
    RuntimeWarning. Raises ValueError with calf's message for a damaged file (or one
    that is not a regular file: a FIFO), OSError for an unreadable one,
    FileNotFoundError when root_dir is not a directory.
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
        for f in files:  # a FIFO named like one would block the read until written
            path = os.path.join(dirpath, f)
            if not stat.S_ISREG(os.stat(path).st_mode):
                raise ValueError(f"calf.read_scalars: {path}: not a regular file, so not an "
                                 "events file")
        # the arrays as calf's reader made them: the numbers as stored, no text between
        columns, warned = _calf.events_scalars([os.path.join(dirpath, f) for f in files])
        for line in warned.splitlines():
            warnings.warn(line, RuntimeWarning, stacklevel=2)
        runs[os.path.relpath(dirpath, root)] = {
            tag: Scalars(*cols) for tag, cols in columns.items()
        }
    return dict(sorted(runs.items()))
