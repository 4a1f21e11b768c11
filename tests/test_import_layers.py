"""The import contracts (setup.cfg [importlinter]): imports inside electra_tf only go down, and
export, api, predict and convert import neither fine-tuning nor pre-training.

Run by `lint-imports` in CI as well; here so the README's test command covers it.
"""

import configparser
import os
import pkgutil
import subprocess
import sys

import electra_tf

ROOT = os.path.join(os.path.dirname(__file__), "..")


def _layers():
    parser = configparser.ConfigParser()
    parser.read(os.path.join(ROOT, "setup.cfg"))
    text = parser["importlinter:contract:layers"]["layers"]
    return [[name.strip() for name in line.split("|")] for line in text.strip().splitlines()]


def test_imports_only_go_down():
    # In a fresh process (the contract reads every module's source, imports none);
    # no cache, so nothing is written into the checkout.
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert f"{len(_contracts())} kept, 0 broken" in out.stdout  # every contract of setup.cfg, kept


def _contracts():
    parser = configparser.ConfigParser()
    parser.read(os.path.join(ROOT, "setup.cfg"))
    return [name for name in parser.sections() if name.startswith("importlinter:contract:")]


def test_the_model_users_contract_forbids_the_jobs():
    # export, api, predict and convert load and convert models: the classes they use live in
    # models/ (and data/), never in the fine-tuning or pre-training jobs.
    parser = configparser.ConfigParser()
    parser.read(os.path.join(ROOT, "setup.cfg"))
    contract = parser["importlinter:contract:model_users"]
    assert contract["type"] == "forbidden"
    assert contract["source_modules"].split() == [f"electra_tf.{m}" for m in ("export", "api", "predict", "convert")]
    assert contract["forbidden_modules"].split() == ["electra_tf.finetune", "electra_tf.pretrain"]


def test_every_module_is_in_a_layer():
    # A module named in no layer would escape the contract: every top-level
    # module and sub-package of electra_tf must be placed.
    placed = {name for layer in _layers() for name in layer}
    found = {m.name for m in pkgutil.iter_modules(electra_tf.__path__) if m.name != "__main__"}
    assert found - placed == set(), f"add these to a layer in setup.cfg [importlinter]: {sorted(found - placed)}"
    assert placed - found == set(), f"layers name modules that do not exist: {sorted(placed - found)}"


def _architecture_rows():
    """The layer table of docs/architecture.md, lowest first: the modules named in each row's first cell."""
    import re

    with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as f:
        text = f.read()
    table = text[text.index("| layer | what it owns |"):].split("\n\n")[0]
    rows = [line.split("|")[1] for line in table.splitlines()[2:]]
    return [re.findall(r"`(\w+)`", cell) for cell in rows]


def test_the_architecture_page_lists_the_layers_of_the_contract():
    # docs/architecture.md lists the layers lowest first; setup.cfg highest first.
    assert [sorted(row) for row in _architecture_rows()] == [sorted(layer) for layer in reversed(_layers())]


def test_the_contract_catches_an_upward_import(tmp_path):
    # The same layer order on a two-module package whose lower layer imports the
    # upper one: lint-imports must refuse it (the contract is not vacuous).
    pkg = tmp_path / "toy"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "models.py").write_text("def f():\n    from toy import training  # upward, inside a function\n")
    (pkg / "training.py").write_text("")
    (tmp_path / ".importlinter").write_text(
        "[importlinter]\nroot_package = toy\n\n[importlinter:contract:layers]\nname = toy\n"
        "type = layers\ncontainers = toy\nlayers =\n    training\n    models\n")
    code = ("import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename='.importlinter', no_cache=True, no_logo=True))")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 1, out.stdout[-2000:]
    assert "toy.models -> toy.training" in out.stdout
