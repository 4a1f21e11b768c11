"""What the command-line tools share: absl flags, one exit-code convention, one name per idea.

Exit codes of every `python -m electra_tf.*` tool:
  0    success
  2    stopped with one `error: ...` line naming the culprit and the fix (bad flags or
       inputs, and the faults a tool diagnoses: a NaN loss, a full disk, a lost worker)
  130  interrupted (Ctrl-C); re-running the same command resumes
  1    an unexpected failure with a Python traceback (a bug: please report it)

Every tool is built the same way (electra_tf/<tool>/__main__.py and the data tools):

    def define_flags(fv=None): ...          # absl flags on `fv` (default: absl's FLAGS);
                                            # importing the module defines nothing
    RENAMED = {"output": "output_dir"}      # old spelling -> new: refused in one line
    def run(values) -> int: ...             # the job, from the parsed flags
    def main(argv=None) -> int:             # in-process: argv holds the flags only
        return run(parse_flags(define_flags, argv, renamed=RENAMED))
    if __name__ == "__main__":
        run_absl(run, define_flags, renamed=RENAMED)

One name per idea across the tools: `--output_dir` is the directory a job writes,
`--output_file` the file it writes, `--model_dir` a model directory it reads,
`--input_file` a file it reads, `--init` the weights a job starts from, `--seed`
the seed(s), `--train_steps` the optimizer steps, `--batch_size` the global batch
(examples per optimizer step over all replicas), `--do_lower_case` the casing.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Callable, Dict, Iterable, List, NoReturn, Optional

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


def asked_for_help(argv) -> bool:
    return any(arg in HELP_FLAGS for arg in list(argv)[1:])


def _flag_name(arg: str) -> Optional[str]:
    """The name in `--name`, `--name=value`, `-name` (absl's spellings); None for a value."""
    if not arg.startswith("-") or arg in ("-", "--"):
        return None
    return arg.lstrip("-").split("=", 1)[0] or None


def refuse_renamed(argv: Iterable[str], renamed: Optional[Dict[str, str]]) -> None:
    """Exits 2 with `error: --old is now --new (see --help)` for the first old spelling in argv.

    Args:
      argv: the command line, the program name first.
      renamed: {old flag name: new flag name}. A boolean's `--noold` (and the `--no_old`
        spelling) is refused naming `--nonew`.
    """
    if not renamed:
        return
    for arg in list(argv)[1:]:
        if arg == "--":
            break
        name = _flag_name(arg)
        if name is None:
            continue
        if name in renamed:
            exit_with_error(f"--{name} is now --{renamed[name]} (see --help)")
        for prefix in ("no_", "no"):
            if name.startswith(prefix) and name[len(prefix):] in renamed:
                exit_with_error(f"--{name} is now --no{renamed[name[len(prefix):]]} (see --help)")


def refuse_positional(argv: List[str]) -> None:
    """Exits 2 when absl left positional arguments (argv[0] is the program)."""
    if len(argv) > 1:
        exit_with_error(f"unexpected argument(s) {' '.join(argv[1:])}; every option is a --flag (see --help)")


def require_flags(values, *names: str) -> None:
    """Exits 2 naming the flags of `names` left unset (None or empty), e.g.
    `error: --model_dir, --output_dir required (see --help)`."""
    missing = [f"--{name}" for name in names if values[name].value in (None, "", [])]
    if len(missing) == 1:
        exit_with_error(f"{missing[0]} is required (see --help)")
    if missing:
        exit_with_error(f"{', '.join(missing)} required (see --help)")


def parse_absl_flags(argv, fv: Optional[flags.FlagValues] = None):
    """absl's flag parsing, except that a bad flag is one `error:` line and exit 2."""
    fv = flags.FLAGS if fv is None else fv
    try:
        return fv(argv)
    except flags.Error as e:
        exit_with_error(f"{e} (see --help)")


def parse_flags(define_flags: Callable[[flags.FlagValues], None], argv=None, *, prog: str = "electra_tf",
                renamed: Optional[Dict[str, str]] = None) -> flags.FlagValues:
    """A tool's flags parsed in-process, on their own FlagValues (absl's FLAGS untouched).

    Args:
      define_flags: the tool's `define_flags(fv)`.
      argv: the flags, without the program name (default: sys.argv[1:]).
      prog: the program name absl sees.
      renamed: the tool's {old name: new name}, refused before parsing.

    Returns:
      The parsed FlagValues (read `values.name` or `values["name"].value`).

    Raises:
      SystemExit(2): an old spelling, a flag absl cannot parse or a positional
        argument, after one `error:` line.
    """
    fv = flags.FlagValues()
    define_flags(fv)
    args = [prog] + [str(a) for a in (sys.argv[1:] if argv is None else argv)]
    refuse_renamed(args, renamed)
    refuse_positional(parse_absl_flags(args, fv))
    return fv


def quiet_absl_logging(fv: flags.FlagValues) -> None:
    """TensorFlow's INFO lines logged through absl (a SavedModel's renamed input names, its
    fingerprint, ...) stay off in a tool: absl.app turns them on. `--verbosity 0` (or
    TF_CPP_MIN_LOG_LEVEL=0, which shows every TensorFlow log line) turns them back on."""
    from absl import logging as absl_logging

    if "verbosity" in fv and fv["verbosity"].present:
        return
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL", "").strip() == "0":
        return
    # A filter, not a level: TensorFlow resets the absl logger's level while it saves a model.
    absl_logging.get_absl_logger().addFilter(_below_warning_dropped)


def _below_warning_dropped(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING


def run_absl(run: Callable[[flags.FlagValues], Optional[int]], define_flags=None, *, argv=None,
             renamed: Optional[Dict[str, str]] = None) -> None:
    """absl.app.run for a tool, with the shared convention.

    Defines the tool's flags on absl's FLAGS, refuses an old spelling (`renamed`)
    before parsing, parses, refuses positional arguments and exits with what
    `run(FLAGS)` returns. --help exits 0 (absl exits 1 after printing the usage);
    a flag absl cannot parse is one `error:` line, exit 2.

    Args:
      run: the job, from the parsed flag values; returns the exit code.
      define_flags: the tool's `define_flags(fv)` (None: already defined).
      argv: the command line (default sys.argv).
      renamed: {old flag name: new flag name}.
    """
    argv = sys.argv if argv is None else argv
    if define_flags is not None:
        define_flags(flags.FLAGS)
    refuse_renamed(argv, renamed)

    def main(rest):
        refuse_positional(rest)
        quiet_absl_logging(flags.FLAGS)
        return run(flags.FLAGS)

    try:
        app.run(main, argv=argv, flags_parser=parse_absl_flags)
    except SystemExit as e:
        if e.code == 1 and asked_for_help(argv):
            raise SystemExit(0) from None
        raise
