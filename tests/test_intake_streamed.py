"""A large file's intake is one all-or-nothing batch stored a chunk at a time (``Ledger.append_many``).

Real ``evalledger`` processes on real homes: a kill -9 landing while the batch is being written
leaves either the whole file registered or none of it, and the home verifies; the peak memory of
an ingest grows with the file's size (it is read and parsed whole), not by the ~15 KB a case that
holding the whole batch of events cost.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.testing.arithmetic import arithmetic_benchmark
from evalledger.testing.peak_rss import peak_rss_mb

CLI = [sys.executable, "-m", "evalledger"]


def write_benchmark(folder: Path, cases: int, name: str = "streamed") -> Path:
    """A native benchmark file of ``cases`` cases (half as many questions, two models)."""
    path = folder / f"{name}-{cases}.json"
    path.write_text(json.dumps(arithmetic_benchmark(cases // 2, name)))
    return path


def counts(home: Path) -> tuple[int, int, int]:
    """(file.received, responses.registered, case.opened) events in the home."""
    with ledger.open_ledger(home, readonly=True) as led:
        kinds = [e.type for e in led.read(types=["file.received", "responses.registered", "case.opened"])]
    return kinds.count("file.received"), kinds.count("responses.registered"), kinds.count("case.opened")


def kill_when(child: subprocess.Popen, writing: "callable[[], bool]", deadline: float = 60) -> bool:
    """SIGKILL ``child`` as soon as ``writing()`` says its batch is being written; False when it
    finished first (then nothing was interrupted)."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if child.poll() is not None:
            return False
        if writing():
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
            return True
        time.sleep(0.002)
    child.kill()
    raise AssertionError("the ingest neither finished nor started writing in time")


def size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


@pytest.mark.parametrize("store", ["home", "jsonl"])
def test_a_kill_mid_ingest_leaves_the_whole_file_or_none_of_it(tmp_path, store):
    cases = 3000
    source = write_benchmark(tmp_path, cases)
    if store == "home":
        home = tmp_path / "home"
        subprocess.run([*CLI, "--home", str(home), "init"], check=True, capture_output=True)
        wal = home / "ledger.db-wal"
        before = size(wal)
        # the transaction's pages spill into the WAL long before it commits: that is mid-batch
        writing = lambda: size(wal) > before + (1 << 20)   # noqa: E731
    else:
        home = tmp_path / "events.jsonl"
        ledger.open_ledger(home).close()
        staged = Path(str(home) + ".pending.tmp")
        writing = lambda: size(staged) > (512 << 10)   # noqa: E731
    child = subprocess.Popen([*CLI, "--home", str(home), "ingest", str(source)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    killed = kill_when(child, writing)
    assert killed, "the ingest finished before the kill: nothing was interrupted"
    found = counts(home)
    assert found == (0, 0, 0), f"a killed ingest left part of the file: {found}"
    report = subprocess.run([*CLI, "--home", str(home), "verify"], capture_output=True, text=True)
    assert report.returncode == 0, report.stdout + report.stderr
    # ingested again, the whole file goes in once
    again = subprocess.run([*CLI, "--home", str(home), "ingest", str(source)], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert f"{cases} new cases" in again.stdout
    assert counts(home) == (1, 1, cases)
    report = subprocess.run([*CLI, "--home", str(home), "verify"], capture_output=True, text=True)
    assert report.returncode == 0, report.stdout + report.stderr


def peak_mb(argv: list[str]) -> float:
    """Peak resident set of one process running ``argv`` (which must succeed), in MB: its own,
    started from a small launcher (Linux carries this test process's size into a direct child's)."""
    code, peak, errors = peak_rss_mb(argv)
    assert code == 0, errors[-2000:]
    return peak


def test_ingest_memory_grows_with_the_file_not_with_a_whole_batch_of_events(tmp_path):
    small, large = 1000, 6000
    peaks = {}
    for cases in (small, large):
        home = tmp_path / f"home-{cases}"
        subprocess.run([*CLI, "--home", str(home), "init"], check=True, capture_output=True)
        peaks[cases] = peak_mb([*CLI, "--home", str(home), "ingest", str(write_benchmark(tmp_path, cases))])
        assert counts(home)[2] == cases
    per_case_kb = (peaks[large] - peaks[small]) * 1024 / (large - small)
    # The whole batch held at once cost ~20 KB a case; streamed, what is left is the parsed file (~3-5 KB).
    assert per_case_kb < 9, f"ingest peak grows {per_case_kb:.1f} KB a case ({peaks})"
