"""Reads of a SQLite store that keeps no blob table.

A store made before the blob store has no ``blobs`` table and its events hold no reference: they
read as stored. A store whose table was dropped looks the same from its schema, but some of its
events refer to blobs it no longer has; read as stored, their references would reach the read
models, reports and exports as if they were the payload. So every event read from such a store is
looked at (the same cheap substring test a blob store makes), and the first one that refers to a
blob stops the read with a BlobError naming the store, the event and the blob, and pointing at
``evalledger verify`` (which names the first seq affected, as it always did).
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from evalledger.ledger.blobs import PREFIX, BlobError, has_markers, raw_refs
from evalledger.ledger.envelope import EnvelopeError, Event


class NoBlobTable:
    """The reads of a store without a blob table: events pass as stored, unless one refers to a blob."""

    def __init__(self, path: str):
        self.where = f"{path} (table blobs, which this store lacks: dropped?)"

    def refuse(self, data: Any, event: str) -> None:
        """Raise BlobError when stored ``data`` (of ``event``, e.g. ``seq 12``) refers to a blob."""
        if not isinstance(data, (str, bytes)) or not has_markers(data):
            return
        try:
            keys = raw_refs(data)
        except (EnvelopeError, ValueError):   # not JSON: the read that decodes it names that damage
            return
        if keys:
            raise BlobError(f"{self.where}: {event} refers to blob {PREFIX}{keys[0]}, which is missing: the "
                            "store was damaged and that event cannot be read whole ('evalledger verify' "
                            "names the first event affected)")

    def row_event(self, *row: Any) -> Event:
        """An Event from a row of stored columns (seq first, data seventh), as ``BlobReader.row_event``."""
        self.refuse(row[6], f"seq {row[0]}")
        return Event(*row)

    def rows(self, rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
        """Rows of stored columns unchanged, refusing the first that refers to a blob."""
        for row in rows:
            self.refuse(row[6], f"seq {row[0]}")
            yield row

    def scan_rows(self, rows: Iterable[Any]) -> Iterator[Any]:
        """A scan's rows (type, id, stream, version, schema, data, ...) unchanged, refusing the
        first that refers to a blob (named by its type and id: a scan does not read the seq)."""
        for row in rows:
            self.refuse(row[5], f"the {row[0]} event {row[1]}")
            yield row
