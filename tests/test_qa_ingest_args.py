"""QA: `ingest` arguments that cannot be right are refused before anything lands in the ledger."""

from __future__ import annotations

import os
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "benchmarks" / "samples" / "pharmacology.benchmark.json"


def test_a_named_fifo_is_reported_not_read_forever(home, tmp_path, run_cli):
    fifo = tmp_path / "drop.json"
    os.mkfifo(fifo)
    done = run_cli("ingest", fifo, home=home, timeout=30)
    assert done.returncode == 1 and "not a regular file" in done.stdout
    assert run_cli("verify", home=home).stdout.startswith("head 0:")


def test_a_max_bytes_below_one_is_a_usage_error_and_records_no_rejection(home, run_cli):
    done = run_cli("ingest", "--max-bytes", "-1", SAMPLE, home=home)
    assert done.returncode == 2 and "--max-bytes" in done.stderr
    assert run_cli("verify", home=home).stdout.startswith("head 0:")
