"""Pre-training and fine-tuning share their common flags (electra_tf/training/shared_flags.py):
each one reads the same in both `--help` outputs (spelling, accepted values, default, help)."""

import re
import subprocess
import sys

import pytest

from electra_tf.training.shared_flags import SHARED_FLAGS


def _help_blocks(repo_root, module):
    """{flag name: its block of `--help` text} for `python -m module --help`."""
    proc = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True,
                          timeout=300, cwd=str(repo_root))
    assert proc.returncode == 0, proc.stderr[-2000:]
    blocks, name = {}, None
    for line in proc.stdout.splitlines():
        start = re.match(r"^  --(?:\[no\])?(\w+):", line)
        if start:
            name = start.group(1)
            blocks[name] = [line]
        elif name and line.startswith("    "):
            blocks[name].append(line)
        else:
            name = None
    return {k: "\n".join(v) for k, v in blocks.items()}


@pytest.fixture(scope="module")
def helps(repo_root):
    return {m: _help_blocks(repo_root, m) for m in ("electra_tf.pretrain", "electra_tf.finetune")}


@pytest.mark.parametrize("name", SHARED_FLAGS)
def test_a_shared_flag_reads_the_same_in_both_helps(helps, name):
    pretrain, finetune = helps["electra_tf.pretrain"], helps["electra_tf.finetune"]
    assert name in pretrain and name in finetune, name
    assert pretrain[name] == finetune[name]


def test_the_shared_values_are_the_ones_both_jobs_accept(helps):
    text = helps["electra_tf.finetune"]
    assert "<auto|cpu|gpu|mirrored|multi_worker|tpu>" in text["strategy"]
    assert "<none|bf16|fp16>" in text["mixed_precision"]
    # The old fine-tuning spellings are gone from both.
    for old in ("one_device", "mixed_float16|", "float32|"):
        assert all(old not in block for h in helps.values() for block in h.values()), old


def test_a_flag_of_one_job_only_is_not_in_the_other(helps):
    # The differences named in shared_flags.py's docstring.
    assert "tpu" in helps["electra_tf.pretrain"] and "tpu" not in helps["electra_tf.finetune"]
    # One name, two shapes: pre-training takes one seed, fine-tuning a comma-separated list.
    assert "(an integer)" in helps["electra_tf.pretrain"]["seed"]
    assert "comma-separated" in helps["electra_tf.finetune"]["seed"].lower()
    assert "seeds" not in helps["electra_tf.finetune"]


def test_batch_size_means_the_global_batch_in_both(helps):
    for h in helps.values():
        assert "global" in h["batch_size"].lower(), h["batch_size"]
