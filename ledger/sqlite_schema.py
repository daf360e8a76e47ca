"""The SQLite layout of the ledger: the ``events``, ``tracking`` and ``merkle`` tables, how rows map to
events and lines, and how a connection is opened (WAL, durability, read-only)."""

from __future__ import annotations

import os
import sqlite3
from urllib.parse import quote

from evalledger.ledger.envelope import Event, canonical_bytes, line_bytes
from evalledger.ledger.persistence import DiskFull, LedgerDamaged, LedgerError

#: a row of ``COLUMNS``: seq, id, stream, version, type, schema, data, meta, prev_hash, hash
Row = tuple[int, str, str, int, str, int, str, str, str, str]

COLUMNS = "seq, id, stream, version, type, schema, data, meta, prev_hash, hash"
INSERT = ("INSERT INTO events (seq, id, stream, version, type, schema, data, meta, prev_hash, hash) "
          "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    stream TEXT NOT NULL,
    version INTEGER NOT NULL,
    type TEXT NOT NULL,
    schema INTEGER NOT NULL,
    data TEXT NOT NULL,
    meta TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    UNIQUE (stream, version)
);
CREATE INDEX IF NOT EXISTS events_type_seq ON events (type, seq);
CREATE TRIGGER IF NOT EXISTS events_refuse_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'evalledger events are immutable: UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS events_refuse_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'evalledger events are immutable: DELETE refused'); END;
CREATE TABLE IF NOT EXISTS tracking (
    name TEXT PRIMARY KEY,
    position INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS merkle (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    size INTEGER NOT NULL,
    frontier BLOB NOT NULL,
    built TEXT NOT NULL
);
"""
# The one row of ``merkle``: the RFC 6962 tree over the event hashes (leaf count, frontier
# hashes), written in the transaction of every append; ``built`` says how the row came to be.
UPSERT_TREE = ("INSERT INTO merkle (id, size, frontier, built) VALUES (1, ?, ?, ?) "
               "ON CONFLICT(id) DO UPDATE SET size = excluded.size, frontier = excluded.frontier")
TRIGGERS = ("events_refuse_update", "events_refuse_delete")
# The blob store (ledger/blobs.py): made with a new store (or by ``evalledger migrate``), never added
# to a store that already holds events, so an old home reads exactly as it was written.
BLOB_SCHEMA = """
CREATE TABLE IF NOT EXISTS blobs (
    key BLOB PRIMARY KEY,
    data BLOB NOT NULL
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS blobs_refuse_update BEFORE UPDATE ON blobs
BEGIN SELECT RAISE(ABORT, 'evalledger blobs are immutable: UPDATE refused'); END;
CREATE TRIGGER IF NOT EXISTS blobs_refuse_delete BEFORE DELETE ON blobs
BEGIN SELECT RAISE(ABORT, 'evalledger blobs are immutable: DELETE refused'); END;
"""
INSERT_BLOB = "INSERT OR IGNORE INTO blobs (key, data) VALUES (?, ?)"
SELECT_BLOB = "SELECT CAST(data AS BLOB) FROM blobs WHERE key = ?"   # bytes, whatever was written there
#: the blobs of many keys in one query (``%s``: that many ``?``); at most this many keys a query,
#: under SQLite's oldest limit on parameters (999)
SELECT_BLOBS = "SELECT key, CAST(data AS BLOB) FROM blobs WHERE key IN (%s)"
BLOBS_A_QUERY = 500


def has_blob_table(conn: sqlite3.Connection) -> bool:
    """True when the store keeps a blob table (it was made with the blob store)."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'blobs'").fetchone() is not None



def row_event(row: Row) -> Event:
    """An Event from a row of ``COLUMNS``."""
    return Event(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], row[9])


def row_line(row: Row) -> bytes:
    """The JSONL line of a row of ``COLUMNS``, exactly as the mirror and export hold it."""
    return line_bytes(canonical_bytes(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7]),
                      row[8], row[9])


