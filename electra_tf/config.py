"""Every ELECTRA knob in one place, with the reference defaults beside it.

The defaults follow google-research/electra `configure_pretraining.py` and the
paper's Table 6 (ELECTRA-Small). Sizes for other models live in `configs/*.json`.

Example:

>>> from electra_tf.config import ElectraConfig
>>> cfg = ElectraConfig.from_json("configs/tiny.json")
>>> cfg.generator_hidden_dim, cfg.predictions_per_seq
(32, 9)
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any, Optional

from electra_tf.data.data_errors import DataError
from electra_tf.data.normalization import TextNormalization, from_record
from electra_tf.data.vocab import load_vocab
from electra_tf.errors import ElectraError
from electra_tf.paths import config_names, resolve_config


class ConfigError(ElectraError, ValueError):
    """A config file or override that cannot describe a valid ELECTRA model."""


# Pre-training objectives (ELECTRA paper, Table 5 and Section 3.2); see
# docs/pretraining.md "Objectives" for what each trains and which network is
# the one to fine-tune (always the full-size encoder, saved as
# discriminator.weights.h5).
OBJECTIVES = ("electra", "mlm", "electra_15", "replace_mlm", "all_tokens_mlm", "two_stage",
              "adversarial", "electric")
# Objectives that use the small generator network.
GENERATOR_OBJECTIVES = ("electra", "electra_15", "replace_mlm", "all_tokens_mlm", "two_stage",
                        "adversarial", "electric")
# How the generator and the full-size network share embeddings (field
# `embedding_sharing`; docs/pretraining.md): one layer, none, or DeBERTa-v3's
# gradient-disentangled sharing.
EMBEDDING_SHARING = ("shared", "none", "gdes")


def _whole(value) -> bool:
    """An int that is not a bool (JSON true is no count)."""
    return isinstance(value, int) and not isinstance(value, bool)


_POSITIVE_INT_FIELDS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                        "intermediate_size", "max_position_embeddings", "type_vocab_size", "max_seq_length",
                        "train_batch_size", "eval_batch_size", "num_train_steps")
_NON_NEGATIVE_FIELDS = ("gen_weight", "disc_weight", "weight_decay_rate", "clip_norm", "adam_epsilon")

# What a valid ElectraConfig satisfies: (field, test of the config, the fix its error names: text, or a
# function of the config). Checked in this order: a config with several faults is refused for the first.
FIELD_RULES = (
    *((name, lambda c, name=name: _whole(getattr(c, name)) and getattr(c, name) > 0, "use a positive integer")
      for name in _POSITIVE_INT_FIELDS),
    ("num_warmup_steps", lambda c: _whole(c.num_warmup_steps) and c.num_warmup_steps >= 0, "use an integer >= 0"),
    ("hidden_size", lambda c: c.hidden_size % c.num_attention_heads == 0,
     lambda c: f"it must be divisible by num_attention_heads={c.num_attention_heads}"),
    ("mask_prob", lambda c: 0.0 < c.mask_prob < 1.0, "use a probability strictly between 0 and 1"),
    ("mask_token_keep_prob", lambda c: 0.0 <= c.mask_token_keep_prob <= 1.0, "use a value in [0, 1]"),
    *((name, lambda c, name=name: 0.0 <= getattr(c, name) < 1.0, "use a dropout rate in [0, 1)")
      for name in ("hidden_dropout_prob", "attention_probs_dropout_prob")),
    ("generator_hidden_size", lambda c: c.generator_hidden_size > 0 and c.generator_hidden_dim >= 1,
     "use a positive width fraction (paper: 0.25 small, 1/3 base)"),
    ("generator_layers", lambda c: c.generator_layers > 0, "use a positive depth fraction"),
    ("max_seq_length", lambda c: c.max_seq_length <= c.max_position_embeddings,
     lambda c: f"it exceeds max_position_embeddings={c.max_position_embeddings}"),
    ("max_predictions_per_seq",
     lambda c: c.max_predictions_per_seq is None or 0 < c.max_predictions_per_seq <= c.max_seq_length,
     "use 1..max_seq_length, or null to derive it from mask_prob"),
    ("mask_prob", lambda c: c.predictions_per_seq >= 1,
     "mask_prob * max_seq_length leaves no position to predict; raise either"),
    ("pooling", lambda c: c.pooling in (None, "cls", "mean"), "use \"cls\", \"mean\" or null"),
    ("temperature", lambda c: not c.temperature <= 0, "use a positive sampling temperature"),
    *((name, lambda c, name=name: not getattr(c, name) < 0, "use a value >= 0") for name in _NON_NEGATIVE_FIELDS),
    ("learning_rate", lambda c: c.learning_rate > 0, "use a positive learning rate"),
    *((name, lambda c, name=name: 0.0 <= getattr(c, name) < 1.0, "use a value in [0, 1)")
      for name in ("adam_beta_1", "adam_beta_2")),
    ("objective", lambda c: c.objective in OBJECTIVES, f"choose one of {', '.join(OBJECTIVES)}"),
    ("encoder_lr_multiplier", lambda c: 0.0 < c.encoder_lr_multiplier <= 1.0, "use a fraction in (0, 1]"),
    ("encoder_freeze_steps", lambda c: _whole(c.encoder_freeze_steps) and c.encoder_freeze_steps >= 0,
     "use an integer >= 0"),
    ("two_stage_mlm_steps", lambda c: _whole(c.two_stage_mlm_steps) and c.two_stage_mlm_steps >= 0,
     "use an integer >= 0"),
    ("two_stage_mlm_steps", lambda c: c.objective != "two_stage" or c.two_stage_mlm_steps >= 1,
     "objective two_stage needs the number of MLM steps before the switch to electra "
     "(e.g. --override two_stage_mlm_steps=1000)"),
    ("embedding_sharing", lambda c: c.embedding_sharing in EMBEDDING_SHARING,
     f"choose one of {', '.join(EMBEDDING_SHARING)}"),
    ("untied_generator_embeddings", lambda c: not (c.untied_generator_embeddings and c.embedding_sharing == "gdes"),
     "it contradicts embedding_sharing=gdes; drop untied_generator_embeddings"),
    ("embedding_sharing", lambda c: c.embedding_sharing != "gdes" or c.objective in GENERATOR_OBJECTIVES,
     lambda c: f"objective {c.objective!r} has no generator to share with; use "
               f"one of {', '.join(GENERATOR_OBJECTIVES)}"),
    ("hidden_act", lambda c: c.hidden_act in ("gelu", "gelu_approximate"), "use 'gelu' (exact) or 'gelu_approximate'"),
)


@dataclasses.dataclass
class ElectraConfig:
    # --- name, only informative -------------------------------------------
    # ...and the key of the fine-tuning defaults (electra_tf/training/size_defaults.py): "imported"
    # for a BERT-family encoder that `convert` imported.
    model_size: str = "small"
    # The encoder's own sentence read-out, as its source records it ("mean" for a
    # sentence-transformers model, from its 1_Pooling/config.json): what fine-tuning pools by
    # default. None: the size's default (ELECTRA: the [CLS] vector).
    pooling: Optional[str] = None

    # --- discriminator shape (paper, ELECTRA-Small) ----------------------
    vocab_size: int = 30522
    embedding_size: int = 128  # E; a dense E->H projection is added when E != H
    hidden_size: int = 256  # H
    num_hidden_layers: int = 12
    num_attention_heads: int = 4
    intermediate_size: int = 1024
    hidden_act: str = "gelu"  # exact erf GELU, as in BERT/ELECTRA
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12

    # --- generator shape (fractions of the discriminator) ------------------
    generator_hidden_size: float = 0.25  # width multiplier (paper: 1/4 small, 1/3 base)
    generator_layers: float = 1.0  # depth multiplier
    untied_generator_embeddings: bool = False  # reference: share the embeddings
    # shared | none | gdes; `untied_generator_embeddings=true` is the legacy spelling of none.
    embedding_sharing: str = "shared"

    # --- objective ---------------------------------------------------------
    objective: str = "electra"
    max_seq_length: int = 128
    mask_prob: float = 0.15
    # None: int((mask_prob + 0.005) * max_seq_length), as in the reference.
    max_predictions_per_seq: Optional[int] = None
    gen_weight: float = 1.0
    disc_weight: float = 50.0  # lambda in the paper
    temperature: float = 1.0
    disallow_correct: bool = False
    mask_token_keep_prob: float = 0.15  # 85% [MASK], 15% left as the original
    # two_stage: steps trained as `mlm` before switching to `electra`.
    two_stage_mlm_steps: int = 0

    # --- optimisation (reference: AdamWeightDecay, linear warmup + decay) -
    learning_rate: float = 5e-4
    lr_decay_power: float = 1.0
    num_warmup_steps: int = 10000
    num_train_steps: int = 1000000
    weight_decay_rate: float = 0.01
    adam_beta_1: float = 0.9
    adam_beta_2: float = 0.999
    adam_epsilon: float = 1e-6
    clip_norm: float = 1.0  # global-norm clipping
    # Steps at the start during which the discriminator's encoder (embeddings included) gets no
    # update: for continued pre-training of a trained encoder (`pretrain --init`), so that the
    # fresh generator and replaced-token head settle before their first, large gradients (lambda = 50)
    # reach it. 0 (the paper, training from scratch): everything trains from step 0.
    encoder_freeze_steps: int = 0
    # The discriminator encoder's learning rate as a fraction of learning_rate (the generator and the
    # heads keep the full rate): continued pre-training moves a trained encoder gently while the
    # fresh generator learns fast enough to make useful replacements. 1.0: one rate (the paper).
    encoder_lr_multiplier: float = 1.0

    # --- input pipeline ------------------------------------------------------
    train_batch_size: int = 128
    eval_batch_size: int = 128
    do_lower_case: bool = True
    # The text normalisation the vocabulary and the shards were made with (electra_tf/data/normalization.py:
    # {"mode": "bert", "lower_case": ..., "strip_accents": ..., "max_chars_per_word": 200}), which
    # fine-tuning, the SavedModel and the exports apply. Pre-training copies it from the data manifest.
    # null (every config.json written before it existed): mode nfkc_casefold with do_lower_case's casing.
    text_normalization: Optional[dict] = None

    seed: int = 0

    # --- kernels -------------------------------------------------------------
    # The encoder blocks' fused call path (models/transformer_block.py): same
    # variables and maths as the plain Keras path, faster on CPU and GPU.
    fused_kernels: bool = True

    # ------------------------------------------------------------------------
    def __post_init__(self):
        self.validate()

    # Derived sizes --------------------------------------------------------
    @property
    def predictions_per_seq(self) -> int:
        if self.max_predictions_per_seq is not None:
            return int(self.max_predictions_per_seq)
        return int((self.mask_prob + 0.005) * self.max_seq_length)

    @property
    def generator_hidden_dim(self) -> int:
        return int(round(self.hidden_size * self.generator_hidden_size))

    @property
    def generator_num_layers(self) -> int:
        return max(1, int(round(self.num_hidden_layers * self.generator_layers)))

    @property
    def generator_num_heads(self) -> int:
        return max(1, self.generator_hidden_dim // 64)

    @property
    def generator_intermediate_size(self) -> int:
        return 4 * self.generator_hidden_dim

    # Validation -------------------------------------------------------------
    def validate(self) -> None:
        """Raises ConfigError naming the first invalid field (in FIELD_RULES' order) and its fix; then
        settles the two spellings of untied embeddings and the text normalisation's record."""
        for field, valid, fix in FIELD_RULES:
            if not valid(self):
                raise ConfigError(f"config field '{field}'={getattr(self, field)!r} is invalid: "
                                  f"{fix(self) if callable(fix) else fix}")
        # The legacy flag and the mode must agree; either spelling of `none` sets both.
        if self.untied_generator_embeddings or self.embedding_sharing == "none":
            self.untied_generator_embeddings, self.embedding_sharing = True, "none"
        if self.text_normalization is not None:
            self.text_normalization = self._checked_text_normalization().to_json()

    def _checked_text_normalization(self) -> TextNormalization:
        try:
            spec = TextNormalization.from_json(self.text_normalization, "config field 'text_normalization'")
        except DataError as e:
            raise ConfigError(str(e)) from None
        if spec.lower_case != self.do_lower_case:
            raise ConfigError(
                f"config field 'do_lower_case'={self.do_lower_case!r} is invalid: it disagrees with "
                f"text_normalization's lower_case={str(spec.lower_case).lower()}; change both (the model's text "
                f"was normalised once, as text_normalization says)")
        return spec

    @property
    def normalization(self) -> TextNormalization:
        """The text normalisation of this model (nfkc_casefold with `do_lower_case` when none is recorded)."""
        return from_record(self.to_dict(), "config")

    def with_normalization(self, normalization: TextNormalization, **changes: Any) -> "ElectraConfig":
        """A copy recording `normalization` (and its casing as do_lower_case), with `changes` (one copy
        built and validated for both)."""
        return self.replace(do_lower_case=normalization.lower_case, text_normalization=normalization.to_json(),
                            **changes)

    # (De)serialisation ------------------------------------------------------
    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self, path: Optional[str] = None) -> str:
        text = json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        return text

    @classmethod
    def from_dict(cls, values: dict, source: str = "config") -> "ElectraConfig":
        return cls(**cls._field_values(values, source))

    @classmethod
    def _field_values(cls, values: dict, source: str) -> dict:
        """`values` with every key a field and every value of its field's type (JSON numbers made floats
        for float fields); a ConfigError naming `source` otherwise. Nothing is built or validated."""
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(k for k in values if k not in known)
        if unknown:
            raise ConfigError(
                f"{source}: unknown config key(s) {', '.join(unknown)}; "
                f"valid keys are listed in electra_tf/config.py"
            )
        return {k: _coerce(known[k], v, source) for k, v in values.items()}

    @classmethod
    def load(cls, name_or_path: str, flag: str = "--config") -> "ElectraConfig":
        """A shipped config by name ("small"; `python -m electra_tf --help` lists them) or a JSON file."""
        try:
            path = resolve_config(name_or_path, flag)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        return cls.from_json(path)

    @classmethod
    def from_json(cls, path: str) -> "ElectraConfig":
        if not os.path.isfile(path):
            raise ConfigError(f"config file {path!r} does not exist; pass a JSON file such as configs/small.json "
                              f"or a config name ({', '.join(config_names())})")
        try:
            with open(path, encoding="utf-8") as f:
                values = json.load(f)
        except json.JSONDecodeError as e:
            raise ConfigError(f"config file {path!r} is not valid JSON ({e}); fix the syntax") from None
        if not isinstance(values, dict):
            raise ConfigError(f"config file {path!r} must hold a JSON object of key: value pairs")
        return cls.from_dict(values, source=path)

    def replace(self, **changes: Any) -> "ElectraConfig":
        values = self.to_dict()
        values.update(changes)
        return type(self).from_dict(values)

    def for_vocab(self, vocab_file: str) -> "ElectraConfig":
        """A copy whose vocab_size is the number of tokens (lines) of `vocab_file`."""
        return self.replace(vocab_size=len(load_vocab(vocab_file)))

    def with_overrides(self, overrides, **changes: Any) -> "ElectraConfig":
        """A copy with `changes` (fields a caller's own flags set, checked as `replace` checks them) and
        then the `key=value` strings of `overrides` (values parsed as JSON, else kept as text) applied:
        one copy built and validated for both, so a job's flags and overrides cost one validation."""
        values = self.to_dict()
        if changes:
            values.update(self._field_values(changes, "config"))
        parsed = {}
        for item in overrides or ():
            if "=" not in item:
                raise ConfigError(f"override {item!r} must look like key=value, e.g. mask_prob=0.25")
            key, raw = item.split("=", 1)
            try:
                value = json.loads(raw)
            except json.JSONDecodeError:
                value = raw
            parsed[key.strip()] = value
        values.update(parsed)
        return type(self).from_dict(values, source="--override")


def _coerce(field: dataclasses.Field, value: Any, source: str) -> Any:
    """Accepts JSON numbers for float fields (1 -> 1.0); rejects wrong types clearly."""
    typ = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "")
    if value is None:
        if "Optional" in typ:
            return None
        raise ConfigError(f"{source}: config field '{field.name}' cannot be null")
    if typ.startswith("float") or typ == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise ConfigError(f"{source}: config field '{field.name}'={value!r} must be a number")
        return float(value)
    if typ == "int" or "Optional[int]" in typ:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{source}: config field '{field.name}'={value!r} must be an integer")
        return value
    if typ == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{source}: config field '{field.name}'={value!r} must be true or false")
        return value
    if typ == "str":
        if not isinstance(value, str):
            raise ConfigError(f"{source}: config field '{field.name}'={value!r} must be a string")
        return value
    return value
