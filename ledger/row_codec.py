"""Compact rows: how a home made with ``--rows compact`` stores an event in SQLite's ``events`` table.

The event itself does not change: its canonical bytes, its hash chain, its JSONL line (mirror,
export, verify) are exactly those of a plain row. Only the cells differ: ``data`` and ``meta`` are
raw deflate streams (level 1) primed with a fixed dictionary, stored as BLOB; ``id``, ``prev_hash``
and ``hash`` are their raw bytes (BLOB) rather than hex text. SQLite keeps each cell's type, so a
cell stored as TEXT (a plain row, a row someone inserted by hand) reads as it is: every cell is
decoded on its own, and a home mixes both forms safely.

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


def compress(text: str) -> bytes:
    """``text`` (canonical JSON) as a raw deflate stream primed with the dictionary."""
    packer = zlib.compressobj(1, zlib.DEFLATED, _WBITS, _MEM_LEVEL, zlib.Z_DEFAULT_STRATEGY, ZDICT_1)
    return packer.compress(text.encode()) + packer.flush()


def text_of(cell: Any) -> str:
    """A data or meta cell as text: a BLOB is inflated, TEXT is as stored."""
    if isinstance(cell, bytes):
        return zlib.decompressobj(_WBITS, ZDICT_1).decompress(cell).decode()
    return cell  # type: ignore[no-any-return]


def bytes_of(cell: Any) -> bytes:
    """A data or meta cell as UTF-8 bytes (what a fold reads)."""
    if isinstance(cell, bytes):
        return zlib.decompressobj(_WBITS, ZDICT_1).decompress(cell)
    return cell.encode() if isinstance(cell, str) else bytes(cell)


def raw_hex(value: str) -> bytes | str:
    """A hex id or hash as its raw bytes; any other text (an id that is not lowercase hex) as is."""
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        return value
    return raw if raw.hex() == value else value


def hex_of(cell: Any) -> str:
    """An id or hash cell as hex text: a BLOB is its raw bytes, TEXT is as stored."""
    return cell.hex() if isinstance(cell, bytes) else str(cell)


def pack_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row of ``COLUMNS`` (seq, id, stream, version, type, schema, data, meta, prev_hash, hash) in
    the compact form."""
    seq, id, stream, version, type, schema, data, meta, prev_hash, hash = row
    return (seq, raw_hex(id), stream, version, type, schema, compress(data), compress(meta),
            raw_hex(prev_hash), raw_hex(hash))


def unpack_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A stored row of ``COLUMNS`` in the plain form (hex and JSON text), whatever form its cells have."""
    seq, id, stream, version, type, schema, data, meta, prev_hash, hash = row
    return (seq, hex_of(id), stream, version, type, schema, text_of(data), text_of(meta),
            hex_of(prev_hash), hex_of(hash))


def is_compact(conn: sqlite3.Connection) -> bool:
    """True when the store was made with compact rows (its ``event_rows`` table names the form)."""
    try:
        row = conn.execute("SELECT form FROM event_rows").fetchone()
    except sqlite3.OperationalError:   # no such table: a store made with text rows
        return False
    return row is not None and row[0] == COMPACT_FORM


def mark_compact(conn: sqlite3.Connection) -> None:
    """Record in a new store that its rows are written in the compact form."""
    conn.executescript(FORM_SCHEMA)
    if conn.execute("SELECT 1 FROM event_rows").fetchone() is None:
        conn.execute("INSERT INTO event_rows (form) VALUES (?)", (COMPACT_FORM,))
