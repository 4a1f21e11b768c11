"""What the command-line tools share: one exit-code convention and --help that exits 0.

Exit codes of every `python -m electra_tf.*` tool:
  0    success
  2    stopped with one `error: ...` line naming the culprit and the fix (bad flags or
       inputs, and the faults a tool diagnoses: a NaN loss, a full disk, a lost worker)
  130  interrupted (Ctrl-C); re-running the same command resumes
  1    an unexpected failure with a Python traceback (a bug: please report it)

A command line's `__main__.py` calls `run_absl(main)` instead of `absl.app.run(main)`.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from absl import app, flags

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130

HELP_FLAGS = ("--help", "-help", "--helpshort", "-helpshort", "--helpfull", "-helpfull",
              "--helpxml", "-helpxml", "-?", "--?")


def report_error(message: str) -> int:
    """Prints `error: <message>` (one line) to stderr; returns the exit code for it."""
    one_line = "; ".join(part.strip() for part in str(message).splitlines() if part.strip())
    print(f"error: {one_line}", file=sys.stderr, flush=True)
    return EXIT_ERROR


def exit_with_error(message: str) -> NoReturn:
    """Prints `error: <message>` to stderr and exits 2."""
    raise SystemExit(report_error(message))


def report_interrupted(message: str) -> int:
    """Prints `interrupted: <message>` to stderr; returns 130."""
    print(f"interrupted: {message}", file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED


class ArgumentParser(argparse.ArgumentParser):
    """argparse with the shared convention: a bad flag is one `error:` line and exit 2
    (argparse's own prints the usage block first)."""

    def error(self, message: str) -> NoReturn:
        exit_with_error(f"{message} (see --help)")


def asked_for_help(argv) -> bool:
    return any(arg in HELP_FLAGS for arg in list(argv)[1:])


def parse_absl_flags(argv):
    """absl's flag parsing, except that a bad flag is one `error:` line and exit 2."""
    try:
        return flags.FLAGS(argv)
    except flags.Error as e:
        exit_with_error(f"{e} (see --help)")


def run_absl(main, argv=None) -> None:
    """absl.app.run(main) with the shared convention: --help exits 0 (absl exits 1 after
    printing the usage) and a flag absl cannot parse is one `error:` line, exit 2."""
    try:
        app.run(main, argv=argv, flags_parser=parse_absl_flags)
    except SystemExit as e:
        if e.code == 1 and asked_for_help(sys.argv if argv is None else argv):
            raise SystemExit(0) from None
        raise
