"""The efficiency study's data: one WordPiece vocabulary and one set of shards, built once per work directory."""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Callable, Dict

from scripts.study_lib import StudyError


def prepare_data(args, work: Path, log: Callable[[str], None]) -> Dict[str, str]:
    """One vocabulary and one set of shards for every run (built once, then reused).

    Args:
      args: the study's flags (corpus, corpus_max_lines, vocab_size, seq_length, seed).
      work: the study's work directory; the data goes to `work/data`.
      log: the study's progress printer.
    """
    from electra_tf.data.build_pretraining_data import build_pretraining_data
    from electra_tf.data.build_vocab import build_vocab
    from electra_tf.data.manifest import load_manifest

    data = work / "data"
    data.mkdir(parents=True, exist_ok=True)
    files = sorted({f for pattern in args.corpus.split(",") if pattern.strip()
                    for f in glob.glob(os.path.expanduser(pattern.strip()))})
    if not files:
        raise StudyError(f"--corpus {args.corpus!r} matches no file; pass text files or globs")
    if args.corpus_max_lines:
        # Quick runs: the first N lines of each file, copied once.
        cut = data / "corpus"
        cut.mkdir(exist_ok=True)
        short = []
        for i, f in enumerate(files):
            target = cut / f"{i}_{os.path.basename(f)}"
            if not target.is_file():
                with open(f, encoding="utf-8") as src:
                    lines = [line for _, line in zip(range(args.corpus_max_lines), src)]
                tmp = target.with_suffix(".tmp")
                tmp.write_text("".join(lines), encoding="utf-8")
                os.replace(tmp, target)
            short.append(str(target))
        files = short
    vocab = data / "vocab.txt"
    if not vocab.is_file():
        log(f"learning a {args.vocab_size}-token WordPiece vocabulary from {len(files)} file(s)")
        build_vocab(files, args.vocab_size, str(vocab), sample_lines=0, log=log)
    shards = data / "shards"
    if load_manifest(str(shards)) is None:
        log(f"building pre-training shards (seq {args.seq_length}) in {shards}")
        build_pretraining_data(str(shards), str(vocab), files, max_seq_length=args.seq_length,
                               num_shards=2, num_processes=1, seed=args.seed, progress=False,
                               log=log)
    return {"vocab_file": str(vocab), "data_dir": str(shards)}
