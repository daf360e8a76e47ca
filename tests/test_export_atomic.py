"""``export --out`` is never half an export: written under a temporary name and renamed into place.

It wrote straight into ``--out``: an export killed midway left a prefix of the ledger there (a file
that imports as a shorter, valid ledger: events silently missing from a backup), after truncating
the complete export the file held before. Real ``evalledger export`` processes are SIGKILLed while
they write; what ``--out`` holds afterwards is the earlier export, byte for byte.
"""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.intake import ingest_path
from evalledger.testing.arithmetic import arithmetic_benchmark
from watch_support import CLI, REPO, cli_env

NOTES = 60_000   # enough that an export takes a good part of a second to write


@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> Path:
    """A home with judged cases (prompts and replies in the blob store) and many small events."""
    root = tmp_path_factory.mktemp("export-atomic")
    source = root / "arith.json"
    source.write_text(json.dumps(arithmetic_benchmark(4, "arith")))
    with ledger.open_ledger(root / "home") as led:
        ingest_path(led, source)
        run_until_idle(led, RunSettings(judge_backend="offline"))
        led.append_many(ledger.NewEvent(f"case:note{i % 500}", "note.added", {"text": f"note {i} " + "x" * 60},
                                        key=f"n{i}") for i in range(NOTES))
    return root / "home"


def partial_write_under_way(out: Path, before: int) -> bool:
    """True once the export is writing: a partial file beside ``out`` has grown, or ``out`` itself
    no longer holds the ``before`` bytes it held."""
    partials = [p for p in out.parent.glob(f".{out.name}.*.partial") if p.stat().st_size > 200_000]
    return bool(partials) or (out.exists() and out.stat().st_size != before)


def test_an_export_killed_while_it_writes_leaves_the_earlier_export_whole(judged, tmp_path):
    home = shutil.copytree(judged, tmp_path / "home")
    out = tmp_path / "backup.jsonl"
    first = subprocess.run([*CLI, "--home", str(home), "export", "--out", str(out)], env=cli_env(), cwd=REPO,
                           capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    earlier, earlier_blobs = out.read_bytes(), Path(f"{out}.blobs").read_bytes()
    with ledger.open_ledger(home) as led:   # the ledger moves on after that backup
        led.append([ledger.NewEvent("case:late", "note.added", {"text": "after the backup"}, key="late")])
    killed_while_writing = 0
    for _ in range(3):
        proc = subprocess.Popen([*CLI, "--home", str(home), "export", "--out", str(out)], env=cli_env(), cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline and not partial_write_under_way(out, len(earlier)):
            time.sleep(0.002)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed_while_writing += 1
        proc.wait(timeout=30)
        if proc.returncode == -signal.SIGKILL:
            assert out.read_bytes() == earlier, "a killed export left a partial file at --out"
            assert Path(f"{out}.blobs").read_bytes() in (earlier_blobs, Path(f"{out}.blobs").read_bytes())
            with ledger.open_ledger(out, readonly=True) as backup:   # still a whole ledger with its blobs
                assert backup.verify().ok
    assert killed_while_writing, "no kill landed while the export was writing: nothing was tested"
    done = subprocess.run([*CLI, "--home", str(home), "export", "--out", str(out)], env=cli_env(), cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    with ledger.open_ledger(home, readonly=True) as led:
        assert out.read_bytes() == (home / "events.jsonl").read_bytes()
        assert ledger.open_ledger(out, readonly=True).head() == led.head()


def test_a_failed_export_keeps_the_file_that_was_there_and_leaves_nothing_beside_it(judged, tmp_path, run_cli):
    home = shutil.copytree(judged, tmp_path / "home")
    out = tmp_path / "backup.jsonl"
    out.write_bytes(b"an earlier export\n")
    conn = sqlite3.connect(home / "ledger.db", isolation_level=None)   # the store loses a blob
    conn.execute("DROP TRIGGER blobs_refuse_delete")
    conn.execute("DELETE FROM blobs WHERE key = (SELECT key FROM blobs ORDER BY key LIMIT 1)")
    conn.close()
    done = run_cli("export", "--out", out, home=home)
    assert done.returncode != 0 and "Traceback" not in done.stderr and "sha256:" in done.stderr, done.stderr
    assert out.read_bytes() == b"an earlier export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["backup.jsonl", "home"]
    assert run_cli("export", "--out", out, home=judged).returncode == 0   # the intact home exports over it
    assert out.read_bytes() == (judged / "events.jsonl").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["backup.jsonl", "backup.jsonl.blobs", "home"]
