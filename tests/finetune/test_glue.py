"""GLUE readers: the real SST-2 files and handmade rows of every task format."""

import os

import pytest

from electra_tf.finetune.readers import glue_data

ROWS = {
    # task: (file name, header, row) in the layout GLUE distributes
    "cola": ("dev.tsv", None, "gj04\t1\t\tOur friends won't buy this analysis."),
    "sst2": ("dev.tsv", "sentence\tlabel", "a good movie \t1"),
    "mrpc": ("dev.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String",
             "1\t1\t2\tHe went home.\tHe left for home."),
    "stsb": ("dev.tsv", "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore",
             "0\tmain-captions\tMSRvid\t2012test\t0000\tnone\tnone\tA man plays.\tA man is playing.\t4.25"),
    "qqp": ("dev.tsv", "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
            "7\t15\t16\tHow do I learn?\tHow can I learn?\t1"),
    "mnli": ("dev_matched.tsv", "\t".join(["index", "promptID", "pairID", "genre", "s1bp", "s2bp", "s1p", "s2p",
                                           "sentence1", "sentence2", "label1", "gold_label"]),
             "\t".join(["0", "1", "1e", "slate", "(", "(", "(", "(", "The cat sat.", "A cat sat.",
                        "entailment", "entailment"])),
    "qnli": ("dev.tsv", "index\tquestion\tsentence\tlabel",
             "0\tWhat is it?\tIt is a cat.\tnot_entailment"),
    "rte": ("dev.tsv", "index\tsentence1\tsentence2\tlabel", "0\tA dog ran.\tAn animal ran.\tentailment"),
    "wnli": ("dev.tsv", "index\tsentence1\tsentence2\tlabel", "0\tI saw it.\tIt was seen.\t1"),
}

EXPECTED = {
    "cola": ("Our friends won't buy this analysis.", None, "1"),
    "sst2": ("a good movie ", None, "1"),
    "mrpc": ("He went home.", "He left for home.", "1"),
    "stsb": ("A man plays.", "A man is playing.", 4.25),
    "qqp": ("How do I learn?", "How can I learn?", "1"),
    "mnli": ("The cat sat.", "A cat sat.", "entailment"),
    "qnli": ("What is it?", "It is a cat.", "not_entailment"),
    "rte": ("A dog ran.", "An animal ran.", "entailment"),
    "wnli": ("I saw it.", "It was seen.", "1"),
}


def _write(tmp_path, name, header, rows):
    path = tmp_path / name
    lines = ([header] if header else []) + rows
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_real_sst2_files(sst2_dir):
    task = glue_data.get_spec("SST-2")
    train = glue_data.load_glue(task, sst2_dir, "train")
    dev = glue_data.load_glue(task, sst2_dir, "dev")
    assert len(train) == 67349 and len(dev) == 872
    assert sum(e.label == "1" for e in dev) == 444
    assert sum(e.label == "1" for e in train) == 37569
    assert dev[0].text_b is None and dev[0].text_a.startswith("it 's a charming")
    # the GLUE root works too, and max_examples cuts
    root = os.path.dirname(sst2_dir)
    assert len(glue_data.load_glue(task, root, "train", max_examples=200)) == 200


@pytest.mark.parametrize("name", sorted(ROWS))
def test_every_task_format(tmp_path, name):
    task = glue_data.get_spec(name)
    fname, header, row = ROWS[name]
    _write(tmp_path, fname, header, [row])
    ex = glue_data.load_glue(task, str(tmp_path), fname[:-4])
    assert len(ex) == 1
    assert (ex[0].text_a, ex[0].text_b, ex[0].label) == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(ROWS))
def test_malformed_row_names_file_and_line(tmp_path, name):
    task = glue_data.get_spec(name)
    fname, header, row = ROWS[name]
    path = _write(tmp_path, fname, header, [row, "only-one-field"])
    line = 3 if header else 2
    with pytest.raises(glue_data.GlueDataError, match=rf"^{path}:{line}: malformed {name} row"):
        glue_data.read_glue_split(task, path, "dev")
    # skip_malformed drops it instead
    assert len(glue_data.read_glue_split(task, path, "dev", skip_malformed=True)) == 1


def test_bad_labels_unknown_task_and_empty_file(tmp_path):
    sst = glue_data.get_spec("sst2")
    path = _write(tmp_path, "dev.tsv", "sentence\tlabel", ["fine \t1", "bad \t2"])
    with pytest.raises(glue_data.GlueDataError, match=r"dev.tsv:3: label '2' is not a sst2 label \(0, 1\)"):
        glue_data.read_glue_split(sst, path, "dev")
    sts = glue_data.get_spec("stsb")
    header, row = ROWS["stsb"][1], ROWS["stsb"][2]
    path = _write(tmp_path, "sts.tsv", header, [row.replace("4.25", "7.5")])
    with pytest.raises(glue_data.GlueDataError, match=r"sts.tsv:2: stsb score 7.5 is outside \[0.0, 5.0\]"):
        glue_data.read_glue_split(sts, path, "dev")
    path = _write(tmp_path, "empty.tsv", "sentence\tlabel", [])
    with pytest.raises(glue_data.GlueDataError, match=r"empty.tsv: no sst2 examples in the file"):
        glue_data.read_glue_split(sst, path, "dev")
    with pytest.raises(glue_data.GlueDataError, match=r"unknown GLUE task 'squadd'; choose one of cola, sst2"):
        glue_data.get_spec("squadd")
    with pytest.raises(glue_data.GlueDataError, match="pass the GLUE task directory"):
        glue_data.load_glue(sst, str(tmp_path / "nowhere"), "dev")


def test_double_unordered():
    ex = [glue_data.Example("train-0", "a", "b", "1"), glue_data.Example("train-1", "c", "d", "0")]
    out = glue_data.double_unordered(ex)
    assert [(e.text_a, e.text_b, e.label) for e in out] == [
        ("a", "b", "1"), ("c", "d", "0"), ("b", "a", "1"), ("d", "c", "0")]


def test_tfds_reader_maps_labels():
    import tensorflow_datasets as tfds
    with tfds.testing.mock_data(num_examples=6):
        ex = glue_data.read_tfds(glue_data.get_spec("sst2"), "validation")
        assert len(ex) == 6 and all(e.label in ("0", "1") for e in ex)
        ex = glue_data.read_tfds(glue_data.get_spec("mnli"), "validation_matched", max_examples=4)
        assert len(ex) == 4 and all(e.label in ("contradiction", "entailment", "neutral") for e in ex)
        assert all(isinstance(e.text_b, str) for e in ex)
