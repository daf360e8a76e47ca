"""The blob store: judge calls' large and shared parts stored once, compressed, by content hash.

Real SQLite homes judged by the offline judge; verify, export, import and migrate through the CLI.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import cli
from evalledger import ledger
from evalledger.ledger.blobs import join, join_bytes, pack, split, unpack
from evalledger.ledger.envelope import canonical_json, decode_json
from evalledger.ledger.sqlite import SQLiteRecorder
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.intake import ingest_path
from evalledger.testing.arithmetic import arithmetic_benchmark
from reference_split import reference_split

CASES = 12


def judged(folder: Path, blobs: bool = True, name: str = "blob-test") -> Path:
    """A home in ``folder`` judged by the offline judge; ``blobs=False`` makes it as before the blob store."""
    folder.mkdir(parents=True, exist_ok=True)
    if not blobs:
        ledger.init_home(folder / "home")   # made by this version, then its store replaced by an old-style one
        for file in (folder / "home").glob("ledger.db*"):
            file.unlink()
        (folder / "home" / "events.jsonl").unlink()
        SQLiteRecorder(str(folder / "home" / "ledger.db"), blobs=False).close()
    source = folder / f"{name}.json"
    source.write_text(json.dumps(arithmetic_benchmark(CASES // 2, name)))
    with ledger.open_ledger(folder / "home") as led:
        ingest_path(led, source)
        assert run_until_idle(led, RunSettings(judge_backend="offline")).judged == CASES
    return folder / "home"


@pytest.fixture(scope="module")
def homes(tmp_path_factory) -> tuple[Path, Path]:
    """(a home with the blob store, the same work in a home made without it)."""
    root = tmp_path_factory.mktemp("blobs")
    return judged(root / "new"), judged(root / "old", blobs=False)


def stored(home: Path, sql: str) -> list:
    """Rows of a query on the home's ledger.db (read-only)."""
    with sqlite3.connect(f"file:{home / 'ledger.db'}?mode=ro", uri=True) as conn:
        return conn.execute(sql).fetchall()


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("payload", [
    {"request": {"messages": [{"role": "system", "content": "s" * 900}, {"role": "user", "content": "u" * 400}],
                 "schema": {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(40)}}}},
    {"$blob": "sha256:" + "0" * 64},                              # a payload that looks like a reference
    {"x": {"$lit": {"$blob": "y" * 500}}, "big": 10 ** 30, "text": "é€😀" * 200, "f": [1.5e-300, -0.0]},
    {"short": "nothing to split"},
])
def test_split_then_join_gives_the_payload_back_byte_for_byte(payload):
    raw = canonical_json(payload)
    stored_bytes, blobs = split(payload, raw)
    assert canonical_json(join(decode_json(stored_bytes), blobs.__getitem__)) == raw
    assert join_bytes(stored_bytes, blobs.__getitem__) == raw          # the text join reads: the same bytes
    for key, content in blobs.items():
        assert hashlib.sha256(content).hexdigest() == key
    again, _ = split(payload, raw)
    assert again == stored_bytes   # a pure function of the payload


_LEAF = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10 ** 25), max_value=10 ** 25),
                  st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=40),
                  st.text(alphabet='ab"{}$\\:', min_size=300, max_size=700),   # long: a blob of its own
                  st.sampled_from(['{"$blob":"sha256:' + "a" * 64 + '"}', "$lit", "$blob"]))
_PAYLOAD = st.recursive(_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=6),
    st.dictionaries(st.sampled_from(["$blob", "$lit", "a", "b", "content", "é"]), inner, max_size=4)),
    max_leaves=40)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=8), _PAYLOAD, max_size=5))
def test_the_text_join_and_the_structural_join_agree_on_any_payload(payload):
    # Reads join as text (each reference's bytes put in its place); the structural join is the
    # definition. Payloads with look-alike references, escaped literals and long integers included.
    raw = canonical_json(payload)
    stored_bytes, blobs = split(payload, raw)
    assert join_bytes(stored_bytes, blobs.__getitem__) == canonical_json(join(decode_json(stored_bytes),
                                                                               blobs.__getitem__)) == raw


_NESTED = st.recursive(_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=8),
    st.dictionaries(st.sampled_from(["$blob", "$lit", "a", "b", "content", "messages", "é"]), inner, max_size=6)),
    max_leaves=120)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), _NESTED, max_size=6))
