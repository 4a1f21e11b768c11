"""One text normalisation, recorded with the model, the same ids everywhere.

On German, Japanese and Chinese text (../shared/data/multilingual) and a
catalogue of hand-made hard cases, in the default (lower-cased, accents
stripped), cased and lower-cased-with-accents modes: the shard builder's
tokenizer, fine-tuning's, a SavedModel holding `TextPreprocessor` and the
Hugging Face export's tokenizer files give the same ids, and so does
`transformers`' own `BertTokenizer` on the same vocab.txt (which follows the
reference BERT / ELECTRA tokenizer). Then the `--strip_accents false` path
from corpus to served ids, and the refusals when records disagree.
"""

import json
import os

import pytest
import tensorflow as tf

from data_helpers import shared_data_dir
from electra_tf.data.build_pretraining_data import build_pretraining_data
from electra_tf.data.build_vocab import build_vocab
from electra_tf.data.data_errors import DataError
from electra_tf.data.normalization import TextNormalization, from_record
from electra_tf.data.tokenizer import WordPieceTokenizer

pytestmark = pytest.mark.large  # builds data, fine-tunes and exports under each normalisation: not in the fast tier

transformers = pytest.importorskip("transformers")

MODES = {
    "default": TextNormalization(),
    "cased": TextNormalization.create(False),
    "lower_accents_kept": TextNormalization.create(True, False),
}
LANGUAGES = ("de", "ja", "zh")
TRAIN_LINES, HELDOUT_LINES = 1200, 300

# Each line exercises one family of rules; `_ours_vs_bert` compares them piece by piece.
HARD_CASES = [
    "e\u0301te\u0301 Cafe\u0301 ÅNGSTRÖM Ǆemal na\u0308ive x\u0301\u0301 \u0301alone",  # combining marks
    "Straße STRASSE İstanbul ẞ ǅ Σ ΑΣΑ",  # ß, dotted capital I, titlecase, non-final sigma
    "ＡＢＣ：（全角）；，１２３ ｶﾀｶﾅ ｱｲｳ ＂ｑｕｏｔｅ＂",  # fullwidth and halfwidth forms
    "µ ² ¼ ½ ﬁ ﬃ ™ Ⅻ ℃ №",  # compatibility characters
    "a\x07b c\x00d e\ufffdf g\x0bh i\x0cj k\x1fl m\x85n",  # controls, NUL, U+FFFD
    "Auf\u200clage zero\u200bwidth soft\u00adhyphen joi\u200dner \ufeffbom pri\ue000vate rtl\u200fmark",
    "👍🏽 👨\u200d👩\u200d👧 🇩🇪 ❤\ufe0f ok👌",  # emoji sequences
    "日本語のテキストです。中文文本，没有空格！한국어 텍스트 ภาษาไทยไม่มีช่องว่าง",  # scripts without spaces
    "tab\there new\nline ls\u2028ps\u2029ideo\u3000graphic\u00a0nbsp thin\u2009space",  # whitespace classes
    "ΆΈΉ ά \u1fef \u037e \u0387 ...!?¿¡«»„“”‹› — – ‐ · • § ¶ † $ ^ ` ~ | \\ @ # % & * + = < >",
    "x" * 150 + " " + "ü" * 60 + " " + "字" * 3,  # words over Hugging Face's default 100 characters
]
LONG_WORDS = ["y" * 200, "y" * 201, "é" * 201]
# str.lower() (the reference) and ICU give a word-final capital sigma "ς"; transformers' BertTokenizer
# lower-cases one character at a time ("σ"); the exported tokenizer.json adds the rule.
FINAL_SIGMA = "ΟΔΟΣ ΟΔΟΣ. ΣΑΣ ΑΣ\u0301 Α.Σ ΟΔΟΣ.Α"
# An unassigned code point (category Cn) vanishes in the reference and here; BertTokenizer keeps it.
UNASSIGNED = "o\u0378p"


def _heldout(lang, count):
    path = shared_data_dir() / "multilingual" / f"{lang}_heldout.txt"
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line, _ in zip(f, range(count))]


