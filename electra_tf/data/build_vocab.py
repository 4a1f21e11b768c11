"""Learn a WordPiece vocabulary from a (sample of a) text corpus.

    python -m electra_tf.data.build_vocab --corpus 'corpus/*.txt' \\
        --vocab_size 30522 --output_file vocab.txt [--nodo_lower_case] [--strip_accents false] \\
        [--normalization bert] [--sample_lines 1000000]

Learns with Hugging Face `tokenizers`' WordPiece trainer (Rust). Text is
normalised and split by the shards' own ops (electra_tf.data.wordpiece_ops)
under the text normalisation asked (electra_tf.data.normalization: by default
the reference BERT rules, lower-cased with accents stripped), which is
recorded beside the vocabulary in `<output_file>.normalization.json`; the data
builder reads it from there.

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

This module is the command line and the pipeline (sample, count, learn, write).
The steps live in word_counts.py (normalised word counts), wordpiece_learner.py
(the `tokenizers` trainer and the vocab.txt layout), bert_vocab_learner.py
(tensorflow-text's learner) and hf_bert_tokenizer.py (the Hugging Face BERT
tokenizer for a vocab.txt).
"""

from __future__ import annotations

import os
import random
import time
from typing import Callable, Iterable, Iterator, List, Optional, Sequence, Tuple

from absl import flags

from electra_tf.cli import exit_with_error, parse_flags, run_absl
from electra_tf import fileio
from electra_tf.data.bert_vocab_learner import learn_bert_vocab
from electra_tf.data.corpus import ReadStats, iter_lines, text_corpus_files
from electra_tf.data.data_errors import DataError
# hf_tokenizer is imported from here by tests and named here in docs/data.md.
from electra_tf.data.hf_bert_tokenizer import hf_tokenizer  # noqa: F401  pylint: disable=unused-import
from electra_tf.data.normalization import DEFAULT_MODE, MODES, TextNormalization, vocab_record_path, vocab_record_text
from electra_tf.data.vocab import SPECIAL_TOKENS, VocabError
from electra_tf.data.word_counts import count_raw_words, pre_tokenized_counts
from electra_tf.data.wordpiece_learner import layout_vocab, learn_wordpiece
from electra_tf.paths import output_dir_problem

MAX_LINE_BYTES = 1 << 16
# `build_vocab(learner=...)`: the tokenizers trainer, or tensorflow-text's (bert_vocab_learner.py).
LEARNERS = ("tokenizers", "bert_vocab")
# The layout's name before it moved to wordpiece_learner.py (tests import it from here).
_layout = layout_vocab


def iter_corpus_lines(files: Sequence[str], stats: Optional[ReadStats] = None) -> Iterator[str]:
    """Every non-blank line of `files`, stripped, streamed (plain or .gz files)."""
    stats = stats if stats is not None else ReadStats()
    for path in files:
        for line in iter_lines(path, 0, None, stats, MAX_LINE_BYTES):
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


