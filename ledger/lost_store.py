"""A home whose ledger.db lost its events while its mirror kept them: refused on open, never read as empty.

The mirror (``events.jsonl`` or ``events.jsonl.gz``) is written only after SQLite committed, so a
mirror with bytes in it beside a ``ledger.db`` that holds no event (a 0-byte file, a file deleted
and made again, another home's empty ledger.db copied in) means the store lost the home's
history. Opened as it is, every command read the home as empty (``status`` said 0 cases,
``report`` rewrote the reports as empty, ``ingest`` started a second chain at seq 1 beside the
mirror's); only ``verify`` noticed. Now the open stops, naming both files and the way back, and
changes nothing. A new home (no event in either file) opens as before.
"""

from __future__ import annotations

import os
import sqlite3

from evalledger.ledger.envelope import EnvelopeError, line_seq
from evalledger.ledger.gz_members import is_gz_mirror
from evalledger.ledger.mirror import read_tail
from evalledger.ledger.persistence import LedgerDamaged


def refuse_if_lost(db_path: str, mirror_path: str, conn: sqlite3.Connection | None = None) -> None:
    """Raise LedgerDamaged when the store at ``db_path`` holds no event while its mirror holds some.

    ``conn``: a connection to the store, read to tell whether it holds an event; without one the
    file itself is looked at (missing or 0 bytes: no event; anything else is left to the caller,
    who asks again with a connection). Nothing is written either way."""
    size = _size(mirror_path)
    if not size:
        return
    if conn is None:
        if _size(db_path):
            return
    elif _holds_an_event(conn):
        return
    raise LedgerDamaged(_message(db_path, mirror_path, size))


def _size(path: str) -> int:
    """The file's size in bytes (0 when it does not exist)."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _holds_an_event(conn: sqlite3.Connection) -> bool:
    """True when the store's ``events`` table exists and has a row."""
    has_table = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'").fetchone()
    return bool(has_table) and conn.execute("SELECT 1 FROM events LIMIT 1").fetchone() is not None


def _message(db_path: str, mirror_path: str, size: int) -> str:
    """What the refusal says: both files, what happened, that nothing changed, and what to run."""
    last = _last_seq(mirror_path)
    held = f"events up to seq {last}" if last else "events"
    state = "is missing" if not os.path.exists(db_path) else "holds no events"
    return (f"{db_path} {state}, but its mirror {mirror_path} holds {held} ({size:,} bytes): the SQLite "
            "store lost the home's history (emptied, deleted or replaced), and reading it would show an "
            "empty home; nothing was changed. Rebuild the home from the mirror with 'evalledger --home NEW "
            f"import {mirror_path}' and use NEW (or put back a copy of ledger.db)")


def _last_seq(mirror_path: str) -> int | None:
    """The seq of the mirror's last line (a plain mirror only; None when it cannot be told)."""
    if is_gz_mirror(mirror_path):
        return None
    try:
        line, _, _ = read_tail(mirror_path)
        return line_seq(line) if line else None
    except (OSError, EnvelopeError, ValueError):
        return None
