"""The package's one file layer: joins, tf.io.gfile access, JSON read, JSON and text written atomically.

Plain `os` for local paths, `tf.io.gfile` for URLs (gs://, ...). Local paths
avoid importing TensorFlow, so input errors are reported in a fraction of a
second and without TF's start-up log lines; gs:// and other TF file systems
still work everywhere.

`is_remote` (paths.py) tells a URL from a local path; `write_text_atomic` /
`write_json_atomic` are the one way the package writes a small file so that a
crash leaves either the old file or the new one, never a half-written one under
the final name. Every layer above (data, models, the jobs, the tools) shares
them from here.
"""

from __future__ import annotations

import glob as _glob
import json
import os
import posixpath
import shutil
from typing import Any, List, Optional

from electra_tf.paths import is_remote  # the one URL test, in the bottom layer (paths.py)


def gfile():
    """`tf.io.gfile`, imported on first use: TensorFlow takes seconds to import, and only
    remote (gs://) paths need it."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return tf.io.gfile


def join(directory: str, name: str) -> str:
    """os.path.join that also works for gs:// style paths."""
    if is_remote(directory):
        return posixpath.join(directory, name)
    return os.path.join(directory, name)


def exists(path: str) -> bool:
    return gfile().exists(path) if is_remote(path) else os.path.exists(path)


def isdir(path: str) -> bool:
    return gfile().isdir(path) if is_remote(path) else os.path.isdir(path)


def glob(pattern: str) -> List[str]:
    return sorted(gfile().glob(pattern) if is_remote(pattern) else _glob.glob(pattern))


def remove(path: str) -> None:
    if is_remote(path):
        gfile().remove(path)
    else:
        os.remove(path)


def rmtree(path: str) -> None:
    if is_remote(path):
        if gfile().exists(path):
            gfile().rmtree(path)
    else:
        shutil.rmtree(path, ignore_errors=True)


def makedirs(path: str) -> None:
    if is_remote(path):
        gfile().makedirs(path)
    else:
        os.makedirs(path, exist_ok=True)


def size(path: str) -> int:
    return int(gfile().stat(path).length) if is_remote(path) else os.path.getsize(path)


def open_binary(path: str):
    """`path` opened for reading bytes (tf.io.gfile's GFile for a URL)."""
    if is_remote(path):
        return gfile().GFile(path, "rb")
    return open(path, "rb")  # pylint: disable=consider-using-with


def read_json(path: str, missing_ok: bool = False) -> Any:
    """The JSON value in the file at `path` (UTF-8).

    missing_ok: None when there is no file at `path`. Otherwise a missing file
    raises the file system's error, and a file that is not JSON json's
    `JSONDecodeError` (or `UnicodeDecodeError`), for the caller to word.
    """
    if is_remote(path):
        if missing_ok and not gfile().exists(path):
            return None
        with gfile().GFile(path, "r") as f:
            return json.loads(f.read())
    if missing_ok and not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.loads(f.read())


def write_text_atomic(path: str, text: str) -> None:
    """Writes `text` (UTF-8) to `path` through `<path>.tmp` and a rename.

    Locally the temporary file is fsync'ed before `os.replace`, so after a
    crash the final name holds the old or the new content. Remote file systems
    get tf.io.gfile's rename (atomic on GCS object level).
    """
    tmp = path + ".tmp"
    if is_remote(path):
        with gfile().GFile(tmp, "w") as f:
            f.write(text)
        gfile().rename(tmp, path, overwrite=True)
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
