"""The pre-training model (custom train_step) and its optimiser."""

from electra_tf.pretraining.optimization import ElectraAdamW, WarmupPolynomialDecay, create_optimizer
from electra_tf.pretraining.pretrainer import METRIC_NAMES, ElectraPretrainer, metric_names
