"""The stepwise trainer: ``Trainer``, a training run in this process stepped one
iteration at a time (calf's ``calf_trainer``), each step's metrics as a dict."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from calf import _calf
from calf._args import _fspath
from calf._conf import _front_params
from calf._envs import raise_env_error


class Trainer:
    """A training run stepped one iteration at a time (calf's stepwise trainer).

    ``conf``: a gin file; or ``conf_text``: the config as gin text (errors name it
    ``<conf_text>:LINE``); both is a ValueError; neither: ROOT/config.gin of an earlier
    run, or, given ``algorithm=``, no file at all. ``algorithm``, ``env``,
    ``total_timesteps``, ``seed``, ``eval_freq``, ``n_eval_episodes`` and
    ``**hyperparameters`` are ``calf.train``'s. ``overrides``: a
    dict of binding -> Python value (bool, int, float, str, tuples of them), written as
    gin, or an iterable of ``"Scope.param=value"`` gin text strings, both as
    ``--conf_param``. The run resumes from the newest valid checkpoint in ``root_dir``
    and holds its lock until ``close()``; stepped to the end it writes the files
    ``calf train`` writes for the same config, byte for byte. ``quiet``: no progress
    lines on stderr. Raises ValueError with calf's message ("file:line: ...") for bad
    input, OSError for I/O failures. One thread at a time may use a trainer. ``trust``:
    as ``calf.train``'s, a resume of Python envs' states this user's calf did not write.
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
        trust: bool = False,
        algorithm: str | None = None,
        total_timesteps: int | None = None,
        seed: int | None = None,
        eval_freq: int | None = None,
        n_eval_episodes: int | None = None,
        **hyperparameters: Any,
    ) -> None:
        self.root_dir: str = _fspath(root_dir)
        conf_text, params = _front_params(
            "calf.Trainer", conf=_fspath(conf), conf_text=conf_text, root_dir=self.root_dir,
            algorithm=algorithm, env=env, total_timesteps=total_timesteps, seed=seed,
            overrides=overrides, hyperparameters=hyperparameters, eval_freq=eval_freq,
            n_eval_episodes=n_eval_episodes)
        _calf.set_trust_checkpoint(bool(trust))
        try:
            self._raw = _calf.Trainer(self.root_dir, _fspath(conf), conf_text, params, bool(quiet))
        finally:
            _calf.set_trust_checkpoint(False)

    def step(self) -> dict[str, float | int]:
        """Run one iteration and return its metrics.

        Keys: ``iteration`` (completed, this one included), ``env_steps`` (of the whole
        run), ``episodes`` (ended in this iteration), ``total_episodes``: ints;
        ``average_return``, ``average_episode_length`` (over this iteration's ended
        episodes, NaN when none), ``eval_return``, ``eval_return_std`` (the population
        std, numpy's), ``eval_episode_length`` (the greedy evaluation's episodes' mean
        return, spread and mean length in env steps; NaN when this iteration did not
        evaluate), ``steps_per_sec``: floats; ``eval_episodes`` (how many the evaluation
        ran, 0 when none): an int; and on iterations that write summaries the
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
