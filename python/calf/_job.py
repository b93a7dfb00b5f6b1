"""The whole job: ``train``, the job ``calf train`` runs (calf's ``calf_train``, --nproc
workers forked from this process included), run to its end (the C side is _job.c)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from calf import _calf
from calf._args import _check_seed, _fspath
from calf._conf import _conf_params, _env_binding
from calf._envs import raise_env_error


def train(
    conf: str | os.PathLike | None = None,
    *,
    root_dir: str | os.PathLike,
    nproc: int = 1,
    overrides: Mapping[str, Any] | Iterable[str] | None = None,
    seed: int | None = None,
    quiet: bool = False,
    env: Any = None,
    trust: bool = False,
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

    ``trust``: a resume unpickles Python envs' states (which can run any code) only when
    this user's key signed them, i.e. this user's calf wrote them; ``trust=True`` accepts
    this once for a checkpoint from elsewhere (another user's run dir, an older calf).
    """
    params = _conf_params(overrides)
    if env is not None:
        params.append(_env_binding(env))
    if seed is not None:
        params.append(f"TrainerConfig.random_seed={_check_seed(seed)}")
    if isinstance(nproc, bool) or not isinstance(nproc, (int, np.integer)):
        raise TypeError(f"calf.train: nproc must be an integer, got {nproc!r}")
    _calf.set_trust_checkpoint(bool(trust))
    try:
        _calf.train(
            _fspath(root_dir), _fspath(conf), params, int(nproc), bool(quiet), env is not None
        )
    except (ValueError, OSError, RuntimeError) as e:
        raise_env_error(e)
        raise
    finally:
        _calf.set_trust_checkpoint(False)
