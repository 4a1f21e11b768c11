"""Tiny file-system layer: plain `os` for local paths, `tf.io.gfile` for URLs.

Local paths avoid importing TensorFlow, so input errors are reported in a
fraction of a second and without TF's start-up log lines; gs:// and other TF
file systems still work everywhere.

`is_remote` (from paths.py) tells a URL from a local path, and
`write_text_atomic` / `write_json_atomic` the one way the package writes a
small file so that a crash leaves either the old file or the new one, never a
half-written one under the final name. They live here, in the lowest layer that
writes files, so the data tools and every layer above share them.
"""

from __future__ import annotations

import glob as _glob
import json
import os
import shutil
from typing import Any, List, Optional

from electra_tf.paths import is_remote  # the one URL test, in the bottom layer (paths.py)



def _gfile():
    # Lazy: TensorFlow takes seconds to import; only remote (gs://) paths need tf.io.gfile.
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return tf.io.gfile


def exists(path: str) -> bool:
    return _gfile().exists(path) if is_remote(path) else os.path.exists(path)


def isdir(path: str) -> bool:
    return _gfile().isdir(path) if is_remote(path) else os.path.isdir(path)


def glob(pattern: str) -> List[str]:
    return sorted(_gfile().glob(pattern) if is_remote(pattern) else _glob.glob(pattern))


def remove(path: str) -> None:
    if is_remote(path):
        _gfile().remove(path)
    else:
        os.remove(path)


def rmtree(path: str) -> None:
    if is_remote(path):
        if _gfile().exists(path):
            _gfile().rmtree(path)
    else:
        shutil.rmtree(path, ignore_errors=True)


def makedirs(path: str) -> None:
    if is_remote(path):
        _gfile().makedirs(path)
    else:
        os.makedirs(path, exist_ok=True)


def size(path: str) -> int:
    return int(_gfile().stat(path).length) if is_remote(path) else os.path.getsize(path)


def write_text_atomic(path: str, text: str) -> None:
    """Writes `text` (UTF-8) to `path` through `<path>.tmp` and a rename.

    Locally the temporary file is fsync'ed before `os.replace`, so after a
    crash the final name holds the old or the new content. Remote file systems
    get tf.io.gfile's rename (atomic on GCS object level).
    """
    tmp = path + ".tmp"
    if is_remote(path):
        with _gfile().GFile(tmp, "w") as f:
            f.write(text)
        _gfile().rename(tmp, path, overwrite=True)
        return
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        # Leave no half-written temporary behind (full disk, read-only directory).
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_json_atomic(path: str, value: Any, sort_keys: bool = False, indent: Optional[int] = 2) -> None:
    """`value` as JSON (one trailing newline), written by `write_text_atomic`.

    indent=None writes it compactly (large prediction files).
    """
    write_text_atomic(path, json.dumps(value, indent=indent, sort_keys=sort_keys) + "\n")
