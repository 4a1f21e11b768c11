""".gitignore covers what the documented commands write into the checkout, and hides no tracked file.

The paths come from the command blocks of README.md and docs/*.md themselves (`--output_dir`,
`--output_file`, `--model_dir`, `--input_file`, ... followed by a relative path), so a command added to the
docs with a new output folder fails here until .gitignore names it.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FLAGS = ("output", "output_dir", "output_file", "model_dir", "local-dir", "input", "input_file", "generator_input",
         "eval_data_dir")
FLAG_PATH = re.compile(r"--(" + "|".join(map(re.escape, FLAGS)) + r")[ =]+([^\s'\"`\\\[\]]+)")

pytestmark = pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(),
                                reason="needs git and a git checkout")


def _git(*args, **kwargs):
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=60, **kwargs)


def command_blocks(text):
    """The bodies of the fenced ```bash / ```sh / plain ``` blocks of a Markdown text."""
    blocks, body, language = [], None, None
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            if body is None:
                body, language = [], line.strip()[3:].strip()
            else:
                if language in ("", "bash", "sh"):
                    blocks.append("\n".join(body))
                body = None
        elif body is not None:
            body.append(line)
    return blocks


def documented_outputs():
    paths = set()
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for block in command_blocks(doc.read_text(encoding="utf-8")):
            for _, path in FLAG_PATH.findall(block):
                # Relative paths in the checkout only: not ../shared, /srv, gs://, $T/... or PLACEHOLDERS.
                if path.startswith(("/", "..", "$", "<")) or "://" in path or path.isupper():
                    continue
                paths.add(path)
    return sorted(paths)


def test_documented_commands_write_only_ignored_paths():
    paths = documented_outputs()
    assert {"runs/default", "serving/electra/1", "models/electra", "shards/", "vocab.txt"} <= set(paths), paths
    # A folder path is checked as a path inside it: git cannot tell a missing folder from a file.
    # A committed folder a command reads (--model_dir models/electra-small-imdb) is not an output.
    paths = [p for p in paths if not _git("ls-files", "--", p).stdout.strip()]
    probes = [p if "." in Path(p).name else p.rstrip("/") + "/x" for p in paths]
    ignored = set(_git("check-ignore", "--stdin", input="\n".join(probes) + "\n").stdout.split())
    assert [p for p in probes if p not in ignored] == []


def test_no_tracked_file_is_ignored():
    assert _git("ls-files", "--cached", "--ignored", "--exclude-standard").stdout.split() == []
