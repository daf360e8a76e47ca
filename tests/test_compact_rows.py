"""Compact rows (``init --rows compact``): ledger.db keeps each event's data and meta deflated with a
fixed dictionary and its id and hashes as raw bytes, while the events themselves (canonical bytes,
hash chain, export and mirror lines) are those of a text home. Verify, export/import, reports,
tamper detection and ``migrate --rows compact`` work on it; a text home is untouched."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from conftest import cli
from evalledger import ledger
from evalledger.ledger.row_codec import COMPACT_FORM, compress, pack_row, unpack_row

CASES = 6


def judged(folder: Path, *init_args: str) -> Path:
    """A home made by ``evalledger init INIT_ARGS`` in ``folder``, an arithmetic benchmark judged offline."""
    from evalledger.testing.arithmetic import arithmetic_benchmark
    folder.mkdir(parents=True, exist_ok=True)
    home = folder / "home"
    made = cli("init", *init_args, home=home)
    assert made.returncode == 0, made.stderr
    source = folder / "bench.json"
    source.write_text(json.dumps(arithmetic_benchmark(CASES // 2, "compact-rows")))
    for args in (("ingest", source), ("run", "--judge", "offline")):
        result = cli(*args, home=home)
        assert result.returncode == 0, result.stdout + result.stderr
    return home


@pytest.fixture(scope="module")
def homes(tmp_path_factory) -> tuple[Path, Path]:
    """(a home with compact rows, the same work in a home with text rows)."""
    root = tmp_path_factory.mktemp("rows")
    return judged(root / "compact", "--rows", "compact"), judged(root / "text")


def stored(home: Path, sql: str) -> list[tuple]:
    """Rows of ``sql`` on the home's ledger.db, read with the sqlite3 module alone."""
    conn = sqlite3.connect(home / "ledger.db")
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def tamper(home: Path, *statements: tuple[str, tuple]) -> None:
    """Run SQL on ledger.db past the immutability triggers (as an attacker with file access could)."""
    conn = sqlite3.connect(home / "ledger.db")
    conn.execute("DROP TRIGGER events_refuse_update")
    for sql, params in statements:
        conn.execute(sql, params)
    conn.commit()
    conn.close()


def reports(home: Path) -> dict[str, str]:
    """sha256 of every file ``evalledger report`` writes, by path under reports/."""
    result = cli("report", home=home)
    assert result.returncode == 0, result.stderr
    root = home / "reports"
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def export(home: Path, out: Path) -> bytes:
    """The bytes ``evalledger export`` writes for the home."""
    result = cli("export", "--out", out, home=home)
    assert result.returncode == 0, result.stderr
    return out.read_bytes()


def verify_fails_at(home: Path, seq: int, reason: str) -> bool:
    """verify exited 1 naming ``seq`` in ledger.db's events table with ``reason`` on the same line."""
    result = cli("verify", home=home)
    return result.returncode == 1 and any(
        line.startswith(f"FAILED seq {seq}: ") and "ledger.db (table events)" in line and reason in line
        for line in result.stdout.splitlines())


def test_a_compact_home_stores_blob_cells_in_fewer_bytes_and_verifies(homes):
    compact, text = homes
    assert stored(compact, "SELECT form FROM event_rows") == [(COMPACT_FORM,)]
    kinds = set(stored(compact, "SELECT typeof(id), typeof(data), typeof(meta), typeof(hash) FROM events"))
    assert kinds == {("blob",) * 4}   # meta's cell holds its length: meta and data are deflated together
    assert stored(compact, "SELECT seq, length(prev_hash) FROM events WHERE length(prev_hash) > 0") == [(1, 32)]
    assert set(stored(text, "SELECT typeof(data), typeof(hash) FROM events")) == {("text", "text")}
    size = {h: sum(stored(h, "SELECT SUM(LENGTH(CAST(id AS BLOB)) + LENGTH(CAST(data AS BLOB)) + "
                             "LENGTH(CAST(meta AS BLOB)) + LENGTH(CAST(prev_hash AS BLOB)) + "
                             "LENGTH(CAST(hash AS BLOB))) FROM events")[0]) for h in homes}
    assert size[compact] * 2 < size[text]
    result = cli("verify", home=compact)
    assert result.returncode == 0, result.stdout + result.stderr
    # The mirror holds the same lines the rows decode to: the event bytes did not change.
    assert (compact / "events.jsonl").read_bytes().count(b"\n") >= stored(compact, "SELECT COUNT(*) FROM events")[0][0]


def test_export_and_import_round_trip_through_both_forms_with_byte_identical_reports(homes, tmp_path):
    compact, _ = homes
    original = export(compact, tmp_path / "a.jsonl")
    into_text = cli("import", tmp_path / "a.jsonl", home=tmp_path / "text")
    made = cli("init", "--rows", "compact", home=tmp_path / "compact")
    into_compact = cli("import", tmp_path / "a.jsonl", home=tmp_path / "compact")
    assert into_text.returncode == made.returncode == into_compact.returncode == 0, into_compact.stderr
    assert stored(tmp_path / "compact", "SELECT DISTINCT typeof(data) FROM events") == [("blob",)]
    assert export(tmp_path / "text", tmp_path / "b.jsonl") == original == export(tmp_path / "compact",
                                                                                   tmp_path / "c.jsonl")
    expected = reports(compact)
    assert expected and reports(tmp_path / "text") == expected == reports(tmp_path / "compact")
    with ledger.open_ledger(compact, readonly=True) as led:
        last = list(led.read())[-1]
        assert led.get(last.id).hash == last.hash   # an id lookup finds the raw-bytes key


