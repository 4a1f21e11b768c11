"""Docs that cannot go stale: what README.md and docs/*.md name must exist and parse.

- every repository path they name (`electra_tf/...`, `scripts/...`, `tests/...`,
  `configs/...`, `docs/...`, `data/...`) exists (globs match something); so does
  every path a script's docstring names, and every script a script runs by path
  (`REPO / "scripts" / ... .py`);
- every import of their ```python blocks resolves (module, and each imported name);
- every documented command of a tool or script parses: the shell blocks' and the
  prose's `python -m electra_tf.<tool> ...` through the tool's own absl flags
  (`electra_tf.cli.parse_flags`), `python scripts/....py ...` and
  `python -m scripts....` through the script's argparse parser (stopped right
  after parsing: nothing runs); so does every usage line of a script's docstring.

Nothing here runs a job: a path, an import or a flag that was renamed fails in seconds.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import re
import runpy
import shlex
import sys
from pathlib import Path

import pytest

from doc_commands import markdown_commands

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
SCRIPTS = sorted(p for p in (REPO / "scripts").rglob("*.py") if "__pycache__" not in p.parts)

PATH_RE = re.compile(r"(?<![\w./\-<>$~])((?:electra_tf|scripts|tests|configs|docs|data)/[\w.\-/*]*[\w*/])")

# Named like repository paths, but are not: (page, text) -> why.
NOT_REPO_PATHS = {
    ("docs/pretraining.md", "data/train/"): "inside a run directory (the layout of <output_dir>/)",
    ("docs/pretraining.md", "data/eval/"): "inside a run directory (the layout of <output_dir>/)",
}

# Known stale references in pages another change owns, tolerated until it lands:
# (page, kind, text) -> what is wrong. An entry that no longer occurs fails the test
# (remove it from here once the page is fixed).
PENDING = {}


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _exists(text: str) -> bool:
    text = text.split("::")[0]
    if "*" in text:
        return any(REPO.glob(text.rstrip("/")))
    return (REPO / text).exists()


# ----------------------------------------------------------------------------- paths
# A repository file a script builds its path to: REPO / "scripts" / "x" / "y.py".
CODE_PATH_RE = re.compile(r'\b(?:REPO|REPO_ROOT|ROOT)((?:\s*/\s*"[\w.\-]+")+)')


def _stale_paths():
    out = []
    texts = [(page, page.read_text(encoding="utf-8")) for page in PAGES]
    texts += [(script, ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or "")
              for script in SCRIPTS]
    for page, text in texts:
        for found in sorted(set(PATH_RE.findall(text))):
            if (_rel(page), found) in NOT_REPO_PATHS:
                continue
            if not _exists(found):
                out.append((_rel(page), "path", found))
    for script in SCRIPTS:
        for chain in CODE_PATH_RE.findall(script.read_text(encoding="utf-8")):
            found = "/".join(re.findall(r'"([^"]+)"', chain))
            top = found.split("/")[0]
            if top in ("electra_tf", "scripts", "tests", "configs", "docs", "data") \
                    and found.endswith((".py", ".sh")) and not _exists(found):
                out.append((_rel(script), "path", found))
    return out


def test_not_repo_paths_are_still_named():
    for (page, text), why in NOT_REPO_PATHS.items():
        assert text in (REPO / page).read_text(encoding="utf-8"), f"{page} no longer names {text}: drop it"
        assert not _exists(text) or why


# ----------------------------------------------------------------------------- imports
def _snippet_imports(body: str):
    lines = []
    for line in body.splitlines():
        stripped = line.lstrip()
        if stripped.startswith((">>> ", "... ")):
            lines.append(stripped[4:])
        elif stripped in (">>>", "..."):
            lines.append("")
        elif not any(line.lstrip().startswith(p) for p in (">>>",)):
            lines.append(line)
    tree = ast.parse("\n".join(lines))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            for alias in node.names:
                yield node.module, alias.name


def _import_problem(module: str, name):
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        return f"import {module}: {e}"
    if name is None or name == "*" or hasattr(mod, name):
        return None
    try:
        importlib.import_module(f"{module}.{name}")
    except ImportError:
        return f"{module} has no {name}"
    return None


def _stale_imports():
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for body in re.findall(r"^```python\n(.*?)^```", text, re.M | re.S):
            for module, name in _snippet_imports(body):
                problem = _import_problem(module, name)
                if problem:
                    out.append((_rel(page), "import", f"from {module} import {name}" if name else
                                f"import {module}"))
    return out


# ----------------------------------------------------------------------------- commands
class _Parsed(Exception):
    pass


def _python_invocations(command: str):
    """[(target, args)] of each `python ...` in a shell command; target '-m mod' or a .py path."""
    command = command.replace("\\\n", " ")
    out = []
    for part in re.split(r"&&|\|\||[|;]", command):
        try:
            words = shlex.split(part, comments=True)
        except ValueError:
            continue
        for i, w in enumerate(words):
            if re.fullmatch(r"(\S*/)?python3?", w):
                rest = words[i + 1:]
                break
        else:
            continue
        # A usage line's optional parts: [--seed 0] -> --seed 0. "..." after a flag elides its
        # value; elsewhere, more flags.
        kept = []
        for w in rest:
            if w in ("...", "[...]"):
                if kept and kept[-1].startswith("--") and "=" not in kept[-1]:
                    kept.append("VALUE")
                continue
            kept.append(w.lstrip("[").rstrip("]"))
        rest = kept
        # Output redirections and a trailing & end the arguments.
        args = []
        for w in rest:
            if w in ("&", ">", ">>", "2>&1") or w.startswith((">", "2>", "1>")):
                break
            args.append(w)
        if args[:1] == ["-m"] and len(args) > 1:
            out.append(("-m " + args[1], args[2:]))
        elif args and args[0].endswith(".py"):
            out.append((args[0], args[1:]))
    return out


def _parse_electra_tool(module: str, args):
    from electra_tf.cli import parse_flags

    mod = importlib.import_module(module)
    if not hasattr(mod, "define_flags"):
        mod = importlib.import_module(module + ".__main__")
    if any(a in ("--help", "-h", "--helpfull") for a in args):
        return None
    import contextlib
    import io

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parse_flags(mod.define_flags, args, renamed=getattr(mod, "RENAMED", None))
    except SystemExit as e:
        return f"flags refused (exit {e.code}): {err.getvalue().strip()}"
    return None


def _parse_script(path: Path, args, monkeypatch):
    """Runs the script as __main__ until its argparse parser has parsed `args`."""
    real_parse_known = argparse.ArgumentParser.parse_known_args

    def parse_known_args(self, argv=None, namespace=None):
        self.allow_abbrev = False  # a documented flag is spelled in full
        result = real_parse_known(self, argv, namespace)
        raise _Parsed(result)

    with monkeypatch.context() as m:
        m.setattr(argparse.ArgumentParser, "parse_known_args", parse_known_args)
        m.setattr(sys, "argv", [str(path), *args])
        m.setattr(os, "environ", dict(os.environ))
        m.syspath_prepend(str(REPO))
        m.syspath_prepend(str(path.parent))  # as `python path` puts the script's folder first
        try:
            runpy.run_path(str(path), run_name="__main__")
        except _Parsed as parsed:
            unknown = parsed.args[0][1]
            return f"unrecognised arguments {unknown}" if unknown else None
        except SystemExit as e:
            return None if e.code in (0, None) and any(a in ("-h", "--help") for a in args) else \
                f"argparse refused (exit {e.code})"
    return "never parsed its arguments"


def _check_invocation(target: str, args, monkeypatch):
    if target.startswith("-m "):
        module = target[3:]
        if module.startswith("electra_tf"):
            return _parse_electra_tool(module, args)
        if module.startswith("scripts."):
            path = REPO / (module.replace(".", "/") + ".py")
            if not path.is_file():
                return f"no {_rel(path)}"
            return _parse_script(path, args, monkeypatch)
        return None  # pytest, venv, pip: not ours
    path = REPO / target
    if not target.startswith("scripts/"):
        return None
    if not path.is_file():
        return f"no {target}"
    return _parse_script(path, args, monkeypatch)


def _expand(command: str, variables) -> str:
    """$NAME / ${NAME} of the page's own assignments replaced by their values."""
    return re.sub(r"\$\{?([A-Za-z_]\w*)\}?",
                  lambda m: variables.get(m.group(1), m.group(0)), command)


