"""A store whose making was cut (killed after its file existed, before its tables did) is an empty
store: read-only commands read it as one, and the next writable command makes it whole, in the form
asked for. The tables are made in one transaction, so a kill leaves all of them or none (a kill
between them left a store without the blob table, or text rows where compact ones were asked for,
which a second ``migrate`` then refused)."""

from __future__ import annotations

import json
import sqlite3

from evalledger import ledger
from evalledger.testing.arithmetic import arithmetic_benchmark


def test_an_empty_ledger_file_reads_as_an_empty_store_and_a_writer_makes_it_whole(tmp_path, run_cli):
    home = tmp_path / "home"
    for name in ("inbox", "processed", "rejected", "reports"):
        (home / name).mkdir(parents=True)
    (home / "ledger.db").touch()   # what a kill right after the file was created leaves
    done = run_cli("verify", home=home)
    assert done.returncode == 0 and "Traceback" not in done.stderr, (done.stdout, done.stderr)
    assert "head 0:" in done.stdout and "WARNING" not in done.stdout + done.stderr
    assert run_cli("log", home=home).returncode == 0
    assert (home / "ledger.db").stat().st_size == 0   # the reads wrote nothing
    source = tmp_path / "arith.json"
    source.write_text(json.dumps(arithmetic_benchmark(2, "arith")))
    assert run_cli("ingest", source, home=home).returncode == 0
    assert run_cli("verify", home=home).returncode == 0
    tables = {row[0] for row in sqlite3.connect(home / "ledger.db").execute("SELECT name FROM sqlite_master")}
    assert {"events", "blobs", "merkle", "tracking"} <= tables


def test_a_migrate_cut_before_its_tables_carries_on_in_the_form_asked_for(tmp_path, run_cli):
    source_home = ledger.init_home(tmp_path / "old")
    bench = tmp_path / "arith.json"
    bench.write_text(json.dumps(arithmetic_benchmark(2, "arith")))
    assert run_cli("ingest", bench, home=source_home).returncode == 0
    target = tmp_path / "new"
    for name in ("inbox", "processed", "rejected", "reports"):
        (target / name).mkdir(parents=True)
    (target / "events.jsonl.gz").touch()
    (target / "ledger.db").touch()
    assert run_cli("verify", home=target).returncode == 0
    done = run_cli("migrate", "--to", target, "--mirror", "gzip", "--rows", "compact", home=source_home)
    assert done.returncode == 0, (done.stdout, done.stderr)
    with ledger.open_ledger(target, readonly=True) as led:
        assert led.recorder.compact and ledger.mirror_form(led) == "gzip" and led.verify().ok


def test_another_sqlite_file_is_no_store_of_ours(tmp_path, run_cli):
    home = tmp_path / "home"
    home.mkdir()
    conn = sqlite3.connect(home / "ledger.db")
    conn.execute("CREATE TABLE notes (text TEXT)")
    conn.commit()
    conn.close()
    done = run_cli("verify", home=home)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "without the table events: not an evalledger store" in done.stderr
