"""A data build killed with SIGKILL in the middle of a shard, then the same command again:
it finishes with no duplicate and no partial shard, byte-identical to an uninterrupted build.
(tests/data/test_build_pretraining_data.py::test_resume_builds_only_missing_shards covers
an in-process interruption.)"""

import hashlib
import os
import signal

import pytest

from electra_tf.data.build_pretraining_data import build_pretraining_data
from electra_tf.data.manifest import MANIFEST_NAME, shard_name
from electra_tf.data.reader import find_corrupt_shards
from reliability_helpers import REPO_ROOT, Output, pretrain_job, start_module, wait_until

SHARDS = 4


def _digests(directory):
    return {n: hashlib.sha256((directory / n).read_bytes()).hexdigest()
            for n in sorted(os.listdir(directory))}


@pytest.mark.large
def test_build_killed_mid_shard_then_rerun_completes_cleanly(tmp_path):
    text = (REPO_ROOT / "data" / "sample_corpus.txt").read_text(encoding="utf-8")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join([text] * 40), encoding="utf-8")  # ~3 MB, ~1 s per shard
    vocab = tmp_path / "vocab.txt"
    pretrain_job._quick_vocab(corpus, vocab)
    out = tmp_path / "shards"
    args = [f"--corpus={corpus}", f"--vocab_file={vocab}", f"--output_dir={out}", "--max_seq_length=64",
            f"--num_shards={SHARDS}", "--num_processes=1", "--noprogress"]

    proc = Output(start_module("electra_tf.data.build_pretraining_data", args))
    second_tmp = f".{shard_name(1, SHARDS)}.tmp-"

    def mid_second_shard():
        names = os.listdir(out) if out.is_dir() else []
        return shard_name(0, SHARDS) in names and any(n.startswith(second_tmp) for n in names)

    wait_until(mid_second_shard, 120, "shard 1 being written", poll=0.005)
    os.killpg(proc.proc.pid, signal.SIGKILL)
    proc.finish(30)
    left = os.listdir(out)
    assert any(n.startswith(second_tmp) for n in left) and MANIFEST_NAME not in left, left

    again = Output(start_module("electra_tf.data.build_pretraining_data", args))
    assert again.finish(180) == 0, again.text()[-3000:]
    assert f"resuming: 1 of {SHARDS} shards already complete, building {SHARDS - 1}" in again.text()
    # Exactly the shards and the manifest: the partial file is gone, nothing is duplicated.
    assert sorted(os.listdir(out)) == [MANIFEST_NAME] + [shard_name(i, SHARDS) for i in range(SHARDS)]
    assert find_corrupt_shards(str(out)) == []
    reference = tmp_path / "reference"
    build_pretraining_data(str(reference), str(vocab), [str(corpus)], max_seq_length=64, num_shards=SHARDS,
                           progress=False, log=lambda _: None)
    ours, theirs = _digests(out), _digests(reference)
    ours.pop(MANIFEST_NAME), theirs.pop(MANIFEST_NAME)
    assert ours == theirs
