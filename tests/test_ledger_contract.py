"""One contract every ledger backend keeps, run against each of them through the public ``Ledger`` API.

The backends are the ``backend`` fixture's params: a SQLite home (with its events.jsonl mirror) and
a standalone JSONL file. A new backend (PostgreSQL, say) joins by adding one param whose
``Backend`` opens it and knows how to tamper with a stored event the way someone with raw access
to the store would; every test below then runs against it unchanged.
"""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalledger import ledger
from evalledger.ledger import ConflictError, LedgerError, NewEvent, merkle
from evalledger.ledger.blobs import BlobError, refs
from evalledger.ledger.envelope import canonical_bytes, line_bytes
from evalledger.ledger.persistence import TREE_LAG
from evalledger.testing.peak_rss import peak_rss_mb
from postgres_support import postgres_home, skipping_postgres

WORKER = Path(__file__).with_name("ledger_worker.py")


@dataclass
class Backend:
    """How the contract reaches one backend: where it lives, and how to damage a stored event."""

    name: str
    path: Path
    #: rewrite the stored text of event ``seq`` (hash left alone); returns the source verify names
    tamper: Callable[[Path, int, str], str]
    #: run SQL on the store as its owner could (None for a store that is a plain file)
    sql: Callable[[Path, str, tuple], None] | None = None
    #: the name of the table that keeps the Merkle tree, as verify's findings name it
    tree_table: str | None = None

    def open(self, **options) -> ledger.Ledger:
        """Open (creating on first use) this backend's ledger through the public API."""
        return ledger.open_ledger(self.path, **options)


def _tamper_sqlite(path: Path, seq: int, text: str) -> str:
    conn = sqlite3.connect(path / "ledger.db", isolation_level=None)
    conn.execute("DROP TRIGGER events_refuse_update")  # as someone with the file would
    conn.execute("UPDATE events SET data = json_set(data, '$.text', ?) WHERE seq = ?", (text, seq))
    conn.close()
    return "ledger.db (table events)"


def _tamper_jsonl(path: Path, seq: int, text: str) -> str:
    lines = path.read_bytes().splitlines(keepends=True)
    env = ledger.envelope.decode_json(lines[seq - 1])
    data = ledger.canonical_json({**env["data"], "text": text})
    canonical = canonical_bytes(env["seq"], env["id"], env["stream"], env["version"], env["type"],
                                env["schema"], data, ledger.canonical_json(env["meta"]))
    lines[seq - 1] = line_bytes(canonical, env["prev_hash"], env["hash"])
    path.write_bytes(b"".join(lines))
    return str(path)


def _tamper_postgres(path: Path, seq: int, text: str) -> str:
    import psycopg

    from evalledger.ledger.postgres import split_store_url
    url, schema = split_store_url(ledger.store_of(path))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE {schema}.events DISABLE TRIGGER USER")  # as a database owner could
        conn.execute(f"UPDATE {schema}.events SET data = jsonb_set(data::jsonb, '{{text}}', to_jsonb(%s::text))::text "
                     "WHERE seq = %s", (text, seq))
    return f"(table {schema}.events)"


def _sql_sqlite(path: Path, sql: str, params: tuple) -> None:
    conn = sqlite3.connect(path / "ledger.db", isolation_level=None)
    conn.execute(sql.replace("{schema}.", ""), params)
    conn.close()


def _sql_postgres(path: Path, sql: str, params: tuple) -> None:
    import psycopg

    from evalledger.ledger.postgres import split_store_url
    url, schema = split_store_url(ledger.store_of(path))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.replace("{schema}", schema).replace("?", "%s"), params)


def _postgres(tmp: Path) -> Backend:
    home = tmp / "pg-home"
    home.parent.mkdir(parents=True, exist_ok=True)
    postgres_home(home)
    return Backend("postgres", home, _tamper_postgres, _sql_postgres, ".merkle)")


BACKENDS = {
    "sqlite-home": lambda tmp: Backend("sqlite-home", tmp / "home", _tamper_sqlite, _sql_sqlite, "(table merkle)"),
    "jsonl": lambda tmp: Backend("jsonl", tmp / "events.jsonl", _tamper_jsonl),
    "postgres": _postgres,
}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request, tmp_path) -> Backend:
    """Each backend in turn, fresh and empty."""
    return BACKENDS[request.param](tmp_path)


