"""Learn a WordPiece vocabulary from a (sample of a) text corpus.

    python -m electra_tf.data.build_vocab --corpus 'corpus/*.txt' \\
        --vocab_size 30522 --output vocab.txt [--no_lower_case] [--sample_lines 1000000]

Uses tensorflow-text's `bert_vocab_from_dataset` (the BERT basic tokenizer and
the WordPiece learner). A large corpus is streamed once and reservoir-sampled
to --sample_lines lines, so memory is bounded by the sample, not the corpus.
[PAD] [UNK] [CLS] [SEP] [MASK] come first ([PAD] = 0, as the shards assume).
"""

from __future__ import annotations

import os
import random
import sys
import time
from typing import Callable, List, Optional, Sequence

from electra_tf.data.corpus import ReadStats, check_text_file, expand_corpus, file_size, iter_lines
from electra_tf.data.errors import DataError
from electra_tf.data.tokenizer import resolve_strip_accents
from electra_tf.data.vocab import SPECIAL_TOKENS, VocabError
from electra_tf.paths import output_dir_problem

MAX_LINE_BYTES = 1 << 16


def sample_corpus_lines(files: Sequence[str], sample_lines: int, seed: int = 0,
                        stats: Optional[ReadStats] = None) -> List[str]:
    """Reservoir-samples non-blank lines, streaming every file once.

    Args:
      files: corpus files.
      sample_lines: lines to keep (0 keeps all: only for corpora that fit in memory).
      seed: seeds the sample.
      stats: optional ReadStats collecting replaced bytes / cut lines.

    Returns:
      The sampled lines in corpus order.
    """
    stats = stats if stats is not None else ReadStats()
    rng = random.Random(seed)
    reservoir: List[tuple] = []
    seen = 0
    for path in files:
        for line in iter_lines(path, 0, file_size(path), stats, MAX_LINE_BYTES):
            line = line.strip()
            if not line:
                continue
            if sample_lines <= 0 or len(reservoir) < sample_lines:
                reservoir.append((seen, line))
            else:
                j = rng.randint(0, seen)
                if j < sample_lines:
                    reservoir[j] = (seen, line)
            seen += 1
    reservoir.sort(key=lambda item: item[0])
    return [line for _, line in reservoir]


def _fit_size(vocab: List[str], vocab_size: int, reserved: Sequence[str]) -> List[str]:
    """Trims an over-long learned vocab, dropping its last (rarest) whole words.

    The learner's output is: reserved tokens, single characters, learned pieces
    (most useful first), then '##'-prefixed single characters. Only learned
    pieces are dropped, so every character stays representable.
    """
    if len(vocab) <= vocab_size:
        return vocab
    head = list(reserved)
    body = vocab[len(head):]
    chars = [t for t in body if len(t) == 1]
    tail = [t for t in body if t.startswith("##") and len(t) == 3]
    pieces = [t for t in body if t not in set(chars) and t not in set(tail)]
    keep = vocab_size - len(head) - len(chars) - len(tail)
    if keep < 0:
        return vocab  # cannot trim without losing characters; report the real size
    return head + chars + pieces[:keep] + tail


