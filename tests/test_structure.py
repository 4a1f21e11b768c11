"""The package's shape (issue 68, "long procedures become small steps"): no function or method in
electra_tf/ is longer than MAX_FUNCTION_LINES, its docstring included, unless a comment inside it
that starts `# long:` says why it stays whole."""

import ast
import io
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "electra_tf"
MAX_FUNCTION_LINES = 80
EXCUSE = "# long:"


def _excused_lines(source: str) -> set:
    """Lines holding a `# long: <why>` comment (the why not empty)."""
    return {token.start[0] for token in tokenize.generate_tokens(io.StringIO(source).readline)
            if token.type == tokenize.COMMENT and token.string.startswith(EXCUSE)
            and token.string[len(EXCUSE):].strip()}


def long_functions(path: Path, root: Path = PACKAGE.parent) -> list:
    """'<file>:<line> <name> (<n> lines)' for each function or method of `path` over the limit
    that says nothing of why, the file named relative to `root`."""
    source = path.read_text(encoding="utf-8")
    excused = _excused_lines(source)
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_FUNCTION_LINES and not any(node.lineno <= line <= node.end_lineno for line in excused):
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_is_over_80_lines_unless_it_says_why():
    offenders = [entry for path in sorted(PACKAGE.rglob("*.py")) for entry in long_functions(path)]
    assert offenders == [], (
        f"{len(offenders)} function(s) over {MAX_FUNCTION_LINES} lines, docstring included: split them into "
        f"named steps, or say why one stays whole in a comment inside it starting '{EXCUSE}':\n  "
        + "\n  ".join(offenders))


def test_a_long_function_is_named_with_its_length_unless_it_says_why(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    method_body = "".join(f"        x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    sample = tmp_path / "sample.py"
    sample.write_text(f"def long_one():\n{body}\n\n"
                      f"def excused():\n    # long: one table, read top to bottom\n{body}\n\n"
                      f"def not_excused():\n    # long:\n{body}\n\n"
                      f"class Job:\n    def method(self):\n{method_body}\n\n"
                      f"def short():\n    return 1\n", encoding="utf-8")
    assert long_functions(sample, root=tmp_path) == [
        f"sample.py:1 long_one ({MAX_FUNCTION_LINES + 1} lines)",
        f"sample.py:{2 * MAX_FUNCTION_LINES + 8} not_excused ({MAX_FUNCTION_LINES + 2} lines)",
        f"sample.py:{3 * MAX_FUNCTION_LINES + 13} method ({MAX_FUNCTION_LINES + 1} lines)",
    ]
