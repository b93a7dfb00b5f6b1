"""A run's config from Python: overrides (Python values or gin text) as calf's
``--conf_param`` strings, the binding that names a Python env factory's class, and the
front door's arguments (algorithm, env, total_timesteps, SB3's and CleanRL's names,
evaluation) turned into both; what ``Trainer`` and ``train`` share."""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from calf import _calf, _names
from calf._args import _check_seed
from calf._envs import register_env


def _is_reference(binding: str) -> bool:
    """Whether binding takes a reference (``TrainerConfig.algorithm_ctor = @SacAlgorithm``)."""
    return any(b["name"] == binding and b["type"] == "reference"
               for b in _names.list_bindings())


def _gin_value(binding: str, value: Any) -> str:
    """A Python value as gin text: bools True/False, strs quoted (``"@Name"`` for a
    binding that takes a reference: @Name), tuples and lists as gin tuples, numbers by
    repr; raises ValueError naming the binding for anything else."""
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, str) and value.startswith("@") and _is_reference(binding):
        return value
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


def _resolved(conf: str | None, conf_text: str | None, root_dir: str | None,
              params: list[str]) -> dict[str, str]:
    """The config's values in effect (binding -> gin text) for these arguments, as the
    run will read them: the file, the text, or ROOT/config.gin of an earlier run."""
    if conf is None and conf_text is None and root_dir is not None:
        prior = os.path.join(root_dir, "config.gin")
        if os.path.exists(prior):
            conf = prior
    values = _calf.config_values(conf, conf_text, params)
    return {name: value for name, (value, _origin) in values.items()}


def _count(who: str, what: str, value: Any, low: int = 1) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{who}: {what} must be an integer, got {value!r}")
    if int(value) < low:
        raise ValueError(f"{who}: {what} must be at least {low}, got {value}")
    return int(value)


def _front_params(
    who: str,
    *,
    conf: str | None,
    conf_text: str | None,
    root_dir: str,
    algorithm: str | None,
    env: Any,
    total_timesteps: int | None,
    seed: int | None,
    overrides: Mapping[str, Any] | Iterable[str] | None,
    hyperparameters: Mapping[str, Any],
    eval_freq: int | None,
    n_eval_episodes: int | None,
) -> tuple[str | None, list[str]]:
    """What ``calf.train`` and ``calf.Trainer`` hand calf: the config text (None: the
    file ``conf``, or ROOT/config.gin) and the --conf_param strings, in this order: the
    algorithm, ``overrides``, the env, ``hyperparameters`` (binding names as they are,
    short names through the table in _names.py, converted ones last, with the rest in
    effect), the budget, the seed, the evaluation."""
    if conf is not None and conf_text is not None:
        raise ValueError(f"{who}: conf and conf_text are both given: give one of them "
                         "(a gin file, or the config as gin text)")
    front = algorithm is not None or env is not None or total_timesteps is not None
    if conf is None and conf_text is None and front:
        prior = os.path.join(root_dir, "config.gin")
        # a call that names the algorithm defines the whole config; one that does not
        # resumes an earlier run's config.gin where there is one, else starts from calf's
        if algorithm is not None or not os.path.exists(prior):
            conf_text = ""
    params: list[str] = []
    if algorithm is not None:
        params.append(f"TrainerConfig.algorithm_ctor=@{_names.algorithm_choice(algorithm)}")
    params += _conf_params(overrides)
    if env is not None:
        params.append(_env_binding(env))

    set_by: dict[str, str] = {}  # binding -> the argument that set it

    def put(binding: str, value: Any, arg: str) -> None:
        if binding in set_by:
            raise TypeError(f"{who}: {arg} and {set_by[binding]} both set {binding}: give one")
        set_by[binding] = arg
        params.append(f"{binding}={_gin_value(binding, value)}")

    derived: list[tuple[str, Any, _names.Derived]] = []
    short = {k: v for k, v in hyperparameters.items() if "." not in k}
    for binding, value in hyperparameters.items():
        if "." in binding:
            put(binding, value, binding)
    if short:
        algo = _names.short_of(
            _resolved(conf, conf_text, root_dir, params)["TrainerConfig.algorithm_ctor"]
            .removeprefix("@"))
        for name, value in short.items():
            row = _names.lookup(name)
            if row is None:
                known = [n for r in _names.NAMES for n in (r.sb3, r.cleanrl) if n]
                near = difflib.get_close_matches(name, known, n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                raise TypeError(
                    f"{who}: unknown hyperparameter {name!r}{hint}; it takes SB3's and "
                    "CleanRL's names (the README's table, calf._names.markdown()) and "
                    "calf's binding names ('PPOLoss.gamma': calf.list_bindings())")
            tgt = _names.target(row, algo)
            if tgt is None:
                raise TypeError(f"{who}: {name} has no calf binding for {algo} (it has one "
                                f"for {', '.join(row.to)})")
            if name == "learning_rate":  # SB3's schedules, where calf has one
                value, sched = _names.schedule(who, name, value, algo)
                if sched is not None:
                    put("Adam.lr_schedule", sched, name)
            elif callable(value) or (isinstance(value, str) and value.startswith("lin_")):
                raise ValueError(f"{who}: {name}={value!r}: SB3's schedules are taken for "
                                 f"learning_rate alone; calf's {name} is a constant: give "
                                 "a number")
            if isinstance(tgt, _names.Derived):
                derived.append((name, value, tgt))
            else:
                for binding in (tgt if isinstance(tgt, tuple) else (tgt,)):
                    put(binding, list(value) if name == "net_arch" else value, name)
    if derived:
        cfg = _resolved(conf, conf_text, root_dir, params)
        for name, value, tgt in derived:
            if tgt.takes is bool:
                if not isinstance(value, (bool, np.bool_)):
                    raise TypeError(f"{who}: {name} must be a bool, got {value!r}")
            elif isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{who}: {name} must be an integer, got {value!r}")
            put(tgt.binding, tgt.convert(value, cfg), name)
    if total_timesteps is not None:
        steps = _count(who, "total_timesteps", total_timesteps)
        # one budget: the env steps, whatever the config says of iterations
        params += [f"TrainerConfig.num_env_steps={steps}", "TrainerConfig.num_iterations=0"]
    if seed is not None:
        params.append(f"TrainerConfig.random_seed={_check_seed(seed)}")
    if n_eval_episodes is not None:
        params.append("TrainerConfig.num_eval_episodes="
                      f"{_count(who, 'n_eval_episodes', n_eval_episodes)}")
    if eval_freq is not None:
        every = _count(who, "eval_freq", eval_freq)
        cfg = _resolved(conf, conf_text, root_dir, params)
        per = int(cfg["create_environment.num_parallel_environments"]) * int(
            cfg["TrainerConfig.unroll_length"])
        params += ["TrainerConfig.evaluate=True",
                   f"TrainerConfig.eval_interval={max(1, -(-every // per))}"]
    return conf_text, params
