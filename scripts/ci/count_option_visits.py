"""How often a pre-training job's control passes through the options and config modules before it trains.

Issue 68 asks that a job's options be validated once into one plan. This script measures it: it
builds a tiny shard folder from data/sample_corpus.txt, starts `run_pretraining` on it with a
`sys.setprofile` hook that records every Python call entry, and stops the job when the training
loop (`Trainer.fit`) is entered. Consecutive entries in the same file are one visit (a validator
calling its own helpers is one pass through that module). Two counts per watched file: with every
Python file's frames (the standard library's and TensorFlow's too) ending a visit, and with only
the package's files (a call out to `os.path` and back is then no new visit); and a third, the
times the file is called into from outside it (no frame of it already on the stack). A fourth
figure: how often `ElectraConfig.validate` runs (each config built is validated: the job's config
should be built once). --walk prints the sequence of package files.

Usage:
    python scripts/ci/count_option_visits.py            # visits of pretrain/options.py and config.py
    python scripts/ci/count_option_visits.py --walk     # ...and the sequence of visited files
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys
import tempfile
from pathlib import Path

import electra_tf
from electra_tf.config import ElectraConfig
from electra_tf.data.build_pretraining_data import build_pretraining_data
from electra_tf.pretrain.options import PretrainOptions
from electra_tf.pretrain.pretrain_job import run_pretraining
from electra_tf.training.trainer import Trainer

PACKAGE = os.path.dirname(os.path.abspath(electra_tf.__file__)) + os.sep
REPO = Path(__file__).resolve().parents[2]
WATCHED = ("pretrain/options.py", "config.py")
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


class TrainingStarted(Exception):
    """Raised where the training loop begins: everything before it is what is measured."""


def _tiny_data(root: str) -> dict:
    """Two shards of the sample corpus with a vocabulary of its characters and frequent words
    (as tests/pretrain/conftest.py's job_data, which keeps it to seconds)."""
    text = (REPO / "data" / "sample_corpus.txt").read_text(encoding="utf-8")
    corpus = os.path.join(root, "train.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write(text)
    tokens = re.findall(r"[a-z0-9]+|[^\sa-z0-9]", text.lower())
    chars = sorted({c for t in tokens for c in t})
    frequent = [w for w, _ in collections.Counter(t for t in tokens if len(t) > 1).most_common(300)]
    vocab = list(dict.fromkeys(SPECIALS + chars + ["##" + c for c in chars if c.isalnum()] + frequent))
    vocab_file = os.path.join(root, "vocab.txt")
    with open(vocab_file, "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    data_dir = os.path.join(root, "shards")
    build_pretraining_data(data_dir, vocab_file, [corpus], max_seq_length=64, num_shards=2, num_processes=1,
                           progress=False, log=lambda *_: None)
    return {"data_dir": data_dir, "vocab_file": vocab_file, "vocab_size": len(vocab)}


def _collapse(names) -> list:
    """`names` with each run of one name kept once: the visits."""
    return [name for i, name in enumerate(names) if i == 0 or names[i - 1] != name]


def _relative(path: str) -> str:
    return path[len(PACKAGE):].replace(os.sep, "/") if path.startswith(PACKAGE) else path


def _walk(opts: PretrainOptions):
    """The files whose functions `run_pretraining(opts)` enters, in order, up to the first training
    step, package files relative to the package; consecutive entries in one file appear once. And
    for each watched file, how often it is called into from outside it (no frame of it on the stack:
    a return into it from its own call out is no new entry). And how often `ElectraConfig.validate` ran."""
    visited = []
    entries = collections.Counter()
    validations = 0
    # Counted from the call events, not by wrapping the method: a wrapper's frames (in this file)
    # would split config.py's visits and change the other figures.
    validate_code = ElectraConfig.validate.__code__

    def on_event(frame, event, _arg):
        nonlocal validations
        if event != "call":
            return
        validations += frame.f_code is validate_code
        name = _relative(frame.f_code.co_filename)
        if not visited or visited[-1] != name:
            visited.append(name)
        if name in WATCHED:
            caller = frame.f_back
            while caller is not None and _relative(caller.f_code.co_filename) != name:
                caller = caller.f_back
            if caller is None:
                entries[name] += 1

    def stop(*_args, **_kwargs):
        raise TrainingStarted()

    real_fit = Trainer.fit
    Trainer.fit = stop
    sys.setprofile(on_event)
    try:
        run_pretraining(opts, log=lambda *_: None)
    except TrainingStarted:
        pass
    finally:
        sys.setprofile(None)
        Trainer.fit = real_fit
    return visited, entries, validations


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--walk", action="store_true", help="also print the sequence of visited files")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as root:
        data = _tiny_data(root)
        opts = PretrainOptions(config=str(REPO / "configs" / "tiny.json"), data_dir=data["data_dir"],
                               vocab_file=data["vocab_file"], model_dir=os.path.join(root, "run"),
                               overrides=[f"vocab_size={data['vocab_size']}"], batch_size=8, train_steps=2,
                               verbose="0")
        walk, entries, validations = _walk(opts)
    package_walk = _collapse([name for name in walk if not os.path.isabs(name) and not name.startswith("<")])
    if args.walk:
        print(" -> ".join(package_walk))
    for name in WATCHED:
        print(f"{name}: {walk.count(name)} visits before the first training step "
              f"({package_walk.count(name)} counting only the package's files; "
              f"called into from outside it {entries[name]} times)")
    print(f"ElectraConfig.validate: {validations} runs before the first training step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
