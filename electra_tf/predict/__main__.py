"""`python -m electra_tf.predict`: label names and probabilities for every row of a file.

    python -m electra_tf.predict --model_dir runs/reviews/seed_1 --input_file new.csv --output_file predictions.jsonl

--model_dir is a fine-tuning seed directory, a classifier SavedModel
(`python -m electra_tf.export --kind classifier`), or a LiteRT folder or one of
its .tflite files (`export --kind classifier --format tflite`). --input_file is a .csv, .tsv or
.jsonl file (optionally .gz); its text column defaults to the one the model
was fine-tuned on (`text`, else `sentence`, for the built-in tasks), and
--text_column overrides it. --output_file (.jsonl, .csv or .tsv) gets every input
row with `predicted_label` and the class probabilities (JSON Lines: a
`probabilities` object; CSV/TSV: one `probability_<label>` column per class),
or `predicted_score` for a regression, and `truncated` (the text was longer
than the model's max_seq_length and was cut; stderr gives their share). Rows
stream through in batches, so a file of any size runs in bounded memory; a
progress bar counting rows goes to stderr (--noprogress: none). A row whose text is missing, null, empty or only
whitespace is refused with its line, as fine-tuning refuses it.
The output is written under a temporary name and renamed at the end: an error
or Ctrl-C leaves no partial file. Bad inputs stop with one line, exit 2.
"""

from __future__ import annotations

import collections
import csv
import json
import os
import sys
from typing import Dict, Iterator, List, Tuple

from absl import flags

from electra_tf.cli import parse_flags, report_error, report_interrupted, require_flags, run_absl
from electra_tf.config import ConfigError
from electra_tf.data.vocab import VocabError
from electra_tf.errors import ElectraError
from electra_tf.paths import output_dir_problem

OUTPUT_FORMATS = (".jsonl", ".csv", ".tsv")


RENAMED = {"output": "output_file", "input": "input_file"}  # old spelling -> new (refused by electra_tf/cli.py)


def define_flags(fv=None) -> None:
    """Defines this tool's absl flags on `fv` (default: absl's FLAGS)."""
    fv = flags.FLAGS if fv is None else fv
    flags.DEFINE_string("model_dir", None, "Fine-tuning seed_<n>/ directory, classifier SavedModel, or LiteRT folder "
                        "or .tflite file (export --format tflite) (required).", flag_values=fv)
    flags.DEFINE_string("input_file", None, ".csv, .tsv or .jsonl file (optionally .gz) of texts (required).",
                        flag_values=fv)
    flags.DEFINE_string("output_file", None, "Predictions file to write: .jsonl, .csv or .tsv (required).",
                        flag_values=fv)
    flags.DEFINE_string("text_column", None, "Column of the text (default: the one the model was fine-tuned on).",
                        flag_values=fv)
    flags.DEFINE_string("text_pair_column", None, "Column of the second text (pair models; default: as "
                        "fine-tuned).", flag_values=fv)
    flags.DEFINE_integer("batch_size", 64, "Texts per model call.", flag_values=fv)
    flags.DEFINE_enum("precision", "none", ["none", "bf16"], "bf16: a seed directory's encoder runs in bfloat16 "
                      "(faster on a CPU with AVX512_BF16; see export --precision).", flag_values=fv)
    flags.DEFINE_integer("max_seq_length", None, "Word pieces per text (seed directories; default: as "
                         "fine-tuned).", flag_values=fv)
    flags.DEFINE_bool("overwrite", False, "Replace an existing --output_file.", flag_values=fv)
    flags.DEFINE_bool("progress", True, "A progress bar on stderr (--noprogress: none).", flag_values=fv)


def parse_args(argv=None):
    """The flags of `argv` (without the program name), parsed as the command line parses them."""
    return parse_flags(define_flags, argv, prog="electra_tf.predict", renamed=RENAMED)


