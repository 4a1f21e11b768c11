"""Pre-training ELECTRA: ``python -m electra_tf.pretrain`` (see docs/pretraining.md).

Layout:
  __main__.py       the command line: flags and main only
  pretrain_job.py   the job: `run_pretraining(PretrainOptions)`
  options.py        `PretrainOptions`, `PretrainError`, the checks -> `RunPlan`
  data_setup.py, run_summary.py
                    the job's data and its final model directory (it trains with
                    the one loop, electra_tf.training.trainer)
  pretrainer.py     `ElectraPretrainer`: the custom train step on the networks of
                    electra_tf.models.pretraining_model (their embedding sharing too)
  pretrain_optimizer.py `create_optimizer`: AdamW and schedule from an `ElectraConfig`
  collapse_detector.py, pretrain_metrics.py, pretrainer_loading.py
                    the job's check in the loop, metrics, rebuilding a saved pre-trainer
"""

from electra_tf.pretrain.pretrain_optimizer import create_optimizer
from electra_tf.pretrain.pretrain_metrics import METRIC_NAMES, metric_names
from electra_tf.pretrain.pretrainer import ElectraPretrainer
