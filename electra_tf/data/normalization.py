"""The text normalisation a vocabulary, its shards and its model are made with.

A `TextNormalization` names every rule that turns text into the words
WordPiece sees. It is recorded where the text is turned into ids (the data
manifest, the model folder's `config.json`, a fine-tuned classifier's
`classifier.json`, beside a vocabulary as `<vocab>.normalization.json`) under
the key `text_normalization`, and every consumer builds its tokenizer from
that record, so that the shards, fine-tuning, the SavedModel and the exports
see the same ids.

Two modes:

* ``bert`` (the default): the reference BERT / ELECTRA tokenizer's rules,
  which Hugging Face's `BertTokenizer` follows too. Control, format,
  private-use and unassigned characters, U+0000 and U+FFFD are removed;
  whitespace becomes a space; CJK ideographs become words of their own;
  lower-casing is Unicode's full lower-case mapping (`str.lower()`: "ß" stays,
  "İ" becomes "i̇", a word-final "Σ" becomes "ς"); accent stripping is NFD
  with the combining marks (category Mn) removed; punctuation (Unicode P and
  every non-alphanumeric ASCII character) is split off; a word longer than
  `max_chars_per_word` characters is one [UNK].
* ``nfkc_casefold``: the rules of the first releases (tensorflow-text's
  FastBertTokenizer): lower-casing by NFKC case folding ("ß" -> "ss",
  fullwidth forms -> ASCII, "½" -> "1⁄2"), control and format characters
  split words, a word of more than 100 UTF-8 bytes is [UNK]. A record
  without `text_normalization` means this mode with the recorded casing, so
  models and shards made before the record existed keep their ids.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, Optional, Tuple

from electra_tf.data.data_errors import DataError

BERT = "bert"
NFKC_CASEFOLD = "nfkc_casefold"
MODES = (BERT, NFKC_CASEFOLD)
DEFAULT_MODE = BERT
# The reference WordPiece's limit (google-research/electra, model/tokenization.py); Hugging Face's
# default is 100, so exports write this one into their tokenizer files.
MAX_CHARS_PER_WORD = 200
# nfkc_casefold: tensorflow-text's FastBertTokenizer default, in UTF-8 bytes.
LEGACY_MAX_BYTES_PER_WORD = 100
FIELD = "text_normalization"
VOCAB_RECORD_SUFFIX = ".normalization.json"


@dataclasses.dataclass(frozen=True)
class TextNormalization:
    """How text is normalised and split before WordPiece.

    Attributes:
      mode: "bert" or "nfkc_casefold" (module docstring).
      lower_case: lower-case the text.
      strip_accents: NFD, then drop combining marks (Mn).
      max_chars_per_word: bert mode: longer words are one [UNK].
    """

    mode: str = DEFAULT_MODE
    lower_case: bool = True
    strip_accents: bool = True
    max_chars_per_word: int = MAX_CHARS_PER_WORD

    def __post_init__(self):
        if self.mode not in MODES:
            raise DataError(f"text normalisation mode {self.mode!r} is unknown; use one of {', '.join(MODES)}")
        for name in ("lower_case", "strip_accents"):
            if not isinstance(getattr(self, name), bool):
                raise DataError(f"text normalisation {name}={getattr(self, name)!r} is not true or false")
        limit = self.max_chars_per_word
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise DataError(f"text normalisation max_chars_per_word={limit!r} is invalid; use a positive integer")

    @classmethod
    def create(cls, lower_case: bool = True, strip_accents: Optional[bool] = None,
               mode: str = DEFAULT_MODE) -> "TextNormalization":
        """A normalisation; `strip_accents` None follows `lower_case`, as BERT does."""
        strip = bool(lower_case) if strip_accents is None else bool(strip_accents)
        return cls(mode=mode, lower_case=bool(lower_case), strip_accents=strip)

    @classmethod
    def legacy(cls, lower_case: bool, strip_accents: Optional[bool] = None) -> "TextNormalization":
        """What a record without `text_normalization` means: nfkc_casefold with its casing."""
        return cls.create(lower_case, strip_accents, NFKC_CASEFOLD)

    @property
    def is_bert(self) -> bool:
        return self.mode == BERT

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"mode": self.mode, "lower_case": self.lower_case, "strip_accents": self.strip_accents}
        if self.is_bert:
            out["max_chars_per_word"] = self.max_chars_per_word
        else:
            out["max_bytes_per_word"] = LEGACY_MAX_BYTES_PER_WORD
        return out

    @classmethod
    def from_json(cls, value: Any, source: str) -> "TextNormalization":
        """Parses a recorded `text_normalization`; one-line DataError naming `source` if it is bad."""
        if isinstance(value, TextNormalization):
            return value
        if not isinstance(value, dict) or "mode" not in value or "lower_case" not in value:
            raise DataError(f"{source}: text_normalization {value!r} is not a record of mode, lower_case and "
                            f"strip_accents; rewrite it as e.g. {json.dumps(TextNormalization().to_json())}")
        known = {"mode", "lower_case", "strip_accents", "max_chars_per_word", "max_bytes_per_word"}
        unknown = sorted(set(value) - known)
        if unknown:
            raise DataError(f"{source}: text_normalization has unknown field(s) {', '.join(unknown)}; this "
                            f"version knows {', '.join(sorted(known))} (was it written by a newer electra_tf?)")
        if value["mode"] == NFKC_CASEFOLD and value.get("max_bytes_per_word", LEGACY_MAX_BYTES_PER_WORD) != \
                LEGACY_MAX_BYTES_PER_WORD:
            raise DataError(f"{source}: text_normalization mode nfkc_casefold has max_bytes_per_word "
                            f"{LEGACY_MAX_BYTES_PER_WORD}, not {value['max_bytes_per_word']!r}; correct the record")
        try:
            return cls(mode=value["mode"], lower_case=value["lower_case"],
                       strip_accents=value.get("strip_accents", value["lower_case"]),
                       max_chars_per_word=value.get("max_chars_per_word", MAX_CHARS_PER_WORD))
        except DataError as e:
            raise DataError(f"{source}: {e}") from None

    def describe(self) -> str:
        """'bert, lower-cased, accents stripped' and the like, for messages."""
        case = "lower-cased" if self.lower_case else "cased"
        accents = "accents stripped" if self.strip_accents else "accents kept"
        return f"{self.mode}, {case}, {accents}"

    def flags(self) -> str:
        """The data tools' flags that ask for this normalisation."""
        return (f"--normalization {self.mode} --{'' if self.lower_case else 'no'}do_lower_case "
                f"--strip_accents {str(self.strip_accents).lower()}")


