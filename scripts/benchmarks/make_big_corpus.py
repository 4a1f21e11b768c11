"""Writes a large pre-training corpus by repeating the shared corpus in shuffled document order.

    python scripts/benchmarks/make_big_corpus.py --output /tmp/big/corpus.txt --size_mb 100 [--seed 0]
    python scripts/benchmarks/make_big_corpus.py --output /tmp/big/corpus.txt.gz --size_mb 100   # gzip'd
    python scripts/benchmarks/make_big_corpus.py --output /tmp/big/parts --num_files 8 --size_mb 100  # a folder

With --num_files N the output is a new directory of N files (part-00000.txt, ...), cut at
document boundaries, about equal in size: the layout the google-research/electra builder
reads (--corpus-dir) and parallelises over, one file per process at a time.

Input: the shared corpus (`../shared/data/corpus/*.txt` next to the repository, or --corpus),
one sentence or paragraph per line, a blank line between documents. Output: the same layout,
with every pass over the documents in a new seeded random order, until the file holds at least
--size_mb megabytes of text (10^6 bytes, uncompressed). The same seed and size give the same
file. Used to measure the data tools at corpus scale (scripts/benchmarks/benchmark_data.py); the text is
the shared corpus's, so its vocabulary (distinct words) is that of the small corpus.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import os
import random
import sys
from pathlib import Path
from typing import List

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CORPUS = str(REPO.parent / "shared" / "data" / "corpus" / "*.txt")


def read_documents(pattern: str) -> List[bytes]:
    """The blank-line separated documents of every file matching `pattern`, as bytes."""
    files = sorted(glob.glob(pattern))
    if not files:
        raise SystemExit(f"error: --corpus {pattern!r} matches no file; pass the shared corpus glob")
    docs: List[bytes] = []
    for path in files:
        with open(path, "rb") as f:
            text = f.read()
        for doc in text.split(b"\n\n"):
            doc = doc.strip(b"\n")
            if doc.strip():
                docs.append(doc + b"\n")
    if not docs:
        raise SystemExit(f"error: --corpus {pattern!r} holds no text")
    return docs


def _open(path: str):
    if path.endswith(".gz"):
        return gzip.open(path, "wb", compresslevel=6)
    return open(path, "wb")  # pylint: disable=consider-using-with


def write_corpus(docs: List[bytes], output: str, size_bytes: int, seed: int, num_files: int = 1) -> dict:
    """Writes shuffled passes over `docs` until `size_bytes`; returns counts.

    With num_files > 1, `output` is a directory to create, holding that many
    files, each ending at a document boundary.
    """
    rng = random.Random(seed)
    if num_files > 1:
        os.makedirs(output)
        paths = [os.path.join(output, f"part-{i:05d}.txt") for i in range(num_files)]
    else:
        paths = [output]
    written = passes = num_docs = 0
    file_no = 0
    f = _open(paths[0] + ".tmp")
    in_file = 0  # bytes in the current file
    try:
        while written < size_bytes:
            order = list(range(len(docs)))
            rng.shuffle(order)
            for i in order:
                if file_no + 1 < num_files and written >= (file_no + 1) * size_bytes // num_files:
                    f.close()
                    os.replace(paths[file_no] + ".tmp", paths[file_no])
                    file_no += 1
                    f = _open(paths[file_no] + ".tmp")
                    in_file = 0
                if in_file:
                    f.write(b"\n")  # exactly one blank line between documents
                    written += 1
                    in_file += 1
                f.write(docs[i])
                written += len(docs[i])
                in_file += len(docs[i])
                num_docs += 1
                if written >= size_bytes:
                    break
            passes += 1
    finally:
        f.close()
    os.replace(paths[file_no] + ".tmp", paths[file_no])
    return {"bytes": written, "documents": num_docs, "passes": passes, "files": file_no + 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", required=True, help="file to write (.gz: gzip'd)")
    parser.add_argument("--size_mb", type=float, default=100.0, help="at least this many MB (10^6 bytes) of text")
    parser.add_argument("--seed", type=int, default=0, help="seeds the document order")
    parser.add_argument("--corpus", default=DEFAULT_CORPUS, help="glob of the source corpus files")
    parser.add_argument("--num_files", type=int, default=1, help="> 1: --output is a new directory of this many files")
    args = parser.parse_args()
    if args.size_mb <= 0:
        raise SystemExit(f"error: --size_mb={args.size_mb} must be > 0")
    if args.num_files < 1:
        raise SystemExit(f"error: --num_files={args.num_files} must be >= 1")
    out_dir = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(out_dir):
        raise SystemExit(f"error: cannot write --output {args.output!r}: {out_dir!r} is not a directory; create it first")
    if args.num_files > 1 and os.path.exists(args.output):
        raise SystemExit(f"error: --output {args.output!r} exists; with --num_files it must be a new directory")
    docs = read_documents(args.corpus)
    counts = write_corpus(docs, args.output, int(args.size_mb * 1e6), args.seed, args.num_files)
    print(f"wrote {args.output}: {counts['bytes']:,} bytes of text in {counts['files']} file(s), "
          f"{counts['documents']:,} documents ({counts['passes']} shuffled pass(es) over {len(docs):,} "
          f"source documents)", file=sys.stderr)


if __name__ == "__main__":
    main()