def test_an_edited_compact_row_is_detected_whatever_form_the_edit_takes(homes, tmp_path):
    compact, _ = homes
    homes_made = [tmp_path / f"c{i}" for i in range(5)]
    for home in homes_made:
        _copy_compact(compact, home)
    edited, text_meta, garbage, raw_hash, moved = homes_made
    # A payload edited and compressed again, as the store would have written it.
    [(data, meta)] = stored(edited, "SELECT data, meta FROM events WHERE seq = 3")
    _, _, _, _, _, _, payload, meta_text, _, _ = unpack_row((3, "", "", 0, "", 0, data, meta, "", ""))
    changed = json.dumps({**json.loads(payload), "x": 1}, separators=(",", ":"), sort_keys=True)
    tamper(edited, ("UPDATE events SET data = ? WHERE seq = 3", (compress(meta_text + changed),)))
    assert verify_fails_at(edited, 3, "hash does not match the stored bytes")
    # A text cell written by hand in a compact home is read as text, and checked the same way.
    tamper(text_meta, ("UPDATE events SET meta = ? WHERE seq = 4", ('{"recorded_at":"2000-01-01T00:00:00Z"}',)))
    assert verify_fails_at(text_meta, 4, "hash does not match the stored bytes")
    # A cell that does not inflate at all is named the same way, not a zlib error.
    tamper(garbage, ("UPDATE events SET data = ? WHERE seq = 5", (b"not a deflate stream",)))
    assert verify_fails_at(garbage, 5, "hash does not match the stored bytes")
    # A hash flipped in its raw bytes fails at its own seq.
    tamper(raw_hash, ("UPDATE events SET hash = ? WHERE seq = 2", (b"\x01" * 32,)))
    assert verify_fails_at(raw_hash, 2, "hash does not match the stored bytes")
    # Two rows swapped: the empty prev_hash is read from the row now before, which the hash does not cover.
    tamper(moved, ("DROP TRIGGER IF EXISTS events_refuse_delete", ()),
           ("UPDATE events SET seq = 1000000 WHERE seq = 3", ()), ("UPDATE events SET seq = 3 WHERE seq = 4", ()),
           ("UPDATE events SET seq = 4 WHERE seq = 1000000", ()))
    assert verify_fails_at(moved, 3, "hash does not match the stored bytes")


def _copy_compact(source: Path, target: Path) -> None:
    """A new compact home holding the source's events (by export and import)."""
    out = target.parent / f"{target.name}.jsonl"
    export(source, out)
    assert cli("init", "--rows", "compact", home=target).returncode == 0
    assert cli("import", out, home=target).returncode == 0


def test_a_text_home_keeps_its_rows_and_migrate_rows_compact_copies_it(homes, tmp_path):
    _, text = homes
    refused = cli("init", "--rows", "compact", home=text)
    assert refused.returncode != 0 and "was made with text rows" in refused.stderr
    assert cli("verify", home=text).returncode == 0
    moved = cli("migrate", "--to", tmp_path / "new", "--rows", "compact", home=text)
    assert moved.returncode == 0, moved.stderr
    new = tmp_path / "new"
    assert stored(new, "SELECT DISTINCT typeof(hash) FROM events") == [("blob",)]
    assert cli("verify", home=new).returncode == 0
    with ledger.open_ledger(new, readonly=True) as led, ledger.open_ledger(text, readonly=True) as old:
        [migrated] = led.read(types=["store.migrated"])
        assert migrated.data["rows"] == "compact"
        head = old.head()
        assert [e.line() for e in led.read(to_seq=head.seq)] == [e.line() for e in old.read()]
    # Appends after the migration land in compact rows and the home still verifies.
    assert cli("note", "--new-stream", "case:n", "after", home=new).returncode == 0
    assert cli("verify", home=new).returncode == 0


def test_the_row_codec_round_trips_any_cell_and_keeps_text_that_is_not_lowercase_hex(tmp_path):
    first = (1, "Not-Hex-Id", "case:a", 1, "note.added", 1, '{"text":"é\\n"}', "{}", "AB" * 32, "0f" * 32)
    packed = pack_row(first)
    assert packed[1] == "Not-Hex-Id" and packed[8] == "AB" * 32 and packed[9] == bytes.fromhex("0f" * 32)
    assert unpack_row(packed) == first and unpack_row(first) == first
    later = (7, "ab" * 16, "case:a", 2, "note.added", 1, '{"text":"x"}', '{"run":"r"}', "cd" * 32, "0f" * 32)
    packed = pack_row(later)
    assert packed[8] == b"" and unpack_row(packed) == later[:8] + ("",) + later[9:]   # read from the row before
    refused = cli("init", "--rows", "compact", home=tmp_path / "x.jsonl")
    assert refused.returncode != 0 and "compact rows are a form of ledger.db" in refused.stderr
