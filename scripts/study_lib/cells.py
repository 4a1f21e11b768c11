"""A study's results log: one JSON line per finished cell in <work>/cells.jsonl, read back by key.

A cell is appended as soon as it is done, so an interrupted study resumes by skipping the keys
it finds (scripts/domain_study.py, scripts/adaptation_study.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict


def load_cells(work: Path) -> Dict[str, dict]:
    """Every cell of <work>/cells.jsonl by its "key" (a later line wins); {} before the first."""
    path = work / "cells.jsonl"
    cells = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                cell = json.loads(line)
                cells[cell["key"]] = cell
    return cells


def add_cell(work: Path, cell: dict) -> None:
    """Appends one cell (a dict with a "key") to <work>/cells.jsonl."""
    with open(work / "cells.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(cell, sort_keys=True) + "\n")
