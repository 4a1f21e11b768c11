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


@dataclasses.dataclass
class ElectraConfig:
    # --- name, only informative -------------------------------------------
    # ...and the key of the fine-tuning defaults (electra_tf/finetune/size_defaults.py): "imported"
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
        def fail(field, value, fix):
            raise ConfigError(f"config field '{field}'={value!r} is invalid: {fix}")

        for name in (
            "vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
            "num_attention_heads", "intermediate_size", "max_position_embeddings",
            "type_vocab_size", "max_seq_length", "train_batch_size",
            "eval_batch_size", "num_train_steps",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                fail(name, value, "use a positive integer")
        if isinstance(self.num_warmup_steps, bool) or not isinstance(
            self.num_warmup_steps, int
        ) or self.num_warmup_steps < 0:
            fail("num_warmup_steps", self.num_warmup_steps, "use an integer >= 0")
        if self.hidden_size % self.num_attention_heads:
            fail(
                "hidden_size", self.hidden_size,
                f"it must be divisible by num_attention_heads={self.num_attention_heads}",
            )
        if not 0.0 < self.mask_prob < 1.0:
            fail("mask_prob", self.mask_prob, "use a probability strictly between 0 and 1")
        if not 0.0 <= self.mask_token_keep_prob <= 1.0:
            fail("mask_token_keep_prob", self.mask_token_keep_prob, "use a value in [0, 1]")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                fail(name, value, "use a dropout rate in [0, 1)")
        if not self.generator_hidden_size > 0 or self.generator_hidden_dim < 1:
            fail("generator_hidden_size", self.generator_hidden_size,
                 "use a positive width fraction (paper: 0.25 small, 1/3 base)")
        if not self.generator_layers > 0:
            fail("generator_layers", self.generator_layers, "use a positive depth fraction")
        if self.max_seq_length > self.max_position_embeddings:
            fail("max_seq_length", self.max_seq_length,
                 f"it exceeds max_position_embeddings={self.max_position_embeddings}")
        if self.max_predictions_per_seq is not None and not (
            0 < self.max_predictions_per_seq <= self.max_seq_length
        ):
            fail("max_predictions_per_seq", self.max_predictions_per_seq,
                 "use 1..max_seq_length, or null to derive it from mask_prob")
        if self.predictions_per_seq < 1:
            fail("mask_prob", self.mask_prob,
                 "mask_prob * max_seq_length leaves no position to predict; raise either")
        if self.pooling not in (None, "cls", "mean"):
            fail("pooling", self.pooling, "use \"cls\", \"mean\" or null")
        if self.temperature <= 0:
            fail("temperature", self.temperature, "use a positive sampling temperature")
        for name in ("gen_weight", "disc_weight", "weight_decay_rate", "clip_norm",
                     "adam_epsilon"):
            if getattr(self, name) < 0:
                fail(name, getattr(self, name), "use a value >= 0")
        if not self.learning_rate > 0:
            fail("learning_rate", self.learning_rate, "use a positive learning rate")
        for name in ("adam_beta_1", "adam_beta_2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                fail(name, getattr(self, name), "use a value in [0, 1)")
        if self.objective not in OBJECTIVES:
            fail("objective", self.objective, f"choose one of {', '.join(OBJECTIVES)}")
        if not 0.0 < self.encoder_lr_multiplier <= 1.0:
            fail("encoder_lr_multiplier", self.encoder_lr_multiplier, "use a fraction in (0, 1]")
        if isinstance(self.encoder_freeze_steps, bool) or not isinstance(
            self.encoder_freeze_steps, int
        ) or self.encoder_freeze_steps < 0:
            fail("encoder_freeze_steps", self.encoder_freeze_steps, "use an integer >= 0")
        if isinstance(self.two_stage_mlm_steps, bool) or not isinstance(
            self.two_stage_mlm_steps, int
        ) or self.two_stage_mlm_steps < 0:
            fail("two_stage_mlm_steps", self.two_stage_mlm_steps, "use an integer >= 0")
        if self.objective == "two_stage" and self.two_stage_mlm_steps < 1:
            fail("two_stage_mlm_steps", self.two_stage_mlm_steps,
                 "objective two_stage needs the number of MLM steps before the switch to "
                 "electra (e.g. --override two_stage_mlm_steps=1000)")
        if self.embedding_sharing not in EMBEDDING_SHARING:
            fail("embedding_sharing", self.embedding_sharing,
                 f"choose one of {', '.join(EMBEDDING_SHARING)}")
        # The legacy flag and the mode must agree; either spelling of `none` sets both.
        if self.untied_generator_embeddings and self.embedding_sharing == "gdes":
            fail("untied_generator_embeddings", True,
                 "it contradicts embedding_sharing=gdes; drop untied_generator_embeddings")
        if self.untied_generator_embeddings or self.embedding_sharing == "none":
            self.untied_generator_embeddings, self.embedding_sharing = True, "none"
        if self.embedding_sharing == "gdes" and self.objective not in GENERATOR_OBJECTIVES:
            fail("embedding_sharing", "gdes",
                 f"objective {self.objective!r} has no generator to share with; use "
                 f"one of {', '.join(GENERATOR_OBJECTIVES)}")
        if self.hidden_act not in ("gelu", "gelu_approximate"):
            fail("hidden_act", self.hidden_act, "use 'gelu' (exact) or 'gelu_approximate'")
        if self.text_normalization is not None:
            try:
                spec = TextNormalization.from_json(self.text_normalization, "config field 'text_normalization'")
            except DataError as e:
                raise ConfigError(str(e)) from None
            if spec.lower_case != self.do_lower_case:
                fail("do_lower_case", self.do_lower_case,
                     f"it disagrees with text_normalization's lower_case={str(spec.lower_case).lower()}; change "
                     f"both (the model's text was normalised once, as text_normalization says)")
            self.text_normalization = spec.to_json()

    @property
    def normalization(self) -> TextNormalization:
        """The text normalisation of this model (nfkc_casefold with `do_lower_case` when none is recorded)."""
        return from_record(self.to_dict(), "config")

    def with_normalization(self, normalization: TextNormalization) -> "ElectraConfig":
        """A copy recording `normalization` (and its casing as do_lower_case)."""
        return self.replace(do_lower_case=normalization.lower_case, text_normalization=normalization.to_json())

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
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(k for k in values if k not in known)
        if unknown:
            raise ConfigError(
                f"{source}: unknown config key(s) {', '.join(unknown)}; "
                f"valid keys are listed in electra_tf/config.py"
            )
        coerced = {k: _coerce(known[k], v, source) for k, v in values.items()}
        return cls(**coerced)

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

    def with_overrides(self, overrides) -> "ElectraConfig":
        """Applies `key=value` strings (values parsed as JSON, else kept as text)."""
        changes = {}
        for item in overrides or ():
            if "=" not in item:
                raise ConfigError(f"override {item!r} must look like key=value, e.g. mask_prob=0.25")
            key, raw = item.split("=", 1)
            try:
                value = json.loads(raw)
            except json.JSONDecodeError:
                value = raw
            changes[key.strip()] = value
        values = self.to_dict()
        values.update(changes)
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
