"""What every `python -m electra_tf.*` tool shares: --help exits 0, a bad flag is one
`error:` line and exit 2 (electra_tf/cli.py), a quiet TensorFlow start-up (no E0000/W0000
line, no start-up banner twice), and the path helpers."""

import os
import re
import subprocess
import sys

import pytest

from electra_tf import paths, quiet_tf

pytestmark = pytest.mark.large  # starts every tool in its own process: not in the fast tier

TOOLS = ["electra_tf.pretrain", "electra_tf.data.build_vocab", "electra_tf.data.build_pretraining_data",
         "electra_tf.finetune", "electra_tf.export", "electra_tf.export.check", "electra_tf.convert",
         "electra_tf.predict"]
NOISE = re.compile(r"^([EW]0000 |WARNING: All log messages before absl::InitializeLog)", re.M)


def _run(repo_root, module, *args, env=None):
    # As a user runs it: no TF_CPP_MIN_LOG_LEVEL of the test process.
    env = env or {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", quiet_tf.MARKER)}
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=str(repo_root), env=env)


@pytest.mark.parametrize("module", TOOLS)
def test_help_exits_zero(repo_root, module):
    proc = _run(repo_root, module, "--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--help" in proc.stdout or "flags:" in proc.stdout
    assert not NOISE.search(proc.stderr), proc.stderr


@pytest.mark.parametrize("module, args, line", [
    ("electra_tf.pretrain", ["--train_steps", "abc"],
     "error: flag --train_steps=abc: invalid literal for int() with base 10: 'abc' (see --help)"),
    ("electra_tf.data.build_vocab", ["--no_such_flag=1"],
     "error: Unknown command line flag 'no_such_flag' (see --help)"),
    ("electra_tf.export", ["--model_dir", "m"], "error: --output_dir is required (see --help)"),
    ("electra_tf.predict", ["--model_dir", "m"], "error: --input_file, --output_file required (see --help)"),
    ("electra_tf.convert", ["--from", "nope", "--input", "i", "--output_dir", "o"],
     "error: flag --from=nope: value should be one of <google|hf|keras_hub|electra_tf> (see --help)"),
    ("electra_tf.convert", ["--from", "hf", "--input", "i", "o"],
     "error: unexpected argument(s) o; every option is a --flag (see --help)"),
])
def test_a_flag_the_parser_refuses_is_one_error_line_and_exit_2(repo_root, module, args, line):
    proc = _run(repo_root, module, *args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(line) and lines[0].endswith(" (see --help)"), lines
    assert proc.stdout == ""


# One name per idea (electra_tf/cli.py): every old spelling is refused before anything runs, naming the new one.
RENAMED = [
    ("electra_tf.pretrain", "--model_dir", "--output_dir"),
    ("electra_tf.pretrain", "--init_from", "--init"),
    ("electra_tf.convert", "--output", "--output_dir"),
    ("electra_tf.export", "--output", "--output_dir"),
    ("electra_tf.predict", "--output", "--output_file"),
    ("electra_tf.predict", "--input", "--input_file"),
    ("electra_tf.finetune", "--seeds", "--seed"),
    ("electra_tf.finetune", "--max_steps", "--train_steps"),
    ("electra_tf.data.build_vocab", "--output", "--output_file"),
    ("electra_tf.data.build_vocab", "--lower_case", "--do_lower_case"),
    ("electra_tf.data.build_pretraining_data", "--lower_case", "--do_lower_case"),
]


def _in_process_main(module):
    import importlib

    name = module if module.startswith("electra_tf.data.") else module + ".__main__"
    return importlib.import_module(name).main


@pytest.mark.parametrize("module, old, new", RENAMED)
def test_an_old_spelling_is_refused_in_one_line_naming_the_new_one(tmp_path, capsys, module, old, new):
    """In-process, as `main(argv)` parses; --old value and --old=value alike; nothing is written."""
    main = _in_process_main(module)
    target = tmp_path / "out"
    for argv in ([old, str(target)], [f"{old}={target}"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
        assert capsys.readouterr().err.splitlines() == [f"error: {old} is now {new} (see --help)"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("module, old, new", [RENAMED[0], RENAMED[4], RENAMED[6], RENAMED[10]])
def test_an_old_spelling_on_the_command_line_exits_2_with_one_line(repo_root, tmp_path, module, old, new):
    proc = _run(repo_root, module, old, tmp_path / "out", "--help")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [f"error: {old} is now {new} (see --help)"]
    assert proc.stdout == "" and list(tmp_path.iterdir()) == []


def test_negated_old_booleans_are_refused_too(capsys):
    from electra_tf.data import build_vocab

    for old in ("--nolower_case", "--no_lower_case"):
        with pytest.raises(SystemExit) as info:
            build_vocab.main([old])
        assert info.value.code == 2
        assert capsys.readouterr().err.splitlines() == [f"error: {old} is now --nodo_lower_case (see --help)"]


@pytest.mark.parametrize("override, new", [("learning_rate=1e-3", "--learning_rate"),
                                           ("num_warmup_steps=10", "--warmup_proportion (a fraction of --train_steps)")])
def test_pretrain_refuses_an_override_a_flag_sets(tmp_path, capsys, override, new):
    from electra_tf.pretrain.__main__ import parse_args

    with pytest.raises(SystemExit) as info:
        parse_args(["--output_dir", str(tmp_path / "run"), "--override", override])
    assert info.value.code == 2
    key = override.split("=")[0]
    assert capsys.readouterr().err.splitlines() == [f"error: --override {key} is now {new} (see --help)"]
    assert not (tmp_path / "run").exists()


def test_the_new_spellings_parse_onto_the_options(tmp_path):
    """pretrain's --output_dir / --init keep PretrainOptions' names (run.json stays resumable); finetune's
    --seed / --train_steps fill Settings.seeds / max_steps; predict's --progress is on unless --noprogress."""
    from electra_tf import cli
    from electra_tf.finetune import __main__ as finetune_cli
    from electra_tf.predict import __main__ as predict_cli
    from electra_tf.pretrain.__main__ import parse_args

    opts = parse_args(["--output_dir", "runs/x", "--init", "models/m", "--learning_rate", "1e-4",
                       "--warmup_proportion", "0.1"])
    assert (opts.model_dir, opts.init_from, opts.learning_rate, opts.warmup_proportion) == (
        "runs/x", "models/m", 1e-4, 0.1)
    values = cli.parse_flags(finetune_cli.define_flags, ["--task", "sst2", "--init", "random", "--output_dir",
                                                         str(tmp_path), "--seed", "3,4", "--train_steps", "5",
                                                         "--batch_size", "8"])
    settings = finetune_cli.settings_from_flags(values)
    assert (list(settings.seeds), settings.max_steps, settings.batch_size) == ([3, 4], 5, 8)
    # Unset, the batch is the model size's default, resolved with the model (finetune_job.resolve_init).
    unset = finetune_cli.settings_from_flags(cli.parse_flags(finetune_cli.define_flags, [
        "--task", "sst2", "--init", "random", "--output_dir", str(tmp_path)]))
    assert unset.batch_size is None
    assert predict_cli.parse_args(["--model_dir", "m"]).progress is True
    assert predict_cli.parse_args(["--model_dir", "m", "--noprogress"]).progress is False


def test_pretrain_learning_rate_and_warmup_proportion_set_the_config(tmp_path):
    from electra_tf.pretrain.__main__ import parse_args
    from electra_tf.pretrain.options import validate_options

    plan = validate_options(parse_args(["--output_dir", str(tmp_path / "run"), "--train_steps", "40",
                                        "--learning_rate", "2e-3", "--warmup_proportion", "0.25"]),
                            log=lambda line: None)
    assert (plan.config.learning_rate, plan.config.num_warmup_steps) == (2e-3, 10)
    plan = validate_options(parse_args(["--output_dir", str(tmp_path / "run")]), log=lambda line: None)
    assert plan.config.num_warmup_steps == 20  # configs/tiny.json's, as is


def test_importing_a_tool_defines_no_flag():
    code = ("from absl import flags; before = set(flags.FLAGS)\n"
            "import electra_tf.convert.__main__, electra_tf.export.__main__, electra_tf.predict.__main__\n"
            "import electra_tf.finetune.__main__, electra_tf.pretrain.__main__\n"
            "import electra_tf.data.build_vocab, electra_tf.data.build_pretraining_data\n"
            "ours = {'output_dir', 'model_dir', 'task', 'seed', 'init', 'corpus', 'train_file', 'strategy'}\n"
            "assert not ours & set(flags.FLAGS), sorted(set(flags.FLAGS) - before)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_error_and_interrupt_helpers_print_one_line_and_return_the_convention(capsys):
    from electra_tf import cli

    assert cli.report_error("bad --x\n  fix it") == 2
    assert cli.report_interrupted("re-run to resume") == 130
    assert capsys.readouterr().err.splitlines() == ["error: bad --x; fix it", "interrupted: re-run to resume"]
    with pytest.raises(SystemExit) as info:
        cli.exit_with_error("--y is required")
    assert info.value.code == 2 and capsys.readouterr().err == "error: --y is required\n"


def test_ctrl_c_in_pretrain_exits_130_with_one_line(monkeypatch, capsys):
    import electra_tf.pretrain.pretrain_job as run
    from electra_tf.pretrain.__main__ import run_cli

    def interrupted(opts):
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "run_pretraining", interrupted)
    assert run_cli(run.PretrainOptions()) == 130
    assert capsys.readouterr().err.splitlines() == [
        "interrupted: re-run the same command to resume from the last checkpoint"]


def test_a_real_command_prints_no_tensorflow_start_up_noise(repo_root, tmp_path):
    """pretrain imports TensorFlow and asks for the GPUs (--strategy auto) before it stops on the data."""
    proc = _run(repo_root, "electra_tf.pretrain", "--config", "configs/tiny.json", "--data_dir", tmp_path / "nope",
                "--vocab_file", tmp_path / "vocab.txt", "--output_dir", tmp_path / "run")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"error: --data_dir '{tmp_path / 'nope'}' is not a directory; pass the --output_dir of "
        f"python -m electra_tf.data.build_pretraining_data"], proc.stderr
    assert not (tmp_path / "run").exists()


def test_log_filter_keeps_what_the_level_allows():
    text = ("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
            "I0000 00:00:1795469676.446877    3857 port.cc:153] oneDNN custom operations are on.\n"
            "W0000 00:00:1795469676.447175    3857 cudart_stub.cc:31] a warning\n"
            "E0000 00:00:1795469678.984692    3857 cuda_platform.cc:52] failed call to cuInit\n"
            "a Python warning\n")
    assert quiet_tf.filter_log(text, 0) == text
    assert quiet_tf.filter_log(text, 2).splitlines() == [text.splitlines()[3], "a Python warning"]
    assert quiet_tf.filter_log(text, 3) == "a Python warning\n"


def test_output_dir_problem_names_the_reason_and_leaves_nothing(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    assert paths.output_dir_problem(str(tmp_path / "new" / "deeper")) is None
    assert paths.output_dir_problem(str(tmp_path)) is None
    assert paths.output_dir_problem(str(blocker)) == "it is a file"
    assert paths.output_dir_problem(str(blocker / "run")) == f"'{blocker}' is a file"
    if os.path.isdir("/proc"):
        assert paths.output_dir_problem("/proc/electra_tf_test/1") is not None
        assert not os.path.exists("/proc/electra_tf_test")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]  # nothing created was left
    assert paths.output_dir_problem("gs://bucket/run") is None  # remote paths are not probed


def test_resolve_model_dir_finds_the_model_of_a_run_directory(tmp_path):
    from electra_tf.models import model_folder

    run, model = tmp_path / "run", tmp_path / "run" / "pretrained"
    model.mkdir(parents=True)
    lines = []
    assert model_folder.resolve_model_dir(str(run), "--init", lines.append) == str(run)  # no model anywhere
    (model / "discriminator.weights.h5").write_bytes(b"")
    assert model_folder.resolve_model_dir(str(run), "--init", lines.append) == str(model)
    assert lines == [f"--init {run} is a pre-training run directory: using its model in {model}"]
    assert model_folder.resolve_model_dir(str(model), "--init", lines.append) == str(model)
    (run / "discriminator.weights.h5").write_bytes(b"")  # a model directory of its own wins
    assert model_folder.resolve_model_dir(str(run), "--init") == str(run)
