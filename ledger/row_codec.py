"""Compact rows: how a home made with ``--rows compact`` stores an event in SQLite's ``events`` table.

The event itself does not change: its canonical bytes, its hash chain, its JSONL line (mirror,
export, verify) are exactly those of a plain row. Only the cells differ: ``meta`` and ``data`` are
deflated together (level 1, primed with a fixed dictionary) into the ``data`` cell, the ``meta``
cell holding the length of meta (a BLOB of two bytes); ``id`` and ``hash`` are their raw bytes rather than hex text; and
``prev_hash`` is left empty past seq 1, read as the hash of the row before (the stored hash covers
it, so a row edited, moved, inserted or deleted still fails verification). SQLite keeps each
cell's type, so a cell stored as TEXT (a plain row, a row someone inserted by hand) reads as it is:
the cells are decoded by their types, and a home may mix both forms.

The dictionary is versioned: ``event_rows`` names the form a home was made with (``compact-1``),
and a later dictionary is a new form beside this one, so rows written with it always read back.
"""

from __future__ import annotations

import sqlite3
import zlib
from typing import Any

#: the rows forms a new home can be made with: ``text`` (hex and JSON text, the default) or ``compact``
ROWS_FORMS = ("text", "compact")
COMPACT_FORM = "compact-1"
FORM_SCHEMA = "CREATE TABLE IF NOT EXISTS event_rows (form TEXT NOT NULL)"
#: what a new store's SQL script adds to say its rows are compact (inside the script that makes it)
COMPACT_SCHEMA = FORM_SCHEMA + f"; INSERT INTO event_rows (form) VALUES ('{COMPACT_FORM}');"
#: ``COLUMNS`` as a compact store is read: an empty prev_hash is the hash of the row before it
COMPACT_COLUMNS = ("seq, id, stream, version, type, schema, data, meta, "
                   "CASE WHEN length(prev_hash) = 0 THEN (SELECT p.hash FROM events AS p "
                   "WHERE p.seq = events.seq - 1) ELSE prev_hash END, hash")

_WBITS = -12   # raw deflate, a 4 KB window: large payload parts live in the blob store
_MEM_LEVEL = 8  # level 9 allocates four times the memory, and its set-up costs more than the event

# The key names of the event catalog's payloads and meta, and their common values, as they appear in
# canonical JSON. Fixed for the form ``compact-1``: changing it would make its rows unreadable.
ZDICT_1 = (
    b'"abstained":"attempt":"attribute":"attributes":"author":"auto_failed":"backend":"band":"bands":"benc'
    b'hmark":"benchmark_name":"blob_types":"case_id":"cases":"causation":"claim_id":"claim_text":"claim_ty'
    b'pe":"claims":"concurrency":"confidence":"config":"config_hash":"configs":"correlation":"cost":"count'
    b'":"counted":"counts":"credit_score":"deep_judgment":"degraded":"detail":"doc_id":"dropped":"embedder'
    b'":"error":"errors":"events":"evidence":"evidence_refs":"excerpts":"expected":"expected_credit_score"'
    b':"expected_zone":"extracted":"facts":"failed":"failure":"field":"fields":"file":"flips":"format":"fo'
    b'rmula":"head":"high":"http_status":"importance":"inferences":"judge":"judged":"justification":"key":'
    b'"kind":"latency_ms":"level":"live":"low":"lowered_to":"max_errors_per_phase":"metrics":"mirror":"mod'
    b'e":"model":"name":"note":"order":"overrides":"part":"passed":"pending":"plan":"primitive":"primitive'
    b'_passed":"question":"question_id":"questions":"raw_reply":"reason":"reasoning":"reasoning_chains":"r'
    b'easons":"recorded_at":"rejected":"rejected_questions":"rejected_traits":"repeat":"repeats":"reply":"'
    b'request":"request_hash":"resolved_from":"response":"responses":"retries":"risk":"risks":"role":"root'
    b'":"rubric_only":"rule":"run":"sampling":"score":"searches":"seeds":"sent":"severity":"sha256":"simil'
    b'arity":"size":"skipped_auto_fail":"source":"source_backend":"source_event":"source_head_hash":"sourc'
    b'e_head_seq":"stage":"stage_version":"status":"step_attempt":"stopped":"stored_cut":"strategy":"subje'
    b'ct":"text":"threshold":"tie":"tracking_position":"trait":"traits":"unrecorded":"unstable":"usage":"v'
    b'alues":"verdict":"verdicts":"warnings":"weight":"where":"zone":nulltruefalse"stage_version":"1"}{"ca'
    b'usation":"","recorded_at":"20Z","stage":"","run":"","config_hash":"'
)


def compress(text: str | bytes) -> bytes:
    """``text`` (canonical JSON) as a raw deflate stream primed with the dictionary."""
    packer = zlib.compressobj(1, zlib.DEFLATED, _WBITS, _MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY, ZDICT_1)
    return packer.compress(text.encode() if isinstance(text, str) else text) + packer.flush()


