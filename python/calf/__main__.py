"""``python3 -m calf``: the calf program, with its subcommands and flags, run in this
interpreter by the extension module (the same C code as the ``calf`` executable, which
parses every option of its command table), plus this host's own
``--env_py MODULE:FUNCTION``: a factory of Gymnasium-API envs, imported from the command
line (never from a config) and registered as env ``py:MODULE:FUNCTION`` (with
``--env_py_max_episode_steps N`` and ``--env_py_state_bytes N`` as register_env's
arguments), and ``--trust_checkpoint``: a resume of train may unpickle Python envs' states
that this user's calf did not write (calf.train's trust=True)."""

from __future__ import annotations

import importlib
import os
import signal
import sys

import calf
from calf import _calf, _envs


def _commands_taking(option: str) -> tuple[str, ...]:
    """The calf program's commands whose options include `option`, in its table's order."""
    return tuple(
        name for name, _summary, options in _calf.cli_commands()
        if any(o[0] == option for o in options)
    )


# a Python env goes where a plug-in's env goes: to the commands that make environments
_ENV_PY_COMMANDS = _commands_taking("--env_lib")


def _option(args: list[str], i: int, name: str) -> tuple[str | None, int]:
    """The value of option `name` at args[i] (``--name V`` or ``--name=V``) and how many
    items it takes; (None, 0) when args[i] is another argument."""
    a = args[i]
    if a.startswith(name + "="):
        return a[len(name) + 1 :], 1
    if a == name:
        if i + 1 >= len(args):
            raise ValueError(f"{name} needs a value")
        return args[i + 1], 2
    return None, 0


_ENV_PY_INTS = ("--env_py_max_episode_steps", "--env_py_state_bytes")


def _take_env_py(args: list[str]) -> tuple[list[str], list[str], dict[str, int]]:
    """args without --env_py SPEC and the --env_py_* integer options; the SPECs; those
    integers by option name."""
    rest, specs, ints = [], [], {}
    i = 0
    while i < len(args):
        v, n = _option(args, i, "--env_py")
        if n:
            specs.append(v)
            i += n
            continue
        for name in _ENV_PY_INTS:
            v, n = _option(args, i, name)
            if n:
                try:
                    ints[name] = int(v)
                except ValueError:
                    raise ValueError(f"{name} {v}: not an integer") from None
                i += n
                break
        else:
            rest.append(args[i])
            i += 1
    return rest, specs, ints


def _register(spec: str, ints: dict[str, int]) -> str:
    """Import MODULE, take FUNCTION and register it as env py:MODULE:FUNCTION."""
    module, _, func = spec.partition(":")
    if not module or not func:
        raise ValueError(f"--env_py {spec}: expected MODULE:FUNCTION, e.g. mymodule:make_env")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python3 -m` itself: the current directory
    try:
        mod = importlib.import_module(module)
    except Exception as e:
        raise ValueError(f"--env_py {spec}: cannot import {module}: {type(e).__name__}: {e}") from e
    factory = mod
    for part in func.split("."):
        factory = getattr(factory, part, None)
        if factory is None:
            raise ValueError(f"--env_py {spec}: {module} has no {func}")
    return _envs._register_env(factory, f"py:{spec}",
                               ints.get("--env_py_max_episode_steps"),
                               ints.get("--env_py_state_bytes"), False,
                               "--env_py_max_episode_steps N")


def main(argv: list[str] | None = None) -> int:
    """Run ``calf ARGS...`` (argv: ARGS, default ``sys.argv[1:]``); return its exit status."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        args, specs, ints = _take_env_py(args)
        cmd = args[0] if args else ""
        if specs and cmd not in _ENV_PY_COMMANDS:
            raise ValueError(f"--env_py is for {', '.join(_ENV_PY_COMMANDS)}, not '{cmd}'")
        if len(specs) > 1 and cmd == "train":
            raise ValueError("train takes one --env_py (the env the job trains)")
        trust = "--trust_checkpoint" in args
        if trust and cmd != "train":
            raise ValueError(f"--trust_checkpoint is for train, not '{cmd}'")
        args = [a for a in args if a != "--trust_checkpoint"]
        names = [_register(s, ints) for s in specs]
    except (ValueError, TypeError, OSError, calf.EnvError) as e:
        print(f"calf: {e}", file=sys.stderr)
        return 2
    if names and cmd == "train":
        # the job's env; config.gin records the name, and a resume names --env_py again
        args += ["--conf_param", f'create_environment.env_name="{names[0]}"']
    _calf.set_print_tracebacks(bool(names))
    if any(a == "--env_lib" or a.startswith("--env_lib=") for a in args):
        calf._export_calf_to_plugins()  # the plug-in calls back into calf_*
    sys.stdout.flush()
    sys.stderr.flush()
    # Ctrl-C as the calf program has it: the default action, except while train runs,
    # which installs its own handlers (a checkpoint, then exit status 130)
    old = signal.signal(signal.SIGINT, signal.SIG_DFL)
    _calf.set_trust_checkpoint(trust)
    try:
        return _calf.cli_main(["calf", *args], bool(names))
    finally:
        _calf.set_trust_checkpoint(False)
        signal.signal(signal.SIGINT, old)


if __name__ == "__main__":
    sys.exit(main())
