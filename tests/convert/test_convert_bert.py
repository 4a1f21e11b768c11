"""A real public BERT-family encoder (all-MiniLM-L6-v2 in ../shared/data/encoders/) imported with
`convert --from hf`: the converted discriminator's last hidden states and our tokenizer's ids
against Hugging Face transformers' on real IMDB reviews (accents, punctuation, `<br />`).

The BERT name variants (BertModel without a prefix, BertForMaskedLM / BertForPreTraining under
`bert.` with `cls.*` heads) are checked on renamed copies of the same weights, without torch.
"""

import csv
import gzip
import json
import os
import shutil
import unicodedata

import numpy as np
import pytest

from helpers import require_torch

from electra_tf.convert import hf
from electra_tf.convert.__main__ import main as convert_main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENCODER = os.path.join(REPO, "..", "shared", "data", "encoders", "all-MiniLM-L6-v2")
IMDB_DEV = os.path.join(REPO, "..", "shared", "data", "imdb", "dev.tsv.gz")
PARITY_ATOL = 1e-4

pytestmark = pytest.mark.skipif(not os.path.isfile(os.path.join(ENCODER, "model.safetensors")),
                                reason="../shared/data/encoders/all-MiniLM-L6-v2 is not beside the checkout")


def _reviews(n=400):
    with gzip.open(IMDB_DEV, "rt", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [r["sentence"] for r in rows[:n]]


def _hard_reviews():
    """Real reviews that exercise the basic tokenizer: accents, HTML line breaks, punctuation runs."""
    reviews = _reviews()
    picked = [r for r in reviews if any(ord(c) > 127 for c in r)][:3]
    picked += [r for r in reviews if "<br />" in r and r not in picked][:3]
    picked += [r for r in reviews if ("..." in r or "!!" in r or "--" in r) and r not in picked][:2]
    # Compatibility characters (½, full-width forms, ligatures): NFKC would rewrite them, BERT's rules keep them.
    compatibility = [r for r in _reviews(5000) if unicodedata.normalize("NFKC", r) != r and r not in picked][:2]
    assert len(compatibility) == 2, "IMDB dev has fewer reviews with compatibility characters than expected"
    picked += compatibility
    assert any(any(ord(c) > 127 for c in r) for r in picked), "no review with accented letters found"
    return picked


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("bert") / "minilm")
    assert convert_main(["--from", "hf", "--input", ENCODER, "--output_dir", out]) == 0
    return out