def _train_file(tmp_path_factory):
    """A corpus of the first lines of each language's training file, and the hard cases."""
    out = tmp_path_factory.mktemp("corpus") / "train.txt"
    lines = []
    for lang in LANGUAGES:
        with open(shared_data_dir() / "multilingual" / f"{lang}_train.txt", encoding="utf-8") as f:
            lines += [line for line, _ in zip(f, range(TRAIN_LINES))]
    lines += [case + "\n" for case in (HARD_CASES + [FINAL_SIGMA]) * 3]
    out.write_text("".join(lines), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def vocabs(tmp_path_factory):
    """{mode: vocab.txt}, each learned by build_vocab in that mode."""
    corpus = _train_file(tmp_path_factory)
    out = {}
    for name, normalization in MODES.items():
        vocab = tmp_path_factory.mktemp(name) / "vocab.txt"
        build_vocab([str(corpus)], 4000, str(vocab), lower_case=normalization.lower_case,
                    strip_accents=normalization.strip_accents, sample_lines=0, min_count=2, log=lambda _: None)
        out[name] = str(vocab)
    return out


def _saved_model_ids(vocab_file, normalization, texts, directory):
    from electra_tf.preprocessing import TextPreprocessor

    module = tf.Module()
    module.pre = TextPreprocessor(vocab_file, 512, normalization=normalization)
    module.tokenize = tf.function(lambda t: module.pre.tokenize(t).to_tensor(-1),
                                  input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, directory)
    loaded = tf.saved_model.load(directory)
    return [[i for i in row if i >= 0] for row in loaded.tokenize(tf.constant(texts)).numpy().tolist()]


def _hf_export_tokenizer(vocab_file, normalization, directory):
    from electra_tf.convert.tokenizer_files import write_hf_tokenizer

    os.makedirs(directory, exist_ok=True)
    write_hf_tokenizer(directory, vocab_file, normalization, 512)
    return transformers.AutoTokenizer.from_pretrained(directory)


def _every_tokenizer(vocab_file, normalization, texts, tmp_path):
    """{name: ids of each text} of the shard builder, fine-tuning, a SavedModel and the HF export."""
    from electra_tf.finetune.readers.tokenization import FinetuneTokenizer

    shards = WordPieceTokenizer(vocab_file, normalization=normalization)
    flat, splits = shards.tokenize_batch(texts)
    hf = _hf_export_tokenizer(vocab_file, normalization, str(tmp_path / "hf"))
    return {
        "shard builder": [flat[splits[i]:splits[i + 1]].tolist() for i in range(len(texts))],
        "fine-tuning": FinetuneTokenizer(vocab_file, normalization=normalization).tokenize(texts),
        "SavedModel": _saved_model_ids(vocab_file, normalization, texts, str(tmp_path / "sm")),
        "HF export": hf(texts, add_special_tokens=False)["input_ids"],
    }


def _bert_tokenizer(vocab_file, normalization):
    return transformers.BertTokenizer(vocab_file, do_lower_case=normalization.lower_case,
                                      strip_accents=normalization.strip_accents)


def _differing(got, want, texts):
    return [(text[:60], a[:12], b[:12]) for text, a, b in zip(texts, got, want) if a != b]


@pytest.mark.parametrize("mode", list(MODES))
def test_shards_finetuning_saved_model_and_hf_export_agree_on_three_languages(vocabs, mode, tmp_path):
    normalization = MODES[mode]
    texts = [line for lang in LANGUAGES for line in _heldout(lang, HELDOUT_LINES)]
    ids = _every_tokenizer(vocabs[mode], normalization, texts, tmp_path)
    base = ids["shard builder"]
    for name, got in ids.items():
        assert not _differing(got, base, texts), (name, _differing(got, base, texts)[:3])
    # transformers' BertTokenizer on the same vocab.txt: the reference rules (its 100-character limit
    # is never reached here).
    reference = _bert_tokenizer(vocabs[mode], normalization)(texts, add_special_tokens=False)["input_ids"]
    assert not _differing(base, reference, texts), _differing(base, reference, texts)[:3]
    unk = WordPieceTokenizer(vocabs[mode], normalization=normalization).special.unk
    assert sum(row.count(unk) for row in base) < sum(len(row) for row in base) // 50  # a vocabulary that covers the text
    # The keras-hub preset's tokenizer (what convert --to keras_hub writes): the same ids cased; lower-cased
    # it case-folds (NFKC), which convert says in one line.
    from electra_tf.convert.tokenizer_files import keras_hub_note
    from electra_tf.data.vocab import load_vocab

    keras_hub = pytest.importorskip("keras_hub")
    if mode == "cased":
        tok = keras_hub.models.ElectraTokenizer(vocabulary=load_vocab(vocabs[mode]), lowercase=False,
                                                strip_accents=False)
        assert [[int(i) for i in row] for row in tok(texts)] == base
    else:
        assert "NFKC case folding" in keras_hub_note(normalization)


@pytest.mark.parametrize("mode", list(MODES))
def test_hard_cases_give_the_reference_ids(vocabs, mode, tmp_path):
    normalization = MODES[mode]
    ids = _every_tokenizer(vocabs[mode], normalization, HARD_CASES + [FINAL_SIGMA, UNASSIGNED] + LONG_WORDS,
                           tmp_path)
    base = ids["shard builder"]
    for name, got in ids.items():
        assert got == base, name
    from electra_tf.finetune.readers.tokenization import FinetuneTokenizer

    fine = FinetuneTokenizer(vocabs[mode], normalization=normalization)
    for text, want in zip(HARD_CASES + [FINAL_SIGMA, UNASSIGNED], base):
        ids, starts, ends = fine.tokenize_with_char_offsets(text)  # the offsets path splits words its own way
        assert ids == want and len(starts) == len(ends) == len(ids), text
    bert = _bert_tokenizer(vocabs[mode], normalization)
    # BertTokenizer's WordPiece stops at 100 characters (the reference and our exports: 200):
    # compare it where no word is longer.
    short = HARD_CASES[:-1]
    reference = bert(short, add_special_tokens=False)["input_ids"]
    assert not _differing(base[:len(short)], reference, short), _differing(base[:len(short)], reference, short)
    vocab = WordPieceTokenizer(vocabs[mode], normalization=normalization)
    pieces = [vocab.ids_to_tokens(row) for row in base]
    unk = "[UNK]"
    assert pieces[-3] != [unk] and pieces[-2] == [unk] and pieces[-1] == [unk]  # 200 / 201 characters
    assert unk not in pieces[len(HARD_CASES) - 1][:30]  # the 150-character word is spelled out, not [UNK]
    sigma = "".join(p.replace("##", "") for p in pieces[len(HARD_CASES)])
    want = FINAL_SIGMA.lower() if normalization.lower_case else FINAL_SIGMA
    if normalization.strip_accents:
        want = want.replace("\u0301", "")
    assert sigma == want.replace(" ", "")
    assert pieces[len(HARD_CASES) + 1] == vocab.ids_to_tokens(vocab.tokenize("op"))
    # Control, format and zero-width characters vanish inside a word (they do not split it).
    assert vocab.tokenize("a\x07b c\x00d e\ufffdf") == vocab.tokenize("ab cd ef")
    assert vocab.tokenize("Auf\u200clage soft\u00adhyphen") == vocab.tokenize("Auflage softhyphen")
    words = {"default": ("straße", "ete"), "lower_accents_kept": ("straße", "e\u0301te\u0301"),
             "cased": ("Straße", "e\u0301te\u0301")}[mode]
    assert "".join(p.replace("##", "") for p in pieces[1]).startswith(words[0])  # ß is kept, not "ss"
    assert "".join(p.replace("##", "") for p in pieces[0]).startswith(words[1])


def test_strip_accents_false_from_corpus_to_served_ids(tmp_path):
    """build_vocab --strip_accents false -> build_pretraining_data (no casing flags: the vocabulary's
    record) -> pretrain's config -> model folder -> SavedModel and Hugging Face export: one set of ids."""
    from electra_tf.config import ElectraConfig
    from electra_tf.convert import hf
    from electra_tf.data.reader import pretraining_dataset  # noqa: F401  (the reader the job uses)
    from electra_tf.data.vocab import load_vocab, special_token_ids
    from electra_tf.export.serving_loader import discriminator_module
    from electra_tf.models.saving import save_pretrained
    from electra_tf.pretrain import ElectraPretrainer
    from electra_tf.pretrain.options import PretrainOptions, validate_options

    lines = _heldout("de", 200)
    corpus = tmp_path / "de.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    vocab = tmp_path / "vocab.txt"
    build_vocab([str(corpus)], 1500, str(vocab), lower_case=True, strip_accents=False, sample_lines=0,
                min_count=2, log=lambda _: None)
    manifest = build_pretraining_data(str(tmp_path / "shards"), str(vocab), [str(corpus)], max_seq_length=64,
                                      num_shards=1, progress=False, log=lambda _: None)
    kept = TextNormalization.create(True, False)
    assert from_record(manifest, "manifest") == kept
    assert manifest["text_normalization"] == kept.to_json()

    # The ids the shards hold, in corpus order.
    shard_ids = []
    for record in tf.data.TFRecordDataset(os.path.join(str(tmp_path / "shards"), manifest["shards"][0]["file"])):
        example = tf.train.Example.FromString(record.numpy())
        shard_ids += [i for i in example.features.feature["input_ids"].int64_list.value if i > 4]
    tokenizer = WordPieceTokenizer(str(vocab), normalization=kept)
    flat, _ = tokenizer.tokenize_batch(lines)
    assert shard_ids == [i for i in flat.tolist() if i > 4]
    pieces = tokenizer.ids_to_tokens(tokenizer.tokenize("ÜBERSETZUNG"))
    assert pieces[0].startswith("ü"), pieces  # not "u ##ber..." as an accent-stripping tokenizer reads it

    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(dict(vocab_size=len(load_vocab(str(vocab))), embedding_size=16,
                                           hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                           intermediate_size=64, max_position_embeddings=64,
                                           max_seq_length=64)), encoding="utf-8")
    plan = validate_options(PretrainOptions(config=str(config_file), data_dir=str(tmp_path / "shards"),
                                            vocab_file=str(vocab), model_dir=str(tmp_path / "run")), lambda _: None)
    assert plan.config.normalization == kept and plan.config.text_normalization == kept.to_json()
    # A config (or --init model) recording another normalisation is refused before anything runs.
    from electra_tf.pretrain.options import PretrainError

    cased = tmp_path / "cased.json"
    cased.write_text(json.dumps(dict(json.loads(config_file.read_text(encoding="utf-8")), do_lower_case=False,
                                     text_normalization=TextNormalization.create(False).to_json())), encoding="utf-8")
    with pytest.raises(PretrainError, match=r"^--data_dir .* was tokenized with text normalisation \(bert, "
                                            r"lower-cased, accents kept\) but the config has \(bert, cased, accents "
                                            r"kept\); rebuild the vocabulary and shards with --normalization bert "
                                            r"--nodo_lower_case --strip_accents false"):
        validate_options(PretrainOptions(config=str(cased), data_dir=str(tmp_path / "shards"), vocab_file=str(vocab),
                                         model_dir=str(tmp_path / "run2")), lambda _: None)

    model_dir = str(tmp_path / "model")
    save_pretrained(model_dir, ElectraPretrainer(plan.config, special_token_ids(load_vocab(str(vocab)))), str(vocab))
    assert ElectraConfig.from_json(os.path.join(model_dir, "config.json")).normalization == kept
    module = discriminator_module(model_dir, allow_untrained_head=True)
    served = module.preprocessor.tokenize(lines).to_list()
    assert [i for row in served for i in row] == flat.tolist()
    # The exported SavedModel, loaded back: its `tokens` output, on lines that fit in 64 pieces.
    module.save(str(tmp_path / "sm"))
    serve = tf.saved_model.load(str(tmp_path / "sm")).signatures["serving_default"]
    short = [(line, ids) for line, ids in zip(lines, served) if 0 < len(ids) <= 60][:40]
    out = serve(text=tf.constant([line for line, _ in short]))
    tokens = [[t.decode("utf-8") for t in row] for row in out["tokens"].numpy().tolist()]
    vocab_list = load_vocab(str(vocab))
    for row, (_, ids), mask in zip(tokens, short, out["text_mask"].numpy().tolist()):
        assert [t for t, m in zip(row, mask) if m] == [vocab_list[i] for i in ids]

    # Fine-tuning reads the model's record; a --vocab_file recording another normalisation is refused.
    from electra_tf.finetune.finetune_job import resolve_init
    from electra_tf.finetune.settings import FinetuneError, Settings
    from electra_tf.finetune.tasks.task_registry import get_task

    settings = Settings(task="sst2", init=model_dir, data_dir=None, output_dir=str(tmp_path / "ft"), max_seq_length=64)
    tokenizer = resolve_init(settings, get_task("sst2"))[4]
    assert tokenizer.normalization == kept and tokenizer.tokenize(lines) == served
    other = tmp_path / "other"
    other.mkdir()
    (other / "vocab.txt").write_bytes(vocab.read_bytes())
    (other / "vocab.txt.normalization.json").write_text(
        json.dumps({"text_normalization": TextNormalization.create(False).to_json()}), encoding="utf-8")
    with pytest.raises(FinetuneError, match=r"^--vocab_file .*vocab\.txt was built with text normalisation \(bert, "
                                            r"cased, accents kept; .*\) but the model .*config\.json was trained "
                                            r"with \(bert, lower-cased, accents kept\); pass the vocabulary"):
        resolve_init(Settings(task="sst2", init=model_dir, data_dir=None, output_dir=str(tmp_path / "ft2"),
                              vocab_file=str(other / "vocab.txt"), max_seq_length=64), get_task("sst2"))

    from electra_tf.pretrain.pretrainer_loading import load_pretrainer

    out = hf.export(load_pretrainer(model_dir), str(tmp_path / "hf"), str(vocab))["discriminator"]
    settings = json.loads(open(os.path.join(out, "tokenizer_config.json"), encoding="utf-8").read())
    assert settings["do_lower_case"] is True and settings["strip_accents"] is False
    assert settings["model_max_length"] == 64 and settings["tokenize_chinese_chars"] is True
    auto = transformers.AutoTokenizer.from_pretrained(out)
    assert [i for row in auto(lines, add_special_tokens=False)["input_ids"] for i in row] == flat.tolist()
    assert len(auto(" ".join(lines), truncation=True)["input_ids"]) == 64


