"""A run's config from Python: overrides (Python values or gin text) as calf's
``--conf_param`` strings, and the binding that names a Python env factory's class; what
``Trainer`` and ``train`` share."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from calf._envs import register_env


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
