"""A Python env's checkpoint is code (its pickle), so a resume unpickles only what this
user's key signed: a crafted or tampered ckpt, or one another user's calf wrote, is
refused with one line naming the file and --trust_checkpoint, on every way in
(calf.train, calf.Trainer, python3 -m calf train, --nproc workers, mpirun ranks), and
nothing in it runs; trust=True accepts one once. calf play, export and load_policy read
no env record, so a crafted pickle never runs there either.
"""

from __future__ import annotations

import filecmp
import os
import pathlib
import pickle
import shutil
import subprocess
import sys
import threading

import pytest

import calf
from calf import _ckpt_key

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import pyenv_envs  # noqa: E402
from calf_runs import checkpoint_path  # noqa: E402

PPO = HERE.parents[1] / "examples" / "ppo_cartpole.gin"
PARAMS = {
    "create_environment.num_parallel_environments": 4,
    "TrainerConfig.unroll_length": 16,
    "TrainerConfig.mini_batch_size": 32,
    "TrainerConfig.num_checkpoints": 4,
    "TrainerConfig.evaluate": False,
    "Adam.lr_schedule": "constant",  # a resume to a longer run continues it exactly
}
REFUSED = "and unpickling runs any code it holds: not loaded"
FLAG = "--trust_checkpoint (calf.train/calf.Trainer: trust=True)"


def overrides(iterations):
    return {**PARAMS, "TrainerConfig.num_iterations": iterations}


def register(key_file=None):
    """The Corridor env, its pickles signed with key_file's key (default: the session's)."""
    if key_file is not None:
        os.environ["CALF_KEY_FILE"] = str(key_file)
    return calf.register_env(pyenv_envs.make_corridor, max_episode_steps=60, quiet=True)


@pytest.fixture(autouse=True)
def session_key():
    """Each test leaves the session's key as it found it."""
    saved = os.environ["CALF_KEY_FILE"]
    yield
    os.environ["CALF_KEY_FILE"] = saved
    register()


def train(root, iterations, **kw):
    calf.train(PPO, root_dir=root, env=register(), overrides=overrides(iterations), quiet=True,
               **kw)


def crc32c(data: bytes) -> int:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    crc = 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def rewrite(path, edit):
    """Apply edit(bytearray of header + payload) to checkpoint `path` and recompute its
    CRC, as anyone can: the CRC is no defence."""
    data = bytearray(pathlib.Path(path).read_bytes())
    body = data[:-4]
    edit(body)
    pathlib.Path(path).write_bytes(bytes(body) + crc32c(bytes(body)).to_bytes(4, "little"))


def first_state(body):
    """Offset of the first env's saved Python state ("CPY2") in a checkpoint's bytes."""
    i = bytes(body).find(b"CPY2")
    assert i > 0
    return i


class Evil:
    """Unpickles as os.system(cmd)."""

    def __init__(self, cmd):
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


def plant(path, marker):
    """Put a pickle that creates `marker` in the first env's state of checkpoint `path`,
    as signed states are laid out, its signature garbage."""
    evil = pickle.dumps(Evil(f"touch {marker}"), protocol=4)

    def edit(body):
        i = first_state(body)
        body[i + 4 : i + 8] = len(evil).to_bytes(4, "little")
        body[i + 8 : i + 40] = bytes(32)
        body[i + 40 : i + 40 + len(evil)] = evil

    rewrite(path, edit)


@pytest.fixture(scope="module")
def run2(tmp_path_factory):
    """A two-iteration run this user wrote (the session's key), to copy and tamper with."""
    root = tmp_path_factory.mktemp("run2") / "r"
    train(root, 2)
    return root


def copy_of(run2, tmp_path):
    root = tmp_path / "r"
    shutil.copytree(run2, root)
    return root


def python_m_calf(*args, runner=()):
    environ = dict(os.environ)
    environ["PYTHONPATH"] = os.pathsep.join([str(HERE), *sys.path])
    return subprocess.run([*runner, sys.executable, "-m", "calf", *args], capture_output=True,
                          text=True, env=environ, timeout=600)


def cli_train_args(root, iterations):
    args = ["train", "--env_py", "pyenv_envs:make_corridor", "--env_py_max_episode_steps", "60",
            "--conf", str(PPO), "--root_dir", str(root), "--quiet"]
    for k, v in overrides(iterations).items():
        args += ["--conf_param", f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}"]
    return args


