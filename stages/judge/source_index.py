"""The recorded answers of a replay source, found by request hash, with memory that does not grow
with the source.

A replay asks its source, for every judge request, the first recorded success of that request
(``RecordedCalls.replayed``). Holding every recorded call and its answer in memory made a replay
of 100,000 cases need a gigabyte; ``SourceIndex`` keeps them in a private temporary SQLite file
instead (deleted when the index is closed or collected), and the memory a replay needs is the
page cache of that file, a few megabytes, whatever the size of the source.

What it keeps of each first success is the event's stored data without the request and what was
sent and received raw (a replay never reads them), blob references left in place; a lookup
decodes that one answer and resolves its references. Only the (backend, model) pairs that answered each role
stay in memory: a handful.

The index is caught up from the source before a lookup that misses, like ``CallIndex``: events
appended to the source meanwhile (by anyone) are found too.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from typing import Any

import orjson

from evalledger.ledger import canonical_json, decode_json
from evalledger.stages.judge.recording import _NOT_KEPT, CALL_EVENT, KeptAnswer, Recorded

# Rows written to the temporary file in one statement while the index is built.
_FLUSH_EVERY = 2000
# The temporary file's page cache, in KiB (SQLite's negative cache_size): the memory it may use.
_CACHE_KIB = 8192


class SourceIndex:
    """First recorded success by request hash, and the identities that answered each role, of one
    replay source, kept in a temporary file rather than in memory."""

    def __init__(self, led: Any):
        self.led = led
        self.last_seq = 0
        self.identities: dict[str, set[tuple[str, str | None]]] = {}
        self.lock = threading.Lock()
        # "": a private temporary database on disk, which SQLite deletes when it is closed.
        self._db = sqlite3.connect("", check_same_thread=False, isolation_level=None)
        self._db.execute(f"PRAGMA cache_size = -{_CACHE_KIB}")
        self._db.execute("PRAGMA journal_mode = OFF")
        self._db.execute("PRAGMA synchronous = OFF")
        self._db.execute("CREATE TABLE answers (hash TEXT PRIMARY KEY, id TEXT, stream TEXT, backend TEXT, "
                         "model TEXT, data BLOB) WITHOUT ROWID")
        self._pending: list[tuple[Any, ...]] = []
        self._pending_hashes: set[str] = set()
        self._closer = weakref.finalize(self, self._db.close)

    def close(self) -> None:
        """Close (and so delete) the temporary file."""
        self._closer()

    def catch_up(self) -> None:
        """Fold the source's ``judge.called`` events appended since the last look (by anyone)."""
        with self.lock:
            head = self.led.head().seq
            if head <= self.last_seq:
                return
            # The stored rows with references in place: the index reads small fields only.
            for row in self.led.scan(self.last_seq + 1, head, (CALL_EVENT,), resolve=False):
                self._fold(row)
                if len(self._pending) >= _FLUSH_EVERY:
                    self._flush()
            self._flush()
            self.last_seq = head

    def _fold(self, row: Any) -> None:
        """Note the identity of one stored call and keep it when it is its request's first success."""
        raw = row.data
        data = decode_json(raw) if isinstance(raw, (bytes, str)) else raw
        backend, model = data.get("backend"), data.get("model")
        self.identities.setdefault(data.get("role"), set()).add((data.get("source_backend") or backend, model))
        hash = data.get("request_hash")
        if data.get("error") is not None or data.get("degraded") or hash in self._pending_hashes:
            return
        kept = {k: v for k, v in data.items() if k not in _NOT_KEPT}   # references left in place
        self._pending.append((hash, row.id, row.stream, backend, model, _encode(kept)))
        self._pending_hashes.add(hash)

    def _flush(self) -> None:
        """Write the pending successes; a request already kept keeps its first (earlier) success."""
        if self._pending:
            self._db.executemany("INSERT OR IGNORE INTO answers VALUES (?, ?, ?, ?, ?, ?)", self._pending)
        self._pending, self._pending_hashes = [], set()

    def success(self, hash: str) -> Recorded | None:
        """The first recorded success of this request with its answer, looking at new events on a miss."""
        found = self._lookup(hash)
        if found is None:
            self.catch_up()
            found = self._lookup(hash)
        return found

    def _lookup(self, hash: str) -> Recorded | None:
        """The kept success of ``hash`` (None when there is none yet), its answer made whole."""
        with self.lock:
            row = self._db.execute("SELECT id, stream, backend, model, data FROM answers WHERE hash = ?",
                                   (hash,)).fetchone()
        if row is None:
            return None
        id, stream, backend, model, stored = row
        return Recorded(id, stream, backend, model, KeptAnswer(id, stream, self.led.join(decode_json(stored))))

    def seen_identities(self, role: str) -> list[tuple[str, str | None]]:
        """Every (backend, model) that answered ``role`` in the source, sorted."""
        self.catch_up()
        return sorted(self.identities.get(role, ()), key=lambda i: (i[0] or "", i[1] or ""))


def _encode(value: dict[str, Any]) -> bytes:
    """JSON bytes of a kept answer that ``decode_json`` reads back exactly (orjson, else the
    standard library for integers beyond 64 bits)."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return canonical_json(value)


_SOURCES: "weakref.WeakKeyDictionary[Any, SourceIndex]" = weakref.WeakKeyDictionary()
_SOURCES_LOCK = threading.Lock()


def source_index_for(led: Any) -> SourceIndex:
    """The one SourceIndex of a replay source (shared by every port answering from it), caught up."""
    with _SOURCES_LOCK:
        index = _SOURCES.get(led)
        if index is None:
            index = _SOURCES[led] = SourceIndex(led)
    index.catch_up()
    return index
