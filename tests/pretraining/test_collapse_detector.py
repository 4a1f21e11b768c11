"""The discriminator-collapse warning, on the metric sequences of real runs."""

from electra_tf.pretraining.callbacks import DiscriminatorCollapseDetector


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
    assert "0.540 after 0.810 at step 200" in warning and "learning_rate" in warning
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