def build_vocab(corpus: Sequence[str], vocab_size: int, output: str, *, lower_case: bool = True,
                strip_accents: Optional[bool] = None, sample_lines: int = 1_000_000, seed: int = 0,
                min_count: int = 10, learner: str = "tokenizers", mode: str = DEFAULT_MODE,
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
      mode: the text normalisation's mode, "bert" (the reference's rules) or
        "nfkc_casefold" (the first releases'); see electra_tf/data/normalization.py.
      log: receives one-line status messages.

    Returns:
      The vocabulary tokens (also written: `output`, and the normalisation in
      `output` + ".normalization.json").

    Raises:
      DataError: bad corpus, vocab_size, min_count or output path.
    """
    started = time.time()
    normalization = _checked_arguments(vocab_size, lower_case, strip_accents, min_count, learner, mode)
    files = _corpus_files(corpus)
    _check_output_file(output)
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
    vocab, steps = _learn(counted(lines), vocab_size, min_count, learner, normalization, started)
    _write_lines(output, vocab)
    _write_text(vocab_record_path(output), vocab_record_text(normalization), "--output_file")
    log(f"wrote {output}: {len(vocab)} tokens (asked {vocab_size}) learned from {num_lines[0]:,} lines "
        f"of {len(files)} file(s) in {time.time() - started:.1f}s ({steps}); text normalisation "
        f"({normalization.describe()}) recorded in {vocab_record_path(output)}")
    if len(vocab) < vocab_size:
        log(f"note: the corpus sample supports only {len(vocab)} tokens at --min_count={min_count}; set "
            f"vocab_size={len(vocab)} in the model config (or use a larger sample or a lower --min_count)")
    for path, n in sorted(stats.invalid_bytes.items()):
        log(f"warning: {path}: {n} invalid UTF-8 byte(s) replaced with U+FFFD "
            f"(convert the file to UTF-8 to keep those characters)")
    return vocab


def _checked_arguments(vocab_size: int, lower_case: bool, strip_accents: Optional[bool], min_count: int,
                       learner: str, mode: str) -> TextNormalization:
    """build_vocab's text normalisation, after checking its mode, learner, min_count and vocab_size.

    Raises:
      DataError: the first of them that is unknown or out of range.
    """
    if mode not in MODES:
        raise DataError(f"--normalization={mode!r} is unknown; use one of {', '.join(MODES)}")
    normalization = TextNormalization.create(lower_case, strip_accents, mode)
    if learner not in LEARNERS:
        raise DataError(f"--learner={learner!r} is unknown; use one of {', '.join(LEARNERS)}")
    if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
        raise DataError(f"--min_count={min_count!r} is invalid; use an integer >= 1")
    if vocab_size < len(SPECIAL_TOKENS) + 1:
        raise DataError(f"--vocab_size={vocab_size} is too small; use at least {len(SPECIAL_TOKENS) + 1}")
    return normalization


def _corpus_files(corpus: Sequence[str]) -> List[str]:
    """The corpus's files, each checked to be text.

    Raises:
      DataError: a missing, binary or non-UTF-8 file, or no non-blank line in any.
    """
    return text_corpus_files(corpus, lambda files: (
        f"corpus is empty: {len(files)} file(s) hold no non-blank line; "
        f"pass files with one sentence or paragraph per line"))


def _check_output_file(output: str) -> None:
    """Refuses an output path that is a directory or whose directory is missing or read-only."""
    out_dir = os.path.dirname(os.path.abspath(output)) if "://" not in output else None
    if out_dir is not None and os.path.isdir(output):
        raise DataError(f"cannot write --output_file {output!r}: it is a directory; pass the path of the file "
                        f"to write, e.g. {os.path.join(output, 'vocab.txt')!r}")
    # Not created here: the directory must exist and take a new file (a probe, removed).
    if out_dir is not None and (not os.path.isdir(out_dir) or output_dir_problem(out_dir)):
        raise DataError(f"cannot write --output_file {output!r}: {out_dir!r} is not a writable directory; "
                        f"create it or choose another path")


def _learn(lines: Iterable[str], vocab_size: int, min_count: int, learner: str,
           normalization: TextNormalization, started: float) -> Tuple[List[str], str]:
    """The vocabulary `learner` learns from `lines`, and the time its steps took (for the log line).

    Raises:
      DataError: the learner returned a token twice.
    """
    if learner == "bert_vocab":
        vocab = layout_vocab(learn_bert_vocab(list(lines), vocab_size, min_count, normalization.lower_case,
                                              normalization.strip_accents, normalization),
                             vocab_size, list(SPECIAL_TOKENS))
        steps = f"tensorflow-text learner {time.time() - started:.1f}s"
    else:
        raw = count_raw_words(lines)
        counted_at = time.time()
        counts = pre_tokenized_counts(raw, normalization=normalization)
        del raw
        normalised_at = time.time()
        vocab = learn_wordpiece(counts, vocab_size, min_count)
        steps = (f"reading and counting words {counted_at - started:.1f}s, normalising them "
                 f"({len(counts):,} distinct) {normalised_at - counted_at:.1f}s, WordPiece training "
                 f"{time.time() - normalised_at:.1f}s")
    if len(set(vocab)) != len(vocab):
        raise DataError("the WordPiece learner returned duplicate tokens; report this corpus as a bug")
    return vocab, steps


def _write_lines(output: str, tokens: Sequence[str]) -> None:
    """One token per line, through a temporary name so a failed write leaves nothing behind.

    Raises:
      DataError: the write failed (full disk, permissions), with the reason.
    """
    _write_text(output, "".join(t + "\n" for t in tokens), "--output_file")


def _write_text(output: str, text: str, flag: str) -> None:
    """`text` to `output` through a temporary name; DataError naming `flag` if the write fails."""
    if "://" not in output:
        errors: tuple = (OSError,)
        write = lambda: fileio.write_text_atomic(output, text)  # noqa: E731  (removes its temp file)
    else:
        # Lazy: TensorFlow (seconds to import) only for remote (gs://) outputs.
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
        raise DataError(f"cannot write {flag} {output!r} ({reason}); free disk space or choose "
                        f"another path") from None


RENAMED = {"output": "output_file", "lower_case": "do_lower_case"}  # old spelling -> new (see electra_tf/cli.py)


def define_flags(flag_values=None) -> None:
    """Defines this CLI's absl flags (not at import time: the library imports us)."""
    fv = flags.FLAGS if flag_values is None else flag_values
    flags.DEFINE_list("corpus", None, "Text files (plain or .gz), directories or globs.", flag_values=fv)
    flags.DEFINE_integer("vocab_size", 30522, "Vocabulary size, special tokens included.", flag_values=fv)
    flags.DEFINE_string("output_file", None, "Where to write vocab.txt.", flag_values=fv)
    flags.DEFINE_bool("do_lower_case", True, "Lower-case the text (--nodo_lower_case for cased).", flag_values=fv)
    flags.DEFINE_enum("strip_accents", "auto", ["auto", "true", "false"],
                      "Strip accents; auto follows --do_lower_case.", flag_values=fv)
    flags.DEFINE_enum("normalization", DEFAULT_MODE, list(MODES),
                      "Text normalisation rules: bert (the reference BERT/ELECTRA tokenizer's, which Hugging "
                      "Face's BertTokenizer follows) or nfkc_casefold (the first releases': NFKC case folding).",
                      flag_values=fv)
    flags.DEFINE_integer("sample_lines", 1_000_000, "Reservoir sample size (0: all lines).", flag_values=fv)
    flags.DEFINE_integer("seed", 0, "Sampling seed.", flag_values=fv)
    flags.DEFINE_enum("learner", "tokenizers", list(LEARNERS),
                      "WordPiece learner: tokenizers (fast) or bert_vocab (keeps frequent words whole "
                      "on small corpora; slow on large ones).", flag_values=fv)
    flags.DEFINE_integer("min_count", 10, "Fewest occurrences a piece needs to enter the vocabulary "
                         "(characters always do; 2 for corpora of under ~1M words).", flag_values=fv)


def run(fv) -> int:
    """Learns the vocabulary, from the parsed flags `fv`; returns the exit code."""
    if not fv.output_file:
        exit_with_error("--output_file is required (where to write vocab.txt)")
    strip = {"auto": None, "true": True, "false": False}[fv.strip_accents]
    try:
        build_vocab(fv.corpus, fv.vocab_size, fv.output_file, lower_case=fv.do_lower_case,
                    strip_accents=strip, sample_lines=fv.sample_lines, seed=fv.seed,
                    min_count=fv.min_count, learner=fv.learner, mode=fv.normalization)
    except (DataError, VocabError) as e:
        exit_with_error(str(e))
    return 0


def main(argv=None) -> int:
    """`python -m electra_tf.data.build_vocab` in-process: argv holds the flags only."""
    return run(parse_flags(define_flags, argv, prog="electra_tf.data.build_vocab", renamed=RENAMED))


if __name__ == "__main__":
    run_absl(run, define_flags, renamed=RENAMED)
