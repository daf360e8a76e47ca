"""Real processes on real files: concurrent writers, and writers killed with SIGKILL mid-append."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from evalledger import ledger

WORKER = Path(__file__).with_name("ledger_worker.py")


def ledger_path(tmp_path: Path, backend: str) -> Path:
    return tmp_path / "home" if backend == "home" else tmp_path / "ledger.jsonl"


def start(path: Path, worker: str, count: int, forever: bool = False) -> subprocess.Popen:
    args = [sys.executable, str(WORKER), str(path), worker, str(count)] + (["--forever"] if forever else [])
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def batches(events) -> dict[tuple[str, str], list[int]]:
    """(author, batch) -> the indexes present, from the ``batch/index/size`` text of each event."""
    found: dict[tuple[str, str], list[int]] = defaultdict(list)
    sizes = {}
    for event in events:
        batch, index, size, _ = event.data["text"].split("/", 3)
        found[(event.data["author"], batch)].append(int(index))
        sizes[(event.data["author"], batch)] = int(size)
    return {key: (indexes, sizes[key]) for key, indexes in found.items()}


def assert_sound(path: Path, backend: str) -> list:
    """Gapless seq, a valid chain, whole batches, and (for a home) a complete mirror."""
    led = ledger.open_ledger(path, readonly=True)
    events = list(led.read())
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    report = led.verify()
    assert report.ok, report.problems
    for (author, batch), (indexes, size) in batches(events).items():
        assert indexes == list(range(size)), f"batch {batch} of {author} is split: {indexes} of {size}"
    if backend == "home":
        assert (path / "events.jsonl").read_bytes() == b"".join(e.line() for e in events)
    led.close()
    return events


@pytest.mark.parametrize("backend", ["home", "jsonl"])
def test_four_processes_appending_at_once(tmp_path, backend):
    path = ledger_path(tmp_path, backend)
    ledger.open_ledger(path).close()
    per_worker = 120
    workers = [start(path, str(n), per_worker) for n in range(4)]
    for proc in workers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    events = assert_sound(path, backend)
    assert len(events) == 4 * per_worker  # no lost event
    for n in range(4):
        mine = [e for e in events if e.stream == f"case:w{n}"]
        assert [e.version for e in mine] == list(range(1, per_worker + 1))
        assert len({e.id for e in mine}) == per_worker


@pytest.mark.parametrize("backend", ["home", "jsonl"])
def test_writers_killed_mid_append_leave_no_partial_event(tmp_path, backend):
    path = ledger_path(tmp_path, backend)
    ledger.open_ledger(path).close()
    rng = random.Random(7)
    kills = 0
    for round in range(12):
        proc = start(path, f"k{round}", 0, forever=True)
        assert proc.stdout.readline().strip() == b"ready", proc.stderr.read().decode()
        time.sleep(rng.uniform(0.0, 0.25))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        kills += 1
        # Reopening for writing recovers (mirror completed, batch rolled forward, torn line cut).
        ledger.open_ledger(path).close()
        events = assert_sound(path, backend)
    assert kills >= 10
    assert len(events) > 12  # the writers did write between the kills


@pytest.mark.parametrize("backend", ["home", "jsonl"])
def test_verify_while_writers_append_never_reports_damage(tmp_path, backend):
    """verify checks a snapshot taken under the lock: a writer between its commit and its mirror
    write, or mid-line in a JSONL file, is not mistaken for a truncated mirror or a torn line."""
    path = ledger_path(tmp_path, backend)
    ledger.open_ledger(path).close()
    workers = [start(path, f"v{n}", 150) for n in range(2)]
    checks = 0
    with ledger.open_ledger(path, readonly=True) as reader:
        while any(proc.poll() is None for proc in workers) or checks == 0:
            report = reader.verify()
            assert report.ok, report.problems
            checks += 1
    for proc in workers:
        assert proc.wait(timeout=60) == 0, proc.stderr.read().decode()
    assert checks >= 1
    assert_sound(path, backend)
