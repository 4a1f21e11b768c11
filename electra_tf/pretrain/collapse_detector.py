"""Pre-training's own check in the training loop: the discriminator collapse detector.

The trainer (`electra_tf.training.trainer`) calls it at every progress line with
that window's metrics; the warning it returns is printed once.
"""

from __future__ import annotations

from typing import Optional, Tuple


class DiscriminatorCollapseDetector:
    """Notices a discriminator that learned and then fell back to the prior.

    Seen on small models when the generator reaches the unigram distribution
    while the learning rate is high (docs/pretraining.md, "Discriminator
    collapse"): the discriminator then predicts "original" everywhere (no
    positive prediction, AUC near 0.5, loss = entropy of the replaced fraction)
    and did not recover in our runs; its encoder fine-tuned worse than a random
    one. `update` returns one warning line the first time that happens.

    Args:
      learned_auc: the AUC that shows the discriminator had learned something.
      collapsed_auc: below this (with no positive prediction) it has collapsed.
    """

    def __init__(self, learned_auc: float = 0.7, collapsed_auc: float = 0.6):
        self.learned_auc = learned_auc
        self.collapsed_auc = collapsed_auc
        self.best: Optional[Tuple[float, int]] = None
        self.warned = False

    def update(self, step: int, logs: dict) -> Optional[str]:
        auc = logs.get("disc_auc")
        if auc is None or self.warned:
            return None
        if self.best is None or auc > self.best[0]:
            self.best = (auc, step)
        if (self.best[0] >= self.learned_auc and auc < self.collapsed_auc
                and logs.get("disc_precision", 1.0) == 0.0 and logs.get("disc_recall", 1.0) == 0.0):
            self.warned = True
            return (f"warning: step {step}: the discriminator collapsed to the prior (disc_auc "
                    f"{auc:.3f} after {self.best[0]:.3f} at step {self.best[1]}; it predicts no "
                    f"replaced token); such runs did not recover here: restart with "
                    f"--override temperature=2 (samples the discriminator can still tell apart "
                    f"while it learns context; docs/pretraining.md)")
        return None
