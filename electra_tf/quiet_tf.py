"""A quiet TensorFlow start-up for the command-line tools (`python -m electra_tf.*`).

electra_tf/__init__.py calls `install()` when the package is imported by
`python -m` (and in the worker processes such a tool spawns), before anything
imports TensorFlow:

* TF_CPP_MIN_LOG_LEVEL defaults to "3" unless it is set: TensorFlow's C++ log
  lines (such as "E0000 ... failed call to cuInit" on a machine without a GPU)
  are not printed. Errors still reach the user, as Python exceptions that the
  tools turn into one `error:` line.
* TensorFlow logs a few lines while it loads (oneDNN, CUDA drivers), before its
  logging reads that variable, and once per shared library (so twice). They are
  captured while `tensorflow` is imported, and the ones below the level are
  dropped; everything else written meanwhile is passed on.

* TensorFlow's Python INFO lines (a SavedModel's "input name(s) ... will be
  renamed", "Assets written to", "Writing fingerprint", ...) are off: the
  `tensorflow` logger starts at WARNING, so the tools print their own lines and
  TensorFlow's warnings and errors only.

TF_CPP_MIN_LOG_LEVEL=0 shows every TensorFlow log line again, the Python ones too.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import logging
import os
import re
import sys
import tempfile

MARKER = "ELECTRA_TF_QUIET_TF"  # set for child processes (multiprocessing spawn)
DEFAULT_LEVEL = "3"
# absl's format: severity letter, MMDD, time, thread id, file:line]
_LOG_LINE = re.compile(r"^([IWEF])\d{4} [\d:.]+\s+\d+ \S+:\d+\] ")
_SEVERITY = {"I": 0, "W": 1, "E": 2, "F": 3}
_PRE_INIT = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"


def min_log_level() -> int:
    try:
        return int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
    except ValueError:
        return 0


def filter_log(text: str, level: int) -> str:
    """`text` without the absl log lines below `level` (and absl's pre-init notice)."""
    if level <= 0:
        return text
    kept = []
    for line in text.splitlines(keepends=True):
        match = _LOG_LINE.match(line)
        if (match and _SEVERITY[match.group(1)] < level) or line.rstrip("\r\n") == _PRE_INIT:
            continue
        kept.append(line)
    return "".join(kept)


@contextlib.contextmanager
def _filtered_stderr(level: int):
    """Collects what is written to file descriptor 2 and passes on what `filter_log` keeps."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        saved = None
    if saved is None:
        yield
        return
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            try:
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = filter_log(captured.read().decode("utf-8", "replace"), level)
            if text:
                sys.stderr.write(text)
                sys.stderr.flush()


class _QuietImport(importlib.abc.MetaPathFinder):
    """Wraps the first import of `tensorflow` in `_filtered_stderr`."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "tensorflow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def quiet_exec_module(module):
            with _filtered_stderr(min_log_level()):
                exec_module(module)

        spec.loader.exec_module = quiet_exec_module
        return spec


def install() -> None:
    """Sets the default log level and quiets the TensorFlow import (once, before it)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", DEFAULT_LEVEL)
    os.environ[MARKER] = "1"
    tf_logger = logging.getLogger("tensorflow")  # the logger TensorFlow's Python code writes to
    if min_log_level() >= 1 and tf_logger.level == logging.NOTSET:
        tf_logger.setLevel(logging.WARNING)
    if "tensorflow" in sys.modules or any(isinstance(f, _QuietImport) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _QuietImport())
