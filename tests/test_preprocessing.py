"""TextPreprocessor: the one in-graph encoder that fine-tuning, serving and scoring share.

The reference here is the pre-preprocessor fine-tuning code, kept verbatim:
FastBertTokenizer ids, then the reference `_truncate_seq_pair` loop and
`[CLS] a [SEP] b [SEP]` packing in Python. The preprocessor, the fine-tuning
helpers built on it and the serving graph must all give its ids exactly.
"""

import collections
import os
import re
import types

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from electra_tf.export.serving import DISCRIMINATOR, ServingModule
from electra_tf.finetune.readers.tokenization import FinetuneTokenizer, encode_classification
from electra_tf.preprocessing import TextPreprocessor, pair_lengths

CORPUS = os.path.join(os.path.dirname(__file__), "..", "data", "sample_corpus.txt")
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
EXTRA = ["Café au lait, naïve résumé — Ünïcode!", "猫はマットの上に座った。", "", "   ", "x" * 300]


@pytest.fixture(scope="module")
def sentences():
    with open(CORPUS, encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    return lines[:300] + EXTRA


@pytest.fixture(scope="module")
def vocab(sentences):
    """Frequent words + every character (alone and as ##continuation): rarer words
    split into several pieces, some characters are [UNK]."""
    text = " ".join(sentences)
    words = collections.Counter(re.findall(r"\w+", text.lower()))
    chars = sorted({c for c in text if not c.isspace()} - {"猫"})  # "猫" stays unknown
    tokens = SPECIAL + [w for w, _ in words.most_common(250)] + ["##s", "##ed", "##ing", "##ly", "cafe", "au", "lait"]
    tokens += chars + [f"##{c}" for c in chars]
    return list(dict.fromkeys(tokens))


@pytest.fixture(scope="module")
def vocab_file(vocab, tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return str(path)


def _pairs(sentences):
    # Neighbouring sentences, plus pairs where one side is far longer than the other.
    a = sentences[:-1] + [" ".join(sentences[:6]), sentences[0]]
    b = sentences[1:] + [sentences[7], " ".join(sentences[8:14])]
    return a, b


def _reference_encode(vocab, texts_a, texts_b, max_len, lower):
    """The fine-tuning encoder before TextPreprocessor (FastBertTokenizer + Python packing)."""
    tok = tf_text.FastBertTokenizer(vocab=vocab, lower_case_nfd_strip_accents=lower, token_out_type=tf.int64,
                                    unknown_token="[UNK]")
    ids_a = tok.tokenize(tf.constant(texts_a)).to_list()
    ids_b = tok.tokenize(tf.constant(texts_b)).to_list() if texts_b is not None else None
    pad, cls, sep = (vocab.index(t) for t in ("[PAD]", "[CLS]", "[SEP]"))
    out = {k: np.zeros((len(ids_a), max_len), np.int32) for k in ("input_ids", "input_mask", "segment_ids")}
    out["input_ids"][:] = pad
    truncated = []
    for i, a in enumerate(ids_a):
        if ids_b is not None:
            b = ids_b[i]
            cut = len(a) + len(b) > max_len - 3
            while len(a) + len(b) > max_len - 3:
                if len(a) > len(b):
                    a.pop()
                else:
                    b.pop()
            seq = [cls] + a + [sep] + b + [sep]
            seg = [0] * (len(a) + 2) + [1] * (len(b) + 1)
        else:
            cut = len(a) > max_len - 2
            seq = [cls] + a[:max_len - 2] + [sep]
            seg = [0] * len(seq)
        out["input_ids"][i, :len(seq)] = seq
        out["input_mask"][i, :len(seq)] = 1
        out["segment_ids"][i, :len(seq)] = seg
        truncated.append(cut)
    return out, np.array(truncated)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("max_len", [5, 16, 48])
def test_preprocessor_and_finetune_match_the_reference(vocab, vocab_file, sentences, lower, max_len):
    a, b = _pairs(sentences)
    pre = TextPreprocessor(vocab_file, max_len, do_lower_case=lower)
    tokenizer = FinetuneTokenizer(vocab_file, do_lower_case=lower)
    for texts_b in (None, b):
        want, want_cut = _reference_encode(vocab, a, texts_b, max_len, lower)
        got = {k: v.numpy() for k, v in pre(a, texts_b, pad_to_sequence_length=True).items()}
        fine = encode_classification(tokenizer, a, texts_b, max_len)
        for key, value in want.items():
            np.testing.assert_array_equal(got[key], value, err_msg=key)
            np.testing.assert_array_equal(fine[key], value, err_msg=key)
            assert got[key].dtype == fine[key].dtype == np.int32
        np.testing.assert_array_equal(got["truncated"], want_cut)
        # Unpadded: the same rows, cut at the longest one.
        short = pre(a, texts_b)
        n = short["input_ids"].shape[1]
        assert n == want["input_mask"].sum(1).max()
        np.testing.assert_array_equal(short["input_ids"].numpy(), want["input_ids"][:, :n])
    if max_len == 16:
        # The pairs exercise the truncation rule from both sides.
        la = np.array([len(t) for t in tokenizer.tokenize(a)])
        lb = np.array([len(t) for t in tokenizer.tokenize(b)])
        kept = fine["segment_ids"].sum(1) - 1  # pieces of b kept
        assert np.any((la > lb) & (kept == lb) & (la + lb > 13)), "no pair cut only on side a"
        assert np.any((lb > la) & (kept < lb) & (fine["input_mask"].sum(1) - kept - 3 == la)), \
            "no pair cut only on side b"
        assert np.any((kept < lb) & (fine["input_mask"].sum(1) - kept - 3 < la)), "no pair cut on both sides"


def test_finetune_tokenizer_uses_the_same_pieces(vocab, vocab_file, sentences):
    tokenizer = FinetuneTokenizer(vocab_file)
    ref = tf_text.FastBertTokenizer(vocab=vocab, lower_case_nfd_strip_accents=True, token_out_type=tf.int64,
                                    unknown_token="[UNK]")
    assert tokenizer.tokenize(sentences, batch_size=7) == ref.tokenize(tf.constant(sentences)).to_list()
    text = EXTRA[0]
    ids, starts, ends = tokenizer.tokenize_with_char_offsets(text)
    assert tokenizer.convert_ids_to_tokens(ids)[:3] == ["cafe", "au", "lait"]
    assert [text[s:e] for s, e in zip(starts, ends)][:2] == ["Café", "au"]  # characters, not bytes


def test_serving_and_finetuning_give_the_same_ids(vocab, vocab_file, sentences):
    # The serving module's encoding, traced as its signatures are, against fine-tuning's.
    stub = types.SimpleNamespace(weights=[])
    a, b = _pairs(sentences)
    for pair, texts_b in ((False, None), (True, b)):
        module = ServingModule(DISCRIMINATOR, stub, stub, vocab, 24, do_lower_case=True, pair=pair)
        spec = tf.TensorSpec([None], tf.string)
        if pair:
            encode = tf.function(module.encode, input_signature=[spec, spec])
            served = encode(tf.constant(a), tf.constant(b))
        else:
            encode = tf.function(module.encode, input_signature=[spec])
            served = encode(tf.constant(a))
        fine = encode_classification(FinetuneTokenizer(vocab_file), a, texts_b, 24)
        n = served["input_ids"].shape[1]
        for key in ("input_ids", "input_mask", "segment_ids"):
            np.testing.assert_array_equal(served[key].numpy(), fine[key][:, :n], err_msg=key)
            assert not fine[key][:, n:].any()  # the rest is padding ([PAD] is id 0)


def test_saved_preprocessor_reloads_with_the_same_outputs(vocab, sentences, tmp_path):
    pre = TextPreprocessor(vocab, 20, do_lower_case=True)
    holder = tf.Module()
    holder.pre = pre
    spec = tf.TensorSpec([None], tf.string)
    holder.encode = tf.function(lambda x, y: pre(x, y, pad_to_sequence_length=True), input_signature=[spec, spec])
    tf.saved_model.save(holder, str(tmp_path / "sm"))
    loaded = tf.saved_model.load(str(tmp_path / "sm"))
    a, b = _pairs(sentences)
    got, want = loaded.encode(tf.constant(a), tf.constant(b)), pre(a, b, pad_to_sequence_length=True)
    for key in want:
        np.testing.assert_array_equal(got[key].numpy(), want[key].numpy(), err_msg=key)


def test_config_round_trip_and_tokens(vocab):
    pre = TextPreprocessor(vocab, 12, do_lower_case=False, name="pre")
    config = pre.get_config()
    assert config == {"vocabulary": vocab, "sequence_length": 12, "name": "pre",
                      "normalization": {"mode": "nfkc_casefold", "lower_case": False, "strip_accents": False,
                                        "max_bytes_per_word": 100}}
    again = TextPreprocessor.from_config(config)
    texts = ["The Cat sat.", "Le café"]
    for key, value in pre(texts).items():
        np.testing.assert_array_equal(value.numpy(), again(texts)[key].numpy())
    ids = pre(["The the"])["input_ids"]
    assert pre.id_to_token(ids).numpy().astype(str).tolist() == [["[CLS]", "T", "##h", "##e", "the", "[SEP]"]]
    assert pre.vocabulary_size == len(vocab)


def test_casing_is_what_the_caller_passes(vocab):
    with pytest.raises(TypeError, match="normalization"):
        TextPreprocessor(vocab, 12)
    cased = TextPreprocessor(vocab, 12, do_lower_case=False).tokenize(["The"]).to_list()
    uncased = TextPreprocessor(vocab, 12, do_lower_case=True).tokenize(["The"]).to_list()
    assert cased != uncased and uncased == [[vocab.index("the")]]


def test_one_line_errors(vocab):
    with pytest.raises(ValueError, match=r"^the vocabulary lacks \[CLS\] \[SEP\]$"):
        TextPreprocessor([t for t in vocab if t not in ("[CLS]", "[SEP]")], 8, do_lower_case=True)
    with pytest.raises(ValueError, match=r"^sequence_length=2 leaves no room for text"):
        TextPreprocessor(vocab, 2, do_lower_case=True)
    pre = TextPreprocessor(vocab, do_lower_case=True)
    with pytest.raises(ValueError, match=r"^pass sequence_length: this TextPreprocessor was built without one$"):
        pre(["a"])
    with pytest.raises(ValueError, match=r"^sequence_length=3 leaves no room for text; \[CLS\] and two \[SEP\]"):
        pre(["a"], ["b"], sequence_length=3)
    assert pre(["a"], sequence_length=3)["input_mask"].numpy().sum() == 3


def test_pair_lengths_is_the_reference_loop():
    la, lb = np.meshgrid(np.arange(12), np.arange(12))
    for budget in range(0, 14):
        got_a, got_b = (t.numpy() for t in pair_lengths(la, lb, budget))
        for a, b, x, y in zip(la.ravel(), lb.ravel(), got_a.ravel(), got_b.ravel()):
            ra, rb = list(range(a)), list(range(b))
            while len(ra) + len(rb) > budget:
                (ra if len(ra) > len(rb) else rb).pop()
            assert (len(ra), len(rb)) == (x, y), (a, b, budget)
