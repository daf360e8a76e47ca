"""A home whose ledger.db lost its events (emptied to 0 bytes, deleted, replaced by an empty one)
while its mirror kept them: every command read it as an empty home (status said 0 cases, report
rewrote the reports as empty) and only verify noticed. Each command now refuses, naming both files
and the import that rebuilds the home, and changes nothing; a new home still works."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.ledger.persistence import LedgerDamaged
from evalledger.testing.arithmetic import arithmetic_benchmark

#: every kind of command: reading, writing the ledger, writing reports, verifying, making a home
COMMANDS = [("status",), ("log",), ("export",), ("history", "x"), ("report",), ("run",), ("verify",),
            ("init",), ("note", "x", "text")]


def filled_home(tmp_path: Path, run_cli, mirror: str = "jsonl") -> Path:
    """A home with a benchmark ingested, judged and reported, its ledger closed (no WAL left)."""
    home = ledger.init_home(tmp_path / "home", mirror=mirror)
    bench = tmp_path / "arith.json"
    bench.write_text(json.dumps(arithmetic_benchmark(2, "arith")))
    assert run_cli("ingest", bench, home=home).returncode == 0
    assert run_cli("run", home=home).returncode == 0
    assert run_cli("report", home=home).returncode == 0
    return home


def snapshot(home: Path) -> dict[str, bytes | None]:
    """Every file of the home by relative path (None for a folder): what must not change (locks and
    SQLite's own -wal and -shm beside a database it opened aside)."""
    return {str(p.relative_to(home)): None if p.is_dir() else p.read_bytes()
            for p in sorted(home.rglob("*")) if not p.name.endswith((".lock", "-wal", "-shm"))}


def assert_refused(home: Path, mirror: Path, run_cli, state: str) -> None:
    """Every command exits non-zero naming ledger.db, the mirror and the import, and changes nothing."""
    before = snapshot(home)
    for command in COMMANDS:
        done = run_cli(*command, home=home)
        said = done.stdout + done.stderr
        assert done.returncode != 0 and "Traceback" not in said, (command, said)
        assert f"{home / 'ledger.db'} {state}, but its mirror {mirror} holds events" in said, (command, said)
        assert f"'evalledger --home NEW import {mirror}'" in said, (command, said)
        assert snapshot(home) == before, command


def test_a_ledger_db_emptied_to_0_bytes_beside_a_mirror_with_events_is_refused_by_every_command(
        tmp_path, run_cli):
    home = filled_home(tmp_path, run_cli)
    (home / "ledger.db").write_bytes(b"")
    assert_refused(home, home / "events.jsonl", run_cli, "holds no events")
    with pytest.raises(LedgerDamaged, match="events up to seq"):   # the Python API says the same
        ledger.open_ledger(home)
    with pytest.raises(LedgerDamaged):
        ledger.open_ledger(home, readonly=True)
    # and the way out it names works: the mirror imports into a new home with every event
    last = json.loads((home / "events.jsonl").read_bytes().splitlines()[-1])["seq"]
    new = tmp_path / "new"
    done = run_cli("import", home / "events.jsonl", home=new)
    assert done.returncode == 0 and f"imported {last} events" in done.stdout, done.stderr
    assert run_cli("verify", home=new).returncode == 0


def test_a_deleted_or_replaced_ledger_db_is_refused_too(tmp_path, run_cli):
    home = filled_home(tmp_path, run_cli)
    (home / "ledger.db").unlink()
    assert_refused(home, home / "events.jsonl", run_cli, "is missing")
    assert not (home / "ledger.db").exists()
    other = ledger.init_home(tmp_path / "other")     # another home's ledger.db, with no event, copied in
    shutil.copy(other / "ledger.db", home / "ledger.db")
    assert_refused(home, home / "events.jsonl", run_cli, "holds no events")


def test_a_compressed_mirror_is_looked_at_the_same_way(tmp_path, run_cli):
    home = filled_home(tmp_path, run_cli, mirror="gzip")
    (home / "ledger.db").write_bytes(b"")
    assert_refused(home, home / "events.jsonl.gz", run_cli, "holds no events")


def test_a_new_home_and_a_home_whose_making_was_cut_still_open(tmp_path, run_cli):
    home = ledger.init_home(tmp_path / "home")
    assert run_cli("status", home=home).returncode == 0
    for name in ("ledger.db-wal", "ledger.db-shm"):
        (home / name).unlink(missing_ok=True)
    (home / "ledger.db").write_bytes(b"")    # no event anywhere: an init killed early, not a loss
    assert (home / "events.jsonl").stat().st_size == 0
    assert run_cli("status", home=home).returncode == 0
    bench = tmp_path / "arith.json"
    bench.write_text(json.dumps(arithmetic_benchmark(2, "arith")))
    assert run_cli("ingest", bench, home=home).returncode == 0
    assert run_cli("verify", home=home).returncode == 0


@pytest.mark.parametrize("how", ["replaced", "removed"])
@pytest.mark.parametrize("form", ["home", "jsonl"])
def test_a_writer_whose_store_file_was_replaced_or_removed_writes_nothing(tmp_path, how, form):
    """A process holds its store file open: once the file at its path is another (a copy restored)
    or none, its appends went on into the old file, which nobody could open any more (a home's
    ledger.db; a .jsonl ledger met the new file's lines half way). Each write now checks, under
    the write lock, that the path still names the file it opened."""
    path = ledger.init_home(tmp_path / "home") / "ledger.db" if form == "home" else tmp_path / "l.jsonl"
    led = ledger.open_ledger(path.parent if form == "home" else path)
    try:
        led.append(ledger.NewEvent("case:a", "note.added", {"text": "before"}))
        if form == "home":
            source, copy = sqlite3.connect(path), sqlite3.connect(tmp_path / "copy")
            source.backup(copy)   # a backup as SQLite makes one: the write-ahead log included
            source.close()
            copy.close()
        else:
            shutil.copyfile(path, tmp_path / "copy")
        if how == "replaced":
            (tmp_path / "copy").replace(path)
        else:
            path.unlink()
        with pytest.raises(ledger.StoreReplaced, match=f"{path.name}: is (no longer the file|gone)"):
            led.append(ledger.NewEvent("case:a", "note.added", {"text": "after"}))
        with pytest.raises(ledger.StoreReplaced):   # and again: the lock was given back, not kept
            led.append(ledger.NewEvent("case:b", "note.added", {"text": "after"}))
    finally:
        led.close()
    if how == "replaced":
        with ledger.open_ledger(path.parent if form == "home" else path) as again:   # the file there now
            assert again.head().seq == 1 and again.verify().ok
            again.append(ledger.NewEvent("case:a", "note.added", {"text": "after"}))
            assert again.head().seq == 2


def test_a_writer_that_changed_directory_after_opening_a_relative_home_still_writes(tmp_path, monkeypatch):
    """The file check named the store by the path as given: a library caller that opened
    ``home`` relative to its directory and then changed directory was told its store was gone."""
    monkeypatch.chdir(tmp_path)
    ledger.init_home("home")
    with ledger.open_ledger("home") as led:
        led.append(ledger.NewEvent("case:a", "note.added", {"text": "before"}))
        monkeypatch.chdir(tmp_path.parent)
        led.append(ledger.NewEvent("case:a", "note.added", {"text": "after"}))
        assert led.head().seq == 2