def inflate(cell: bytes) -> bytes:
    """The bytes a compressed cell holds; a cell that does not inflate (edited by hand) gives a JSON
    object naming the damage, so verify reports the row's hash as not matching and a read fails
    the payload's validation, rather than either stopping at a zlib error."""
    try:
        return zlib.decompressobj(_WBITS, ZDICT_1).decompress(cell)
    except zlib.error as exc:
        return b'{"$undecodable":"compact cell: %s"}' % str(exc).encode()


def text_of(cell: Any) -> str:
    """A data or meta cell as text: a BLOB is inflated, TEXT is as stored."""
    if isinstance(cell, bytes):
        return inflate(cell).decode("utf-8", "replace")
    return str(cell)


def bytes_of(cell: Any) -> bytes:
    """A data or meta cell as UTF-8 bytes (what a fold reads)."""
    if isinstance(cell, bytes):
        return inflate(cell)
    return cell.encode() if isinstance(cell, str) else str(cell).encode()


def payload_cells(data: Any, meta: Any) -> tuple[bytes, bytes]:
    """(data, meta) as UTF-8 bytes from a row's two cells: a BLOB meta cell is the length (big-endian)
    of the meta that opens the data cell's stream (both compressed together; a BLOB, since the
    column's TEXT affinity would turn an integer into text), else each cell holds its own."""
    if isinstance(meta, bytes) and isinstance(data, bytes):
        whole = inflate(data)
        cut = int.from_bytes(meta, "big")
        return whole[cut:], whole[:cut]
    return bytes_of(data), bytes_of(meta)


def raw_hex(value: str) -> bytes | str:
    """A hex id or hash as its raw bytes; any other text (an id that is not lowercase hex) as is."""
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        return value
    return raw if raw.hex() == value else value


def hex_of(cell: Any) -> str:
    """An id or hash cell as hex text: a BLOB is its raw bytes, TEXT is as stored (NULL: no event
    before this one, which verify reports)."""
    if cell is None:
        return ""
    return cell.hex() if isinstance(cell, bytes) else str(cell)


def pack_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row of ``COLUMNS`` (seq, id, stream, version, type, schema, data, meta, prev_hash, hash) in
    the compact form: meta and data deflated together (meta first, its length in the meta cell, as a BLOB),
    ids and hashes raw, and past seq 1 an empty prev_hash, which is the hash of the row before
    (``COMPACT_COLUMNS`` reads it there; the stored hash covers it, so a row moved, inserted or
    deleted still fails verification)."""
    seq, id, stream, version, type, schema, data, meta, prev_hash, hash = row
    meta_bytes = meta.encode()
    return (seq, raw_hex(id), stream, version, type, schema, compress(meta_bytes + data.encode()),
            _length(len(meta_bytes)), raw_hex(prev_hash) if seq == 1 else b"", raw_hex(hash))


def _length(size: int) -> bytes:
    """``size`` in as few big-endian bytes as hold it (meta is 100-300 bytes: two)."""
    return size.to_bytes(max(1, (size.bit_length() + 7) // 8), "big")


def unpack_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A stored row of ``COLUMNS`` in the plain form (hex and JSON text), whatever form its cells have."""
    seq, id, stream, version, type, schema, data, meta, prev_hash, hash = row
    data_bytes, meta_bytes = payload_cells(data, meta)
    return (seq, hex_of(id), stream, version, type, schema, data_bytes.decode("utf-8", "replace"),
            meta_bytes.decode("utf-8", "replace"), hex_of(prev_hash), hex_of(hash))


def is_compact(conn: sqlite3.Connection) -> bool:
    """True when the store was made with compact rows (its ``event_rows`` table names the form)."""
    try:
        row = conn.execute("SELECT form FROM event_rows").fetchone()
    except sqlite3.OperationalError:   # no such table: a store made with text rows
        return False
    return row is not None and row[0] == COMPACT_FORM


def unmarked_packing(conn: sqlite3.Connection) -> int | None:
    """The seq of a packed row (its hash cell a BLOB) at either end of a store that does not say it
    holds compact rows, or None. Only a store made with ``--rows compact`` packs rows, and its
    ``event_rows`` table is the one place that says so: a packed row in a store without it means
    that table was deleted or altered, and reading the rows as text would fail deep in a read.
    The two ends, found by the seq index, cost two lookups however large the store."""
    try:
        row = conn.execute("SELECT MIN(seq) FROM events WHERE typeof(hash) = 'blob' AND seq IN "
                           "((SELECT MIN(seq) FROM events), (SELECT MAX(seq) FROM events))").fetchone()
    except sqlite3.OperationalError:   # no events table yet (a read-only open of an empty file)
        return None
    return row[0] if row else None