def note(stream: str, text: str, key: str | None = None) -> NewEvent:
    """A ``note.added`` event (a closed payload every backend stores)."""
    return NewEvent(stream, "note.added", {"text": text}, key=key)


def seeded(led: ledger.Ledger) -> None:
    """Six events in three batches over two streams, plus one of another type."""
    led.append([note("case:a", "1"), note("case:a", "2")])
    led.append([note("case:b", "3"), NewEvent("case:b", "verdict.overridden",
                                              {"case_id": "b", "verdict": "fail", "reason": "r", "author": "me"})])
    led.append([note("case:a", "5"), note("case:b", "6")])


def long_call() -> tuple[dict, dict]:
    """(request, payload) of a judge call whose prompt is long enough to be stored as a blob where
    the store keeps blobs."""
    request = {"messages": [{"role": "user", "content": "a long prompt " * 60}], "parameters": {}}
    return request, {"role": "parse", "backend": "offline", "model": "m", "request_hash": "a" * 64, "attempt": 1,
                     "request": request}


class TestLedgerContract:
    """The behaviour every backend must show; parametrized over ``backend``."""

    def test_append_seals_a_batch_in_order_with_seq_version_and_chain(self, backend):
        with backend.open() as led:
            first = led.append([note("case:a", "x"), note("case:b", "y"), note("case:a", "z")])
            assert [(e.seq, e.stream, e.version) for e in first] == [(1, "case:a", 1), (2, "case:b", 1),
                                                                    (3, "case:a", 2)]
            assert first[0].prev_hash == "0" * 64
            assert [e.prev_hash for e in first[1:]] == [e.hash for e in first[:-1]]
            assert led.head() == ledger.Head(3, first[-1].hash)
            assert [e.data["text"] for e in led.read()] == ["x", "y", "z"]
        with backend.open() as again:  # what was appended is there after a reopen
            assert [e.hash for e in again.read()] == [e.hash for e in first]

    def test_the_same_key_appends_once(self, backend):
        with backend.open() as led:
            [once] = led.append(note("case:a", "x", key="k1"))
            [again] = led.append(note("case:a", "different text, same key", key="k1"))
            assert again.seq == once.seq and again.hash == once.hash and again.data["text"] == "x"
            mixed = led.append([note("case:a", "x", key="k1"), note("case:a", "new", key="k2")])
            assert [e.seq for e in mixed] == [1, 2]
            assert led.head().seq == 2 and led.stream_version("case:a") == 2
            assert led.get(once.id).hash == once.hash
            assert led.get("0" * 32) is None

    def test_get_stored_gives_the_event_as_stored_and_join_makes_it_whole(self, backend):
        # A judge call with a prompt long enough to be stored as a blob where the store keeps them
        # (SQLite and PostgreSQL leave the reference in get_stored's data; a JSONL ledger gives it whole).
        request, data = long_call()
        with backend.open() as led:
            [small] = led.append(note("case:a", "x"))
            [event] = led.append(NewEvent("case:c1", "judge.called", data, key="k"))
            stored, whole = led.get_stored(event.id), led.get(event.id)
            assert whole.data["request"] == request
            assert (stored.seq, stored.id, stored.hash) == (whole.seq, whole.id, whole.hash) == (2, event.id, event.hash)
            assert led.join(stored.stored_data) == whole.data
            if led.recorder.blobs is not None:   # a store keeping blobs reads none for get_stored
                assert stored.stored_data["request"] != request
            assert led.join(led.open(stored.stored_data["request"])) == request
            assert led.get_stored(small.id).data == small.data   # nothing to leave: the same either way
            assert led.get_stored("0" * 32) is None

    def test_a_reference_shaped_object_reads_back_as_appended_and_exports_escaped(self, backend, tmp_path):
        # Every store form stores it escaped ({"$lit": ...}) and unwraps it on read; stored as given
        # (a bare .jsonl ledger did), every read took it for a blob lost with the store.
        ref = {"$blob": "sha256:" + "cd" * 32}
        config = {"ref": ref, "lit": {"$lit": {"a": 1}}, "list": [ref]}
        data = {"benchmark": "b", "name": "b", "kind": "template", "config": config}
        with backend.open() as led:
            [event] = led.append(NewEvent("benchmark:b", "benchmark.registered", data, key="b"))
            assert event.data["config"] == config
            [read] = led.read()
            assert read.data["config"] == config == led.get(event.id).data["config"]
            assert led.join(led.get_stored(event.id).stored_data)["config"] == config
            [row] = led.scan(1, 1, ["benchmark.registered"])
            assert (row.data if isinstance(row.data, dict) else ledger.decode_json(row.data))["config"] == config
            assert led.verify().ok
            led.export(tmp_path / "out.jsonl")
        line = (tmp_path / "out.jsonl").read_bytes()
        assert b'"ref":{"$lit":{"$blob":"sha256:' in line and b'"lit":{"$lit":{"$lit":{"a":1}}}' in line
        with ledger.open_ledger(tmp_path / "copy.jsonl") as copy:
            assert copy.import_file(tmp_path / "out.jsonl") == 1
            assert next(iter(copy.read())).data["config"] == config and copy.verify().ok

    def test_get_stored_of_an_event_whose_blob_store_is_lost_names_store_seq_and_blob(self, backend):
        # SQLite's gave the references of an event whose blob table was dropped, which no join
        # could read; PostgreSQL's refused it as every other read does. Both refuse it now.
        if backend.sql is None:
            pytest.skip("a JSONL ledger stores no blob on append: it has no blob table to lose")
        request, data = long_call()
        with backend.open() as led:
            [small] = led.append(note("case:a", "x"))
            [event] = led.append(NewEvent("case:c1", "judge.called", data, key="k"))
            [key] = refs(led.get_stored(event.id).stored_data)
        backend.sql(backend.path, "DROP TABLE {schema}.blobs", ())
        with backend.open(readonly=True) as led:
            with pytest.raises(BlobError) as raised:
                led.get_stored(event.id)
            message = str(raised.value)
            assert f"seq {event.seq} refers to blob sha256:{key}, which is missing" in message, message
            assert "blobs, which this store lacks" in message and "'evalledger verify'" in message, message
            with pytest.raises(BlobError, match=f"seq {event.seq} refers to blob sha256:{key}"):
                led.get(event.id)   # as get, read and export refuse it
            assert led.get_stored(small.id).data == small.data   # one that refers to no blob still reads

    def test_a_store_without_its_blob_table_stores_a_reference_shaped_object_escaped(self, backend):
        # Such a store splits nothing (as a store made before blobs): it stored payloads as given,
        # so the object read as a lost blob. It escapes them as a store with blobs does now.
        if backend.sql is None:
            pytest.skip("a JSONL ledger has no blob table (the bare ledger is covered above)")
        with backend.open() as led:
            led.append(note("case:a", "x"))
        backend.sql(backend.path, "DROP TABLE {schema}.blobs", ())
        config = {"ref": {"$blob": "sha256:" + "ef" * 32}}
        data = {"benchmark": "b", "name": "b", "kind": "template", "config": config}
        with backend.open() as led:
            assert led.recorder.blobs is None
            led.append_many([NewEvent("benchmark:b", "benchmark.registered", data, key="b")])
            [event] = led.append(NewEvent("benchmark:c", "benchmark.registered", {**data, "benchmark": "c"}, key="c"))
        with backend.open(readonly=True) as led:
            assert [e.data["config"] for e in led.read(types=["benchmark.registered"])] == [config, config]
            assert led.get_stored(event.id).data["config"] == config and led.verify().ok

    def test_a_stale_expected_version_conflicts_and_appends_nothing(self, backend):
        with backend.open() as led:
            led.append(note("case:a", "x"), expected_version=0)
            head = led.head()
            with pytest.raises(ConflictError, match="case:a"):
                led.append([note("case:b", "fine"), note("case:a", "stale")],
                           expected_version={"case:a": 0, "case:b": 0})
            assert led.head() == head and led.stream_version("case:b") == 0
            led.append(note("case:a", "y"), expected_version=1)
            assert led.stream_version("case:a") == 2

    def test_seq_is_gapless_while_another_process_appends(self, backend):
        with backend.open() as led:
            led.append(note("case:mine", "first"))
        worker = subprocess.Popen([sys.executable, str(WORKER), str(backend.path), "1", "60"],
                                  stdout=subprocess.PIPE, text=True)
        try:
            with backend.open() as led:
                for i in range(30):
                    led.append([note("case:mine", f"{i}a"), note("case:mine", f"{i}b")])
        finally:
            assert worker.wait(timeout=120) == 0
        with backend.open() as led:
            events = list(led.read())
            assert [e.seq for e in events] == list(range(1, 1 + 1 + 60 + 60))
            for stream in ("case:mine", "case:w1"):
                versions = [e.version for e in events if e.stream == stream]
                assert versions == list(range(1, len(versions) + 1))
            assert led.verify().ok
            # the Merkle tree each writer kept in its transactions covers both writers' events
            assert 0 <= len(events) - led.recorder.tree_state().size < TREE_LAG
            assert led.merkle_root() == reference_root([bytes.fromhex(e.hash) for e in events])

    def test_tracking_is_committed_with_a_batch_and_read_back_after_reopen(self, backend):
        with backend.open() as led:
            assert led.tracking_position("stage:test") == 0
            led.append(note("case:a", "x"), tracking=("stage:test", 7))
            assert led.tracking_position("stage:test") == 7
            with pytest.raises(ConflictError):
                led.append(note("case:a", "y"), expected_version=0, tracking=("stage:test", 9))
            assert led.tracking_position("stage:test") == 7  # a refused batch moves no position
            led.append([], tracking=("stage:other", 3))
            led.set_tracking("stage:test", 8)
        with backend.open(readonly=True) as led:
            assert (led.tracking_position("stage:test"), led.tracking_position("stage:other")) == (8, 3)
            with pytest.raises(LedgerError, match="read-only"):
                led.set_tracking("stage:test", 9)

    def test_read_filters_by_types_stream_and_seq_range(self, backend):
        with backend.open() as led:
            seeded(led)
            assert [e.seq for e in led.read(types="note.added")] == [1, 2, 3, 5, 6]
            assert [e.seq for e in led.read(types=["verdict.overridden"])] == [4]
            assert [e.seq for e in led.read(stream="case:b")] == [3, 4, 6]
            assert [e.seq for e in led.read(from_seq=3, to_seq=5)] == [3, 4, 5]
            assert [e.seq for e in led.read(from_seq=2, types="note.added", stream="case:a")] == [2, 5]
            assert list(led.read(from_seq=7)) == []

    def test_scan_gives_fold_rows_with_payloads_and_stamped_config_hashes(self, backend):
        with backend.open() as led:
            led.append([NewEvent("case:a", "note.added", {"text": "x"}, meta={"config_hash": "abc"}),
                        NewEvent("case:a", "note.added", {"text": "y"}, meta={"config_hash": "def"}),
                        NewEvent("case:a", "verdict.overridden",
                                 {"case_id": "a", "verdict": "pass", "reason": "r", "author": "me"},
                                 meta={"config_hash": "ghi"})])
            rows = list(led.scan(2, 3, ["note.added", "verdict.overridden"], stamped=["verdict.overridden"]))
            assert [(r.type, r.version, r.config_hash) for r in rows] == [
                ("note.added", 2, None), ("verdict.overridden", 3, "ghi")]
            decoded = [ledger.envelope.decode_json(r.data) if isinstance(r.data, (bytes, str)) else r.data
                       for r in rows]
            assert decoded[0] == {"text": "y", "author": None}

    def test_a_plain_scan_gives_the_same_rows_as_tuples_and_upcast_rows_whole(self, backend):
        with backend.open() as led:
            led.append([NewEvent("case:a", "note.added", {"text": "x"}, meta={"config_hash": "abc"}),
                        NewEvent("case:a", "verdict.overridden",
                                 {"case_id": "a", "verdict": "pass", "reason": "r", "author": "me"},
                                 meta={"config_hash": "ghi", "recorded_at": "2026-01-02T00:00:00Z"})])
            args = (1, 2, ["note.added", "verdict.overridden"], ["verdict.overridden"], ["verdict.overridden"])
            named = list(led.scan(*args, resolve=False))
            plain = list(led.scan(*args, resolve=False, plain=True))
            assert [tuple(r) for r in plain] == [tuple(r) for r in named]
            assert [r[6:] for r in plain] == [(None, None), ("ghi", "2026-01-02T00:00:00Z")]
            assert plain[1][:4] == ("verdict.overridden", named[1].id, "case:a", 2)

    def test_scan_gives_recorded_at_for_the_timed_types_only(self, backend):
        with backend.open() as led:
            led.append([NewEvent("case:a", "note.added", {"text": "x"}, meta={"recorded_at": "2026-01-01T00:00:00Z"}),
                        NewEvent("case:a", "verdict.overridden",
                                 {"case_id": "a", "verdict": "pass", "reason": "r", "author": "me"},
                                 meta={"recorded_at": "2026-01-02T00:00:00Z", "config_hash": "ghi"})])
            rows = list(led.scan(1, 2, ["note.added", "verdict.overridden"], stamped=["verdict.overridden"],
                                 timed=["verdict.overridden"]))
            assert [(r.type, r.config_hash, r.recorded_at) for r in rows] == [
                ("note.added", None, None), ("verdict.overridden", "ghi", "2026-01-02T00:00:00Z")]
            assert all(r.recorded_at is None for r in led.scan(1, 2, ["note.added", "verdict.overridden"]))

    def test_verify_passes_and_checks_a_published_head(self, backend):
        with backend.open() as led:
            seeded(led)
            published = led.head()
            report = led.verify(expect_head=published)
            assert report.ok and report.head == published
            assert not led.verify(expect_head=f"{published.seq}:{'0' * 64}").ok

    def test_an_edited_event_fails_verify_naming_seq_and_store(self, backend):
        with backend.open() as led:
            seeded(led)
        source = backend.tamper(backend.path, 3, "rewritten")
        with backend.open(readonly=True) as led:
            report = led.verify()
        assert not report.ok
        first = report.problems[0]
        assert first.seq == 3 and source in first.source, report.problems

    @pytest.mark.parametrize("work", ["read", "verify", "export", "import"])
    def test_large_events_are_held_a_few_at_a_time(self, backend, work, tmp_path):
        """60 events of 1 MB each: reading them all, verifying, exporting or importing them, in a
        process of its own, peaks at most 40 MB above reading the first one, so memory does not
        grow with how large events are (a big benchmark's registration parts are a megabyte each).
        (Importing into PostgreSQL takes ~27 MB more whether there are 20, 60 or 120 such events:
        the COPY's buffers; before its rows were chunked by bytes, 75 MB at 60.)"""
        with backend.open() as led:
            led.append_many(note("case:big", f"{k:02d}" + "x" * 1_000_000) for k in range(60))
            if work == "import":
                led.export(tmp_path / "big.export.jsonl")
        target = backend.path
        if work == "import":
            (tmp_path / "second").mkdir()
            target = BACKENDS[backend.name](tmp_path / "second").path
        script = ("import sys; from pathlib import Path; from evalledger import ledger\n"
                  "work, path, export = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])\n"
                  "with ledger.open_ledger(path) as led:\n"
                  "    if work == 'one':\n"
                  "        assert [e.data['text'][:2] for e in led.read(to_seq=1)] == ['00']\n"
                  "    elif work == 'read':\n"
                  "        assert [e.data['text'][:2] for e in led.read()] == [f'{k:02d}' for k in range(60)]\n"
                  "    elif work == 'verify':\n"
                  "        assert led.verify().ok\n"
                  "    elif work == 'export':\n"
                  "        assert led.export(export) == 60\n"
                  "    else:\n"
                  "        assert led.import_file(export) == 60 and led.verify().ok\n")
        exported = tmp_path / ("big.export.jsonl" if work == "import" else "out.export.jsonl")
        code, one, errors = peak_rss_mb([sys.executable, "-c", script, "one", str(backend.path), str(exported)])
        assert code == 0, errors
        code, every, errors = peak_rss_mb([sys.executable, "-c", script, work, str(target), str(exported)])
        assert code == 0, errors
        assert every - one < 40, f"{work} of 60 MB of events peaked {every - one:.0f} MB above reading one"

    @pytest.mark.parametrize("work", ["read", "export"])
    def test_large_blobs_are_not_all_kept_in_the_readers_cache(self, backend, work, tmp_path):
        """60 judge calls whose prompts (1 MB each, all different) are blobs: reading or exporting
        them peaks at most 40 MB above reading the first one (the reader's cache of recently used
        blobs kept 256 of them, whatever their size)."""
        request, payload = long_call()
        with backend.open() as led:
            led.append_many(NewEvent(f"case:c{k}", "judge.called", dict(payload, request=dict(
                request, messages=[{"role": "user", "content": f"{k:02d} " + "a long prompt " * 75_000}])))
                for k in range(60))
        script = ("import sys; from pathlib import Path; from evalledger import ledger\n"
                  "work, path, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])\n"
                  "with ledger.open_ledger(path) as led:\n"
                  "    if work == 'export':\n"
                  "        assert led.export(out) == 60\n"
                  "    else:\n"
                  "        n = 1 if work == 'one' else 60\n"
                  "        heads = [e.data['request']['messages'][0]['content'][:2] for e in led.read(to_seq=n)]\n"
                  "        assert heads == [f'{k:02d}' for k in range(n)], heads\n")
        out = tmp_path / "calls.export.jsonl"
        code, one, errors = peak_rss_mb([sys.executable, "-c", script, "one", str(backend.path), str(out)])
        assert code == 0, errors
        code, every, errors = peak_rss_mb([sys.executable, "-c", script, work, str(backend.path), str(out)])
        assert code == 0, errors
        assert every - one < 40, f"{work} of 60 calls with 1 MB prompts peaked {every - one:.0f} MB above reading one"

    def test_export_is_the_same_bytes_a_fresh_import_gives_back(self, backend, tmp_path):
        with backend.open() as led:
            seeded(led)
            led.export(tmp_path / "out.jsonl")
        restored = BACKENDS[backend.name](tmp_path / "restored")
        restored.path.parent.mkdir(parents=True, exist_ok=True)
        with restored.open() as led:
            assert led.import_file(tmp_path / "out.jsonl") == 6
            led.export(tmp_path / "again.jsonl")
        assert (tmp_path / "again.jsonl").read_bytes() == (tmp_path / "out.jsonl").read_bytes()

    def test_append_many_stores_a_long_batch_chunk_by_chunk_as_one_batch(self, backend, tmp_path):
        with backend.open() as led:
            [existing] = led.append(note("case:a", "before", key="old"))
            seen: list[tuple[int, bool]] = []
            taken: list[int] = []

            def events():   # a generator: append_many takes one chunk of it at a time
                for i in range(23):
                    taken.append(i)
                    yield note(f"case:s{i % 3}", f"n{i}", key=f"k{i}")
                    if i == 5:
                        yield note("case:a", "ignored", key="old")       # an id stored before this batch
                    if i == 17:
                        yield note("case:s2", "ignored", key="k2")       # an id an earlier chunk added
            new = led.append_many(events(), lambda e, fresh: seen.append((e.seq, fresh)), chunk_events=4)
            assert new == 23 and led.head().seq == 24
            stored = list(led.read())
            assert [e.seq for e in stored] == list(range(1, 25))
            assert len({e.meta["recorded_at"] for e in stored[1:]}) == 1   # one batch, one instant
            assert [v for e in stored if e.stream == "case:s1" for v in [e.version]] == list(range(1, 9))
            # every event in order, the one stored before not new; k2 again is this batch's event (seq 4)
            assert seen == [(2, True), (3, True), (4, True), (5, True), (6, True), (7, True), (1, False),
                            *[(s, True) for s in range(8, 20)], (4, True), *[(s, True) for s in range(20, 25)]]
            assert taken == list(range(23))
            assert led.verify().ok
            assert led.append_many(note(f"case:s{i % 3}", f"n{i}", key=f"k{i}") for i in range(23)) == 0
            assert led.head().seq == 24
            led.export(tmp_path / "out.jsonl")
        with backend.open() as again:   # kept after a reopen, mirror (SQLite) included: export is byte-equal
            assert [e.hash for e in again.read()] == [e.hash for e in stored]
            assert again.verify().ok
            again.export(tmp_path / "again.jsonl")
        assert (tmp_path / "out.jsonl").read_bytes() == (tmp_path / "again.jsonl").read_bytes()

    def test_append_many_appends_nothing_when_its_events_or_seen_fail_half_way(self, backend):
        with backend.open() as led:
            seeded(led)
            head = led.head()

            def broken():
                for i in range(10):
                    yield note("case:x", f"{i}", key=f"x{i}")
                raise ValueError("the source broke after 10 events")
            with pytest.raises(ValueError, match="broke"):
                led.append_many(broken(), chunk_events=3)
            assert led.head() == head and led.stream_version("case:x") == 0

            def refuse(event, new):
                if event.data["text"] == "7":
                    raise RuntimeError("seen refuses seq 7")
            with pytest.raises(RuntimeError, match="refuses"):
                led.append_many((note("case:y", f"{i}") for i in range(10)), refuse, chunk_events=3)
            assert led.head() == head and led.stream_version("case:y") == 0
            assert led.verify().ok
            [after] = led.append(note("case:x", "after"))   # the chain goes on from the old head
            assert after.seq == head.seq + 1 and after.prev_hash == head.hash
            assert led.verify().ok
        with backend.open() as again:
            assert again.head().seq == head.seq + 1 and again.verify().ok