# Pages the write-ahead log grows to before a commit copies them into the database (SQLite's
# default is 1,000). An append dirties pages of the id index all over the file, and a commit
# that checkpoints also syncs: ten times fewer checkpoints write each hot page once where it
# wrote it ten times, and sync ten times less (a checkpoint was a third of a run's COMMIT CPU).
# The log is removed when the last connection closes; at most this many pages (40 MB) stay.
WAL_AUTOCHECKPOINT = 10_000


def connect(path: str, durability: str = "normal", readonly: bool = False) -> sqlite3.Connection:
    """Open a SQLite connection in autocommit mode with WAL and the requested durability."""
    if durability not in ("normal", "full"):
        raise LedgerError(f"durability must be 'normal' or 'full', not {durability!r}")
    if readonly:
        conn = _connect_readonly(path, "mode=ro")
    else:
        conn = sqlite3.connect(path, isolation_level=None, timeout=60, check_same_thread=False)
    try:
        try:
            conn.execute("PRAGMA schema_version")  # reads the header now: a damaged file fails here, by name
        except sqlite3.OperationalError:
            if not (readonly and _can_read_immutable(path)):
                raise
            conn.close()
            conn = _connect_readonly(path, "immutable=1")
            conn.execute("PRAGMA schema_version")
        if not readonly:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {durability.upper()}")
            conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT}")
    except sqlite3.DatabaseError as exc:
        conn.close()
        free = _free_bytes(path)
        if free is not None and free < NEARLY_FULL_BYTES:
            # Opening a WAL database writes its -shm index (32 KiB); with no room SQLite says only
            # "disk I/O error", which must not send anyone to rebuild a home that is intact.
            raise DiskFull(f"{path}: cannot be opened: the disk is full ({exc}; {free} bytes free); nothing "
                           "was changed: free space and run the command again", str(exc)) from None
        raise damaged(path, exc) from None
    conn.execute("PRAGMA busy_timeout = 60000")
    return conn


# SQLite's primary result codes that mean the file itself is bad, not busy, locked or full.
DAMAGE_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def is_damage(exc: sqlite3.Error) -> bool:
    """True when ``exc`` says the database file is damaged (malformed, or no database at all)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in DAMAGE_CODES


def damaged(path: str, exc: sqlite3.Error) -> LedgerDamaged:
    """The error an open of the damaged store ``path`` stops with: the file, SQLite's reason, and
    the way out (the mirror holds every event)."""
    return LedgerDamaged(f"{path}: cannot be read as an SQLite database ({exc}); a home's events.jsonl "
                         "(or events.jsonl.gz) mirror can be imported into a new home ('evalledger --home NEW import FILE')")


# Below this much free space an open that fails is put down to the disk, not to the file.
NEARLY_FULL_BYTES = 1 << 20


def _free_bytes(path: str) -> int | None:
    """Bytes an unprivileged writer may still use on the file system holding ``path``; None if
    that cannot be told, or it is mounted read-only (which may count 0 free without being full)."""
    try:
        st = os.statvfs(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return None
    return None if st.f_flag & os.ST_RDONLY else st.f_bavail * st.f_frsize


def _connect_readonly(path: str, flags: str) -> sqlite3.Connection:
    """A read-only connection by URI (quoted: '?', '#' and '%' in a directory name are not URI syntax)."""
    return sqlite3.connect(f"file:{quote(os.path.abspath(path))}?{flags}", uri=True, isolation_level=None,
                           timeout=60, check_same_thread=False)


def _can_read_immutable(path: str) -> bool:
    """True when a read-only open failed because the home cannot be written (a read-only mount, a
    folder we may not write) and the database holds everything: no write-ahead log is left over.

    A WAL reader must create the ``-shm`` file beside the database, which such a home refuses;
    ``immutable=1`` reads without it, and is exact when nothing can write there and the ``-wal``
    file, which an immutable open would ignore, is absent or empty.
    """
    folder = os.path.dirname(os.path.abspath(path))
    if os.access(folder, os.W_OK) and not _read_only_mount(folder):
        return False
    try:
        return os.path.getsize(path + "-wal") == 0
    except FileNotFoundError:
        return True


def _read_only_mount(folder: str) -> bool:
    """True when ``folder`` is on a file system mounted read-only."""
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False
