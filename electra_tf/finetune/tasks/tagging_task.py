"""CoNLL-style token tagging (NER, chunking, POS) as a `FinetuneTask`.

Data and span scoring come from `tagging_data.py`; the model is `TaggerModel`,
whose `compute_loss` reads the labels (on each word's first piece) from the
features. The tag set is the training file's, so it is known only once the
data are read: `build_model` sizes the head from `TaskData.dev.labels`.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, Optional, Tuple

import keras
import numpy as np

from electra_tf.finetune.readers import tagging_data
from electra_tf.finetune.tasks.base_task import FinetuneTask, TaskData
from electra_tf.finetune.settings import FinetuneError, Settings
from electra_tf.models.tagger_model import TaggerModel

# --task names of the tagging family; they differ only in the files under --data_dir.
TAGGING_NAMES = ("tagging", "ner", "chunk", "pos")


@dataclasses.dataclass
class TaggingDev:
    """What evaluation needs besides the model: `TaskData.dev` of a tagging task.

    Attributes:
      x: the dev features, `word_index` among them.
      sentences: the dev sentences (words and gold labels).
      labels: the tag set, in class-id order.
    """
    x: Dict[str, np.ndarray]
    sentences: List[tagging_data.TaggedSentence]
    labels: List[str]


def conll_files(data_dir) -> Tuple[str, str]:
    """(train file, dev file) under --data_dir: train/dev with .txt, .conll or .tsv."""
    for ext in (".txt", ".conll", ".tsv"):
        train = os.path.join(data_dir or "", "train" + ext)
        if os.path.isfile(train):
            return train, os.path.join(data_dir, "dev" + ext)
    raise FinetuneError(f"no train.txt / train.conll under --data_dir {data_dir!r} for a tagging task")


class TaggingFinetuneTask(FinetuneTask):
    """Tag every word; scored by span F1 under --tagging_scheme (BIO or BIOES).

    Args:
      name: the --task name (tagging, ner, chunk or pos).
    """

    reference_max_seq_length = 256  # the reference's "chunk"

    def data_files(self, s: Settings) -> Dict[str, Optional[str]]:
        train_path, dev_path = conll_files(s.data_dir)
        return {f"--data_dir:{os.path.basename(train_path)}": train_path,
                f"--data_dir:{os.path.basename(dev_path)}": dev_path}

    def prepare_data(self, s: Settings, tokenizer) -> TaskData:
        train_path, dev_path = conll_files(s.data_dir)
        train = tagging_data.read_conll(train_path, max_sentences=s.max_train_examples)
        dev = tagging_data.read_conll(dev_path, max_sentences=s.max_eval_examples)
        if s.tagging_scheme.upper() == "BIOES":
            for sent in train + dev:
                # Files already in BIOES are kept; BIO ones are converted.
                if not any(l[:2] in ("E-", "S-") for l in sent.labels):
                    sent.labels = tagging_data.bio_to_bioes(sent.labels)
        labels = tagging_data.build_label_list(train)
        x_tr = tagging_data.align_labels(tokenizer, train, labels, s.max_seq_length, train_path)
        x_dev = tagging_data.align_labels(tokenizer, dev, labels, s.max_seq_length, dev_path)
        x_tr.pop("word_index")  # only evaluation maps pieces back to words
        return TaskData(x_tr, None, TaggingDev(x_dev, dev, labels))

    def build_model(self, encoder, config, s: Settings, data: TaskData) -> keras.Model:
        return TaggerModel(encoder, len(data.dev.labels), config.hidden_dropout_prob,
                           config.initializer_range, name="electra_tagger")

    def evaluate(self, model, s: Settings, data: TaskData, seed_dir: str) -> Dict[str, float]:
        dev: TaggingDev = data.dev
        logits = self.predict(model, dev.x, s)
        pred_labels = tagging_data.predictions_to_labels(np.argmax(logits, -1), dev.x["word_index"],
                                                         dev.sentences, dev.labels)
        gold = [sent.labels for sent in dev.sentences]
        with open(os.path.join(seed_dir, "dev_predictions.txt"), "w") as f:
            for sent, pl in zip(dev.sentences, pred_labels):
                f.write("".join(f"{w} {g} {p}\n" for w, g, p in zip(sent.words, sent.labels, pl)) + "\n")
        out = tagging_data.span_f1(gold, pred_labels, s.tagging_scheme)
        out["accuracy"] = float(np.mean([g == p for gs, ps in zip(gold, pred_labels)
                                         for g, p in zip(gs, ps)]))
        return out

    def metric_keys(self, result: Dict) -> List[str]:
        return ["f1", "precision", "recall"]
