"""Learn a WordPiece vocabulary from a (sample of a) text corpus.

    python -m electra_tf.data.build_vocab --corpus 'corpus/*.txt' \\
        --vocab_size 30522 --output vocab.txt [--no_lower_case] [--sample_lines 1000000]

Learns with Hugging Face `tokenizers`' WordPiece trainer (Rust). Text is
normalised and split as the in-graph tokenizer (tensorflow-text
FastBertTokenizer, electra_tf.data.tokenizer) and tensorflow-text's BERT
BasicTokenizer do it: lower-casing by NFKC case folding and accent stripping
as asked, CJK characters as words, punctuation split off.

The corpus (plain or .gz files) is streamed once and reservoir-sampled to
--sample_lines lines, so memory is bounded by the sample; --sample_lines 0
streams every line and holds only the word counts. Words are counted here and
each distinct word is normalised once; the trainer then sees counted words.
Handing it raw lines instead costs ~90 us of CPU a line in its
offset-tracking normaliser, about 3x the whole count-first route.

Output, one token per line: [PAD] [UNK] [CLS] [SEP] [MASK] (ids 0-4, [PAD] = 0
as the shards assume), every character of the sample, the learned pieces
(`##` marks a piece that continues a word) in the order the trainer made them,
then `##` + every character that can continue a word, so any text made of seen
characters tokenizes without [UNK].
"""

from __future__ import annotations

import collections
import os
import random
import re
import time
import unicodedata
from typing import Callable, Counter, Dict, Iterable, Iterator, List, Optional, Sequence

from electra_tf.data.bert_vocab_learner import learn_bert_vocab
from electra_tf.data.corpus import ReadStats, check_text_file, expand_corpus, file_size, iter_lines
from electra_tf.data.errors import DataError
from electra_tf.data.tokenizer import resolve_strip_accents
from electra_tf.data.vocab import SPECIAL_TOKENS, VocabError
from electra_tf.paths import output_dir_problem

MAX_LINE_BYTES = 1 << 16
# Lines joined per Counter.update call: one C-level split and count instead of one per line.
COUNT_BATCH_LINES = 4096
# Longest string handed to the trainer at once (a frequent word repeated count times).
FEED_CHARS = 1 << 20
# WordPiece gives up on (and emits [UNK] for) longer words, in HF tokenizers and BERT alike.
MAX_CHARS_PER_WORD = 100
# `build_vocab(learner=...)`: the tokenizers trainer, or tensorflow-text's (bert_vocab_learner.py).
LEARNERS = ("tokenizers", "bert_vocab")

# Printable ASCII words (the bulk of most corpora) are normalised here, without a call into
# `tokenizers` per word: for them BERT's clean-up and accent stripping change nothing, and
# every non-alphanumeric character is punctuation, split off on its own.
_ASCII_PIECES_LOWER = re.compile(r"[a-z0-9]+|[^a-z0-9]")
_ASCII_PIECES_CASED = re.compile(r"[A-Za-z0-9]+|[^A-Za-z0-9]")


def iter_corpus_lines(files: Sequence[str], stats: Optional[ReadStats] = None) -> Iterator[str]:
    """Every non-blank line of `files`, stripped, streamed (plain or .gz files)."""
    stats = stats if stats is not None else ReadStats()
    for path in files:
        for line in iter_lines(path, 0, file_size(path), stats, MAX_LINE_BYTES):
            line = line.strip()
            if line:
                yield line


def sample_corpus_lines(files: Sequence[str], sample_lines: int, seed: int = 0,
                        stats: Optional[ReadStats] = None) -> List[str]:
    """Reservoir-samples non-blank lines, streaming every file once.

    Args:
      files: corpus files (plain or .gz).
      sample_lines: lines to keep (0 keeps all: only for corpora that fit in memory).
      seed: seeds the sample.
      stats: optional ReadStats collecting replaced bytes / cut lines.

    Returns:
      The sampled lines in corpus order.
    """
    rng = random.Random(seed)
    reservoir: List[tuple] = []
    seen = 0
    for line in iter_corpus_lines(files, stats):
        if sample_lines <= 0 or len(reservoir) < sample_lines:
            reservoir.append((seen, line))
        else:
            j = rng.randint(0, seen)
            if j < sample_lines:
                reservoir[j] = (seen, line)
        seen += 1
    reservoir.sort(key=lambda item: item[0])
    return [line for _, line in reservoir]