def test_records_that_disagree_are_refused_in_one_line(tmp_path):
    from electra_tf.config import ConfigError, ElectraConfig

    corpus = tmp_path / "c.txt"
    corpus.write_text("Ein kleiner Text über Übersetzungen.\n" * 20, encoding="utf-8")
    vocab = tmp_path / "vocab.txt"
    build_vocab([str(corpus)], 200, str(vocab), lower_case=False, sample_lines=0, min_count=2, log=lambda _: None)
    with pytest.raises(DataError, match=r"^--vocab_file .* was built with text normalisation \(bert, cased, "
                                        r"accents kept; .*vocab\.txt\.normalization\.json\) but the flags ask for "
                                        r"\(bert, lower-cased, accents stripped\); drop those flags") as e:
        build_pretraining_data(str(tmp_path / "s"), str(vocab), [str(corpus)], lower_case=True, progress=False,
                               log=lambda _: None)
    assert "\n" not in str(e.value) and not (tmp_path / "s" / "manifest.json").exists()
    with pytest.raises(ConfigError, match=r"do_lower_case.*disagrees with text_normalization"):
        ElectraConfig(do_lower_case=True, text_normalization=TextNormalization.create(False).to_json())
    with pytest.raises(DataError, match=r"mode 'nfkc' is unknown; use one of bert, nfkc_casefold"):
        TextNormalization.from_json({"mode": "nfkc", "lower_case": True}, "config.json")


