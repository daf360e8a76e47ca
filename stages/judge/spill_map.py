"""A mapping whose recent entries stay in memory and the rest go to a private temporary SQLite
file, so an index with one entry per judge call keeps memory flat however long the run.

``CallIndex`` keeps one entry per recorded success and one attempt count per call: about 1.3 KB
a case in memory before. ``SpillMap`` holds at most ``limit`` entries in a dict (the hot path:
calls of the cases in flight are looked up right after they are recorded); past that, the dict
is written to the file in one statement and emptied. A lookup that misses the dict reads the
file (a primary-key lookup). The file is SQLite's "" database: deleted when it is closed or the
map is collected. Keys are strings or tuples of strings and integers; values are pickled.
"""

from __future__ import annotations

import pickle
import sqlite3
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import orjson

# Entries kept in memory before they are written to the file (the bound on the map's memory).
SPILL_AT = 2_000
# The temporary file's page cache, in KiB (SQLite's negative cache_size): the memory it may use.
_CACHE_KIB = 4096
_MISSING = object()


class SpillMap:
    """A dict-like map (get, set, ``in``, keys, values, len) bounded in memory by a temporary file."""

    def __init__(self, limit: int | None = None):
        self.limit = limit or SPILL_AT
        self.recent: dict[Any, Any] = {}
        self._db: sqlite3.Connection | None = None   # opened at the first spill only
        self._spilled = 0
        self._lock = threading.Lock()
        self._closer: Any = None

    def _file(self) -> sqlite3.Connection:
        """The temporary file, created on first use."""
        if self._db is None:
            db = sqlite3.connect("", check_same_thread=False, isolation_level=None)
            db.execute(f"PRAGMA cache_size = -{_CACHE_KIB}")
            db.execute("PRAGMA journal_mode = OFF")
            db.execute("PRAGMA synchronous = OFF")
            db.execute("CREATE TABLE entries (key BLOB PRIMARY KEY, value BLOB) WITHOUT ROWID")
            self._db = db
            self._closer = weakref.finalize(self, db.close)
        return self._db

    def get(self, key: Any, default: Any = None) -> Any:
        """The value of ``key`` (memory first, then the file), else ``default``."""
        value = self.recent.get(key, _MISSING)
        if value is not _MISSING:
            return value
        if not self._spilled:
            return default
        with self._lock:
            row = self._file().execute("SELECT value FROM entries WHERE key = ?", (_key(key),)).fetchone()
        return default if row is None else pickle.loads(row[0])

    def __contains__(self, key: Any) -> bool:
        return self.get(key, _MISSING) is not _MISSING

    def __setitem__(self, key: Any, value: Any) -> None:
        self.recent[key] = value
        if len(self.recent) >= self.limit:
            self._spill()

    def _spill(self) -> None:
        """Write the in-memory entries to the file (replacing older values of the same keys) and forget them."""
        rows = [(_key(k), pickle.dumps(v, pickle.HIGHEST_PROTOCOL)) for k, v in self.recent.items()]
        with self._lock:
            db = self._file()
            db.execute("BEGIN")
            db.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?)", rows)
            db.execute("COMMIT")
            self._spilled = db.execute("SELECT count(*) FROM entries").fetchone()[0]
        self.recent = {}

    def items(self) -> Iterator[tuple[Any, Any]]:
        """Every (key, value), the file's first (those in memory override them)."""
        if self._spilled:
            with self._lock:
                rows = self._file().execute("SELECT key, value FROM entries").fetchall()
            for raw, value in rows:
                key = _unkey(raw)
                if key not in self.recent:
                    yield key, pickle.loads(value)
        yield from list(self.recent.items())

    def keys(self) -> set[Any]:
        """Every key."""
        return {k for k, _ in self.items()}

    def values(self) -> list[Any]:
        """Every value."""
        return [v for _, v in self.items()]

    def __len__(self) -> int:
        return len(self.keys())

    def close(self) -> None:
        """Close (and so delete) the temporary file."""
        if self._closer is not None:
            self._closer()


def _key(key: Any) -> bytes:
    """A key as bytes the file can index (a tuple as its JSON array)."""
    return orjson.dumps(key)


def _unkey(raw: bytes) -> Any:
    """A key back from its bytes (a JSON array back to a tuple)."""
    value = orjson.loads(raw)
    return tuple(value) if isinstance(value, list) else value
