"""`receive` (GPU): each carried part into $ELECTRA_GPU_DIR (default /tmp/electra_gpu), which a warm
machine keeps between calls; the data unpacked once all its pieces are there. Standard library
only: it runs before TensorFlow is set up."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

from imdb_common import DATA_PARTS, DATA_RECORD, REPO, STAGE, device_dir, die, say, sha256


def receive(args) -> None:
    """Keeps the data pieces carried in this call; joins and unpacks them once all are here.
    TensorFlow's parts go to setup_tf.sh."""
    if any(STAGE.glob("tf_part_*")):
        subprocess.run(["bash", str(REPO / "scripts" / "gpu" / "setup_tf.sh"), "receive"], check=True)
    parts = device_dir() / "data_parts"
    carried = sorted(STAGE.glob("data_[0-9]*/*"))
    if not carried and not any(STAGE.glob("tf_part_*")):
        die("this call carries no .gpu_stage/tf_part_NN or data_NN folder; name one in carry "
            "(stage prints them)")
    listings = sorted(p for p in carried if p.name == DATA_PARTS)
    if listings:
        parts.mkdir(parents=True, exist_ok=True)
        listing = json.loads(listings[0].read_text())
        if (parts / DATA_PARTS).is_file() and json.loads((parts / DATA_PARTS).read_text()) != listing:
            say("these data pieces belong to a new staging; dropping the old ones")
            shutil.rmtree(parts)
            parts.mkdir(parents=True)
        (parts / DATA_PARTS).write_text(listings[0].read_text())
        wanted = {p["name"]: p["sha256"] for p in listing["pieces"]}
        for piece in carried:
            if piece.name == DATA_PARTS:
                continue
            if piece.name not in wanted:
                die(f"{piece} is not listed in {DATA_PARTS}; stage again and carry the new folders")
            if sha256(piece) != wanted[piece.name]:
                die(f"{piece} is damaged (sha256 differs from {DATA_PARTS}); carry it again")
            shutil.copy2(piece, parts / piece.name)
        have = [p["name"] for p in listing["pieces"] if (parts / p["name"]).is_file()]
        say(f"data: {len(have)} of {len(listing['pieces'])} piece(s) here")
        if len(have) == len(listing["pieces"]):
            unpack_data(parts, listing)


def unpack_data(parts: Path, listing: dict) -> None:
    """Joins the pieces, checks the archive and extracts it into $ELECTRA_GPU_DIR/data."""
    target = device_dir() / "data"
    marker = target / ".archive_sha256"
    if marker.is_file() and marker.read_text().strip() == listing["sha256"]:
        say(f"data: {target} already holds this archive")
        return
    digest = hashlib.sha256()
    joined = parts / "data.tar.xz"
    with open(joined, "wb") as out:
        for piece in listing["pieces"]:
            chunk = (parts / piece["name"]).read_bytes()
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != listing["sha256"]:
        joined.unlink()
        die("the joined data pieces do not match their checksum; stage and carry them again")
    scratch = device_dir() / "data.tmp"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    with tarfile.open(joined, "r:xz") as tar:
        tar.extractall(scratch, filter="data")
    (scratch / "data" / ".archive_sha256").write_text(listing["sha256"] + "\n")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(scratch / "data", target)
    shutil.rmtree(scratch)
    joined.unlink()
    record = json.loads((target / DATA_RECORD).read_text())
    say(f"data: unpacked into {target} ({record['examples']:,} examples)")


def add_arguments(verbs) -> None:
    verbs.add_parser("receive", help="GPU: keep the parts carried in this call")
