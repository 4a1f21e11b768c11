"""GLUE classification and regression as a `FinetuneTask` (cola, sst2, ..., stsb).

Data come from `glue_data.py` (TSV files or tfds); the model is `ClassifierModel`.
The trained classifier is saved with its labels and casing (`model_folder.save_classifier`)
so `python -m electra_tf.export --kind classifier` serves it as trained.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence, Tuple

import keras
import numpy as np

from electra_tf.finetune.readers import glue_data
from electra_tf.finetune.tasks.base_task import FinetuneTask, TaskData
from electra_tf.models.model_folder import save_classifier
from electra_tf.finetune.tasks.task_metrics import compute_metrics
from electra_tf.finetune.settings import Settings
from electra_tf.models.classifier_model import ClassifierModel
from electra_tf.finetune.readers.tokenization import encode_classification


class GlueFinetuneTask(FinetuneTask):
    """A GLUE task: sentence (pair) classification, or regression for STS-B.

    `TaskData.dev` is {dev split: (features, labels)}; MNLI has two splits,
    whose metrics are prefixed with the split (matched_accuracy, ...).

    Args:
      spec: the task's static description (`glue_data.GLUE_TASKS[name]`).
    """

    pads_to_longest = True  # one label per text: batches cut to their longest text
    pools = True  # a sentence vector feeds the head (--pooling)

    def __init__(self, spec: glue_data.GlueSpec):
        super().__init__(spec.name)
        self.spec = spec
        self.reference_epochs = spec.epochs
        self.cpu_epochs = max(10.0, spec.epochs)  # a CPU-sized encoder learns a GLUE task from few rows slowly

    def data_files(self, s: Settings) -> Dict[str, Optional[str]]:
        if not s.data_dir:
            return {}  # tfds: its own versioned files
        folder = glue_data.task_dir(self.spec, s.data_dir)
        return {f"--data_dir:{split}.tsv": os.path.join(folder, split + ".tsv")
                for split in ("train",) + tuple(self.spec.dev_splits)}

    def prepare_data(self, s: Settings, tokenizer) -> TaskData:
        spec = self.spec
        # Every file is read before any is encoded: a bad row is reported before the slow part.
        train = glue_data.load_glue(spec, s.data_dir, "train", s.max_train_examples, s.tfds_data_dir)
        if spec.double_unordered and s.double_unordered:
            train = glue_data.double_unordered(train)
        devs = {split: glue_data.load_glue(spec, s.data_dir, split, s.max_eval_examples, s.tfds_data_dir)
                for split in spec.dev_splits}
        x, y = self._encode(train, tokenizer, s.max_seq_length)
        return TaskData(x, y, {split: self._encode(ex, tokenizer, s.max_seq_length)
                               for split, ex in devs.items()})

    def _encode(self, examples: Sequence[glue_data.Example], tokenizer,
                max_seq_length: int) -> Tuple[Dict[str, np.ndarray], np.ndarray]:
        spec = self.spec
        x = encode_classification(tokenizer, [e.text_a for e in examples],
                                  [e.text_b for e in examples] if spec.text_b is not None else None,
                                  max_seq_length)
        if spec.is_regression:
            lo, hi = spec.regression_range
            y = np.asarray([(e.label - lo) / hi for e in examples], np.float32)  # reference scaling
        else:
            y = np.asarray([spec.labels.index(e.label) for e in examples], np.int32)
        return x, y

    def build_model(self, encoder, config, s: Settings, data: TaskData) -> keras.Model:
        return ClassifierModel(encoder, self.spec.num_labels, self.spec.is_regression,
                               config.hidden_dropout_prob, config.initializer_range, s.two_layer_head,
                               pooling=s.pooling, name=f"electra_{self.name}")

    def loss(self) -> keras.losses.Loss:
        if self.spec.is_regression:
            return keras.losses.MeanSquaredError()
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def evaluate(self, model, s: Settings, data: TaskData, seed_dir: str) -> Dict[str, float]:
        spec = self.spec
        out = {}
        for split, (x, y) in data.dev.items():
            pred = self.predict(model, x, s)
            labels = pred if spec.is_regression else np.argmax(pred, -1)
            metrics = compute_metrics(spec.metrics, y, labels)
            prefix = "" if len(data.dev) == 1 else split.replace("dev_", "") + "_"
            out.update({prefix + k: v for k, v in metrics.items()})
            self._write_predictions(os.path.join(seed_dir, f"{split}_predictions.tsv"), labels, y)
        return out

    def _write_predictions(self, path: str, predicted, gold) -> None:
        spec = self.spec
        with open(path, "w") as f:
            f.write("index\tprediction\tlabel\n")
            for i, (p, g) in enumerate(zip(predicted, gold)):
                if spec.is_regression:  # undo the reference's label scaling
                    lo, hi = spec.regression_range
                    f.write(f"{i}\t{p * hi + lo:.4f}\t{g * hi + lo:.4f}\n")
                else:
                    f.write(f"{i}\t{spec.labels[int(p)]}\t{spec.labels[int(g)]}\n")

    def metric_keys(self, result: Dict) -> List[str]:
        return [k for k in result if any(k.endswith(m) for m in self.spec.metrics)]

    def save_for_export(self, seed_dir: str, model, config, tokenizer, s: Settings) -> str:
        # Weights + labels (+ the casing the tokenizer used) so `python -m electra_tf.export
        # --kind classifier` can serve it as it was trained.
        spec = self.spec
        save_classifier(seed_dir, model, config, tokenizer.vocab_file, spec.labels, self.name,
                        pair=spec.text_b is not None, max_seq_length=s.max_seq_length,
                        regression=spec.is_regression, two_layer_head=s.two_layer_head,
                        pooling=s.pooling, do_lower_case=tokenizer.do_lower_case,
                        normalization=tokenizer.normalization)
        return seed_dir