def test_a_run_this_user_wrote_resumes_with_no_flag(run2, tmp_path):
    root = copy_of(run2, tmp_path)
    train(root, 4)
    train(tmp_path / "whole", 4)
    assert filecmp.cmp(checkpoint_path(root, 4), checkpoint_path(tmp_path / "whole", 4),
                       shallow=False)


@pytest.mark.parametrize("way", ["train", "nproc", "trainer", "cli"])
def test_a_crafted_pickle_is_refused_and_never_runs(run2, tmp_path, way, capfd):
    root = copy_of(run2, tmp_path)
    marker = tmp_path / "marker"
    plant(checkpoint_path(root, 2), marker)
    if way == "cli":
        r = python_m_calf(*cli_train_args(root, 4))
        assert r.returncode == 2, r.stderr
        err = r.stderr
    else:
        with pytest.raises((ValueError, RuntimeError)) as e:
            if way == "trainer":
                calf.Trainer(PPO, root_dir=root, env=register(), overrides=overrides(4))
            else:
                train(root, 4, nproc=2 if way == "nproc" else 1)
        err = str(e.value) + capfd.readouterr().err
    line = next(x for x in err.splitlines() if REFUSED in x)
    assert str(checkpoint_path(root, 2)) in line and FLAG in line
    assert "env 0 (py:pyenv_envs:make_corridor): its pickle is not signed with this user's key" \
        in line and os.environ["CALF_KEY_FILE"] in line
    assert not marker.exists()
    assert not checkpoint_path(root, 3).exists()


def test_a_crafted_pickle_is_refused_on_every_mpi_rank(run2, tmp_path):
    if calf.features().get("mpi") != "built in" or not shutil.which("mpirun"):
        pytest.skip(f"MPI: {calf.features().get('mpi')}; mpirun: {shutil.which('mpirun')}")
    os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    root = copy_of(run2, tmp_path)
    marker = tmp_path / "marker"
    plant(checkpoint_path(root, 2), marker)
    r = python_m_calf(*cli_train_args(root, 4), runner=("mpirun", "--oversubscribe", "-np", "2"))
    assert r.returncode != 0
    assert REFUSED in r.stderr and FLAG in r.stderr, r.stderr
    assert not marker.exists()
    # with the flag, the gate is open on every rank: the pickle runs (the planted
    # mistake the refusal guards against), and the env it gives back is no env
    r = python_m_calf(*cli_train_args(root, 4), "--trust_checkpoint",
                      runner=("mpirun", "--oversubscribe", "-np", "2"))
    assert marker.exists()


def test_trust_given_to_one_threads_run_is_not_another_threads(run2, tmp_path, monkeypatch):
    """trust=True is the run's it was given to: another thread that opens a run while it
    is on is refused. The interleaving is forced: this thread's calf.Trainer sets its
    trust off, then the other thread turns trust on and holds it while this one opens."""
    root = copy_of(run2, tmp_path)
    marker = tmp_path / "marker"
    plant(checkpoint_path(root, 2), marker)
    real = calf._calf.set_trust_checkpoint
    trusting, done = threading.Event(), threading.Event()

    def other_thread() -> None:
        real(True)  # as a calf.Trainer(..., trust=True) in that thread does
        trusting.set()
        done.wait(600)
        real(False)

    other = threading.Thread(target=other_thread)

    def set_trust(on: bool) -> None:
        real(on)
        if not on and other.ident is None:  # the first: just before the open
            other.start()
            assert trusting.wait(600)

    monkeypatch.setattr(calf._calf, "set_trust_checkpoint", set_trust)
    try:
        with pytest.raises(ValueError, match=REFUSED):
            calf.Trainer(PPO, root_dir=root, env=register(), overrides=overrides(4))
    finally:
        done.set()
        if other.ident is not None:
            other.join()
    assert not marker.exists()


def test_trust_runs_what_the_flag_accepts(run2, tmp_path):
    """The gate is what keeps the pickle from running: opened, it runs (and os.system's
    return value is no env, so the run then stops)."""
    root = copy_of(run2, tmp_path)
    marker = tmp_path / "marker"
    plant(checkpoint_path(root, 2), marker)
    with pytest.raises(Exception):
        train(root, 4, trust=True)
    assert marker.exists()


