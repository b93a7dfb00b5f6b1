"""calf.Trainer: the stepwise trainer from Python.

A tiny CartPole run stepped to its end from Python must write the checkpoint bytes
`calf train` writes for the same config (the program ctest names in CALF_BINARY); the
metrics are checked on their values; bad configs and overrides raise with calf's message.
"""

from __future__ import annotations

import math
import pathlib
import threading

import numpy as np
import pytest

import calf
import calf._conf

from calf_runs import CARTPOLE, CONF_PARAMS, OVERRIDES, calf_train, checkpoints

E, T = 64, 32  # the envs (calf_runs.OVERRIDES) and ppo_cartpole.gin's unroll length


def test_stepped_run_writes_calf_train_bytes(tmp_path: pathlib.Path) -> None:
    calf_train(tmp_path / "cli", CONF_PARAMS)
    metrics = []
    with calf.Trainer(CARTPOLE, root_dir=tmp_path / "py", overrides=OVERRIDES) as t:
        assert (t.iteration, t.done) == (0, False)
        while not t.done:
            metrics.append(t.step())
            assert t.iteration == len(metrics)
        with pytest.raises(ValueError):
            t.step()  # the run is done
    assert t.closed
    want, got = checkpoints(tmp_path / "cli"), checkpoints(tmp_path / "py")
    assert len(want) >= 2 and got.keys() == want.keys()
    for name in want:
        assert got[name] == want[name], name
    assert (tmp_path / "py" / "config.gin").read_bytes() == (
        tmp_path / "cli" / "config.gin"
    ).read_bytes()

    assert [m["iteration"] for m in metrics] == [1, 2, 3, 4]
    assert [m["env_steps"] for m in metrics] == [E * T * k for k in (1, 2, 3, 4)]
    total = 0
    for m in metrics:
        total += m["episodes"]
        assert m["total_episodes"] == total
        assert m["episodes"] > 0  # CartPole's early episodes are short
        assert 8 <= m["average_return"] <= 500
        assert m["average_episode_length"] == m["average_return"]  # reward 1 a step
        assert m["steps_per_sec"] > 0
        assert isinstance(m["PPOLoss/pg_loss"], float) and math.isfinite(m["PPOLoss/pg_loss"])
        assert 0 < m["PPOLoss/entropy"] <= math.log(2) + 1e-6
    assert [math.isnan(m["eval_return"]) for m in metrics] == [True, False, True, False]
    assert 8 <= metrics[1]["eval_return"] <= 500


def test_resume_and_checkpoint(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "run"
    with calf.Trainer(CARTPOLE, root_dir=root, overrides=OVERRIDES) as t:
        t.step()
        t.checkpoint()
    assert "ckpt-1" in checkpoints(root)
    # neither conf nor conf_text: ROOT/config.gin, resumed at ckpt-1
    with calf.Trainer(root_dir=root) as t:
        assert t.iteration == 1
        while not t.done:
            t.step()
    calf_train(tmp_path / "cli", CONF_PARAMS)
    assert checkpoints(root)["ckpt-4"] == checkpoints(tmp_path / "cli")["ckpt-4"]


def test_conf_text_and_gin_strings(tmp_path: pathlib.Path) -> None:
    text = CARTPOLE.read_text()
    with calf.Trainer(
        conf_text=text,
        root_dir=tmp_path / "py",
        overrides=CONF_PARAMS,
    ) as t:
        while not t.done:
            t.step()
    calf_train(tmp_path / "cli", CONF_PARAMS)
    assert checkpoints(tmp_path / "py") == checkpoints(tmp_path / "cli")


def test_gin_values() -> None:
    gin = calf._conf._gin_value  # the overrides as gin text (python/calf/_conf.py)
    assert gin("b", True) == "True" and gin("b", False) == "False"
    assert gin("s", "CartPole-v1") == '"CartPole-v1"'
    assert gin("s", 'say "hi"') == "'say \"hi\"'"
    assert gin("t", (64, 64)) == "(64, 64)" and gin("t", (3,)) == "(3,)"
    assert gin("n", 3e-4) == "0.0003" and gin("n", 150) == "150"
    with pytest.raises(ValueError, match="x.y: nan is not a finite number"):
        gin("x.y", float("nan"))
    with pytest.raises(ValueError, match="x.y: cannot write a dict"):
        gin("x.y", {})


def test_errors(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="unknown binding 'TrainerConfig.nonsense'"):
        calf.Trainer(CARTPOLE, root_dir=tmp_path / "a", overrides={"TrainerConfig.nonsense": 3})
    with pytest.raises(ValueError, match="'TrainerConfig.num_iterations' expects a number"):
        calf.Trainer(CARTPOLE, root_dir=tmp_path / "b",
                     overrides={"TrainerConfig.num_iterations": "many"})
    with pytest.raises(ValueError, match=r"<conf_text>:2: "):
        calf.Trainer(conf_text="TrainerConfig.num_iterations = 3\nnot gin at all (\n",
                     root_dir=tmp_path / "c")
    bad = tmp_path / "bad.gin"
    bad.write_text(CARTPOLE.read_text() + "TrainerConfig.unroll_length = -5\n")
    with pytest.raises(ValueError, match=f"{bad}:"):
        calf.Trainer(bad, root_dir=tmp_path / "d")
    with pytest.raises(TypeError, match=r"conf_params\[0\] must be a str"):
        calf._calf.Trainer(str(tmp_path / "e"), str(CARTPOLE), None, [3])
    # a failed open leaves nothing locked: the same root opens now
    with calf.Trainer(CARTPOLE, root_dir=tmp_path / "a", overrides=OVERRIDES) as t:
        # the root dir is locked while a run is open
        with pytest.raises(ValueError, match="is in use by another run"):
            calf.Trainer(CARTPOLE, root_dir=tmp_path / "a", overrides=OVERRIDES)
        t.close()
        with pytest.raises(ValueError, match="closed"):
            t.step()


def test_two_threads_train_their_own_runs(tmp_path: pathlib.Path) -> None:
    """Two runs stepped from two threads at once (the GIL released, no lock between
    them) write the bytes each writes alone, and each run's events file holds each of
    its iterations once, with the values its own steps returned."""
    errors: list[BaseException] = []
    metrics: dict[str, list[dict[str, float | int]]] = {"t0": [], "t1": []}

    def run(root: pathlib.Path) -> None:
        try:
            with calf.Trainer(CARTPOLE, root_dir=root, overrides=OVERRIDES) as t:
                while not t.done:
                    metrics[root.name].append(t.step())
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(tmp_path / f"t{i}",)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    calf_train(tmp_path / "cli", CONF_PARAMS)
    want = checkpoints(tmp_path / "cli")
    assert checkpoints(tmp_path / "t0") == want and checkpoints(tmp_path / "t1") == want
    for i in range(2):  # each run's summaries in its own events file
        events = list((tmp_path / f"t{i}" / "train").glob("events.out.tfevents.*"))
        assert len(events) == 1 and events[0].stat().st_size > 0
        scalars = calf.read_scalars(tmp_path / f"t{i}")["train"]
        for tag in ("Metrics/EnvironmentSteps", "Metrics/AverageReturn", "PPOLoss/pg_loss"):
            assert scalars[tag].steps.tolist() == [1, 2, 3, 4], tag
        assert scalars["Metrics/EnvironmentSteps"].values.tolist() == [E * T * k for k in (1, 2, 3, 4)]
        assert scalars["PPOLoss/pg_loss"].values.tolist() == [
            float(np.float32(m["PPOLoss/pg_loss"])) for m in metrics[f"t{i}"]
        ]