def test_shards_for_a_model_folder_take_its_normalisation(repo_root, tmp_path):
    """build_pretraining_data --vocab_file <model>/vocab.txt (continued pre-training with --init): no
    flags needed, the model's config.json says how its text was normalised."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("Straße ＡＢＣ and a GREAT movie.\n\nAnother document, ½ of it.\n", encoding="utf-8")
    vocab = str(repo_root / "models" / "electra-small-imdb" / "vocab.txt")
    manifest = build_pretraining_data(str(tmp_path / "s"), vocab, [str(corpus)], max_seq_length=32,
                                      progress=False, log=lambda _: None)
    assert from_record(manifest, "manifest") == TextNormalization.legacy(True)
    with pytest.raises(DataError, match=r"electra-small-imdb.config\.json\) but the flags ask for \(bert, "):
        build_pretraining_data(str(tmp_path / "s2"), vocab, [str(corpus)], mode="bert", progress=False,
                               log=lambda _: None)


def test_folders_without_a_record_keep_their_old_ids(repo_root):
    """The committed model (no text_normalization anywhere) tokenizes as the first releases did."""
    from electra_tf.api import ElectraPreprocessor
    from electra_tf.config import ElectraConfig

    model = repo_root / "models" / "electra-small-imdb"
    config = ElectraConfig.from_json(str(model / "config.json"))
    assert config.text_normalization is None
    assert config.normalization == TextNormalization.legacy(config.do_lower_case)
    texts = ["Straße ＡＢＣ ½ Auf\u200clage", "A GREAT movie, 10/10!"]
    pre = ElectraPreprocessor.from_pretrained(str(model), 32)
    legacy = tf_text_fast_bert_ids(str(model / "vocab.txt"), texts)
    assert pre.text.tokenize(texts).to_list() == legacy
    folded = pre.text.id_to_token(pre.text.tokenize(["Straße"])).numpy().astype(str).tolist()[0]
    assert "".join(p.replace("##", "") for p in folded) == "strasse"  # NFKC case folding, as before


def tf_text_fast_bert_ids(vocab_file, texts):
    """tensorflow-text's FastBertTokenizer as the first releases configured it (uncased)."""
    import tensorflow_text as tf_text

    from electra_tf.data.vocab import load_vocab

    tok = tf_text.FastBertTokenizer(vocab=load_vocab(vocab_file), suffix_indicator="##", max_bytes_per_word=100,
                                    token_out_type=tf.int64, unknown_token="[UNK]",
                                    lower_case_nfd_strip_accents=True)
    ids = tok.tokenize(tf.constant(texts))
    return (ids.merge_dims(-2, -1) if ids.shape.rank > 2 else ids).to_list()


