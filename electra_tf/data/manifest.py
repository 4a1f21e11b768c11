"""Shard names and the manifest.json that describes a finished build.

The manifest is written last (temp name, then rename), so its presence means
every shard it lists is complete. Readers check it against the model config.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, List, Optional

from electra_tf.data.data_errors import DataError
from electra_tf.fileio import join, read_json

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "electra_tf.pretraining_data/1"
SHARD_PREFIX = "pretrain_data.tfrecord"
SHARD_GLOB = SHARD_PREFIX + "-*-of-*"
WORK_DIR = ".build"  # per-shard stats and the build fingerprint, removed at the end
FEATURES = ("input_ids", "input_mask", "segment_ids")


def shard_name(index: int, num_shards: int) -> str:
    return f"{SHARD_PREFIX}-{index:05d}-of-{num_shards:05d}"


def fingerprint(settings: Dict[str, Any]) -> str:
    """Stable hash of the build settings (what must match to resume)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def describe_difference(old: Dict[str, Any], new: Dict[str, Any]) -> str:
    """'max_seq_length 64 vs 128, seed 1 vs 2' for the keys that differ."""
    parts = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            a, b = old.get(key), new.get(key)
            if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
                parts.append(f"{key} differs")
            else:
                parts.append(f"{key} {a!r} there vs {b!r} now")
    return ", ".join(parts) or "unknown difference"


def read_json_object(path: str) -> Optional[Dict[str, Any]]:
    """The JSON object at `path` (a manifest, a plan, shard stats), or None when the file does not exist.

    Raises:
      DataError: the file exists but is not a JSON object.
    """
    try:
        value = read_json(path, missing_ok=True)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"{path} is not valid JSON ({e}); delete it and rebuild the data") from None
    if value is not None and not isinstance(value, dict):
        raise DataError(f"{path} does not hold a JSON object; delete it and rebuild the data")
    return value


def load_manifest(directory: str) -> Optional[Dict[str, Any]]:
    """The manifest of a shard directory, or None if there is none.

    Raises:
      DataError: it is unreadable or of an unknown format.
    """
    path = join(directory, MANIFEST_NAME)
    manifest = read_json_object(path)
    if manifest is not None and manifest.get("format") != MANIFEST_FORMAT:
        raise DataError(
            f"{path} has format {manifest.get('format')!r}, expected {MANIFEST_FORMAT!r}; "
            f"rebuild the data with python -m electra_tf.data.build_pretraining_data"
        )
    return manifest


def shard_files(manifest: Dict[str, Any], directory: str) -> List[str]:
    """Full paths of the shards a manifest lists, in order."""
    return [join(directory, s["file"]) for s in manifest["shards"]]
