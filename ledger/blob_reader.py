"""Reading blobs back from a store: each checked against its key, the recent ones kept.

A store (SQLite's ``blobs`` table, PostgreSQL's, a JSONL ledger's ``.blobs`` file) gives a blob's
stored form (zlib-compressed canonical JSON) by key; ``BlobReader`` unpacks and checks it, keeps
the most recently used, and makes whole the events and payloads that refer to it. The format of
a payload split into blobs is ``ledger/blobs.py``.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from evalledger.ledger.blobs import PREFIX, BlobError, has_markers, join, join_bytes, raw_refs, unpack
from evalledger.ledger.envelope import Event, decode_json

#: bytes of blobs a reader keeps at most, about (recently used: shared prompts, schemas)
KEEP_BYTES = 16 << 20


class BlobReader:
    """Reads blobs through ``load(key) -> stored form or None``, checking each against its key and
    keeping the most recently used ones (a shared system prompt is read once, not per event): at
    most ``keep`` of them and about ``KEEP_BYTES`` in all, a blob over a quarter of that not kept
    (a home of 1 MB prompts held 256 MB in this cache).

    ``load_many(keys) -> {key: stored form}`` (the ones the store holds), when the store can read
    many blobs in one query, serves ``preload``."""

    def __init__(self, load: Callable[[str], bytes | None], where: str, keep: int = 256,
                 load_many: Callable[[list[str]], dict[str, bytes]] | None = None):
        self._load = load
        self._load_many = load_many
        self.where = where
        self._keep = keep
        self._cache: dict[str, bytes] = {}
        self._kept = 0   # bytes in _cache
        self._ahead: dict[str, bytes] = {}   # stored forms read by ``preload``, not yet fetched

    def preload(self, keys: Iterable[str]) -> None:
        """Read the stored forms of ``keys`` in one go for the fetches that follow, in place of
        the previous preload's (a fold's next page of judge calls: one query, not one a blob).
        Nothing is checked here: ``fetch`` unpacks and checks each, and one a preload did not
        find is looked up alone, so a missing blob fails as before."""
        if self._load_many is None:
            return
        wanted = [k for k in dict.fromkeys(keys) if k not in self._cache]
        self._ahead = self._load_many(wanted) if wanted else {}

    def fetch(self, key: str) -> bytes:
        """The uncompressed bytes of blob ``key`` (BlobError when it is missing or altered)."""
        raw = self._cache.get(key)
        if raw is not None:
            return raw
        packed = self._ahead.pop(key, None)
        if packed is None:
            packed = self._load(key)
        if packed is None:
            raise BlobError(f"{self.where}: blob {PREFIX}{key} is missing")
        raw = unpack(key, packed, self.where)
        if self._keep > 0 and len(raw) <= KEEP_BYTES // 4:
            cache = self._cache
            while cache and (len(cache) >= self._keep or self._kept + len(raw) > KEEP_BYTES):
                self._kept -= len(cache.pop(next(iter(cache))))   # the oldest: dicts keep insertion order
            cache[key] = raw
            self._kept += len(raw)
        return raw

    def row_event(self, *row: Any) -> Event:
        """An Event from a row of stored columns, its payload whole (blobs are read now, not when
        ``data`` is first used: an event may outlive the store it was read from)."""
        event = Event(*row)
        if has_markers(row[6]):
            event._data = decode_json(join_bytes(row[6], self.fetch))   # the stored bytes stay in raw_data
        return event

    def resolve(self, raw: bytes | str, data: Any) -> Any:
        """The whole payload of stored data ``raw`` already decoded as ``data``."""
        return join(data, self.fetch) if has_markers(raw) else data

    def resolved_bytes(self, raw: bytes) -> bytes:
        """The canonical JSON of the whole payload of stored data ``raw`` (``raw`` when it has no references)."""
        return join_bytes(raw, self.fetch) if has_markers(raw) else raw

    def check(self, key: str, seen: set[str]) -> None:
        """Check blob ``key`` and every blob inside it, skipping keys in ``seen`` (BlobError on the first bad one)."""
        pending = [key]
        while pending:
            current = pending.pop()
            if current in seen:
                continue
            raw = self.fetch(current)
            seen.add(current)
            if has_markers(raw):
                pending.extend(raw_refs(raw))

    def with_inner(self, keys: list[str], emitted: Any) -> list[str]:
        """``keys`` preceded by the blobs they refer to (dependency order), without those in ``emitted``."""
        return blob_order(keys, self.fetch, emitted)


def blob_order(keys: list[str], fetch: Callable[[str], bytes], emitted: Any) -> list[str]:
    """The order in which blob lines go out for an event referring to ``keys``: each blob after
    the blobs inside it, skipping (and then adding to) ``emitted``. Export and mirror share it, so
    a mirror written append by append holds the same bytes as an export."""
    order: list[str] = []
    stack: list[tuple[str, bool]] = [(k, False) for k in reversed(keys)]
    while stack:
        key, ready = stack.pop()
        if ready:
            order.append(key)
            continue
        if key in emitted:
            continue
        emitted.add(key)
        stack.append((key, True))
        raw = fetch(key)
        if has_markers(raw):
            stack.extend((k, False) for k in reversed(raw_refs(raw)))
    return order

