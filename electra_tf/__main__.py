"""`python -m electra_tf --help` (or `--version`): the tools and the shipped config names.

Each tool runs as `python -m electra_tf.<tool>` and has its own `--help`. Nothing here imports
TensorFlow.
"""

from __future__ import annotations

import sys

import electra_tf
from electra_tf.cli import report_error
from electra_tf.paths import CONFIG_DIR, config_names

# python -m electra_tf.<tool>: what it does (the tools' own --help has the flags).
TOOLS = (
    ("pretrain", "pre-train ELECTRA; no flags: the embedded default (sample corpus, tiny model)"),
    ("data.build_vocab", "learn a WordPiece vocab.txt from text files"),
    ("data.build_pretraining_data", "text files -> TFRecord shards for pretrain --data_dir"),
    ("finetune", "fine-tune on a GLUE task, SQuAD, CoNLL tagging or your CSV/TSV/JSONL file"),
    ("predict", "label a file with a fine-tuned model (or a SavedModel)"),
    ("export", "write a SavedModel for TF Serving (tokenizes raw strings in-graph)"),
    ("export.check", "load a SavedModel as TF Serving will (its C++ loader, warm-up replayed) and run it"),
    ("convert", "import Google / Hugging Face / keras-hub weights, or export ours to them"),
)


def usage() -> str:
    width = max(len(name) for name, _ in TOOLS)
    lines = [f"electra_tf {electra_tf.__version__}: ELECTRA pre-training, fine-tuning and serving in "
             f"TensorFlow 2 / Keras 3", "",
             "usage: python -m electra_tf.<tool> [flags]    (python -m electra_tf.<tool> --help: its flags)", "",
             "tools:"]
    lines += [f"  {name:<{width}}  {what}" for name, what in TOOLS]
    names = config_names()
    lines += ["", "configs (--config NAME, or --config path/to/config.json):",
              f"  {', '.join(names) if names else '(none found in ' + CONFIG_DIR + ')'}"]
    return "\n".join(lines)


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("--help", "-h", "-help", "help"):
        print(usage())
        return 0
    if args[0] in ("--version", "-V"):
        print(f"electra_tf {electra_tf.__version__}")
        return 0
    tools = ", ".join(name for name, _ in TOOLS)
    return report_error(f"python -m electra_tf takes --help or --version, not {args[0]!r}; run a tool as "
                        f"python -m electra_tf.<tool> ({tools})")


if __name__ == "__main__":
    sys.exit(main())
