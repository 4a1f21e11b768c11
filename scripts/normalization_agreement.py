"""Do the shards, fine-tuning, the SavedModel and the Hugging Face export see the same ids?

For each language file and text normalisation: learns a vocabulary from the
training text with build_vocab (that normalisation), then tokenizes the
held-out lines with

* the shard builder's tokenizer (`WordPieceTokenizer`, what build_pretraining_data runs),
* fine-tuning's tokenizer (`FinetuneTokenizer`, i.e. `TextPreprocessor`),
* a SavedModel holding `TextPreprocessor` (as `export` writes it), saved and loaded back,
* the Hugging Face export's tokenizer files, loaded with `AutoTokenizer.from_pretrained`,
* the keras-hub preset's tokenizer (`keras_hub.models.ElectraTokenizer` with the lowercase /
  strip_accents that `convert --to keras_hub` writes),
* `transformers.BertTokenizer` on the same vocab.txt (the `hf` extra), and
* the reference `FullTokenizer` (google-research/electra `model/tokenization.py`),
  when --reference names a copy of that file (it imports `six` and TensorFlow),

and prints one Markdown table row per (language, mode): the lines whose ids
differ from the shard builder's, and the [UNK]s each gives.

    python scripts/normalization_agreement.py \\
        --data_dir ../shared/data/multilingual --languages de,ja,zh \\
        [--reference path/to/tokenization.py] [--vocab_size 8000] [--sample_lines 20000]

The normalisations: "default" (bert, lower-cased, accents stripped), "cased"
(bert, neither), "lower_accents_kept" (bert, `--strip_accents false`) and
"nfkc_casefold" (the first releases' default, lower-cased).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
from typing import Dict, List, Optional, Sequence

MODES = {
    "default": ("bert", True, True),
    "cased": ("bert", False, False),
    "lower_accents_kept": ("bert", True, False),
    "nfkc_casefold": ("nfkc_casefold", True, True),
}


def _saved_model_ids(vocab_file: str, normalization, lines: Sequence[str], directory: str) -> List[List[int]]:
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from electra_tf.preprocessing import TextPreprocessor  # pylint: disable=import-outside-toplevel

    module = tf.Module()
    module.pre = TextPreprocessor(vocab_file, 512, normalization=normalization)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(texts):
        ids = module.pre.tokenize(texts)
        return {"values": ids.flat_values, "splits": ids.row_splits}

    module.tokenize = tokenize
    tf.saved_model.save(module, directory, signatures={"tokenize": tokenize})
    loaded = tf.saved_model.load(directory).signatures["tokenize"]
    out = loaded(tf.constant(list(lines)))
    values, splits = out["values"].numpy().tolist(), out["splits"].numpy().tolist()
    return [values[splits[i]:splits[i + 1]] for i in range(len(lines))]


def _reference(path: Optional[str]):
    if not path:
        return None
    spec = importlib.util.spec_from_file_location("reference_tokenization", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(train_file: str, heldout_file: str, mode: str, lower: bool, strip: bool, work: str,
            vocab_size: int, sample_lines: int, reference=None) -> Dict[str, object]:
    """{tokenizer name: (lines differing from the shard builder, [UNK] count)} for one file and mode."""
    from transformers import AutoTokenizer, BertTokenizer  # pylint: disable=import-outside-toplevel

    from electra_tf.convert.tokenizer_files import write_hf_tokenizer  # pylint: disable=import-outside-toplevel
    from electra_tf.data.build_vocab import build_vocab  # pylint: disable=import-outside-toplevel
    from electra_tf.data.normalization import TextNormalization  # pylint: disable=import-outside-toplevel
    from electra_tf.data.tokenizer import WordPieceTokenizer  # pylint: disable=import-outside-toplevel
    from electra_tf.finetune.readers.tokenization import FinetuneTokenizer  # pylint: disable=import-outside-toplevel

    normalization = TextNormalization.create(lower, strip, mode)
    vocab_file = os.path.join(work, "vocab.txt")
    build_vocab([train_file], vocab_size, vocab_file, lower_case=lower, strip_accents=strip, mode=mode,
                sample_lines=sample_lines, min_count=2, log=lambda line: None)
    with open(heldout_file, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    shards = WordPieceTokenizer(vocab_file, normalization=normalization)
    flat, splits = shards.tokenize_batch(lines)
    base = [flat[splits[i]:splits[i + 1]].tolist() for i in range(len(lines))]
    unk = shards.special.unk
    results = {"shard builder": base,
               "fine-tuning": FinetuneTokenizer(vocab_file, normalization=normalization).tokenize(lines),
               "SavedModel": _saved_model_ids(vocab_file, normalization, lines, os.path.join(work, "saved"))}
    hf_dir = os.path.join(work, "hf")
    os.makedirs(hf_dir, exist_ok=True)
    write_hf_tokenizer(hf_dir, vocab_file, normalization, 512)
    results["HF export"] = AutoTokenizer.from_pretrained(hf_dir)(lines, add_special_tokens=False)["input_ids"]
    import keras_hub  # pylint: disable=import-outside-toplevel

    from electra_tf.data.vocab import load_vocab  # pylint: disable=import-outside-toplevel

    keras_tok = keras_hub.models.ElectraTokenizer(vocabulary=load_vocab(vocab_file), lowercase=lower,
                                                  strip_accents=strip)
    results["keras-hub preset"] = [[int(i) for i in row] for row in keras_tok(lines)]
    bert = BertTokenizer(vocab_file, do_lower_case=lower, strip_accents=strip)
    results["BertTokenizer"] = bert(lines, add_special_tokens=False)["input_ids"]
    if reference is not None and (lower or not strip):  # the reference strips accents only when lower-casing
        full = reference.FullTokenizer(vocab_file, do_lower_case=lower, strip_accents=strip)
        results["FullTokenizer"] = [full.convert_tokens_to_ids(full.tokenize(line)) for line in lines]
    return {name: (sum(a != b for a, b in zip(ids, base)), sum(row.count(unk) for row in ids), len(lines))
            for name, ids in results.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", required=True, help="Folder of <lang>_train.txt and <lang>_heldout.txt.")
    parser.add_argument("--languages", default="de,ja,zh", help="Comma-separated language prefixes.")
    parser.add_argument("--modes", default=",".join(MODES), help="Comma-separated modes (module docstring).")
    parser.add_argument("--reference", default=None, help="A copy of google-research/electra model/tokenization.py.")
    parser.add_argument("--vocab_size", type=int, default=8000, help="Vocabulary size to learn.")
    parser.add_argument("--sample_lines", type=int, default=20000, help="Training lines the learner samples.")
    args = parser.parse_args(argv)
    reference = _reference(args.reference)
    names = ["fine-tuning", "SavedModel", "HF export", "keras-hub preset", "BertTokenizer"] + (["FullTokenizer"] if reference else [])
    print("| language / mode | lines | " + " | ".join(f"differing: {n}" for n in names)
          + " | [UNK] shards / " + " / ".join(names) + " |")
    print("|---|---|" + "---|" * (len(names) + 1))
    for lang in args.languages.split(","):
        for mode_name in args.modes.split(","):
            mode, lower, strip = MODES[mode_name]
            with tempfile.TemporaryDirectory() as work:
                got = measure(os.path.join(args.data_dir, f"{lang}_train.txt"),
                              os.path.join(args.data_dir, f"{lang}_heldout.txt"), mode, lower, strip, work,
                              args.vocab_size, args.sample_lines, reference)
            differing = " | ".join(str(got[n][0]) if n in got else "–" for n in names)
            unks = " / ".join(str(got[n][1]) if n in got else "–" for n in ["shard builder"] + names)
            print(f"| {lang}, {mode_name} | {got['shard builder'][2]:,} | {differing} | {unks} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
