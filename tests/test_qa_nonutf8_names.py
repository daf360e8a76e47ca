"""QA: a file whose name is not UTF-8 is ingested (or rejected) like any other, by `ingest` and `watch`."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "benchmarks" / "samples" / "pharmacology.benchmark.json"


def _odd_name(folder: Path, stem: bytes) -> Path:
    """A path in ``folder`` whose name holds the byte 0xff (not UTF-8)."""
    return Path(os.fsdecode(os.fsencode(folder) + b"/" + stem + b"\xff.json"))


def test_ingest_accepts_a_file_whose_name_is_not_utf8_and_records_it_readably(home, tmp_path, run_cli):
    odd = _odd_name(tmp_path, b"bench")
    shutil.copy(SAMPLE, odd)
    done = run_cli("ingest", odd, home=home)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("accepted bench\ufffd.json")
    assert run_cli("verify", home=home).returncode == 0
