"""Reads of a store that keeps no blob store: a SQLite or PostgreSQL store without its ``blobs``
table, a JSONL ledger without its ``<file>.blobs``.

A store made before the blob store (a JSONL ledger that was never given blobs) keeps no blob
store and its events hold no reference: they read as stored. A store whose table was dropped (or
whose blob file was deleted) looks the same from outside, but some of its events refer to blobs it
no longer has; read as stored, their references would reach the read models, reports and exports
as if they were the payload. So every event read from such a store is looked at (the same cheap
substring test a blob store makes), and the first one that refers to a blob stops the read with a
BlobError naming the store, the event and the blob, and pointing at ``evalledger verify`` (which
names the first seq affected, through ``reader``).

An object in a payload that merely looks like a reference is stored escaped (``{"$lit": ...}``) by
every store, with blobs or without; the reads here give it back unwrapped, as the reads of a store
with blobs do, so what a read returns equals what was appended.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from evalledger.ledger.blob_reader import BlobReader
from evalledger.ledger.blobs import PREFIX, REF, BlobError, has_literal, has_markers, raw_refs, refs, unescape_literals
from evalledger.ledger.envelope import EnvelopeError, Event, canonical_json, decode_json, line_seq

#: bytes read at a time by ``refers_anywhere`` (a few chunks cover a large ledger)
_CHUNK = 1 << 22
_REF_MARK = b'"%s"' % REF.encode()


class NoBlobTable:
    """The reads of a store without its blob store (``kept_in``: the table or file that held it;
    ``lost``: how it was likely lost): events pass as stored, unless one refers to a blob."""

    def __init__(self, path: str, kept_in: str = "table blobs", lost: str = "dropped"):
        self.where = f"{path} ({kept_in}, which this store lacks: {lost}?)"

    def refuse(self, data: Any, event: str) -> None:
        """Raise BlobError when stored ``data`` (of ``event``, e.g. ``seq 12``) refers to a blob."""
        if not isinstance(data, (str, bytes)) or not has_markers(data):
            return
        try:
            keys = raw_refs(data)
        except (EnvelopeError, ValueError):   # not JSON: the read that decodes it names that damage
            return
        if keys:
            raise self.lost(event, keys[0])

    def lost(self, event: str, key: str) -> BlobError:
        """The error that stops a read at ``event``, which refers to blob ``key`` (hex)."""
        return BlobError(f"{self.where}: {event} refers to blob {PREFIX}{key}, which is missing: the store "
                         "was damaged and that event cannot be read whole ('evalledger verify' names the "
                         "first event affected)")

    def reader(self) -> BlobReader:
        """A blob reader that finds no blob, for verify (``checked_blobs``): each event that refers
        to one is reported at its seq, the blob missing from this store."""
        return BlobReader(lambda key: None, self.where, keep=0)

    def row_event(self, *row: Any) -> Event:
        """An Event from a row of stored columns (seq first, data seventh), as ``BlobReader.row_event``:
        its escaped literals unwrapped in ``data``, the stored bytes left in ``raw_data``."""
        self.refuse(row[6], f"seq {row[0]}")
        event = Event(*row)
        if isinstance(row[6], (str, bytes)) and has_markers(row[6]) and has_literal(row[6]):
            event._data = unescape_literals(event.stored_data)
        return event

    def rows(self, rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
        """Rows of stored columns unchanged, refusing the first that refers to a blob."""
        for row in rows:
            self.refuse(row[6], f"seq {row[0]}")
            yield row

    def scan_rows(self, rows: Iterable[Any]) -> Iterator[Any]:
        """A scan's rows (type, id, stream, version, schema, data, ...), refusing the first that
        refers to a blob (named by its type and id: a scan does not read the seq); a payload holding
        an escaped literal is given as the canonical JSON of the payload appended (there is no blob
        for ``Ledger.join`` to read later, so a scan that keeps references has nothing to keep)."""
        for row in rows:
            data = row[5]
            if isinstance(data, (str, bytes)) and has_markers(data):
                self.refuse(data, f"the {row[0]} event {row[1]}")
                if has_literal(data):
                    whole = canonical_json(unescape_literals(decode_json(data)))
                    row = row._replace(data=whole) if hasattr(row, "_replace") else (*row[:5], whole, *row[6:])
            yield row

    def resolve(self, line: bytes | str, data: Any) -> Any:
        """``data`` (decoded from a JSONL ``line``) as ``BlobReader.resolve`` would give it whole (its
        escaped literals unwrapped), refusing it when it refers to a blob. Only the payload is
        looked at for references, not the meta; a literal in the meta only costs an unneeded walk."""
        if has_markers(line):
            try:
                keys = refs(data)
            except EnvelopeError:   # a one-key object that is no reference: stored so, read so
                keys = []
            if keys:
                raise self.lost(f"seq {line_seq(line if isinstance(line, bytes) else line.encode())}", keys[0])
            if has_literal(line):
                return unescape_literals(data)
        return data

    def lines(self, lines: Iterable[bytes]) -> Iterator[bytes]:
        """JSONL lines unchanged (an export's), refusing the first whose payload refers to a blob."""
        for line in lines:
            if has_markers(line):
                try:
                    data = decode_json(line)["data"]
                except (ValueError, KeyError, TypeError):   # damaged: verify names it, export copies it
                    data = None
                self.resolve(line, data)
            yield line


def refers_anywhere(path: str, size: int, chunk_size: int = _CHUNK) -> bool:
    """True when the first ``size`` bytes of the file at ``path`` hold a reference's key anywhere:
    a search over large chunks read into one buffer (each chunk starting a key's length before
    the last one ended, so a key across the cut is found), so a file that refers to no blob costs
    verify no pass over its lines. Read, not mapped: a writer rolling a batch forward may cut
    the file meanwhile, which a mapping would meet as a fault."""
    back = len(_REF_MARK) - 1
    buffer = bytearray(max(chunk_size, back + 1))
    view = memoryview(buffer)
    at = 0
    with open(path, "rb") as fh:
        while at < size:
            fh.seek(at)
            got = fh.readinto(view[:min(len(buffer), size - at)])
            if not got:
                return False
            if _holds_reference(buffer, got):
                return True
            at += max(got - back, 1)
    return False


def _holds_reference(chunk: bytearray, end: int) -> bool:
    """True when ``chunk[:end]`` holds a reference's key. Each ``$`` is found by memchr and looked
    at: a search for the key itself costs 1 ns a byte (its last byte, a quote, is everywhere in
    JSON), a tenth of a second for 100 MB; a chunk with many dollars (prices, TeX) is searched
    whole from the first one that is too many."""
    most = end >> 10
    at = chunk.find(b"$", 0, end)
    while at >= 0:
        if at and chunk.startswith(_REF_MARK, at - 1, end):
            return True
        most -= 1
        if most < 0:
            return chunk.find(_REF_MARK, at - 1 if at else 0, end) >= 0
        at = chunk.find(b"$", at + 1, end)
    return False
