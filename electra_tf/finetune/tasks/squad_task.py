"""SQuAD 1.1 / 2.0 extractive question answering as a `FinetuneTask`.

Data and answer decoding come from `squad_data.py`, scoring from `squad_eval.py`
(the official evaluators); the model is `SquadModel`, whose `compute_loss`
reads the gold spans from the features.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, Optional, Sequence

import keras

from electra_tf.fileio import write_json_atomic
from electra_tf.finetune.readers import squad_data
from electra_tf.finetune.tasks import squad_eval
from electra_tf.finetune.tasks.base_task import FinetuneTask, TaskData
from electra_tf.finetune.settings import Settings
from electra_tf.models.squad_model import SquadModel

# --task name -> SQuAD 2.0 (questions may have no answer).
SQUAD_VERSIONS = {"squad": False, "squad1": False, "squad2": True}


@dataclasses.dataclass
class SquadDev:
    """What evaluation needs besides the model: `TaskData.dev` of a SQuAD task.

    Attributes:
      features: the dev windows (`squad_data.SquadFeature`).
      examples: the dev questions that were featurized.
      raw: the dev file's `data` list (the official evaluator's input).
    """
    features: List[squad_data.SquadFeature]
    examples: List[squad_data.SquadExample]
    raw: List[dict]


class SquadFinetuneTask(FinetuneTask):
    """SQuAD: predict the answer span in the context (and, for 2.0, whether there is one).

    Reads `train-v1.1.json` / `dev-v1.1.json` (or `-v2.0`) from --data_dir.

    Args:
      name: the --task name (squad, squad1 or squad2).
      version_2: SQuAD 2.0 (unanswerable questions, an answerability head).
    """

    reference_epochs = 2.0
    reference_max_seq_length = 512
    table_scale = 1.0  # the SQuAD evaluator reports percent already

    def __init__(self, name: str, version_2: bool):
        super().__init__(name)
        self.version_2 = version_2

    def data_files(self, s: Settings) -> Dict[str, Optional[str]]:
        suffix = "v2.0" if self.version_2 else "v1.1"
        return {f"--data_dir:{split}-{suffix}.json": os.path.join(s.data_dir or "", f"{split}-{suffix}.json")
                for split in ("train", "dev")}

    def prepare_data(self, s: Settings, tokenizer) -> TaskData:
        train_path, dev_path = self.data_files(s).values()  # the files the resumption check hashed
        train_ex, _ = squad_data.read_squad(train_path, self.version_2, s.max_train_examples)
        dev_ex, dev_raw = squad_data.read_squad(dev_path, self.version_2, s.max_eval_examples, is_training=False)
        kw = dict(max_seq_length=s.max_seq_length, doc_stride=s.doc_stride, max_query_length=s.max_query_length)
        train_feats = squad_data.featurize(tokenizer, train_ex, is_training=True, **kw)
        dev_feats = squad_data.featurize(tokenizer, dev_ex, is_training=False, **kw)
        return TaskData(squad_data.features_to_arrays(train_feats, True), None,
                        SquadDev(dev_feats, dev_ex, dev_raw))

    def build_model(self, encoder, config, s: Settings, data: TaskData) -> keras.Model:
        return SquadModel(encoder, self.version_2, beam_size=s.n_best_size,
                          initializer_range=config.initializer_range, name=f"electra_{self.name}")

    def evaluate(self, model, s: Settings, data: TaskData, seed_dir: str) -> Dict[str, float]:
        dev: SquadDev = data.dev
        pred = self.predict(model, squad_data.features_to_arrays(dev.features, is_training=False), s)
        preds, nbest, null = squad_data.decode_nbest(
            dev.examples, dev.features, pred["start_top_log_probs"], pred["start_top_index"],
            pred["end_top_log_probs"], pred["end_top_index"], pred.get("answerable_logit"),
            s.n_best_size, s.max_answer_length)
        raw = filter_squad(dev.raw, {e.qas_id for e in dev.examples})
        write_json_atomic(os.path.join(seed_dir, "predictions.json"), preds, indent=1)
        write_json_atomic(os.path.join(seed_dir, "nbest_predictions.json"), nbest, indent=None)
        if self.version_2:
            write_json_atomic(os.path.join(seed_dir, "null_odds.json"), null, indent=None)
            return squad_eval.evaluate_v2(raw, preds, null)
        return squad_eval.evaluate_v1(raw, preds)

    def metric_keys(self, result: Dict) -> List[str]:
        return ["exact", "f1"] if self.version_2 else ["exact_match", "f1"]


def filter_squad(raw: Sequence[dict], kept) -> List[dict]:
    """Keeps only the questions that were featurized (for --max_eval_examples).

    Args:
      raw: a SQuAD file's `data` list.
      kept: the question ids to keep.
    """
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
