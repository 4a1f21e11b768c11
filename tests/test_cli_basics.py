"""What every `python -m electra_tf.*` tool shares: --help exits 0, a bad flag is one
`error:` line and exit 2 (electra_tf/cli.py), a quiet TensorFlow start-up (no E0000/W0000
line, no start-up banner twice), and the path helpers."""

import os
import re
import subprocess
import sys

import pytest

from electra_tf import paths, quiet_tf

ABSL_TOOLS = ["electra_tf.pretrain", "electra_tf.data.build_vocab", "electra_tf.data.build_pretraining_data",
              "electra_tf.finetune"]
ARGPARSE_TOOLS = ["electra_tf.export", "electra_tf.convert"]
NOISE = re.compile(r"^([EW]0000 |WARNING: All log messages before absl::InitializeLog)", re.M)


def _run(repo_root, module, *args, env=None):
    # As a user runs it: no TF_CPP_MIN_LOG_LEVEL of the test process.
    env = env or {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", quiet_tf.MARKER)}
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=str(repo_root), env=env)


@pytest.mark.parametrize("module", ABSL_TOOLS + ARGPARSE_TOOLS)
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
    ("electra_tf.export", ["--model_dir", "m"],
     "error: the following arguments are required: --output (see --help)"),
    ("electra_tf.convert", ["--from", "nope", "--input", "i", "--output", "o"],
     "error: argument --from: invalid choice: 'nope' (choose from "),  # the choices' quoting varies by Python
])
def test_a_flag_the_parser_refuses_is_one_error_line_and_exit_2(repo_root, module, args, line):
    proc = _run(repo_root, module, *args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(line) and lines[0].endswith(" (see --help)"), lines
    assert proc.stdout == ""


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
                "--vocab_file", tmp_path / "vocab.txt", "--model_dir", tmp_path / "run")
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
    run, model = tmp_path / "run", tmp_path / "run" / "pretrained"
    model.mkdir(parents=True)
    lines = []
    assert paths.resolve_model_dir(str(run), "--init", lines.append) == str(run)  # no model anywhere
    (model / "discriminator.weights.h5").write_bytes(b"")
    assert paths.resolve_model_dir(str(run), "--init", lines.append) == str(model)
    assert lines == [f"--init {run} is a pre-training run directory: using its model in {model}"]
    assert paths.resolve_model_dir(str(model), "--init", lines.append) == str(model)
    (run / "discriminator.weights.h5").write_bytes(b"")  # a model directory of its own wins
    assert paths.resolve_model_dir(str(run), "--init") == str(run)
