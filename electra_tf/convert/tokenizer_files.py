"""The tokenizer files an export writes, from the model's recorded text normalisation.

Hugging Face: `tokenizer.json` (the `tokenizers` pipeline: BertNormalizer
after removing unassigned code points and, lower-cased, Unicode's final-sigma
rule, as the reference does; BertPreTokenizer, WordPiece with the model's word-length limit, [CLS]/[SEP]
template) and `tokenizer_config.json` (`do_lower_case`, `strip_accents`,
`tokenize_chinese_chars`, `model_max_length`, the special tokens), which
`AutoTokenizer.from_pretrained(dir)` loads as a fast tokenizer giving the ids
the model was trained on. `transformers`' own `BertTokenizer` class would
rebuild WordPiece with its fixed 100-character limit, so the config names the
generic fast class and the pipeline lives in tokenizer.json.

The bert mode is what these files express exactly; the nfkc_casefold mode
(NFKC case folding) has no Hugging Face or keras-hub counterpart, and the
notes below say so in one line where the convert tool's user reads them.
"""

from __future__ import annotations

import os
from typing import Dict, Optional

from electra_tf.fileio import write_json_atomic, write_text_atomic
from electra_tf.data.normalization import TextNormalization
from electra_tf.data.vocab import load_vocab

# Unicode's Final_Sigma rule, which str.lower() (the reference) and the SavedModel's ICU lower-casing
# apply and `tokenizers`' BertNormalizer (one character at a time) does not: a capital sigma after a
# cased letter (a few case-ignorable characters between allowed) and before no cased letter is "ς".
_CASED_BEFORE = "|".join(r"\p{Cased}" + r"\p{Case_Ignorable}" * n for n in range(4))
FINAL_SIGMA = rf"(?<={_CASED_BEFORE})\x{{3A3}}(?!\p{{Case_Ignorable}}*\p{{Cased}})"

SPECIAL = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
           "mask_token": "[MASK]"}


def hf_tokenizer_json(vocab: list, normalization: TextNormalization) -> str:
    """tokenizer.json of the bert-mode rules for `vocab` (nfkc_casefold: the nearest, bert rules)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors  # pylint: disable=import-outside-toplevel

    index: Dict[str, int] = {}
    for i, token in enumerate(vocab):
        index.setdefault(token, i)
    tok = Tokenizer(models.WordPiece(index, unk_token=SPECIAL["unk_token"], continuing_subword_prefix="##",
                                     max_input_chars_per_word=normalization.max_chars_per_word))
    bert = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                      strip_accents=normalization.strip_accents, lowercase=normalization.lower_case)
    # BertNormalizer keeps unassigned code points (category Cn), which the reference removes with
    # the other C categories.
    steps = [normalizers.Replace(Regex(r"\p{Cn}"), "")]
    if normalization.lower_case:
        steps.append(normalizers.Replace(Regex(FINAL_SIGMA), "\u03c2"))
    tok.normalizer = normalizers.Sequence(steps + [bert])
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    cls, sep = SPECIAL["cls_token"], SPECIAL["sep_token"]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0", pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, index[cls]), (sep, index[sep])])
    tok.decoder = decoders.WordPiece(prefix="##")
    for token in SPECIAL.values():
        tok.add_special_tokens([token])
    return tok.to_str(pretty=True)


def hf_tokenizer_config(normalization: TextNormalization, model_max_length: int) -> dict:
    """tokenizer_config.json: the generic fast class (the pipeline is in tokenizer.json) with BERT's settings."""
    return dict(SPECIAL, tokenizer_class="PreTrainedTokenizerFast", do_lower_case=normalization.lower_case,
                strip_accents=normalization.strip_accents, tokenize_chinese_chars=True,
                model_max_length=int(model_max_length),
                model_input_names=["input_ids", "token_type_ids", "attention_mask"])


def write_hf_tokenizer(directory: str, vocab_file: str, normalization: TextNormalization,
                       model_max_length: int) -> None:
    """Writes tokenizer.json and tokenizer_config.json into a Hugging Face model directory."""
    write_text_atomic(os.path.join(directory, "tokenizer.json"),
                      hf_tokenizer_json(load_vocab(vocab_file), normalization))
    write_json_atomic(os.path.join(directory, "tokenizer_config.json"),
                      hf_tokenizer_config(normalization, model_max_length), sort_keys=True)


def hf_note(normalization: TextNormalization) -> Optional[str]:
    """One line when the Hugging Face tokenizer cannot give the model's ids (None when it can)."""
    if normalization.is_bert:
        return None
    return (f"warning: the model's text normalisation ({normalization.describe()}) has no Hugging Face "
            f"counterpart; the tokenizer written follows BERT's rules instead and differs where NFKC case "
            f"folding changes the text (ß, fullwidth forms, ligatures, superscripts) and on format characters")


def keras_hub_note(normalization: TextNormalization) -> Optional[str]:
    """One line on how the keras-hub preset's tokenizer differs from the model's normalisation (None: it
    does not). keras-hub's WordPieceTokenizer strips accents, splits (control and format characters as
    spaces), then lower-cases by NFKC case folding; its words end at 100 UTF-8 bytes."""
    if normalization.is_bert:
        differs = ["control and format characters split words instead of vanishing",
                   f"a word of over 100 UTF-8 bytes is [UNK] (the model: over {normalization.max_chars_per_word} "
                   f"characters)"]
        if normalization.lower_case:
            differs.insert(0, "lower-casing is NFKC case folding (ß -> ss, fullwidth forms -> ASCII)")
    elif normalization.lower_case and normalization.strip_accents:
        differs = ["accents are stripped before case folding, not after (a few compatibility characters keep "
                   "an accent)"]
    else:
        return None
    return (f"note: the keras-hub tokenizer written (lowercase={normalization.lower_case}, "
            f"strip_accents={normalization.strip_accents}) differs from the model's text normalisation "
            f"({normalization.describe()}): {'; '.join(differs)}; the exported SavedModel and the Hugging Face "
            f"files give the model's own ids")
