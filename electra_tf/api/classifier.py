"""`ElectraClassifier`: a pre-trained ELECTRA encoder + a classification head, on raw strings.

Shaped like keras-hub's `TextClassifier`: it takes strings (the preprocessor
runs in the graph), `fit` trains on a `tf.data.Dataset` of (strings, labels),
`predict` answers for a list of strings. It reads every model directory
`finetune --init` reads, and writes the classifier directory fine-tuning
writes, so `export --kind classifier`, `predict` and `Predictor` take what
`save` wrote, and `from_pretrained` takes a fine-tuned `seed_<n>/`.

Example:

>>> import tensorflow as tf
>>> from electra_tf import ElectraClassifier
>>> clf = ElectraClassifier.from_pretrained("runs/default", labels=["negative", "positive"])  # doctest: +SKIP
>>> data = tf.data.Dataset.from_tensor_slices((["great", "awful"], ["positive", "negative"])).batch(2)
>>> clf.fit(data, epochs=1)                              # doctest: +SKIP
>>> clf.predict_labels(["a great film"])                 # doctest: +SKIP
['positive']
>>> clf.save("models/reviews")                           # doctest: +SKIP
"""

from __future__ import annotations

import logging
import math
import os
from typing import List, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from electra_tf.api.model_locator import ApiError, load_encoder, locate
from electra_tf.api.preprocessor import ElectraPreprocessor
from electra_tf.config import ElectraConfig
from electra_tf.fileio import write_text_atomic
from electra_tf.data.normalization import TextNormalization
from electra_tf.models.classifier_model import ClassifierModel, build_and_call
from electra_tf.models.encoder_reinit import reinit_problem, reinit_top_layers as redraw_top_blocks
from electra_tf.keras_compat import load_weights_only
from electra_tf.models import build_encoder
from electra_tf.models.model_folder import VOCAB_FILE, ModelDirError, read_model_recipe, save_classifier
from electra_tf.models.saving import load_encoder_weights
from electra_tf.training.callbacks import StopOnNonFiniteLoss
from electra_tf.training.finetune_optimizer import FinetuneOptimizerSettings, make_optimizer
from electra_tf.training.size_defaults import (OWN_DATA_CPU_EPOCHS, OWN_DATA_EPOCHS, OWN_DATA_MAX_SEQ_LENGTH,
                                               reference_hparams)

