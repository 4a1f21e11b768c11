"""name -> objective class, for the config field `objective`.

Adding an objective: its module in this package and one line below (and its
name in `electra_tf.config.OBJECTIVES`).
"""

from electra_tf.objectives.adversarial import Adversarial
from electra_tf.objectives.all_tokens_mlm import AllTokensMlm
from electra_tf.objectives.electra import Electra
from electra_tf.objectives.electra_15 import Electra15
from electra_tf.objectives.electric import Electric
from electra_tf.objectives.mlm import Mlm
from electra_tf.objectives.replace_mlm import ReplaceMlm
from electra_tf.objectives.two_stage import TwoStage

REGISTRY = {cls.name: cls for cls in (
    Electra,
    Mlm,
    Electra15,
    ReplaceMlm,
    AllTokensMlm,
    TwoStage,
    Adversarial,
    Electric,
)}


def get_objective(name):
    """The `Objective` class registered under `name`.

    Args:
        name: a config `objective` value, e.g. "electra".
    """
    if name not in REGISTRY:
        raise ValueError(f"unknown objective {name!r}; choose one of {', '.join(REGISTRY)}")
    return REGISTRY[name]
