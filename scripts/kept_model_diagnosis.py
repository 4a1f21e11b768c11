"""Why does an early pre-trained ELECTRA-Small fine-tune below random initialisation? Measurements.

    python scripts/kept_model_diagnosis.py all            # every measurement not yet in the work dir
    python scripts/kept_model_diagnosis.py positions      # or one: positions, lengths, tokens, probe, disc

Each measurement compares the kept model (models/electra-small-imdb/), an earlier point of the same
run (--early, default runs/electra-small-imdb-step3767, made with `scripts/gpu/pretrain_small_imdb.py
unpack --model_dir`) and a random encoder of the same shape and vocabulary, on IMDB reviews the
pre-training never saw (imdb/dev.tsv.gz) and the labelled rows of the domain study:

- positions: the norm of each position-embedding row. Pre-training at 128 tokens trains rows 0-127
  only; fine-tuning at 256 reads rows 128-255 as they were drawn.
- lengths: how full pre-training examples are (the builder packs every corpus token; what an
  example looks like around its [SEP]).
- tokens: whether pre-training and fine-tuning cut the same text into the same pieces.
- probe: a linear probe (logistic regression on frozen, mean-pooled features) of the embedding
  output (L0) and of blocks 3/6/9/12, 500 labelled reviews, 1,000 others scored, at 128 and 256
  pieces; at 256 also the kept model with position rows 128-255 copied from rows 0-127.
- disc: the discriminator on short texts: one word of a held-out sentence swapped for a random word,
  scored alone (as a short fine-tuning text is) and at the start of its review (as pre-training
  examples are); where the highest replaced-probability falls.

Each result is written to <work_dir>/<name>.json as it finishes (a re-run skips those present);
docs/domain_study.md ("Why it starts below random") reads them.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import sys
from pathlib import Path
from typing import Dict, List

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
LAYERS = (0, 3, 6, 9, 12)


def read_tsv(path: Path, limit: int, skip: int = 0):
    rows = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        col_s, col_l = header.index("sentence"), header.index("label")
        for i, line in enumerate(f):
            if i < skip:
                continue
            parts = line.rstrip("\n").split("\t")
            rows.append((parts[col_s], int(parts[col_l])))
            if len(rows) == limit:
                break
    return rows


def load(kind: str, args):
    """(encoder, config, vocab path) of "kept", "early" or "random" (seed 1, the kept model's shape)."""
    import keras

    from electra_tf.models import build_encoder
    from electra_tf.models.model_folder import load_config
    from electra_tf.models.saving import load_encoder

    if kind == "random":
        config = load_config(args.kept)
        keras.utils.set_random_seed(1)
        encoder = build_encoder(config)
        encoder.build({k: (None, 128) for k in ("input_ids", "input_mask", "segment_ids")})
        return encoder, config, os.path.join(args.kept, "vocab.txt")
    folder = args.kept if kind == "kept" else args.early
    encoder, config = load_encoder(folder)
    return encoder, config, os.path.join(folder, "vocab.txt")


def measure_positions(args) -> Dict:
    """Mean norm of the position-embedding rows pre-training reached (0 .. max_seq_length - 1), of the
    next as many, and of the rest; and of the token rows."""
    out = {}
    for kind in ("kept", "early", "random"):
        encoder, config, _ = load(kind, args)
        table = encoder.embeddings.position_embedding.position_embeddings.numpy()
        norms, n = np.linalg.norm(table, axis=1), config.max_seq_length
        tokens = np.linalg.norm(encoder.embeddings.token_embedding.embeddings.numpy(), axis=1)
        out[kind] = {"pretrained_length": n, "rows_trained": float(norms[:n].mean()),
                     "rows_next": float(norms[n:2 * n].mean()), "rows_rest": float(norms[2 * n:].mean()),
                     "token_rows": float(tokens.mean())}
    return out


def measure_lengths(args) -> Dict:
    """Builds shards from the first 2,000 reviews of the pre-training corpus as `run` does (128
    tokens, the same vocabulary) and reads how many pieces each example holds."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "corpus.txt"
        with gzip.open(SHARED / "corpus" / "imdb.train.txt.gz", "rt", encoding="utf-8") as f, \
                open(text, "w", encoding="utf-8") as out:
            docs = 0
            for line in f:
                out.write(line)
                docs += line.strip() == ""
                if docs == 2000:
                    break
        subprocess.check_call([sys.executable, "-m", "electra_tf.data.build_pretraining_data", "--corpus", str(text),
                               "--vocab_file", os.path.join(args.kept, "vocab.txt"), "--output_dir",
                               f"{tmp}/shards", "--max_seq_length", "128", "--num_shards", "1", "--progress=false"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        from electra_tf.data.reader import pretraining_dataset  # batch 1: its batches drop a remainder
        from electra_tf.models.model_folder import load_config

        vocab = Path(args.kept, "vocab.txt").read_text(encoding="utf-8").split("\n")
        lengths, before_sep = [], []
        for batch in pretraining_dataset(f"{tmp}/shards", load_config(args.kept), 1, training=False):
            for ids, n in zip(batch["input_ids"].numpy(), batch["input_mask"].numpy().sum(1)):
                lengths.append(int(n))
                before_sep.append(vocab[ids[n - 2]])
    lengths = np.array(lengths)
    sentence_end = np.mean([t in (".", "!", "?", '"', ")") for t in before_sep])
    return {"examples": int(len(lengths)), "full_share": float((lengths == 128).mean()),
            "under_64_share": float((lengths < 64).mean()), "median_pieces": float(np.median(lengths)),
            "piece_before_sep_ends_a_sentence": float(sentence_end)}


def measure_tokens(args) -> Dict:
    """The pre-training builder's tokenizer and fine-tuning's on the same 2,000 held-out reviews."""
    from electra_tf.data.tokenizer import WordPieceTokenizer
    from electra_tf.finetune.readers.tokenization import FinetuneTokenizer

    vocab = os.path.join(args.kept, "vocab.txt")
    texts = [t for t, _ in read_tsv(SHARED / "imdb" / "dev.tsv.gz", 2000)]
    from electra_tf.config import ElectraConfig

    normalization = ElectraConfig.from_json(os.path.join(args.kept, "config.json")).normalization
    pre = WordPieceTokenizer(vocab, normalization=normalization)
    fine = FinetuneTokenizer(vocab, normalization=normalization).tokenize(texts)
    same = sum(pre.tokenize(t) == f for t, f in zip(texts, fine))
    unk = sum(f.count(1) for f in fine) / max(1, sum(len(f) for f in fine))  # [UNK] is id 1 here
    return {"texts": len(texts), "identical": same, "pieces_per_review": float(np.mean([len(f) for f in fine])),
            "share_over_254_pieces": float(np.mean([len(f) > 254 for f in fine])), "unk_share": unk}


def _features(encoder, config, vocab, texts, length) -> Dict[int, np.ndarray]:
    import tensorflow as tf

    from electra_tf.preprocessing import TextPreprocessor

    pre = TextPreprocessor(vocab, length, do_lower_case=config.do_lower_case)
    parts: Dict[int, List[np.ndarray]] = {layer: [] for layer in LAYERS}
    from electra_tf.models.transformer_block import key_mask  # the encoder's own mask
    for i in range(0, len(texts), 50):
        inputs = pre(tf.constant(texts[i:i + 50]))
        m = tf.cast(inputs["input_mask"], tf.float32)[:, :, None]
        x = encoder.embeddings(inputs["input_ids"], inputs["segment_ids"], training=False)
        if encoder.embeddings_projection is not None:
            x = encoder.embeddings_projection(x)
        mask = key_mask(inputs["input_mask"])
        hidden = [x]
        for block in encoder.transformer_layers:
            x = block(x, mask, training=False)
            hidden.append(x)
        for layer in LAYERS:
            parts[layer].append((tf.reduce_sum(hidden[layer] * m, 1) / tf.reduce_sum(m, 1)).numpy())
    return {layer: np.concatenate(v) for layer, v in parts.items()}


def measure_probe(args) -> Dict:
    from scripts.study_lib.baselines import linear_probe

    train = read_tsv(SHARED / "imdb" / "train.tsv.gz", 500)
    dev = read_tsv(SHARED / "imdb" / "dev.tsv.gz", 1000)
    texts = [t for t, _ in train] + [t for t, _ in dev]
    y_tr, y_dv = [l for _, l in train], [l for _, l in dev]
    partial = Path(args.work_dir) / "probe.partial.json"  # each variant as it finishes (a re-run resumes)
    out: Dict[str, Dict] = json.loads(partial.read_text()) if partial.is_file() else {}
    for name in args.probe_variants.split(","):
        kind, length = name.split("@")[0], int(name.split("@")[1])
        if name in out:
            continue
        encoder, config, vocab = load("kept" if kind == "kept_tiled" else kind, args)
        if kind == "kept_tiled":  # rows 128-255 as trained rows 0-127: what the untrained rows cost
            table = encoder.embeddings.position_embedding.position_embeddings
            values = table.numpy()
            values[128:256] = values[:128]
            table.assign(values)
        feats = _features(encoder, config, vocab, texts, length)
        out[f"{kind}@{length}"] = {f"L{layer}": round(100 * linear_probe(f[:500], y_tr, f[500:], y_dv)["best"], 2)
                                   for layer, f in feats.items()}
        print(kind, length, out[f"{kind}@{length}"], flush=True)
        partial.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return out


def _short_sentences(n: int, seed: int = 1):
    """(sentence, its review) of held-out reviews whose first sentence has 8-30 words."""
    rows = read_tsv(SHARED / "imdb" / "dev.tsv.gz", 3000, skip=2000)
    out = []
    for text, _ in rows:
        first = re.split(r"(?<=[.!?])\s+", text, maxsplit=1)[0]
        if 8 <= len(first.split()) <= 30 and first[-1] in ".!?":
            out.append((first, text))
        if len(out) == n:
            break
    return out


def measure_disc(args) -> Dict:
    import tensorflow as tf

    from electra_tf.models.saving import load_discriminator
    from electra_tf.preprocessing import TextPreprocessor

    encoder, head, config = load_discriminator(args.kept)
    vocab_file = os.path.join(args.kept, "vocab.txt")
    words = [w for w in Path(vocab_file).read_text(encoding="utf-8").split("\n") if w.isalpha() and len(w) >= 3]
    pre = TextPreprocessor(vocab_file, 128, do_lower_case=True)
    rng = random.Random(1)
    pairs = _short_sentences(200)
    stats = {"alone": [], "in_review": []}
    last_piece, other_pieces = [], []
    for sentence, review in pairs:
        tokens = sentence.split()
        i = rng.randrange(1, len(tokens) - 1)
        swapped = " ".join(tokens[:i] + [rng.choice(words)] + tokens[i + 1:])
        rest = review[len(sentence):]
        batch = [sentence, swapped, sentence + rest, swapped + rest]
        inputs = pre(tf.constant(batch))
        probs = tf.sigmoid(head(encoder(inputs, training=False))).numpy()
        n = inputs["input_mask"].numpy().sum(1)
        top = [probs[j, 1:n[j] - 1].max() for j in range(4)]  # real pieces: no [CLS], no [SEP]
        stats["alone"].append(top[1] > top[0])
        stats["in_review"].append(top[3] > top[2])
        p = probs[0, 1:n[0] - 1]
        last_piece.append(p[-1])
        other_pieces.extend(p[:-1])
        # Where the original sentence alone peaks: its last piece (the one before [SEP])?
        stats.setdefault("alone_peak_on_last", []).append(int(np.argmax(p)) == len(p) - 1)
    return {"pairs": len(pairs),
            "swapped_higher_alone": int(sum(stats["alone"])),
            "swapped_higher_in_review": int(sum(stats["in_review"])),
            "original_alone_peaks_on_last_piece": int(sum(stats["alone_peak_on_last"])),
            "last_piece_mean_prob": float(np.mean(last_piece)), "other_pieces_mean_prob": float(np.mean(other_pieces))}


MEASUREMENTS = {"positions": measure_positions, "lengths": measure_lengths, "tokens": measure_tokens,
                "disc": measure_disc, "probe": measure_probe}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=["all", *MEASUREMENTS])
    p.add_argument("--kept", default=str(REPO / "models" / "electra-small-imdb"))
    p.add_argument("--early", default=str(REPO / "runs" / "electra-small-imdb-step3767"))
    p.add_argument("--work_dir", default=str(REPO / "runs" / "diagnosis"))
    p.add_argument("--probe_variants", default="kept@256,kept_tiled@256,random@256,early@256,kept@128,early@128,random@128",
                   help="probe: encoder@pieces, in order (kept, early, random, kept_tiled)")
    args = p.parse_args(argv)
    for name, folder in (("--kept", args.kept), ("--early", args.early)):
        if not os.path.isfile(os.path.join(folder, "config.json")):
            p.error(f"{name} {folder} holds no model (config.json); scripts/gpu/README.md says how one is unpacked")
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    for name in (MEASUREMENTS if args.what == "all" else [args.what]):
        target = work / f"{name}.json"
        if target.is_file():
            continue
        result = MEASUREMENTS[name](args)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, target)
        print(name, json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
