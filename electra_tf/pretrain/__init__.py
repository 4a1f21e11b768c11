"""Pre-training ELECTRA: ``python -m electra_tf.pretrain`` (see docs/pretraining.md).

Layout:
  __main__.py       the command line: flags and main only
  run.py            the job: `run_pretraining(PretrainOptions)`
  options.py        `PretrainOptions`, `PretrainError`, the checks -> `RunPlan`
  data_setup.py, fit_driver.py, run_summary.py
                    the job's data, its `model.fit` and its final model directory
  pretrainer.py     `ElectraPretrainer`: the Keras model with the custom train step
  optimization.py   `create_optimizer`: AdamW and schedule from an `ElectraConfig`
  callbacks.py, metrics.py, embedding_sharing.py, saving.py
                    logging and checkpoints, metrics,
                    GDES embedding sharing, rebuilding a saved pre-trainer
"""

from electra_tf.pretrain.optimization import create_optimizer
from electra_tf.pretrain.metrics import METRIC_NAMES, metric_names
from electra_tf.pretrain.pretrainer import ElectraPretrainer
