"""Content fingerprints of a job's input files, so that a re-run knows its inputs by content.

A fine-tuning or pre-training run records, beside its settings, a SHA-256 of every file it reads
(a folder: of every file under it, by relative name). A re-run into the same output folder compares
them before it reads or writes anything: the same content resumes or skips as before; changed
content is refused in one line naming the input, because results or checkpoints made from the old
files must not pass for results of the new ones.

>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> path = os.path.join(d, "train.csv")
>>> _ = open(path, "w").write("text,label\\nok,1\\n")
>>> before = fingerprints({"--train_file": path})
>>> _ = open(path, "w").write("text,label\\nok,0\\n")
>>> changed_inputs(before, fingerprints({"--train_file": path}))
['--train_file']
"""

from __future__ import annotations

import hashlib
import os
from typing import Dict, Iterable, List, Mapping, Optional

import tensorflow as tf

_CHUNK = 1 << 22  # 4 MiB reads


def file_sha256(path: str) -> str:
    """The SHA-256 of one file's bytes (local or any `tf.io.gfile` path)."""
    digest = hashlib.sha256()
    with tf.io.gfile.GFile(path, "rb") as f:
        while True:
            chunk = f.read(_CHUNK)
            if not chunk:
                break
            digest.update(chunk)
    return digest.hexdigest()


def _files_under(folder: str) -> List[str]:
    found = []
    for root, _, names in tf.io.gfile.walk(folder):
        for name in names:
            if not name.startswith("."):
                found.append(os.path.join(root, name))
    return sorted(found)


def path_sha256(path: str, skip: Iterable[str] = ()) -> Optional[str]:
    """A file's SHA-256; a folder's over its files' relative names and contents (hidden files
    and the relative names in `skip` left out); a TF checkpoint prefix's over its index and data
    files; None for a path that does not exist."""
    if tf.io.gfile.isdir(path):
        files = [p for p in _files_under(path) if os.path.relpath(p, path) not in set(skip)]
    elif tf.io.gfile.exists(path):
        return file_sha256(path)
    else:
        files = sorted(tf.io.gfile.glob(path + ".index") + tf.io.gfile.glob(path + ".data-*"))
        if not files:
            return None
    digest = hashlib.sha256()
    for p in files:
        name = os.path.relpath(p, path) if tf.io.gfile.isdir(path) else os.path.basename(p)
        digest.update(f"{name}\0{file_sha256(p)}\n".encode())
    return digest.hexdigest()


def fingerprints(inputs: Mapping[str, Optional[str]], skip: Iterable[str] = ()) -> Dict[str, Dict[str, str]]:
    """{input name: {"path", "sha256"}} for the inputs that are set and exist.

    Args:
      inputs: input name (the flag, e.g. "--train_file") -> path or None.
      skip: relative names inside folders to leave out (files a job writes itself).
    """
    out = {}
    for name, path in inputs.items():
        if not path:
            continue
        sha = path_sha256(path, skip)
        if sha is not None:
            out[name] = {"path": path, "sha256": sha}
    return out


def changed_inputs(before: Mapping[str, Mapping[str, str]], now: Mapping[str, Mapping[str, str]]) -> List[str]:
    """The inputs (sorted names) whose content differs between two `fingerprints` records; an
    input recorded on one side only counts as changed."""
    return sorted(name for name in set(before) | set(now)
                  if (before.get(name) or {}).get("sha256") != (now.get(name) or {}).get("sha256"))
