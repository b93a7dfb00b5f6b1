"""calf.read_scalars: a run's summaries as NumPy arrays, as TensorBoard reads them.

Checked against `calf events --csv` (the program ctest names in CALF_BINARY) value for
value, on a run resumed part-way (whose repeated values TensorBoard shows once), on a
file cut inside its last record, on a damaged one, and on a FIFO named like one.
"""

from __future__ import annotations

import csv
import os
import pathlib
import subprocess
import threading

import numpy as np
import pytest

import calf

from calf_runs import CALF, CARTPOLE


def events_files(d: pathlib.Path) -> list[str]:
    return sorted(str(p) for p in d.glob("events.out.tfevents.*"))


def calf_events_csv(files: list[str]) -> dict[str, list[tuple[int, float, float]]]:
    out = subprocess.run([CALF, "events", "--csv", *files], check=True, capture_output=True,
                         text=True).stdout
    rows = list(csv.reader(out.splitlines()))
    assert rows[0] == ["tag", "step", "wall_time", "value"]
    by_tag: dict[str, list[tuple[int, float, float]]] = {}
    for tag, step, wall, value in rows[1:]:
        by_tag.setdefault(tag, []).append((int(step), float(wall), float(value)))
    return by_tag


@pytest.fixture(scope="module")
def resumed_run(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """Six iterations, then a second launch resuming from the checkpoint of iteration 3:
    it writes 4..6 again, and TensorBoard shows those once, the second launch's."""
    root = tmp_path_factory.mktemp("scalars") / "run"
    base = ["TrainerConfig.num_checkpoints=2", "TrainerConfig.eval_interval=2",
            "TrainerConfig.num_eval_episodes=2"]
    calf.train(CARTPOLE, root_dir=root, quiet=True,
               overrides=[*base, "TrainerConfig.num_iterations=6"])
    # resume from ckpt-3: take the later checkpoint away, then train to 6 again
    (root / "train" / "algorithm" / "ckpt-6").unlink()
    calf.train(root_dir=root, quiet=True)
    assert len(events_files(root / "train")) == 2
    return root


def test_equal_to_calf_events_csv(resumed_run: pathlib.Path) -> None:
    runs = calf.read_scalars(resumed_run)
    assert list(runs) == ["eval", "train"]
    for name, tags in runs.items():
        want = calf_events_csv(events_files(resumed_run / name))
        assert list(tags) == list(want)
        for tag, s in tags.items():
            assert isinstance(s, calf.Scalars)
            assert s.steps.dtype == np.int64 and s.wall_times.dtype == np.float64
            assert s.values.dtype == np.float32
            assert s.steps.tolist() == [r[0] for r in want[tag]]
            assert s.wall_times.tolist() == [r[1] for r in want[tag]]
            assert s.values.tolist() == [np.float32(r[2]) for r in want[tag]]
            # the numbers as stored, bit for bit (-0.0 included), as the CSV reads back
            assert s.values.tobytes() == np.array([r[2] for r in want[tag]], np.float32).tobytes()
            assert s.wall_times.tobytes() == np.array([r[1] for r in want[tag]]).tobytes()
    ret = runs["train"]["Metrics/AverageReturn"]
    assert ret.steps.tolist() == [1, 2, 3, 4, 5, 6]  # 4..6 once, from the second launch
    assert np.all(np.diff(ret.wall_times) >= 0) and np.all(ret.values > 0)
    assert runs["eval"]["Metrics/AverageReturn"].steps.tolist() == [2, 4, 6]
    # a run directory itself, as TensorBoard's --logdir names it
    assert list(calf.read_scalars(resumed_run / "train")) == ["."]


def test_cut_and_damaged_files(resumed_run: pathlib.Path, tmp_path: pathlib.Path) -> None:
    src = pathlib.Path(events_files(resumed_run / "eval")[0])
    data = src.read_bytes()
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / src.name).write_bytes(data[:-3])
    with pytest.warns(RuntimeWarning, match="last record cut at offset"):
        got = calf.read_scalars(cut)["."]
    want = calf_events_csv(events_files(cut))
    assert {t: s.steps.tolist() for t, s in got.items()} == {
        t: [r[0] for r in rows] for t, rows in want.items()
    }
    bad = tmp_path / "bad"
    bad.mkdir()
    damaged = bytearray(data)
    damaged[len(data) // 2] ^= 0xFF
    (bad / src.name).write_bytes(bytes(damaged))
    with pytest.raises(ValueError, match=f"{src.name}.*offset"):
        calf.read_scalars(bad)
    with pytest.raises(FileNotFoundError, match="not a directory"):
        calf.read_scalars(tmp_path / "missing")


def test_a_fifo_named_like_an_events_file_is_refused(tmp_path: pathlib.Path) -> None:
    """A FIFO that nothing writes, named like an events file, is refused naming it; its
    open used to wait for a writer for ever (issue 40, item 13). The read runs in a
    thread so that a wait fails the test instead of hanging it."""
    run = tmp_path / "run" / "train"
    run.mkdir(parents=True)
    fifo = run / "events.out.tfevents.0000000001.000000.host.1.0"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            calf.read_scalars(tmp_path / "run")
            outcome.append(None)
        except BaseException as e:  # reported by the test's thread
            outcome.append(e)

    th = threading.Thread(target=read, daemon=True)
    th.start()
    th.join(timeout=120)
    assert outcome, "read_scalars waited on the FIFO"
    assert isinstance(outcome[0], ValueError)
    assert f"{fifo}: not a regular file" in str(outcome[0])
