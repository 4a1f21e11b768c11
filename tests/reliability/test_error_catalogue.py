"""The bad-input catalogue of docs/errors.md, one test per entry.

Each entry runs a CLI (or a serving signature) on one bad input and checks:
- the one error line matches the catalogue's message exactly (`<...>` stands for
  a path or value), so it names the culprit and the fix;
- the exit code (2 for every CLI, electra_tf/cli.py; 0 for a warning; serving
  raises InvalidArgumentError carrying the message);
- nothing half-written: the output directory/file is absent, or unchanged.

`test_docs_list_every_entry` keeps docs/errors.md and this file in step.
Pretrain, finetune, export and convert run in-process through their real CLI
entry points (argument parsing included); the data tools run as subprocesses.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional

import pytest

import helpers
from reliability_helpers import REPO_ROOT, SST2_DIR, pretrain_job, snapshot

pytestmark = pytest.mark.large  # runs a tool for each catalogued error, jobs included: not in the fast tier

DOC = REPO_ROOT / "docs" / "errors.md"


@dataclasses.dataclass
class Outcome:
    code: Optional[int]  # exit code (None: serving, an exception)
    lines: List[str]  # the error (or warning) lines
    absent: List[Path] = dataclasses.field(default_factory=list)  # must not exist afterwards
    unchanged: Optional[Path] = None  # must hold exactly what it held before the call
    before: Optional[dict] = None  # its snapshot, taken just before the call


@dataclasses.dataclass
class Entry:
    id: str
    tool: str
    bad_input: str
    message: str  # the whole line, `<...>` for any non-empty text
    code: Optional[int]
    run: Callable[["Ctx"], Outcome]


CATALOGUE: Dict[str, Entry] = {}


def entry(id, tool, bad_input, message, code):
    def register(fn):
        CATALOGUE[id] = Entry(id, tool, bad_input, message, code, fn)
        return fn
    return register


def template_regex(message: str) -> str:
    parts = re.split(r"<[^<>]+>", message)
    return ".+?".join(re.escape(p) for p in parts)


class Shared:
    """Built once per test process: a tiny model directory and its serving module."""

    def __init__(self, root: Path):
        self.root = root
        self._module = None

    def model_dir(self) -> Path:
        d = self.root / "model"
        if not d.exists():
            helpers.make_model_dir(d)
        return d

    def serving_module(self):
        from electra_tf.export import build_module

        if self._module is None:
            self._module = build_module(str(self.model_dir()), "discriminator")
        return self._module


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    return Shared(tmp_path_factory.mktemp("catalogue_shared"))


class Ctx:
    """What an entry needs: a temp dir, the shared shards and model, stderr capture."""

    def __init__(self, tmp: Path, job_data: dict, capsys, shared: Shared):
        self.tmp = tmp
        self.job = job_data
        self.capsys = capsys
        self.shared = shared

    # ---- pretrain (in-process: the CLI's own parse_args + run_cli) -----------------
    def pretrain(self, args, absent=None, unchanged=None) -> Outcome:
        from electra_tf.pretrain.__main__ import parse_args, run_cli

        before = snapshot(unchanged) if unchanged else None
        self.capsys.readouterr()
        code = run_cli(parse_args([str(a) for a in args]))
        err = self.capsys.readouterr().err
        return Outcome(code, _errors(err), absent or [], unchanged, before)

    # ---- finetune (in-process: the CLI's own main(argv), absl flags) -------------------
    def finetune(self, args, absent=None, unchanged=None) -> Outcome:
        import electra_tf.finetune.__main__ as cli

        before = snapshot(unchanged) if unchanged else None
        self.capsys.readouterr()
        code = cli.main([str(a) for a in args])
        return Outcome(code, _errors(self.capsys.readouterr().err), absent or [], unchanged, before)

    def finetune_base(self, out, **changes):
        files = self.sst2_model_files()
        base = {"--task": "sst2", "--init": "random", "--config": files / "config.json",
                "--vocab_file": files / "vocab.txt", "--data_dir": SST2_DIR, "--output_dir": out,
                "--max_train_examples": "16", "--max_eval_examples": "8", "--max_seq_length": "32"}
        base.update(changes)
        return [x for kv in base.items() for x in kv if kv[1] is not None]

    def sst2_model_files(self):
        d = self.tmp / "sst2_model"
        if not d.exists():
            d.mkdir()
            vocab = helpers.write_vocab(d / "vocab.txt")
            config = helpers.tiny_config(max_position_embeddings=64, max_seq_length=32)
            config.to_json(str(d / "config.json"))
            assert vocab
        return d

    # ---- export / convert (in-process main(argv)) -----------------------------------
    def export(self, args, absent=None, unchanged=None) -> Outcome:
        from electra_tf.export.__main__ import main

        before = snapshot(unchanged) if unchanged else None
        self.capsys.readouterr()
        code = main([str(a) for a in args])
        return Outcome(code, _errors(self.capsys.readouterr().err), absent or [], unchanged, before)

    def convert(self, args, absent=None, unchanged=None) -> Outcome:
        from electra_tf.convert.__main__ import main

        self.capsys.readouterr()
        code = main([str(a) for a in args])
        return Outcome(code, _errors(self.capsys.readouterr().err), absent or [], unchanged)

    def model_dir(self):
        return self.shared.model_dir()  # read-only: entries that change it work on a copy

    # ---- data tools (subprocess) -------------------------------------------------------
    def data_cli(self, module, *args, absent=None, unchanged=None, warnings=False) -> Outcome:
        before = snapshot(unchanged) if unchanged else None
        proc = subprocess.run([sys.executable, "-m", f"electra_tf.data.{module}", *map(str, args)],
                              capture_output=True, text=True, timeout=180, cwd=str(REPO_ROOT),
                              env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
        text = proc.stdout + proc.stderr
        lines = ([l for l in text.splitlines() if l.startswith("warning: ")] if warnings
                 else _errors(proc.stderr))
        return Outcome(proc.returncode, lines, absent or [], unchanged, before)

    def corpus(self, name="corpus.txt", data=None):
        path = self.tmp / name
        if data is None:
            data = (REPO_ROOT / "data" / "sample_corpus.txt").read_bytes()[:20000]
        path.write_bytes(data)
        return path

    def vocab(self, name="vocab.txt", tokens=None):
        path = self.tmp / name
        if tokens is None:
            pretrain_job._quick_vocab(REPO_ROOT / "data" / "sample_corpus.txt", path)
        else:
            path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
        return path

    def build(self, corpus, vocab, out, *extra, **kw) -> Outcome:
        return self.data_cli("build_pretraining_data", f"--corpus={corpus}", f"--vocab_file={vocab}",
                             f"--output_dir={out}", "--num_shards=1", "--noprogress", *extra, **kw)

    # ---- serving ---------------------------------------------------------------------
    def serving_module(self):
        return self.shared.serving_module()

    @staticmethod
    def serving_error(fn, *args) -> Outcome:
        import tensorflow as tf

        try:
            fn(*args)
        except tf.errors.InvalidArgumentError as e:
            found = re.search(r"assertion failed: \[(.*?)\] \[", e.message, re.S)
            return Outcome(None, [found.group(1) if found else e.message.splitlines()[0]])
        return Outcome(None, [])


def _job_args(job):
    def make(model_dir, *extra):
        return ["--config", job["config"], "--data_dir", job["data_dir"], "--vocab_file", job["vocab_file"],
                "--output_dir", str(model_dir), "--override", f"vocab_size={job['vocab_size']}",
                "--batch_size", "8", "--verbose", "0", *extra]
    return make


def _errors(stderr: str) -> List[str]:
    return [l for l in stderr.splitlines() if l.startswith("error: ")]


def _replace(args, flag, value):
    args = list(args)
    args[args.index(flag) + 1] = str(value)
    return args


# =========================================================================== pretrain
P = "python -m electra_tf.pretrain"


@entry("pretrain-config-unknown-key", P, "config JSON with a misspelt key",
       "error: <config.json>: unknown config key(s) hiden_size; valid keys are listed in electra_tf/config.py", 2)
def _(c):
    bad = c.tmp / "config.json"
    bad.write_text(json.dumps({"hiden_size": 64}))
    return c.pretrain(_replace(_job_args(c.job)(c.tmp / "run"), "--config", bad), absent=[c.tmp / "run"])


@entry("pretrain-config-impossible-size", P, "config whose hidden size is not divisible by the head count",
       "error: config field 'hidden_size'=100 is invalid: it must be divisible by num_attention_heads=3", 2)
def _(c):
    bad = c.tmp / "config.json"
    bad.write_text(json.dumps({"hidden_size": 100, "num_attention_heads": 3}))
    return c.pretrain(_replace(_job_args(c.job)(c.tmp / "run"), "--config", bad), absent=[c.tmp / "run"])


@entry("pretrain-config-not-json", P, "config file that is not JSON",
       "error: config file '<path>' is not valid JSON (<parser message>); fix the syntax", 2)
def _(c):
    bad = c.tmp / "config.json"
    bad.write_text("{ hidden_size: 64 ")
    return c.pretrain(_replace(_job_args(c.job)(c.tmp / "run"), "--config", bad), absent=[c.tmp / "run"])


@entry("pretrain-override-malformed", P, "--override without '='",
       "error: override 'mask_prob' must look like key=value, e.g. mask_prob=0.25", 2)
def _(c):
    return c.pretrain(_job_args(c.job)(c.tmp / "run", "--override", "mask_prob"), absent=[c.tmp / "run"])


@entry("pretrain-seq-length-mismatch", P, "shards of another sequence length than the config",
       "error: shards in <dir> have max_seq_length=64 (<manifest.json>) but the config has max_seq_length=32; "
       "rebuild the shards with --max_seq_length 32 or set max_seq_length=64", 2)
def _(c):
    return c.pretrain(_job_args(c.job)(c.tmp / "run", "--override", "max_seq_length=32"), absent=[c.tmp / "run"])


@entry("pretrain-ids-beyond-vocab", P, "config vocab_size smaller than the vocabulary (token ids >= vocab size)",
       "error: --vocab_file has <n> tokens but the config has vocab_size=100; add --override vocab_size=<n>", 2)
def _(c):
    return c.pretrain(_job_args(c.job)(c.tmp / "run", "--override", "vocab_size=100"), absent=[c.tmp / "run"])


@entry("pretrain-vocab-not-the-shards", P, "a vocab.txt other than the one the shards were built with",
       "error: --vocab_file <path> is not the vocabulary the shards in <dir> were built with (sha256 differs "
       "from their manifest.json); pass that vocab.txt", 2)
def _(c):
    other = c.vocab("other_vocab.txt", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "x"])
    return c.pretrain(_replace(_job_args(c.job)(c.tmp / "run"), "--vocab_file", other), absent=[c.tmp / "run"])


@entry("pretrain-unfinished-build", P, "--data_dir of an interrupted build (shards and .build/, no manifest.json)",
       "error: --data_dir <dir> has no manifest.json (an unfinished build); re-run "
       "python -m electra_tf.data.build_pretraining_data with the same flags to finish it", 2)
def _(c):
    partial = c.tmp / "partial"
    partial.mkdir()
    first = sorted(p for p in os.listdir(c.job["data_dir"]) if p.startswith("pretrain_data"))[0]
    shutil.copy(os.path.join(c.job["data_dir"], first), partial)
    (partial / ".build").mkdir()  # the builder's plan, kept until manifest.json is written
    return c.pretrain(_replace(_job_args(c.job)(c.tmp / "run"), "--data_dir", partial), absent=[c.tmp / "run"])


@entry("pretrain-foreign-shards", P, "--data_dir of shards another builder wrote (no manifest.json, no .build/)",
       "error: --data_dir <dir> has no manifest.json, which pretrain needs (it gives the shards' vocabulary, "
       "casing and sizes): shards another builder wrote have none; build shards from your text with "
       "python -m electra_tf.data.build_pretraining_data, or train on these with "
       "electra_tf.data.reader.pretraining_dataset in your own model.fit", 2)
def _(c):
    foreign = c.tmp / "foreign"
    foreign.mkdir()
    first = sorted(p for p in os.listdir(c.job["data_dir"]) if p.startswith("pretrain_data"))[0]
    shutil.copy(os.path.join(c.job["data_dir"], first), foreign / "part-00000.tfrecord")
    return c.pretrain(_replace(_job_args(c.job)(c.tmp / "run"), "--data_dir", foreign), absent=[c.tmp / "run"])


@entry("pretrain-truncated-shard", P, "a shard cut short (partial copy, full disk)",
       "error: shard <path> is <n> bytes but its manifest says <m>: it is truncated or corrupted; re-run the same "
       "python -m electra_tf.data.build_pretraining_data command to rebuild it; or pass --skip_corrupt_shards to "
       "train without it", 2)
def _(c):
    copy = c.tmp / "shards"
    shutil.copytree(c.job["data_dir"], copy)
    victim = copy / "pretrain_data.tfrecord-00001-of-00002"
    victim.write_bytes(victim.read_bytes()[:1000])
    return c.pretrain(_replace(_job_args(c.job)(c.tmp / "run"), "--data_dir", copy), absent=[c.tmp / "run"])


@entry("pretrain-input-changed", P, "a re-run after the --data_dir shards were rebuilt",
       "error: --data_dir <dir> changed since the run in <output_dir> began (its content differs from what "
       "<run.json> records: rebuilt shards or another vocabulary); resuming would train on other data than its "
       "checkpoints did: pass a new --output_dir, or restore the files", 2)
def _(c):
    copy = c.tmp / "shards"
    shutil.copytree(c.job["data_dir"], copy)
    run = c.tmp / "run"
    args = _replace(_job_args(c.job)(run, "--train_steps", "1"), "--data_dir", copy)
    assert c.pretrain(args).code == 0
    manifest = copy / "manifest.json"
    manifest.write_text(json.dumps(json.loads(manifest.read_text()), indent=4))  # a rebuild's new manifest
    return c.pretrain(args, unchanged=run)


@entry("pretrain-model-dir-of-another-run", P, "--output_dir holding a run with other settings",
       "error: <output_dir> holds a run with other settings (<keys> differ from <run.json>); re-run with the same "
       "flags to resume it, or pass a new --output_dir", 2)
def _(c):
    run = c.tmp / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"settings": {"train_steps": 999}}))
    return c.pretrain(_job_args(c.job)(run), unchanged=run)


def _foreign_checkpoint(c, run, hidden):
    """A pre-training checkpoint of another model size, where `run` keeps its checkpoints."""
    from electra_tf.config import ElectraConfig
    from electra_tf.data.vocab import special_token_ids
    from electra_tf.training.checkpoints import CheckpointManager
    from electra_tf.pretrain.pretrain_optimizer import create_optimizer
    from electra_tf.pretrain.pretrainer import ElectraPretrainer

    cfg = ElectraConfig.from_json(c.job["config"]).replace(
        vocab_size=c.job["vocab_size"], hidden_size=hidden, num_attention_heads=2)
    model = ElectraPretrainer(cfg, special_token_ids(c.job["vocab_file"]))
    model.compile(optimizer=create_optimizer(cfg, train_steps=10))
    model.optimizer.build(model.trainable_variables)
    return CheckpointManager(str(run / "checkpoints")).save(model, 2)


@entry("pretrain-checkpoint-of-another-size", P, "a checkpoint of another model size in --output_dir",
       "error: checkpoint <path> does not fit this model (<keras message>); it was written for another config: "
       "pass a new model directory, or delete the checkpoint", 2)
def _(c):
    run = c.tmp / "run"
    _foreign_checkpoint(c, run, hidden=32)
    return c.pretrain(_job_args(c.job)(run, "--strategy", "cpu"), unchanged=run)


@entry("pretrain-checkpoint-truncated", P, "a truncated checkpoint file",
       "error: checkpoint <path> is unreadable (<h5py message>); delete it to resume from the checkpoint before it",
       2)
def _(c):
    run = c.tmp / "run"
    path = Path(_foreign_checkpoint(c, run, hidden=64))
    path.write_bytes(path.read_bytes()[:5000])
    return c.pretrain(_job_args(c.job)(run, "--strategy", "cpu"), unchanged=run)


@entry("pretrain-batch-vs-accumulation", P, "a batch size the gradient-accumulation steps do not divide",
       "error: the per-replica batch 8 is not divisible by --grad_accum_steps=3; use a --batch_size that is a "
       "multiple of 3", 2)
def _(c):
    return c.pretrain(_job_args(c.job)(c.tmp / "run", "--grad_accum_steps", "3", "--strategy", "cpu"),
                      absent=[c.tmp / "run"])


@entry("pretrain-eval-batch-vs-replicas", P, "a config eval_batch_size the replicas do not divide (with --eval_data_dir)",
       "error: the config's eval_batch_size=3 (global) is not divisible by the 2 replicas of MirroredStrategy "
       "over 2 logical CPU device(s); add --override eval_batch_size=<a multiple of 2>", 2)
def _(c):
    return c.pretrain(_job_args(c.job)(c.tmp / "run", "--strategy", "mirrored", "--eval_data_dir",
                                       c.job["data_dir"], "--override", "eval_batch_size=3"),
                      absent=[c.tmp / "run"])


@entry("pretrain-nonpositive-steps", P, "--train_steps 0",
       "error: --train_steps=0 must be a positive integer", 2)
def _(c):
    return c.pretrain(_job_args(c.job)(c.tmp / "run", "--train_steps", "0"), absent=[c.tmp / "run"])


@entry("pretrain-gpu-without-gpu", P, "--strategy gpu on a machine without a GPU",
       "error: --strategy=gpu but TensorFlow sees no GPU; install a CUDA build of TensorFlow "
       "(pip install 'tensorflow[and-cuda]') or use --strategy=cpu", 2)
def _(c):
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this machine has a GPU")
    return c.pretrain(_job_args(c.job)(c.tmp / "run", "--strategy", "gpu"), absent=[c.tmp / "run"])


@entry("pretrain-model-dir-not-writable", P, "--output_dir under a file (or a file, or /proc/x)",
       "error: cannot write to --output_dir '<path>' (<reason>); choose a writable directory", 2)
def _(c):
    blocker = c.tmp / "a_file"
    blocker.write_text("x")
    return c.pretrain(_job_args(c.job)(blocker / "run"), absent=[blocker / "run"])


# =========================================================================== data tools
D = "python -m electra_tf.data.build_pretraining_data"
V = "python -m electra_tf.data.build_vocab"


@entry("data-empty-corpus", D, "a corpus of blank lines",
       "error: corpus is empty: 1 file(s) (<path>) hold no non-blank line; pass files with one sentence or "
       "paragraph per line", 2)
def _(c):
    return c.build(c.corpus(data=b"\n\n   \n"), c.vocab(), c.tmp / "out", absent=[c.tmp / "out"])


@entry("data-binary-corpus", D, "a binary file among the corpus files",
       "error: corpus file '<path>' looks binary (NUL byte at offset 0); remove it from --corpus or convert it "
       "to UTF-8 text", 2)
def _(c):
    return c.build(c.corpus("model.bin", bytes(range(256)) * 8), c.vocab(), c.tmp / "out", absent=[c.tmp / "out"])


@entry("data-not-utf8-corpus", D, "a Latin-1 (non-UTF-8) corpus",
       "error: corpus file '<path>' is not UTF-8 (<n> of its first <m> bytes are invalid; Latin-1 or cp1252?); "
       "convert it, e.g. iconv -f latin1 -t utf-8", 2)
def _(c):
    text = "Le café était très animé; à côté, un garçon lisait « Les Misérables ».\n" * 60
    return c.build(c.corpus(data=text.encode("latin-1")), c.vocab(), c.tmp / "out", absent=[c.tmp / "out"])


@entry("data-vocab-missing-special-token", D, "a vocab.txt without [SEP]",
       "error: vocab file '<path>' lacks special token(s) [SEP]; add them (one per line) or rebuild it with "
       "python -m electra_tf.data.build_vocab", 2)
def _(c):
    return c.build(c.corpus(), c.vocab(tokens=["[PAD]", "[UNK]", "[CLS]", "[MASK]", "the"]), c.tmp / "out",
                   absent=[c.tmp / "out"])


@entry("data-vocab-duplicate-entry", D, "a vocab.txt listing a token twice",
       "error: vocab file '<path>' lists token 'the' twice (lines 6 and 8); remove the duplicate", 2)
def _(c):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "the"]
    return c.build(c.corpus(), c.vocab(tokens=tokens), c.tmp / "out", absent=[c.tmp / "out"])


@entry("data-vocab-empty", D, "an empty vocab.txt",
       "error: vocab file '<path>' is empty; build one with python -m electra_tf.data.build_vocab", 2)
def _(c):
    empty = c.tmp / "vocab.txt"
    empty.write_text("")
    return c.build(c.corpus(), empty, c.tmp / "out", absent=[c.tmp / "out"])


@entry("data-output-holds-another-build", D, "--output_dir holding shards built with another sequence length",
       "error: --output_dir '<dir>' already holds a finished build with other settings (max_seq_length 64 there "
       "vs 128 now); choose a new --output_dir or pass --overwrite", 2)
def _(c):
    from electra_tf.data.build_pretraining_data import build_pretraining_data

    corpus, vocab, out = c.corpus(), c.vocab(), c.tmp / "out"
    build_pretraining_data(str(out), str(vocab), [str(corpus)], max_seq_length=64, num_shards=1,
                           progress=False, log=lambda _: None)
    return c.build(corpus, vocab, out, "--max_seq_length=128", unchanged=out)


@entry("data-one-megabyte-line", D, "a 1 MB line (no newline) in the corpus: cut and reported, the build succeeds",
       "warning: <path>: 1 line(s) longer than 65536 bytes cut to that length (split such lines into sentences, "
       "or raise --max_line_bytes to keep more of them)", 0)
def _(c):
    line = ("the cat sat on the mat and " * 40000)[:1_000_000]
    corpus = c.corpus(data=line.encode() + b"\n" + (REPO_ROOT / "data" / "sample_corpus.txt").read_bytes()[:20000])
    return c.build(corpus, c.vocab(), c.tmp / "out", warnings=True)


@entry("vocab-corpus-matches-nothing", V, "--corpus glob that matches no file",
       "error: corpus path '<glob>' matches no file; check the path (files, directories or globs)", 2)
def _(c):
    return c.data_cli("build_vocab", f"--corpus={c.tmp / 'nope' / '*.txt'}", f"--output_file={c.tmp / 'v.txt'}",
                      absent=[c.tmp / "v.txt"])


@entry("vocab-output-dir-missing", V, "--output_file in a directory that does not exist",
       "error: cannot write --output_file '<path>': '<dir>' is not a writable directory; create it or choose another "
       "path", 2)
def _(c):
    return c.data_cli("build_vocab", f"--corpus={c.corpus()}", f"--output_file={c.tmp / 'no_dir' / 'v.txt'}",
                      absent=[c.tmp / "no_dir"])


@entry("vocab-output-is-a-directory", V, "--output_file naming an existing directory",
       "error: cannot write --output_file '<path>': it is a directory; pass the path of the file to write, e.g. "
       "'<path>/vocab.txt'", 2)
def _(c):
    out = c.tmp / "vocab_dir"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    return c.data_cli("build_vocab", f"--corpus={c.corpus()}", f"--output_file={out}", unchanged=out,
                      absent=[c.tmp / "vocab_dir.tmp"])


# =========================================================================== finetune
F = "python -m electra_tf.finetune"


@entry("finetune-unknown-task", F, "--task that does not exist",
       "error: unknown --task 'sst3'; choose one of <task list>", 2)
def _(c):
    out = c.tmp / "ft"
    return c.finetune(c.finetune_base(out, **{"--task": "sst3"}), absent=[out])


@entry("finetune-malformed-glue-row", F, "a GLUE TSV row with too few fields",
       "error: <train.tsv>:3: malformed sst2 row with 1 tab-separated field(s), expected at least 2; fix or "
       "delete the line", 2)
def _(c):
    glue = c.tmp / "SST-2"
    glue.mkdir()
    (glue / "train.tsv").write_text("sentence\tlabel\na fine film \t1\nno label here\n")
    (glue / "dev.tsv").write_text("sentence\tlabel\ngood \t1\n")
    out = c.tmp / "ft"
    return c.finetune(c.finetune_base(out, **{"--data_dir": glue}), absent=[out])


@entry("finetune-init-of-another-size", F, "--init weights of another model size than --config",
       "error: --init <path> does not fit the model config (<keras message>); pass the config.json of the model "
       "that wrote it with --config", 2)
def _(c):
    model_dir = c.model_dir()  # hidden 32
    out = c.tmp / "ft"
    bigger = c.tmp / "bigger.json"
    helpers.tiny_config(max_seq_length=24, hidden_size=64, intermediate_size=128).to_json(str(bigger))
    return c.finetune(c.finetune_base(out, **{"--init": model_dir / "discriminator.weights.h5",
                                              "--config": bigger}), absent=[out])


@entry("finetune-init-runs-code", F, "--init a .keras file with a Lambda layer (Python code)",
       "error: --init <path> contains Python code (a Lambda layer), which is never executed; pass a .weights.h5 "
       "file or a model directory written by electra_tf", 2)
def _(c):
    import keras

    evil = c.tmp / "evil.keras"
    keras.Sequential([keras.Input((4,)), keras.layers.Lambda(lambda x: x * 2)]).save(str(evil))
    out = c.tmp / "ft"
    return c.finetune(c.finetune_base(out, **{"--init": evil}), absent=[out])


@entry("finetune-vocab-vs-config", F, "a vocabulary whose size differs from the config's vocab_size",
       "error: vocab file <path> has 100 tokens but the config says vocab_size=250; pass the pre-training "
       "vocabulary", 2)
def _(c):
    # A pre-trained model directory whose vocab.txt is not the one its config was built for
    # (a random encoder is sized for the vocabulary it is given, so only --init <model> can clash).
    model = c.tmp / "pretrained"
    model.mkdir()
    helpers.write_vocab(model / "vocab.txt")
    helpers.tiny_config(max_seq_length=24, vocab_size=250).to_json(str(model / "config.json"))
    (model / "discriminator.weights.h5").write_bytes(b"never read: the vocabulary is checked first")
    out = c.tmp / "ft"
    return c.finetune(c.finetune_base(out, **{"--init": model, "--config": None, "--vocab_file": None}),
                      absent=[out])


@entry("finetune-seq-longer-than-positions", F, "--max_seq_length beyond the model's positions",
       "error: --max_seq_length 128 exceeds the model's max_position_embeddings 64; lower it", 2)
def _(c):
    out = c.tmp / "ft"
    return c.finetune(c.finetune_base(out, **{"--max_seq_length": "128"}), absent=[out])


@entry("finetune-input-changed", F, "a re-run after the --data_dir files changed (rows added or dropped)",
       "error: --data_dir file <file> changed since the run in --output_dir <dir> began (the content differs from what "
       "<settings.json> records); pass a new --output_dir, or --overwrite to start over there", 2)
def _(c):
    data = c.tmp / "SST-2"
    data.mkdir()
    for name in ("train.tsv", "dev.tsv"):
        shutil.copy(SST2_DIR / name, data / name)
    out = c.tmp / "ft"
    args = c.finetune_base(out, **{"--data_dir": data, "--train_steps": "1", "--max_train_examples": "8"})
    c.finetune(args)
    assert (out / "results.json").is_file()
    with open(data / "train.tsv", "a", encoding="utf-8") as f:
        f.write("a new row\t1\n")
    return c.finetune(args, unchanged=out)


@entry("finetune-output-of-another-run", F, "--output_dir holding a fine-tuning run with other settings",
       "error: --output_dir <dir> holds a fine-tuning run with other settings (learning_rate differ from "
       "<settings.json>); re-run with the same flags to resume it, or pass a new --output_dir (or --overwrite "
       "to start over there)", 2)
def _(c):
    from electra_tf.finetune.settings import Settings

    out = c.tmp / "ft"
    out.mkdir()
    files = c.sst2_model_files()
    settings = dataclasses.asdict(Settings(
        task="sst2", init="random", data_dir=str(SST2_DIR), output_dir=str(out), config=str(files / "config.json"),
        vocab_file=str(files / "vocab.txt"), do_lower_case=True, learning_rate=5e-5, layerwise_lr_decay=1.0, epochs=10.0,
        pooling="mean", max_seq_length=32, max_train_examples=16, max_eval_examples=8, batch_size=32))
    settings = {k: v for k, v in settings.items() if k not in ("seeds", "log_every", "overwrite")}
    (out / "settings.json").write_text(json.dumps(settings))
    return c.finetune(c.finetune_base(out, **{"--learning_rate": "1e-4"}), unchanged=out)


@entry("finetune-missing-flags", F, "no --task / --init / --output_dir",
       "error: --task, --init, --output_dir required (see --help)", 2)
def _(c):
    return c.finetune([])


@entry("finetune-output-not-writable", F, "--output_dir that is a file (or under one, or /proc/x)",
       "error: cannot write to --output_dir '<path>' (<reason>); choose a writable directory", 2)
def _(c):
    blocker = c.tmp / "a_file"
    blocker.write_text("x")
    return c.finetune(c.finetune_base(blocker / "ft"), absent=[blocker / "ft"])


@entry("finetune-nonpositive-batch-size", F, "--batch_size 0",
       "error: --batch_size=0 must be a positive integer", 2)
def _(c):
    out = c.tmp / "ft"
    return c.finetune(c.finetune_base(out, **{"--batch_size": "0"}), absent=[out])


@entry("finetune-nonpositive-number", F, "--learning_rate -1 (or --epochs 0)",
       "error: --learning_rate=-1 must be a positive number", 2)
def _(c):
    out = c.tmp / "ft"
    return c.finetune(c.finetune_base(out, **{"--learning_rate": "-1"}), absent=[out])


@entry("finetune-multi-process-strategy", F, "--strategy multi_worker (or tpu)",
       "error: --strategy=multi_worker is for pre-training; fine-tuning runs in one process: choose one of "
       "auto, cpu, gpu, mirrored", 2)
def _(c):
    out = c.tmp / "ft"
    return c.finetune(c.finetune_base(out, **{"--strategy": "multi_worker"}), absent=[out])


# =========================================================================== export / convert
E = "python -m electra_tf.export"
C = "python -m electra_tf.convert"


@entry("export-config-does-not-fit-weights", E, "a model directory whose config.json is another model's",
       "error: <discriminator.weights.h5> does not fit the model described by config.json (<keras message>); "
       "check that the config belongs to these weights", 2)
def _(c):
    broken = c.tmp / "broken"
    shutil.copytree(c.model_dir(), broken)
    helpers.tiny_config(max_seq_length=24, hidden_size=64, intermediate_size=128).to_json(str(broken / "config.json"))
    return c.export(["--model_dir", broken, "--output_dir", c.tmp / "sm"], absent=[c.tmp / "sm"])


@entry("export-no-vocab", E, "a model directory without vocab.txt",
       "error: <dir> has no vocab.txt, which in-graph tokenization needs; copy the vocab.txt the model was "
       "trained with into it", 2)
def _(c):
    bare = c.tmp / "bare"
    shutil.copytree(c.model_dir(), bare)
    (bare / "vocab.txt").unlink()
    return c.export(["--model_dir", bare, "--output_dir", c.tmp / "sm"], absent=[c.tmp / "sm"])


@entry("export-not-a-directory", E, "--model_dir that does not exist",
       "error: --model_dir '<path>' is not a directory; pass a model directory written by electra_tf (pretrain, "
       "convert) or a fine-tuning seed_<n>/ directory", 2)
def _(c):
    return c.export(["--model_dir", c.tmp / "nope", "--output_dir", c.tmp / "sm"], absent=[c.tmp / "sm"])


@entry("export-output-not-empty", E, "--output_dir that already holds files",
       "error: <path> exists and is not empty; pass --overwrite or a new version directory", 2)
def _(c):
    out = c.tmp / "sm"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    return c.export(["--model_dir", c.model_dir(), "--output_dir", out], unchanged=out)


@entry("export-classifier-files-missing", E, "--kind classifier on a directory without classifier.json",
       "error: <classifier.json> is missing; a classifier directory is written by electra_tf.models.model_folder.save_classifier "
       "(config.json, vocab.txt, classifier.weights.h5, classifier.json)", 2)
def _(c):
    return c.export(["--model_dir", c.model_dir(), "--output_dir", c.tmp / "sm", "--kind", "classifier"],
                    absent=[c.tmp / "sm"])


@entry("export-output-not-writable", E, "--output_dir that is a file (or under one, or /proc/x/1)",
       "error: cannot write to --output_dir '<path>' (<reason>); choose a writable directory", 2)
def _(c):
    blocker = c.tmp / "a_file"
    blocker.write_text("x")
    return c.export(["--model_dir", c.model_dir(), "--output_dir", blocker / "1"], absent=[blocker / "1"])


@entry("convert-hf-without-weights", C, "--from hf on a directory without model.safetensors",
       "error: <dir> has no model.safetensors (or pytorch_model.bin); pass a Hugging Face ELECTRA or BERT model "
       "directory (config.json + model.safetensors)", 2)
def _(c):
    hf = c.tmp / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"model_type": "electra"}))
    return c.convert(["--from", "hf", "--input", hf, "--output_dir", c.tmp / "out"], absent=[c.tmp / "out"])


@entry("convert-checkpoint-of-another-model", C, "--from hf on a RoBERTa checkpoint",
       "error: <dir> holds a 'roberta' model, not 'electra' or 'bert'; pass an ELECTRA checkpoint (e.g. "
       "google/electra-small-discriminator) or a BERT encoder", 2)
def _(c):
    import numpy as np

    from electra_tf.convert import hf

    roberta = c.tmp / "roberta"
    roberta.mkdir()
    (roberta / "config.json").write_text(json.dumps({"model_type": "roberta"}))
    hf.write_safetensors(str(roberta / "model.safetensors"), {"roberta.pooler.dense.bias": np.zeros(4, "float32")})
    return c.convert(["--from", "hf", "--input", roberta, "--output_dir", c.tmp / "out"], absent=[c.tmp / "out"])


# =========================================================================== serving
S = "serving signature `encoded`"


@entry("serving-id-beyond-vocab", S, "input_ids holding an id >= the vocabulary size",
       "input_ids holds an id >= 100, the vocabulary size of the model; tokenize with its vocab.txt (or use the "
       "serving_default text signature)", None)
def _(c):
    import tensorflow as tf

    ids = tf.constant([[2, 5, 500, 3]])
    return c.serving_error(c.serving_module().serve_encoded, ids, tf.ones_like(ids), tf.zeros_like(ids))


@entry("serving-negative-id", S, "input_ids holding a negative id",
       "input_ids holds a negative id; tokenize with the vocab.txt of the model", None)
def _(c):
    import tensorflow as tf

    ids = tf.constant([[2, -1, 3]])
    return c.serving_error(c.serving_module().serve_encoded, ids, tf.ones_like(ids), tf.zeros_like(ids))


@entry("serving-segment-out-of-range", S, "segment_ids of 2",
       "segment_ids must be below 2 (0: first text, 1: second)", None)
def _(c):
    import tensorflow as tf

    ids = tf.constant([[2, 5, 6, 3]])
    return c.serving_error(c.serving_module().serve_encoded, ids, tf.ones_like(ids), tf.fill([1, 4], 2))


@entry("serving-shape-mismatch", S, "input_mask shorter than input_ids",
       "input_ids, input_mask and segment_ids must have the same [batch, seq] shape", None)
def _(c):
    import tensorflow as tf

    ids = tf.constant([[2, 5, 6, 3]])
    return c.serving_error(c.serving_module().serve_encoded, ids, tf.ones([1, 3], tf.int32), tf.zeros_like(ids))


@entry("serving-longer-than-positions", S, "a sequence longer than the model's positions",
       "sequences are longer than the 64 positions of the model; cut them to at most 64 tokens", None)
def _(c):
    import tensorflow as tf

    ids = tf.fill([1, 80], 5)
    return c.serving_error(c.serving_module().serve_encoded, ids, tf.ones_like(ids), tf.zeros_like(ids))


@entry("serving-pair-count-mismatch", "serving signature `serving_default` (pair classifier)",
       "text_a and text_b of different lengths",
       "text_a and text_b must hold the same number of strings (one pair per row)", None)
def _(c):
    import tensorflow as tf

    from electra_tf.export.serving import CLASSIFIER, ServingModule
    from electra_tf.models.classifier_model import ClassifierModel, build_and_call
    from electra_tf.models.saving import load_discriminator

    encoder, _, config = load_discriminator(str(c.model_dir()))
    model = ClassifierModel(encoder, 3)
    build_and_call(model, 16)
    module = ServingModule(CLASSIFIER, model.encoder, model.head, helpers.VOCAB, 16, labels=["a", "b", "c"],
                           pair=True)
    return c.serving_error(module.serve, tf.constant(["one", "two"]), tf.constant(["only one"]))


# =========================================================================== the tests
@pytest.mark.parametrize("entry_id", list(CATALOGUE))
def test_catalogue(entry_id, tmp_path, job_data, capsys, shared):
    e = CATALOGUE[entry_id]
    outcome = e.run(Ctx(tmp_path, job_data, capsys, shared))
    assert outcome.code == e.code, (outcome.code, outcome.lines)
    assert len(outcome.lines) == 1, outcome.lines
    assert re.fullmatch(template_regex(e.message), outcome.lines[0], re.S), (
        f"\n got: {outcome.lines[0]}\nwant: {e.message}")
    for path in outcome.absent:
        assert not Path(path).exists(), f"{path} was left behind"
    if outcome.unchanged is not None:
        assert outcome.before and snapshot(outcome.unchanged) == outcome.before


PROC = Path("/proc")
BAD_OUTPUTS = ["proc", "file", "under-file"]


def _bad_output(c, kind: str) -> Path:
    if kind == "proc":
        if not PROC.is_dir():
            pytest.skip("no /proc on this system")
        return PROC / "electra_tf_test" / "out"
    blocker = c.tmp / "a_file"
    blocker.write_text("x")
    return blocker if kind == "file" else blocker / "out"


@pytest.mark.parametrize("kind", BAD_OUTPUTS)
@pytest.mark.parametrize("tool", ["pretrain", "finetune", "export", "build_vocab"])
def test_output_paths_are_checked_before_any_work(tool, kind, tmp_path, job_data, capsys, shared):
    """/proc/..., a file, a path under a file: one line naming the flag, the exit code, nothing left."""
    c = Ctx(tmp_path, job_data, capsys, shared)
    bad = _bad_output(c, kind)
    c.sst2_model_files()  # inputs made first: only outputs are compared below
    before = sorted(p.name for p in tmp_path.iterdir())
    if tool == "pretrain":
        outcome, flag = c.pretrain(_job_args(c.job)(bad)), "--output_dir"
    elif tool == "finetune":
        outcome, flag = c.finetune(c.finetune_base(bad)), "--output_dir"
    elif tool == "export":
        outcome, flag = c.export(["--model_dir", c.model_dir(), "--output_dir", bad]), "--output_dir"
    else:
        # /proc/vocab.txt, an existing directory, a path under a file
        target = {"proc": PROC / "vocab.txt", "file": tmp_path, "under-file": bad / "vocab.txt"}[kind]
        corpus = c.corpus()
        before = sorted(p.name for p in tmp_path.iterdir())
        outcome = c.data_cli("build_vocab", f"--corpus={corpus}", f"--output_file={target}")
        assert outcome.code == 2 and len(outcome.lines) == 1, outcome.lines
        assert outcome.lines[0].startswith(f"error: cannot write --output_file '{target}': "), outcome.lines
        assert sorted(p.name for p in tmp_path.iterdir()) == before  # no <dir>.tmp left behind
        return
    assert outcome.code == 2, outcome.lines
    assert len(outcome.lines) == 1, outcome.lines
    assert outcome.lines[0].startswith(f"error: cannot write to {flag} '{bad}' ("), outcome.lines
    assert outcome.lines[0].endswith("); choose a writable directory"), outcome.lines
    assert not (bad.exists() and bad.is_dir()) and not (PROC / "electra_tf_test").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("flags, message", [
    (["--batch_size", "0"], "error: --batch_size=0 must be a positive integer"),
    (["--learning_rate", "-1"], "error: --learning_rate=-1 must be a positive number"),
    (["--learning_rate=-1"], "error: --learning_rate=-1 must be a positive number"),
    (["--epochs", "0"], "error: --epochs=0 must be a positive number"),
])
def test_finetune_numbers_are_checked_before_any_work(flags, message, tmp_path, job_data, capsys, shared):
    c = Ctx(tmp_path, job_data, capsys, shared)
    out = tmp_path / "ft"
    outcome = c.finetune(c.finetune_base(out) + flags)
    assert (outcome.code, outcome.lines) == (2, [message])
    assert not out.exists()


def _doc_rows():
    rows = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [x.strip() for x in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) == 7 and cells[0].isdigit():
            rows.append(cells)
    return rows


def test_docs_list_every_entry():
    """docs/errors.md shows each entry's exact message and names its test."""
    rows = _doc_rows()
    ids = {}
    assert [int(r[0]) for r in rows] == list(range(1, len(rows) + 1))
    for number, tool, bad_input, message, fix, code, test in rows:
        match = re.fullmatch(r"`tests/reliability/test_error_catalogue\.py::test_catalogue\[([\w-]+)\]`", test)
        if match:
            entry = CATALOGUE[match.group(1)]
            ids[match.group(1)] = message
            assert message.strip("`") == entry.message, match.group(1)
            assert code == ("—" if entry.code is None else str(entry.code)), match.group(1)
            continue
        for ref in re.findall(r"`([^`]+)`", test):  # tests elsewhere: the named function exists
            path, _, name = ref.partition("::")
            assert (REPO_ROOT / path).is_file(), ref
            assert re.search(rf"^def {re.escape(name.split('[')[0])}\(", (REPO_ROOT / path).read_text(), re.M), ref
    assert sorted(ids) == sorted(CATALOGUE), set(ids) ^ set(CATALOGUE)
    assert len(ids) >= 25
