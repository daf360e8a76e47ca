"""The PostgreSQL store through the CLI and real processes: binding a home, immutability, the
sequencer under 8 concurrent appenders, export/import round trips, clear errors.

Needs a server: EVALLEDGER_TEST_PG (``eval "$(bash .ci/start-postgres)"``); without one these
tests fail saying so, unless ``--skip-postgres`` is given.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from evalledger import ledger
from evalledger.ledger import LedgerError, NewEvent
from evalledger.ledger.postgres import redact_url, split_store_url
from postgres_support import fresh_store_url, pg_url, postgres_home

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "benchmarks" / "samples"
WORKER = Path(__file__).with_name("ledger_worker.py")


def judged_home(run_cli, home: Path, store: str | None) -> Path:
    """A home (on ``store``, else SQLite) with the pharmacology sample ingested and judged offline."""
    args = ["--store", store] if store else []
    assert run_cli(*args, "init", home=home).returncode == 0
    for name in ("pharmacology.benchmark.json", "pharmacology.gamma.responses.jsonl"):
        result = run_cli("ingest", SAMPLES / name, home=home)
        assert result.returncode == 0, result.stderr
    result = run_cli("run", "--quiet", home=home)
    assert result.returncode == 0, result.stderr
    return home


def test_a_home_on_postgres_ingests_judges_reports_and_verifies(run_cli, tmp_path):
    store = fresh_store_url()
    home = judged_home(run_cli, tmp_path / "pg", store)
    assert (home / "store.url").read_text().strip() == store
    verify = run_cli("verify", home=home)
    assert verify.returncode == 0, verify.stderr
    status = run_cli("status", home=home)
    assert "42 judged" in status.stdout
    report = run_cli("report", home=home)
    assert report.returncode == 0 and (home / "reports" / "index.md").exists()
    assert not (home / "ledger.db").exists() and (home / "read-models.db").exists()
    _, schema = split_store_url(store)
    with psycopg.connect(pg_url(), autocommit=True) as conn:
        count = conn.execute(f"SELECT count(*) FROM {schema}.events WHERE type = 'case.judged'").fetchone()[0]
    assert count == 42


def test_the_reports_equal_a_sqlite_homes_for_the_same_events(run_cli, tmp_path):
    """Projections fold from PostgreSQL exactly as from SQLite: import the same export into both."""
    source = judged_home(run_cli, tmp_path / "src", None)
    assert run_cli("export", "--out", tmp_path / "all.jsonl", home=source).returncode == 0
    for name, args in (("sq", []), ("pg", ["--store", fresh_store_url()])):
        assert run_cli(*args, "init", home=tmp_path / name).returncode == 0
        result = run_cli("import", tmp_path / "all.jsonl", home=tmp_path / name)
        assert result.returncode == 0, result.stderr
        assert run_cli("rebuild", home=tmp_path / name).returncode == 0
    reports = {name: {p.relative_to(tmp_path / name / "reports"): p.read_bytes()
                      for p in sorted((tmp_path / name / "reports").rglob("*")) if p.is_file()}
               for name in ("sq", "pg")}
    assert reports["sq"] and reports["sq"] == reports["pg"]


def test_sqlite_to_postgres_to_sqlite_round_trip_is_byte_identical(run_cli, tmp_path):
    source = judged_home(run_cli, tmp_path / "src", None)
    assert run_cli("export", "--out", tmp_path / "one.jsonl", home=source).returncode == 0
    assert run_cli("--store", fresh_store_url(), "init", home=tmp_path / "pg").returncode == 0
    assert run_cli("import", tmp_path / "one.jsonl", home=tmp_path / "pg").returncode == 0
    assert run_cli("export", "--out", tmp_path / "two.jsonl", home=tmp_path / "pg").returncode == 0
    assert run_cli("import", tmp_path / "two.jsonl", home=tmp_path / "back").returncode == 0
    assert run_cli("export", "--out", tmp_path / "three.jsonl", home=tmp_path / "back").returncode == 0
    one = (tmp_path / "one.jsonl").read_bytes()
    assert one.count(b"\n") > 400
    assert (tmp_path / "two.jsonl").read_bytes() == one
    assert (tmp_path / "three.jsonl").read_bytes() == one
    assert (tmp_path / "back" / "events.jsonl").read_bytes() == one  # the SQLite home's mirror too


def test_a_bad_import_into_postgres_keeps_nothing(run_cli, tmp_path):
    source = tmp_path / "src"
    with ledger.open_ledger(source) as led:
        led.append([NewEvent("case:a", "note.added", {"text": str(i)}) for i in range(5)])
        led.export(tmp_path / "good.jsonl")
    lines = (tmp_path / "good.jsonl").read_bytes().splitlines(keepends=True)
    (tmp_path / "bad.jsonl").write_bytes(b"".join(lines[:3] + lines[4:]))   # seq 4 deleted
    home = postgres_home(tmp_path / "pg")
    result = run_cli("import", tmp_path / "bad.jsonl", home=home)
    assert result.returncode != 0 and "bad.jsonl" in result.stderr and "seq 4" in result.stderr
    with ledger.open_ledger(home) as led:
        assert led.head().seq == 0
    assert run_cli("import", tmp_path / "good.jsonl", home=home).returncode == 0
    again = run_cli("import", tmp_path / "good.jsonl", home=home)
    assert again.returncode == 2 and "empty" in again.stderr


def test_the_events_table_refuses_update_delete_and_truncate(tmp_path):
    home = postgres_home(tmp_path / "pg")
    with ledger.open_ledger(home) as led:
        led.append([NewEvent("case:a", "note.added", {"text": "x"})])
        _, schema = split_store_url(ledger.store_of(home))
        head = led.head()
    with psycopg.connect(pg_url(), autocommit=True) as conn:
        for sql in (f"UPDATE {schema}.events SET data = '{{}}'", f"DELETE FROM {schema}.events",
                    f"TRUNCATE {schema}.events"):
            with pytest.raises(psycopg.errors.RaiseException, match="immutable"):
                conn.execute(sql)
        conn.execute(f"DROP TRIGGER events_refuse_delete ON {schema}.events")
    with ledger.open_ledger(home, readonly=True) as led:
        report = led.verify()
        assert report.ok and report.head == head
        assert any("events_refuse_delete" in w for w in report.warnings)
    with ledger.open_ledger(home) as led:   # opening for writing restores the trigger
        assert not led.verify().warnings


def test_eight_concurrent_appender_processes_keep_one_gapless_chain(tmp_path):
    home = postgres_home(tmp_path / "pg")
    workers = [subprocess.Popen([sys.executable, str(WORKER), str(home), str(n), "120"],
                                stdout=subprocess.PIPE, text=True) for n in range(8)]
    for worker in workers:
        assert worker.wait(timeout=120) == 0
    with ledger.open_ledger(home, readonly=True) as led:
        events = list(led.read())
        assert [e.seq for e in events] == list(range(1, 8 * 120 + 1))
        assert [e.prev_hash for e in events[1:]] == [e.hash for e in events[:-1]]
        for n in range(8):
            mine = [e for e in events if e.stream == f"case:w{n}"]
            assert [e.version for e in mine] == list(range(1, 121))
            # a batch is never split: its events are consecutive seqs, in order
            batches: dict[str, list[int]] = {}
            for e in mine:
                batches.setdefault(e.data["text"].split("/")[0], []).append(e.seq)
            assert all(seqs == list(range(seqs[0], seqs[0] + len(seqs))) for seqs in batches.values())
        report = led.verify()
        assert report.ok and report.count == 960


def test_store_option_works_after_the_command_and_from_the_environment(run_cli, tmp_path):
    store = fresh_store_url()
    home = tmp_path / "pg"
    assert run_cli("init", "--store", store, home=home).returncode == 0
    note = run_cli("note", "--new-stream", "run:x", "hello", home=home, env={"EVALLEDGER_STORE": store})
    assert note.returncode == 0, note.stderr
    other = run_cli("log", home=home, env={"EVALLEDGER_STORE": fresh_store_url()})
    assert other.returncode == 2 and "is bound to the store" in other.stderr
    sqlite_home = tmp_path / "sq"
    assert run_cli("init", home=sqlite_home).returncode == 0
    refused = run_cli("--store", store, "status", home=sqlite_home)
    assert refused.returncode == 2 and "ledger.db" in refused.stderr


def test_a_password_never_reaches_the_home_or_a_message(run_cli, tmp_path):
    with_password = pg_url().replace("postgres@", "postgres:s3cret-pw@", 1)
    result = run_cli("--store", with_password, "init", home=tmp_path / "pg")
    assert result.returncode == 2 and "PGPASSWORD" in result.stderr
    assert "s3cret-pw" not in result.stdout + result.stderr
    assert not (tmp_path / "pg" / "store.url").exists()
    assert "s3cret-pw" not in redact_url(with_password) and "***" in redact_url(with_password)


def test_an_unreachable_server_is_a_clear_error(run_cli, tmp_path):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # closed again: nothing listens there
    store = f"postgresql://postgres@127.0.0.1:{port}/nowhere"
    result = run_cli("--store", store, "init", home=tmp_path / "pg", timeout=60)
    assert result.returncode == 2
    assert f"cannot connect to the store {store}" in result.stderr
    with pytest.raises(LedgerError, match="cannot connect"):
        ledger.open_ledger(store)


def unused_port() -> int:
    """A local TCP port nothing listens on (bound, then closed again)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ingest_with_an_unreachable_store_leaves_the_home_unbound_and_a_reachable_one_then_binds(
        run_cli, tmp_path):
    """``ingest --store URL`` bound the home before the store was reached: with the server down, the
    home was left naming it and every later command failed on a store it never used."""
    down = f"postgresql://postgres@127.0.0.1:{unused_port()}/nowhere"
    bench = SAMPLES / "pharmacology.benchmark.json"
    empty = tmp_path / "empty"
    empty.mkdir()                      # an existing folder, not yet a home
    for home in (tmp_path / "new", empty):
        result = run_cli("ingest", "--store", down, bench, home=home, timeout=60)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert f"cannot connect to the store {down}" in result.stderr
        assert f"{home} was left as it was (not bound to {down})" in result.stderr
    assert not (tmp_path / "new").exists() and list(empty.iterdir()) == []
    with_password = down.replace("postgres@", "postgres:s3cret-pw@", 1)   # refused before any connection
    result = run_cli("ingest", "--store", with_password, bench, home=empty, timeout=60)
    assert result.returncode == 2 and "s3cret-pw" not in result.stdout + result.stderr
    assert list(empty.iterdir()) == []
    store = fresh_store_url()          # the store reached: the same command binds and ingests
    result = run_cli("ingest", "--store", store, bench, home=empty)
    assert result.returncode == 0 and "accepted" in result.stdout, result.stderr
    assert ledger.store_of(empty) == store
    assert run_cli("status", home=empty).returncode == 0