def count_raw_words(lines: Iterable[str]) -> Counter[str]:
    """Counts space-separated words (before any normalisation).

    Splitting on U+0020 alone is safe: BERT treats it as a word boundary, and
    whatever else a word holds (tabs, other spaces, punctuation) is split by
    the normaliser afterwards, once per distinct word.
    """
    counts: Counter[str] = collections.Counter()
    batch: List[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) >= COUNT_BATCH_LINES:
            counts.update(" ".join(batch).split(" "))
            batch.clear()
    if batch:
        counts.update(" ".join(batch).split(" "))
    counts.pop("", None)
    return counts


def _hf_normalizer(lower_case: bool, strip_accents: bool, clean_text: bool = True):
    from tokenizers import normalizers  # pylint: disable=import-outside-toplevel

    return normalizers.BertNormalizer(clean_text=clean_text, handle_chinese_chars=True,
                                      strip_accents=bool(strip_accents), lowercase=bool(lower_case))


def _is_standard(lower_case: bool, strip: bool) -> bool:
    """BERT's two modes: lower-case + strip accents, or neither (HF's normaliser does both)."""
    return lower_case == strip


def hf_tokenizer(vocab_file: str, lower_case: bool = True, strip_accents: Optional[bool] = None):
    """The Hugging Face BERT tokenizer (`tokenizers.Tokenizer`) for a vocab.txt.

    BertNormalizer, BERT pre-tokenization and greedy longest-match WordPiece
    over `vocab_file`: what `transformers`' BertTokenizerFast builds. On
    letters, accents, digits, punctuation and CJK it splits text as the
    in-graph tokenizer does. They differ on compatibility characters, which
    tensorflow-text's NFKC case folding maps (full-width forms, ligatures,
    superscripts, "ß" to "ss") and BERT's lower-casing keeps, and on
    zero-width and other format characters (a space in the graph, removed
    here). Only BERT's two modes exist in `tokenizers`.

    Raises:
      DataError: a mixed mode was asked.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers  # pylint: disable=import-outside-toplevel

    strip = resolve_strip_accents(lower_case, strip_accents)
    if not _is_standard(lower_case, strip):
        raise DataError(f"hf_tokenizer: lower_case={lower_case} with strip_accents={strip} has no Hugging Face "
                        f"normaliser; use WordPieceTokenizer from electra_tf.data.tokenizer")
    tok = Tokenizer(models.WordPiece.from_file(vocab_file, unk_token="[UNK]",
                                               max_input_chars_per_word=MAX_CHARS_PER_WORD))
    tok.normalizer = _hf_normalizer(lower_case, strip)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


def _in_graph_normalize(words: List[str], lower_case: bool, strip: bool) -> List[str]:
    """Normalises words exactly as the in-graph tokenizer does, with its own tensorflow-text ops.

    That is: the mixed modes' pre-normalisation (WordPieceTokenizer), then
    FastBertTokenizer's normaliser (NFKC case folding, NFD and accent
    stripping in the lower-case mode; control and format characters to spaces
    in both), so the learner counts the words the shards will be made of.
    """
    if not lower_case and not strip:
        # The cased normaliser only turns control and format characters into spaces: no
        # need for the TensorFlow import (seconds) to do that.
        return ["".join(" " if unicodedata.category(c) in ("Cc", "Cf") else c for c in w) for w in words]
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tensorflow_text as tf_text  # pylint: disable=import-outside-toplevel

    fused = lower_case and strip
    text = tf.constant(words, tf.string)
    if lower_case and not fused:
        text = tf_text.case_fold_utf8(text)
    if strip and not fused:
        text = tf.strings.regex_replace(tf_text.normalize_utf8(text, "NFD"), r"\p{Mn}", "")
    text = tf_text.FastBertNormalizer(lower_case_nfd_strip_accents=fused).normalize(text)
    return [t.decode("utf-8") for t in text.numpy().tolist()]


def pre_tokenized_counts(raw: Counter[str], lower_case: bool = True,
                         strip_accents: Optional[bool] = None) -> Dict[str, int]:
    """Word counts after normalisation and pre-tokenization, as the in-graph tokenizer does them.

    Printable ASCII words are split here; the few other distinct words go
    through tensorflow-text's FastBertNormalizer (TensorFlow is imported only
    then, and not for cased text) and the `tokenizers` BERT pre-tokenizer
    (CJK characters and punctuation split off, whitespace dropped).

    Args:
      raw: counts of space-separated words (count_raw_words).
      lower_case: lower-case.
      strip_accents: strip accents; None follows lower_case.

    Returns:
      {piece: count}, where a piece is what the WordPiece step sees (a word,
      one punctuation character or one CJK character), sorted by falling count
      then text so that the trainer's input does not depend on dict order.
    """
    from tokenizers import pre_tokenizers  # pylint: disable=import-outside-toplevel

    strip = resolve_strip_accents(lower_case, strip_accents)
    ascii_pieces = _ASCII_PIECES_LOWER if lower_case else _ASCII_PIECES_CASED
    counts: Counter[str] = collections.Counter()
    others: List[str] = []
    for word, n in raw.items():
        if word.isascii() and word.isprintable():
            for piece in ascii_pieces.findall(word.lower() if lower_case else word):
                counts[piece] += n
        else:
            others.append(word)
    if others:
        # Already normalised: only the CJK split is still to do (clean-up is the normaliser's).
        split_cjk = _hf_normalizer(False, False, clean_text=False)
        pre = pre_tokenizers.BertPreTokenizer()
        for word, text in zip(others, _in_graph_normalize(others, lower_case, strip)):
            n = raw[word]
            for piece, _ in pre.pre_tokenize_str(split_cjk.normalize_str(text)):
                counts[piece] += n
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _repeat_words(counts: Dict[str, int]) -> Iterator[str]:
    """Each word `count` times, space-separated, in strings of at most ~FEED_CHARS characters."""
    for word, n in counts.items():
        per_string = max(1, FEED_CHARS // (len(word) + 1))
        while n > 0:
            m = min(n, per_string)
            yield " ".join([word] * m)
            n -= m


def _can_continue_a_word(char: str) -> bool:
    """False for characters BERT always splits off (punctuation, CJK): a `##` form is never used."""
    cp = ord(char)
    if (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F):
        return False  # BERT's CJK ranges (BasicTokenizer._is_chinese_char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return False
    return not unicodedata.category(char).startswith("P")


def _layout(learned: Sequence[str], vocab_size: int, reserved: Sequence[str]) -> List[str]:
    """Orders the trainer's vocabulary and fits it to vocab_size.

    Reserved tokens, then every character (sorted), then learned pieces in the
    trainer's order (most frequent merges first), then `##` + every character
    that can continue a word. The trainer only makes the `##` forms it saw;
    the missing ones are added and the last (rarest) pieces dropped to make
    room, so every character stays representable in every position.

    Raises:
      DataError: vocab_size cannot hold the characters.
    """
    head = list(reserved)
    taken = set(head)
    chars = set()
    pieces = []
    for token in learned:
        if token in taken:
            continue
        if len(token) == 1:
            chars.add(token)
        elif len(token) == 3 and token.startswith("##"):
            chars.add(token[2:])
        else:
            pieces.append(token)
    ordered = sorted(chars)
    tail = ["##" + c for c in ordered if _can_continue_a_word(c)]
    keep = vocab_size - len(head) - len(ordered) - len(tail)
    if keep < 0:
        raise DataError(f"--vocab_size={vocab_size} cannot hold the {len(ordered)} distinct characters of the "
                        f"sample ({len(head) + len(ordered) + len(tail)} tokens with the special and ## forms); "
                        f"raise --vocab_size")
    return head + ordered + pieces[:keep] + tail


def learn_wordpiece(counts: Dict[str, int], vocab_size: int, min_count: int) -> List[str]:
    """Runs the `tokenizers` WordPiece trainer on counted words; returns the laid-out vocabulary."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers  # pylint: disable=import-outside-toplevel

    reserved = list(SPECIAL_TOKENS)
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=MAX_CHARS_PER_WORD))
    # The words are already normalised and split; the trainer only needs to separate the copies.
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    # The trainer breaks ties between equally frequent merges by token id, and numbers the `##`
    # characters in the order a hash map hands it the words, which changes from run to run.
    # Registered up front (as tokens that are never split), they get fixed ids, and the same
    # counts always give the same vocabulary.
    continuations = sorted({c for word in counts for c in word[1:]})
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=min_count,
        special_tokens=reserved + ["##" + c for c in continuations],
        continuing_subword_prefix="##", show_progress=False)
    tok.train_from_iterator(_repeat_words(counts), trainer)
    vocab = tok.get_vocab()
    return _layout(sorted(vocab, key=vocab.get), vocab_size, reserved)