def build_vocab(corpus: Sequence[str], vocab_size: int, output: str, *, lower_case: bool = True,
                strip_accents: Optional[bool] = None, sample_lines: int = 1_000_000, seed: int = 0,
                min_count: int = 10, log: Callable[[str], None] = print) -> List[str]:
    """Learns a WordPiece vocabulary and writes it one token per line.

    Args:
      corpus: text files, directories or globs.
      vocab_size: target size, special tokens included (the learner may end a
        little below it; it never ends above it).
      output: vocab.txt path (written to a temp name, then renamed).
      lower_case: lower-case before learning (must match the data builder).
      strip_accents: strip accents; None follows lower_case.
      sample_lines: reservoir sample size (0 = all lines).
      min_count: the fewest occurrences a word or piece needs to enter the
        vocabulary (the learner's `lower_thresh`; 10 is tensorflow-text's
        default). On a small corpus 10 stops the learner far below vocab_size
        (485 pieces for vocab_size 2000 on the 13k-word sample corpus, most
        words spelled letter by letter); 2 lets it reach the size.
      seed: sampling seed.
      log: receives one-line status messages.

    Returns:
      The vocabulary tokens.

    Raises:
      DataError: bad corpus, vocab_size or output path.
    """
    started = time.time()
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
    lines = sample_corpus_lines(files, sample_lines, seed, stats)
    strip = resolve_strip_accents(lower_case, strip_accents)

    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tensorflow_text as tf_text  # pylint: disable=import-outside-toplevel
    from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset as bert_vocab  # pylint: disable=import-outside-toplevel

    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(lines, tf.string)).batch(1024)
    if lower_case and strip:
        params = {"lower_case": True}  # BERT's own lower-case + NFD accent stripping
    else:
        # The two non-standard combinations: normalize as the data builder does.
        def normalize(text):
            if lower_case:
                text = tf_text.case_fold_utf8(text)
            if strip:
                text = tf.strings.regex_replace(tf_text.normalize_utf8(text, "NFD"), r"\p{Mn}", "")
            return text

        dataset = dataset.map(normalize)
        params = {"lower_case": False}
    reserved = list(SPECIAL_TOKENS)
    vocab = bert_vocab.bert_vocab_from_dataset(
        dataset, vocab_size=vocab_size, reserved_tokens=reserved,
        bert_tokenizer_params=params, learn_params={"lower_thresh": min_count})
    vocab = _fit_size(list(vocab), vocab_size, reserved)
    if len(set(vocab)) != len(vocab):
        raise DataError("the WordPiece learner returned duplicate tokens; report this corpus as a bug")

    tmp = output + ".tmp"
    try:
        with tf.io.gfile.GFile(tmp, "w") as f:
            f.write("".join(t + "\n" for t in vocab))
        tf.io.gfile.rename(tmp, output, overwrite=True)
    except (OSError, tf.errors.OpError) as e:
        if tf.io.gfile.exists(tmp):
            tf.io.gfile.remove(tmp)
        reason = str(getattr(e, "message", None) or e).strip().splitlines()[0]
        raise DataError(f"cannot write --output {output!r} ({reason}); free disk space or choose "
                        f"another path") from None
    log(f"wrote {output}: {len(vocab)} tokens (asked {vocab_size}) learned from {len(lines):,} lines "
        f"of {len(files)} file(s) in {time.time() - started:.1f}s")
    if len(vocab) < vocab_size:
        log(f"note: the corpus sample supports only {len(vocab)} tokens; set vocab_size={len(vocab)} "
            f"in the model config (or use a larger sample)")
    for path, n in sorted(stats.invalid_bytes.items()):
        log(f"warning: {path}: {n} invalid UTF-8 byte(s) replaced with U+FFFD "
            f"(convert the file to UTF-8 to keep those characters)")
    return vocab


def define_flags(flag_values=None) -> None:
    """Defines this CLI's absl flags (not at import time: the library imports us)."""
    from absl import flags  # pylint: disable=import-outside-toplevel

    fv = flag_values or flags.FLAGS
    flags.DEFINE_list("corpus", None, "Text files, directories or globs.", flag_values=fv)
    flags.DEFINE_integer("vocab_size", 30522, "Vocabulary size, special tokens included.", flag_values=fv)
    flags.DEFINE_string("output", None, "Where to write vocab.txt.", flag_values=fv)
    flags.DEFINE_bool("lower_case", True, "Lower-case the text (--no_lower_case for cased).", flag_values=fv)
    flags.DEFINE_enum("strip_accents", "auto", ["auto", "true", "false"],
                      "Strip accents; auto follows --lower_case.", flag_values=fv)
    flags.DEFINE_integer("sample_lines", 1_000_000, "Reservoir sample size (0: all lines).", flag_values=fv)
    flags.DEFINE_integer("seed", 0, "Sampling seed.", flag_values=fv)
    flags.DEFINE_integer("min_count", 10, "Fewest occurrences a word or piece needs to enter the "
                         "vocabulary (2 for corpora of under ~1M words).", flag_values=fv)


def main(argv) -> None:
    from absl import flags  # pylint: disable=import-outside-toplevel

    del argv
    fv = flags.FLAGS
    if not fv.output:
        sys.exit("error: --output is required (where to write vocab.txt)")
    strip = {"auto": None, "true": True, "false": False}[fv.strip_accents]
    try:
        build_vocab(fv.corpus, fv.vocab_size, fv.output, lower_case=fv.lower_case,
                    strip_accents=strip, sample_lines=fv.sample_lines, seed=fv.seed,
                    min_count=fv.min_count)
    except (DataError, VocabError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    from electra_tf.cli import run_absl

    define_flags()
    run_absl(main)
