"""``python3 -m calf``: the calf program, with its subcommands and flags, run in this
interpreter by the extension module (the same C code as the ``calf`` executable)."""

from __future__ import annotations

import signal
import sys

import calf
from calf import _calf


def main(argv: list[str] | None = None) -> int:
    """Run ``calf ARGS...`` (argv: ARGS, default ``sys.argv[1:]``); return its exit status."""
    args = sys.argv[1:] if argv is None else list(argv)
    if any(a == "--env_lib" or a.startswith("--env_lib=") for a in args):
        calf._export_calf_to_plugins()  # the plug-in calls back into calf_*
    sys.stdout.flush()
    sys.stderr.flush()
    # Ctrl-C as the calf program has it: the default action, except while train runs,
    # which installs its own handlers (a checkpoint, then exit status 130)
    old = signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        return _calf.cli_main(["calf", *args])
    finally:
        signal.signal(signal.SIGINT, old)


if __name__ == "__main__":
    sys.exit(main())
