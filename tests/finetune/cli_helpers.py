"""Running `python -m electra_tf.finetune` and `python -m electra_tf.predict` in-process, as their
`main(argv)` runs them (argv: the flags only), with what they print."""

from __future__ import annotations

from typing import List, Tuple

from helpers import error_lines  # noqa: F401 (callers import it from here)


def finetune_main(capsys, args: List) -> Tuple[int, str, str]:
    """(exit code, stdout, stderr) of `python -m electra_tf.finetune <args>`."""
    import electra_tf.finetune.__main__ as cli

    capsys.readouterr()
    code = cli.main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def predict_main(capsys, args: List) -> Tuple[int, str, str]:
    """(exit code, stdout, stderr) of `python -m electra_tf.predict <args>`."""
    from electra_tf.predict.__main__ import main

    capsys.readouterr()
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err