def reference_root(leaves: list[bytes]) -> bytes:
    """MTH as RFC 6962 section 2.1 defines it, recursively: the tree the backends must keep."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return hashlib.sha256(b"\x01" + reference_root(leaves[:k]) + reference_root(leaves[k:])).digest()

class TestMerkleTreeContract:
    """Every backend keeps the RFC 6962 tree with its events, and verify checks what it keeps."""

    def test_the_tree_is_kept_with_every_append_and_answers_the_head_and_any_size(self, backend):
        with backend.open() as led:
            assert led.recorder.tree_state().size == 0 and led.merkle_root() == reference_root([])
            seeded(led)
            led.append(note("case:a", "x", key="k1"))
            led.append(note("case:a", "x again, same key", key="k1"))   # not appended: the tree stays
            with pytest.raises(ConflictError):
                led.append(note("case:b", "stale"), expected_version=0)
            for i in range(8):                    # past TREE_LAG: SQLite's row is written by then
                led.append([note("case:c", f"{i}.{j}") for j in range(10)])
            leaves = [bytes.fromhex(e.hash) for e in led.read()]
            state = led.recorder.tree_state()
            assert led.head().seq == len(leaves) == 87
            assert 0 <= len(leaves) - state.size < TREE_LAG and state.size >= TREE_LAG
            assert merkle.Frontier.restore(state.size, state.frontier).root() == reference_root(leaves[:state.size])
            assert [led.merkle_root(n) for n in range(88)] == [reference_root(leaves[:n]) for n in range(88)]
        with backend.open(readonly=True) as led:   # kept across processes, read with at most a short fold
            assert led.recorder.tree_state() == state and led.merkle_root() == reference_root(leaves)
            assert led.verify().ok

    def test_an_edited_tree_fails_verify_naming_the_subtree(self, backend):
        if backend.sql is None:
            pytest.skip("a JSONL ledger keeps no tree beside its lines: it is derived from them")
        with backend.open() as led:
            seeded(led)
            for i in range(7):
                led.append([note("case:c", f"{i}.{j}") for j in range(10)])
            state = led.recorder.tree_state()     # 66 or 76 events: a subtree of 64, then smaller ones
            assert led.verify().ok
        first, count, node = merkle.Frontier.restore(state.size, state.frontier).nodes()[1]
        forged = state.frontier[:32] + bytes(32) + state.frontier[64:]
        backend.sql(backend.path, "UPDATE {schema}.merkle SET frontier = ? WHERE id = 1", (forged,))
        with backend.open(readonly=True) as led:
            report = led.verify()
        assert not report.ok
        [problem] = report.problems
        assert problem.seq == first + 1 == 65 and backend.tree_table in problem.source
        assert f"seq 65..{64 + count}" in problem.reason

    def test_a_store_made_before_the_tree_was_kept_opens_and_builds_it(self, backend):
        if backend.sql is None:
            pytest.skip("a JSONL ledger keeps no tree beside its lines: it is derived from them")
        with backend.open() as led:
            seeded(led)
            leaves = [bytes.fromhex(e.hash) for e in led.read()]
        backend.sql(backend.path, "DROP TABLE {schema}.merkle", ())
        with backend.open(readonly=True) as led:   # read-only: nothing written, the root still answers
            assert led.recorder.tree_state() is None
            assert led.merkle_root() == reference_root(leaves)
            report = led.verify()
            assert report.ok and any("no Merkle tree is kept" in w for w in report.warnings)
        with backend.open() as led:                # the first writable open builds it, and says how
            state = led.recorder.tree_state()
            assert state.size == 6 and "built from the events (seq 1..6)" in state.built
            led.append(note("case:a", "after"))
            leaves.append(bytes.fromhex(led.head().hash))
            assert led.merkle_root() == reference_root(leaves)
            report = led.verify()
            assert report.ok and not report.warnings


def test_a_damaged_jsonl_tracking_file_is_named_and_the_events_are_kept(tmp_path):
    """The JSONL backend's tracking sidecar: refused by name when damaged, never taking events with it."""
    path = tmp_path / "events.jsonl"
    with ledger.open_ledger(path) as led:
        led.append(note("case:a", "x"), tracking=("stage:test", 1))
    sidecar = tmp_path / "events.jsonl.tracking.json"
    assert ledger.envelope.decode_json(sidecar.read_bytes()) == {"stage:test": 1}
    for damage in (b'{"stage:test": 1', b'["stage:test"]', b'{"stage:test": "one"}'):
        sidecar.write_bytes(damage)
        with ledger.open_ledger(path) as led:
            with pytest.raises(LedgerError, match="events.jsonl.tracking.json"):
                led.tracking_position("stage:test")
            assert [e.data["text"] for e in led.read()] == ["x"] and led.verify().ok
    sidecar.unlink()                                    # what the message advises: scan from the start
    with ledger.open_ledger(path) as led:
        assert led.tracking_position("stage:test") == 0
        led.append(note("case:a", "y"), tracking=("stage:test", 2))
        assert led.tracking_position("stage:test") == 2 and not list(tmp_path.glob("*.tmp"))


