"""The root of electra_tf's error classes, and the one-line error text they share.

Every error the package raises on purpose derives from `ElectraError`, so a
caller can catch all of them (`except ElectraError`) and still tell them
apart by their own classes (`ConfigError`, `CheckpointError`, ...), which stay
in the modules that raise them. `ElectraError` derives from `Exception` only;
each subclass adds the built-in base it always had (ValueError for bad input,
RuntimeError for checkpoints), so existing `except ValueError` keeps working.
"""

from __future__ import annotations

import os


class ElectraError(Exception):
    """Base of every electra_tf error; its message is one line naming the culprit and the fix."""


def error_line(error: BaseException) -> str:
    """The first line of an exception's message (the class name if it has none).

    Third-party errors (Keras, h5py, TensorFlow) often carry multi-line
    messages or tracebacks; ours quote only their first line (of `.message`
    for TensorFlow's errors). h5py hides the
    OS reason ("No space left on device") behind "[Errno 28] Can't write":
    when the exception carries an errno whose text is not in the message, it
    is put in front.
    """
    message = getattr(error, "message", None)  # TensorFlow's OpError: the text without the op trace
    text = (message if isinstance(message, str) and message else str(error)).strip()
    text = text.splitlines()[0] if text else type(error).__name__
    code = getattr(error, "errno", None)
    if isinstance(code, int) and code > 0 and os.strerror(code) not in text:
        text = f"{os.strerror(code)}: {text}"
    return text
