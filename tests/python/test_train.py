"""calf.train: the whole job `calf train` runs, from Python.

Its checkpoints must be the bytes `calf train` (the program ctest names in CALF_BINARY)
writes for the same config, on one process and on two; overrides as Python values or
gin text; bad input raises ValueError with calf's file:line message; Ctrl-C (SIGINT to
a child interpreter running calf.train) raises KeyboardInterrupt after the checkpoint
calf writes, as the CLI stops.
"""

from __future__ import annotations

import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest

import calf

from calf_runs import CARTPOLE, CONF_PARAMS, OVERRIDES, calf_train, checkpoints


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("cli") / "run"
    calf_train(root, CONF_PARAMS)
    return root


@pytest.mark.parametrize("nproc", [1, 2])
def test_checkpoints_are_calf_trains(
    tmp_path: pathlib.Path, cli_run: pathlib.Path, nproc: int
) -> None:
    calf.train(CARTPOLE, root_dir=tmp_path / "py", nproc=nproc, overrides=OVERRIDES, quiet=True)
    want, got = checkpoints(cli_run), checkpoints(tmp_path / "py")
    assert len(want) == 2 and got == want
    got_gin = (tmp_path / "py" / "config.gin").read_text().splitlines()
    want_gin = (cli_run / "config.gin").read_text().splitlines()
    if nproc == 1:
        assert got_gin == want_gin
    else:  # the header comment names the launch's process count
        assert [x for x in got_gin if not x.startswith("#")] == [
            x for x in want_gin if not x.startswith("#")
        ]
    # a complete run trains no further: train again leaves the files as they are
    calf.train(root_dir=tmp_path / "py", nproc=nproc, quiet=True)
    assert checkpoints(tmp_path / "py") == want


def test_gin_strings_and_seed(tmp_path: pathlib.Path) -> None:
    calf.train(CARTPOLE, root_dir=tmp_path / "py", overrides=CONF_PARAMS, seed=7, quiet=True)
    calf_train(tmp_path / "cli", [*CONF_PARAMS, "TrainerConfig.random_seed=7"])
    assert checkpoints(tmp_path / "py") == checkpoints(tmp_path / "cli")
    assert "TrainerConfig.random_seed = 7" in (tmp_path / "py" / "config.gin").read_text()


def test_bad_input(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.gin"
    lines = CARTPOLE.read_text().splitlines()
    bad.write_text("\n".join([*lines, "TrainerConfig.unroll_length = -5"]) + "\n")
    with pytest.raises(ValueError, match=re.escape(f"{bad}:{len(lines) + 1}: ")):
        calf.train(bad, root_dir=tmp_path / "a", quiet=True)
    with pytest.raises(ValueError, match="unknown binding 'TrainerConfig.nonsense'"):
        calf.train(CARTPOLE, root_dir=tmp_path / "b", overrides={"TrainerConfig.nonsense": 1})
    with pytest.raises(ValueError, match="nproc must be in"):
        calf.train(CARTPOLE, root_dir=tmp_path / "c", nproc=0)
    with pytest.raises(TypeError, match="nproc must be an integer"):
        calf.train(CARTPOLE, root_dir=tmp_path / "c", nproc=2.0)
    with pytest.raises(ValueError, match="root_dir is empty|--root_dir is empty"):
        calf.train(CARTPOLE, root_dir="")
    with pytest.raises(ValueError, match="seed -1 is out of range"):
        calf.train(CARTPOLE, root_dir=tmp_path / "d", seed=-1)
    # the same with workers: the launcher settles the config before forking
    with pytest.raises(ValueError, match=re.escape(f"{bad}:{len(lines) + 1}: ")):
        calf.train(bad, root_dir=tmp_path / "e", nproc=2, quiet=True)
    assert not (tmp_path / "e" / "train").exists()


CHILD = """
import sys
import calf
try:
    calf.train(sys.argv[1], root_dir=sys.argv[2], nproc=int(sys.argv[3]), overrides={
        "TrainerConfig.num_iterations": 1000000,
        "TrainerConfig.num_checkpoints": 1000000,  # one after every iteration
    })
except KeyboardInterrupt as e:
    print("KeyboardInterrupt:", e, flush=True)
    sys.exit(42)
print("finished", flush=True)
"""


@pytest.mark.parametrize("nproc", [1, 2])
def test_ctrl_c_raises_keyboard_interrupt_after_a_checkpoint(
    tmp_path: pathlib.Path, nproc: int
) -> None:
    root = tmp_path / "run"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(CARTPOLE), str(root), str(nproc)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        # event-driven: the first checkpoint exists once an iteration is done, and the
        # stop handlers were installed before it; the bound only ends a broken run
        first = root / "train" / "algorithm" / "ckpt-1"
        deadline = time.monotonic() + 240
        while not first.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert first.exists(), child.communicate(timeout=60)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=240)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 42, (out, err)
    assert out.startswith("KeyboardInterrupt: calf.train: interrupted"), out
    stopped = re.findall(r"stopped after iteration (\d+), checkpoint written", err)
    assert len(stopped) == 1, err
    n = int(stopped[0])
    assert 1 <= n < 1000000
    names = set(checkpoints(root))
    assert f"ckpt-{n}" in names and f"ckpt-{n + 1}" not in names
    # the checkpoint resumes: a run to iteration n + 1 starts from it
    calf.train(root_dir=root, overrides={"TrainerConfig.num_iterations": n + 1}, quiet=True)
    assert f"ckpt-{n + 1}" in set(checkpoints(root))
