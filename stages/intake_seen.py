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


def _scratch(path: Path, table: str) -> sqlite3.Connection:
    """A new SQLite file at ``path`` holding the empty ``table`` (its CREATE statement)."""
    path.unlink(missing_ok=True)     # an earlier reader's, in the same spill folder: start empty
    db = sqlite3.connect(path, isolation_level=None)
    # a scratch file, thrown away with its folder: no journal, no syncs
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    db.execute(table)
    return db


class SeenPairs:
    """A set of (question id, model) pairs in a SQLite file in ``folder``; a context manager."""

    def __init__(self, folder: Path) -> None:
        self._db = _scratch(folder / "seen.db", "CREATE TABLE seen (k INTEGER PRIMARY KEY)")
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


class FirstAnswers:
    """Where each (question id, model) pair of a file was first answered, in a SQLite file in
    ``folder`` (the pair itself is the key: no two pairs are taken for one); a context manager.
    What ``formats.native`` names a repeat by, for a file too large to hold every pair."""

    def __init__(self, folder: Path) -> None:
        self._db = _scratch(folder / "answers.db",
                            "CREATE TABLE first (pair BLOB PRIMARY KEY, place TEXT NOT NULL) WITHOUT ROWID")
        self._db.execute("BEGIN")      # one transaction for the file, not one a row

    def earlier(self, question_id: str, model: str | None, where: str) -> str | None:
        """Where this pair was answered before; None the first time (then ``where`` is kept)."""
        pair = canonical_json([question_id, model])
        row = self._db.execute("SELECT place FROM first WHERE pair = ?", (pair,)).fetchone()
        if row is not None:
            return str(row[0])
        self._db.execute("INSERT INTO first VALUES (?, ?)", (pair, where))
        return None

    def __enter__(self) -> FirstAnswers:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        """Close the file (its folder removes it)."""
        self._db.close()
