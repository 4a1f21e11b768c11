"""The wheel works from any folder: built from this checkout, installed without dependencies into
a temporary folder, and run from outside the checkout with nothing from the checkout on the path.

It carries the configs and the sample corpus (copied from the top-level configs/ and data/ at build
time, setup.py) and nothing of tests/, scripts/, runs/ or docs/. The dependencies come from the
running interpreter's site-packages, read as a plain folder (`python -S`: no .pth file, so not the
editable install's path to this checkout either).
"""

import configparser
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.large  # builds and installs the wheel: not in the fast tier

REPO_ROOT = Path(__file__).resolve().parent.parent
# What a build reads: the package, its build files and the two folders it packages.
BUILD_INPUTS = ("electra_tf", "configs", "data", "setup.py", "setup.cfg", "pyproject.toml", "README.md",
                "MANIFEST.in")


def _version() -> str:
    parser = configparser.ConfigParser()
    parser.read(REPO_ROOT / "setup.cfg", encoding="utf-8")
    return parser["metadata"]["version"]


@pytest.fixture(scope="module")
def wheel_site(tmp_path_factory):
    """(wheel file, the folder it is installed in)."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"  # a copy, so that the build's build/ and egg-info stay out of the checkout
    src.mkdir()
    for name in BUILD_INPUTS:
        path = REPO_ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    build = subprocess.run(pip + ["wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                                  "-w", str(work / "dist"), str(src)],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, "pip wheel failed (setuptools>=70.1 is in the test extra):\n" + build.stderr[-3000:]
    (wheel,) = (work / "dist").glob("electra_tf-*.whl")
    site = work / "site"
    install = subprocess.run(pip + ["install", "--no-deps", "--no-index", "-q", "--target", str(site), str(wheel)],
                             capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr[-3000:]
    return wheel, site


def _command(args, site: Path, cwd: Path) -> dict:
    deps = sysconfig.get_paths()["purelib"]
    # A user's environment: the tools' own TensorFlow log level (tests/conftest.py sets another).
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "TF_CPP_MIN_LOG_LEVEL")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), deps])
    return dict(args=[sys.executable, "-S", *args], cwd=cwd, env=env, text=True)


def _run(args, site: Path, cwd: Path, timeout=240) -> subprocess.CompletedProcess:
    return subprocess.run(**_command(args, site, cwd), capture_output=True, timeout=timeout)


def test_the_wheel_holds_the_package_and_its_resources_only(wheel_site):
    wheel, _ = wheel_site
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"electra_tf", f"electra_tf-{_version()}.dist-info"}, tops
    for config in (REPO_ROOT / "configs").glob("*.json"):
        assert f"electra_tf/_resources/configs/{config.name}" in names
    assert "electra_tf/_resources/data/sample_corpus.txt" in names
    assert not [n for n in names if "__pycache__" in n or "/tests/" in n or "/runs/" in n]


def test_the_installed_wheel_runs_from_any_folder(wheel_site, tmp_path):
    _, site = wheel_site
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # The main command: the embedded default (sample corpus -> vocab, shards -> tiny model), shortened;
    # it runs while the quick checks below do.
    run_dir = tmp_path / "run"
    pretrain = subprocess.Popen(**_command(["-m", "electra_tf.pretrain", "--train_steps", "2", "--output_dir",
                                            str(run_dir)], site, elsewhere),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        where = _run(["-c", "import json, sys, electra_tf; print(json.dumps([electra_tf.__file__, sys.path]))"],
                     site, elsewhere)
        assert where.returncode == 0, where.stderr[-2000:]
        package_file, path = json.loads(where.stdout)
        assert Path(package_file).resolve().is_relative_to(site.resolve())
        # Nothing from the checkout on the path (the dependencies' folder may be a venv inside it).
        deps = Path(sysconfig.get_paths()["purelib"]).resolve()
        from_checkout = [p for p in path if p and Path(p).resolve().is_relative_to(REPO_ROOT)
                         and not Path(p).resolve().is_relative_to(deps)]
        assert not from_checkout, from_checkout

        version = _run(["-m", "electra_tf", "--version"], site, elsewhere)
        assert version.returncode == 0 and version.stdout.strip() == f"electra_tf {_version()}", version

        listing = _run(["-m", "electra_tf", "--help"], site, elsewhere)
        assert listing.returncode == 0, listing.stderr[-2000:]
        assert "pretrain" in listing.stdout and "small, small_plus, tiny" in listing.stdout

        named = _run(["-m", "electra_tf.pretrain", "--config", "small", "--help"], site, elsewhere)
        assert named.returncode == 0, named.stderr[-2000:]
        assert "--config" in named.stdout + named.stderr

        out, err = pretrain.communicate(timeout=300)
    finally:
        if pretrain.poll() is None:
            pretrain.kill()
            pretrain.communicate()
    assert pretrain.returncode == 0, out[-2000:] + err[-3000:]
    assert "_resources" in out + err  # the sample corpus it learned from is the wheel's
    assert (run_dir / "pretrained" / "discriminator.weights.h5").is_file()
    assert (run_dir / "pretrained" / "vocab.txt").is_file()
    assert not list(elsewhere.iterdir())  # it wrote where it was told, nothing into the current folder
