"""Our side (the project's venv, TF 2.21 / Keras 3): the models every side loads, our fine-tuning
step and our exported SavedModel.

Models: the ELECTRA-Small shape (our random initialisation, `--seed`) and the public
all-MiniLM-L6-v2 (imported with `python -m electra_tf.convert --from hf`); each is written for
the peers with `convert --to hf`, and one classification head (weights drawn once) goes to every
side. Fine-tuning step: `ClassifierModel` + fine-tuning's optimizer (`make_optimizer`: the fused
`ElectraAdamW`, layer-wise rates, clipping 1.0), compiled as the fine-tuning job compiles it,
`train_on_batch` with the loss read back, optionally XLA. Serving: the exported SavedModel loaded
with `tf.saved_model.load` (in-graph tokenizer, as TF Serving runs it), the same exported with
`--freeze_weights` (weights as constants, opt-in), the same exported with `--jit_compile` (XLA,
opt-in) loaded as is and loaded with its warm-up requests replayed (`replay_warmup_requests`, as TF
Serving runs `assets.extra/tf_serving_warmup_requests` before it serves: the replay's seconds are
that row's load time, `load_s`, outside every timed call), the bf16 opt-in
(`classifier_module(seed_dir, precision="bf16")`), and the LiteRT text-in file (`export --format tflite`,
tokenizer inside; float32 and `--quantize int8`) in LiteRT's interpreter (ai-edge-litert when installed,
else `tf.lite`) with the same threads.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from scripts.benchmarks.cpu_peers.timing import THREADS, warm_up, warm_up_finetuning
from scripts.benchmarks.cpu_peers.traffic import MINILM, ROOT, ft_batches

LABELS = ["negative", "positive"]
LR, WEIGHT_DECAY, CLIP = 5e-5, 0.01, 1.0
# Serving variants loaded from an exported SavedModel -> the export's options (`Ours.saved_model`).
SAVED_MODEL_OPTIONS = {"saved_model": {}, "frozen": {"freeze_weights": True}, "xla": {"jit_compile": True},
                       "xla_warm": {"jit_compile": True}}
# LiteRT variants (`export --format tflite`, the text-in file) -> its --quantize (`Ours.litert`).
LITERT_OPTIONS = {"litert": "none", "litert_int8": "int8"}


def _run(cmd):
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")


class Ours:
    def __init__(self, work: Path):
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(THREADS)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        self.tf = tf
        self.work = work
        self.cases = {}

    def versions(self):
        import keras
        import tensorflow as tf

        from electra_tf.export.tflite import runtime_name

        out = {"tensorflow": tf.__version__, "keras": keras.__version__, "litert_runtime": runtime_name()}
        if out["litert_runtime"] == "ai-edge-litert":
            from importlib.metadata import version

            out["ai_edge_litert"] = version("ai-edge-litert")
        return out

    # ---------------------------------------------------------------- models (written once)
    def make_model(self, name, seed, max_seq):
        """Our model directory, its Hugging Face copy, a classifier seed directory with a seeded
        head, and the head's weights for the peers; returns their paths and sizes."""
        import keras
        import numpy as np

        from electra_tf.config import ElectraConfig
        from electra_tf.data.vocab import special_token_ids
        from electra_tf.models.model_folder import save_classifier
        from electra_tf.models.classifier_model import ClassifierModel, build_and_call
        from electra_tf.models.saving import load_encoder, save_pretrained
        from electra_tf.pretrain import ElectraPretrainer

        mdir, hf, seed_dir = self.work / name, self.work / f"{name}_hf", self.work / f"{name}_seed"
        head_path = self.work / f"{name}_head.npz"
        vocab = str(MINILM / "vocab.txt")
        if not (mdir / "config.json").exists():
            if name == "small":
                keras.utils.set_random_seed(seed)
                config = ElectraConfig.from_json(str(ROOT / "configs" / "small.json")).replace(max_seq_length=max_seq)
                save_pretrained(str(mdir), ElectraPretrainer(config, special_token_ids(vocab)), vocab)
            elif name == "minilm":
                _run([sys.executable, "-m", "electra_tf.convert", "--from", "hf", "--input", str(MINILM),
                      "--output_dir", str(mdir)])
            else:
                raise ValueError(f"unknown model {name!r}: small or minilm")
        if not (hf / "discriminator" / "config.json").exists():
            _run([sys.executable, "-m", "electra_tf.convert", "--from", "electra_tf", "--input", str(mdir),
                  "--to", "hf", "--output_dir", str(hf)])
        encoder, config = load_encoder(str(mdir))
        if not (seed_dir / "classifier.json").exists():
            keras.utils.set_random_seed(seed)
            model = ClassifierModel(encoder, 2, False, config.hidden_dropout_prob, config.initializer_range,
                                    False, pooling="cls")
            build_and_call(model, max_seq)
            rng = np.random.default_rng(seed + 1)
            model.head.out.kernel.assign(rng.normal(0, 0.5, model.head.out.kernel.shape).astype("float32"))
            save_classifier(str(seed_dir), model, config, str(mdir / "vocab.txt"), LABELS, "imdb", False, max_seq)
            np.savez(head_path, kernel=model.head.out.kernel.numpy(), bias=model.head.out.bias.numpy())
        return {"model_dir": str(mdir), "hf_dir": str(hf / "discriminator"), "seed_dir": str(seed_dir),
                "head": str(head_path), "vocab": str(mdir / "vocab.txt"), "layers": int(config.num_hidden_layers)}

    def saved_model(self, name, seed_dir, seq, jit_compile=False, freeze_weights=False):
        """Our classifier SavedModel at max_seq_length `seq` (what `export --kind classifier` writes;
        `jit_compile`: with `--jit_compile` and its warm-up requests; `freeze_weights`: with
        `--freeze_weights`)."""
        from electra_tf.export import export

        suffix = "_jit" if jit_compile else "_frozen" if freeze_weights else ""
        path = self.work / f"{name}_saved_model_{seq}{suffix}"
        if not (path / "saved_model.pb").exists():
            export(seed_dir, str(path), kind="classifier", max_seq_length=seq, jit_compile=jit_compile,
                   freeze_weights=freeze_weights)
        return str(path)

    def litert(self, name, seed_dir, seq, quantize="none"):
        """Our classifier's text-in LiteRT file at max_seq_length `seq` (what `export --kind classifier
        --format tflite --tflite_inputs text --quantize <quantize>` writes, checked against the SavedModel)."""
        from electra_tf.export import build_module
        from electra_tf.export.tflite import TEXT_FILE, export_tflite

        path = self.work / f"{name}_litert_{seq}_{quantize}"
        if not (path / TEXT_FILE).exists():
            export_tflite(build_module(seed_dir, "classifier", seq), str(path), quantize, inputs=["text"],
                          overwrite=True)
        return str(path / TEXT_FILE)

    def token_ids(self, vocab, texts, seq):
        """Our in-graph tokenizer's ids of each text (cut at `seq`, no padding), to check against the peers'."""
        from electra_tf.preprocessing import TextPreprocessor

        enc = TextPreprocessor(vocab, seq, do_lower_case=True)(self.tf.constant(texts))
        ids, lengths = enc["input_ids"].numpy(), enc["input_mask"].numpy().sum(1)
        return [row[:n].tolist() for row, n in zip(ids, lengths)]

    def tokenize_to(self, vocab, texts, seq, path, labels):
        """Writes fine-tuning ids padded to `seq` (the same ids for every side) to `path` (.npz)."""
        import numpy as np

        from electra_tf.preprocessing import TextPreprocessor

        enc = TextPreprocessor(vocab, seq, do_lower_case=True)(self.tf.constant(texts), pad_to_sequence_length=True)
        mask = enc["input_mask"].numpy()
        np.savez(path, ids=enc["input_ids"].numpy().astype("int32"), mask=mask.astype("int32"),
                 labels=np.asarray(labels, "int32"))
        lengths = mask.sum(1)
        return {"mean_length": float(lengths.mean()), "cut_at_max": float((lengths >= seq).mean())}

    # ---------------------------------------------------------------- cases
    def prepare(self, case):
        return self._prepare_ft(case) if case["kind"] == "ft" else self._prepare_serve(case)

    def _prepare_ft(self, case):
        import keras
        import numpy as np

        from electra_tf.models.classifier_model import ClassifierModel, build_and_call
        from electra_tf.finetune.settings import Settings
        from electra_tf.training.finetune_optimizer import make_optimizer
        from electra_tf.models.saving import load_encoder

        keras.utils.set_random_seed(0)
        xla = case["variant"] == "xla"
        encoder, config = load_encoder(case["model_dir"])
        model = ClassifierModel(encoder, 2, False, config.hidden_dropout_prob, config.initializer_range, False,
                                pooling="cls")
        build_and_call(model, case["seq"])
        head = np.load(case["head"])
        model.head.out.kernel.assign(head["kernel"])
        model.head.out.bias.assign(head["bias"])
        s = Settings(task="imdb", init=case["model_dir"], data_dir=None, output_dir=str(self.work),
                     jit_compile=xla, clip_norm=CLIP, weight_decay=WEIGHT_DECAY)
        opt, _ = make_optimizer(model, encoder, s, LR, 0.8, 10000)
        model.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      jit_compile=xla)

        def as_tf(ids, mask, labels):
            return {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}, labels

        batches = ft_batches(case, as_tf)
        state = {"batch": case["batch"], "next": 0}

        def step():
            x, y = batches[state["next"] % len(batches)]
            state["next"] += 1
            float(model.train_on_batch(x, y, return_dict=True)["loss"])
            return int(x["input_mask"].sum()), x["input_ids"].size

        return warm_up_finetuning(state, [x["input_ids"].shape[1] for x, _ in batches], step)

    def _prepare_serve(self, case):
        tf = self.tf
        loaded = {}
        if case["variant"] in SAVED_MODEL_OPTIONS:
            import tensorflow_text  # noqa: F401  (the tokenizer's ops)

            path = case["saved_model"] if case["variant"] == "saved_model" else self.saved_model(
                case["model"], case["seed_dir"], case["seq"], **SAVED_MODEL_OPTIONS[case["variant"]])
            fn = tf.saved_model.load(path).signatures["serving_default"]
            if case["variant"] == "xla_warm":
                loaded = replay_at_load(path, fn)

            def outputs(texts):
                return fn(text=tf.constant(texts))
        elif case["variant"] in LITERT_OPTIONS:
            from electra_tf.export.tflite import LiteRTModel

            model = LiteRTModel(self.litert(case["model"], case["seed_dir"], case["seq"],
                                            LITERT_OPTIONS[case["variant"]]), num_threads=THREADS)
            loaded = {"runtime": model.runtime}

            def outputs(texts):
                return model(text=texts)
        elif case["variant"] == "bf16":
            from electra_tf.export.serving_loader import classifier_module

            module = classifier_module(case["seed_dir"], case["seq"], precision="bf16")

            def outputs(texts):
                return module.serve(tf.constant(texts))
        else:
            raise ValueError(case["variant"])
        state = {"logits": lambda texts: _numpy(outputs(texts)["logits"]),
                 "call": lambda texts: _numpy(outputs(texts)["label_id"])}
        state = warm_up(state, case)
        state.update(loaded, report=state["report"] + tuple(loaded))
        return state


def _numpy(value):
    """A tensor's array (LiteRT's outputs are arrays already)."""
    return value.numpy() if hasattr(value, "numpy") else value


def replay_at_load(path, fn):
    """Replays the export's TF Serving warm-up requests through `fn` (its loaded `serving_default`), as TF
    Serving does before it serves, so that every shape they cover is compiled before the first timed call;
    returns {"load_s": the replay's seconds, "warmup_requests": how many}: the row's load time, kept out of
    the warm-up and of every timed call."""
    from electra_tf.export.warmup import replay_warmup_requests

    t = time.perf_counter()
    count = replay_warmup_requests(path, {"serving_default": fn})
    return {"load_s": time.perf_counter() - t, "warmup_requests": count}