def _check_output(args) -> None:
    from electra_tf.predict import PredictError

    ext = os.path.splitext(args.output_file)[1].lower()
    if ext not in OUTPUT_FORMATS:
        raise PredictError(f"--output_file {args.output_file}: unknown file type {ext or '(none)'!r}; name it "
                           f".jsonl, .csv or .tsv")
    if os.path.isdir(args.output_file):
        raise PredictError(f"--output_file {args.output_file} is a directory; pass the path of the file to write")
    if os.path.exists(args.output_file) and not args.overwrite:
        raise PredictError(f"--output_file {args.output_file} exists; pass --overwrite or another path")
    problem = output_dir_problem(os.path.dirname(os.path.abspath(args.output_file)))
    if problem:
        raise PredictError(f"cannot write --output_file '{args.output_file}' ({problem}); choose a writable directory")
    if args.batch_size < 1:
        raise PredictError(f"--batch_size={args.batch_size} must be a positive integer")


def _columns(args, predictor, reader) -> Tuple[str, str]:
    from electra_tf.data.table_columns import Columns, resolve_text_column
    from electra_tf.predict import PredictError

    text = args.text_column or predictor.columns.get("text")
    text = resolve_text_column(reader, Columns(text=text)) if text is None or args.text_column else text
    if text not in reader.columns:
        raise PredictError(f"--input_file {reader.path} has no column {text!r} (the model was fine-tuned on it); its "
                           f"columns are: {', '.join(reader.columns)}; name the text column with --text_column")
    pair = None
    if predictor.pair:
        pair = args.text_pair_column or predictor.columns.get("text_pair")
        if pair is None:
            raise PredictError("the model takes text pairs: name the second text's column with --text_pair_column")
        if pair not in reader.columns:
            raise PredictError(f"--input_file {reader.path} has no column {pair!r} (the second text); its columns are: "
                               f"{', '.join(reader.columns)}; pass --text_pair_column")
    elif args.text_pair_column:
        raise PredictError(f"--text_pair_column {args.text_pair_column}: the model takes single texts; leave it out")
    return text, pair


def _batches(reader, text: str, pair, size: int) -> Iterator[List[Tuple[int, Dict]]]:
    """Rows in batches of `size`; a row without text (no key, null, empty or whitespace) is refused,
    as fine-tuning refuses it."""
    batch: List[Tuple[int, Dict]] = []
    for line, row in reader.rows():
        for column in (text, pair):
            if column is None:
                continue
            from electra_tf.predict import PredictError
            if column not in row or row[column] is None:
                raise PredictError(f"--input_file {reader.path}:{line}: no text in column {column!r}; fill it in "
                                   f"or delete the row")
            if not str(row[column]).strip():
                raise PredictError(f"--input_file {reader.path}:{line}: blank text in column {column!r}; fill it in "
                                   f"or delete the row")
        batch.append((line, row))
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


class _Writer:
    """Writes prediction rows as JSON Lines or CSV/TSV (header from the first batch)."""

    def __init__(self, f, ext: str, labels: List[str], regression: bool):
        self.f, self.ext, self.labels, self.regression = f, ext, labels, regression
        self.csv = None

    def write(self, row: Dict, prediction) -> None:
        if self.ext == ".jsonl":
            out = dict(row)
            if self.regression:
                out["predicted_score"] = prediction.score
            else:
                out["predicted_label"] = prediction.label
                out["probabilities"] = {k: round(v, 6) for k, v in prediction.probabilities.items()}
            out["truncated"] = prediction.truncated
            self.f.write(json.dumps(out, ensure_ascii=False) + "\n")
            return
        values = {k: ("" if v is None else v if isinstance(v, str) else json.dumps(v)) for k, v in row.items()}
        if self.regression:
            values["predicted_score"] = f"{prediction.score:.6g}"
        else:
            values["predicted_label"] = prediction.label
            values.update({f"probability_{k}": f"{v:.6f}" for k, v in prediction.probabilities.items()})
        values["truncated"] = "true" if prediction.truncated else "false"
        if self.csv is None:
            delimiter = "\t" if self.ext == ".tsv" else ","
            self.csv = csv.DictWriter(self.f, fieldnames=list(values), delimiter=delimiter, lineterminator="\n",
                                      extrasaction="ignore")
            self.csv.writeheader()
        self.csv.writerow(values)


