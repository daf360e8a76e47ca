"""QA: a file whose name is not UTF-8 is ingested (or rejected) like any other, by `ingest` and `watch`."""

from __future__ import annotations

import json
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


def test_the_json_log_of_watch_survives_a_name_that_is_not_utf8(home, run_cli):
    _odd_name(home / "inbox", b"empty").write_bytes(b"")
    done = run_cli("watch", "--once", "--log-format", "json", home=home)
    assert done.returncode == 1 and "Traceback" not in done.stderr   # 1: the empty file is rejected
    records = [json.loads(line) for line in done.stderr.splitlines()]
    [ingested] = [r for r in records if r["event"] == "ingested"]
    assert ingested["status"] == "rejected" and ingested["file"] == "empty\\udcff.json"
    assert list((home / "inbox").iterdir()) == []
