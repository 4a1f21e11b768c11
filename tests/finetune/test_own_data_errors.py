"""Bad inputs of `finetune --train_file` and `predict`, each one catalogued line (docs/errors.md).

Every case runs the real CLI entry point in-process (absl flags for finetune, argv
for predict) and checks: exit code 2, exactly one `error:` line equal to the
catalogue's message (`<...>` stands for a path or value), and nothing written
(no output directory or file afterwards). `test_docs_list_these_messages` keeps
docs/errors.md in step with the messages here.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from finetune.cli_helpers import error_lines, finetune_main, predict_main
from finetune.conftest import write_vocab

REPO = Path(__file__).resolve().parents[2]
F, P = "finetune", "predict"

# id -> (tool, message); the message is the whole line, `<...>` for any non-empty text.
MESSAGES = {
    "missing-text-column": (F, "error: --train_file <path> has no 'text' or 'sentence' column; its columns are: "
                               "review, label; name the text column with --text_column"),
    "missing-label-column": (F, "error: --train_file <path> has no column 'label'; its columns are: text, sentiment; "
                                "name the label column with --label_column"),
    "missing-text-and-label-columns": (F, "error: --train_file <path> has no 'text' or 'sentence' column and no "
                                          "column 'label'; its columns are: review, sentiment; name the text column "
                                          "with --text_column and the label column with --label_column"),
    "jsonl-missing-text-and-label-columns": (F, "error: --validation_file <path> has no column 'review' and no "
                                                "column 'stars'; its columns are: body, score; name the text column "
                                                "with --text_column and the label column with --label_column"),
    "missing-pair-column": (F, "error: --train_file <path> has no column 'hypothesis'; its columns are: text, label; "
                               "name the second text's column with --text_pair_column"),
    "empty-file": (F, "error: --train_file <path> is empty; it needs a header line naming the columns, then one row "
                      "per example"),
    "header-only": (F, "error: --train_file <path> holds a header but no rows; add one row per example"),
    "one-class": (F, "error: --train_file <path>: every label is 'positive' (one class); a classifier needs "
                     "examples of at least two classes"),
    "unseen-label": (F, "error: --validation_file <path>:3: label 'neutral' does not occur in --train_file (labels: "
                        "negative, positive); fix the label or add examples of it to the training file"),
    "not-utf8": (F, "error: --train_file <path>:3 is not UTF-8 (byte 0xe9 at column 4; Latin-1 or cp1252?); convert "
                    "the file, e.g. iconv -f latin1 -t utf-8 train.csv > train.utf8.csv"),
    "blank-label": (F, "error: --train_file <path>:3: blank label in column 'label'; fill it in or delete the row"),
    "jsonl-not-object": (F, "error: --train_file <path>:2: a JSON list, not an object; write one object per line, "
                            "e.g. {\"text\": \"...\", \"label\": \"...\"}"),
    "ragged-row": (F, "error: --train_file <path>:3: 3 comma-separated fields where the header has 2 (a comma inside "
                      "an unquoted text? quote it); fix or delete the line"),
    "unknown-file-type": (F, "error: --train_file <path>: unknown file type '.txt'; name it .csv, .tsv or .jsonl "
                             "(optionally .gz)"),
    "regression-label-not-a-number": (F, "error: --validation_file <path>:2: label 'high' is not a number, but the "
                                         "training labels are numbers (regression); fix the label"),
    "no-validation-data": (F, "error: --train_file needs validation data: pass --validation_file, or "
                              "--validation_split 0.1 to hold out 10% of the training rows"),
    "bad-validation-split": (F, "error: --validation_split=1.5 must be a fraction between 0 and 1, e.g. 0.1"),
    "train-file-and-task": (F, "error: --train_file fine-tunes on your own files, --task sst2 on a built-in task's "
                               "--data_dir; pass one of them"),
    "file-flag-without-train-file": (F, "error: --validation_file needs --train_file (your labelled training data)"),
    "glue-header-names-other-columns": (F, "error: <path>: the header has 'text' as column 1 where sst2 expects "
                                           "'sentence' (header: text, label); rename the column, or fine-tune on "
                                           "your own file with --train_file (--text_column, --label_column)"),
    "glue-not-utf8": (F, "error: <path>:3 is not UTF-8 (byte 0xe9 at column 4; Latin-1 or cp1252?); convert the "
                         "file, e.g. iconv -f latin1 -t utf-8 train.tsv > train.utf8.tsv"),
    "squad-not-utf8": (F, "error: <path>:3 is not UTF-8 (byte 0xe9 at column 22; Latin-1 or cp1252?); convert the "
                          "file, e.g. iconv -f latin1 -t utf-8 train-v1.1.json > train-v1.1.utf8.json"),
    "tagging-not-utf8": (F, "error: <path>:4 is not UTF-8 (byte 0xe9 at column 4; Latin-1 or cp1252?); convert the "
                            "file, e.g. iconv -f latin1 -t utf-8 train.txt > train.utf8.txt"),
    "negative-max-train-examples": (F, "error: --max_train_examples=-5 must be a positive integer (leave it out to "
                                       "use them all)"),
    "both-validation-flags": (F, "error: --validation_file and --validation_split both given; pass one of them"),
    "data-dir-with-train-file": (F, "error: --data_dir is for the built-in tasks; with --train_file, name the files "
                                    "with --train_file / --validation_file"),
    "own-data-task-without-train-file": (F, "error: --task own_data reads your own files: pass --train_file (and "
                                            "--validation_file or --validation_split)"),
    "split-leaves-no-rows": (F, "error: --validation_split 0.1 of the 2 rows of <path> leaves no validation or no "
                                "training row; use more rows or another fraction"),
    "jsonl-invalid-json": (F, "error: --train_file <path>:2: not valid JSON (Expecting value); write one JSON object "
                              "per line"),
    "jsonl-missing-key": (F, "error: --train_file <path>:2: no 'text' key; every object needs the text column"),
    "jsonl-missing-keys": (F, "error: --train_file <path>:3: no 'text' and no 'label' key; every object needs the "
                              "text and label columns"),
    "jsonl-null-text": (F, "error: --train_file <path>:2: the text in column 'text' is null; write a string"),
    "blank-text": (F, "error: --train_file <path>:3: blank text in column 'text'; fill it in or delete the row"),
    "whitespace-only-text": (F, "error: --train_file <path>:4: blank text in column 'text'; fill it in or delete "
                                "the row"),
    "tsv-blank-text": (F, "error: --validation_file <path>:3: blank text in column 'text'; fill it in or delete the "
                          "row"),
    "jsonl-empty-text": (F, "error: --train_file <path>:2: blank text in column 'text'; fill it in or delete the row"),
    "test-file-blank-text": (F, "error: --test_file <path>:2: blank text in column 'text'; fill it in or delete the "
                                "row"),
    "blank-second-text": (F, "error: --train_file <path>:3: blank second text in column 'hypothesis'; fill it in or "
                             "delete the row"),
    "label-type-regression-not-a-number": (F, "error: --train_file <path>:3: label 'negative' is not a number, but "
                                              "--label_type regression needs a number in every row; fix the label or "
                                              "leave out --label_type"),
    "label-type-without-train-file": (F, "error: --label_type needs --train_file (your labelled training data)"),
    "jsonl-label-not-a-value": (F, "error: --train_file <path>:2: label in column 'label' is a JSON list; write a "
                                   "string or a number"),
    "label-not-finite": (F, "error: --train_file <path>:2: label nan in column 'label' is not a finite number; write "
                            "a number or a class name"),
    "predict-not-a-classifier": (P, "error: <dir> holds no fine-tuned classifier (classifier.json or "
                                    "saved_model.pb); fine-tune one with python -m electra_tf.finetune and pass its "
                                    "seed_<n>/ directory (a pre-trained model scores tokens with "
                                    "electra_tf.scoring.Scorer)"),
    "predict-missing-model": (P, "error: <path> does not exist; pass a fine-tuning seed_<n>/ directory, a "
                                 "classifier SavedModel or a LiteRT folder / .tflite file"),
    "predict-missing-text-column": (P, "error: --input_file <path> has no column 'text' (the model was fine-tuned on "
                                       "it); its columns are: review; name the text column with --text_column"),
    "predict-header-only": (P, "error: --input_file <path> holds a header but no rows; nothing to predict"),
    "predict-output-exists": (P, "error: --output_file <path> exists; pass --overwrite or another path"),
    "predict-output-is-a-directory": (P, "error: --output_file <path> is a directory; pass the path of the file to "
                                         "write"),
    "predict-bad-batch-size": (P, "error: --batch_size=0 must be a positive integer"),
    "predict-pair-column-for-a-single-text-model": (P, "error: --text_pair_column hypothesis: the model takes single "
                                                       "texts; leave it out"),
    "predict-row-without-text": (P, "error: --input_file <path>:2: no text in column 'text'; fill it in or delete the row"),
    "predict-blank-text": (P, "error: --input_file <path>:4: blank text in column 'text'; fill it in or delete the row"),
    "predict-output-type": (P, "error: --output_file <path>: unknown file type '.txt'; name it .jsonl, .csv or .tsv"),
}


def template_regex(message: str) -> str:
    return ".+?".join(re.escape(part) for part in re.split(r"<[^<>]+>", message))


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    """A tiny config and vocabulary (random init: every case fails before training)."""
    from electra_tf.config import ElectraConfig

    d = tmp_path_factory.mktemp("own_errors")
    vocab = write_vocab(str(d / "vocab.txt"))
    size = sum(1 for _ in open(vocab, encoding="utf-8"))
    ElectraConfig.from_json(str(REPO / "configs" / "tiny.json")).replace(vocab_size=size).to_json(
        str(d / "config.json"))
    return d


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory, model_files):
    """A (untrained) classifier directory as fine-tuning writes it, for predict."""
    from electra_tf import ElectraClassifier
    from electra_tf.config import ElectraConfig

    config = ElectraConfig.from_json(str(model_files / "config.json"))
    clf = ElectraClassifier(config, str(model_files / "vocab.txt"), labels=["negative", "positive"],
                            sequence_length=16)
    saved = Path(clf.save(str(tmp_path_factory.mktemp("own_errors_clf") / "seed_1")))
    # As `finetune --train_file` writes it: the columns it was trained on.
    meta = json.loads((saved / "classifier.json").read_text())
    meta["columns"] = {"text": "text", "text_pair": None, "label": "label"}
    (saved / "classifier.json").write_text(json.dumps(meta))
    return saved


def run_finetune(capsys, args):
    code, _, err = finetune_main(capsys, args)
    return code, error_lines(err)


def run_predict(capsys, args):
    code, _, err = predict_main(capsys, list(args) + ["--noprogress"])
    return code, error_lines(err)


def write(path: Path, text, encoding="utf-8") -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding=encoding)
    return path


GOOD_TRAIN = "text,label\na fine film,positive\na bad film,negative\n"


def finetune_case(case, tmp, model_files):
    """(args, paths that must not exist afterwards) of a finetune case."""
    out = tmp / "out"
    train = tmp / "train.csv"
    dev = write(tmp / "dev.csv", GOOD_TRAIN)
    base = ["--init", "random", "--config", model_files / "config.json", "--vocab_file", model_files / "vocab.txt",
            "--output_dir", out, "--max_seq_length", "16", "--epochs", "1"]
    extra = ["--train_file", train, "--validation_file", dev]
    if case == "missing-text-column":
        write(train, "review,label\nfine,positive\n")
    elif case == "missing-label-column":
        write(train, "text,sentiment\nfine,positive\n")
    elif case == "missing-text-and-label-columns":
        write(train, "review,sentiment\nfine,positive\n")
    elif case == "jsonl-missing-text-and-label-columns":
        write(train, "review,stars\nfine,5\nbad,1\n")
        dev = write(tmp / "dev.jsonl", '{"body": "fine", "score": 5}\n')
        extra = ["--train_file", train, "--validation_file", dev, "--text_column", "review", "--label_column", "stars"]
    elif case == "blank-text":
        write(train, "text,label\ngood,positive\n,negative\n")
    elif case == "whitespace-only-text":
        write(train, 'text,label\ngood,positive\nbad,negative\n"  \t ",negative\n')
    elif case == "tsv-blank-text":
        write(train, GOOD_TRAIN)
        dev = write(tmp / "dev.tsv", "text\tlabel\nok\tpositive\n\tnegative\n")
        extra = ["--train_file", train, "--validation_file", dev]
    elif case == "test-file-blank-text":
        write(train, GOOD_TRAIN)
        extra += ["--test_file", write(tmp / "test.jsonl", '{"text": "fine"}\n{"text": " "}\n')]
    elif case == "blank-second-text":
        write(train, "text,hypothesis,label\na,b,positive\nc, ,negative\n")
        extra += ["--text_pair_column", "hypothesis"]
    elif case == "label-type-regression-not-a-number":
        write(train, "text,label\ngood,4\nbad,negative\n")
        extra += ["--label_type", "regression"]
    elif case == "label-type-without-train-file":
        extra = ["--task", "sst2", "--label_type", "regression"]
    elif case == "missing-pair-column":
        write(train, GOOD_TRAIN)
        extra += ["--text_pair_column", "hypothesis"]
    elif case == "empty-file":
        write(train, "")
    elif case == "header-only":
        write(train, "text,label\n")
    elif case == "one-class":
        write(train, "text,label\ngood,positive\nfine,positive\n")
    elif case == "unseen-label":
        write(train, GOOD_TRAIN)
        write(dev, "text,label\nok,positive\nso so,neutral\n")
    elif case == "not-utf8":
        write(train, "text,label\ngood,positive\ncaf\xe9 food,negative\n".encode("latin-1"))
    elif case == "blank-label":
        write(train, "text,label\ngood,positive\nbad, \n")
    elif case == "jsonl-not-object":
        train = write(tmp / "train.jsonl", '{"text": "good", "label": "positive"}\n["bad", "negative"]\n')
        extra = ["--train_file", train, "--validation_file", dev]
    elif case == "ragged-row":
        write(train, "text,label\ngood,positive\nbad, really,negative\n")
    elif case == "unknown-file-type":
        train = write(tmp / "train.txt", GOOD_TRAIN)
        extra = ["--train_file", train, "--validation_file", dev]
    elif case == "regression-label-not-a-number":
        write(train, "text,label\ngood,4.5\nbad,1.0\n")
        write(dev, "text,label\nok,high\n")
    elif case == "no-validation-data":
        write(train, GOOD_TRAIN)
        extra = ["--train_file", train]
    elif case == "bad-validation-split":
        write(train, GOOD_TRAIN)
        extra = ["--train_file", train, "--validation_split", "1.5"]
    elif case == "train-file-and-task":
        write(train, GOOD_TRAIN)
        extra += ["--task", "sst2"]
    elif case == "file-flag-without-train-file":
        extra = ["--task", "sst2", "--validation_file", dev]
    elif case in ("glue-header-names-other-columns", "glue-not-utf8"):
        glue = tmp / "glue"
        glue.mkdir()
        header = "text\tlabel\n" if case == "glue-header-names-other-columns" else "sentence\tlabel\n"
        body = "a fine film\t1\n".encode() + ("caf\xe9 food\t0\n".encode("latin-1") if case == "glue-not-utf8"
                                               else b"a dull film\t0\n")
        write(glue / "train.tsv", header.encode() + body)
        write(glue / "dev.tsv", "sentence\tlabel\ngood\t1\n")
        extra = ["--task", "sst2", "--data_dir", glue]
    elif case == "squad-not-utf8":
        squad = tmp / "squad"
        squad.mkdir()
        text = ('{"data": [{"paragraphs": [\n'
                ' {"qas": [{"id": "q1", "question": "When?", "answers": [{"text": "1990", "answer_start": 19}]}],\n'
                '  "context": "The caf\xe9 opened in 1990."}]}]}\n')  # line 3, column 22
        write(squad / "train-v1.1.json", text.encode("latin-1"))
        write(squad / "dev-v1.1.json", text.encode("utf-8"))
        extra = ["--task", "squad1", "--data_dir", squad]
    elif case == "tagging-not-utf8":
        conll = tmp / "conll"
        conll.mkdir()
        text = "john B-PER\nwent O\n\ncaf\xe9 O\nopened O\n\n"
        write(conll / "train.txt", text.encode("latin-1"))
        write(conll / "dev.txt", text.encode("utf-8"))
        extra = ["--task", "ner", "--data_dir", conll]
    elif case == "both-validation-flags":
        write(train, GOOD_TRAIN)
        extra += ["--validation_split", "0.1"]
    elif case == "data-dir-with-train-file":
        write(train, GOOD_TRAIN)
        extra += ["--data_dir", tmp]
    elif case == "own-data-task-without-train-file":
        extra = ["--task", "own_data"]
    elif case == "split-leaves-no-rows":
        write(train, GOOD_TRAIN)
        extra = ["--train_file", train, "--validation_split", "0.1"]
    elif case.startswith("jsonl-") or case == "label-not-finite":
        second = {"jsonl-invalid-json": '{"text": "bad", "label": }', "jsonl-missing-key": '{"label": "negative"}',
                  "jsonl-missing-keys": '{"text": "fine", "label": "positive"}\n{"review": "bad", "stars": 1}',
                  "jsonl-null-text": '{"text": null, "label": "negative"}',
                  "jsonl-empty-text": '{"text": "", "label": "negative"}',
                  "jsonl-label-not-a-value": '{"text": "bad", "label": ["negative"]}',
                  "label-not-finite": '{"text": "bad", "label": NaN}'}[case]
        train = write(tmp / "train.jsonl", '{"text": "good", "label": "positive"}\n' + second + "\n")
        extra = ["--train_file", train, "--validation_file", dev]
    elif case == "negative-max-train-examples":
        write(train, GOOD_TRAIN)
        extra += ["--max_train_examples", "-5"]
    else:
        raise AssertionError(case)
    return base + extra, [out]


def predict_case(case, tmp, model_files, classifier_dir):
    out = tmp / "predictions.jsonl"
    new = write(tmp / "new.csv", "text\nsome new text\n")
    args = ["--model_dir", classifier_dir, "--input_file", new, "--output_file", out]
    if case == "predict-not-a-classifier":
        args[1] = model_files  # config and vocabulary only: no classifier
    elif case == "predict-missing-model":
        args[1] = tmp / "runs" / "nope" / "seed_1"
    elif case == "predict-missing-text-column":
        write(new, "review\nsome new text\n")
    elif case == "predict-header-only":
        write(new, "text\n")
    elif case == "predict-output-exists":
        write(out, "kept\n")
        return args, []
    elif case == "predict-output-is-a-directory":
        out = tmp / "out.jsonl"
        out.mkdir()
        args[-1] = out
        return args, [Path(str(out) + ".tmp")]
    elif case == "predict-bad-batch-size":
        args += ["--batch_size", "0"]
    elif case == "predict-pair-column-for-a-single-text-model":
        args += ["--text_pair_column", "hypothesis"]
    elif case == "predict-row-without-text":
        new = write(tmp / "new.jsonl", '{"id": 1, "text": "ok"}\n{"id": 2}\n')
        args[3] = new
    elif case == "predict-blank-text":
        # Two rows are predicted (batches of one) before the blank one: nothing of them is left.
        write(new, 'id,text\n1,good\n2,bad\n3,"   "\n4,fine\n')
        args += ["--batch_size", "1"]
    elif case == "predict-output-type":
        out = tmp / "predictions.txt"
        args[-1] = out
    else:
        raise AssertionError(case)
    return args, [out, Path(str(out) + ".tmp")]


@pytest.mark.parametrize("case", list(MESSAGES))
def test_bad_input(case, tmp_path, capsys, model_files, classifier_dir):
    tool, message = MESSAGES[case]
    if tool == F:
        args, absent = finetune_case(case, tmp_path, model_files)
        code, lines = run_finetune(capsys, args)
    else:
        args, absent = predict_case(case, tmp_path, model_files, classifier_dir)
        code, lines = run_predict(capsys, args)
    assert code == 2, (case, lines)
    assert len(lines) == 1, lines
    assert re.fullmatch(template_regex(message), lines[0]), (lines[0], message)
    for path in absent:
        assert not path.exists(), f"{case}: {path} was left behind"
    if case == "predict-output-exists":
        assert (tmp_path / "predictions.jsonl").read_text() == "kept\n"


def test_gzip_csv_with_a_latin1_line_names_the_line(tmp_path):
    from electra_tf.data.table_columns import Columns
    from electra_tf.data.table_files import TextFileError
    from electra_tf.finetune.readers.own_data import read_examples

    path = tmp_path / "train.csv.gz"
    with gzip.open(path, "wb") as f:
        f.write("text,label\n".encode() + "ok,a\n".encode() * 3 + "na\xefve,b\n".encode("latin-1"))
    with pytest.raises(TextFileError, match=r"train.csv.gz:5 is not UTF-8 .* e.g. zcat train.csv.gz \| iconv -f "
                                            r"latin1 -t utf-8 > train.utf8.csv"):
        read_examples(str(path), "--train_file", Columns())


def test_docs_list_these_messages():
    """docs/errors.md has a row for every case, with its exact message and this test."""
    rows = {}
    for line in (REPO / "docs" / "errors.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        found = re.fullmatch(r"`tests/finetune/test_own_data_errors\.py::test_bad_input\[([\w-]+)\]`",
                             cells[-1]) if len(cells) == 7 else None
        if found:
            rows[found.group(1)] = (cells[3].strip("`"), cells[5])
    assert sorted(rows) == sorted(MESSAGES)
    for case, (message, code) in rows.items():
        assert message == MESSAGES[case][1].replace("|", "\\|"), case
        assert code == "2", case
