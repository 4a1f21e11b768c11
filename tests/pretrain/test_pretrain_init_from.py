"""--init: a new run whose discriminator starts from a model directory (an earlier run's
pretrained/, or a converted BERT encoder), with its shape and vocabulary; the parts the directory
lacks start fresh, and config encoder_freeze_steps keeps the encoder as it was while they settle."""

import json
import os
import shutil

import numpy as np
import pytest

from electra_tf.pretrain.__main__ import parse_args, run_cli

pytestmark = pytest.mark.large  # pre-trains from model directories: not in the fast tier


def _run(capsys, args):
    code = run_cli(parse_args(args))
    out = capsys.readouterr()
    return code, out.out, out.err.strip().splitlines()


def _weights(layer):
    return [np.asarray(w.numpy()) for w in layer.weights]


@pytest.fixture(scope="module")
def source_model(tmp_path_factory, job_data):
    """An earlier run's pretrained/ (6 steps of configs/tiny.json)."""
    run = tmp_path_factory.mktemp("source") / "run"
    args = ["--config", job_data["config"], "--data_dir", job_data["data_dir"], "--vocab_file", job_data["vocab_file"],
            "--output_dir", str(run), "--override", f"vocab_size={job_data['vocab_size']}", "--batch_size", "8",
            "--verbose", "0", "--train_steps", "6", "--strategy", "cpu"]
    assert run_cli(parse_args(args)) == 0
    return run / "pretrained"


def _init_args(job_data, model_dir, init, *extra):
    return ["--config", job_data["config"], "--data_dir", job_data["data_dir"], "--init", str(init),
            "--output_dir", str(model_dir), "--batch_size", "8", "--verbose", "0", "--strategy", "cpu",
            "--log_every", "1", *extra]


def test_frozen_encoder_keeps_the_source_weights_while_fresh_parts_train(tmp_path, job_data, source_model, capsys):
    from electra_tf.models.saving import load_discriminator
    from electra_tf.pretrain.pretrainer_loading import load_pretrainer

    out_dir = tmp_path / "adapted"
    # A generator half as wide as the source's: it cannot be reused and starts fresh.
    code, out, err = _run(capsys, _init_args(job_data, out_dir, source_model, "--train_steps", "4",
                                             "--override", "generator_hidden_size=0.25",
                                             "--override", "encoder_freeze_steps=100"))
    assert code == 0, err
    assert "--init: discriminator loaded" in out
    assert "--init: discriminator_head loaded" in out
    assert "--init: generator fresh (generator_hidden_size 0.5 there, 0.25 here" in out
    run = json.loads((out_dir / "run.json").read_text())
    assert run["init_from_parts"]["generator"].startswith("fresh")
    # No --vocab_file: the source's vocabulary is the run's.
    assert run["vocab_file"] == os.path.join(str(source_model), "vocab.txt")

    src_enc, src_head, _ = load_discriminator(str(source_model))
    new_enc, new_head, cfg = load_discriminator(str(out_dir / "pretrained"))
    assert cfg.generator_hidden_size == 0.25 and cfg.encoder_freeze_steps == 100
    for a, b in zip(_weights(src_enc), _weights(new_enc)):
        np.testing.assert_array_equal(a, b)  # frozen: not one update in 4 steps
    assert any(not np.array_equal(a, b) for a, b in zip(_weights(src_head), _weights(new_head)))
    src_gen_width = load_pretrainer(str(source_model)).generator.weights
    new_gen = load_pretrainer(str(out_dir / "pretrained")).generator.weights
    assert {tuple(w.shape) for w in src_gen_width} != {tuple(w.shape) for w in new_gen}


def test_unfrozen_run_starts_from_the_source_and_moves(tmp_path, job_data, source_model, capsys):
    from electra_tf.models.saving import load_encoder

    out_dir = tmp_path / "adapted"
    code, out, err = _run(capsys, _init_args(job_data, out_dir, source_model, "--train_steps", "3",
                                             "--vocab_file", job_data["vocab_file"]))
    assert code == 0, err
    assert "--init: generator loaded" in out  # same width as the source's: reused
    src, _ = load_encoder(str(source_model))
    new, _ = load_encoder(str(out_dir / "pretrained"))
    diffs = [float(np.max(np.abs(a - b))) for a, b in zip(_weights(src), _weights(new))]
    assert max(diffs) > 0  # trained
    assert max(diffs) < 0.05  # three small steps away from the source, not a fresh init (std 0.02)