def _documented_commands():
    """[(where, command)]: the pages' shell blocks and the scripts' docstring usage lines."""
    out = []
    for page in PAGES:
        variables = {}  # NAME=value lines of the page's blocks, expanded in later commands
        for kind, command in markdown_commands(page.read_text(encoding="utf-8")):
            if kind != "shell":
                continue
            command = _expand(command, variables)
            assignment = re.fullmatch(r"(?:export\s+)?([A-Za-z_]\w*)=(.*)", command.strip(), re.S)
            if assignment:
                words = shlex.split(assignment.group(2), comments=True)
                # Expanded unquoted (as the pages use them): split into words again.
                variables[assignment.group(1)] = " ".join(words)
                continue
            out.append((_rel(page), command))
        # Inline `python ...` spans of the prose; a <placeholder> is one word.
        for span in re.findall(r"`(python3? [^`]+)`", page.read_text(encoding="utf-8")):
            if "*" not in span:
                out.append((_rel(page), re.sub(r"<[^<>]*>", "PLACEHOLDER", span)))
    for script in SCRIPTS:
        doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
        lines = doc.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i].strip()
            if re.match(r"python3? (-m \S+|\S+\.py)", line):
                command = line
                while command.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    command = command[:-1] + " " + lines[i].strip()
                out.append((_rel(script), command))
            i += 1
    return out


