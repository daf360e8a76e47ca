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


def test_a_symlink_that_loops_or_leads_nowhere_says_so(home, tmp_path, run_cli):
    """``ls`` lists both links, so a bare "no such file" beside their names read as a bug."""
    loop, dangling = tmp_path / "loop.json", tmp_path / "dangling.json"
    os.symlink(tmp_path / "loop2.json", loop)
    os.symlink(loop, tmp_path / "loop2.json")
    os.symlink(tmp_path / "gone.json", dangling)
    for path, said in ((loop, "(a symlink loop)"),
                       (dangling, f"(a symlink to {tmp_path / 'gone.json'}, which does not exist)")):
        done = run_cli("ingest", path, home=home)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.strip() == f"evalledger ingest: error: no such file: {path} {said}", done.stderr
