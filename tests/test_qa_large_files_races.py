"""Large inbox files changed while intake spools them, and an ingest of large files SIGKILLed at a
random moment: whatever the timing, processed/ holds only the bytes its names say, the ledger
verifies, what is left in the inbox is ingested on the next pass, no temporary file stays behind,
and ``status``, ``rebind``, ``watch``, ``run`` and ``report`` carry on. The seed is printed
(``large_files_support.SEED``).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.stages import intake
from large_files_support import (
    ANSWERED,
    CLI,
    assert_healthy,
    assert_healthy_by_cli,
    benchmark,
    cli,
    dropped,
    event_counts,
    home_with_version_one,
    jsonl,
    large,
    leftovers,
    response,
    rng,
)


def _spooling(folder: Path) -> bool:
    """True while a spool file of this process is in ``folder``."""
    try:
        return any(name.startswith(f".spool-{os.getpid()}-") for name in os.listdir(folder))
    except FileNotFoundError:
        return False


def _change(path: Path, how: str, other: bytes) -> None:
    """Change the inbox file at ``path`` as a second writer would."""
    if how == "truncated":
        os.truncate(path, os.path.getsize(path) // 2)
    elif how == "grown":
        with open(path, "ab") as fh:
            fh.write(b" " * 1000)
    elif how == "rewritten":
        with open(path, "r+b") as fh:
            fh.seek(os.path.getsize(path) // 3)
            fh.write(b"\x00")
    else:   # replaced: another file renamed over it
        aside = path.with_name(".aside")
        aside.write_bytes(other)
        os.replace(aside, path)


def _processed_hold_what_they_name(home: Path) -> None:
    """Every file in processed/ holds the bytes whose sha256 names it; every file in rejected/
    has its error note."""
    for path in (home / "processed").iterdir():
        if not path.name.startswith("."):
            assert hashlib.sha256(path.read_bytes()).hexdigest() == path.name.split(".")[0], path.name
    for path in (home / "rejected").glob("*.json"):
        assert Path(f"{path}.error.txt").exists(), path.name


@pytest.mark.parametrize("how", ["truncated", "grown", "rewritten", "replaced"])
def test_a_large_inbox_file_changed_while_it_is_spooled_is_filed_only_as_the_bytes_read(tmp_path, how):
    r = rng(f"changed {how}")
    home = ledger.init_home(tmp_path / "home")
    raw = large(json.dumps(benchmark()).encode())
    other = json.dumps(benchmark("other")).encode()
    landed = 0
    for attempt in range(2):
        path = dropped(home, f"{how}{attempt}.json", raw[:-1] + b" " * r.randrange(1, 64) + raw[-1:])
        changed = threading.Event()

        def writer(path: Path = path, changed: threading.Event = changed) -> None:
            end = time.monotonic() + 10
            while not _spooling(home / "processed") and time.monotonic() < end and path.exists():
                pass
            try:
                _change(path, how, other)
                changed.set()
            except FileNotFoundError:   # filed away before the writer came to it
                pass

        thread = threading.Thread(target=writer)
        thread.start()
        with ledger.open_ledger(home) as led:
            result = intake.ingest_path(led, path, from_inbox=True)
        thread.join()
        landed += changed.is_set() and result.sha256 != hashlib.sha256(path.read_bytes() if path.exists()
                                                                       else b"").hexdigest()
        if result.moved_to is not None and result.status != "rejected":
            assert hashlib.sha256(result.moved_to.read_bytes()).hexdigest() == result.sha256
        _processed_hold_what_they_name(home)
    print(f"{landed} of 2 changes landed after the read began")
    again = cli(home, "ingest")   # what the changes left in the inbox
    assert "Traceback" not in again.stderr and again.returncode in (0, 1), again.stdout + again.stderr
    assert not [p for p in (home / "inbox").iterdir() if not p.name.startswith(".")], again.stdout
    _processed_hold_what_they_name(home)
    with ledger.open_ledger(home, readonly=True) as led:   # each file the ledger took in is kept, as it was read
        for received in led.read(types=["file.received"]):
            assert (home / "processed" / f"{received.data['sha256']}.json").exists(), received.data
    assert_healthy_by_cli(home)


def test_an_ingest_of_large_files_killed_at_a_random_moment_leaves_a_home_the_next_watch_finishes(tmp_path):
    r = rng("killed ingest")
    home = home_with_version_one(tmp_path)
    dropped(home, "v2.json", large(json.dumps(benchmark(version=2)).encode()))
    rows = [{**response(i, f"late{i % 2}", "big"), "text": f"The sum is {2 * i}. " + "w" * 12_000}
            for i in range(0, 1500, 15)]
    dropped(home, "late.jsonl", large(jsonl(rows)))
    child = subprocess.Popen([*CLI, "--home", str(home), "ingest"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    delay = r.uniform(0.3, 3.0)
    time.sleep(delay)
    child.send_signal(signal.SIGKILL)
    print(f"killed after {delay:.2f} s: exit {child.wait(timeout=60)}; left {leftovers(home)}")
    status = cli(home, "status")
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stdout + status.stderr
    rebind = cli(home, "rebind", "big")   # before version 2 is in: one version, said plainly
    assert rebind.returncode in (0, 2) and "Traceback" not in rebind.stderr, rebind.stdout + rebind.stderr
    watch = cli(home, "watch", "--once", "--judge", "offline", timeout=300)
    assert watch.returncode == 0, watch.stdout + watch.stderr
    assert not list((home / "inbox").iterdir()) and leftovers(home) == []
    counts = event_counts(home)
    assert counts["benchmark.registered"] == 2 and counts["benchmark.rejected"] == 0, counts
    assert counts["file.received"] == 3, counts
    rebind = cli(home, "rebind", "big")
    assert rebind.returncode == 0 and "to version 2" in rebind.stdout, rebind.stdout + rebind.stderr
    run = cli(home, "run", "--judge", "offline")
    assert run.returncode == 0, run.stdout + run.stderr
    counts = event_counts(home)   # every case judged, none stuck (rebind may add the late ones to version 2)
    assert counts["case.opened"] == counts["case.judged"] >= 4 * len(ANSWERED) + len(rows), counts
    report = cli(home, "report")
    assert report.returncode == 0 and (home / "reports" / "index.md").exists(), report.stdout + report.stderr
    assert_healthy(home)
