"""The ledger's Python API on real files, for both backends: append, read, head, idempotency,
optimistic concurrency, atomic batches, schema upcasting, immutability triggers, durability."""

from __future__ import annotations

import sqlite3
from typing import Any

import orjson
import pydantic
import pytest

from evalledger import ledger
from evalledger.ledger import ConflictError, EnvelopeError, NewEvent, Payload, event_type, upcaster
from evalledger.ledger.envelope import GENESIS_HASH, chain_hash


@pytest.fixture(params=["home", "jsonl"])
def led(request, tmp_path):
    """An empty ledger: a home (SQLite + mirror) or a standalone .jsonl file."""
    path = tmp_path / "home" if request.param == "home" else tmp_path / "ledger.jsonl"
    with ledger.open_ledger(path) as opened:
        yield opened


def note(stream: str, text: str, key: str | None = None, **meta: Any) -> NewEvent:
    return NewEvent(stream, "note.added", {"text": text}, key=key, meta=meta or None)


def test_append_assigns_gapless_seq_versions_and_a_chain(led):
    stored = led.append([note("case:a", "one"), note("case:b", "two"), note("case:a", "three")])
    assert [e.seq for e in stored] == [1, 2, 3]
    assert [(e.stream, e.version) for e in stored] == [("case:a", 1), ("case:b", 1), ("case:a", 2)]
    assert stored[0].prev_hash == GENESIS_HASH
    for before, after in zip(stored, stored[1:]):
        assert after.prev_hash == before.hash
    for event in stored:
        assert event.hash == chain_hash(event.prev_hash, event.canonical())
    assert led.head() == ledger.Head(3, stored[-1].hash)
    assert led.stream_version("case:a") == 2 and led.stream_version("case:nobody") == 0
    assert led.verify().ok


def test_envelope_has_exactly_the_design_fields(led):
    [event] = led.append(note("case:a", "hello", run="run:1", stage="test"))
    envelope = orjson.loads(event.line())
    assert list(envelope) == ["data", "id", "meta", "schema", "seq", "stream", "type", "version",
                              "prev_hash", "hash"]
    assert envelope["meta"]["run"] == "run:1" and envelope["meta"]["recorded_at"].endswith("Z")
    assert envelope["data"] == {"author": None, "text": "hello"}
    assert event.payload().text == "hello"
    with pytest.raises(pydantic.ValidationError):
        event.payload().text = "changed"  # payload models are frozen


def test_read_filters_by_type_stream_and_seq_range(led):
    led.append([note("case:a", "1"), note("case:b", "2"), note("case:a", "3"), note("run:r1", "4")])
    assert [e.seq for e in led.read(stream="case:a")] == [1, 3]
    assert [e.seq for e in led.read(from_seq=2)] == [2, 3, 4]
    assert [e.seq for e in led.read(from_seq=2, to_seq=3)] == [2, 3]
    assert [e.seq for e in led.read(types="note.added", stream="case:b")] == [2]
    assert list(led.read(types=["no.such_type"])) == []
    reader = led.read()
    assert iter(reader) is reader  # a lazy iterator, not a list


def test_get_returns_the_event_by_id(led):
    [event] = led.append(note("case:a", "x", key="k1"))
    assert led.get(event.id) == event
    assert led.get("0" * 32) is None


def test_idempotent_append_returns_the_stored_event_and_appends_nothing(led):
    [first] = led.append(note("case:a", "original", key="step:1"))
    again = led.append([note("case:a", "different text, same key", key="step:1"), note("case:a", "new", key="step:2")])
    assert again[0] == first and again[0].data["text"] == "original"
    assert again[1].seq == 2
    assert led.append(note("case:a", "x", key="step:1")) == [first]
    assert led.head().seq == 2


def test_same_key_twice_in_one_batch_appends_once(led):
    out = led.append([note("case:a", "x", key="k"), note("case:a", "y", key="k")])
    assert out[0] == out[1] and led.head().seq == 1


def test_stale_expected_version_raises_and_appends_nothing(led):
    led.append(note("case:a", "1"))
    with pytest.raises(ConflictError, match="version 1, expected 0"):
        led.append([note("case:b", "other stream"), note("case:a", "2")],
                   expected_version={"case:a": 0, "case:b": 0})
    assert led.head().seq == 1 and led.stream_version("case:b") == 0
    [event] = led.append(note("case:a", "2"), expected_version=1)
    assert event.version == 2