def test_conversion_record_says_what_was_dropped(converted):
    with open(os.path.join(converted, "conversion.json"), encoding="utf-8") as f:
        record = json.load(f)
    assert record["model_type"] == "bert"
    assert record["parts"]["discriminator"] == "converted"
    assert record["parts"]["generator"].startswith("absent")
    assert any("pooler" in d for d in record["dropped"])
    with open(os.path.join(converted, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    assert (config["embedding_size"], config["hidden_size"], config["num_hidden_layers"],
            config["num_attention_heads"], config["vocab_size"]) == (384, 384, 6, 12, 30522)


def test_the_import_is_the_encoder_once(converted):
    """An encoder-only import writes the encoder's weights once: the folder is about the source's weights."""
    assert sorted(os.listdir(converted)) == ["config.json", "conversion.json", "discriminator.weights.h5",
                                             "vocab.txt"]
    ours = sum(os.path.getsize(os.path.join(converted, n)) for n in os.listdir(converted))
    theirs = os.path.getsize(os.path.join(ENCODER, "model.safetensors"))
    assert abs(ours - theirs) <= 0.1 * theirs, (ours, theirs)


def test_tokenizer_ids_match_the_checkpoints_own(converted):
    require_torch()
    import transformers
    from electra_tf.preprocessing import TextPreprocessor

    theirs = transformers.BertTokenizerFast(tokenizer_file=os.path.join(ENCODER, "tokenizer.json"),
                                            vocab_file=os.path.join(ENCODER, "vocab.txt"))
    from electra_tf.config import ElectraConfig

    # The converted folder records the normalisation (BERT's rules), and the served / fine-tuned tokenizer uses it.
    normalization = ElectraConfig.from_json(os.path.join(converted, "config.json")).normalization
    assert (normalization.mode, normalization.lower_case, normalization.strip_accents) == ("bert", True, True)
    ours = TextPreprocessor(os.path.join(converted, "vocab.txt"), 512, normalization=normalization)
    texts = _hard_reviews()
    want = theirs(texts, truncation=True, max_length=512, padding=False)["input_ids"]
    got = ours(texts)
    for i, (text, ids) in enumerate(zip(texts, want)):
        n = int(got["input_mask"][i].numpy().sum())
        assert got["input_ids"][i, :n].numpy().tolist() == ids, text[:80]


def test_last_hidden_states_match_transformers(converted):
    torch = require_torch()
    import transformers
    from electra_tf.models.saving import load_encoder

    model = transformers.BertModel.from_pretrained(ENCODER).eval()
    tok = transformers.BertTokenizerFast(tokenizer_file=os.path.join(ENCODER, "tokenizer.json"),
                                         vocab_file=os.path.join(ENCODER, "vocab.txt"))
    batch = tok(_hard_reviews()[:4], truncation=True, max_length=128, padding="max_length", return_tensors="pt")
    with torch.no_grad():
        want = model(**batch).last_hidden_state.numpy()
    encoder, _ = load_encoder(converted)
    got = encoder({"input_ids": batch["input_ids"].numpy().astype("int32"),
                   "input_mask": batch["attention_mask"].numpy().astype("int32"),
                   "segment_ids": batch["token_type_ids"].numpy().astype("int32")}, training=False)
    mask = batch["attention_mask"].numpy().astype(bool)
    diff = np.abs(np.asarray(got)[mask] - want[mask])
    assert diff.max() <= PARITY_ATOL, diff.max()
    assert np.abs(want[mask]).mean() > 0.05  # real activations, not zeros


@pytest.mark.large
@pytest.mark.parametrize("variant", ["BertForMaskedLM", "BertForPreTraining"])
def test_prefixed_bert_names_with_heads_convert(converted, tmp_path, variant, capsys):
    weights, _ = hf.read_safetensors(os.path.join(ENCODER, "model.safetensors"))
    renamed = {f"bert.{k}": v for k, v in weights.items() if not k.startswith("pooler.")}
    hidden, vocab = 384, 30522
    renamed["cls.predictions.bias"] = np.zeros(vocab, "float32")
    renamed["cls.predictions.transform.dense.weight"] = np.eye(hidden, dtype="float32")
    renamed["cls.predictions.transform.dense.bias"] = np.zeros(hidden, "float32")
    renamed["cls.predictions.transform.LayerNorm.weight"] = np.ones(hidden, "float32")
    renamed["cls.predictions.transform.LayerNorm.bias"] = np.zeros(hidden, "float32")
    if variant == "BertForPreTraining":
        renamed["cls.seq_relationship.weight"] = np.zeros((2, hidden), "float32")
        renamed["cls.seq_relationship.bias"] = np.zeros(2, "float32")
    d = tmp_path / variant
    d.mkdir()
    hf.write_safetensors(str(d / "model.safetensors"), renamed, {"format": "pt"})
    with open(os.path.join(ENCODER, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config["architectures"] = [variant]
    (d / "config.json").write_text(json.dumps(config), encoding="utf-8")
    shutil.copyfile(os.path.join(ENCODER, "vocab.txt"), d / "vocab.txt")
    out = tmp_path / "out"
    assert convert_main(["--from", "hf", "--input", str(d), "--output_dir", str(out)]) == 0
    err = capsys.readouterr().err
    assert "masked-LM head" in err
    assert ("next-sentence" in err) == (variant == "BertForPreTraining")
    from electra_tf.models.saving import load_encoder

    a, _ = load_encoder(converted)
    b, _ = load_encoder(str(out))
    for x, y in zip(a.weights, b.weights):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_bert_with_generator_input_is_refused(tmp_path, capsys):
    rc = convert_main(["--from", "hf", "--input", ENCODER, "--generator_input", ENCODER,
                       "--output_dir", str(tmp_path / "out")])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error:") and "--generator_input" in err[-1] and "BERT" in err[-1]
    assert not (tmp_path / "out").exists()


def test_unknown_bert_name_is_listed(tmp_path, capsys):
    weights, _ = hf.read_safetensors(os.path.join(ENCODER, "model.safetensors"))
    weights["adapter.down.weight"] = np.zeros((4, 384), "float32")
    d = tmp_path / "odd"
    d.mkdir()
    hf.write_safetensors(str(d / "model.safetensors"), weights, {"format": "pt"})
    shutil.copyfile(os.path.join(ENCODER, "config.json"), d / "config.json")
    shutil.copyfile(os.path.join(ENCODER, "vocab.txt"), d / "vocab.txt")
    assert convert_main(["--from", "hf", "--input", str(d), "--output_dir", str(tmp_path / "out")]) == 2
    assert "adapter.down.weight" in capsys.readouterr().err
