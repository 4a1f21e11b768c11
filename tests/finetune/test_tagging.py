"""CoNLL reading, first-sub-token label alignment and span F1."""

import numpy as np
import pytest

from electra_tf.finetune.readers import tagging_data


def test_spans_bio_and_bioes():
    bio = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-MISC", "O"]
    # B-LOC B-LOC are two spans; a stray I-MISC opens a span (conlleval)
    assert tagging_data.get_spans(bio, "BIO") == {("PER", 0, 1), ("LOC", 3, 3), ("LOC", 4, 4), ("MISC", 5, 5)}
    bioes = tagging_data.bio_to_bioes(bio[:5])
    assert bioes == ["B-PER", "E-PER", "O", "S-LOC", "S-LOC"]
    assert tagging_data.get_spans(bioes, "BIOES") == {("PER", 0, 1), ("LOC", 3, 3), ("LOC", 4, 4)}
    assert tagging_data.get_spans(["B-ORG", "I-ORG", "I-ORG", "E-ORG"], "BIOES") == {("ORG", 0, 3)}
    with pytest.raises(tagging_data.TaggingDataError, match="'X-FOO' is not O or"):
        tagging_data.get_spans(["X-FOO"])


def test_span_f1_hand_computed():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    pred = [["B-PER", "O", "O", "B-LOC"], ["B-ORG", "B-PER"]]
    # gold spans: PER(0,1) LOC(3,3) ORG(0,0) = 3; pred: PER(0,0) LOC ORG PER(1,1) = 4; tp = 2
    out = tagging_data.span_f1(gold, pred)
    assert out["precision"] == pytest.approx(2 / 4)
    assert out["recall"] == pytest.approx(2 / 3)
    assert out["f1"] == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))


CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER
"""


def test_read_conll_and_align_first_subtoken(tmp_path, tokenizer):
    p = tmp_path / "train.txt"
    p.write_text(CONLL)
    sents = tagging_data.read_conll(str(p))
    assert [s.words for s in sents] == [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]]
    assert sents[0].labels == ["B-ORG", "O", "B-MISC", "O"]
    labels = tagging_data.build_label_list(sents)
    assert labels == ["O", "B-MISC", "B-ORG", "B-PER", "I-PER"]
    # "Japanese" splits into japan ##ese: only "japan" carries the label
    sents[0].words[2] = "Japanese"
    arr = tagging_data.align_labels(tokenizer, sents, labels, max_seq_length=10)
    toks = tokenizer.convert_ids_to_tokens(arr["input_ids"][0])
    assert toks[:7] == ["[CLS]", "eu", "rejects", "japan", "##ese", "call", "[SEP]"]
    assert list(arr["label_weights"][0][:7]) == [0, 1, 1, 1, 0, 1, 0]
    assert [labels[i] for i in arr["label_ids"][0][[1, 2, 3, 5]]] == ["B-ORG", "O", "B-MISC", "O"]
    assert list(arr["word_index"][0][:7]) == [-1, 0, 1, 2, -1, 3, -1]
    # predictions come back per word from the first pieces only
    pred = np.zeros((2, 10), np.int32)
    pred[0, 1] = labels.index("B-ORG")
    pred[0, 4] = labels.index("B-PER")  # on a continuation piece: ignored
    back = tagging_data.predictions_to_labels(pred, arr["word_index"], sents, labels)
    assert back[0] == ["B-ORG", "O", "O", "O"]


def test_conll_errors(tmp_path, tokenizer):
    p = tmp_path / "bad.txt"
    p.write_text("EU B-ORG\nrejects\n")
    with pytest.raises(tagging_data.TaggingDataError, match=r"bad.txt:2: expected 'word ... label'"):
        tagging_data.read_conll(str(p))
    p.write_text("EU B-ORG\n\nPeter B-PER\n")
    sents = tagging_data.read_conll(str(p))
    with pytest.raises(tagging_data.TaggingDataError, match=r"dev.txt:3: label 'B-PER' is not in the training label set"):
        tagging_data.align_labels(tokenizer, sents, ["O", "B-ORG"], 8, path="dev.txt")
