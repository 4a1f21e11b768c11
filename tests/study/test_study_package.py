"""The studies are the package `scripts` of the checkout: importable wherever the editable install
is, runnable as files or modules, with no sys.path edits of their own."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STUDIES = ["scripts/domain_study.py", "scripts/adaptation_study.py", "scripts/efficiency_study.py",
           "scripts/reference/reference_check.py"]


def _run(args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # only what the install provides
    env.update(TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_study_modules_import_from_any_folder(tmp_path):
    code = ("import scripts.domain_study, scripts.adaptation_study, scripts.efficiency_study, "
            "scripts.reference.reference_check, scripts.study_lib.baselines; print(scripts.__file__)")
    proc = _run(["-c", code], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert Path(proc.stdout.strip()).resolve() == REPO / "scripts" / "__init__.py"


@pytest.mark.parametrize("script", STUDIES)
def test_a_study_runs_as_a_file_and_as_a_module(script):
    for args in ([script, "--help"], ["-m", script[:-3].replace("/", "."), "--help"]):
        proc = _run(args, REPO)
        assert proc.returncode == 0, (args, proc.stderr[-2000:])
        assert "--" in proc.stdout


def test_no_sys_path_edits_in_the_studies_or_their_tests():
    files = [*(REPO / "scripts").rglob("*.py"), *(REPO / "tests" / "study").glob("*.py")]
    edits = [str(f.relative_to(REPO)) for f in files if f != Path(__file__).resolve()
             and re.search(r"sys\.path\.(insert|append)|syspath_prepend", f.read_text(encoding="utf-8"))]
    assert edits == []
