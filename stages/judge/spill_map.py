"""A mapping whose recent entries stay in memory and the rest go to a private temporary SQLite
file, so an index with one entry per judge call keeps memory flat however long the run.

``CallIndex`` keeps one entry per recorded success and one attempt count per call: about 1.3 KB
a case in memory before. ``SpillMap`` holds at most ``limit`` entries in a dict (the hot path:
calls of the cases in flight are looked up right after they are recorded); past that, the dict
is written to the file in one statement and emptied. A lookup that misses the dict reads the
file (a primary-key lookup), unless the map's filter of spilled keys (``KeyFilter``) says the key
was never written there: most lookups of a run are of calls never made before, and a lookup in
the file cost more than the rest of the index. The file is SQLite's "" database: deleted when it
is closed or the map is collected. Keys are strings or tuples of strings and integers; values are
pickled.
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
# The filter's bits per key it is sized for (three probes a key): 1 lookup in 200 to 1 in 30 of a
# key never spilled still reads the file (a false positive costs one lookup, never a wrong answer).
_BITS_PER_KEY = 16


class KeyFilter:
    """A Bloom filter over the keys written to the file: ``might_hold(key)`` is False only for a
    key that was never added. Sized for ``capacity`` keys; ``SpillMap`` builds one twice as large
    from the file when more were spilled (at most 0.4 MB for 100,000 keys in the file).

    It uses Python's ``hash``, which is stable within the process, as the map itself is.
    """

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._bits = _BITS_PER_KEY * capacity
        self._array = bytearray((self._bits + 7) // 8)

    def _positions(self, key: Any) -> tuple[int, int, int]:
        """The key's bits: three slices of its 64-bit hash, each taken modulo the filter's size
        (written out, not a loop: a lookup runs for every call a run makes)."""
        h = hash(key) & 0xFFFF_FFFF_FFFF_FFFF
        bits = self._bits
        return h % bits, (h >> 21) % bits, (h >> 42 ^ h) % bits

    def add(self, key: Any) -> None:
        """Note ``key`` as written to the file."""
        array = self._array
        for position in self._positions(key):
            array[position >> 3] |= 1 << (position & 7)

    def might_hold(self, key: Any) -> bool:
        """False when ``key`` was certainly never added."""
        array = self._array
        a, b, c = self._positions(key)
        return bool(array[a >> 3] & (1 << (a & 7)) and array[b >> 3] & (1 << (b & 7))
                    and array[c >> 3] & (1 << (c & 7)))


class SpillMap:
    """A dict-like map (get, set, ``in``, keys, values, len) bounded in memory by a temporary file."""

    def __init__(self, limit: int | None = None):
        self.limit = limit or SPILL_AT
        self.recent: dict[Any, Any] = {}
        self._db: sqlite3.Connection | None = None   # opened at the first spill only
        self._spilled = 0
        self._filter: KeyFilter | None = None   # the keys in the file (made at the first spill)
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
        keys = self._filter   # set before _spilled, and replaced whole: a reader never sees half of it
        if not self._spilled or keys is None or not keys.might_hold(key):
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
            spilled = db.execute("SELECT count(*) FROM entries").fetchone()[0]
            self._note_spilled(db, spilled)
            # Counted only once the filter holds the keys: a get() in another thread (the writer's)
            # that saw a count and no filter yet raised AttributeError, and failed a case.
            self._spilled = spilled
        self.recent = {}   # after the filter holds these keys: a key is always in one or the other

    def _note_spilled(self, db: sqlite3.Connection, spilled: int) -> None:
        """Add the keys just written to the filter, or build a filter for twice the keys from every
        key in the file when the file has outgrown it (each key is read again O(1) times in all)."""
        current = self._filter
        if current is not None and spilled <= current.capacity:
            for key in self.recent:
                current.add(key)
            return
        bigger = KeyFilter(max(4 * self.limit, 2 * spilled))
        for (raw,) in db.execute("SELECT key FROM entries"):
            bigger.add(_unkey(raw))
        self._filter = bigger

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
