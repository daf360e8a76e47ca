"""Issue 13 item 12: reading commands work on a read-only home (a read-only bind mount).

A WAL database cannot be opened read-only where its ``-shm`` file cannot be created; the ledger
then opens it immutable (nothing can write there). Writing commands say plainly that the home is
read-only. Needs root (mount); CI runs as root.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from evalledger import ledger
from watch_support import evalledger

REPO = Path(__file__).resolve().parents[1]
AUDIT = REPO / "benchmarks" / "samples" / "verifyfast-cases.audit.jsonl"


@pytest.fixture
def read_only_view(tmp_path):
    """(writable folder, the same folder bind-mounted read-only); unmounted afterwards."""
    source, view = tmp_path / "rw", tmp_path / "ro"
    source.mkdir()
    view.mkdir()
    mounted = subprocess.run(["mount", "--bind", str(source), str(view)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {mounted.stderr.decode().strip()}")
    try:
        remount = subprocess.run(["mount", "-o", "remount,ro,bind", str(view)], capture_output=True)
        if remount.returncode != 0:
            pytest.skip(f"cannot remount read-only: {remount.stderr.decode().strip()}")
        yield source, view
    finally:
        subprocess.run(["umount", str(view)], check=True)


def test_reading_commands_work_on_a_read_only_home_and_writing_ones_say_why_not(read_only_view, tmp_path):
    source, view = read_only_view
    home = ledger.init_home(source / "home")
    evalledger(home, "ingest", str(AUDIT))
    evalledger(home, "run", "--quiet")
    evalledger(home, "report")
    with ledger.open_ledger(home, readonly=True) as led:
        head = led.head()
        case_id = next(led.read(types=["case.opened"])).data["case_id"]
    ledger.open_ledger(home).close()   # the last connection to close checkpoints: no -wal, no -shm
    assert not (home / "ledger.db-wal").exists() and not (home / "ledger.db-shm").exists()
    ro = view / "home"

    status = evalledger(ro, "status")
    assert "cases: 0 opened, 26 judged, 0 failed" in status.stdout
    assert f"ledger head: seq {head.seq} {head.hash}" in status.stdout
    log = evalledger(ro, "log", "--json")
    assert len(log.stdout.splitlines()) == head.seq
    out = tmp_path / "export.jsonl"
    evalledger(ro, "export", "--out", str(out))
    assert out.read_bytes() == (home / "events.jsonl").read_bytes()
    history = evalledger(ro, "history", case_id)
    assert "credit.scored" in history.stdout
    verify = evalledger(ro, "verify")
    assert "FAILED" not in verify.stdout and verify.stdout.strip() == f"head {head.seq}:{head.hash}"

    for command in (["report"], ["run"], ["note", "--new-stream", "case:x", "hello"]):
        done = evalledger(ro, *command, check=False)
        assert done.returncode == 2, done.stdout
        [line] = done.stderr.strip().splitlines()
        assert f"{ro} is on a read-only file system" in line and "status, log, export" in line
    with ledger.open_ledger(home, readonly=True) as led:
        assert led.head() == head
