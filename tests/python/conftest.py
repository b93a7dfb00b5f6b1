"""What every pytest suite here shares: the key that signs Python envs' checkpoints is
the session's own (CALF_KEY_FILE in a temporary directory, removed at the end), never
the user's ~/.config/calf/key; subprocesses (python3 -m calf, mpirun) inherit it."""

from __future__ import annotations

import os
import shutil
import tempfile

_KEY_DIR = None
if "CALF_KEY_FILE" not in os.environ:
    _KEY_DIR = tempfile.mkdtemp(prefix="calf-key-")
    os.environ["CALF_KEY_FILE"] = os.path.join(_KEY_DIR, "key")


def pytest_unconfigure(config):
    if _KEY_DIR:
        shutil.rmtree(_KEY_DIR, ignore_errors=True)