def build_vocab(corpus: Sequence[str], vocab_size: int, output: str, *, lower_case: bool = True,
                strip_accents: Optional[bool] = None, sample_lines: int = 1_000_000, seed: int = 0,
                min_count: int = 10, learner: str = "tokenizers",
                log: Callable[[str], None] = print) -> List[str]:
    """Learns a WordPiece vocabulary and writes it one token per line.

    Args:
      corpus: text files (plain or .gz), directories or globs.
      vocab_size: target size, special tokens included (the learner may end
        below it when no piece is frequent enough; it never ends above it).
      output: vocab.txt path (written to a temp name, then renamed).
      lower_case: lower-case before learning (must match the data builder).
      strip_accents: strip accents; None follows lower_case.
      sample_lines: reservoir sample size (0 = all lines, streamed).
      min_count: the fewest occurrences a piece needs to enter the
        vocabulary (the trainer's `min_frequency`: a merge is made only for a
        pair seen at least this often); characters always enter. On a small
        corpus 10 stops the learner far below vocab_size (words spelled
        piece by piece); 2 lets it reach the size.
      seed: sampling seed.
      learner: "tokenizers" (the Hugging Face WordPiece trainer, fast) or
        "bert_vocab" (tensorflow-text's top-down learner: keeps frequent words
        whole on corpora of a few thousand words; slow on large ones).
      log: receives one-line status messages.

    Returns:
      The vocabulary tokens.

    Raises:
      DataError: bad corpus, vocab_size, min_count or output path.
    """
    started = time.time()
    if learner not in LEARNERS:
        raise DataError(f"--learner={learner!r} is unknown; use one of {', '.join(LEARNERS)}")
    if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
        raise DataError(f"--min_count={min_count!r} is invalid; use an integer >= 1")
    if vocab_size < len(SPECIAL_TOKENS) + 1:
        raise DataError(f"--vocab_size={vocab_size} is too small; use at least {len(SPECIAL_TOKENS) + 1}")
    files = expand_corpus(corpus)
    has_text = False
    for path in files:
        has_text = check_text_file(path) or has_text
    if not has_text:
        raise DataError(f"corpus is empty: {len(files)} file(s) hold no non-blank line; "
                        f"pass files with one sentence or paragraph per line")
    out_dir = os.path.dirname(os.path.abspath(output)) if "://" not in output else None
    if out_dir is not None and os.path.isdir(output):
        raise DataError(f"cannot write --output {output!r}: it is a directory; pass the path of the file "
                        f"to write, e.g. {os.path.join(output, 'vocab.txt')!r}")
    # Not created here: the directory must exist and take a new file (a probe, removed).
    if out_dir is not None and (not os.path.isdir(out_dir) or output_dir_problem(out_dir)):
        raise DataError(f"cannot write --output {output!r}: {out_dir!r} is not a writable directory; "
                        f"create it or choose another path")

    stats = ReadStats()
    num_lines = [0]

    def counted(lines: Iterable[str]) -> Iterator[str]:
        for line in lines:
            num_lines[0] += 1
            yield line

    if sample_lines > 0:
        lines: Iterable[str] = sample_corpus_lines(files, sample_lines, seed, stats)
    else:
        lines = iter_corpus_lines(files, stats)  # nothing held but the counts
    strip = resolve_strip_accents(lower_case, strip_accents)
    if learner == "bert_vocab":
        vocab = _layout(learn_bert_vocab(list(counted(lines)), vocab_size, min_count, lower_case, strip),
                        vocab_size, list(SPECIAL_TOKENS))
        steps = f"tensorflow-text learner {time.time() - started:.1f}s"
    else:
        raw = count_raw_words(counted(lines))
        counted_at = time.time()
        counts = pre_tokenized_counts(raw, lower_case, strip)
        del raw
        normalised_at = time.time()
        vocab = learn_wordpiece(counts, vocab_size, min_count)
        steps = (f"reading and counting words {counted_at - started:.1f}s, normalising them "
                 f"({len(counts):,} distinct) {normalised_at - counted_at:.1f}s, WordPiece training "
                 f"{time.time() - normalised_at:.1f}s")
    if len(set(vocab)) != len(vocab):
        raise DataError("the WordPiece learner returned duplicate tokens; report this corpus as a bug")

    _write_lines(output, vocab)
    log(f"wrote {output}: {len(vocab)} tokens (asked {vocab_size}) learned from {num_lines[0]:,} lines "
        f"of {len(files)} file(s) in {time.time() - started:.1f}s ({steps})")
    if len(vocab) < vocab_size:
        log(f"note: the corpus sample supports only {len(vocab)} tokens at --min_count={min_count}; set "
            f"vocab_size={len(vocab)} in the model config (or use a larger sample or a lower --min_count)")
    for path, n in sorted(stats.invalid_bytes.items()):
        log(f"warning: {path}: {n} invalid UTF-8 byte(s) replaced with U+FFFD "
            f"(convert the file to UTF-8 to keep those characters)")
    return vocab


