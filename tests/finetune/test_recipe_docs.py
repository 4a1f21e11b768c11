"""The fine-tuning defaults the docs state are the code's, and the examples follow them.

- docs/finetune.md's flags table gives, per model size, the learning rate, layer-wise decay, batch
  and pooling of `electra_tf/training/size_defaults.py` (cells written as `value (size, size); ...`);
- no example command for users (README.md, docs/finetune.md's own-data and imported-encoder
  sections) overrides a recipe flag with a value other than the default for its model: an example
  that needs other values means the defaults are wrong, or the example is.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from doc_commands import markdown_commands

from electra_tf.training import size_defaults
from electra_tf.finetune.tasks.task_registry import get_task

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "finetune.md"
SIZES = sorted(size_defaults.SIZE_DEFAULTS)
# Example --init paths and the model_size of what they hold.
INIT_SIZES = {"runs/default": "tiny", "models/minilm": "imported"}
USER_SECTIONS = ("## Fine-tune on your own data", "## Fine-tune an imported encoder")
RECIPE_FLAGS = ("learning_rate", "epochs", "layerwise_lr_decay", "batch_size", "pooling")


def flags_table_cell(flag: str) -> str:
    row = next(line for line in DOC.read_text(encoding="utf-8").splitlines() if line.startswith(f"| `--{flag}` |"))
    return row.split(" | ")[1]


def per_size(cell: str):
    """{size: value text} from a cell written as `value (size, size); value (size)`."""
    out = {}
    for value, names in re.findall(r"([\w.+-]+) \(([a-z_, ]+)\)", cell):
        for name in names.split(","):
            out[name.strip()] = value
    return out


@pytest.mark.parametrize("flag, field", [("learning_rate", "learning_rate"),
                                         ("layerwise_lr_decay", "layerwise_lr_decay"),
                                         ("batch_size", "batch_size"), ("pooling", "pooling")])
def test_the_flags_table_states_each_sizes_default(flag, field):
    stated = per_size(flags_table_cell(flag))
    assert set(stated) == set(SIZES), (flag, sorted(stated))
    for size in SIZES:
        want = getattr(size_defaults.for_size(size), field)
        got = stated[size]
        assert (got == want) if isinstance(want, str) else float(got) == pytest.approx(want), (flag, size, got)


def user_commands():
    """(where, argv) of every finetune command in README.md and the user sections of finetune.md."""
    text = DOC.read_text(encoding="utf-8")
    pages = [("README.md", (REPO / "README.md").read_text(encoding="utf-8"))]
    for title in USER_SECTIONS:
        start = text.index(title)
        end = text.find("\n## ", start + len(title))
        pages.append((f"finetune.md {title}", text[start:end if end >= 0 else len(text)]))
    for where, page in pages:
        for kind, command in markdown_commands(page):
            if kind == "shell" and command.startswith("python -m electra_tf.finetune "):
                yield where, shlex.split(command.replace("\\\n", " "))


def test_user_examples_do_not_override_the_defaults():
    checked = 0
    for where, argv in user_commands():
        flags = {a[2:]: b for a, b in zip(argv, argv[1:]) if a.startswith("--")}
        init = flags.get("init")
        if init == "random":  # a random encoder of the run's config: the config's size
            init = flags["config"].split("/pretrained/")[0]
        size = INIT_SIZES.get(init)
        assert size is not None, f"{where}: add --init {init}'s model size to INIT_SIZES"
        task = get_task("own_data" if "train_file" in flags else flags["task"])
        defaults = dict(task.reference_hparams(size, "mean" if size == "imported" else None))
        for flag in RECIPE_FLAGS:
            if flag in flags:
                value, want = flags[flag], defaults[flag]
                same = value == want if isinstance(want, str) else float(value) == pytest.approx(float(want))
                assert same, f"{where}: --{flag} {value} differs from the {size} default {want}: {' '.join(argv)}"
        checked += 1
    assert checked >= 4
