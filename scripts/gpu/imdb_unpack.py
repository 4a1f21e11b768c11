"""`unpack` (CPU): the parts `run` returned, checked and joined, into --model_dir with a row in its
history.json and README.md (steps, tokens, FLOPs, minutes, held-out AUC measured here on the CPU).
The package is imported inside the functions that need it."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import tarfile
from pathlib import Path

from imdb_common import DEFAULT_MODEL_DIR, MANIFEST, SHARED, die, python_module, say

# Held-out text for the discriminator's AUC: the last reviews of imdb/dev.tsv.gz. The first 2,000
# are the rows fine-tuning is scored on, so they stay out of everything here.
HELDOUT_SOURCE = SHARED / "imdb" / "dev.tsv.gz"
HELDOUT_ROWS = 1000
HELDOUT_FILE = "heldout.txt"
HISTORY_FILE = "history.json"


def write_heldout(source: Path, rows: int, target: Path) -> int:
    """The text of the last `rows` reviews of a sentence/label TSV, one document per review."""
    with gzip.open(source, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()[1:]
    reviews = [line.split("\t", 1)[0].strip() for line in lines[-rows:] if line.strip()]
    target.write_text("\n\n".join(reviews) + "\n", encoding="utf-8")
    return len(reviews)


def read_packed(files: Path, target: Path) -> dict:
    """Checks and joins the parts that `run` returned; extracts the snapshot into `target`."""
    manifest_path = files / MANIFEST
    if not manifest_path.is_file():
        die(f"{files} has no {MANIFEST}; pass the folder the device call's files came back to")
    manifest = json.loads(manifest_path.read_text())
    data = bytearray()
    for part in manifest["parts"]:
        path = files / part["name"]
        if not path.is_file():
            die(f"{path} is missing; the call's files are incomplete (fetch them again)")
        chunk = path.read_bytes()
        if hashlib.sha256(chunk).hexdigest() != part["sha256"]:
            die(f"{path} does not match its checksum in {MANIFEST}; fetch the call's files again")
        data += chunk
    if hashlib.sha256(bytes(data)).hexdigest() != manifest["sha256"]:
        die(f"the joined parts of {files} do not match their checksum")
    with tarfile.open(fileobj=io.BytesIO(bytes(data))) as tar:
        for member in tar.getmembers():
            if member.name.startswith(("/", "..")) or ".." in Path(member.name).parts:
                die(f"{member.name}: unexpected path in the snapshot archive")
        tar.extractall(target, filter="data")
    return manifest


def heldout_auc(model_dir: Path, heldout_dir: Path, batch: int = 64, seed: int = 0) -> dict:
    """The discriminator's held-out metrics of a model directory, on the CPU (fixed sampling seed)."""
    import keras

    from electra_tf.config import ElectraConfig
    from electra_tf.data.reader import pretraining_dataset
    from electra_tf.pretrain.pretrainer_loading import load_pretrainer

    keras.utils.set_random_seed(seed)
    model = load_pretrainer(str(model_dir))
    model.compile(optimizer="sgd")
    config = ElectraConfig.from_json(str(model_dir / "config.json"))
    data = pretraining_dataset(str(heldout_dir), config, batch, training=False)
    return {k: round(float(v), 4) for k, v in model.evaluate(data, verbose=0, return_dict=True).items()}


