"""`ConfigFields`: layers whose constructor arguments are their Keras config."""

import keras


class ConfigFields:
    """Mixin for a Keras layer that stores its constructor arguments as its config.

    A layer lists the arguments in `CONFIG_FIELDS` (those holding a layer in
    `LAYER_FIELDS`, serialized as nested configs), calls
    `self.set_config_fields(locals())` in `__init__` after `super().__init__`,
    and gets `get_config` for free: one list, so the stored attributes and the
    config cannot drift apart. Put it before `keras.layers.Layer` in the bases.
    """

    CONFIG_FIELDS: tuple = ()
    LAYER_FIELDS: tuple = ()

    def set_config_fields(self, arguments: dict) -> None:
        """Sets `self.<field>` for every field from `arguments` (e.g. `locals()`)."""
        for name in self.CONFIG_FIELDS:
            value = arguments[name]
            if name in self.LAYER_FIELDS and isinstance(value, dict):
                value = keras.layers.deserialize(value)  # from a saved config
            setattr(self, name, value)

    def get_config(self):
        config = super().get_config()
        for name in self.CONFIG_FIELDS:
            value = getattr(self, name)
            config[name] = keras.layers.serialize(value) if name in self.LAYER_FIELDS else value
        return config