def _export(backend: Backend, batches: list[list[NewEvent]], out: Path) -> bytes:
    """Append the batches through ``backend`` (with fixed recorded_at) and return its export."""
    with backend.open() as led:
        for batch in batches:
            led.append(batch)
        led.export(out)
    return out.read_bytes()


EVENT = st.builds(
    lambda stream, text, key: NewEvent(f"case:{stream}", "note.added", {"text": text},
                                       key=key, meta={"recorded_at": "2026-01-01T00:00:00.000000Z"}),
    st.sampled_from("abc"), st.text(max_size=20), st.one_of(st.none(), st.sampled_from(["k1", "k2", "k3"])))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(EVENT, min_size=0, max_size=4), min_size=1, max_size=5))
def test_every_backend_exports_the_same_bytes_for_the_same_events(tmp_path_factory, batches):
    """The same batches, with keys (so ids are deterministic), give byte-identical exports."""
    keyed = [[NewEvent(e.stream, e.type, e.data, key=e.key or f"{i}.{j}", meta=e.meta)
              for j, e in enumerate(batch)] for i, batch in enumerate(batches)]
    tmp = tmp_path_factory.mktemp("same-events")
    exports = {name: _export(make(tmp), keyed, tmp / f"{name}.out") for name, make in BACKENDS.items()
               if name != "postgres" or not skipping_postgres()}
    assert len(set(exports.values())) == 1, exports
    lines = next(iter(exports.values())).splitlines()
    assert [ledger.envelope.decode_json(line)["seq"] for line in lines] == list(range(1, len(lines) + 1))
