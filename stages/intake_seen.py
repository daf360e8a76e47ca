"""Which (question, model) pairs a streamed file has answered, on disk (issue 15: flat ingest memory).

A streamed intake refuses a file where a model answers a question twice; remembering every pair
in a Python set costs ~70 bytes a response. ``SeenPairs`` keeps an 8-byte hash of each pair in a
temporary SQLite table instead, checked a batch at a time. Two pairs sharing a hash are taken for
a repeat: the caller then reads the file whole, which tells a real repeat from a collision.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from types import TracebackType

from evalledger.ledger import canonical_json
from evalledger.stages.formats.stream import NotStreamable

_BATCH = 1000      # pairs checked at a time


class SeenPairs:
    """A set of (question id, model) pairs in a SQLite file in ``folder``; a context manager."""

    def __init__(self, folder: Path) -> None:
        path = folder / "seen.db"
        path.unlink(missing_ok=True)     # an earlier reader's, in the same spill folder: start empty
        self._db = sqlite3.connect(path, isolation_level=None)
        # a scratch file, thrown away with its folder: no journal, no syncs
        self._db.execute("PRAGMA journal_mode=OFF")
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute("CREATE TABLE seen (k INTEGER PRIMARY KEY)")
        self._pending: list[tuple[int]] = []

    def add(self, question_id: str, model: str | None) -> None:
        """Remember this pair; NotStreamable (now or at a later call) when it was seen before."""
        digest = hashlib.blake2b(canonical_json([question_id, model]), digest_size=8).digest()
        self._pending.append((int.from_bytes(digest, "big", signed=True),))
        if len(self._pending) >= _BATCH:
            self._flush()

    def _flush(self) -> None:
        """Insert the batch; a repeated key (seen, or twice in the batch) is a repeat."""
        pending, self._pending = self._pending, []
        self._db.execute("BEGIN")      # one transaction a batch, not one a row
        try:
            self._db.executemany("INSERT INTO seen VALUES (?)", pending)
        except sqlite3.IntegrityError:
            raise NotStreamable("a model may answer a question twice") from None
        finally:
            if self._db.in_transaction:
                self._db.execute("COMMIT")

    def __enter__(self) -> SeenPairs:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        """Check the last batch (when nothing failed before it), then close the file."""
        try:
            if kind is None:
                self._flush()
        finally:
            self._db.close()