def test_offsets_point_at_the_original_characters(vocabs):
    from electra_tf.finetune.readers.tokenization import FinetuneTokenizer

    tok = FinetuneTokenizer(vocabs["default"], normalization=MODES["default"])
    text = "Ü\u200bber ÅNGSTRÖM a\x07b 日本 Ｘ"
    ids, starts, ends = tok.tokenize_with_char_offsets(text)
    spans = [text[s:e] for s, e in zip(starts, ends)]
    assert len(ids) == len(spans) and spans[0].startswith("Ü") and "日" in spans and spans[-1] == "Ｘ"
    assert all(s < e for s, e in zip(starts, ends)) and starts == sorted(starts)


def test_a_run_begun_before_the_record_resumes_and_another_normalisation_does_not():
    from electra_tf.config import ElectraConfig
    from electra_tf.pretrain.options import RESUME_KEYS, PretrainError
    from electra_tf.pretrain.pretrain_job import _check_resume

    old = ElectraConfig().to_dict()
    old.pop("text_normalization")  # run.json of a run begun before the field existed
    settings = dict({k: None for k in RESUME_KEYS}, inputs={},
                    config=ElectraConfig().with_normalization(TextNormalization.legacy(True)).to_dict())
    previous = {"settings": dict(settings, config=old)}
    _check_resume(previous, settings, "run", "run/run.json")  # its old shards: the same normalisation
    bert = ElectraConfig().with_normalization(TextNormalization()).to_dict()
    with pytest.raises(PretrainError, match=r"other settings \(config differ"):
        _check_resume(previous, dict(settings, config=bert), "run", "run/run.json")
