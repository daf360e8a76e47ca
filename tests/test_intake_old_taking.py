"""A file an older evalledger left hidden as ``.taking-<sha16>-<pid>`` (killed between the two
renames that file an inbox file away; that form carries no file name) is put back and filed by
the next ``ingest`` of the inbox or ``watch --once``: under the name the ledger recorded for its
bytes, else as ``recovered-<sha16>.json``; never lost, never filed or recorded twice."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.testing.arithmetic import arithmetic_benchmark

CLI = [sys.executable, "-m", "evalledger"]


def cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    """``evalledger --home HOME ARGS`` as a real process."""
    return subprocess.run([*CLI, "--home", str(home), *args], capture_output=True, text=True, timeout=120)


def gone_pid() -> int:
    """The id of a process that has ended (the killed ingest's)."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(child.stdout)


def hide_as_old(path: Path, pid: int) -> Path:
    """Move a filed file to the hidden name an older version left it under, beside its place."""
    hidden = path.with_name(f".taking-{hashlib.sha256(path.read_bytes()).hexdigest()[:16]}-{pid}")
    os.replace(path, hidden)
    return hidden


def events(home: Path) -> list[tuple[str, str]]:
    """(type, file) of every file.received and benchmark.rejected event."""
    with ledger.open_ledger(home, readonly=True) as led:
        return [(e.type, e.data["file"]) for e in led.read(types=["file.received", "benchmark.rejected"])]


@pytest.mark.parametrize("command", ["ingest", "watch --once"])
@pytest.mark.parametrize("content", ["accepted", "rejected"])
def test_an_old_form_hidden_file_goes_back_under_its_recorded_name_and_is_filed_once(tmp_path, content, command):
    home = tmp_path / "home"
    assert cli(home, "init").returncode == 0
    raw = json.dumps(arithmetic_benchmark(4, "old")) if content == "accepted" else '{"questions": ['
    (home / "inbox" / "bench.json").write_text(raw)
    cli(home, "ingest")
    digest = hashlib.sha256(raw.encode()).hexdigest()
    filed = home / "processed" / f"{digest}.json" if content == "accepted" else home / "rejected" / "bench.json"
    hidden = hide_as_old(filed, gone_pid())
    before = events(home)

    again = cli(home, *command.split())
    assert not hidden.exists() and filed.read_text() == raw, again.stdout + again.stderr
    assert not list((home / "inbox").iterdir()) and not list(home.rglob(".taking-*"))
    assert events(home) == before == [("file.received" if content == "accepted" else "benchmark.rejected",
                                       "bench.json")]
    if content == "rejected":
        assert sorted(p.name for p in (home / "rejected").iterdir()) == ["bench.json", "bench.json.error.txt"]
    assert cli(home, "verify").returncode == 0


def test_bytes_the_ledger_has_no_name_for_go_back_as_recovered_and_are_ingested(tmp_path):
    home = tmp_path / "home"
    assert cli(home, "init").returncode == 0
    raw = json.dumps(arithmetic_benchmark(3, "swapped")).encode()   # swapped in: never ingested
    digest = hashlib.sha256(raw).hexdigest()
    (home / "processed" / f".taking-{digest[:16]}-{gone_pid()}").write_bytes(raw)

    again = cli(home, "ingest")
    assert again.returncode == 0 and f"recovered-{digest[:16]}.json" in again.stdout, again.stdout + again.stderr
    assert (home / "processed" / f"{digest}.json").read_bytes() == raw
    assert not list((home / "inbox").iterdir()) and not list(home.rglob(".taking-*"))
    assert events(home) == [("file.received", f"recovered-{digest[:16]}.json")]


def test_an_old_form_hidden_file_of_a_process_still_running_is_left_alone(tmp_path):
    home = tmp_path / "home"
    assert cli(home, "init").returncode == 0
    raw = json.dumps(arithmetic_benchmark(3, "busy")).encode()
    hidden = home / "processed" / f".taking-{hashlib.sha256(raw).hexdigest()[:16]}-{os.getpid()}"
    hidden.write_bytes(raw)   # this test's process runs: it may be between its two renames

    assert cli(home, "ingest").returncode == 0
    assert hidden.read_bytes() == raw and not list((home / "inbox").iterdir()) and events(home) == []