CHUNK_BATCHES = 16  # batches read at a time, sorted by length inside the Predictor


def run(args) -> Dict:
    """Predicts every row of --input_file into --output_file; returns a summary."""
    from tqdm import tqdm

    from electra_tf.data.table_files import TableReader
    from electra_tf.predict import Predictor

    _check_output(args)
    predictor = Predictor(args.model_dir, args.batch_size, args.max_seq_length, precision=args.precision)
    reader = TableReader(args.input_file, "--input_file")
    text, pair = _columns(args, predictor, reader)
    ext = os.path.splitext(args.output_file)[1].lower()
    tmp = args.output_file + ".tmp"
    counts: collections.Counter = collections.Counter()
    rows = truncated = 0
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as f, \
                tqdm(total=None, unit=" rows", desc="predict", file=sys.stderr, disable=not args.progress,
                     mininterval=1.0) as bar:
            writer = _Writer(f, ext, predictor.labels, predictor.regression)
            # Chunks of several batches: the Predictor batches each chunk's texts in order of length
            # (less padding), and the rows are written in the file's order.
            for batch in _batches(reader, text, pair, args.batch_size * CHUNK_BATCHES):
                texts = [str(r[text]) for _, r in batch]
                pairs = [str(r[pair]) for _, r in batch] if pair else None
                for (_, row), prediction in zip(batch, predictor.predict(texts, pairs)):
                    writer.write(row, prediction)
                    counts[prediction.label] += 1
                    truncated += prediction.truncated
                rows += len(batch)
                # The bar counts rows; their total is estimated from the share of the file read so far
                # (exact once it is all read), so it needs no second pass over the file.
                done, size = reader.progress()
                bar.total = rows if done >= size else max(rows + 1, round(rows * size / max(done, 1)))
                bar.update(len(batch))
        if rows == 0:
            from electra_tf.predict import PredictError
            raise PredictError(f"--input_file {args.input_file} holds a header but no rows; nothing to predict")
        os.replace(tmp, args.output_file)
    finally:
        reader.close()
        if os.path.exists(tmp):
            os.remove(tmp)
    summary = {"output": args.output_file, "rows": rows}
    if not predictor.regression:
        summary["predicted_labels"] = {k: counts[k] for k in predictor.labels if counts[k]} or dict(counts)
    summary["truncated"] = truncated
    summary["max_seq_length"] = predictor.max_seq_length
    if truncated:
        length = f" {predictor.max_seq_length}" if predictor.max_seq_length else ""
        print(f"truncated: {100 * truncated / rows:.1f}% of the rows ({truncated:,} of {rows:,}) are longer than the "
              f"model's max_seq_length{length} word pieces and were cut (their \"truncated\" field is true)",
              file=sys.stderr, flush=True)
    return summary


def run_cli(args) -> int:
    """The command line's job, from the parsed flags; returns the exit code."""
    require_flags(args, "model_dir", "input_file", "output_file")
    try:
        summary = run(args)
    except (ElectraError, ConfigError, VocabError) as e:
        return report_error(str(e))
    except KeyboardInterrupt:
        return report_interrupted("no output was written; re-run the command")
    print(json.dumps(summary), flush=True)
    return 0


def main(argv=None) -> int:
    """`python -m electra_tf.predict` in-process: argv holds the flags only; returns the exit code."""
    return run_cli(parse_args(argv))


if __name__ == "__main__":
    run_absl(run_cli, define_flags, renamed=RENAMED)