def unpack(args) -> None:
    files, model_dir = Path(args.files), Path(args.model_dir)
    scratch = model_dir.parent / (model_dir.name + ".unpack.tmp")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        manifest = read_packed(files, scratch)
        snapshot_dir = scratch / manifest["folder"]
        record = json.loads((snapshot_dir / "snapshot.json").read_text())
        history_path = model_dir / HISTORY_FILE
        history = json.loads(history_path.read_text()) if history_path.is_file() else []
        if manifest.get("continued_from") and not history:
            die(f"the run continued from a model, but {model_dir} has no {HISTORY_FILE} to add to")
        if not manifest.get("continued_from") and history:
            die(f"the run started from scratch, but {model_dir} already holds a model; unpack into a new "
                f"--model_dir")
        heldout = None
        if not args.no_heldout:
            write_heldout(Path(args.heldout_source), args.heldout_rows, scratch / HELDOUT_FILE)
            python_module("electra_tf.data.build_pretraining_data", "--corpus", str(scratch / HELDOUT_FILE),
                          "--vocab_file", str(snapshot_dir / "vocab.txt"), "--output_dir", str(scratch / "heldout"),
                          "--max_seq_length", str(manifest["seq"]), "--num_shards", "1", "--progress=false")
            heldout = heldout_auc(snapshot_dir, scratch / "heldout")
        row = run_row(manifest, record, history, snapshot_dir, heldout)
        model_dir.mkdir(parents=True, exist_ok=True)
        for item in snapshot_dir.iterdir():
            target = model_dir / ("last_snapshot.json" if item.name == "snapshot.json" else item.name)
            shutil.copy2(item, target)
        history.append(row)
        (model_dir / HISTORY_FILE).write_text(json.dumps(history, indent=2, sort_keys=True) + "\n")
        (model_dir / "README.md").write_text(model_readme(history))
        say(f"{model_dir}: step {row['steps']} of this run, {row['cumulative_steps']} in all; "
            f"held-out AUC {row['heldout_disc_auc']}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_row(manifest: dict, record: dict, history: list, snapshot_dir: Path, heldout) -> dict:
    from electra_tf.config import ElectraConfig
    from electra_tf.flops import total_train_flops

    config = ElectraConfig.from_json(str(snapshot_dir / "config.json"))
    steps, batch, seq = int(record["step"]), int(manifest["batch_size"]), int(manifest["seq"])
    flops = total_train_flops(config, batch, steps, seq)
    before = history[-1] if history else {"cumulative_steps": 0, "cumulative_tokens": 0, "cumulative_flops": 0.0}
    budget = record.get("time_budget") or {}
    return {
        "date": manifest["date"], "device": manifest["device"], "steps": steps,
        "cumulative_steps": before["cumulative_steps"] + steps,
        "tokens": steps * batch * seq, "cumulative_tokens": before["cumulative_tokens"] + steps * batch * seq,
        "flops": flops, "cumulative_flops": before["cumulative_flops"] + flops,
        "minutes_trained": record.get("minutes"), "minutes_on_device": manifest.get("minutes_since_start"),
        "first_step_seconds": budget.get("first_step_seconds"), "steps_per_second": budget.get("steps_per_second"),
        "xla_flags": manifest.get("xla_flags"), "train_metrics": record.get("train_metrics"),
        "heldout": heldout, "heldout_disc_auc": None if heldout is None else heldout.get("disc_auc"),
        "complete": record.get("train_steps") == steps,
    }


def model_readme(history: list) -> str:
    last = history[-1]

    def cell(value, form="{:,}"):
        return "-" if value is None else form.format(value)

    rows = "\n".join(
        f"| {r['date']} | {r['device']} | {r['steps']:,} | {r['cumulative_steps']:,} | {r['cumulative_tokens']:,} | "
        f"{r['cumulative_flops']:.2e} | {cell(r['minutes_trained'], '{:.1f}')} | "
        f"{cell(r['first_step_seconds'], '{:.0f}')} | {cell(r['steps_per_second'], '{:.1f}')} | "
        f"{cell(r['heldout_disc_auc'], '{:.3f}')} |" for r in history)
    return f"""# ELECTRA-Small pre-trained on IMDB reviews

An ELECTRA-Small discriminator and generator (`configs/small.json`: 12 blocks of 256, generator a
quarter as wide) pre-trained from scratch on the IMDB review text (`imdb.unsup` and `imdb.train`,
about 75,000 reviews) with an 8,000-piece WordPiece vocabulary learned from it, 128 tokens per
example, batch 128, bf16 with XLA, sampling temperature 2, warm-up 1,200 steps, linear decay to 0
at each run's last step. Weights are stored in float16 (the tools load them into float32).

Use it like any model directory:

```bash
python -m electra_tf.finetune --init models/electra-small-imdb --train_file reviews.csv --output_dir runs/imdb
```

Fine-tuning takes its defaults from `finetune_recipe.json` here where there is one (the recipe line
of `finetune` names it and says why; a flag overrides each setting): the recipe measured best for
these weights in docs/domain_study.md ("The kept ELECTRA-Small"). It names the pre-training step it
was measured at, and is set aside, with a note, once a later run has trained the weights further.

Made by `scripts/gpu/pretrain_small_imdb.py` (scripts/gpu/README.md), on GPUs lent for minutes:
each row is one run; a later run continues from the weights here with a fresh optimizer, its
own warm-up and decay. Held-out AUC: the discriminator's replaced-token AUC on the last 1,000
reviews of the IMDB dev split, measured on a CPU after the run.

| date | GPU | steps | steps in all | tokens in all | train FLOPs in all | minutes trained | first step (s, XLA compile) | steps/s | held-out AUC |
|---|---|---|---|---|---|---|---|---|---|
{rows}

Newest: {last['cumulative_steps']:,} steps in all; the last run {'reached' if last['complete'] else 'was cut before'} its
planned end.
"""


def add_arguments(verbs) -> None:
    p = verbs.add_parser("unpack", help="CPU: the returned parts into --model_dir, with its history row")
    p.add_argument("--files", required=True, help="the folder the device call's files came back to")
    p.add_argument("--model_dir", default=str(DEFAULT_MODEL_DIR))
    p.add_argument("--heldout_source", default=str(HELDOUT_SOURCE), help="the held-out text's TSV (its last rows)")
    p.add_argument("--heldout_rows", type=int, default=HELDOUT_ROWS)
    p.add_argument("--no_heldout", action="store_true", help="skip the held-out AUC")
