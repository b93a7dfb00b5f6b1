"""Python envs in whole jobs: calf.train(env=), python3 -m calf --env_py, mpirun.

The same deterministic Python env (pyenv_envs.Corridor) gives the same checkpoint bytes
on one process, --nproc 2 and 3, two MPI ranks, from the stepwise Trainer, from
calf.train and from python3 -m calf; a 2 -> 3 resume is exact; an exception in a
worker's env stops the job with the env index and its traceback on stderr.
"""

from __future__ import annotations

import filecmp
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest

import calf

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import pyenv_envs  # noqa: E402
from calf_runs import checkpoint_path  # noqa: E402

SRC = HERE.parents[1]
PPO = SRC / "examples" / "ppo_cartpole.gin"
NAME = calf.register_env(pyenv_envs.make_corridor, max_episode_steps=60)
OVERRIDES = {
    "create_environment.num_parallel_environments": 6,
    "TrainerConfig.unroll_length": 16,
    "TrainerConfig.mini_batch_size": 48,
    "TrainerConfig.num_iterations": 4,
    "TrainerConfig.num_checkpoints": 4,
    "TrainerConfig.eval_interval": 2,
    "TrainerConfig.num_eval_episodes": 2,
    "Adam.lr_schedule": "constant",  # a resume to a longer run continues it exactly
}
PARAMS = [f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in OVERRIDES.items()]


def ckpt(root, n=4):
    return checkpoint_path(root, n)


def same(a, b):
    return filecmp.cmp(ckpt(a), ckpt(b), shallow=False)


def python_m_calf(*args, env=None, runner=()):
    environ = dict(os.environ)
    environ["PYTHONPATH"] = os.pathsep.join([str(HERE), *sys.path])
    return subprocess.run([*runner, sys.executable, "-m", "calf", *args], capture_output=True,
                          text=True, env=environ, timeout=600)


@pytest.fixture(scope="module")
def one(tmp_path_factory):
    root = tmp_path_factory.mktemp("one") / "run"
    calf.train(PPO, root_dir=root, env=NAME, overrides=OVERRIDES, quiet=True)
    return root


def test_config_records_the_factory(one):
    assert "create_environment.env_name = 'py:pyenv_envs:make_corridor'" in (
        one / "config.gin").read_text()


@pytest.mark.parametrize("nproc", [2, 3])
def test_nproc_gives_the_same_bytes(one, tmp_path, nproc):
    calf.train(PPO, root_dir=tmp_path / "r", env=NAME, overrides=OVERRIDES, nproc=nproc,
               quiet=True)
    assert same(one, tmp_path / "r")


def test_stepwise_trainer_gives_the_same_bytes(one, tmp_path):
    with calf.Trainer(PPO, root_dir=tmp_path / "r", env=NAME, overrides=OVERRIDES) as t:
        while not t.done:
            t.step()
    assert same(one, tmp_path / "r")


def test_resume_from_2_to_3_processes_is_exact(one, tmp_path):
    root = tmp_path / "r"
    calf.train(PPO, root_dir=root, env=NAME, nproc=2, quiet=True,
               overrides={**OVERRIDES, "TrainerConfig.num_iterations": 2})
    assert ckpt(root, 2).exists() and not ckpt(root).exists()
    calf.train(root_dir=root, env=NAME, nproc=3, quiet=True,
               overrides={"TrainerConfig.num_iterations": 4})
    assert same(one, root)


def test_python_m_calf_env_py(one, tmp_path):
    root = tmp_path / "r"
    args = ["train", "--env_py", "pyenv_envs:make_corridor", "--env_py_max_episode_steps",
            "60", "--conf", str(PPO), "--root_dir", str(root), "--quiet"]
    for p in PARAMS:
        args += ["--conf_param", p]
    r = python_m_calf(*args)
    assert r.returncode == 0, r.stderr
    assert same(one, root)
    # the code is never loaded from the config: a resume without --env_py says what to pass
    r = python_m_calf("train", "--root_dir", str(root), "--quiet")
    assert r.returncode == 2
    assert "is a Python env factory" in r.stderr
    assert "--env_py pyenv_envs:make_corridor" in r.stderr
    # play with it: greedy episodes of the trained policy
    r = python_m_calf("play", "--env_py", "pyenv_envs:make_corridor",
                      "--env_py_max_episode_steps", "60", "--root_dir", str(root),
                      "--num_episodes", "3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("episode") >= 3, r.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--env_py", "pyenv_envs"], "expected MODULE:FUNCTION"),
        (["--env_py", "no_such_module:f"], "cannot import no_such_module"),
        (["--env_py", "pyenv_envs:nothing"], "pyenv_envs has no nothing"),
        # the flag as the CLI spells it, not the Python argument
        (["--env_py", "pyenv_envs:make_corridor", "--env_py_max_episode_steps", "0"],
         "--env_py_max_episode_steps 0 not in [1, 2^31)"),
        (["--env_py_max_episode_steps", "x"], "not an integer"),
    ],
)
def test_env_py_errors(args, message, tmp_path):
    r = python_m_calf("train", *args, "--root_dir", str(tmp_path / "r"))
    assert r.returncode == 2
    assert message in r.stderr and r.stderr.startswith("calf: ")
    assert not (tmp_path / "r").exists()


