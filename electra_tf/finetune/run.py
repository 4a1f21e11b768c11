"""The fine-tuning driver behind `python -m electra_tf.finetune`.

One call of `run_task` trains and evaluates one task for several seeds and
writes `results.json` (per-seed metrics, their median and the settings).

Resume: each seed checkpoints every `save_every` steps to
`<output_dir>/seed_<n>/checkpoints/` (model, optimizer step and slots, dropout
seed states) and writes `seed_<n>/result.json` when it is done. Re-running the
same command skips finished seeds and resumes an unfinished one at its last
checkpoint, on the same batches an uninterrupted run would see next, so it
ends with the same result. `<output_dir>/settings.json` guards against
resuming with other settings.

Casing: `do_lower_case` None (no --do_lower_case flag) means the model's own
record, config.json's `do_lower_case` (written by pre-training from its data
manifest, or by convert); an explicit flag overrides it. The resolved value is
what settings.json, results.json and the saved classifier record, so export
serves the model with the casing it was fine-tuned with.

TensorFlow and the modules that import it (training/, models/, the task
models, the tokenizer) are imported inside the functions that need them, so
bad settings are refused before TensorFlow starts.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import shutil
import statistics
import time
from typing import Dict, List, Optional, Sequence

import numpy as np

from electra_tf.config import ElectraConfig
from electra_tf.data.fs import write_json_atomic
from electra_tf.errors import ElectraError, error_line
from electra_tf.finetune import glue, squad, squad_eval, tagging
from electra_tf.finetune.metrics import compute_metrics
from electra_tf.paths import output_dir_problem, resolve_model_dir

log = logging.getLogger("electra_tf.finetune")

SQUAD_TASKS = {"squad": False, "squad1": False, "squad2": True}
TAGGING_TASKS = ("tagging", "ner", "chunk", "pos")
ALL_TASKS = tuple(glue.GLUE_TASKS) + tuple(SQUAD_TASKS) + TAGGING_TASKS
SETTINGS_FILE = "settings.json"  # in output_dir: what a re-run must match to resume
RESULT_FILE = "result.json"  # in seed_<n>/: written when the seed is done
CHECKPOINT_DIR = "checkpoints"  # in seed_<n>/: removed when the seed is done
# Settings that may differ between a run and its resumption.
_RESUMABLE_CHANGES = ("seeds", "log_every")


class FinetuneError(ElectraError, ValueError):
    """Bad command-line settings or inputs."""


@dataclasses.dataclass
class Settings:
    """Everything one fine-tuning run needs (the CLI fills it from flags).

    Attributes mirror the flags of `python -m electra_tf.finetune`; None means
    "use the reference default for this task and model size" (see `resolve`).
    """
    task: str
    init: str
    data_dir: Optional[str]
    output_dir: str
    vocab_file: Optional[str] = None
    config: Optional[str] = None
    seeds: Sequence[int] = (1,)
    learning_rate: Optional[float] = None
    layerwise_lr_decay: Optional[float] = None
    reference_lr_power: bool = False
    epochs: Optional[float] = None
    batch_size: int = 32
    eval_batch_size: int = 64
    max_seq_length: Optional[int] = None
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    max_train_examples: Optional[int] = None
    max_eval_examples: Optional[int] = None
    max_steps: Optional[int] = None
    two_layer_head: bool = False
    pooling: str = "cls"  # classifier input: the [CLS] vector (reference) or "mean" of the tokens
    double_unordered: bool = True
    tagging_scheme: str = "BIO"
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    strategy: str = "default"
    mixed_precision: str = "float32"
    tfds_data_dir: Optional[str] = None
    do_lower_case: Optional[bool] = None  # None: config.json's do_lower_case (see the module docstring)
    save_every: int = 1000  # checkpoint every N optimizer steps (0: only at the end of a seed)
    log_every: int = 100  # progress line every N steps


def reference_hparams(model_size: str, task: str) -> Dict[str, float]:
    """Reference defaults (google-research/electra configure_finetuning.py).

    Args:
      model_size: small, base, large (anything else: as base).
      task: task name.
    """
    lr, decay = (5e-5, 0.9) if model_size == "large" else (1e-4, 0.8)
    if task in glue.GLUE_TASKS:
        epochs = glue.GLUE_TASKS[task].epochs
        seq = 128
    elif task in SQUAD_TASKS:
        epochs, seq = 2.0, 512
    else:
        epochs, seq = 3.0, 256  # reference "chunk"
    return {"learning_rate": lr, "layerwise_lr_decay": decay, "epochs": epochs, "max_seq_length": seq}


# ----------------------------------------------------------------------------
# Model initialisation
# ----------------------------------------------------------------------------

_INIT_FILES = ("discriminator.weights.h5", "encoder.weights.h5", "discriminator.keras", "encoder.keras")


def find_init_files(init: str, config_flag: Optional[str], vocab_flag: Optional[str]):
    """Resolves --init / --config / --vocab_file to (weights or None, config path, vocab path).

    --init is "random", a weights file (.weights.h5, or a TF checkpoint prefix),
    or a directory (a pre-training run or converted checkpoint) holding one of
    discriminator.weights.h5 / encoder.weights.h5 / a TF checkpoint, and
    normally config.json and vocab.txt.

    Args:
      init: the --init value.
      config_flag: --config, overrides the directory's config.json.
      vocab_flag: --vocab_file, overrides the directory's vocab.txt.
    """
    weights = None
    search_dir = None
    if init != "random":
        if os.path.isdir(init):
            # A pre-training run directory: its model is in <run>/pretrained/.
            init = resolve_model_dir(init, "--init", lambda line: print(line, flush=True))
            search_dir = init
            for name in _INIT_FILES:
                if os.path.isfile(os.path.join(init, name)):
                    weights = os.path.join(init, name)
                    break
            if weights is None:
                import tensorflow as tf  # deferred: see the module docstring

                for d in (init, os.path.join(init, "checkpoints")):
                    if os.path.isdir(d) and tf.train.latest_checkpoint(d):
                        weights = tf.train.latest_checkpoint(d)
                        break
            if weights is None:
                raise FinetuneError(
                    f"--init {init!r} holds no {' / '.join(_INIT_FILES)} and no TF checkpoint; "
                    f"pass the pre-training output directory or 'random'")
        elif os.path.isfile(init) or os.path.isfile(init + ".index"):
            weights = init
            search_dir = os.path.dirname(init)
        else:
            raise FinetuneError(f"--init {init!r} does not exist; pass a pre-training run directory, "
                                f"a .weights.h5 file, or 'random'")
    config = config_flag
    if config is None and search_dir and os.path.isfile(os.path.join(search_dir, "config.json")):
        config = os.path.join(search_dir, "config.json")
    if config is None:
        raise FinetuneError("no model config: pass --config configs/<size>.json (or an --init directory with config.json)")
    vocab = vocab_flag
    if vocab is None and search_dir and os.path.isfile(os.path.join(search_dir, "vocab.txt")):
        vocab = os.path.join(search_dir, "vocab.txt")
    if vocab is None:
        raise FinetuneError("no vocabulary: pass --vocab_file (or an --init directory with vocab.txt)")
    return weights, config, vocab


def load_encoder_weights(encoder, path: str) -> None:
    """Loads pre-trained discriminator weights into a built encoder.

    Args:
      encoder: a built `ElectraEncoder`.
      path: a `.weights.h5` file saved from the encoder (or a model whose only
        layer is it), a `.keras` file of such a model, or a TF checkpoint prefix
        whose object graph has the encoder under `encoder` or `discriminator`.
    """
    import keras  # deferred: see the module docstring
    import tensorflow as tf
    from keras.src.saving import saving_lib  # load_weights_only: strict, into the built encoder

    if path.endswith(".weights.h5"):
        try:
            saving_lib.load_weights_only(encoder, path)
        except ValueError as e:
            raise FinetuneError(
                f"--init {path} does not fit the model config ({error_line(e)}); pass the config.json "
                f"of the model that wrote it with --config") from None
        except OSError as e:
            raise FinetuneError(f"--init {path} is not a readable .weights.h5 file ({error_line(e)}); "
                                f"pass the pre-training output directory") from None
        return
    if path.endswith(".keras"):
        try:
            # safe_mode: a .keras file that carries Python code (a Lambda layer) is refused.
            saved = keras.saving.load_model(path, compile=False, safe_mode=True)
        except ValueError as e:
            if "safe_mode" in str(e) or "Lambda" in str(e):
                raise FinetuneError(
                    f"--init {path} contains Python code (a Lambda layer), which is never executed; "
                    f"pass a .weights.h5 file or a model directory written by electra_tf") from None
            raise FinetuneError(f"--init {path} is not a model electra_tf can load ({error_line(e)}); "
                                f"pass a .weights.h5 file or a model directory") from None
        source = saved if hasattr(saved, "transformer_layers") else next(
            (l for l in saved.layers if hasattr(l, "transformer_layers")), None)
        if source is None:
            raise FinetuneError(f"{path}: no ElectraEncoder inside the saved model")
        try:
            encoder.set_weights(source.get_weights())
        except ValueError as e:
            raise FinetuneError(f"--init {path} does not fit the model config ({error_line(e)}); pass "
                                f"the config.json of that model with --config") from None
        return
    try:
        names = [n for n, _ in tf.train.list_variables(path)]
    except (tf.errors.OpError, ValueError) as e:
        raise FinetuneError(f"{path}: not a readable TF checkpoint ({error_line(e)}); "
                            f"pass a .weights.h5 file or a run directory") from None
    for key in ("discriminator", "encoder"):
        stored = [n for n in names if n.startswith(key + "/") and n.endswith("VARIABLE_VALUE")
                  and "OPTIMIZER_SLOT" not in n]
        if not stored:
            continue
        # A partial restore would silently leave random layers: demand every variable.
        if len(stored) != len(encoder.weights):
            raise FinetuneError(
                f"{path}: the checkpoint holds {len(stored)} variables under '{key}/' but the encoder has "
                f"{len(encoder.weights)} (Keras 3 layer lists are not tracked by tf.train.Checkpoint); "
                f"save the discriminator as a .weights.h5 file instead")
        tf.train.Checkpoint(**{key: encoder}).read(path).assert_existing_objects_matched()
        return
    raise FinetuneError(f"{path}: no 'discriminator/' or 'encoder/' variables in this checkpoint; "
                        f"pass the pre-training output (or a .weights.h5 of the discriminator encoder)")


# ----------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------

def _glue_data(s: Settings, task, tokenizer, max_seq_length):
    from electra_tf.finetune.tokenization import encode_classification  # imports TensorFlow

    train = glue.load_glue(task, s.data_dir, "train", s.max_train_examples, s.tfds_data_dir)
    if task.double_unordered and s.double_unordered:
        train = glue.double_unordered(train)
    devs = {sp: glue.load_glue(task, s.data_dir, sp, s.max_eval_examples, s.tfds_data_dir)
            for sp in task.dev_splits}

    def encode(examples):
        x = encode_classification(tokenizer, [e.text_a for e in examples],
                                  [e.text_b for e in examples] if task.text_b is not None else None,
                                  max_seq_length)
        if task.is_regression:
            lo, hi = task.regression_range
            y = np.asarray([(e.label - lo) / hi for e in examples], np.float32)  # reference scaling
        else:
            y = np.asarray([task.labels.index(e.label) for e in examples], np.int32)
        return x, y

    return encode(train), {sp: encode(ex) for sp, ex in devs.items()}


def _tagging_files(s: Settings):
    for ext in (".txt", ".conll", ".tsv"):
        train = os.path.join(s.data_dir or "", "train" + ext)
        if os.path.isfile(train):
            return train, os.path.join(s.data_dir, "dev" + ext)
    raise FinetuneError(f"no train.txt / train.conll under --data_dir {s.data_dir!r} for a tagging task")


# ----------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------

def _strategy(name: str):
    import tensorflow as tf  # deferred: see the module docstring

    from electra_tf.training.distribution import mirrored_strategy

    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        # One per process, shared with pre-training and every seed (see there).
        return mirrored_strategy()
    if name == "one_device":
        gpus = tf.config.list_logical_devices("GPU")
        return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    raise FinetuneError(f"unknown --strategy {name!r}; use default, mirrored or one_device")


def _dataset(x: dict, y, batch_size, shuffle_seed=None):
    import tensorflow as tf  # deferred: see the module docstring

    ds = tf.data.Dataset.from_tensor_slices((x, y) if y is not None else (x,))
    if shuffle_seed is not None:
        ds = ds.shuffle(len(next(iter(x.values()))), seed=shuffle_seed, reshuffle_each_iteration=True)
    return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)


def make_optimizer(model, encoder, s: Settings, lr, decay, steps):
    """Fine-tuning's optimizer: the shared `ElectraAdamW` (training/optimization.py).

    Layer-wise learning rates, the reference's warmup + linear decay, and
    --clip_norm applied to the replica-summed gradient, as in pre-training (so
    --strategy mirrored takes the same step as one device). Returns
    (optimizer, {variable path: lr multiplier}).
    """
    from electra_tf.finetune.layerwise_lr import layerwise_lr_multipliers
    from electra_tf.training.optimization import WarmupLinearDecay, adamw

    mult = layerwise_lr_multipliers(model, encoder, decay, s.reference_lr_power)
    schedule = WarmupLinearDecay(lr, int(round(s.warmup_proportion * steps)), steps)
    opt = adamw(schedule, weight_decay=s.weight_decay, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                clip_norm=s.clip_norm or None, lr_multipliers=mult)
    return opt, mult


def _steps(n_train, s: Settings, epochs):
    steps_per_epoch = max(1, math.ceil(n_train / s.batch_size))
    total = max(1, int(round(steps_per_epoch * epochs)))
    if s.max_steps:
        total = min(total, s.max_steps)
    return total, steps_per_epoch


def _write_settings(path: str, fixed: Dict) -> None:
    if not os.path.isfile(path):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        write_json_atomic(path, fixed)


def _progress_callback(total_steps: int, save_every: int, log_every: int, checkpoints):
    """Progress lines every `log_every` steps; a checkpoint every `save_every` steps and
    at the last one; stops at exactly `total_steps`."""
    import keras  # deferred: see the module docstring

    from electra_tf.training.callbacks import current_learning_rate

    class Progress(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            step = int(self.model.optimizer.iterations.numpy())
            if step % log_every == 0 or step >= total_steps:
                loss = float((logs or {}).get("loss", float("nan")))
                print(f"step {step}/{total_steps} loss={loss:.4f} "
                      f"lr={current_learning_rate(self.model.optimizer):.6g}", flush=True)
            if step >= total_steps:
                self.model.stop_training = True

        def on_epoch_end(self, epoch, logs=None):
            step = int(self.model.optimizer.iterations.numpy())
            if (save_every and step % save_every == 0) or step >= total_steps:
                print(f"saved checkpoint {checkpoints.save(self.model, step)}", flush=True)

    return Progress()


def _fit(model, ds_train, total_steps, start_step, s: Settings, checkpoints):
    """Trains from `start_step` to exactly `total_steps` over the repeated dataset.

    Keras epochs are checkpoint intervals; the data skips the `start_step`
    batches already trained on, so a resumed run sees the batches an
    uninterrupted one would.
    """
    if start_step >= total_steps:
        return []
    chunk = s.save_every if s.save_every and s.save_every > 0 else total_steps
    epochs = math.ceil((total_steps - start_step) / chunk)
    callback = _progress_callback(total_steps, s.save_every, max(1, s.log_every), checkpoints)
    hist = model.fit(ds_train.repeat().skip(start_step), epochs=epochs, steps_per_epoch=chunk,
                     verbose=0, callbacks=[callback],
                     shuffle=False)  # the dataset is shuffled already
    return [float(v) for v in hist.history.get("loss", [])]


def run_seed(s: Settings, seed: int, cfg, tokenizer, weights, data, seed_dir, on_ready=None) -> Dict:
    """Fine-tunes and evaluates once.

    Args:
      s: settings (resolved).
      seed: random seed for initialisation, dropout and shuffling.
      cfg: ElectraConfig.
      tokenizer: FinetuneTokenizer.
      weights: pre-trained weights path or None.
      data: prepared data (task-dependent tuple).
      seed_dir: directory for this seed's predictions.
      on_ready: called once the model and its --init weights loaded, before
        anything is written (run_task writes settings.json there).
    """
    import keras  # deferred: see the module docstring

    from electra_tf.finetune.classifier_dir import save_classifier
    from electra_tf.finetune.tasks import ClassifierModel, SquadModel, TaggerModel, build_and_call
    from electra_tf.models import build_encoder
    from electra_tf.training.callbacks import current_learning_rate
    from electra_tf.training.checkpoints import CheckpointError, CheckpointManager

    keras.utils.set_random_seed(seed)
    strategy = _strategy(s.strategy)
    task = s.task
    with strategy.scope():
        encoder = build_encoder(cfg)
        if task in glue.GLUE_TASKS:
            t = glue.GLUE_TASKS[task]
            model = ClassifierModel(encoder, t.num_labels, t.is_regression, cfg.hidden_dropout_prob,
                                    cfg.initializer_range, s.two_layer_head, pooling=s.pooling,
                                    name=f"electra_{task}")
        elif task in SQUAD_TASKS:
            model = SquadModel(encoder, SQUAD_TASKS[task], beam_size=s.n_best_size,
                               initializer_range=cfg.initializer_range, name=f"electra_{task}")
        else:
            model = TaggerModel(encoder, len(data["labels"]), cfg.hidden_dropout_prob,
                                cfg.initializer_range, name="electra_tagger")
        build_and_call(model, s.max_seq_length)
        if weights:
            load_encoder_weights(encoder, weights)
        if task in glue.GLUE_TASKS:
            (x_tr, y_tr) = data["train"]
            n_train = len(y_tr)
        elif task in SQUAD_TASKS:
            x_tr, y_tr = data["train"], None
            n_train = len(x_tr["input_ids"])
        else:
            x_tr, y_tr = data["train"], None
            n_train = len(x_tr["input_ids"])
        total, _ = _steps(n_train, s, s.epochs)
        opt, mult = make_optimizer(model, encoder, s, s.learning_rate, s.layerwise_lr_decay, total)
        if task in glue.GLUE_TASKS:
            t = glue.GLUE_TASKS[task]
            loss = (keras.losses.MeanSquaredError() if t.is_regression
                    else keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            model.compile(optimizer=opt, loss=loss, jit_compile=False)
        else:
            model.compile(optimizer=opt, jit_compile=False)
        # Written only now: a bad --init fails above and leaves no directory behind.
        if on_ready is not None:
            on_ready()
        os.makedirs(seed_dir, exist_ok=True)
        checkpoints = CheckpointManager(os.path.join(seed_dir, CHECKPOINT_DIR), keep=1)
        try:
            resumed = checkpoints.restore_latest(model)
        except CheckpointError as e:
            raise FinetuneError(str(e)) from None
        start_step = 0
        if resumed is not None:
            start_step = resumed[0]
            print(f"resuming seed {seed} from {resumed[1]} at step {start_step} "
                  f"(learning rate {current_learning_rate(opt):.6g})", flush=True)
    ds = _dataset(x_tr, y_tr, s.batch_size, shuffle_seed=seed)
    t0 = time.time()
    try:
        losses = _fit(model, ds, total, start_step, s, checkpoints)
    except CheckpointError as e:
        raise FinetuneError(str(e)) from None
    train_time = time.time() - t0
    result = {"seed": seed, "train_steps": total, "train_examples": n_train,
              "train_seconds": round(train_time, 1), "final_train_loss": losses[-1] if losses else None}
    result.update(_evaluate(model, s, data, seed_dir))
    if task in glue.GLUE_TASKS:
        # Weights + labels (+ the casing the tokenizer used) so `python -m electra_tf.export
        # --kind classifier` can serve it as it was trained.
        t = glue.GLUE_TASKS[task]
        save_classifier(seed_dir, model, cfg, tokenizer.vocab_file, t.labels, task,
                        pair=t.text_b is not None, max_seq_length=s.max_seq_length,
                        regression=t.is_regression, two_layer_head=s.two_layer_head,
                        pooling=s.pooling, do_lower_case=tokenizer.do_lower_case)
    write_json_atomic(os.path.join(seed_dir, "lr_multipliers.json"), mult, indent=1)
    if start_step:
        result["resumed_from_step"] = start_step
    return result


def _evaluate(model, s: Settings, data, seed_dir) -> Dict:
    task = s.task
    if task in glue.GLUE_TASKS:
        t = glue.GLUE_TASKS[task]
        out = {}
        for split, (x, y) in data["dev"].items():
            pred = model.predict(_dataset(x, None, s.eval_batch_size), verbose=0)
            labels = pred if t.is_regression else np.argmax(pred, -1)
            metrics = compute_metrics(t.metrics, y, labels)
            prefix = "" if len(data["dev"]) == 1 else split.replace("dev_", "") + "_"
            out.update({prefix + k: v for k, v in metrics.items()})
            with open(os.path.join(seed_dir, f"{split}_predictions.tsv"), "w") as f:
                f.write("index\tprediction\tlabel\n")
                for i, (p, g) in enumerate(zip(labels, y)):
                    if t.is_regression:  # undo the reference's label scaling
                        lo, hi = t.regression_range
                        f.write(f"{i}\t{p * hi + lo:.4f}\t{g * hi + lo:.4f}\n")
                    else:
                        f.write(f"{i}\t{t.labels[int(p)]}\t{t.labels[int(g)]}\n")
        return out
    if task in SQUAD_TASKS:
        feats, examples, raw = data["dev_features"], data["dev_examples"], data["dev_raw"]
        arrays = squad.features_to_arrays(feats, is_training=False)
        pred = model.predict(_dataset(arrays, None, s.eval_batch_size), verbose=0)
        preds, nbest, null = squad.decode_nbest(
            examples, feats, pred["start_top_log_probs"], pred["start_top_index"],
            pred["end_top_log_probs"], pred["end_top_index"], pred.get("answerable_logit"),
            s.n_best_size, s.max_answer_length)
        kept = {e.qas_id for e in examples}
        raw = _filter_squad(raw, kept)
        write_json_atomic(os.path.join(seed_dir, "predictions.json"), preds, indent=1)
        write_json_atomic(os.path.join(seed_dir, "nbest_predictions.json"), nbest, indent=None)
        if SQUAD_TASKS[task]:
            write_json_atomic(os.path.join(seed_dir, "null_odds.json"), null, indent=None)
            return squad_eval.evaluate_v2(raw, preds, null)
        return squad_eval.evaluate_v1(raw, preds)
    x = data["dev"]
    logits = model.predict(_dataset(x, None, s.eval_batch_size), verbose=0)
    pred_labels = tagging.predictions_to_labels(np.argmax(logits, -1), x["word_index"],
                                                data["dev_sentences"], data["labels"])
    gold = [sent.labels for sent in data["dev_sentences"]]
    with open(os.path.join(seed_dir, "dev_predictions.txt"), "w") as f:
        for sent, pl in zip(data["dev_sentences"], pred_labels):
            f.write("".join(f"{w} {g} {p}\n" for w, g, p in zip(sent.words, sent.labels, pl)) + "\n")
    out = tagging.span_f1(gold, pred_labels, s.tagging_scheme)
    out["accuracy"] = float(np.mean([g == p for gs, ps in zip(gold, pred_labels) for g, p in zip(gs, ps)]))
    return out


def _filter_squad(raw, kept):
    """Keeps only the questions that were featurized (for --max_eval_examples)."""
    out = []
    for article in raw:
        paragraphs = []
        for p in article["paragraphs"]:
            qas = [qa for qa in p["qas"] if qa["id"] in kept]
            if qas:
                paragraphs.append(dict(p, qas=qas))
        if paragraphs:
            out.append(dict(article, paragraphs=paragraphs))
    return out


def prepare_data(s: Settings, tokenizer) -> Dict:
    """Reads and featurizes the task's train and dev data.

    Args:
      s: resolved settings.
      tokenizer: FinetuneTokenizer.
    """
    task = s.task
    if task in glue.GLUE_TASKS:
        train, devs = _glue_data(s, glue.GLUE_TASKS[task], tokenizer, s.max_seq_length)
        return {"train": train, "dev": devs}
    if task in SQUAD_TASKS:
        v2 = SQUAD_TASKS[task]
        suffix = "v2.0" if v2 else "v1.1"
        d = s.data_dir or ""
        train_ex, _ = squad.read_squad(os.path.join(d, f"train-{suffix}.json"), v2, s.max_train_examples)
        dev_ex, dev_raw = squad.read_squad(os.path.join(d, f"dev-{suffix}.json"), v2, s.max_eval_examples,
                                           is_training=False)
        kw = dict(max_seq_length=s.max_seq_length, doc_stride=s.doc_stride, max_query_length=s.max_query_length)
        train_feats = squad.featurize(tokenizer, train_ex, is_training=True, **kw)
        dev_feats = squad.featurize(tokenizer, dev_ex, is_training=False, **kw)
        return {"train": squad.features_to_arrays(train_feats, True), "dev_features": dev_feats,
                "dev_examples": dev_ex, "dev_raw": dev_raw}
    train_path, dev_path = _tagging_files(s)
    train = tagging.read_conll(train_path, max_sentences=s.max_train_examples)
    dev = tagging.read_conll(dev_path, max_sentences=s.max_eval_examples)
    if s.tagging_scheme.upper() == "BIOES":
        for sent in train + dev:
            if not any(l[:2] in ("E-", "S-") for l in sent.labels):
                sent.labels = tagging.bio_to_bioes(sent.labels)
    labels = tagging.build_label_list(train)
    x_tr = tagging.align_labels(tokenizer, train, labels, s.max_seq_length, train_path)
    x_dev = tagging.align_labels(tokenizer, dev, labels, s.max_seq_length, dev_path)
    x_tr.pop("word_index")
    return {"train": x_tr, "dev": x_dev, "dev_sentences": dev, "labels": labels}


def _median(results: List[Dict]) -> Dict[str, float]:
    keys = [k for k, v in results[0].items() if isinstance(v, (int, float)) and k != "seed"]
    return {k: float(statistics.median(r[k] for r in results)) for k in keys}


def format_table(task: str, results: List[Dict], median: Dict[str, float],
                 metric_keys: Sequence[str], scale: float = 100.0) -> str:
    """A plain-text table: one row per seed and a median row.

    Args:
      task: task name (title).
      results: per-seed result dicts.
      median: median of each metric.
      metric_keys: columns to show.
      scale: factor applied to the values (100: fractions shown as percent).
    """
    head = ["seed"] + list(metric_keys)
    rows = [[str(r["seed"])] + [f"{scale * r[k]:.2f}" for k in metric_keys] for r in results]
    rows.append(["median"] + [f"{scale * median[k]:.2f}" for k in metric_keys])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]

    def line(cells):
        return "  ".join(c.rjust(w) for c, w in zip(cells, widths))

    out = [f"{task}: dev results (percent)", line(head), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


def check_numbers(s: Settings) -> None:
    """Refuses numeric settings that cannot train, before any work (one line each)."""
    for name in ("batch_size", "eval_batch_size"):
        value = getattr(s, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise FinetuneError(f"--{name}={value} must be a positive integer")
    for name in ("learning_rate", "epochs"):
        value = getattr(s, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
            shown = f"{value:g}" if isinstance(value, (int, float)) else repr(value)
            raise FinetuneError(f"--{name}={shown} must be a positive number")


def run_task(s: Settings) -> Dict:
    """Resolves defaults, prepares data once, runs every seed, writes results.json.

    Args:
      s: settings from the CLI.

    Returns:
      the results dictionary written to `<output_dir>/results.json`.
    """
    from electra_tf.finetune.tokenization import FinetuneTokenizer  # imports TensorFlow

    if s.task not in ALL_TASKS:
        raise FinetuneError(f"unknown --task {s.task!r}; choose one of {', '.join(ALL_TASKS)}")
    if s.mixed_precision not in ("float32", "mixed_float16", "mixed_bfloat16"):
        raise FinetuneError(f"unknown --mixed_precision {s.mixed_precision!r}; use float32, mixed_float16 or mixed_bfloat16")
    check_numbers(s)
    problem = output_dir_problem(s.output_dir)
    if problem:
        raise FinetuneError(f"cannot write to --output_dir '{s.output_dir}' ({problem}); choose a writable directory")
    weights, config_path, vocab_path = find_init_files(s.init, s.config, s.vocab_file)
    cfg = ElectraConfig.from_json(config_path)
    if s.init == "random":
        # A random encoder is built for the vocabulary it is given, as pre-training does.
        cfg = cfg.for_vocab(vocab_path)
    ref = reference_hparams(cfg.model_size, s.task)
    for key in ("learning_rate", "layerwise_lr_decay", "epochs", "max_seq_length"):
        if getattr(s, key) is None:
            setattr(s, key, ref[key])
    if s.max_seq_length > cfg.max_position_embeddings:
        raise FinetuneError(f"--max_seq_length {s.max_seq_length} exceeds the model's "
                            f"max_position_embeddings {cfg.max_position_embeddings}; lower it")
    if s.do_lower_case is None:
        # The casing the model was pre-trained with (config.json records it); --do_lower_case overrides.
        s.do_lower_case = bool(cfg.do_lower_case)
    tokenizer = FinetuneTokenizer(vocab_path, s.do_lower_case)
    if tokenizer.vocab_size != cfg.vocab_size:
        raise FinetuneError(f"vocab file {vocab_path} has {tokenizer.vocab_size} tokens but the config says "
                            f"vocab_size={cfg.vocab_size}; pass the pre-training vocabulary")
    if s.save_every < 0 or s.log_every < 1:
        raise FinetuneError(f"--save_every={s.save_every} must be >= 0 and --log_every={s.log_every} >= 1")
    fixed = {k: v for k, v in dataclasses.asdict(s).items() if k not in _RESUMABLE_CHANGES}
    settings_path = os.path.join(s.output_dir, SETTINGS_FILE)
    if os.path.isfile(settings_path):
        with open(settings_path, encoding="utf-8") as f:
            before = json.load(f)
        changed = sorted(k for k in set(before) | set(fixed) if before.get(k) != fixed.get(k))
        if changed:
            raise FinetuneError(f"--output_dir {s.output_dir} holds a fine-tuning run with other settings "
                                f"({', '.join(changed)} differ from {settings_path}); re-run with the same "
                                f"flags to resume it, or pass a new --output_dir")
    import keras  # deferred: see the module docstring

    keras.mixed_precision.set_global_policy(s.mixed_precision)
    data = prepare_data(s, tokenizer)
    results = []
    for seed in s.seeds:
        log.info("task %s seed %d", s.task, seed)
        seed_dir = os.path.join(s.output_dir, f"seed_{seed}")
        done_path = os.path.join(seed_dir, RESULT_FILE)
        if os.path.isfile(done_path):
            with open(done_path, encoding="utf-8") as f:
                results.append(json.load(f))
            print(f"seed {seed}: already done ({done_path})", flush=True)
        else:
            results.append(run_seed(s, seed, cfg, tokenizer, weights, data, seed_dir,
                                    on_ready=lambda: _write_settings(settings_path, fixed)))
            write_json_atomic(done_path, results[-1])
        # The seed's outputs are complete: its checkpoints are no longer needed.
        shutil.rmtree(os.path.join(seed_dir, CHECKPOINT_DIR), ignore_errors=True)
    median = _median(results)
    if s.task in glue.GLUE_TASKS:
        t = glue.GLUE_TASKS[s.task]
        keys = [k for k in results[0] if any(k.endswith(m) for m in t.metrics)]
    elif s.task in SQUAD_TASKS:
        keys = ["exact", "f1"] if SQUAD_TASKS[s.task] else ["exact_match", "f1"]
    else:
        keys = ["f1", "precision", "recall"]
    settings = dataclasses.asdict(s)
    settings["seeds"] = list(s.seeds)
    out = {"task": s.task, "init": s.init, "weights": weights, "config": config_path, "vocab_file": vocab_path,
           "model_size": cfg.model_size, "settings": settings, "metrics": keys,
           "seeds": results, "median": median}
    write_json_atomic(os.path.join(s.output_dir, "results.json"), out)
    scale = 1.0 if s.task in SQUAD_TASKS else 100.0  # the SQuAD evaluator reports percent already
    print(format_table(s.task, results, median, keys, scale), flush=True)
    return out
