"""The objective registry agrees with the config's name lists, and unknown names fail clearly."""

import pytest

from electra_tf.config import GENERATOR_OBJECTIVES, MLM_OBJECTIVES, OBJECTIVES
from electra_tf.objectives.base import NETWORKS, Objective
from electra_tf.objectives.registry import REGISTRY, get_objective


def test_every_config_objective_has_a_class_and_consistent_networks():
    assert set(REGISTRY) == set(OBJECTIVES)
    for name, cls in REGISTRY.items():
        assert issubclass(cls, Objective) and cls.name == name
        assert set(cls.networks) <= set(NETWORKS), name
        # config/saving decide the model directory's files from these lists.
        assert ("generator" in cls.networks) == (name in GENERATOR_OBJECTIVES), name
        if name in MLM_OBJECTIVES:
            assert "discriminator_head" not in cls.networks and "mlm_head" in cls.networks


def test_unknown_objective_names_the_choices():
    with pytest.raises(ValueError, match="unknown objective 'bert'; choose one of electra, mlm"):
        get_objective("bert")
