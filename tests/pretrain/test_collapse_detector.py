"""The discriminator-collapse warning, on the metric sequences of real runs."""

from electra_tf.pretrain.collapse_detector import DiscriminatorCollapseDetector


def _logs(auc, precision, recall=None):
    return {"disc_auc": auc, "disc_precision": precision,
            "disc_recall": precision if recall is None else recall}


def test_warns_once_when_a_learned_discriminator_falls_back_to_the_prior():
    # docs/finetune.md run A: 0.81 at step 200, 0.54 with no positive prediction from step 300.
    detector = DiscriminatorCollapseDetector()
    assert detector.update(100, _logs(0.50, 0.0)) is None  # not learned yet: no warning
    assert detector.update(200, _logs(0.81, 0.31)) is None
    warning = detector.update(300, _logs(0.54, 0.0))
    assert warning.startswith("warning: step 300: the discriminator collapsed to the prior")
    assert "0.540 after 0.810 at step 200" in warning and "temperature=2" in warning
    assert detector.update(400, _logs(0.53, 0.0)) is None  # once


def test_no_warning_for_healthy_or_merely_weaker_runs():
    detector = DiscriminatorCollapseDetector()
    # A run that starts at chance and never learns is not a collapse.
    for step in range(100, 600, 100):
        assert detector.update(step, _logs(0.52, 0.0)) is None
    # Run C: AUC 0.86-0.87 throughout; a harder generator lowering AUC to 0.65
    # while the discriminator still predicts replaced tokens is not a collapse either.
    detector = DiscriminatorCollapseDetector()
    for step, auc, precision in [(300, 0.86, 0.4), (600, 0.87, 0.5), (900, 0.65, 0.2),
                                 (1000, 0.58, 0.1)]:
        assert detector.update(step, _logs(auc, precision)) is None
    # MLM-only logs have no discriminator metrics.
    assert DiscriminatorCollapseDetector().update(100, {"loss": 3.0}) is None


def test_logged_train_metrics_are_windowed_over_log_every_steps(tmp_path):
    """Each log line covers the steps since the previous one, not the Keras epoch."""
    import keras
    import numpy as np
    import tensorflow as tf

    from electra_tf.training.checkpoints import CheckpointManager
    from electra_tf.training.callbacks import TrainingCallback

    class Counting(keras.Model):
        # disc_auc is the mean of the optimizer step numbers 1, 2, 3, ... of the window.
        def __init__(self):
            super().__init__()
            self.w = self.add_weight(shape=(), initializer="zeros", name="w")
            self.auc = keras.metrics.Mean(name="disc_auc")

        @property
        def metrics(self):
            return [self.auc]

        def train_step(self, data):
            self.optimizer.apply_gradients([(tf.constant(0.0), self.w)])
            self.auc.update_state(tf.cast(self.optimizer.iterations, tf.float32))
            return {"disc_auc": self.auc.result()}

    model = Counting()
    model.compile(optimizer=keras.optimizers.SGD(0.0))
    lines = []
    callback = TrainingCallback(CheckpointManager(str(tmp_path / "ckpt")), train_steps=12,
                                 global_batch_size=1, save_every=12, eval_every=12,
                                 log_every=4, print_fn=lines.append)
    data = tf.data.Dataset.from_tensors(np.zeros((1,), np.float32)).repeat()
    model.fit(data, steps_per_epoch=12, epochs=1, callbacks=[callback], verbose=0, shuffle=False)
    logged = [float(line.split("disc_auc=")[1].split()[0]) for line in lines
              if line.startswith("step ")]
    # Windows 1-4, 5-8, 9-12 (one Keras epoch of 12 steps): means 2.5, 6.5, 10.5;
    # cumulative values would read 2.5, 4.5, 6.5.
    np.testing.assert_allclose(logged, [2.5, 6.5, 10.5])
