"""The SQLite backend: table ``events`` with one column per envelope field, WAL, append-only.

Writers serialise on a lock file beside the database (so the JSONL mirror is written in seq
order) and on ``BEGIN IMMEDIATE``. Triggers refuse UPDATE and DELETE on ``events``.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from contextlib import contextmanager
from typing import Iterable, Iterator

import sqlite_utils

from ledger.envelope import Event, canonical_bytes, line_bytes, split_line, decode_json
from ledger.mirror import Mirror
from ledger.persistence import (
    ConflictError, Head, LedgerError, Prepared, Recorder, chain_start, seal,
)

_COLUMNS = "seq, id, stream, version, type, schema, CAST(data AS BLOB), CAST(meta AS BLOB), prev_hash, hash"
_PAGE = 2000

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
"""


def _row_event(row) -> Event:
    return Event(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], row[9])


def _row_line(row) -> bytes:
    return line_bytes(canonical_bytes(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7]),
                      row[8], row[9])


def connect(path: str, durability: str = "normal") -> sqlite3.Connection:
    """Open a SQLite connection in autocommit mode with WAL and the requested durability."""
    if durability not in ("normal", "full"):
        raise LedgerError(f"durability must be 'normal' or 'full', not {durability!r}")
    conn = sqlite3.connect(path, isolation_level=None, timeout=60, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 60000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {durability.upper()}")
    return conn


class SQLiteRecorder(Recorder):
    """Events in a SQLite file, with an optional JSONL mirror kept in seq order."""

    def __init__(self, path: str, durability: str = "normal", mirror_path: str | None = None,
                 lock_path: str | None = None):
        self.path = path
        self.location = f"{path} (table events)"
        self.conn = connect(path, durability)
        self.db = sqlite_utils.Database(self.conn)
        self._thread_lock = threading.RLock()
        self._lock_path = lock_path or path + ".lock"
        with self._write_lock():
            self.conn.executescript(SCHEMA)
        self.mirror = Mirror(mirror_path, fsync=durability == "full") if mirror_path else None
        if self.mirror:
            with self._write_lock():
                self.mirror.check_and_complete(self)

    @contextmanager
    def _write_lock(self):
        """Serialise writers of this home across threads and processes (the kernel drops it on death)."""
        with self._thread_lock:
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)

    def append(self, batch: list[Prepared], expected: dict[str, int],
               tracking: tuple[str, int] | None = None) -> list[Event]:
        if self.mirror and self.mirror.problem:
            raise LedgerError(f"appends are stopped until the mirror is looked at: {self.mirror.problem}")
        with self._write_lock():
            conn = self.conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                out, new, lines = self._insert(batch, expected)
                if tracking is not None:
                    conn.execute("INSERT INTO tracking (name, position) VALUES (?, ?) "
                                 "ON CONFLICT(name) DO UPDATE SET position = excluded.position", tracking)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            if self.mirror and new:
                self.mirror.append(self, new[0].seq, lines)
        return out

    def _insert(self, batch: list[Prepared], expected: dict[str, int]):
        conn = self.conn
        row = conn.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        seq, prev_hash = chain_start(Head(row[0], row[1]) if row else Head(0, ""))
        out: list[Event] = []
        new: list[Event] = []
        lines: list[bytes] = []
        versions: dict[str, int] = {}
        seen: dict[str, Event] = {}
        for p in batch:
            if p.id in seen:
                out.append(seen[p.id])
                continue
            stored = conn.execute(f"SELECT {_COLUMNS} FROM events WHERE id = ?", (p.id,)).fetchone()
            if stored is not None:
                seen[p.id] = _row_event(stored)
                out.append(seen[p.id])
                continue
            if p.stream not in versions:
                versions[p.stream] = self._version(p.stream)
                want = expected.get(p.stream)
                if want is not None and want != versions[p.stream]:
                    raise ConflictError(f"stream {p.stream!r} is at version {versions[p.stream]}, "
                                        f"expected {want}; nothing was appended")
            versions[p.stream] += 1
            event, canonical = seal(p, seq, versions[p.stream], prev_hash)
            conn.execute("INSERT INTO events (seq, id, stream, version, type, schema, data, meta, "
                         "prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (seq, p.id, p.stream, event.version, p.type, p.schema, p.data.decode("utf-8"),
                          p.meta.decode("utf-8"), prev_hash, event.hash))
            seen[p.id] = event
            out.append(event)
            new.append(event)
            lines.append(line_bytes(canonical, prev_hash, event.hash))
            seq, prev_hash = seq + 1, event.hash
        return out, new, lines

    def _version(self, stream: str) -> int:
        row = self.conn.execute("SELECT MAX(version) FROM events WHERE stream = ?", (stream,)).fetchone()
        return row[0] or 0

    def _pages(self, where: str, params: list, from_seq: int, to_seq: int | None) -> Iterator[tuple]:
        """Rows in seq order, fetched a page at a time so no read transaction stays open."""
        last = from_seq - 1
        bound = " AND seq <= ?" if to_seq is not None else ""
        while True:
            args = [last, *params] + ([to_seq] if to_seq is not None else []) + [_PAGE]
            with self._thread_lock:
                rows = self.conn.execute(
                    f"SELECT {_COLUMNS} FROM events WHERE seq > ?{where}{bound} ORDER BY seq LIMIT ?",
                    args).fetchall()
            yield from rows
            if len(rows) < _PAGE:
                return
            last = rows[-1][0]

    def read(self, from_seq: int = 1, types: Iterable[str] | None = None,
             stream: str | None = None, to_seq: int | None = None) -> Iterator[Event]:
        where, params = "", []
        if types is not None:
            types = list(types)
            where += f" AND type IN ({', '.join('?' * len(types))})"
            params += types
        if stream is not None:
            where += " AND stream = ?"
            params.append(stream)
        for row in self._pages(where, params, from_seq, to_seq):
            yield _row_event(row)

    def head(self) -> Head:
        with self._thread_lock:
            row = self.conn.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        return Head(row[0], row[1]) if row else Head(0, "0" * 64)

    def get(self, id: str) -> Event | None:
        with self._thread_lock:
            row = self.conn.execute(f"SELECT {_COLUMNS} FROM events WHERE id = ?", (id,)).fetchone()
        return _row_event(row) if row else None

    def stream_version(self, stream: str) -> int:
        with self._thread_lock:
            return self._version(stream)

    def lines(self, from_seq: int = 1) -> Iterator[tuple[int, bytes]]:
        for row in self._pages("", [], from_seq, None):
            yield row[0], _row_line(row)

    def rows(self, from_seq: int = 1) -> Iterator[tuple]:
        """Raw rows (seq, id, stream, version, type, schema, data, meta, prev_hash, hash)."""
        return self._pages("", [], from_seq, None)

    def import_lines(self, lines: Iterable[bytes]) -> int:
        with self._write_lock():
            if self.head().seq:
                raise LedgerError(f"{self.location} is not empty; import goes into an empty home only")
            conn = self.conn
            conn.execute("BEGIN IMMEDIATE")
            count = 0
            try:
                for line in lines:
                    canonical, prev_hash, hash = split_line(line)
                    env = decode_json(canonical)
                    data, meta = _embedded(canonical, env)
                    conn.execute("INSERT INTO events (seq, id, stream, version, type, schema, data, meta, "
                                 "prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                 (env["seq"], env["id"], env["stream"], env["version"], env["type"],
                                  env["schema"], data.decode("utf-8"), meta.decode("utf-8"), prev_hash, hash))
                    count += 1
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            if self.mirror:
                self.mirror.check_and_complete(self)
        return count

    def tracking_position(self, name: str) -> int:
        with self._thread_lock:
            row = self.conn.execute("SELECT position FROM tracking WHERE name = ?", (name,)).fetchone()
        return row[0] if row else 0

    def set_tracking(self, name: str, position: int) -> None:
        with self._write_lock():
            self.conn.execute("INSERT INTO tracking (name, position) VALUES (?, ?) ON CONFLICT(name) "
                              "DO UPDATE SET position = excluded.position", (name, position))

    def close(self) -> None:
        with self._thread_lock:
            self.conn.close()


def _embedded(canonical: bytes, env: dict) -> tuple[bytes, bytes]:
    """The exact data and meta bytes inside canonical bytes, checked by re-building the envelope."""
    from ledger.envelope import canonical_json
    data, meta = canonical_json(env["data"]), canonical_json(env["meta"])
    rebuilt = canonical_bytes(env["seq"], env["id"], env["stream"], env["version"], env["type"],
                              env["schema"], data, meta)
    if rebuilt != canonical:
        raise LedgerError(f"seq {env['seq']}: the line is not in canonical form; refusing to import it")
    return data, meta