def test_mpi_ranks_give_the_same_bytes(one, tmp_path):
    if calf.features().get("mpi") != "built in" or not shutil.which("mpirun"):
        pytest.skip(f"MPI: {calf.features().get('mpi')}; mpirun: {shutil.which('mpirun')}")
    os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    root = tmp_path / "r"
    args = ["train", "--env_py", "pyenv_envs:make_corridor", "--env_py_max_episode_steps",
            "60", "--conf", str(PPO), "--root_dir", str(root), "--quiet"]
    for p in PARAMS:
        args += ["--conf_param", p]
    r = python_m_calf(*args, runner=("mpirun", "--oversubscribe", "-np", "2"))
    assert r.returncode == 0, r.stderr
    assert same(one, root)


def test_mpi_ranks_that_disagree_on_a_record_size_stop_at_the_start(tmp_path):
    """Rank 1's fresh pickle is far larger than rank 0's, so each sizes the env's slot
    otherwise: the job stops before anything is written, naming both sizes and the
    remedy (a checkpoint gathered of both sizes once overflowed rank 0's buffer), and
    with --env_py_state_bytes it trains."""
    if calf.features().get("mpi") != "built in" or not shutil.which("mpirun"):
        pytest.skip(f"MPI: {calf.features().get('mpi')}; mpirun: {shutil.which('mpirun')}")
    os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    root = tmp_path / "r"
    args = ["train", "--env_py", "pyenv_envs:make_rank_sized", "--env_py_max_episode_steps",
            "60", "--conf", str(PPO), "--root_dir", str(root), "--quiet"]
    for p in PARAMS:
        args += ["--conf_param", p]
    mpirun = ("mpirun", "--oversubscribe", "-np", "2")
    r = python_m_calf(*args, runner=mpirun)
    assert r.returncode != 0
    assert ("environment py:pyenv_envs:make_rank_sized: ranks disagree on the env record size "
            "(bytes): rank 0 has 8328, rank 1 has 327816") in r.stderr, r.stderr
    assert "--env_py_state_bytes N" in r.stderr
    assert not (root / "train" / "algorithm").exists() or not any(
        (root / "train" / "algorithm").iterdir())
    r = python_m_calf(*args, "--env_py_state_bytes", "65536", runner=mpirun)
    assert r.returncode == 0, r.stderr
    assert ckpt(root).exists()


def test_a_pickle_that_differs_by_process_trains_on_the_local_backend(tmp_path):
    """--nproc workers share the class the parent registered, so their slots agree
    whatever each worker's envs pickle to."""
    name = calf.register_env(pyenv_envs.make_rank_sized, max_episode_steps=60)
    calf.train(PPO, root_dir=tmp_path / "r", env=name, overrides=OVERRIDES, nproc=2, quiet=True)
    assert ckpt(tmp_path / "r").exists()


def test_an_exception_in_a_worker_stops_the_job(tmp_path, capfd):
    pyenv_envs.Faulty.target_seed, pyenv_envs.Faulty.mode = 1 + 4, None
    name = calf.register_env(pyenv_envs.make_faulty, max_episode_steps=60)
    root = tmp_path / "r"
    with pytest.raises(RuntimeError):
        calf.train(PPO, root_dir=root, env=name, overrides=OVERRIDES, nproc=2, quiet=True)
    err = capfd.readouterr().err
    assert "calf: env 4 (py:pyenv_envs:make_faulty): step() raised:" in err
    assert "Traceback (most recent call last)" in err and "raise ValueError" in err
    assert "env index 4: step" in err and "raised ValueError: corridor broke" in err
    assert sorted(p.name for p in ckpt(root).parent.glob("ckpt-*")) == ["ckpt-1"]


