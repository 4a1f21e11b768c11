"""Path checks shared by the command-line tools (no TensorFlow import).

    problem = output_dir_problem("runs/small")       # None: it can be created and written

`resource_dir` finds what the package ships beside its code: the model configs
(configs/*.json, named by `config_names` and resolved by `resolve_config`) and the
sample corpus of the embedded default (data/sample_corpus.txt), in a checkout or
an editable install at the top of the repository, in a wheel (or `pip install .`)
inside the package, where the build puts them (setup.py).

`output_dir_problem` lets every tool refuse an output path it could not write
(a file, a path under a file, /proc, a read-only place) with one line, before
any work starts and without leaving anything behind. (Finding the model inside a
pre-training run directory is `electra_tf.models.model_folder.resolve_model_dir`.)
"""

from __future__ import annotations

import os
import tempfile
from typing import Optional

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# Where a wheel carries the repository's top-level configs/ and data/ (setup.py copies them there
# at build time; the checkout holds one copy, at the top).
RESOURCES_PACKAGE = "_resources"
RESOURCE_DIRS = ("configs", "data")


def resource_dir(name: str) -> str:
    """The folder `name` ("configs" or "data") the package ships: electra_tf/_resources/<name> in an
    installed wheel, else <checkout>/<name> (a checkout, an editable install)."""
    packaged = os.path.join(PACKAGE_DIR, RESOURCES_PACKAGE, name)
    if os.path.isdir(packaged):
        return packaged
    return os.path.join(os.path.dirname(PACKAGE_DIR), name)


CONFIG_DIR = resource_dir("configs")
SAMPLE_CORPUS = os.path.join(resource_dir("data"), "sample_corpus.txt")


def config_names() -> list:
    """The names of the shipped model configs (configs/<name>.json), sorted."""
    if not os.path.isdir(CONFIG_DIR):
        return []
    return sorted(n[:-len(".json")] for n in os.listdir(CONFIG_DIR) if n.endswith(".json"))


def resolve_config(value: str, flag: str = "--config") -> str:
    """The JSON file of `value`: a path to a config file, or the name of a shipped one
    ("small", also written "small.json" or "configs/small.json", so the README's commands run
    from any folder). Raises ValueError (one line naming the shipped names) otherwise."""
    if is_remote(value) or os.path.isfile(value):
        return value
    parent, base = os.path.split(os.path.normpath(value))
    name = base[:-len(".json")] if base.endswith(".json") else base
    if parent in ("", "configs") and name in config_names():
        return os.path.join(CONFIG_DIR, name + ".json")
    names = ", ".join(config_names())
    if base.endswith(".json") or "/" in value or os.sep in value:
        raise ValueError(f"{flag} {value!r} does not exist; pass a JSON file such as configs/small.json "
                         f"or a config name ({names})")
    raise ValueError(f"{flag} {value!r} is neither a config file nor a config name; use a name ({names}) "
                     f"or a JSON file such as configs/small.json")


def is_remote(path: str) -> bool:
    """True for a URL (gs://, s3://, hdfs://, ...), which only tf.io.gfile can open.

    The one place that decides it; fileio.py and every tool ask here.
    """
    return "://" in path


def output_dir_problem(path: str) -> Optional[str]:
    """Why `path` cannot be a directory this process creates (if missing) and writes into.

    Returns None when it can. Missing directories are created to prove it, then
    removed again, as is the probe file: nothing is left behind. Remote paths
    (gs://...) are not checked here.
    """
    if is_remote(path):
        return None
    target = os.path.abspath(path)
    if os.path.exists(target) and not os.path.isdir(target):
        return "it is a file"
    missing = []
    existing = target
    while not os.path.exists(existing):
        missing.append(existing)
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return f"'{existing}' is a file"
    created = []
    try:
        for directory in reversed(missing):
            os.mkdir(directory)
            created.append(directory)
        fd, probe = tempfile.mkstemp(prefix=".write_test", dir=target)
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        where = f": '{e.filename}'" if e.filename else ""
        return f"{e.strerror or type(e).__name__}{where}"
    finally:
        for directory in reversed(created):
            try:
                os.rmdir(directory)
            except OSError:
                pass
    return None


def hub_download_hint(path: str) -> Optional[str]:
    """For a missing path that looks like a Hugging Face hub id (owner/name), how to download it.

    The tools never reach the network, so a hub id must be downloaded first:
    returns the sentence saying how (None for an existing path or another name).
    """
    parts = path.split("/")
    # A missing path inside an existing folder (runs/typo) is a local path, not a hub id.
    if os.path.exists(path) or len(parts) != 2 or os.path.exists(parts[0]) or path.startswith(".") \
            or is_remote(path):
        return None
    if not all(p and p[0].isalnum() and all(c.isalnum() or c in "-_." for c in p) for p in parts):
        return None
    return (f"it looks like a Hugging Face hub id, and the tools do not download (no network at run time): "
            f"run hf download {path} --local-dir {parts[1]} first")

