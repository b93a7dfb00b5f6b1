"""The per-user secret key that signs Python envs' checkpointed pickles (HMAC-SHA256, in
_pyenv.c), so that a resume unpickles, and so runs, only what this user's calf wrote.

The key lives outside every run dir: ``$CALF_KEY_FILE``, else
``$XDG_CONFIG_HOME/calf/key``, else ``~/.config/calf/key``. The first use makes it (32
random bytes as hex, mode 0600, in a 0700 directory), atomically: a process that loses
the race to make it reads the one that won. Jupyter keeps its notebook secret the same way.
"""

from __future__ import annotations

import os
import secrets

_KEY_BYTES = 32


def key_path() -> str:
    """The key file this process uses."""
    path = os.environ.get("CALF_KEY_FILE")
    if path:
        return path
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "calf", "key")


def _read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        key = f.read(4096).strip()
    if len(key) < 2 * _KEY_BYTES:
        raise OSError(f"calf: checkpoint key {path} holds {len(key)} bytes, fewer than "
                      f"{2 * _KEY_BYTES}: remove it (a new one is made) or set CALF_KEY_FILE")
    return key


def _make(path: str) -> None:
    """Write a new key to path unless one is there: a temporary file, then a hard link,
    which never replaces a key another process made first."""
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_hex(_KEY_BYTES).encode() + b"\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)


def load_key() -> tuple[bytes, str]:
    """(key, its file), making the file on first use. OSError naming the file when it
    cannot be read or made."""
    path = key_path()
    try:
        try:
            return _read(path), path
        except FileNotFoundError:
            _make(path)
            return _read(path), path
    except OSError as e:
        if str(e).startswith("calf: "):
            raise
        raise OSError(f"calf: checkpoint key {path}: {e.strerror or e} (the key that signs "
                      "Python envs' checkpoints; set CALF_KEY_FILE to put it elsewhere)") from e
