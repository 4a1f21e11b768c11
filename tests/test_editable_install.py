"""The installed package wins over a checkout directory that is merely named electra_tf.

Run from the folder above a checkout named `electra_tf`, Python sees that checkout (which has no
__init__.py of its own) as a namespace package `electra_tf` unless the installed package is found
by the path finder too; setup.cfg's `package_dir` makes `pip install -e .` put the checkout root
on sys.path for that reason.
"""

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def _run(args, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # only what the install provides
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_import_from_the_folder_above_a_checkout_named_electra_tf(tmp_path):
    (tmp_path / "electra_tf").symlink_to(REPO_ROOT, target_is_directory=True)
    code = ("import electra_tf, electra_tf.data.vocab; "
            "print(electra_tf.__file__); print(electra_tf.data.vocab.__file__)")
    proc = _run(["-c", code], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    package_file, vocab_file = proc.stdout.split()
    # The package itself, not the checkout seen as a namespace package (whose __file__ is None).
    assert Path(package_file).resolve() == REPO_ROOT / "electra_tf" / "__init__.py"
    assert Path(vocab_file).resolve() == REPO_ROOT / "electra_tf" / "data" / "vocab.py"


def test_python_dash_m_from_the_folder_above_the_checkout(tmp_path):
    """`python -m electra_tf.<tool>` puts the current folder first on sys.path; it still runs the package."""
    (tmp_path / "electra_tf").symlink_to(REPO_ROOT, target_is_directory=True)
    proc = _run(["-m", "electra_tf.data.build_vocab", "--help"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--vocab_size" in proc.stdout + proc.stderr