def test_another_users_run_is_refused_then_accepted_once_with_trust(run2, tmp_path):
    theirs = tmp_path / "theirs"
    register(tmp_path / "their_key")
    calf.train(PPO, root_dir=theirs, env=register(tmp_path / "their_key"),
               overrides=overrides(2), quiet=True)
    os.environ["CALF_KEY_FILE"] = str(tmp_path / "my_key")
    with pytest.raises(ValueError, match="not signed with this user's key"):
        calf.train(PPO, root_dir=theirs, env=register(), overrides=overrides(4), quiet=True)
    with pytest.raises(ValueError, match="trust_checkpoint"):
        calf.Trainer(PPO, root_dir=theirs, env=register(), overrides=overrides(4))
    r = python_m_calf(*cli_train_args(theirs, 4))
    assert r.returncode == 2 and REFUSED in r.stderr
    # trusted once: the resume is exact, and what it writes is signed with my key
    with calf.Trainer(PPO, root_dir=theirs, env=register(), overrides=overrides(3),
                      trust=True) as t:
        t.step()
    calf.train(PPO, root_dir=theirs, env=register(), overrides=overrides(4), quiet=True)
    r = python_m_calf(*cli_train_args(tmp_path / "mine", 4))
    assert r.returncode == 0, r.stderr
    assert filecmp.cmp(checkpoint_path(theirs, 4), checkpoint_path(tmp_path / "mine", 4),
                       shallow=False)


def test_a_tampered_pickle_is_refused(run2, tmp_path):
    root = copy_of(run2, tmp_path)

    def flip(body):
        i = first_state(body)
        n = int.from_bytes(body[i + 4 : i + 8], "little")
        body[i + 40 + n // 2] ^= 0x01

    rewrite(checkpoint_path(root, 2), flip)
    with pytest.raises(ValueError) as e:
        train(root, 4)
    assert "its pickle is not signed with this user's key" in str(e.value)
    assert str(checkpoint_path(root, 2)) in str(e.value)


def test_an_unsigned_state_of_an_older_calf_loads_only_on_trust(run2, tmp_path):
    """"CPY1" states (before the signature: magic, length, pickle) are refused, and with
    trust resume exactly."""
    root = copy_of(run2, tmp_path)

    def unsign(body):
        at = 0
        while (i := bytes(body).find(b"CPY2", at)) > 0:
            n = int.from_bytes(body[i + 4 : i + 8], "little")
            body[i : i + 4] = b"CPY1"
            body[i + 8 : i + 8 + n] = body[i + 40 : i + 40 + n]
            at = i + 4

    rewrite(checkpoint_path(root, 2), unsign)
    with pytest.raises(ValueError, match="its pickle is unsigned"):
        train(root, 4)
    train(root, 4, trust=True)
    train(tmp_path / "whole", 4)
    assert filecmp.cmp(checkpoint_path(root, 4), checkpoint_path(tmp_path / "whole", 4),
                       shallow=False)


def test_trust_checkpoint_is_for_train_only(tmp_path):
    r = python_m_calf("play", "--root_dir", str(tmp_path), "--trust_checkpoint")
    assert r.returncode == 2 and "--trust_checkpoint is for train, not 'play'" in r.stderr


def test_play_export_and_load_policy_never_unpickle(run2, tmp_path):
    root = copy_of(run2, tmp_path)
    marker = tmp_path / "marker"
    plant(checkpoint_path(root, 2), marker)
    r = python_m_calf("play", "--env_py", "pyenv_envs:make_corridor",
                      "--env_py_max_episode_steps", "60", "--root_dir", str(root),
                      "--num_episodes", "1")
    assert r.returncode == 0, r.stderr
    r = python_m_calf("export", "--env_py", "pyenv_envs:make_corridor",
                      "--env_py_max_episode_steps", "60", "--root_dir", str(root),
                      "-o", str(tmp_path / "p.c"))
    assert r.returncode == 0, r.stderr
    pol = calf.load_policy(root, env=register())
    assert pol.checkpoint.endswith("ckpt-2")
    assert not marker.exists()


def test_the_key_is_made_once_0600_and_kept(tmp_path):
    os.environ["CALF_KEY_FILE"] = str(tmp_path / "cfg" / "calf" / "key")
    key, path = _ckpt_key.load_key()
    assert path == os.environ["CALF_KEY_FILE"] and len(key) == 64
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700
    assert _ckpt_key.load_key()[0] == key
    assert os.listdir(os.path.dirname(path)) == ["key"]
    del os.environ["CALF_KEY_FILE"]
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    try:
        assert _ckpt_key.key_path() == str(tmp_path / "xdg" / "calf" / "key")
    finally:
        del os.environ["XDG_CONFIG_HOME"]
        os.environ["CALF_KEY_FILE"] = path
    pathlib.Path(path).write_text("short\n")
    with pytest.raises(OSError, match="holds 5 bytes"):
        _ckpt_key.load_key()