def test_an_exception_exits_1_from_the_cli(tmp_path):
    root = tmp_path / "r"
    # Faulty's class attributes do not cross into the child: a module of its own sets them
    (tmp_path / "faulty_setup.py").write_text(
        "import pyenv_envs\n"
        "pyenv_envs.Faulty.target_seed = 1\n"
        "def make():\n    return pyenv_envs.Faulty()\n"
    )
    environ = dict(os.environ)
    environ["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(HERE), *sys.path])
    args = ["train", "--env_py", "faulty_setup:make", "--env_py_max_episode_steps", "60",
            "--conf", str(PPO), "--root_dir", str(root), "--quiet", *sum((["--conf_param", p] for p in PARAMS), [])]
    r = subprocess.run([sys.executable, "-m", "calf", *args], capture_output=True, text=True,
                       env=environ, timeout=600)
    assert r.returncode == 1, r.stderr
    assert "env index 0: step" in r.stderr and "raised ValueError: corridor broke" in r.stderr
    assert "Traceback (most recent call last)" in r.stderr


@pytest.mark.parametrize("nproc", [1, 2])
def test_system_exit_in_an_env_never_runs_the_hosts_exit_handlers_in_a_worker(tmp_path, nproc):
    """SystemExit inside an env is that env's failure: the job stops as for any exception,
    and only the host, when it exits, runs its atexit handlers (printing the exception
    with PyErr_Print once exited each forked worker through them)."""
    log = tmp_path / "atexit.log"
    script = tmp_path / "host.py"
    script.write_text(
        "import atexit, os, sys\n"
        "import calf, pyenv_envs\n"
        f"atexit.register(lambda: open({str(log)!r}, 'a').write(f'{{os.getpid()}}\\n'))\n"
        "pyenv_envs.Faulty.target_seed, pyenv_envs.Faulty.mode = 1 + 4, 'exit'\n"
        "name = calf.register_env(pyenv_envs.make_faulty, max_episode_steps=60)\n"
        "try:\n"
        f"    calf.train({str(PPO)!r}, root_dir={str(tmp_path / 'r')!r}, env=name,\n"
        f"               overrides={OVERRIDES!r}, nproc={nproc}, quiet=True)\n"
        "except (RuntimeError, calf.EnvError) as e:\n"
        "    print('stopped:', type(e).__name__, e)\n"
        "print('host', os.getpid())\n"
    )
    environ = dict(os.environ)
    environ["PYTHONPATH"] = os.pathsep.join([str(HERE), *sys.path])
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       env=environ, timeout=600)
    assert r.returncode == 0, r.stderr
    host = r.stdout.split("host ")[1].split()[0]
    assert log.read_text().split() == [host]
    assert "stopped:" in r.stdout and "SystemExit" in r.stderr + r.stdout


CTRL_C_HOST = """
import ctypes, functools, operator, os, signal, sys, time
import calf, pyenv_envs
from calf._conf import _conf_params, _env_binding
name = calf.register_env(pyenv_envs.make_corridor, max_episode_steps=60, quiet=True)
overrides = {**OVERRIDES, "TrainerConfig.num_iterations": 1000000,
             "TrainerConfig.num_checkpoints": 1000000}
train = functools.partial(calf._calf.train, root_dir=sys.argv[1], conf=PPO,
                          conf_params=_conf_params(overrides) + [_env_binding(name)],
                          nproc=2, quiet=True, python_env=True)
calls = [train]
if sys.argv[2] == "setup":
    # A SIGINT Python's own handler catches as calf.train starts, before calf's handlers
    # are in place (what a Ctrl-C during calf's setup leaves): sent by ctypes and then
    # the extension called from C (map, operator.call), no Python bytecode between, so
    # Python has not raised it yet when the job starts.
    calls.insert(0, functools.partial(ctypes.CDLL(None).kill, os.getpid(), int(signal.SIGINT)))
try:
    try:
        list(map(operator.call, calls))
    except KeyboardInterrupt as e:
        print("KeyboardInterrupt:", e, flush=True)
        time.sleep(0.5)
    print("the except block ran to its end", flush=True)
except KeyboardInterrupt:
    print("a second KeyboardInterrupt", flush=True)
"""


@pytest.mark.parametrize("when", ["training", "setup"])
def test_ctrl_c_raises_keyboard_interrupt_once(tmp_path, when):
    """calf.train(env=..., nproc=2) stopped by SIGINT raises KeyboardInterrupt once: a
    SIGINT Python's handler caught too (here one as the job started, which calf's setup
    left pending) is that same interrupt, not a second one in the caller's except block
    (issue 40, item 8). Event-driven: the signal goes once the first checkpoint exists."""
    root = tmp_path / "r"
    script = tmp_path / "host.py"
    script.write_text(f"OVERRIDES = {OVERRIDES!r}\nPPO = {str(PPO)!r}\n" + CTRL_C_HOST)
    environ = dict(os.environ)
    environ["PYTHONPATH"] = os.pathsep.join([str(HERE), *sys.path])
    child = subprocess.Popen([sys.executable, str(script), str(root), when],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=environ)
    try:
        first = ckpt(root, 1)
        deadline = time.monotonic() + 240  # ends only a broken run
        while not first.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert first.exists(), child.communicate(timeout=60)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=240)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, (out, err)
    assert out.splitlines() == [
        "KeyboardInterrupt: calf.train: interrupted: stopped after an iteration, its "
        "checkpoint written (calling train again resumes from it)",
        "the except block ran to its end",
    ], (out, err)


def make_gymnasium_cartpole():
    import gymnasium

    return gymnasium.make("CartPole-v1")


def test_gymnasium_envs_train_and_match_across_processes(tmp_path):
    gymnasium = pytest.importorskip("gymnasium", reason="Gymnasium is not importable here")
    name = calf.register_env(make_gymnasium_cartpole)  # 500 steps: its spec's limit
    assert name == "py:test_pyenv_job:make_gymnasium_cartpole"
    assert isinstance(make_gymnasium_cartpole().action_space, gymnasium.spaces.Discrete)
    for n in (1, 2):
        calf.train(PPO, root_dir=tmp_path / f"g{n}", env=name, overrides=OVERRIDES, nproc=n,
                   quiet=True)
    assert same(tmp_path / "g1", tmp_path / "g2")
    assert b"CartPoleEnv" in ckpt(tmp_path / "g1").read_bytes()