def from_record(record: Dict[str, Any], source: str, lower_key: str = "do_lower_case") -> TextNormalization:
    """The normalisation a config.json / manifest.json / classifier.json records.

    Without a `text_normalization` field: nfkc_casefold with the recorded
    casing (`do_lower_case`, and `strip_accents` if there is one), what every
    folder written before the field existed was made with.
    """
    if record.get(FIELD) is not None:
        return TextNormalization.from_json(record[FIELD], source)
    lower = bool(record.get(lower_key, True))
    strip = record.get("strip_accents")
    return TextNormalization.legacy(lower, None if strip is None else bool(strip))


def vocab_record_path(vocab_file: str) -> str:
    """Where build_vocab records a vocabulary's normalisation: `<vocab_file>.normalization.json`."""
    return vocab_file + VOCAB_RECORD_SUFFIX


def find_vocab_record(vocab_file: str) -> Optional[Tuple[TextNormalization, str]]:
    """The normalisation recorded for a local vocab.txt, and where: `<vocab_file>.normalization.json`
    (build_vocab's), else the config.json of the electra_tf model folder it sits in (a model's
    vocab.txt: its config's record, or its casing in the nfkc_casefold mode). None: no record (or a
    remote file)."""
    if "://" in vocab_file:
        return None
    path = vocab_record_path(vocab_file)
    if os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as f:
                value = json.load(f)
        except (OSError, ValueError) as e:
            raise DataError(f"{path} is not readable JSON ({e}); delete it or rebuild the vocabulary") from None
        return TextNormalization.from_json(value.get(FIELD) if isinstance(value, dict) else value, path), path
    # models/model_folder.py's CONFIG_FILE, spelt here because data/ sits below models/ (layers).
    config = os.path.join(os.path.dirname(os.path.abspath(vocab_file)), "config.json")
    if os.path.isfile(config):
        try:
            with open(config, encoding="utf-8") as f:
                value = json.load(f)
        except (OSError, ValueError):
            return None  # not a config this reads; the model loaders say what is wrong with it
        # An electra_tf model config (ElectraConfig.to_json): a casing and the pre-training fields.
        if isinstance(value, dict) and "do_lower_case" in value and "disc_weight" in value:
            return from_record(value, config), config
    return None


def read_vocab_record(vocab_file: str) -> Optional[TextNormalization]:
    """`find_vocab_record`'s normalisation alone."""
    found = find_vocab_record(vocab_file)
    return None if found is None else found[0]


def vocab_record_text(normalization: TextNormalization) -> str:
    """The content of `<vocab_file>.normalization.json`."""
    return json.dumps({FIELD: normalization.to_json()}, indent=2, sort_keys=True) + "\n"