log = logging.getLogger(__name__)


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraClassifier(keras.Model):
    """Text classification (or regression) with an ELECTRA encoder, from raw strings.

    Args:
      config: the encoder's `ElectraConfig` (or its dict).
      vocabulary: the WordPiece vocabulary (a token list or a vocab.txt path).
      labels: class names in logit order (default: "0", "1", ... for `num_classes`).
      num_classes: number of classes when `labels` is not given.
      sequence_length: the most word pieces per example.
      do_lower_case: lower-case the text (default: the casing of the text normalisation).
      normalization: the text normalisation (a `TextNormalization` or its JSON
        record; default: the config's, `ElectraConfig.normalization`).
      regression: one output score instead of classes.
      pooling: "cls" or "mean" (see `ClassificationHead`); default: the encoder's own where its
        config records one (an imported sentence-transformers model: mean), else the size's.
      two_layer_head: the Hugging Face two-layer head.
      pair: the model takes (text, second text) pairs (recorded for export).

    Attributes:
      preprocessor: the `ElectraPreprocessor`.
      backbone: the `ElectraEncoder` (as keras-hub's `TextClassifier.backbone`).
      encoder: the same `ElectraEncoder`.
      classifier_model: the encoder + head model (`ClassifierModel`, what fine-tuning trains).
    """

    def __init__(self, config, vocabulary, labels: Optional[Sequence[str]] = None,
                 num_classes: Optional[int] = None, sequence_length: int = 128,
                 do_lower_case: Optional[bool] = None, regression: bool = False, pooling: Optional[str] = None,
                 two_layer_head: bool = False, pair: bool = False, normalization=None, **kwargs):
        super().__init__(**kwargs)
        self.electra_config = config if isinstance(config, ElectraConfig) else ElectraConfig.from_dict(dict(config))
        if regression:
            labels = []
        elif labels is None:
            if not num_classes or num_classes < 2:
                raise ApiError(f"num_classes={num_classes}: pass num_classes >= 2 or labels=[...] (or "
                               f"regression=True)")
            labels = [str(i) for i in range(num_classes)]
        elif num_classes is not None and num_classes != len(labels):
            raise ApiError(f"num_classes={num_classes} but {len(labels)} labels; pass one of them")
        self.label_names: List[str] = [str(label) for label in labels]
        if not regression and len(set(self.label_names)) < 2:
            raise ApiError(f"labels={self.label_names}: a classifier needs at least two distinct labels")
        cfg = self.electra_config
        # The size's defaults, as `finetune --task own_data` uses them (FinetuneTask.reference_hparams).
        # An imported encoder's own read-out (config.json's pooling) wins over the size's.
        self._size_defaults = reference_hparams(cfg.model_size, cfg.pooling, OWN_DATA_EPOCHS, OWN_DATA_CPU_EPOCHS,
                                                OWN_DATA_MAX_SEQ_LENGTH)
        pooling = pooling or self._size_defaults["pooling"]
        self.regression, self.pooling, self.two_layer_head, self.pair = bool(regression), pooling, two_layer_head, pair
        if sequence_length > cfg.max_position_embeddings:
            raise ApiError(f"sequence_length={sequence_length} exceeds the model's max_position_embeddings "
                           f"{cfg.max_position_embeddings}; lower it")
        normalization = (cfg.normalization if normalization is None
                         else TextNormalization.from_json(normalization, "ElectraClassifier(normalization=...)"))
        if do_lower_case is not None and bool(do_lower_case) != normalization.lower_case:
            normalization = TextNormalization.create(bool(do_lower_case), None, normalization.mode)
        self.preprocessor = ElectraPreprocessor(vocabulary, sequence_length, normalization=normalization)
        self.classifier_model = ClassifierModel(
            build_encoder(cfg), 1 if regression else len(self.label_names), regression, cfg.hidden_dropout_prob,
            cfg.initializer_range, two_layer_head, pooling=pooling)
        build_and_call(self.classifier_model, min(8, sequence_length))
        self.built = True
        self.compile()

    @property
    def recommended_batch_size(self) -> int:
        """The training batch `finetune` uses for this model size (16 for an imported encoder, else 32)."""
        return int(self._size_defaults["batch_size"])

    def recommended_epochs(self, steps_per_epoch: int) -> int:
        """The epochs `fit` trains when none are given (with the default optimizer): the size's
        epochs for a labelled file (`finetune --train_file`'s), raised on a small file until they
        give the size's `min_train_steps` (160 for the paper's sizes: 3 epochs of 500 rows are 48
        steps, too few to leave the majority class; electra_tf/training/size_defaults.py)."""
        epochs = int(math.ceil(self._size_defaults["epochs"]))
        floor = int(self._size_defaults["min_train_steps"])
        return max(epochs, -(-floor // max(1, int(steps_per_epoch))))

    @property
    def backbone(self):
        """The `ElectraEncoder` under the head (keras-hub's name for it)."""
        return self.classifier_model.encoder

    @property
    def encoder(self):
        return self.classifier_model.encoder

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_pretrained(cls, path: str, num_classes: Optional[int] = None, labels: Optional[Sequence[str]] = None,
                        sequence_length: Optional[int] = None, reinit_top_layers: Optional[int] = None,
                        **kwargs) -> "ElectraClassifier":
        """An `ElectraClassifier` on the encoder of `path`.

        Args:
          path: a pre-training run directory, its pretrained/ model, a converted
            model directory (a new head), or a fine-tuned seed_<n>/ directory or
            a directory `save` wrote (its head and labels too, unless other
            labels or another num_classes are asked for: then a new head).
          num_classes, labels: the classes of the new head (one of them is needed
            for a pre-trained model).
          sequence_length: default: the fine-tuning length, else 128 (capped by
            the model's positions).
          reinit_top_layers: re-draw the top N Transformer blocks of a pre-trained
            encoder (as `finetune --reinit_top_layers`); default: the model folder's
            `finetune_recipe.json` where it sets one, else 0. That file may also set
            the optimizer's rate and layer-wise decay, the pooling, the batch and the
            step floor that `fit` uses (electra_tf/models/model_folder.py); an
            argument (pooling=...) or your own `compile` overrides them.
          **kwargs: further `ElectraClassifier` arguments (pooling, regression, ...).
        """
        found = locate(path)
        if found.vocab is None:
            raise ApiError(f"{found.model_dir} has no vocab.txt; copy the vocabulary the model was trained with into it")
        meta = found.meta or {}
        same_head = found.fine_tuned and labels in (None, meta.get("labels")) and num_classes in (
            None, meta.get("num_outputs")) and kwargs.get("regression", meta.get("regression")) == meta.get("regression")
        if same_head:
            kwargs = dict({"regression": meta.get("regression", False), "pooling": meta.get("pooling", "cls"),
                           "two_layer_head": meta.get("two_layer_head", False), "pair": meta.get("pair", False),
                           "normalization": found.normalization}, **kwargs)
            labels = meta.get("labels")
        seq = sequence_length or meta.get("max_seq_length") or min(128, found.config.max_position_embeddings)
        kwargs.setdefault("normalization", found.normalization)
        recipe = None
        if not found.fine_tuned:  # a fine-tuned folder carries its own head and settings
            try:
                recipe, note = read_model_recipe(found.model_dir)
            except ModelDirError as e:
                raise ApiError(str(e)) from None
            if note:
                log.warning(note)
        chosen = dict(recipe.settings) if recipe else {}
        if reinit_top_layers is not None:
            chosen["reinit_top_layers"] = reinit_top_layers
        if "pooling" in chosen:
            kwargs.setdefault("pooling", chosen["pooling"])
        n = chosen.get("reinit_top_layers", 0)
        problem = reinit_problem(n, found.config.num_hidden_layers)
        if problem:  # refused before any model is built
            raise ApiError(problem)
        model = cls(found.config, found.vocab, labels=labels, num_classes=num_classes, sequence_length=seq, **kwargs)
        model._size_defaults.update({k: v for k, v in chosen.items() if k in model._size_defaults})
        if same_head:
            load_weights_only(model.classifier_model, found.weights)  # encoder + head, as fine-tuning saved them
        elif found.fine_tuned:
            encoder, _ = load_encoder(found.model_dir)  # the fine-tuned encoder, under a new head
            model.encoder.set_weights(encoder.get_weights())
        else:
            load_encoder_weights(model.encoder, found.weights)
        if n and not same_head:
            redraw_top_blocks(model.encoder, found.config, n)
        if recipe:
            log.info("%s: %s", recipe.path, recipe.why)
        return model

    # ------------------------------------------------------------------ Keras
    # keras-hub's name for it (`Task.from_preset`): the same method, for users who expect that name.
    from_preset = from_pretrained

    def call(self, inputs, training=None):
        features = inputs if isinstance(inputs, dict) else self.preprocessor(inputs)
        return self.classifier_model(features, training=training)

    def compile(self, optimizer="auto", loss="auto", metrics="auto", **kwargs):
        """Keras `compile` with defaults: cross-entropy on logits (MSE for a regression),
        accuracy, no XLA (the tokenizer's ops do not compile), and with `optimizer="auto"`
        the optimizer `finetune` uses, built by `fit` once it knows the number of steps:
        AdamW at the model size's peak rate and layer-wise decay (3e-4 and none for small;
        1e-4 and 0.8 for base; 5e-5 and none for an imported BERT-family encoder; 1e-3 and
        none for tiny / cpu_demo / mini), 10% linear warm-up then linear decay, weight decay 0.01 and
        gradient clipping at 1.0. Batch your dataset as `finetune` would: 32, or 16 for an
        imported encoder (`recommended_batch_size`)."""
        self._auto_optimizer = isinstance(optimizer, str) and optimizer == "auto"
        if self._auto_optimizer:
            # A stand-in until `fit` builds the schedule (predict and evaluate need no optimizer).
            optimizer = keras.optimizers.AdamW(self._size_defaults["learning_rate"])
        if loss == "auto":
            loss = (keras.losses.MeanSquaredError() if self.regression
                    else keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        if metrics == "auto":
            metrics = [] if self.regression else [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
        kwargs.setdefault("jit_compile", False)
        self._compile_args = dict(loss=loss, metrics=metrics, **kwargs)
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def finetune_optimizer(self, train_steps: int):
        """The optimizer `finetune` would use for `train_steps` steps (see `compile`): its
        `make_optimizer` with `finetune`'s defaults and this model size's rate and decay."""
        return make_optimizer(self.classifier_model, self.encoder, FinetuneOptimizerSettings(),
                              self._size_defaults["learning_rate"],
                              self._size_defaults["layerwise_lr_decay"], train_steps)[0]

    @staticmethod
    def _steps_per_epoch(x, y, kwargs) -> Optional[int]:
        if kwargs.get("steps_per_epoch"):
            return int(kwargs["steps_per_epoch"])
        if isinstance(x, tf.data.Dataset):
            n = int(x.cardinality())
            return n if n > 0 else None
        n = len(y) if y is not None else (len(x) if hasattr(x, "__len__") else None)
        return None if n is None else -(-n // int(kwargs.get("batch_size") or 32))

    def _label_ids(self, labels):
        """String labels -> class ids (in the graph); anything else passes through."""
        if labels.dtype != tf.string:
            return labels
        table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(self.label_names), tf.range(len(self.label_names))), -1)
        ids = table.lookup(labels)
        check = tf.debugging.assert_non_negative(ids, message=f"a label is not one of {self.label_names}")
        with tf.control_dependencies([check]):
            return tf.identity(ids)

    def fit(self, x=None, y=None, **kwargs):
        """Keras `fit`; `x` may be a `tf.data.Dataset` of (strings, labels), labels as ids or names.

        With the default optimizer it trains as `finetune` does (see `compile`), the schedule
        spanning `epochs` x the steps per epoch (without `epochs`: `recommended_epochs`, the size's
        epochs raised on a small file to its floor of optimizer steps); a NaN or infinite loss stops
        training with an `ApiError` naming the step.
        """
        if getattr(self, "_auto_optimizer", False):
            steps = self._steps_per_epoch(x, y, kwargs)
            if steps is None:
                raise ApiError("fit() cannot tell how many steps an epoch has (a dataset of unknown length); "
                               "pass steps_per_epoch=, or compile(optimizer=...) with your own")
            if "epochs" not in kwargs:
                kwargs["epochs"] = self.recommended_epochs(steps)
            total = steps * int(kwargs["epochs"]) - steps * int(kwargs.get("initial_epoch", 0))
            super().compile(optimizer=self.finetune_optimizer(max(1, total)), **self._compile_args)
            self._auto_optimizer = False  # a second fit() continues with this optimizer and its schedule
        if isinstance(x, tf.data.Dataset):
            x = x.map(lambda features, labels: (features, self._label_ids(labels)))
            kwargs.setdefault("shuffle", False)  # a dataset is shuffled by its own .shuffle()
        elif y is not None and not self.regression and len(y) and isinstance(y[0], str):
            y = np.asarray([self.label_names.index(label) for label in y], np.int32)
        if x is not None and not isinstance(x, (tf.data.Dataset, dict)) and isinstance(x, (list, tuple)):
            x = tf.constant(list(x), tf.string)
        nan_guard = StopOnNonFiniteLoss()
        kwargs["callbacks"] = [nan_guard] + list(kwargs.get("callbacks") or [])
        history = super().fit(x, y, **kwargs)
        if nan_guard.bad_step is not None:
            raise ApiError(f"the training loss became {nan_guard.bad_value} at step {nan_guard.bad_step}; "
                           f"training stopped; lower the learning rate (compile(optimizer=...)) or check the "
                           f"labels")
        return history

    def predict(self, x, batch_size: int = 64, **kwargs) -> np.ndarray:
        """Class probabilities [n, classes] (scores [n] for a regression) of a list of strings
        (or a `(texts, second_texts)` pair of lists, or a dataset)."""
        if isinstance(x, (list, tuple)) and not (len(x) == 2 and isinstance(x[0], (list, tuple))):
            x = tf.data.Dataset.from_tensor_slices(tf.constant(list(x), tf.string)).batch(batch_size)
        elif isinstance(x, tuple):
            pairs = tf.data.Dataset.from_tensor_slices(tuple(tf.constant(list(t), tf.string) for t in x))
            # ((first, second),): Keras reads a 2-tuple element as (x, y).
            x = pairs.batch(batch_size).map(lambda first, second: ((first, second),))
        kwargs.setdefault("verbose", 0)
        out = super().predict(x, **kwargs)
        return out if self.regression else tf.nn.softmax(out, -1).numpy()

    def predict_labels(self, x, batch_size: int = 64) -> List[str]:
        """The predicted class name of every text."""
        if self.regression:
            raise ApiError("predict_labels() is for classes; a regression's predict() returns the scores")
        return [self.label_names[i] for i in np.argmax(self.predict(x, batch_size), -1)]

    # ------------------------------------------------------------------ saving
    def save(self, path: str, **kwargs) -> str:
        """Writes a classifier directory (config.json, vocab.txt, classifier.weights.h5,
        classifier.json): the layout fine-tuning writes, read back by `from_pretrained`,
        `export --kind classifier` and `predict`. A path ending in .keras is Keras' own format."""
        if path.endswith(".keras"):
            return super().save(path, **kwargs)
        os.makedirs(path, exist_ok=True)
        vocab = os.path.join(path, VOCAB_FILE)
        write_text_atomic(vocab, "".join(token + "\n" for token in self.preprocessor.vocabulary))
        save_classifier(path, self.classifier_model, self.electra_config, vocab, self.label_names, "electra_classifier",
                        pair=self.pair, max_seq_length=self.preprocessor.sequence_length, regression=self.regression,
                        two_layer_head=self.two_layer_head, pooling=self.pooling,
                        do_lower_case=self.preprocessor.do_lower_case, normalization=self.preprocessor.normalization)
        return path

    def get_config(self) -> dict:
        return {"name": self.name, "config": self.electra_config.to_dict(),
                "vocabulary": list(self.preprocessor.vocabulary), "labels": list(self.label_names),
                "sequence_length": self.preprocessor.sequence_length,
                "normalization": self.preprocessor.normalization.to_json(), "regression": self.regression,
                "pooling": self.pooling, "two_layer_head": self.two_layer_head, "pair": self.pair}

    @classmethod
    def from_config(cls, config: dict) -> "ElectraClassifier":
        return cls(**config)

