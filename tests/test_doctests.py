"""The docstring examples of electra_tf run as written (from the repository root)."""

import doctest
import importlib
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODULES = sorted(
    ".".join(p.relative_to(ROOT).with_suffix("").parts)
    for p in (ROOT / "electra_tf").rglob("*.py")
    if ">>> " in p.read_text(encoding="utf-8") and p.name != "__main__.py")


def test_the_examples_are_found():
    assert {"electra_tf.config", "electra_tf.pretrain.pretrainer", "electra_tf.models.encoder"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name, monkeypatch):
    monkeypatch.chdir(ROOT)  # examples read configs/*.json
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
                             extraglobs={"np": __import__("numpy")})
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {name} failed"
