"""Running the commands of a Markdown page as tests (README.md, docs/*.md sections).

`markdown_commands` takes a page's ```bash / ```sh blocks command by command and its
```python blocks whole; `run_commands` runs them in order in a working directory.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Tuple


def markdown_commands(text: str):
    """[(kind, command)] in README order: kind 'shell' (one command; `\\` continuations kept)
    or 'python' (a whole block)."""
    out = []
    for lang, body in re.findall(r"^```(bash|sh|python)\n(.*?)^```", text, re.M | re.S):
        if lang == "python":
            out.append(("python", body))
            continue
        current = []
        for line in body.splitlines():
            if not current and (not line.strip() or line.lstrip().startswith("#")):
                continue
            current.append(line)
            if not line.endswith("\\"):
                out.append(("shell", "\n".join(current)))
                current = []
        assert not current, f"a command ends in a line continuation: {current}"
    return out


def run_commands(commands, work: Path, name: str = "snippet") -> List[Tuple[str, subprocess.CompletedProcess, float]]:
    """Runs [(kind, command)] in order in `work` (Python blocks as scripts there), each to exit 0.

    Returns [(command, completed process, seconds)].
    """
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    done = []
    for i, (kind, cmd) in enumerate(commands):
        if kind == "python":
            script = work / f"{name}_{i}.py"
            script.write_text(cmd, encoding="utf-8")
            argv = [sys.executable, script.name]
        else:
            argv = ["bash", "-c", cmd]
        start = time.time()
        proc = subprocess.run(argv, cwd=str(work), env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, (f"command exited {proc.returncode}:\n{cmd}\n"
                                      f"--- stderr (end) ---\n{proc.stderr[-3000:]}")
        done.append((cmd, proc, time.time() - start))
    return done
