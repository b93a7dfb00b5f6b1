"""The whole job: ``train``, the job ``calf train`` runs (calf's ``calf_train``, --nproc
workers forked from this process included), run to its end (the C side is _job.c); with
a callback, the stepwise trainer run to its end in this process."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from calf import _calf
from calf._args import _fspath
from calf._conf import _front_params
from calf._envs import raise_env_error

# What an "evaluation" callback gets from its iteration's metrics (Trainer.step's keys).
_EVAL_KEYS = ("iteration", "env_steps", "eval_return", "eval_return_std",
              "eval_episode_length", "eval_episodes")

def train(
    conf: str | os.PathLike | None = None,
    *,
    root_dir: str | os.PathLike,
    algorithm: str | None = None,
    env: Any = None,
    total_timesteps: int | None = None,
    nproc: int = 1,
    overrides: Mapping[str, Any] | Iterable[str] | None = None,
    seed: int | None = None,
    quiet: bool = False,
    trust: bool = False,
    conf_text: str | None = None,
    callback: Callable[[dict[str, Any]], Any] | None = None,
    eval_freq: int | None = None,
    n_eval_episodes: int | None = None,
    **hyperparameters: Any,
) -> None:
    """Run the training job ``calf train`` runs, to its end, in this process.

    ``calf.train(algorithm="ppo", env="CartPole-v1", total_timesteps=100_000,
    root_dir="runs/x", seed=1, n_steps=32, ...)`` needs no gin file: ``algorithm`` is
    "ppo", "sac", "td3", "dqn" or "ddpg" (or calf's ``PPOAlgorithm``), each with its own
    defaults; ``env`` a registered env's name or a factory; ``total_timesteps`` the
    run's env steps (``TrainerConfig.num_env_steps``, whatever the config says of
    iterations); ``**hyperparameters`` by SB3's or CleanRL's names (``n_steps``,
    ``ent_coef``, ``learning_starts``, ...: the README's table) or by calf's binding
    names (``**{"PPOLoss.gamma": 0.98}``). A name the algorithm has no binding for, or
    two names for one binding, is a TypeError.

    ``conf``: a gin file; ``conf_text``: the config as gin text (errors name it
    ``<conf_text>:LINE``); both is a ValueError; neither: ROOT/config.gin of an earlier
    run, or none at all when ``algorithm`` is given. ``overrides``: as
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

    ``eval_freq``: evaluate the greedy policy on separate envs (indices 2**40 + k) every
    this many env steps, rounded up to whole iterations, and after the last
    (``TrainerConfig.evaluate``, ``eval_interval``); ``n_eval_episodes`` episodes each.

    ``callback``: called with each iteration's metrics after the iteration, the dict
    ``Trainer.step`` returns with ``"event": "iteration"`` added (an iteration that
    evaluated has a number, not NaN, in ``"eval_return"``); and after each evaluation,
    once more, with ``{"event": "evaluation", "iteration", "env_steps", "eval_return",
    "eval_return_std", "eval_episode_length", "eval_episodes"}``: what SB3's
    EvalCallback reports, the mean and population std of the greedy episodes' returns,
    their mean length in env steps and their number, at the run's env steps then. When it
    returns False the run writes a checkpoint and stops there (calling train again
    resumes from it); anything else goes on. A callback runs the job in this process,
    one iteration at a time (``calf.Trainer``, which writes the same bytes): it takes
    ``nproc=1``. An exception it raises ends the run after a checkpoint and goes on to
    the caller.
    """
    if isinstance(nproc, bool) or not isinstance(nproc, (int, np.integer)):
        raise TypeError(f"calf.train: nproc must be an integer, got {nproc!r}")
    root = _fspath(root_dir)
    conf = _fspath(conf)
    conf_text, params = _front_params(
        "calf.train", conf=conf, conf_text=conf_text, root_dir=root, algorithm=algorithm,
        env=env, total_timesteps=total_timesteps, seed=seed, overrides=overrides,
        hyperparameters=hyperparameters, eval_freq=eval_freq, n_eval_episodes=n_eval_episodes)
    if callback is not None:
        if not callable(callback):
            raise TypeError(f"calf.train: callback must be callable, got {callback!r}")
        if int(nproc) != 1:
            raise ValueError(
                f"calf.train: a callback runs the job in this process, one iteration at a "
                f"time (calf.Trainer, the same bytes): give nproc=1, not {nproc}")
        _train_stepwise(conf, conf_text, root, params, quiet, trust, callback)
        return
    _calf.set_trust_checkpoint(bool(trust))
    try:
        _calf.train(
            root, conf, params, int(nproc), bool(quiet), env is not None, conf_text
        )
    except (ValueError, OSError, RuntimeError) as e:
        raise_env_error(e)
        raise
    finally:
        _calf.set_trust_checkpoint(False)


def _train_stepwise(conf: str | None, conf_text: str | None, root: str, params: list[str],
                    quiet: bool, trust: bool, callback: Callable[[dict[str, Any]], Any]) -> None:
    """The job run to its end by the stepwise trainer, ``callback`` after each iteration
    and each evaluation; a checkpoint where it stops early (False, an exception,
    Ctrl-C)."""
    from calf._trainer import Trainer  # _trainer imports what this module does

    with Trainer(conf, root_dir=root, conf_text=conf_text, overrides=params, quiet=quiet,
                 trust=trust) as t:
        stop = False
        try:
            while not t.done and not stop:
                m = t.step()
                stop = callback({**m, "event": "iteration"}) is False
                if not stop and not math.isnan(m["eval_return"]):
                    stop = callback({"event": "evaluation", **{k: m[k] for k in _EVAL_KEYS}}) is False
        except BaseException:
            if not t.closed and t.iteration > 0:
                try:
                    t.checkpoint()  # what the run had when it stopped is kept
                except (ValueError, OSError):
                    pass  # a failed run: its last checkpoint stands; the first error goes on
            raise
        if stop:
            t.checkpoint()
