"""`python -m electra_tf.convert`: import released ELECTRA weights, or export ours.

Import into our model directory (the layout of electra_tf/models/model_folder.py):

    python -m electra_tf.convert --from google --input electra_small/ --output_dir models/small \
        --num_attention_heads 4
    python -m electra_tf.convert --from hf --input electra-small-discriminator/ \
        --generator_input electra-small-generator/ --output_dir models/small
    python -m electra_tf.convert --from keras_hub --input electra_small_preset/ --output_dir models/small
    python -m electra_tf.convert --from hf --input all-MiniLM-L6-v2/ --output_dir models/minilm
        (a BERT-family encoder, model_type bert: it becomes the discriminator; its pooler and
        any BERT pre-training heads are dropped. The directory holds the encoder alone:
        config.json, vocab.txt, discriminator.weights.h5; `pretrain --init` adds a fresh
        generator and discriminator head)

Export one of our model directories:

    python -m electra_tf.convert --from electra_tf --input models/small --to google --output_dir ckpt/model.ckpt
        (vocab.txt and electra_config.json, the facts the checkpoint cannot hold, go beside it)
    python -m electra_tf.convert --from electra_tf --input models/small --to hf --output_dir hf_out/
    python -m electra_tf.convert --from electra_tf --input models/small --to keras_hub --output_dir preset/

Names that map to no weight, weights the checkpoint lacks and shape
disagreements fail with one message listing all of them. A checkpoint that has
no generator (or no discriminator head) as a whole converts without it: one
line says what the directory holds, nothing is written for the missing parts
(each weight the source has is written once), and conversion.json records them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from absl import flags

from electra_tf.cli import parse_flags, report_error, require_flags, run_absl
from electra_tf.config import ConfigError, ElectraConfig
from electra_tf.convert import common, google, hf, keras_hub as kh
from electra_tf.convert.mapping import CONVERTED, DISCRIMINATOR_HEAD, GENERATOR, ConversionError
from electra_tf.convert.tokenizer_files import hf_note, keras_hub_note
from electra_tf.data.vocab import VocabError, load_vocab
from electra_tf.models import model_folder, saving
from electra_tf.models.model_folder import ModelDirError, resolve_model_dir
from electra_tf.paths import hub_download_hint

SOURCES = ("google", "hf", "keras_hub", "electra_tf")
TARGETS = ("electra_tf", "google", "hf", "keras_hub")


RENAMED = {"output": "output_dir"}  # old spelling -> new (electra_tf/cli.py refuses the old one)


def define_flags(fv=None) -> None:
    """Defines this tool's absl flags on `fv` (default: absl's FLAGS)."""
    fv = flags.FLAGS if fv is None else fv
    flags.DEFINE_enum("from", None, list(SOURCES), "Format of --input (required).", flag_values=fv)
    flags.DEFINE_enum("to", "electra_tf", list(TARGETS), "Format to write.", flag_values=fv)
    flags.DEFINE_string("input", None, "Checkpoint prefix/dir, HF dir, preset dir, or model dir (required).",
                        flag_values=fv)
    flags.DEFINE_string("generator_input", None, "hf: the ElectraForMaskedLM (generator) directory.", flag_values=fv)
    flags.DEFINE_string("output_dir", None, "Where to write (required): our model directory; --to google: a "
                        "checkpoint prefix (dir/model.ckpt; vocab.txt and electra_config.json go beside it); "
                        "--to hf / keras_hub: a directory.", flag_values=fv)
    flags.DEFINE_string("vocab", None, "vocab.txt (default: found beside the input).", flag_values=fv)
    flags.DEFINE_string("config", None, "ElectraConfig for the fields a checkpoint does not store "
                        "(dropout, max_seq_length, do_lower_case, ...): a config name (small, base, ...; "
                        "python -m electra_tf --help lists them) or a JSON file.", flag_values=fv)
    flags.DEFINE_integer("num_attention_heads", None, "google: discriminator heads, for a checkpoint without "
                         "electra_config.json beside it (google-research/electra's models use hidden_size // 64).",
                         flag_values=fv)
    flags.DEFINE_enum("hidden_act", None, ["gelu", "gelu_approximate"], "keras_hub: GELU form of the imported "
                      "model (default gelu, the form ELECTRA was trained with; gelu_approximate reproduces "
                      "keras-hub's numbers).", flag_values=fv)
    flags.DEFINE_bool("require_all", False, "Fail if the generator or the discriminator head is absent.",
                      flag_values=fv)


def _args(values) -> argparse.Namespace:
    """The parsed flags as the attributes the steps below read (`--from` is a Python keyword)."""
    require_flags(values, "from", "input", "output_dir")
    names = ("input", "generator_input", "output_dir", "vocab", "config", "num_attention_heads", "hidden_act",
             "require_all")
    return argparse.Namespace(source=values["from"].value, target=values["to"].value,
                              **{name: values[name].value for name in names})


def parse_args(argv=None) -> argparse.Namespace:
    """The flags of `argv` (without the program name), parsed as the command line parses them."""
    return _args(parse_flags(define_flags, argv, prog="electra_tf.convert", renamed=RENAMED))


def _fail(msg):
    return report_error(msg)


def run(args) -> int:
    try:
        base = ElectraConfig.load(args.config) if args.config else None
        if args.source == "electra_tf":
            return _export(args)
        if args.target != "electra_tf":
            return _fail(f"--to {args.target} needs --from electra_tf; convert to our model directory first")
        return _import(args, base)
    except (ConversionError, ConfigError, VocabError, ModelDirError) as e:
        return _fail(str(e))


_DIRECTORIES = {"hf": "a Hugging Face ELECTRA or BERT model directory (config.json + model.safetensors)",
                "keras_hub": "a keras-hub ElectraBackbone preset directory"}


def _check_input_dirs(args) -> None:
    """--input (and --generator_input) of hf / keras_hub must be local directories."""
    given = [("--input", args.input)]
    if args.generator_input:
        given.append(("--generator_input", args.generator_input))
    for flag, path in given:
        if os.path.isdir(path):
            continue
        what = "does not exist" if not os.path.exists(path) else "is not a directory"
        hint = hub_download_hint(path)
        if hint:
            raise ConversionError(f"{flag} {path!r} {what}; {hint}, then pass {flag} {path.split('/')[1]}")
        raise ConversionError(f"{flag} {path!r} {what}; pass {_DIRECTORIES[args.source]}")


def _import(args, base) -> int:
    optional = () if args.require_all else (DISCRIMINATOR_HEAD, GENERATOR)
    source = {"format": args.source, "input": os.path.basename(os.path.normpath(args.input))}
    if args.source in _DIRECTORIES:
        _check_input_dirs(args)
    if args.source == "google":
        tensors, skipped = google.read_checkpoint(args.input)
        vocab = args.vocab or google.find_vocab(args.input)
        config = google.import_config(common.sizes_from_tensors(tensors), args.input, base,
                                      args.num_attention_heads)
        source["skipped"] = len(skipped)
    elif args.source == "hf":
        config, tensors, info = hf.load(args.input, args.generator_input, base)
        if base is None or base.text_normalization is None:
            # BERT's rules with the casing of the model's tokenizer_config.json (--config's without one).
            default_lower = base.do_lower_case if base is not None else config.do_lower_case
            config = config.with_normalization(hf.normalization(args.input, default_lower))
        vocab = args.vocab or hf.find_vocab(args.input, args.generator_input)
        source.update(info)
        if "note" in info:
            print(f"warning: {info['note']}", file=sys.stderr)
    else:
        pretrainer, status, vocab = kh.load_preset(args.input, base, args.hidden_act or "gelu", args.vocab)
        if args.require_all:
            raise ConversionError("a keras-hub ElectraBackbone has no discriminator head and no generator; "
                                  "drop --require_all to convert the encoder alone")
        source["hidden_act"] = pretrainer.config.hidden_act
        common.write_model_dir(args.output_dir, pretrainer, vocab, source, status)
        _report(args.output_dir, status, source)
        return 0
    if vocab is None:
        raise ConversionError(f"no vocab.txt beside {args.input}; pass --vocab")
    pretrainer, status = common.load_canonical(config, load_vocab(vocab), tensors, args.input, optional)
    common.write_model_dir(args.output_dir, pretrainer, vocab, source, status)
    _report(args.output_dir, status, source)
    return 0


_PART_NAMES = {DISCRIMINATOR_HEAD: "replaced-token head", GENERATOR: "generator"}


def _megabytes(directory: str) -> str:
    total = sum(os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory)
                if os.path.isfile(os.path.join(directory, name)))
    return f"{total / 1e6:.0f} MB" if total >= 1e6 else f"{total / 1e3:.0f} kB"


def _report(output, status, source):
    """One plain line on stderr saying what the directory holds; the JSON summary on stdout."""
    kept = [_PART_NAMES[p] for p, state in sorted(status.items()) if state == CONVERTED and p in _PART_NAMES]
    absent = [_PART_NAMES.get(p, p) for p, state in sorted(status.items()) if state != CONVERTED]
    dropped = "".join(f"; dropped {part}" for part in source.get("dropped", ()))
    what = "the encoder" + (" only" if not kept else ", its " + " and its ".join(kept))
    missing = (f"; the source has no {' and no '.join(absent)} (not written: pretrain --init makes "
               f"{'them' if len(absent) > 1 else 'it'} fresh)") if absent else ""
    print(f"{output}: {what} ({_megabytes(output)}){missing}{dropped}", file=sys.stderr)
    print(json.dumps({"output": output, "parts": status}))


def _export(args) -> int:
    if args.target == "electra_tf":
        return _fail("--from electra_tf needs --to google, hf or keras_hub")
    # A pre-training run directory (python -m electra_tf.pretrain): its model is in <run>/pretrained/.
    args.input = resolve_model_dir(args.input, "--input", lambda line: print(line, file=sys.stderr))
    vocab = os.path.join(args.input, model_folder.VOCAB_FILE)
    if args.target == "keras_hub":
        encoder, config = saving.load_encoder(args.input)
        kh.export_preset(encoder, args.output_dir, vocab if os.path.isfile(vocab) else None, config.do_lower_case,
                         seed=kh.POOLER_SEED, strip_accents=config.normalization.strip_accents)
        print(kh.export_note(args.output_dir, _megabytes(args.output_dir)), file=sys.stderr)
        note = keras_hub_note(config.normalization)
        if note and os.path.isfile(vocab):
            print(note, file=sys.stderr)
        print(json.dumps({"output": args.output_dir, "format": "keras_hub", "pooler": kh.POOLER_STATE}))
        return 0
    objective = model_folder.load_config(args.input).objective
    if objective not in ("electra", "electra_15", "two_stage", "adversarial"):
        # The google/hf layouts hold a generator, a discriminator and its head.
        return _fail(f"{args.input} was pre-trained with objective {objective!r} (no replaced-token "
                     f"head); --to {args.target} needs an ELECTRA model; use --to keras_hub for its encoder")
    pretrainer = common.load_pretraining_model(args.input)  # refuses a directory without vocab.txt
    if args.target == "google":
        # vocab.txt and electra_config.json go beside the checkpoint: the import reads them.
        google.export_pretrainer(pretrainer, args.output_dir, vocab_file=vocab)
        if not pretrainer.config.normalization.is_bert:
            print(f"warning: the model's text normalisation ({pretrainer.config.normalization.describe()}) is not "
                  f"the reference tokenizer's (FullTokenizer lower-cases with str.lower(), not NFKC case "
                  f"folding); electra_config.json records it for python -m electra_tf.convert --from google",
                  file=sys.stderr)
    else:
        hf.export(pretrainer, args.output_dir, vocab if os.path.isfile(vocab) else None)
        note = hf_note(pretrainer.config.normalization)
        if note:
            print(note, file=sys.stderr)
    print(json.dumps({"output": args.output_dir, "format": args.target}))
    return 0


def main(argv=None) -> int:
    """`python -m electra_tf.convert` in-process: argv holds the flags only; returns the exit code."""
    return run(parse_args(argv))


if __name__ == "__main__":
    run_absl(lambda values: run(_args(values)), define_flags, renamed=RENAMED)
