"""Planted-bug (mutation) run over the pre-training objectives and the pre-trainer's step.

Each mutant is one textual change to a copy of the repository (never the
working tree): the script copies `electra_tf/`, `tests/`, `configs/`, `data/`
and the setup files to a temporary directory, links `../shared` beside it, and
for every mutant applies the change, runs the tests that cover that file with
`PYTHONPATH` pointing at the copy, and restores the file. A mutant is *killed*
when a test fails, *survives* when all pass. The paper-defined mutants (masking
counts, 85/15 and 80/10/10, the label rule, lambda, the loss normalisers,
shared embeddings, no gradient through sampling) must all be killed; the script
exits 1 when one survives.

Usage:
    python scripts/ci/mutation_check.py                 # every mutant
    python scripts/ci/mutation_check.py --only label    # mutants whose name contains "label" (repeatable)
    python scripts/ci/mutation_check.py --list          # the mutants, without running
    python scripts/ci/mutation_check.py --fast          # only the fast tier's tests (-m "not large")

A killed mutant takes some 20-40 s on 2 free cores (one pytest process each, `-x`), a
survivor its whole test set. `--fast` leaves out the tests marked `large` (setup.cfg), as
`python -m pytest -m "not large"` does: it measures how many planted bugs the fast tier
alone catches (docs/contributing.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Tuple

REPO = Path(__file__).resolve().parents[2]
COPIED = ("electra_tf", "tests", "configs", "data", "setup.cfg", "pyproject.toml")

# Test sets (paths relative to the repository root): the unit tests of the objectives
# and of the step, cheap enough to run once per mutant (the suite's other tests,
# e.g. tests/pretrain/test_objectives.py, may kill more).
OBJECTIVE_TESTS = ["tests/objectives"]
STEP_TESTS = ["tests/pretrain/test_train_step.py", "tests/pretrain/test_accumulation.py"]
OTHER_OBJECTIVE_TESTS = ["tests/objectives/test_forward_wiring.py", "tests/pretrain/test_electric_gdes.py"]
# A mutant whose -k (or, under --fast, -m "not large") leaves no test to run survives: pytest's
# exit status 5 says nothing was checked, not that something failed.
NO_TEST_SELECTED = "no test selected"


@dataclass
class Mutant:
    name: str
    path: str  # file in the repository
    old: str  # text replaced (must occur exactly once)
    new: str
    paper: bool  # paper-defined behaviour: must be killed
    tests: List[str] = field(default_factory=lambda: list(OBJECTIVE_TESTS))
    note: str = ""
    select: str = "not mirrored"  # pytest -k: the two-replica tests only where replicas matter


MUTANTS: List[Mutant] = [
    # --- masking counts, candidates, 85/15 and 80/10/10 (objectives/masking.py, base.py)
    Mutant("masking count floor instead of round", "electra_tf/objectives/masking.py",
           "count = tf.cast(tf.round(num_tokens * mask_prob), tf.int32)",
           "count = tf.cast(tf.floor(num_tokens * mask_prob), tf.int32)", True),
    Mutant("masking count without the minimum of 1", "electra_tf/objectives/masking.py",
           "return tf.maximum(1, tf.minimum(max_predictions, count))",
           "return tf.maximum(0, tf.minimum(max_predictions, count))", True),
    Mutant("masking count not capped at P", "electra_tf/objectives/masking.py",
           "return tf.maximum(1, tf.minimum(max_predictions, count))",
           "return tf.maximum(1, count)", True),
    Mutant("special tokens may be masked", "electra_tf/objectives/masking.py",
           "        allowed &= tf.not_equal(input_ids, token_id)\n",
           "        allowed &= tf.not_equal(input_ids, -1)\n", True),
    Mutant("count not capped by the candidates", "electra_tf/objectives/masking.py",
           "    count = tf.minimum(\n        num_to_predict(input_mask, max_predictions, mask_prob),\n"
           "        tf.reduce_sum(tf.cast(candidates, tf.int32), axis=-1),\n    )",
           "    count = num_to_predict(input_mask, max_predictions, mask_prob)", True),
    Mutant("electra keeps no original (100% [MASK])", "electra_tf/objectives/base.py",
           "keep_original_prob=BERT_KEEP_PROB if bert else cfg.mask_token_keep_prob",
           "keep_original_prob=BERT_KEEP_PROB if bert else 0.0", True),
    Mutant("bert split 80/10/10 -> 70/20/10", "electra_tf/objectives/base.py",
           "BERT_KEEP_PROB, BERT_RANDOM_PROB = 0.1, 0.1", "BERT_KEEP_PROB, BERT_RANDOM_PROB = 0.1, 0.2", True),
    Mutant("kept and masked swapped", "electra_tf/objectives/masking.py",
           "to_mask = fate >= keep_original_prob + random_token_prob",
           "to_mask = fate < keep_original_prob + random_token_prob", True),
    Mutant("unused slots also written", "electra_tf/objectives/masking.py",
           "hits = tf.one_hot(positions, seq_len, dtype=tf.int32) * tf.cast(weights > 0, tf.int32)[..., None]",
           "hits = tf.one_hot(positions, seq_len, dtype=tf.int32)", True),
    Mutant("random tokens from a narrower range", "electra_tf/objectives/masking.py",
           "row_uniform(seed_random, row_ids, [max_predictions]) * vocab_size, tf.int32)",
           "row_uniform(seed_random, row_ids, [max_predictions]) * (vocab_size // 2), tf.int32)", True),
    # --- sampling
    Mutant("temperature multiplies", "electra_tf/objectives/sampling.py",
           "return logits / temperature + gumbel_noise(seed, row_ids, shape)",
           "return logits * temperature + gumbel_noise(seed, row_ids, shape)", False),
    Mutant("sampling ignores the logits", "electra_tf/objectives/sampling.py",
           "return logits / temperature + gumbel_noise(seed, row_ids, shape)",
           "return 0.0 * logits + gumbel_noise(seed, row_ids, shape)", True),
    Mutant("no stop_gradient before sampling", "electra_tf/objectives/sampling.py",
           "logits = tf.stop_gradient(tf.cast(logits, tf.float32))",
           "logits = tf.cast(logits, tf.float32)", True,
           note="equivalent: the sample is an argmax (integer ids), through which no gradient can flow"),
    Mutant("disallow_correct ignored", "electra_tf/objectives/sampling.py",
           "    if disallow_ids is not None:  # -1000", "    if False:  # -1000", False),
    Mutant("sampling stream = masking stream", "electra_tf/objectives/base.py",
           "SEED_MASKING, SEED_SAMPLING = 1, 4", "SEED_MASKING, SEED_SAMPLING = 1, 2", False,
           tests=["tests/pretrain/test_seed_streams.py"]),
    # --- labels, losses, lambda, normalisers
    Mutant("every sampled slot labelled replaced", "electra_tf/objectives/electra.py",
           "labels = losses.replaced_labels(disc_input_ids, input_ids, input_mask)",
           "labels = tf.cast(masking.position_weights(masked.positions, masked.weights, "
           "input_ids.shape[1]), tf.int32)", True),
    Mutant("label rule: differs without the input mask", "electra_tf/objectives/losses.py",
           "return tf.cast(differs, tf.int32) * tf.cast(input_mask, tf.int32)",
           "return tf.cast(differs, tf.int32)", True),
    Mutant("labels inverted", "electra_tf/objectives/losses.py",
           "differs = tf.not_equal(tf.cast(discriminator_ids, tf.int32), tf.cast(original_ids, tf.int32))",
           "differs = tf.equal(tf.cast(discriminator_ids, tf.int32), tf.cast(original_ids, tf.int32))", True),
    Mutant("disc loss divided by the masked count", "electra_tf/objectives/electra.py",
           "return tf.cast(input_mask, tf.float32), denominators[1]",
           "return tf.cast(input_mask, tf.float32), denominators[0]", True),
    Mutant("disc loss over the masked positions only", "electra_tf/objectives/electra.py",
           "return tf.cast(input_mask, tf.float32), denominators[1]",
           "return masking.position_weights(masked.positions, masked.weights, input_mask.shape[1]), "
           "denominators[1]", True),
    Mutant("disc loss ignores the weights", "electra_tf/objectives/losses.py",
           "return tf.reduce_sum(per_token * weights) / (denominator + 1e-6)\n\n\ndef replaced_labels",
           "return tf.reduce_sum(per_token) / (denominator + 1e-6)\n\n\ndef replaced_labels", True),
    Mutant("mlm loss divided by the real-token count", "electra_tf/objectives/base.py",
           "denominator=denominators[0], fused=self.config.fused_kernels)",
           "denominator=denominators[1], fused=self.config.fused_kernels)", True),
    Mutant("mlm loss ignores the slot weights", "electra_tf/objectives/losses.py",
           "return tf.reduce_sum(per_slot * weights) / (denominator + 1e-6)",
           "return tf.reduce_sum(per_slot) / (denominator + 1e-6)", True),
    Mutant("denominators: masked count from the raw formula", "electra_tf/objectives/base.py",
           "return tf.stack([tf.reduce_sum(tf.cast(count, tf.float32)),",
           "return tf.stack([tf.reduce_sum(tf.cast(masking.num_to_predict(input_mask, "
           "cfg.predictions_per_seq, cfg.mask_prob), tf.float32)),", True),
    Mutant("lambda ignored (disc weight 1)", "electra_tf/objectives/losses.py",
           "return gen_weight * mlm_loss + disc_weight * disc_loss",
           "return gen_weight * mlm_loss + disc_loss", True),
    Mutant("gen weight ignored", "electra_tf/objectives/losses.py",
           "return gen_weight * mlm_loss + disc_weight * disc_loss",
           "return mlm_loss + disc_weight * disc_loss", True),
    Mutant("default lambda 50 -> 40", "electra_tf/config.py",
           "disc_weight: float = 50.0", "disc_weight: float = 40.0", True,
           tests=["tests/objectives/test_forward_wiring.py", "tests/objectives/test_sampling_and_losses.py"]),
    Mutant("sigmoid cross-entropy labels flipped", "electra_tf/objectives/losses.py",
           "labels=tf.cast(labels, tf.float32), logits=tf.cast(logits, tf.float32)\n    )",
           "labels=1.0 - tf.cast(labels, tf.float32), logits=tf.cast(logits, tf.float32)\n    )", True),
    # --- wiring of the electra forward
    Mutant("discriminator reads the masked input", "electra_tf/objectives/electra.py",
           "disc_logits = nets.discriminator_head(self.run_encoder(nets, disc_input_ids, inputs,",
           "disc_logits = nets.discriminator_head(self.run_encoder(nets, masked.input_ids, inputs,", True),
    Mutant("generator reads the unmasked input", "electra_tf/objectives/base.py",
           '{"input_ids": masked.input_ids, "input_mask": inputs["input_mask"],',
           '{"input_ids": inputs["input_ids"], "input_mask": inputs["input_mask"],', True),
    Mutant("samples written only at [MASK]ed slots", "electra_tf/objectives/electra.py",
           "masked.input_ids, masked.positions, sampled_ids, masked.weights)",
           "masked.input_ids, masked.positions, sampled_ids, "
           "masked.weights * tf.cast(tf.not_equal(masked.original_ids, "
           "tf.gather(masked.input_ids, masked.positions, batch_dims=1)), tf.float32))", True),
    Mutant("mlm targets are the masked input", "electra_tf/objectives/base.py",
           "return losses.masked_lm_loss(logits, masked.original_ids, masked.weights,",
           "return losses.masked_lm_loss(logits, tf.gather(masked.input_ids, masked.positions, "
           "batch_dims=1), masked.weights,", True),
    # --- the other objectives' rules
    Mutant("electra_15 normalised by real tokens", "electra_tf/objectives/electra_15.py",
           "return weights, denominators[0]", "return weights, denominators[1]", True),
    Mutant("electric labels by the replaced rule", "electra_tf/objectives/electric.py",
           "labels = tf.cast(masking.position_weights(masked.positions, masked.weights, seq_len),\n"
           "                         tf.int32)",
           "labels = losses.replaced_labels(disc_input_ids, input_ids, input_mask)", False,
           tests=OTHER_OBJECTIVE_TESTS),
    Mutant("electric prior log(n/k)", "electra_tf/objectives/electric.py",
           "+ math.log(mask_prob / (1.0 - mask_prob)))", "+ math.log((1.0 - mask_prob) / mask_prob))", False,
           tests=OTHER_OBJECTIVE_TESTS),
    Mutant("electric noise log-probs not stopped", "electra_tf/objectives/electric.py",
           "tf.stop_gradient(tf.cast(noise_log_probs, tf.float32))", "tf.cast(noise_log_probs, tf.float32)", False,
           tests=OTHER_OBJECTIVE_TESTS),
    Mutant("adversarial without baseline", "electra_tf/objectives/adversarial.py",
           "baseline = totals[0] / (totals[1] + 1e-6)", "baseline = 0.0 * totals[0]", False,
           tests=OTHER_OBJECTIVE_TESTS),
    # --- embeddings and the pre-trainer's step
    Mutant("embeddings not shared", "electra_tf/models/embedding_sharing.py",
           'if mode == "shared":\n        return embeddings, embeddings',
           'if mode == "shared":\n        return embeddings, build_embeddings(config, name="generator_embeddings")',
           True, tests=STEP_TESTS),
    Mutant("gdes without stop_gradient", "electra_tf/models/embedding_sharing.py",
           "return (tf.stop_gradient(tf.convert_to_tensor(self._base_table()))",
           "return (tf.convert_to_tensor(self._base_table())", True,
           tests=["tests/pretrain/test_electric_gdes.py"], select="gdes and not mirrored"),
    Mutant("step minimises the mlm loss only", "electra_tf/pretrain/pretrainer.py",
           'scaled_loss = self.optimizer.scale_loss(out["loss"])',
           'scaled_loss = self.optimizer.scale_loss(out["mlm_loss"])', True, tests=STEP_TESTS),
    Mutant("step draws the same masks every step", "electra_tf/pretrain/pretrainer.py",
           "tf.cast(self.optimizer.iterations, tf.int64)])", "tf.constant(0, tf.int64)])", False,
           tests=STEP_TESTS + ["tests/pretrain/test_seed_streams.py"]),
    Mutant("denominators not summed over replicas", "electra_tf/pretrain/pretrainer.py",
           "return sum_over_replicas(self.objective.denominators(",
           "return (self.objective.denominators(", True,
           tests=["tests/pretrain/test_electric_gdes.py"], select="mirrored and electra"),
    Mutant("accumulation keeps the last micro-batch", "electra_tf/pretrain/pretrainer.py",
           "grads = [acc if g is None else acc + tf.cast(g, acc.dtype)",
           "grads = [acc if g is None else tf.cast(g, acc.dtype)", True, tests=STEP_TESTS),
    Mutant("step skips the update", "electra_tf/pretrain/pretrainer.py",
           "        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))\n"
           "        return self._update_metrics(out)",
           "        return self._update_metrics(out)", True, tests=STEP_TESTS),
    Mutant("step trains in inference mode (no dropout)", "electra_tf/pretrain/pretrainer.py",
           "out = self.forward(inputs, seed, row_ids, training=True,",
           "out = self.forward(inputs, seed, row_ids, training=False,", False,
           tests=["tests/pretrain/test_train_step.py"]),
]


def copy_repo(root: Path) -> Path:
    work = root / "repo"
    work.mkdir()
    for name in COPIED:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, work / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif src.exists():
            shutil.copy2(src, work / name)
    shared = REPO.parent / "shared"
    if shared.exists():
        os.symlink(shared, root / "shared")
    return work


def run_tests(work: Path, tests: List[str], select: str, timeout: int, fast: bool = False) -> Tuple[bool, str]:
    env = dict(os.environ, PYTHONPATH=str(work), TF_CPP_MIN_LOG_LEVEL="2", PYTHONDONTWRITEBYTECODE="1")
    tier = ["-m", "not large"] if fast else []
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-k", select, *tier, *tests]
    try:
        proc = subprocess.run(cmd, cwd=str(work), env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, "timeout (counted as killed)"
    tail = [line for line in proc.stdout.splitlines() if line.strip()][-3:]
    if proc.returncode == 5:
        return True, NO_TEST_SELECTED
    return proc.returncode == 0, " | ".join(tail)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", default=[],
                        help="run the mutants whose name contains this text (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per mutant's test run")
    parser.add_argument("--fast", action="store_true",
                        help='run only the fast tier\'s tests (-m "not large"), as a contributor\'s quick run does')
    args = parser.parse_args(argv)
    mutants = [m for m in MUTANTS if not args.only or any(text in m.name for text in args.only)]
    if args.list:
        for m in mutants:
            print(f"{'paper' if m.paper else 'other'}  {m.name}  ({m.path})")
        return 0
    with tempfile.TemporaryDirectory(prefix="mutation_") as tmp:
        work = copy_repo(Path(tmp))
        probe = subprocess.run([sys.executable, "-c", "import electra_tf; print(electra_tf.__file__)"],
                               cwd=str(work), env=dict(os.environ, PYTHONPATH=str(work)),
                               capture_output=True, text=True)
        if not probe.stdout.strip().startswith(str(work)):
            print(f"error: the copy's electra_tf is not the one imported ({probe.stdout.strip()})")
            return 2
        for m in mutants:  # every mutant applies, before anything runs
            count = (work / m.path).read_text(encoding="utf-8").count(m.old)
            if count != 1:
                print(f"error: mutant {m.name!r}: its text occurs {count} times in {m.path}")
                return 2
        # Each test set must pass unmutated first: a broken environment (no pytest, no TensorFlow)
        # fails every run, and would otherwise read as every mutant killed.
        for tests, select in dict.fromkeys((tuple(m.tests), m.select) for m in mutants):
            passed, tail = run_tests(work, list(tests), select, args.timeout, args.fast)
            if not passed:
                print(f"error: the unmutated tests fail, so no mutant can be judged: {' '.join(tests)} "
                      f"-k {select!r}: {tail or 'no output (is pytest installed for ' + sys.executable + '?)'}")
                return 2
        survivors = []
        for m in mutants:
            target = work / m.path
            original = target.read_text(encoding="utf-8")
            if original.count(m.old) != 1:
                print(f"error: mutant {m.name!r}: its text occurs {original.count(m.old)} times in {m.path}")
                return 2
            target.write_text(original.replace(m.old, m.new), encoding="utf-8")
            start = time.time()
            try:
                passed, tail = run_tests(work, m.tests, m.select, args.timeout, args.fast)
            finally:
                target.write_text(original, encoding="utf-8")
            verdict = "SURVIVED" if passed else "killed"
            print(f"{verdict:8s} {'paper' if m.paper else 'other'} {m.name} ({time.time() - start:.0f} s)"
                  f"{'  [' + m.note + ']' if passed and m.note else ''}", flush=True)
            if tail and (not passed or tail == NO_TEST_SELECTED):
                print(f"         {tail}", flush=True)
            if passed:
                survivors.append(m)
    print(f"\n{len(mutants) - len(survivors)}/{len(mutants)} killed")
    for m in survivors:
        print(f"survivor: {m.name} ({m.path}){' - ' + m.note if m.note else ''}")
    bad = [m for m in survivors if m.paper and not m.note.startswith("equivalent")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
