"""One MirroredStrategy per device set and process (a second one aborts collectives)."""

from electra_tf.training import distribution


def test_default_and_explicit_devices_share_one_strategy(mirrored_strategy):
    # The fixture passes the devices explicitly; fine-tuning asks with no
    # argument, pre-training through create_strategy: all must be one object.
    devices = distribution.mirrored_devices()
    assert distribution.mirrored_strategy(None) is mirrored_strategy
    assert distribution.mirrored_strategy(list(devices)) is mirrored_strategy
    assert distribution.create_strategy("mirrored")[0] is mirrored_strategy