def test_the_split_gives_the_same_bytes_and_blobs_as_the_first_split(payload):
    # The split skips parts too short to hold a blob and encodes a part once: the stored bytes,
    # the blobs and their order must be exactly those of the walk it replaced (tests/reference_split.py).
    raw = canonical_json(payload)
    stored_bytes, blobs = split(payload, raw)
    want_bytes, want_blobs = reference_split(payload, raw)
    assert stored_bytes == want_bytes
    assert list(blobs.items()) == list(want_blobs.items())


def test_a_judged_home_stores_what_the_first_split_stores(homes):
    # Every judge call of a real run, split again by the oracle from its joined payload.
    with ledger.open_ledger(homes[0], readonly=True) as led:
        calls = list(led.read(types=["judge.called"]))
        rows = dict(stored(homes[0], "SELECT seq, data FROM events WHERE type = 'judge.called'"))
    assert calls
    for event in calls:
        want, _ = reference_split(event.data, canonical_json(event.data))
        assert rows[event.seq].encode() == want


@pytest.mark.parametrize("size", [0, 1, 300, 512, 513, 735, 4096, 4097, 40_000, 300_000])
def test_a_blob_is_packed_with_a_window_that_fits_it_and_reads_back(size):
    # zlib's default 32 KB window and 64K-entry table cost more to set up than a ~700-byte blob
    # takes to compress; any zlib reader takes a smaller window, so the stored form stays a zlib stream
    raw = (b"What is 12 times 3, and is it even? The product " * (size // 48 + 1))[:size]
    packed = pack(raw)
    assert unpack(hashlib.sha256(raw).hexdigest(), packed, "test") == raw
    window = 2 ** ((packed[0] >> 4) + 8)
    assert window >= min(size, 32768) and window <= max(512, 2 * size)
    assert len(packed) <= len(zlib.compress(raw, 6)) * 1.01 + 8


def test_shared_parts_are_one_blob():
    one = {"messages": [{"role": "system", "content": "the shared prompt " * 40}, {"role": "user", "content": "a"}]}
    two = {"messages": [{"role": "system", "content": "the shared prompt " * 40}, {"role": "user", "content": "b"}]}
    _, first = split(one, canonical_json(one))
    _, second = split(two, canonical_json(two))
    assert set(first) & set(second)


def test_judge_calls_are_stored_as_shared_blobs_and_read_back_whole(homes):
    new, old = homes
    with_refs = stored(new, "SELECT COUNT(*) FROM events WHERE type = 'judge.called' AND data LIKE '%\"$blob\"%'")[0][0]
    calls = stored(new, "SELECT COUNT(*) FROM events WHERE type = 'judge.called'")[0][0]
    assert calls and with_refs == calls
    blobs = stored(new, "SELECT COUNT(*) FROM blobs")[0][0]
    # each call's request is a blob holding its system prompt's blob: unshared, that is two a call
    assert 0 < blobs < 2 * calls
    assert not stored(old, "SELECT name FROM sqlite_master WHERE name = 'blobs'")
    assert stored(old, "SELECT COUNT(*) FROM events WHERE data LIKE '%\"$blob\"%'")[0][0] == 0
    new_bytes = stored(new, "SELECT SUM(LENGTH(data)) FROM events WHERE type = 'judge.called'")[0][0]
    old_bytes = stored(old, "SELECT SUM(LENGTH(data)) FROM events WHERE type = 'judge.called'")[0][0]
    assert new_bytes < old_bytes / 2
    with ledger.open_ledger(new, readonly=True) as a, ledger.open_ledger(old, readonly=True) as b:
        mine = {e.id: e for e in a.read(types="judge.called")}
        theirs = {e.id: e for e in b.read(types="judge.called")}
        assert mine.keys() == theirs.keys()
        for id, event in mine.items():   # every prompt and reply, byte for byte
            assert canonical_json(event.data) == canonical_json(theirs[id].data)
            assert a.get(id).data == event.data
        scanned = {row.id: row.data for row in a.scan(1, a.head().seq, ["judge.called"])}
        assert all(decode_json(scanned[id]) == mine[id].data for id in mine)
        assert a.verify().ok and b.verify().ok


def test_verify_names_the_event_of_an_altered_or_missing_blob(homes, tmp_path):
    new, _ = homes
    copy = tmp_path / "copy"
    with ledger.open_ledger(new, readonly=True) as led, ledger.open_ledger(copy) as target:
        led.export(tmp_path / "e.jsonl")
        target.import_file(tmp_path / "e.jsonl")
    [(key, first_seq)] = stored(copy, "SELECT hex(b.key), MIN(e.seq) FROM blobs b JOIN events e "
                                      "ON instr(e.data, lower(hex(b.key))) GROUP BY b.key ORDER BY 2 LIMIT 1")
    conn = sqlite3.connect(copy / "ledger.db")
    conn.execute("DROP TRIGGER blobs_refuse_update")
    conn.execute("UPDATE blobs SET data = zeroblob(20) || data WHERE key = x'%s'" % key)
    conn.commit()
    result = cli("verify", home=copy)
    assert result.returncode != 0
    assert f"seq {first_seq}" in result.stdout + result.stderr
    assert f"sha256:{key.lower()}" in result.stdout + result.stderr
    conn.execute("DROP TRIGGER blobs_refuse_delete")
    conn.execute("DELETE FROM blobs WHERE key = x'%s'" % key)
    conn.commit()
    conn.close()
    with ledger.open_ledger(copy, readonly=True) as led:
        assert any("is missing" in str(p) and p.seq == first_seq for p in led.verify().problems)


def test_export_import_and_rebuild_from_the_mirror_carry_every_blob(homes, tmp_path):
    new, _ = homes
    out = tmp_path / "export.jsonl"
    assert cli("export", "--out", out, home=new).returncode == 0
    assert out.read_bytes() == (new / "events.jsonl").read_bytes()   # one event a line, as before
    assert Path(f"{out}.blobs").stat().st_size > 0
    assert cli("import", out, home=tmp_path / "imported").returncode == 0
    for source, target in ((out, tmp_path / "imported"), (new / "events.jsonl", tmp_path / "rebuilt")):
        again = tmp_path / f"{target.name}.jsonl"
        with ledger.open_ledger(target) as led:
            if not led.head().seq:
                led.import_file(source)
            assert led.verify().ok
            led.export(again)
        assert again.read_bytes() == out.read_bytes()
        assert Path(f"{again}.blobs").read_bytes() == Path(f"{out}.blobs").read_bytes()
        with ledger.open_ledger(target, readonly=True) as a, ledger.open_ledger(new, readonly=True) as b:
            assert [e.data for e in a.read()] == [e.data for e in b.read()]
    # an export read as a JSONL ledger finds its blobs beside it
    with ledger.open_ledger(out, readonly=True) as led:
        assert led.verify().ok
        assert all("$blob" not in json.dumps(e.data) for e in led.read(types="judge.called"))


def test_import_refuses_an_export_without_its_blobs_or_with_an_altered_one(homes, tmp_path):
    new, _ = homes
    out = tmp_path / "export.jsonl"
    assert cli("export", "--out", out, home=new).returncode == 0
    side = Path(f"{out}.blobs")
    lines = side.read_bytes().splitlines(keepends=True)
    side.write_bytes(b"".join(lines[1:]))   # the first blob lost
    result = cli("import", out, home=tmp_path / "a")
    assert result.returncode == 1 and "which no line before it holds" in result.stderr
    record = json.loads(lines[0])
    record["zlib"] = json.loads(lines[1])["zlib"]   # another blob's content under this key
    side.write_bytes(json.dumps(record, separators=(",", ":")).encode() + b"\n" + b"".join(lines[1:]))
    result = cli("import", out, home=tmp_path / "b")
    assert result.returncode == 1 and "does not hash to its key" in result.stderr
    assert not (tmp_path / "b" / "ledger.db").exists() or ledger.open_ledger(tmp_path / "b").head().seq == 0


def test_a_mirror_cut_by_a_crash_is_completed_with_its_blobs(homes, tmp_path):
    new, _ = homes
    home = tmp_path / "home"
    with ledger.open_ledger(home) as led:
        led.import_file(new / "events.jsonl")
    mirror, side = home / "events.jsonl", home / "events.jsonl.blobs"
    whole_mirror, whole_side = mirror.read_bytes(), side.read_bytes()
    lines = whole_mirror.splitlines(keepends=True)
    mirror.write_bytes(b"".join(lines[: len(lines) // 2]))   # a crash between commit and mirror write
    side.write_bytes(whole_side[:-10])                       # ... that also tore the blob file's last line
    with ledger.open_ledger(home, readonly=True) as led:
        assert not led.verify().ok
    with ledger.open_ledger(home) as led:                    # a writable open completes the mirror
        assert mirror.read_bytes() == whole_mirror
        assert led.verify().ok


def test_an_old_home_reads_as_written_and_migrate_copies_it_into_the_blob_store(homes, tmp_path):
    _, old = homes
    before = {p.name: file_digest(p) for p in old.iterdir() if p.is_file() and p.suffix in (".db", ".jsonl")}
    with ledger.open_ledger(old) as led:   # a writable open adds no blob table to an old home
        head = led.head()
        assert led.recorder.blobs is None
    target = tmp_path / "migrated"
    result = cli("migrate", "--to", target, home=old)
    assert result.returncode == 0, result.stderr
    assert f"{head.seq} events" in result.stdout
    assert {p.name: file_digest(p) for p in old.iterdir() if p.is_file() and p.suffix in (".db", ".jsonl")} == before
    with ledger.open_ledger(target) as led:
        assert led.verify(expect_head=head).ok   # the old events, byte for byte: a published head still verifies
        [migrated] = led.read(types="store.migrated")
        assert (migrated.seq, migrated.data["source_head_hash"], migrated.data["events"]) == \
            (head.seq + 1, head.hash, head.seq)
        source = tmp_path / "more.json"
        source.write_text(json.dumps(arithmetic_benchmark(2, "more")))
        ingest_path(led, source)
        run_until_idle(led, RunSettings(judge_backend="offline"))
    later = stored(target, f"SELECT COUNT(*) FROM events WHERE seq > {head.seq} AND type = 'judge.called' "
                           "AND data LIKE '%\"$blob\"%'")[0][0]
    assert later > 0 and stored(target, f"SELECT COUNT(*) FROM events WHERE seq <= {head.seq} "
                                        "AND data LIKE '%\"$blob\"%'")[0][0] == 0
    again = cli("migrate", "--to", target, home=old)
    assert again.returncode != 0 and "not empty" in again.stdout + again.stderr


def test_a_postgres_store_keeps_the_same_blobs_and_verify_checks_them(homes, tmp_path):
    import psycopg

    from postgres_support import fresh_store_url, postgres_home
    _, old = homes
    url = fresh_store_url()
    postgres_home(tmp_path / "pg" / "home", url)
    home = judged(tmp_path / "pg")
    schema = url.rsplit("schema=", 1)[1]
    with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
        refs = conn.execute(f"SELECT COUNT(*) FROM {schema}.events WHERE type = 'judge.called' "
                            "AND data LIKE '%%\"$blob\"%%'").fetchone()[0]
        assert refs == CASES * 3 and conn.execute(f"SELECT COUNT(*) FROM {schema}.blobs").fetchone()[0] > 0
        with ledger.open_ledger(home) as led, ledger.open_ledger(old, readonly=True) as inline:
            theirs = {e.id: e.data for e in inline.read(types="judge.called")}
            assert {e.id: e.data for e in led.read(types="judge.called")} == theirs
            assert led.verify().ok
            conn.execute(f"DROP TRIGGER blobs_refuse_update ON {schema}.blobs")
            conn.execute(f"UPDATE {schema}.blobs SET data = '\\x00'::bytea || data "
                         f"WHERE key = (SELECT key FROM {schema}.blobs ORDER BY key LIMIT 1)")
            problems = led.verify().problems
            assert problems and "cannot be decompressed" in str(problems[0]) and "sha256:" in str(problems[0])


def test_a_scan_may_leave_references_and_join_resolves_them(homes, monkeypatch):
    # Readers that need an event's small fields only (a replay source's call index) scan the
    # stored rows with references in place; Ledger.join gives any part of them whole.
    from evalledger.stages.judge import recording
    monkeypatch.setattr(recording, "_SCAN_FROM", 0)    # this small home: built by a scan all the same
    new, _ = homes
    home = Path(shutil.copytree(new, new.parent / "long-reply"))
    with ledger.open_ledger(home) as led:   # one more call whose reply is long enough to be a blob
        first = next(led.read(types=["judge.called"]))
        led.append(recording.call_event(first.data["case_id"], {
            **{k: v for k, v in first.data.items() if k not in ("case_id", "step_attempt")},
            "request_hash": "f" * 64, "reply": {"text": "a long reply " * 60}}, 1, 1))
    with ledger.open_ledger(home, readonly=True) as led:
        whole = {e.id: e.data for e in led.read(types=["judge.called"])}
        rows = list(led.scan(1, led.head().seq, ("judge.called",), resolve=False))
        assert rows and all(b'"$blob"' in bytes(row.data) for row in rows)
        assert {row.id: led.join(decode_json(row.data)) for row in rows} == whole
        resolved = list(led.scan(1, led.head().seq, ("judge.called",)))
        assert [decode_json(row.data) for row in resolved] == list(whole.values())
        index = recording.CallIndex(led, keep_answers=True)
        index.catch_up()
        kept = [r.answer for r in index.successes.values()]
        assert kept and all(a.data == {k: v for k, v in whole[a.id].items() if k not in ("request", "sent", "raw_reply")}
                            for a in kept)
