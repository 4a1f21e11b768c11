"""Tiny file-system layer: plain `os` for local paths, `tf.io.gfile` for URLs.

Local paths avoid importing TensorFlow, so input errors are reported in a
fraction of a second and without TF's start-up log lines; gs:// and other TF
file systems still work everywhere.
"""

from __future__ import annotations

import glob as _glob
import os
import shutil
from typing import List


def _remote(path: str) -> bool:
    return "://" in path


def _gfile():
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return tf.io.gfile


def exists(path: str) -> bool:
    return _gfile().exists(path) if _remote(path) else os.path.exists(path)


def isdir(path: str) -> bool:
    return _gfile().isdir(path) if _remote(path) else os.path.isdir(path)


def glob(pattern: str) -> List[str]:
    return sorted(_gfile().glob(pattern) if _remote(pattern) else _glob.glob(pattern))


def remove(path: str) -> None:
    if _remote(path):
        _gfile().remove(path)
    else:
        os.remove(path)


def rmtree(path: str) -> None:
    if _remote(path):
        if _gfile().exists(path):
            _gfile().rmtree(path)
    else:
        shutil.rmtree(path, ignore_errors=True)


def makedirs(path: str) -> None:
    if _remote(path):
        _gfile().makedirs(path)
    else:
        os.makedirs(path, exist_ok=True)


def size(path: str) -> int:
    return int(_gfile().stat(path).length) if _remote(path) else os.path.getsize(path)
