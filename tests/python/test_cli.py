"""python3 -m calf: the calf program run by the extension, subcommands and flags alike.

Each command's stdout, stderr and exit status are compared with the calf program's (the
one ctest names in CALF_BINARY), and a training through it writes its checkpoints.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from calf import _calf
from calf_runs import CALF, CARTPOLE, checkpoints

PLUGIN = os.environ.get("CALF_PLUGIN_EXAMPLE")


def both(args: list[str], cwd: pathlib.Path | None = None) -> tuple:
    """(the calf program's, python3 -m calf's) (status, stdout, stderr) for args."""
    runs = []
    for cmd in ([CALF, *args], [sys.executable, "-m", "calf", *args]):
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
        runs.append((r.returncode, r.stdout, r.stderr))
    return runs[0], runs[1]


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["--help"],
        [],
        ["nonsense"],
        ["envs"],
        ["env", "CartPole-v1", "--seed", "3", "--index", "2", "--steps", "40"],
        ["env", "Pendulum-v1", "--steps", "5"],
        ["env", "NoSuchEnv-v0"],
        ["train", "--help"],
        ["train", "--list-bindings"],
        ["train", "--root_dir"],
        ["train", "--bogus"],
        ["play", "--help"],
        ["export", "--help"],
        ["events", "--help"],
        ["events"],
        ["plot", "--help"],
    ],
)
def test_same_output_as_calf(args: list[str]) -> None:
    cli, py = both(args)
    assert py == cli


# every command of the calf program's table, from which its parser and --help derive
COMMANDS = _calf.cli_commands()


@pytest.mark.parametrize("name", [c[0] for c in COMMANDS])
def test_every_command_same_help_and_errors(name: str) -> None:
    for args in ([name, "--help"], [name, "-h"], [name, "--bogus"], [name, "--env_lib"]):
        cli, py = both(args)
        assert py == cli


def test_command_table() -> None:
    """The table's commands are those calf --help lists; each command's --help shows
    every option the table describes, and each option's kind is one the parser knows."""
    status, usage, _ = both(["--help"])[0]
    assert status == 0
    section = usage.split("commands:\n")[1].split("\n\n")[0]
    listed = [line.split()[0] for line in section.splitlines() if not line.startswith("   ")]
    assert listed == [c[0] for c in COMMANDS]
    for name, summary, options in COMMANDS:
        assert f"  {name:<8} {summary}" in usage
        names = [o[0] for o in options]
        assert len(set(names)) == len(names), name
        status, help_text, _ = both([name, "--help"])[0]
        assert status == 0
        for option, kind, text in options:
            assert kind in ("flag", "text", "integer", "unsigned", "number", "choice")
            if text is not None:
                assert f"  {option}" in help_text and text.splitlines()[0] in help_text


def test_env_py_goes_where_env_lib_goes() -> None:
    """python3 -m calf's --env_py takes its commands from the table: those with --env_lib."""
    with_env_lib = [c[0] for c in COMMANDS if any(o[0] == "--env_lib" for o in c[2])]
    assert with_env_lib == ["train", "play", "export", "env", "envs"]
    r = subprocess.run([sys.executable, "-m", "calf", "events", "--env_py", "m:f"],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr == f"calf: --env_py is for {', '.join(with_env_lib)}, not 'events'\n"


@pytest.mark.skipif(not PLUGIN, reason="no plug-in example built (CALF_PLUGIN_EXAMPLE unset)")
def test_env_lib_plugin() -> None:
    cli, py = both(["envs", "--env_lib", PLUGIN])
    assert cli[0] == 0 and py == cli


def test_train_play_export_events(tmp_path: pathlib.Path) -> None:
    """A run trained by each, then played, exported and read by each: the same files
    and the same output."""
    params = ["--conf_param", "TrainerConfig.num_iterations=3"]
    for name, cmd in (("cli", [CALF]), ("py", [sys.executable, "-m", "calf"])):
        r = subprocess.run(
            [*cmd, "train", "--quiet", "--root_dir", str(tmp_path / name), "--conf",
             str(CARTPOLE), "--nproc", "2", *params],
            capture_output=True, text=True,
        )
        assert r.returncode == 0, r.stderr
    ck = {name: checkpoints(tmp_path / name) for name in ("cli", "py")}
    assert ck["cli"] and ck["py"] == ck["cli"]
    root = str(tmp_path / "cli")
    cli, py = both(["play", "--root_dir", root, "--num_episodes", "3"])
    assert cli[0] == 0 and py == cli
    cli, py = both(["export", "--root_dir", root])
    assert cli[0] == 0 and "calf_policy_act" in cli[1] and py == cli
    events = sorted(str(p) for p in (tmp_path / "cli" / "train").glob("events.out.tfevents.*"))
    cli, py = both(["events", "--csv", *events])
    assert cli[0] == 0 and cli[1].startswith("tag,step,wall_time,value\n") and py == cli
    cli, py = both(["plot", root, "-o", "-"])
    assert cli[0] == 0 and py == cli