def test_retrying_an_appended_batch_with_its_old_expected_version_is_not_a_conflict(led):
    first = led.append(note("case:a", "1", key="k"), expected_version=0)
    assert led.append(note("case:a", "1", key="k"), expected_version=0) == first


def test_a_batch_with_an_invalid_event_appends_nothing(led):
    led.append(note("case:a", "before"))
    with pytest.raises(EnvelopeError):
        led.append([note("case:a", "fine"), NewEvent("case:a", "note.added", {"wrong": 1})])
    with pytest.raises(EnvelopeError, match="not 'kind:identifier'"):
        led.append([note("case:a", "fine"), note("no spaces allowed", "x")])
    with pytest.raises(EnvelopeError, match="unknown event type"):
        led.append(NewEvent("case:a", "no.such_type", {}))
    assert led.head().seq == 1


def test_non_finite_floats_are_refused_not_turned_into_null(led):
    register_any_type()
    with pytest.raises(EnvelopeError, match="nan|inf"):
        led.append(NewEvent("test:x", "test.anything", {"value": [1.0, float("nan")]}))
    with pytest.raises(EnvelopeError):
        led.append(NewEvent("test:x", "test.anything", {"value": {"k": float("inf")}}))
    assert led.head().seq == 0


def test_integers_beyond_64_bits_round_trip_exactly(led):
    register_any_type()
    values = [-(2 ** 63) - 1, 2 ** 64, -(10 ** 30), 2 ** 64 - 1, 10 ** 18, [1.5, -(2 ** 63)]]
    led.append(NewEvent("test:x", "test.anything", {"value": values}))
    [event] = led.read()
    assert event.data["value"] == values
    assert led.verify().ok


def register_any_type():
    @event_type("test.anything")
    class Anything(Payload):
        value: Any = None
    return Anything


def test_an_old_schema_version_is_upcast_when_read(led):
    @event_type("test.renamed", schema=1)
    class RenamedV1(Payload):
        name: str

    [old] = led.append(NewEvent("test:u", "test.renamed", {"name": "Ada Lovelace"}))
    assert old.schema == 1

    @event_type("test.renamed", schema=2)
    class RenamedV1(Payload):  # noqa: F811  (same qualname: the type moves to schema 2)
        first: str
        last: str

    @upcaster("test.renamed", from_schema=1)
    def split_name(data: dict) -> dict:
        first, _, last = data.pop("name").partition(" ")
        return {**data, "first": first, "last": last}

    [stored] = led.read(types="test.renamed")
    assert stored.schema == 1 and stored.stored_data == {"name": "Ada Lovelace"}  # stored bytes untouched
    assert stored.data == {"first": "Ada", "last": "Lovelace"}  # every reader sees the current schema
    assert stored.payload() == RenamedV1(first="Ada", last="Lovelace")
    [new] = led.append(NewEvent("test:u", "test.renamed", {"first": "Grace", "last": "Hopper"}))
    assert new.schema == 2 and new.payload().last == "Hopper"
    assert led.verify().ok


def test_tracking_is_committed_with_the_batch(tmp_path):
    with ledger.open_ledger(tmp_path / "home") as led:
        led.append(note("case:a", "x"), tracking=("stage:test", 7))
        assert led.tracking_position("stage:test") == 7
        with pytest.raises(ConflictError):
            led.append(note("case:a", "y"), expected_version=0, tracking=("stage:test", 9))
        assert led.tracking_position("stage:test") == 7
        led.append([], tracking=("stage:test", 8))
        assert led.tracking_position("stage:test") == 8


def test_sqlite_triggers_refuse_update_and_delete(home):
    with ledger.open_ledger(home) as led:
        led.append(note("case:a", "x"))
    conn = sqlite3.connect(home / "ledger.db")
    with pytest.raises(sqlite3.DatabaseError, match="immutable: UPDATE refused"):
        conn.execute("UPDATE events SET data = '{}' WHERE seq = 1")
    with pytest.raises(sqlite3.DatabaseError, match="immutable: DELETE refused"):
        conn.execute("DELETE FROM events")
    conn.close()
    assert ledger.open_ledger(home).verify().ok


def test_sqlite_columns_are_the_envelope_fields_and_wal(home):
    conn = sqlite3.connect(home / "ledger.db")
    columns = [row[1] for row in conn.execute("PRAGMA table_info(events)")]
    assert columns == ["seq", "id", "stream", "version", "type", "schema", "data", "meta", "prev_hash", "hash"]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize("durability, level", [("normal", 1), ("full", 2)])
