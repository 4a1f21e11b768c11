"""Shared helpers for the data tests: corpus slices and small vocabularies."""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Sequence

REPO_ROOT = Path(__file__).resolve().parents[2]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def shared_data_dir() -> Path:
    """The shared data folder, ../shared/data next to the repository checkout."""
    path = REPO_ROOT.parent / "shared" / "data"
    if not path.is_dir():
        raise FileNotFoundError(f"shared data not found at {path}")
    return path


def corpus_file(name: str) -> Path:
    return shared_data_dir() / "corpus" / name


def corpus_slice(name: str, num_docs: int, out: Path) -> Path:
    """Writes the first `num_docs` documents (blank-line separated) of a corpus file."""
    docs: List[str] = []
    current: List[str] = []
    with open(corpus_file(name), encoding="utf-8") as f:
        for line in f:
            if line.strip():
                current.append(line)
            elif current:
                docs.append("".join(current))
                current = []
                if len(docs) == num_docs:
                    break
    if current and len(docs) < num_docs:
        docs.append("".join(current))
    out.write_text("\n".join(docs), encoding="utf-8")
    return out


def word_vocab(texts: Sequence[str], size: int, extra: Sequence[str] = ()) -> List[str]:
    """A WordPiece-compatible vocab: specials, every character (bare and ##),
    then the most frequent lower-cased words. Fast and deterministic, unlike
    learning one; build_vocab itself is tested separately."""
    words = collections.Counter()
    chars = set()
    for text in texts:
        for word in re.findall(r"\w+|[^\w\s]", text.lower()):
            words[word] += 1
            chars.update(word)
    vocab = list(SPECIALS) + list(extra)
    seen = set(vocab)
    for c in sorted(chars):
        for tok in (c, "##" + c):
            if tok not in seen:
                vocab.append(tok)
                seen.add(tok)
    for word, _ in words.most_common():
        if len(vocab) >= size:
            break
        if word not in seen:
            vocab.append(word)
            seen.add(word)
    return vocab


def run_cli(module: str, *args: str, timeout: int = 180) -> subprocess.CompletedProcess:
    """Runs `python -m module args` and returns the completed process."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          timeout=timeout, cwd=str(REPO_ROOT), env=env)


def read_examples(paths) -> List[Dict[str, list]]:
    """Parses every record of the given shard files (in order) into lists."""
    import tensorflow as tf

    out = []
    for path in paths:
        for raw in tf.data.TFRecordDataset(str(path)):
            ex = tf.train.Example.FromString(raw.numpy())
            out.append({k: list(ex.features.feature[k].int64_list.value)
                        for k in ("input_ids", "input_mask", "segment_ids")})
    return out