def _bert_dir(tmp_path, job_data):
    """A tiny BERT checkpoint (model_type bert, BertModel names, a pooler) in Hugging Face format."""
    from electra_tf.config import ElectraConfig
    from electra_tf.convert import hf
    from electra_tf.data.vocab import special_token_ids
    from electra_tf.pretrain.pretrainer import ElectraPretrainer

    import keras

    keras.utils.set_random_seed(3)
    cfg = ElectraConfig.from_json(job_data["config"]).replace(
        vocab_size=job_data["vocab_size"], embedding_size=64, hidden_size=64, num_attention_heads=2,
        intermediate_size=128, num_hidden_layers=2)
    model = ElectraPretrainer(cfg, special_token_ids(job_data["vocab_file"]))
    model.build()
    dirs = hf.export(model, str(tmp_path / "hf"), job_data["vocab_file"])
    weights, _ = hf.read_safetensors(os.path.join(dirs["discriminator"], "model.safetensors"))
    bert = {k[len("electra."):]: v for k, v in weights.items() if k.startswith("electra.")}
    bert["pooler.dense.weight"] = np.eye(64, dtype="float32")
    bert["pooler.dense.bias"] = np.zeros(64, "float32")
    d = tmp_path / "bert"
    d.mkdir()
    hf.write_safetensors(str(d / "model.safetensors"), bert, {"format": "pt"})
    config = json.loads(open(os.path.join(dirs["discriminator"], "config.json")).read())
    config.update(model_type="bert", architectures=["BertModel"])
    config.pop("embedding_size")
    (d / "config.json").write_text(json.dumps(config))
    shutil.copyfile(job_data["vocab_file"], d / "vocab.txt")
    return d, model


def test_converted_bert_encoder_gets_a_fresh_generator_and_head(tmp_path, job_data, capsys):
    from electra_tf.convert.__main__ import main as convert_main
    from electra_tf.models.saving import load_encoder

    bert, original = _bert_dir(tmp_path, job_data)
    (bert / "1_Pooling").mkdir()  # a sentence-transformers model: its read-out is the mean
    (bert / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    converted = tmp_path / "converted"
    assert convert_main(["--from", "hf", "--input", str(bert), "--output_dir", str(converted)]) == 0
    imported = json.loads((converted / "config.json").read_text())
    assert (imported["model_size"], imported["pooling"]) == ("imported", "mean")
    capsys.readouterr()
    out_dir = tmp_path / "adapted"
    code, out, err = _run(capsys, _init_args(job_data, out_dir, converted, "--train_steps", "2",
                                             "--override", "encoder_freeze_steps=2"))
    assert code == 0, err
    assert "--init: discriminator_head fresh (the model directory has none trained)" in out
    assert "--init: generator fresh (the model directory has none trained)" in out
    enc, cfg = load_encoder(str(out_dir / "pretrained"))
    assert (cfg.embedding_size, cfg.hidden_size, cfg.num_hidden_layers) == (64, 64, 2)  # the checkpoint's shape
    # Fine-tuning knows the adapted encoder as the imported one: the same defaults, its own read-out.
    assert (cfg.model_size, cfg.pooling) == ("imported", "mean")
    for a, b in zip(_weights(original.discriminator), _weights(enc)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case", ["no_data", "with_continue", "not_a_model", "other_vocab", "gdes"])
def test_bad_init_from_is_refused_in_one_line(tmp_path, job_data, source_model, capsys, case):
    out_dir = tmp_path / "run"
    args = _init_args(job_data, out_dir, source_model, "--train_steps", "2")
    want = {"no_data": "--init needs --data_dir", "with_continue": "pass one of them",
            "not_a_model": "has no config.json", "other_vocab": "is not the vocabulary of --init",
            "gdes": "embedding_sharing=gdes"}[case]
    if case == "no_data":
        args = ["--init", str(source_model), "--output_dir", str(out_dir)]
    elif case == "with_continue":
        args += ["--continue_from", str(source_model.parent)]
    elif case == "not_a_model":
        args[args.index("--init") + 1] = str(tmp_path)
    elif case == "other_vocab":
        other = tmp_path / "vocab.txt"
        other.write_text(open(job_data["vocab_file"]).read() + "extra\n")
        args += ["--vocab_file", str(other)]
    else:
        args += ["--override", "embedding_sharing=gdes"]
    code, out, err = _run(capsys, args)
    assert code == 2
    assert err[-1].startswith("error:") and want in err[-1], err
    assert not out_dir.exists()