def test_a_bad_schema_name_is_refused_by_name():
    with pytest.raises(LedgerError, match="schema 'Drop;Table'"):
        ledger.open_ledger(f"{pg_url()}?schema=Drop;Table")


@pytest.fixture(autouse=True)
def _no_store_env(monkeypatch):
    """A developer's EVALLEDGER_STORE must not redirect the homes these tests create."""
    monkeypatch.delenv("EVALLEDGER_STORE", raising=False)
    if os.environ.get("EVALLEDGER_TEST_PG") is None:
        pg_url()  # fails (or skips) with the message saying how to start a server


def _judged(home: Path) -> int:
    with ledger.open_ledger(home, readonly=True) as led:
        return sum(1 for _ in led.read(types=["case.judged"]))


def test_watch_wakes_on_notify_when_another_machine_ingests(tmp_path):
    """A daemon on one home judges cases another home (another machine) ingested into the shared
    store, woken by LISTEN/NOTIFY: long before its 300 s rescan, with nothing changing in its files."""
    import time

    from watch_support import benchmark_file, start_watch
    store = fresh_store_url()
    watcher_home, shell_home = postgres_home(tmp_path / "daemon", store), postgres_home(tmp_path / "shell", store)
    daemon = start_watch(watcher_home, "--rescan-seconds", "300", "--log-format", "json")
    try:
        log = tmp_path / "watch.log"
        deadline = time.monotonic() + 60
        while b'"started"' not in (log.read_bytes() if log.exists() else b"") and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.5)   # the listener connects and catches up once
        latencies = []
        for i in range(2):
            (tmp_path / f"b{i}.json").write_bytes(benchmark_file(i))
            assert subprocess.run([sys.executable, "-m", "evalledger", "--home", str(shell_home), "ingest",
                                   str(tmp_path / f"b{i}.json")], capture_output=True, timeout=60).returncode == 0
            start = time.monotonic()
            while _judged(shell_home) < 8 * (i + 1) and time.monotonic() - start < 60:
                time.sleep(0.05)
            latencies.append(time.monotonic() - start)
        assert _judged(shell_home) == 16
        assert max(latencies) < 20, latencies   # woken by NOTIFY: the rescan is 300 s away
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
