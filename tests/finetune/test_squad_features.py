"""SQuAD windows, max-context flags, answer mapping and decoding on a handmade example."""

import numpy as np
import pytest

from electra_tf.finetune.readers import squad_data


def test_windows_and_max_context():
    # 10 pieces, windows of 4, stride 3: starts 0, 3, 6 (6+4 = 10 ends it)
    spans = squad_data.doc_windows(10, 4, 3)
    assert spans == [(0, 4), (3, 4), (6, 4)]
    # piece 3 is in windows 0 (left 3, right 0) and 1 (left 0, right 3): tie on
    # min-context 0, broken by 0.01*length (equal) -> first window wins
    assert squad_data.is_max_context(spans, 0, 3) and not squad_data.is_max_context(spans, 1, 3)
    # piece 4: window 1 gives min(1, 2) = 1 > window 0 (absent)
    assert squad_data.is_max_context(spans, 1, 4)
    assert squad_data.doc_windows(5, 8, 128) == [(0, 5)]


def test_char_span_to_tokens():
    starts, ends = [0, 4, 8, 9], [3, 8, 9, 13]
    assert squad_data.char_span_to_tokens(starts, ends, 4, 9) == (1, 2)
    assert squad_data.char_span_to_tokens(starts, ends, 5, 6) == (1, 1)  # inside one piece
    assert squad_data.char_span_to_tokens(starts, ends, 20, 22) == (-1, -1)


CONTEXT = "The leader was John Smith (1895-1943). John Smith went to the store and bought milk."


def test_featurize_handmade_example(tokenizer):
    ex = squad_data.SquadExample("q1", "What year was John Smith born?", CONTEXT,
                            "1895", CONTEXT.index("1895"))
    # query: what year was john smith born ? -> 7 pieces; max_seq 24 -> 24-7-3 = 14 doc pieces
    feats = squad_data.featurize(tokenizer, [ex], max_seq_length=24, doc_stride=6,
                            max_query_length=64, is_training=True)
    ctx_pieces = tokenizer.tokenize([CONTEXT])[0]
    assert len(ctx_pieces) == 21  # "(1895-1943)." splits into 6 pieces
    # windows start at 0, 6, 12 (12 + 9 = 21 ends the document)
    assert [f.window_index for f in feats] == [0, 1, 2]
    f0 = feats[0]
    assert len(f0.input_ids) == 24 and sum(f0.input_mask) == 24
    toks = tokenizer.convert_ids_to_tokens(f0.input_ids)
    assert toks[:9] == ["[CLS]", "what", "year", "was", "john", "smith", "born", "?", "[SEP]"]
    assert f0.segment_ids[:9] == [0] * 9 and f0.segment_ids[9] == 1
    # "1895" is doc piece 6 -> position 9 + 6 = 15 in window 0, 9 + 0 = 9 in window 1
    assert (f0.start_position, f0.end_position) == (15, 15) and not f0.is_impossible
    assert toks[15] == "1895"
    f1 = feats[1]
    assert (f1.start_position, f1.end_position) == (9, 9)
    # window 2 (pieces 12..20) does not contain the answer -> [CLS]
    assert (feats[2].start_position, feats[2].end_position, feats[2].is_impossible) == (0, 0, True)
    # char spans cut the original text
    s, e = f0.token_char_spans[15]
    assert CONTEXT[s:e] == "1895"
    assert f0.token_char_spans[0] is None and f0.token_char_spans[8] is None
    # max context: piece 6 ("1895"): window 0 -> min(6, 7)=6, window 1 -> min(0, 13)=0
    assert f0.token_is_max_context[15] and not f1.token_is_max_context[9]
    arrays = squad_data.features_to_arrays(feats, is_training=True)
    assert arrays["input_ids"].shape == (3, 24)
    assert list(arrays["start_positions"]) == [15, 9, 0]


def test_multi_piece_answer_and_query_cut(tokenizer):
    ctx = "John Smith went to the store and bought a gallon of milk."
    ex = squad_data.SquadExample("q2", "Who went to the store and bought milk?", ctx,
                            "John Smith", 0)
    feats = squad_data.featurize(tokenizer, [ex], max_seq_length=32, max_query_length=3)
    f = feats[0]
    toks = tokenizer.convert_ids_to_tokens(f.input_ids)
    assert toks[:5] == ["[CLS]", "who", "went", "to", "[SEP]"]  # query cut to 3 pieces
    assert toks[f.start_position:f.end_position + 1] == ["john", "smith"]
    s, e = f.token_char_spans[f.start_position][0], f.token_char_spans[f.end_position][1]
    assert ctx[s:e] == "John Smith"


def test_decode_nbest(tokenizer):
    ex = squad_data.SquadExample("q1", "What year was John Smith born?", CONTEXT)
    feats = squad_data.featurize(tokenizer, [ex], max_seq_length=64, is_training=False)
    assert len(feats) == 1
    toks = tokenizer.convert_ids_to_tokens(feats[0].input_ids)
    p1895 = toks.index("1895")
    p1943 = toks.index("1943")
    # beam 2: starts (1895, [CLS]); ends per start
    stlp = np.log(np.array([[0.7, 0.3]]))
    sti = np.array([[p1895, 0]])
    etlp = np.log(np.array([[[0.6, 0.4], [0.5, 0.5]]]))
    eti = np.array([[[p1895, p1943], [3, 4]]])
    preds, nbest, null = squad_data.decode_nbest([ex], feats, stlp, sti, etlp, eti,
                                            answerable_logits=np.array([-1.5]))
    assert preds["q1"] == "1895"
    assert [n["text"] for n in nbest["q1"]] == ["1895", "1895-1943"]
    assert nbest["q1"][0]["probability"] == pytest.approx(0.6, abs=1e-6)  # softmax of log .42, .28
    assert null["q1"] == -1.5


def test_read_squad_errors(tmp_path):
    import json
    good = {"data": [{"paragraphs": [{"context": "Paris is nice.", "qas": [
        {"id": "x", "question": "Where?", "answers": [{"text": "Paris", "answer_start": 0}]},
        {"id": "y", "question": "Who?", "answers": [], "is_impossible": True}]}]}]}
    p = tmp_path / "train.json"
    p.write_text(json.dumps(good))
    ex, _ = squad_data.read_squad(str(p), version_2=True)
    assert [(e.qas_id, e.is_impossible) for e in ex] == [("x", False), ("y", True)]
    with pytest.raises(squad_data.SquadDataError, match="not marked is_impossible"):
        squad_data.read_squad(str(p), version_2=False)
    good["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = 3
    p.write_text(json.dumps(good))
    with pytest.raises(squad_data.SquadDataError, match=r"question x: answer 'Paris' is not at character 3"):
        squad_data.read_squad(str(p), version_2=True)
