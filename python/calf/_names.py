"""Hyperparameters by the names Stable-Baselines3 and CleanRL give them: the one table
from those names to calf's bindings (``NAMES``), which ``calf.train`` and
``calf.Trainer`` read their short names from and the README's table is printed from
(``markdown()``; tests/python/test_front.py holds the two equal), and the
algorithms by their short names ("ppo" for ``@PPOAlgorithm``)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from calf import _calf

# A target: a binding's name, a tuple of them (each gets the value), or a Derived, a
# value in another unit, converted with the config's other values in effect.


class Derived(NamedTuple):
    """A short name whose value is converted into a binding's unit: ``convert(value,
    cfg)`` gets the config's values in effect (binding name -> value as gin text) once
    every other setting is applied, and returns the binding's value."""

    binding: str
    convert: Callable[[Any, Mapping[str, str]], Any]
    rule: str  # the conversion, for the README
    takes: type = int  # the short name's values: int, or bool


class Name(NamedTuple):
    sb3: str | None      # Stable-Baselines3's argument name, or None
    cleanrl: str | None  # CleanRL's script argument, or None
    to: dict[str, Any]   # algorithm ("ppo", "sac", ...; "*" for all) -> target
    note: str = ""


OFF = ("sac", "td3", "ddpg", "dqn")


def _envs_x_steps(cfg: Mapping[str, str]) -> int:
    return int(cfg["create_environment.num_parallel_environments"]) * int(
        cfg["TrainerConfig.unroll_length"])


def _per_env_buffer(value: Any, cfg: Mapping[str, str]) -> int:
    return max(1, math.ceil(int(value) / int(cfg["create_environment.num_parallel_environments"])))