def _stale_commands(monkeypatch):
    out = []
    for where, command in _documented_commands():
        for target, args in _python_invocations(command):
            problem = _check_invocation(target, args, monkeypatch)
            if problem:
                out.append((where, "command", f"{target} {' '.join(args)}".strip() + f"  [{problem}]"))
    return out


# ----------------------------------------------------------------------------- the test
def test_docs_name_only_what_exists_and_parses(monkeypatch, capsys):
    stale = _stale_paths() + _stale_imports() + _stale_commands(monkeypatch)
    capsys.readouterr()
    new = [s for s in stale if (s[0], s[1], s[2].split("  [")[0]) not in PENDING]
    assert not new, "stale references (page, kind, text):\n" + "\n".join(map(str, new))
    seen = {(s[0], s[1], s[2].split("  [")[0]) for s in stale}
    fixed = [k for k in PENDING if k not in seen]
    assert not fixed, f"fixed since: remove from PENDING: {fixed}"


def test_the_checks_see_what_they_should(monkeypatch, capsys):
    # Each check finds a planted stale reference.
    assert not _exists("electra_tf/pretrain/callbacks.py") and _exists("electra_tf/cli.py")
    assert _exists("scripts/benchmarks/*.py") and not _exists("scripts/nowhere/*.py")
    assert _import_problem("electra_tf.finetune", "LayerwiseAdamW")
    assert _import_problem("electra_tf.cli", "parse_flags") is None
    assert _python_invocations("CI=true python -m electra_tf.export --model_dir m \\\n --output_dir o > log 2>&1") \
        == [("-m electra_tf.export", ["--model_dir", "m", "--output_dir", "o"])]
    assert _parse_electra_tool("electra_tf.export", ["--model_dir", "m", "--no_such_flag", "1"])
    assert _parse_electra_tool("electra_tf.export", ["--model_dir", "m", "--output_dir", "o"]) is None
    # Scripts: argparse, refusing abbreviations and (domain_study) unknown rung names.
    assert _check_invocation("scripts/benchmarks/benchmark_pretrain.py", ["--peer"], monkeypatch)
    assert _check_invocation("scripts/benchmarks/benchmark_pretrain.py", ["--no_peer"], monkeypatch) is None
    assert _check_invocation("scripts/domain_study.py", ["--rungs", "mini_electra_5k"], monkeypatch)
    assert _check_invocation("scripts/domain_study.py", ["--rungs", "cpu_demo_electra_5k"], monkeypatch) is None
    assert _check_invocation("scripts/make_big_corpus.py", [], monkeypatch) == "no scripts/make_big_corpus.py"


def test_colab_installs_what_setup_cfg_requires_in_its_ranges():
    """docs/colab_tpu.md installs electra_tf with --no-deps: it must list every requirement itself,
    in setup.cfg's ranges (the TPU wheel stands in for `tensorflow`)."""
    import configparser

    from packaging.requirements import Requirement

    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg", encoding="utf-8")
    required = [Requirement(line) for line in cfg["options"]["install_requires"].splitlines()
                if line.strip() and not line.strip().startswith("#")]
    text = (REPO / "docs" / "colab_tpu.md").read_text(encoding="utf-8")
    installed = {}
    for line in re.findall(r"^!pip install (.*)$", text, re.M):
        for word in shlex.split(line):
            if word.startswith("-") or "://" in word or word == "electra_tf":
                continue
            req = Requirement(word)
            installed[req.name.lower()] = req
    assert "tensorflow-tpu" in installed
    for req in required:
        name = req.name.lower()
        if name == "tensorflow":
            continue
        assert name in installed, f"docs/colab_tpu.md does not install {req} (setup.cfg requires it)"
        spec = installed[name].specifier
        pinned = [s.version for s in spec if s.operator == "=="]
        capped = any(s.operator in ("<", "<=", "~=", "==") for s in req.specifier)
        if pinned:
            assert req.specifier.contains(pinned[0]), f"colab pins {installed[name]} outside setup.cfg's {req}"
        elif capped:  # an unpinned install must stay under setup.cfg's cap
            assert spec == req.specifier, f"colab installs {installed[name]}, setup.cfg requires {req}"
