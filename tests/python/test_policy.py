"""calf.load_policy: a run's greedy policy acting on NumPy arrays.

Tiny runs are trained with the calf program (ctest names it in CALF_BINARY); the
policy's actions are compared with `calf play --dump_actions`, bit for bit, on played
episodes' observations and on rows far outside them (`--observations`).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import threading

import numpy as np
import pytest

import calf

CALF = os.environ.get("CALF_BINARY", "calf")
SRC = pathlib.Path(__file__).resolve().parents[2]


def calf_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CALF, *args], check=True, capture_output=True, text=True)


def train(root: pathlib.Path, conf: str, *params: str) -> None:
    cmd = ["train", "--quiet", "--root_dir", str(root), "--conf", str(SRC / "examples" / conf)]
    for p in ("TrainerConfig.evaluate=False", *params):
        cmd += ["--conf_param", p]
    calf_run(*cmd)


def read_dump(path: pathlib.Path, obs_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """A --dump_actions file: (rows, obs_dim) float32 observations and the actions'
    columns as text (each %.9g, which reads back as the same float)."""
    rows = [line.split() for line in path.read_text().splitlines()]
    obs = np.array([r[:obs_dim] for r in rows], dtype=np.float32)
    return obs, np.array([r[obs_dim:] for r in rows])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pathlib.Path]:
    base = tmp_path_factory.mktemp("runs")
    train(base / "cartpole", "ppo_cartpole.gin", "TrainerConfig.num_iterations=3")
    train(base / "pendulum", "ppo_pendulum.gin", "TrainerConfig.num_iterations=2",
          "TrainerConfig.num_env_steps=0")
    train(base / "pendulum_norm", "ppo_pendulum.gin", "TrainerConfig.num_iterations=2",
          "TrainerConfig.num_env_steps=0", "TrainerConfig.normalize_observations=True")
    return {"cartpole": base / "cartpole", "pendulum": base / "pendulum",
            "pendulum_norm": base / "pendulum_norm"}


@pytest.mark.parametrize("run", ["cartpole", "pendulum", "pendulum_norm"])
def test_actions_equal_calf_play(runs: dict[str, pathlib.Path], run: str,
                                 tmp_path: pathlib.Path) -> None:
    root = runs[run]
    with calf.load_policy(root) as pol:
        od = pol.obs_dim
        played = tmp_path / "played"
        calf_run("play", "--root_dir", str(root), "--num_episodes", "2",
                 "--dump_actions", str(played))
        obs, _ = read_dump(played, od)
        # rows far outside the episodes' (normalization clipping, saturated outputs)
        far = np.concatenate([obs * 10, obs * -1000]).astype(np.float32)
        far_file, far_dump = tmp_path / "far.obs", tmp_path / "far.dump"
        far_file.write_text("".join(" ".join(f"{x:.9g}" for x in r) + "\n" for r in far))
        calf_run("play", "--root_dir", str(root), "--observations", str(far_file),
                 "--dump_actions", str(far_dump))
        for dump in (played, far_dump):
            o, want = read_dump(dump, od)
            got = pol(o)
            if pol.discrete:
                assert got.dtype == np.int64 and got.shape == (len(o),)
                np.testing.assert_array_equal(got, want[:, 0].astype(np.int64))
            else:
                assert got.dtype == np.float32 and got.shape == (len(o), pol.action_dim)
                # bit for bit: compare the float32 bit patterns
                np.testing.assert_array_equal(got.view(np.uint32),
                                              want.astype(np.float32).view(np.uint32))
            # one row at a time gives the same actions as the batch
            singles = np.array([pol(row) for row in o[:7]])
            np.testing.assert_array_equal(singles, got[:7])
        assert len(o) > 0


def test_attributes(runs: dict[str, pathlib.Path]) -> None:
    with calf.load_policy(runs["cartpole"]) as pol:
        assert (pol.obs_dim, pol.discrete, pol.num_actions, pol.action_dim) == (4, True, 2, 0)
        assert pol.env_name == "CartPole-v1"
        assert pol.iteration == 3
        assert pathlib.Path(pol.checkpoint).name == "ckpt-3"
        assert pol(np.zeros(4)).shape == ()
        assert pol(np.zeros((0, 4), dtype=np.float32)).shape == (0,)
    assert pol.closed
    pol.close()  # a second close does nothing
    with pytest.raises(ValueError, match="closed"):
        pol(np.zeros(4))
    with calf.load_policy(runs["pendulum"]) as pol:
        assert (pol.obs_dim, pol.discrete, pol.num_actions, pol.action_dim) == (3, False, 0, 1)
        assert pol.env_name == "Pendulum-v1"
        assert pol(np.zeros(3)).shape == (1,)


def test_checkpoint_argument(runs: dict[str, pathlib.Path]) -> None:
    ckpts = sorted((runs["cartpole"] / "train" / "algorithm").glob("ckpt-*"))
    assert len(ckpts) >= 2
    older = ckpts[0]
    pol = calf.load_policy(None, checkpoint=older)  # the run three levels up
    assert pol.checkpoint == str(older)
    assert pol.iteration == int(older.name.split("-")[1])
    assert pol.iteration < 3
    pol.close()


def test_threads_share_nothing(runs: dict[str, pathlib.Path]) -> None:
    obs = np.random.default_rng(1).normal(size=(257, 3)).astype(np.float32)
    want = calf.load_policy(runs["pendulum"])(obs)
    got: list[np.ndarray] = [None, None]

    def act(i: int) -> None:
        with calf.load_policy(runs["pendulum"]) as pol:
            for _ in range(50):
                got[i] = pol(obs)

    threads = [threading.Thread(target=act, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g in got:
        np.testing.assert_array_equal(g, want)


def test_errors(runs: dict[str, pathlib.Path], tmp_path: pathlib.Path) -> None:
    # calf's CALF_EIO for a file that cannot be opened is an OSError, with calf's message
    with pytest.raises(OSError, match=r"test_errors0/config\.gin: cannot open: No such file"):
        calf.load_policy(tmp_path)
    (tmp_path / "config.gin").write_text((runs["cartpole"] / "config.gin").read_text())
    with pytest.raises(ValueError, match="checkpoint"):
        calf.load_policy(tmp_path)  # a config but no checkpoint: bad input
    bad = tmp_path / "train" / "algorithm"
    bad.mkdir(parents=True)
    (bad / "ckpt-1").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="ckpt-1"):
        calf.load_policy(None, checkpoint=bad / "ckpt-1")
    with calf.load_policy(runs["cartpole"]) as pol:
        with pytest.raises(ValueError, match=r"shape \(B, 4\) or \(4,\), got \(2, 3\)"):
            pol(np.zeros((2, 3)))
        with pytest.raises(ValueError, match="shape"):
            pol(np.zeros((2, 2, 4)))
        with pytest.raises(TypeError, match="numbers"):
            pol(np.array([["a"] * 4]))
        with pytest.raises(TypeError, match="numpy.ndarray"):
            pol._raw.greedy([[0.0] * 4], np.empty(1, dtype=np.int32))
        with pytest.raises(ValueError, match=r"calf.Policy: actions must have shape \(1,\)"):
            pol._raw.greedy(np.zeros((1, 4), dtype=np.float32), np.empty(2, dtype=np.int32))


def test_recurrent_policy_state_and_reset(tmp_path: pathlib.Path) -> None:
    """A recurrent PPO policy keeps a state per row, as calf play does per episode: play's
    3 episodes (a call of 3 rows each step) replayed 3 rows a call after reset(3) give its
    actions bit for bit; reset(done) starts only the rows where done is set over; sampled
    calls step the same state."""
    root = tmp_path / "lstm"
    train(root, "ppo_lstm_cartpole_novel.gin", "TrainerConfig.num_iterations=2",
          "create_environment.env_name='PendulumNoVel-v1'",
          "ActorDistributionNetwork.lstm_hidden_size=8", "ValueNetwork.lstm_hidden_size=6")
    played = tmp_path / "played"
    calf_run("play", "--root_dir", str(root), "--num_episodes", "3", "--dump_actions", str(played))
    with calf.load_policy(root) as pol, calf.load_policy(root) as fresh:
        assert pol.state_size == 16
        obs, want = read_dump(played, pol.obs_dim)
        obs, want = obs.reshape(-1, 3, pol.obs_dim), want.astype(np.float32).reshape(-1, 3, 1)
        assert len(obs) >= 8
        pol.reset(3)
        got = np.stack([pol(o) for o in obs])
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
        pol.reset(3)
        fresh.reset(1)
        for t in range(8):
            if t == 4:
                pol.reset(np.array([False, True, False]))
            a = pol(obs[t])
            np.testing.assert_array_equal(a[[0, 2]].view(np.uint32), want[t, [0, 2]].view(np.uint32))
            if t >= 4:
                np.testing.assert_array_equal(a[1].view(np.uint32), fresh(obs[t, 1]).view(np.uint32))
        # sampling steps the same state: reset and reseeded, it draws the same again
        drawn = []
        for _ in range(2):
            pol.reset(3)
            drawn.append(np.stack([pol(o, deterministic=False, seed=9 if t == 0 else None)
                                   for t, o in enumerate(obs[:6])]))
        np.testing.assert_array_equal(drawn[0].view(np.uint32), drawn[1].view(np.uint32))
        with pytest.raises(ValueError, match="reset them all first"):
            pol.reset(np.ones(4, dtype=bool))