def _minibatch(value: Any, cfg: Mapping[str, str]) -> int:
    return max(1, _envs_x_steps(cfg) // int(value))


def _updates_from_env_steps(value: Any, cfg: Mapping[str, str]) -> int:
    updates = int(cfg["TrainerConfig.num_updates_per_train_iter"])
    return max(1, round(int(value) * updates / _envs_x_steps(cfg)))


def _for(algos: tuple[str, ...] | str, target: Any) -> dict[str, Any]:
    return {a: target for a in ((algos,) if isinstance(algos, str) else algos)}


NAMES: tuple[Name, ...] = (
    Name("n_envs", "num_envs", {"*": "create_environment.num_parallel_environments"},
         "envs of the whole job (SB3: make_vec_env's n_envs)"),
    Name("n_steps", "num_steps", {"*": "TrainerConfig.unroll_length"},
         "steps each env takes per iteration"),
    Name("train_freq", "train_frequency", _for(OFF, "TrainerConfig.unroll_length"),
         "env steps per env between updates (an int: SB3's (n, 'step'))"),
    Name("n_epochs", "update_epochs", {"ppo": "TrainerConfig.num_updates_per_train_iter"},
         "passes over each iteration's rollout"),
    Name("gradient_steps", None, _for(OFF, "TrainerConfig.num_updates_per_train_iter"),
         "updates per iteration"),
    Name("batch_size", "batch_size", {"*": "TrainerConfig.mini_batch_size"},
         "samples per gradient step (CleanRL's PPO batch_size is the rollout, "
         "num_envs x num_steps: give num_minibatches)"),
    Name(None, "num_minibatches", {"ppo": Derived(
        "TrainerConfig.mini_batch_size", _minibatch,
        "num_envs x num_steps // num_minibatches")}, "minibatches per epoch"),
    Name("learning_rate", "learning_rate", {"*": "Adam.lr"},
         "every network's (actor/, critic/, alpha/ fall back to it): a number, or "
         "SB3's linear schedule (the zoo's `'lin_X'`, or a callable equal to X x "
         "progress_remaining): `Adam.lr`=X with `Adam.lr_schedule='linear'`, iteration k "
         "of N at X(1 - k/N) as CleanRL anneals (SB3's runs at X(1 - (k+1)/N)); other "
         "schedules refused"),
    Name(None, "anneal_lr", {"ppo": Derived(
        "Adam.lr_schedule", lambda v, cfg: "linear" if v else "constant",
        "'linear' if anneal_lr else 'constant'", bool)},
         "CleanRL's annealing: iteration k of N at learning_rate x (1 - k/N)"),
    Name(None, "policy_lr", {"sac": "actor/Adam.lr"}, "SAC's actor"),
    Name(None, "q_lr", {"sac": ("critic/Adam.lr", "alpha/Adam.lr")},
         "SAC's critics and temperature, as CleanRL's"),
    Name("max_grad_norm", "max_grad_norm", {"*": "Adam.gradient_clipping"},
         "clip of the gradient's global norm (0: none)"),
    Name("gamma", "gamma", {"ppo": "PPOLoss.gamma", **_for(OFF, "OneStepTDLoss.gamma")},
         "discount"),
    Name("gae_lambda", "gae_lambda", {"ppo": "PPOLoss.td_lambda"}, "GAE's lambda"),
    Name("clip_range", "clip_coef", {"ppo": "PPOLoss.importance_ratio_clipping"},
         "a number (SB3's schedules refused: calf's clip is constant)"),
    Name("ent_coef", "ent_coef", {"ppo": "PPOLoss.entropy_regularization"},
         "PPO's entropy bonus (SAC's temperature is always tuned)"),
    Name("vf_coef", "vf_coef", {"ppo": "PPOLoss.td_loss_weight"}, "value loss weight"),
    Name("normalize_advantage", "norm_adv", {"ppo": "PPOLoss.normalize_advantages"},
         "over the iteration's whole batch (CleanRL's per minibatch: "
         "`PPOLoss.advantage_normalization_scope='minibatch'`)"),
    Name(None, "clip_vloss", {"ppo": Derived(
        "PPOLoss.value_clipping",
        lambda v, cfg: float(cfg["PPOLoss.importance_ratio_clipping"]) if v else 0.0,
        "clip_coef if clip_vloss else 0", bool)},
         "the value's move from the rollout's value clipped in the value loss"),
    Name("learning_starts", "learning_starts", _for(OFF, "TrainerConfig.initial_collect_steps"),
         "env steps of the whole job with random actions first"),
    Name("buffer_size", "buffer_size", _for(OFF, Derived(
        "TrainerConfig.replay_buffer_length", _per_env_buffer,
        "ceil(buffer_size / num_envs)")), "transitions kept, all envs together"),
    Name("tau", "tau", {"sac": "SacAlgorithm.target_update_tau",
                        "td3": "Td3Algorithm.target_update_tau",
                        "ddpg": "DdpgAlgorithm.target_update_tau",
                        "dqn": "DqnAlgorithm.target_update_tau"},
         "soft target update"),
    Name("target_update_interval", "target_network_frequency", {
        "sac": "SacAlgorithm.target_update_period",
        "ddpg": "DdpgAlgorithm.target_update_period",
        "dqn": Derived("DqnAlgorithm.target_update_period", _updates_from_env_steps,
                       "round(steps x gradient_steps / (num_envs x train_freq))")},
         "DQN: env steps, turned into updates; SAC, DDPG: updates"),
    Name("exploration_fraction", "exploration_fraction",
         {"dqn": "DqnAlgorithm.exploration_fraction"}, "of the run's env steps"),
    Name("exploration_initial_eps", "start_e", {"dqn": "DqnAlgorithm.start_epsilon"}, ""),
    Name("exploration_final_eps", "end_e", {"dqn": "DqnAlgorithm.end_epsilon"}, ""),
    Name("policy_delay", "policy_frequency", {"td3": "Td3Algorithm.policy_delay"},
         "critic updates per actor update"),
    Name("target_policy_noise", "policy_noise", {"td3": "Td3Algorithm.policy_noise"},
         "a fraction of the action range's half"),
    Name("target_noise_clip", "noise_clip", {"td3": "Td3Algorithm.noise_clip"}, ""),
    Name(None, "exploration_noise", {"td3": "Td3Algorithm.exploration_noise"},
         "std, a fraction of the action range's half"),
    Name("net_arch", None, {
        "ppo": ("ActorDistributionNetwork.fc_layer_params", "ValueNetwork.fc_layer_params"),
        **_for(("sac", "td3", "ddpg"), ("actor/ActorDistributionNetwork.fc_layer_params",
                                        "critic/CriticNetwork.joint_fc_layer_params")),
        "dqn": "q/QNetwork.fc_layer_params"},
         "hidden sizes, a list (SB3: policy_kwargs=dict(net_arch=...)); both networks"),
)


# The algorithms that read Adam.lr_schedule (one added later that does not is refused a
# schedule rather than silently trained at a constant lr).
LR_SCHEDULED = ("ppo", "sac", "td3", "ddpg", "dqn")
# progress_remaining where a callable schedule is read: 1 down to 0 in eighths (exact
# binary fractions, so X * p is one rounding)
_PROGRESS = tuple(k / 8 for k in range(8, -1, -1))


def schedule(who: str, name: str, value: Any, algo: str) -> tuple[Any, str | None]:
    """SB3's learning_rate as calf's: (Adam.lr's value, Adam.lr_schedule's or None).

    A number is itself (None: the config's schedule stands). The zoo's ``'lin_X'`` and a
    callable of progress_remaining that equals X x progress_remaining where it is read
    (1, 7/8, ..., 0) are X with 'linear'; a callable constant there is that constant with
    'constant'. Anything else, or a schedule for an algorithm without calf's, is a
    ValueError naming it."""
    if isinstance(value, str):
        m = re.fullmatch(r"lin_([-+0-9.eE]+)", value)
        try:
            start = float(m.group(1)) if m else None
        except ValueError:
            start = None
        if start is None or not math.isfinite(start):
            raise ValueError(
                f"{who}: {name}={value!r}: calf takes a number or SB3's linear schedule "
                "'lin_X' (X a number); other schedules have no calf equivalent")
        sched = "linear"
    elif callable(value):
        try:
            points = [float(value(p)) for p in _PROGRESS]
        except Exception as e:
            raise ValueError(f"{who}: {name}: the schedule raised at a progress_remaining "
                             f"in [0, 1]: {e!r}") from e
        start = points[0]
        if all(v == start for v in points):
            return start, "constant"
        if not all(math.isclose(v, start * p, rel_tol=1e-9, abs_tol=1e-12 * abs(start))
                   for v, p in zip(points, _PROGRESS)):
            raise ValueError(
                f"{who}: {name}={value!r}: calf takes a constant or a linear schedule "
                f"(X x progress_remaining); this one is neither (at progress_remaining "
                f"1, 1/2, 0: {points[0]:g}, {points[4]:g}, {points[8]:g})")
        sched = "linear"
    else:
        return value, None
    if algo not in LR_SCHEDULED:
        raise ValueError(f"{who}: {name}={value!r}: {algo} has no learning-rate schedule "
                         f"in calf (only {', '.join(LR_SCHEDULED)}): give a number")
    return start, sched


def algorithms() -> dict[str, str]:
    """Short name -> the algorithm's choice: {"ppo": "PPOAlgorithm", "sac": ...}, from
    the registry (TrainerConfig.algorithm_ctor's choices)."""
    choices = _choices("TrainerConfig.algorithm_ctor")
    return {c.removesuffix("Algorithm").lower(): c for c in choices}


def _choices(binding: str) -> list[str]:
    for row in _calf.bindings():
        if row[0] == binding:
            return row[5].split("|")
    raise KeyError(binding)


def algorithm_choice(name: str) -> str:
    """The registry's name of an algorithm given as "ppo", "PPO", "PPOAlgorithm" or
    "@PPOAlgorithm"; ValueError naming the known ones otherwise."""
    known = algorithms()
    if not isinstance(name, str):
        raise TypeError(f"calf: algorithm must be a str such as 'ppo', got {name!r}")
    bare = name.removeprefix("@")
    if bare.lower() in known:
        return known[bare.lower()]
    if bare in known.values():
        return bare
    raise ValueError(f"calf: unknown algorithm {name!r} (known: {', '.join(known)})")


def short_of(choice: str) -> str:
    """"ppo" for "PPOAlgorithm"."""
    return choice.removesuffix("Algorithm").lower()


def lookup(short: str) -> Name | None:
    """The table's row for an SB3 or CleanRL name, or None."""
    for row in NAMES:
        if short in (row.sb3, row.cleanrl):
            return row
    return None


def target(row: Name, algo: str) -> Any:
    """The row's target for the algorithm ("ppo", ...), or None when it has none."""
    return row.to.get(algo, row.to.get("*"))


def list_bindings(algorithm: str | None = None) -> list[dict[str, Any]]:
    """Every binding calf reads, as ``calf train --list-bindings`` lists them.

    ``algorithm`` ("ppo", "sac", ...; None: all of them): the bindings a config choosing
    it reads (calf's and the algorithm's own, not the other algorithms'), each with the
    default that algorithm gives it. Each a dict: ``name`` ("PPOLoss.gamma"), ``type``
    ("int", "float", "bool", "str", "int tuple", "float tuple", "reference", "conv layers"),
    ``default`` (gin text), ``default_from`` (the algorithm's name when the default is
    the algorithm's own, else "calf"), ``help``, ``optional`` (takes None), ``choices``
    (a list, or None), ``fallback`` (the unscoped binding a scoped one takes when that
    is set, or None), ``algorithm`` (the algorithm whose own row it is, or None),
    ``names`` (SB3's and CleanRL's names for it in the README's table, for that
    algorithm when one is given).
    """
    choice = algorithm_choice(algorithm) if algorithm is not None else None
    algo = short_of(choice) if choice else None
    calf_defaults = {row[0]: row[2] for row in _calf.bindings(None)}
    out = []
    for name, type_, default, help_, optional, choices, fallback, owner in _calf.bindings(choice):
        if choice is not None and owner not in (None, choice):
            continue
        names = []
        for row in NAMES:
            targets = [target(row, algo)] if algo else list(row.to.values())
            for tgt in targets:
                bound = (tgt.binding,) if isinstance(tgt, Derived) else (
                    tgt if isinstance(tgt, tuple) else (tgt,))
                for n in (row.sb3, row.cleanrl) if name in bound else ():
                    if n and n not in names:
                        names.append(n)
        out.append({
            "name": name, "type": type_, "default": default,
            "default_from": choice if choice and default != calf_defaults[name] else "calf",
            "help": help_, "optional": bool(optional),
            "choices": choices.split("|") if choices else None, "fallback": fallback,
            "algorithm": owner, "names": names,
        })
    return out


def markdown() -> str:
    """The README's table: one line per row, the targets per algorithm."""
    lines = ["| SB3 | CleanRL | calf binding | algorithms | note |",
             "| --- | --- | --- | --- | --- |"]
    for row in NAMES:
        # group the algorithms by target, in the table's order
        groups: dict[str, list[str]] = {}
        for algo, tgt in row.to.items():
            if isinstance(tgt, Derived):
                text = f"`{tgt.binding}` = {tgt.rule}"
            elif isinstance(tgt, tuple):
                text = " and ".join(f"`{t}`" for t in tgt)
            else:
                text = f"`{tgt}`"
            groups.setdefault(text, []).append("all" if algo == "*" else algo)
        cells = "<br>".join(groups)
        algos = "<br>".join(", ".join(a) for a in groups.values())
        sb3 = f"`{row.sb3}`" if row.sb3 else ""
        cleanrl = f"`{row.cleanrl}`" if row.cleanrl else ""
        lines.append(f"| {sb3} | {cleanrl} | {cells} | {algos} | {row.note} |")
    return "\n".join(lines) + "\n"

