"""Reads `.weights.h5` files written before the encoder owned its Transformer blocks.

Until version 0.1 the blocks were keras-hub `TransformerEncoder` layers and the
masked-LM head keras-hub's `MaskedLMHead`; Keras names the saved variables after
the attributes that hold them, which were those layers' private ones. The
variables and their order are unchanged, so an old file is read by renaming its
groups to today's attribute names in a temporary copy.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from typing import Iterator

import h5py

# Old group-name pattern -> today's; applied in order to every path in the file.
_RENAMES = (
    (re.compile(r"(^|/)transformer_encoder(_\d+)?/"), r"\1transformer_block\2/"),
    (re.compile(r"/_self_attention_layer/output_dense/"), "/attention_output_dense/"),
    (re.compile(r"/_self_attention_layer/(query|key|value)_dense/"), r"/\1_dense/"),
    (re.compile(r"/_self_attention_layer_norm/"), "/attention_layer_norm/"),
    (re.compile(r"/_feedforward_(layer_norm|intermediate_dense|output_dense)/"), r"/feedforward_\1/"),
    (re.compile(r"(^|/)_intermediate_(dense|layer_norm)/"), r"\1intermediate_\2/"),
)


def rename(path: str) -> str:
    """Today's name for a variable path of an old file (unchanged if it is current)."""
    for pattern, replacement in _RENAMES:
        path = pattern.sub(replacement, path)
    return path


def _dataset_paths(h5):
    paths = []
    h5.visititems(lambda name, obj: paths.append(name) if isinstance(obj, h5py.Dataset) else None)
    return paths


def is_legacy(path: str) -> bool:
    with h5py.File(path, "r") as h5:
        return any(rename(p) != p for p in _dataset_paths(h5))


def current_copy(path: str) -> str:
    """A temporary copy of an old-layout file with today's names (caller deletes it)."""
    fd, tmp = tempfile.mkstemp(suffix=".weights.h5")
    os.close(fd)
    try:
        with h5py.File(path, "r") as src, h5py.File(tmp, "w") as dst:
            for key, value in src.attrs.items():
                dst.attrs[key] = value
            for name in _dataset_paths(src):
                dst.create_dataset(rename(name), data=src[name][()])
            # Groups carry no data but Keras reads their attributes (e.g. metadata).
            src.visititems(lambda name, obj: _copy_group_attrs(obj, dst, name))
    except BaseException:
        os.remove(tmp)
        raise
    return tmp


@contextlib.contextmanager
def readable(path: str) -> Iterator[str]:
    """Yields a path Keras can load into today's layers: `path` itself, or a renamed
    temporary copy of an old-layout file, deleted on exit.

    Every reader of `.weights.h5` files goes through this (model directories,
    fine-tuning --init, classifier directories), so an old run loads everywhere.
    """
    source = current_copy(path) if is_legacy(path) else path
    try:
        yield source
    finally:
        if source != path:
            os.remove(source)


def _copy_group_attrs(obj, dst, name):
    if isinstance(obj, h5py.Group) and obj.attrs:
        group = dst.require_group(rename(name + "/").rstrip("/"))
        for key, value in obj.attrs.items():
            group.attrs[key] = value
