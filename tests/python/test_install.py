"""The package installed offline with Debian's setuptools, as README's "Use calf from
Python" says: a venv with --system-site-packages, then pip install --no-build-isolation
--no-index of a copy of the source tree. The installed calf must hold the optional parts
the CMake build holds and write the checkpoint bytes the calf program writes."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import calf

from calf_runs import CALF, CARTPOLE, SRC, checkpoints


def clean_env() -> dict[str, str]:
    """This environment without the build tree's package and the sanitizer preload."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "LD_PRELOAD", "ASAN_OPTIONS", "PYTHONDONTWRITEBYTECODE")}
    env["PIP_CONFIG_FILE"] = os.devnull  # this machine's pip settings play no part
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def have(module: str) -> bool:
    r = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True,
                       env=clean_env())
    return r.returncode == 0


def test_pip_install_offline(tmp_path: pathlib.Path) -> None:
    for module in ("pip", "setuptools", "venv"):
        if not have(module):
            pytest.skip(f"{sys.executable} has no {module} (apt-get install python3-{module})")
    src = tmp_path / "src"  # a copy: the build writes build-python/ and an egg-info
    for d in ("src", "include", "cli", "python"):
        shutil.copytree(SRC / d, src / d, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for f in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy2(SRC / f, src / f)
    venv = tmp_path / "venv"
    env = clean_env()
    for feature, note in calf.features().items():  # what the CMake build was told
        if note.startswith("not built: turned off"):
            env[f"CALF_WITH_{feature.upper()}"] = "0"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                    str(venv)], check=True, env=env)
    py = str(venv / "bin" / "python")
    r = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index", "."],
                       cwd=src, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr

    # imported from the venv, away from the source tree
    probe = (
        "import calf, sys; print(calf.__file__); print(calf.features()); "
        "calf.train(sys.argv[1], root_dir=sys.argv[2], quiet=True, "
        "overrides={'TrainerConfig.num_iterations': 3})"
    )
    r = subprocess.run([py, "-c", probe, str(CARTPOLE), str(tmp_path / "py")],
                       cwd=tmp_path, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    where, features = r.stdout.splitlines()
    assert pathlib.Path(where).is_relative_to(venv)
    # every module of the package, as setup.py's packages=["calf"] takes them
    installed = {p.name for p in pathlib.Path(where).parent.glob("*.py")}
    assert installed == {p.name for p in (SRC / "python" / "calf").glob("*.py")}
    assert features == str(calf.features())  # the CMake build's optional parts
    subprocess.run([CALF, "train", "--quiet", "--root_dir", str(tmp_path / "cli"), "--conf",
                    str(CARTPOLE), "--conf_param", "TrainerConfig.num_iterations=3"],
                   check=True, capture_output=True)
    ck = {name: checkpoints(tmp_path / name) for name in ("cli", "py")}
    assert ck["cli"] and ck["py"] == ck["cli"]
    version = [subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path).stdout
               for cmd in ([CALF, "--version"], [py, "-m", "calf", "--version"])]
    assert version[0].startswith("calf ") and version[1] == version[0]