def _write_lines(output: str, tokens: Sequence[str]) -> None:
    """One token per line, through a temporary name so a failed write leaves nothing behind.

    Raises:
      DataError: the write failed (full disk, permissions), with the reason.
    """
    text = "".join(t + "\n" for t in tokens)
    if "://" not in output:
        from electra_tf.data import fs  # pylint: disable=import-outside-toplevel

        errors: tuple = (OSError,)
        write = lambda: fs.write_text_atomic(output, text)  # noqa: E731  (removes its temp file)
    else:
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        errors = (OSError, tf.errors.OpError)

        def write():
            tmp = output + ".tmp"
            try:
                with tf.io.gfile.GFile(tmp, "w") as f:
                    f.write(text)
                tf.io.gfile.rename(tmp, output, overwrite=True)
            except BaseException:
                if tf.io.gfile.exists(tmp):
                    tf.io.gfile.remove(tmp)
                raise
    try:
        write()
    except errors as e:  # pylint: disable=catching-non-exception
        reason = str(getattr(e, "message", None) or e).strip().splitlines()[0]
        raise DataError(f"cannot write --output {output!r} ({reason}); free disk space or choose "
                        f"another path") from None


def define_flags(flag_values=None) -> None:
    """Defines this CLI's absl flags (not at import time: the library imports us)."""
    from absl import flags  # pylint: disable=import-outside-toplevel

    fv = flag_values or flags.FLAGS
    flags.DEFINE_list("corpus", None, "Text files (plain or .gz), directories or globs.", flag_values=fv)
    flags.DEFINE_integer("vocab_size", 30522, "Vocabulary size, special tokens included.", flag_values=fv)
    flags.DEFINE_string("output", None, "Where to write vocab.txt.", flag_values=fv)
    flags.DEFINE_bool("lower_case", True, "Lower-case the text (--no_lower_case for cased).", flag_values=fv)
    flags.DEFINE_enum("strip_accents", "auto", ["auto", "true", "false"],
                      "Strip accents; auto follows --lower_case.", flag_values=fv)
    flags.DEFINE_integer("sample_lines", 1_000_000, "Reservoir sample size (0: all lines).", flag_values=fv)
    flags.DEFINE_integer("seed", 0, "Sampling seed.", flag_values=fv)
    flags.DEFINE_enum("learner", "tokenizers", list(LEARNERS),
                      "WordPiece learner: tokenizers (fast) or bert_vocab (keeps frequent words whole "
                      "on small corpora; slow on large ones).", flag_values=fv)
    flags.DEFINE_integer("min_count", 10, "Fewest occurrences a piece needs to enter the vocabulary "
                         "(characters always do; 2 for corpora of under ~1M words).", flag_values=fv)


def main(argv) -> None:
    from absl import flags  # pylint: disable=import-outside-toplevel

    from electra_tf.cli import exit_with_error  # pylint: disable=import-outside-toplevel

    del argv
    fv = flags.FLAGS
    if not fv.output:
        exit_with_error("--output is required (where to write vocab.txt)")
    strip = {"auto": None, "true": True, "false": False}[fv.strip_accents]
    try:
        build_vocab(fv.corpus, fv.vocab_size, fv.output, lower_case=fv.lower_case,
                    strip_accents=strip, sample_lines=fv.sample_lines, seed=fv.seed,
                    min_count=fv.min_count, learner=fv.learner)
    except (DataError, VocabError) as e:
        exit_with_error(str(e))


if __name__ == "__main__":
    from electra_tf.cli import run_absl

    define_flags()
    run_absl(main)