def test_durability_sets_sqlite_synchronous(tmp_path, durability, level):
    with ledger.open_ledger(tmp_path / "home", durability=durability) as led:
        assert led.recorder.conn.execute("PRAGMA synchronous").fetchone()[0] == level
        assert led.recorder.mirror.fsync == (durability == "full")
        led.append(note("case:a", "one"))
        led.append([note("case:a", "two"), note("case:b", "three")])
        assert led.verify().ok and led.head().seq == 3
    with pytest.raises(ledger.LedgerError, match="durability"):
        ledger.open_ledger(tmp_path / "other", durability="sometimes")


def test_readonly_open_refuses_to_append_and_changes_nothing(home):
    with ledger.open_ledger(home) as led:
        led.append(note("case:a", "x"))
    before = (home / "events.jsonl").read_bytes()
    with ledger.open_ledger(home, readonly=True) as led:
        with pytest.raises(ledger.LedgerError, match="read-only"):
            led.append(note("case:a", "y"))
        assert [e.data["text"] for e in led.read()] == ["x"]
    assert (home / "events.jsonl").read_bytes() == before
    with pytest.raises(ledger.LedgerError, match="no evalledger home"):
        ledger.open_ledger(home.parent / "nowhere", readonly=True)


def test_a_cached_head_notices_appends_by_another_ledger_object(tmp_path):
    first = ledger.open_ledger(tmp_path / "home")
    second = ledger.open_ledger(tmp_path / "home")
    first.append(note("case:a", "1"))
    second.append(note("case:a", "2"))
    [event] = first.append(note("case:a", "3"))
    assert (event.seq, event.version) == (3, 3)
    with pytest.raises(ConflictError):
        second.append(note("case:a", "4"), expected_version=2)
    assert first.verify().ok and (tmp_path / "home" / "events.jsonl").read_bytes().count(b"\n") == 3
    first.close()
    second.close()


def test_export_of_a_home_is_its_mirror_and_equals_the_jsonl_export(tmp_path):
    home = tmp_path / "home"
    with ledger.open_ledger(home) as led:
        led.append([note("case:a", "ünïcödé ✓"), note("case:b", "two")])
        led.append(note("case:a", "three"))
        led.export(tmp_path / "home.jsonl")
    assert (tmp_path / "home.jsonl").read_bytes() == (home / "events.jsonl").read_bytes()
    with ledger.open_ledger(tmp_path / "copy.jsonl") as copy:
        assert copy.import_file(tmp_path / "home.jsonl") == 3
        copy.export(tmp_path / "copy-export.jsonl")
        assert copy.head() == ledger.open_ledger(home, readonly=True).head()
    assert (tmp_path / "copy-export.jsonl").read_bytes() == (home / "events.jsonl").read_bytes()


def test_import_goes_into_an_empty_ledger_only(tmp_path):
    with ledger.open_ledger(tmp_path / "a") as a:
        a.append(note("case:a", "x"))
        a.export(tmp_path / "a.jsonl")
        with pytest.raises(ledger.LedgerError, match="empty"):
            a.import_file(tmp_path / "a.jsonl")


def test_a_home_whose_path_looks_like_uri_syntax_opens_read_only(tmp_path):
    home = tmp_path / "odd ?name#1%20"
    with ledger.open_ledger(home) as led:
        led.append(note("case:a", "x"))
    with ledger.open_ledger(home, readonly=True) as led:
        assert [e.data["text"] for e in led.read()] == ["x"] and led.verify().ok


def test_get_stored_leaves_blob_references_in_place_and_other_stores_give_the_event_whole(tmp_path):
    from evalledger import ledger as api

    prompt = "a long prompt " * 60
    data = {"role": "parse", "backend": "offline", "model": "m", "request_hash": "a" * 64, "attempt": 1,
            "request": {"messages": [{"role": "user", "content": prompt}], "parameters": {}}}
    for where in (tmp_path / "home", tmp_path / "bare.jsonl"):
        with api.open_ledger(where) as led:
            [event] = led.append(api.NewEvent("case:c1", "judge.called", data, key="k"))
            stored, whole = led.get_stored(event.id), led.get(event.id)
            assert whole.data["request"]["messages"][0]["content"] == prompt
            assert led.join(stored.stored_data) == whole.data and stored.raw_data == whole.raw_data
            content = stored.stored_data["request"]["messages"][0]["content"]
            if where.suffix == ".jsonl":
                assert content == prompt                                   # no blobs: whole
            else:
                assert set(content) == {"$blob"} and stored.stored_data["request"] == api.stored_part(data["request"])
            assert led.get_stored("0" * 32) is None
