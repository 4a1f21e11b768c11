"""The objective registry agrees with the config's name lists, and unknown names fail clearly."""

import pytest

from electra_tf.config import GENERATOR_OBJECTIVES, OBJECTIVES
from electra_tf.objectives.base import NETWORKS, Objective
from electra_tf.objectives.objective_registry import REGISTRY, get_objective


def test_every_config_objective_has_a_class_and_consistent_networks():
    assert set(REGISTRY) == set(OBJECTIVES)
    for name, cls in REGISTRY.items():
        assert issubclass(cls, Objective) and cls.name == name
        assert set(cls.networks) <= set(NETWORKS), name
        # config validates embedding_sharing=gdes (it needs a generator) from this list.
        assert ("generator" in cls.networks) == (name in GENERATOR_OBJECTIVES), name


def test_unknown_objective_names_the_choices():
    with pytest.raises(ValueError, match="unknown objective 'bert'; choose one of electra, mlm"):
        get_objective("bert")
