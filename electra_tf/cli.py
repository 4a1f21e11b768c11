"""What the absl-based command-line tools share.

    from electra_tf.cli import run_absl
    run_absl(main)   # instead of absl.app.run(main)
"""

from __future__ import annotations

import sys

HELP_FLAGS = ("--help", "-help", "--helpshort", "-helpshort", "--helpfull", "-helpfull",
              "--helpxml", "-helpxml", "-?", "--?")


def asked_for_help(argv) -> bool:
    return any(arg in HELP_FLAGS for arg in list(argv)[1:])


def run_absl(main, argv=None) -> None:
    """absl.app.run(main), except that --help exits 0 (absl exits 1 after printing the usage)."""
    from absl import app  # pylint: disable=import-outside-toplevel

    try:
        app.run(main, argv=argv)
    except SystemExit as e:
        if e.code == 1 and asked_for_help(sys.argv if argv is None else argv):
            raise SystemExit(0) from None
        raise
