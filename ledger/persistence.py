"""The abstract recorder every storage backend implements, and the sealing logic they share.

A backend (``sqlite.py``, ``jsonl.py``) stores sealed envelopes and reads them back; everything
above it (the ``Ledger`` API, the stages, the projections) talks to this interface only, so a
backend can be added without touching anything above it.
"""

from __future__ import annotations

import errno
import re
import sqlite3
from abc import ABC, abstractmethod
from hashlib import sha256
from typing import TYPE_CHECKING, Any, Callable, Collection, Iterable, Iterator, Mapping, NamedTuple

from evalledger.ledger.catalog import validate_payload
from evalledger.ledger.envelope import (
    GENESIS_HASH,
    EnvelopeError,
    Event,
    NewEvent,
    canonical_json,
    chain_hash,
    event_id,
    utc_now,
)
from evalledger.ledger.merkle import Frontier
from evalledger.ledger.schemas import SCHEMAS

if TYPE_CHECKING:
    from evalledger.ledger.blob_reader import BlobReader
    from evalledger.ledger.mirror import Mirror
    from evalledger.ledger.mirror_gz import GzMirror
    from evalledger.ledger.verify import VerifyReport

_STREAM = re.compile(r"^[a-z][a-z0-9_-]*:[A-Za-z0-9._:/@+=-]+$")


class LedgerError(Exception):
    """Base of the ledger's own errors."""


class EmptyStore(LedgerError):
    """A PostgreSQL store opened read-only whose schema holds no ledger yet (a writer's first open makes it)."""


class LedgerDamaged(LedgerError):
    """The store cannot be read at all (a file that is not an SQLite database, say): a finding."""


class StoreReplaced(LedgerError):
    """The store's file is no longer the one this process opened: removed, or another put in its
    place (a backup restored, a copy of the home) while the process ran. Its writes would go to a
    file nobody can open any more; nothing was written. Opening the store again reads the new file."""


class DiskFull(LedgerError):
    """The disk (or file-size limit) is full; the message says what is committed. Nothing is lost.

    ``reason`` is the system's own words ("database or disk is full", "No space left on device").
    """

    def __init__(self, message: str, reason: str = ""):
        super().__init__(message)
        self.reason = reason


def is_disk_full(exc: BaseException) -> bool:
    """True for SQLite's "database or disk is full" and for an OSError ENOSPC / EFBIG."""
    if isinstance(exc, sqlite3.Error):
        return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "disk is full" in str(exc)
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


class ConflictError(LedgerError):
    """A stale expected stream version: someone appended to the stream first. Nothing was appended."""


class Head(NamedTuple):
    """The last event of a ledger: its seq and hash (seq 0 and 64 zeros when empty).

    Immutable like the frozen dataclass it was, and cheaper to build: one is made per append.
    """

    seq: int
    hash: str

    def __str__(self) -> str:
        return f"seq {self.seq} {self.hash}"


class Prepared(NamedTuple):
    """An event validated and encoded, waiting for the store to give it a seq and version.

    A NamedTuple rather than a frozen dataclass: building one per appended event must be cheap.
    """

    id: str
    stream: str
    type: str
    schema: int
    data: bytes
    meta: bytes
    data_obj: Any
    meta_obj: Any


def check_stream(stream: str) -> None:
    """Refuse a stream name that is not ``kind:identifier`` (e.g. ``case:ab12``)."""
    try:
        if stream in _GOOD_STREAMS:
            return
    except TypeError:  # not hashable, so not a name: refused below
        pass
    if not isinstance(stream, str) or not _STREAM.match(stream):
        raise EnvelopeError(
            f"stream {stream!r} is not 'kind:identifier' (lowercase kind, then letters, digits or ._:/@+=-)")
    if len(_GOOD_STREAMS) > 10_000:
        _GOOD_STREAMS.clear()
    _GOOD_STREAMS.add(stream)


_GOOD_STREAMS: set[str] = set()  # names already checked: a stage appends to the same streams often


class StoredPayload(NamedTuple):
    """A stored event's payload to append again as its stored canonical bytes (``stored_payload``).

    ``prepare`` neither validates nor re-encodes it: it was validated when first appended, and
    ``stored_payload`` checked that the stored bytes are the ones the event's hash covers.
    """

    type: str
    schema: int
    raw: bytes


def stored_payload(event: Event, where: str) -> StoredPayload | Any:
    """What to append to copy ``event``'s payload into another ledger (as ``NewEvent.data``).

    At its type's current schema: its stored bytes, once its hash is checked against them (an
    event altered in the store ``where`` names raises LedgerError, so an altered payload is
    never copied on unvalidated). At an older schema: the payload upcast, validated on append.
    """
    if SCHEMAS.get(event.type) != event.schema:
        return event.data
    if chain_hash(event.prev_hash, event.canonical()) != event.hash:
        raise LedgerError(f"{where}: event seq {event.seq} ({event.type}, id {event.id}) does not match its "
                          "hash: the store was altered after it was written ('evalledger verify' lists it)")
    raw = event.raw_data
    return StoredPayload(event.type, event.schema, raw.encode() if isinstance(raw, str) else bytes(raw))


def prepare(event: NewEvent, now: str | None = None, metas: dict[int, Any] | None = None) -> Prepared:
    """Validate a NewEvent against the catalog and encode its data and meta canonically.

    ``now`` is the batch's ``recorded_at`` (one instant for one atomic batch); ``metas`` memoises
    the encoding of a meta mapping that several events of a batch share (by identity). A
    ``StoredPayload`` of the same type is taken as it is (decoded only when someone reads it).
    """
    check_stream(event.stream)
    given = event.data
    if given.__class__ is StoredPayload and given.type == event.type:
        schema, data, raw = given.schema, None, given.raw
    else:
        schema, data = validate_payload(event.type, given)  # an unknown type fails here
        raw = canonical_json(data)
    meta_bytes, meta = _encode_meta(event.meta, now or utc_now(), metas)
    return Prepared(event_id(event.stream, event.type, event.key), event.stream, event.type, schema,
                    raw, meta_bytes, data, meta)


def _encode_meta(given: Mapping[str, Any] | None, now: str,
                 metas: dict[int, Any] | None) -> tuple[bytes, dict[str, Any]]:
    key = id(given)
    if metas is not None and key in metas:
        _, encoded, cached = metas[key]
        return encoded, cached
    meta = dict(given or {})
    meta.setdefault("recorded_at", now)
    encoded = canonical_json(meta)
    if metas is not None:
        metas[key] = (given, encoded, meta)  # keeps ``given`` alive so its id is not reused
    return encoded, meta


def seal(p: Prepared, seq: int, version: int, prev_hash: str) -> tuple[Event, bytes]:
    """Give a prepared event its place: returns the stored Event and its canonical bytes.

    The canonical bytes are formatted directly (sorted keys, as ``canonical_bytes`` gives them):
    id is hex, the stream and type were checked against patterns without quotes or escapes.
    """
    canonical = _CANONICAL % (p.data, p.id.encode(), p.meta, p.schema, seq, p.stream.encode(),
                              p.type.encode(), version)
    hash = sha256(prev_hash.encode() + canonical).hexdigest()
    return Event(seq, p.id, p.stream, version, p.type, p.schema, p.data, p.meta, prev_hash, hash,
                 data=p.data_obj, meta=p.meta_obj), canonical


_CANONICAL = b'{"data":%b,"id":"%b","meta":%b,"schema":%d,"seq":%d,"stream":"%b","type":"%b","version":%d}'


def normalise_expected(batch: list[Prepared], expected_version: int | Mapping[str, int] | None) -> dict[str, int]:
    """Turn the caller's expected version (one int for a one-stream batch, or a dict) into a dict."""
    if expected_version is None:
        return {}
    if isinstance(expected_version, Mapping):
        return dict(expected_version)
    streams = {p.stream for p in batch}
    if len(streams) != 1:
        raise LedgerError("expected_version as a number needs a batch on one stream; pass {stream: version}")
    return {streams.pop(): int(expected_version)}


class ScanRow(NamedTuple):
    """One event as a fold reads it: the envelope fields it needs, the payload, its config hash
    and recording time.

    ``data`` is the stored canonical JSON bytes when the event is at its type's current schema,
    else the payload dict already upcast (``Ledger.scan`` does that). ``config_hash`` is
    ``meta.config_hash`` for the types a scan was asked to stamp, else None; ``recorded_at`` is
    ``meta.recorded_at`` for the types a scan was asked to time, else None.
    """

    type: str
    id: str
    stream: str
    version: int
    schema: int
    data: bytes | dict[str, Any]
    config_hash: str | None
    recorded_at: str | None = None


class TreeState(NamedTuple):
    """The Merkle tree a backend keeps with its events: the leaf count, the frontier's hashes
    (``merkle.Frontier.state``), where it is kept (for messages) and how it was first built."""

    size: int
    frontier: bytes
    where: str
    built: str


TREE_KEPT = "kept with every append since the store was made"
# How far the kept tree may trail the head: SQLite writes its row when an append crosses a
# multiple of this many events (the root at the head folds in the few events after it).
TREE_LAG = 64


def tree_built_note(size: int) -> str:
    """How a tree state came to be when a store made before trees were kept was first opened."""
    return (f"built from the events (seq 1..{size}) when a store made before the tree was kept was first "
            f"opened for writing, {utc_now()}; kept with every append since")


def advanced_tree(state: tuple[int, bytes] | None, upto: int,
                  leaves: Callable[[int, int], Iterable[bytes]]) -> Frontier:
    """The tree of seq 1..``upto`` from a stored ``(size, frontier)`` state.

    The state is followed by the leaves after it (``leaves(from_seq, to_seq)``) when it is behind
    (a writer that did not keep the tree appended since); it is built from seq 1 when there is
    none, or when it is not a frontier of at most ``upto`` leaves: the events are the truth.
    """
    tree = None
    if state is not None and isinstance(state[0], int) and state[0] <= upto:
        try:
            tree = Frontier.restore(state[0], bytes(state[1] or b""))
        except (ValueError, TypeError):
            tree = None
    if tree is None:
        tree = Frontier()
    if tree.size < upto:
        tree.extend(leaves(tree.size + 1, upto))
    return tree


class Recorder(ABC):
    """A store of sealed events. Appends are atomic batches; nothing is ever updated or deleted.

    Everything above ``ledger/`` reaches a store through ``Ledger`` only, and ``Ledger`` through
    this interface only: a backend (one module each: ``sqlite.py``, ``jsonl.py``, later a
    PostgreSQL one) implements every abstract method here for real, tracking included.
    """

    #: a short name for messages: the file or table that holds the events
    location: str
    #: the file the events live in (for a server-backed store: a local file naming it)
    path: str
    #: the reader of the store's blobs (``ledger/blob_reader.py``), which its stored payloads may name by
    #: reference; None for a store without blobs (made before them; a JSONL file with no ``.blobs``)
    blobs: BlobReader | None = None
    #: the JSONL mirror kept beside the store, plain or compressed; None where there is none (a
    #: store that is itself JSONL, a server-backed one)
    mirror: Mirror | GzMirror | None = None

    @abstractmethod
    def append(self, batch: list[Prepared], expected: dict[str, int],
               tracking: tuple[str, int] | None = None) -> list[Event]:
        """Append a batch atomically: stored events for ids that exist, new ones for the rest.

        Raises ConflictError (appending nothing) when a stream's current version differs from
        ``expected``. ``tracking`` = (name, position) is committed with the batch: in the same
        transaction where the store has transactions; where it has not (JSONL), right after the
        batch, so after a crash the position can lag the events but never run ahead of them.
        """

    def append_chunks(self, chunks: Iterable[list[Prepared]],
                      seen: Callable[[list[Event], list[Event]], None]) -> None:
        """Append the chunks as ONE atomic batch (all or nothing), calling ``seen(stored, new)``
        for each chunk before the commit: ``stored`` its events as stored (the stored event for an
        id that exists), ``new`` those of them this batch adds. An exception from ``seen`` or from
        the chunks' iterator appends nothing. No expected versions, no tracking record.

        This default gathers the chunks and appends them at once; a backend overrides it to hold one
        chunk at a time (``Ledger.append_many``: a large file's intake in bounded memory).
        """
        batch = [p for chunk in chunks for p in chunk]
        if batch:
            before = self.head().seq
            stored = self.append(batch, {})
            seen(stored, [e for e in stored if e.seq > before])

    @abstractmethod
    def read(self, from_seq: int = 1, types: Iterable[str] | None = None,
             stream: str | None = None, to_seq: int | None = None) -> Iterator[Event]:
        """Stream events in seq order from ``from_seq``, optionally filtered, in constant memory."""

    def scan(self, from_seq: int, to_seq: int, types: Collection[str],
             stamped: Collection[str] = (), timed: Collection[str] = (),
             resolve: bool = True, plain: bool = False) -> Iterator[ScanRow]:
        """Rows of the events of ``types`` with from_seq <= seq <= to_seq, in seq order, for folds.

        ``data`` is the stored payload (bytes, or the decoded dict); ``config_hash`` is read from
        meta for the ``stamped`` types only, ``recorded_at`` for the ``timed`` types only. A
        backend may override this with a cheaper query. ``resolve=False`` allows (not requires)
        blob references to stay in ``data``; this default resolves them. ``plain=True`` allows
        (not requires) plain tuples in ScanRow's field order.
        """
        for e in self.read(from_seq, types, None, to_seq):
            config_hash = (e.meta or {}).get("config_hash") if e.type in stamped else None
            recorded_at = (e.meta or {}).get("recorded_at") if e.type in timed else None
            yield ScanRow(e.type, e.id, e.stream, e.version, e.schema, e.stored_data, config_hash, recorded_at)

    @abstractmethod
    def head(self) -> Head:
        """The last stored event's seq and hash."""

    @abstractmethod
    def get(self, id: str) -> Event | None:
        """The event with this id, or None."""

    def get_stored(self, id: str) -> Event | None:
        """The event with this id (or None) as stored: its ``stored_data`` may keep the blob
        references it was stored with (``Ledger.join`` resolves a part), so a reader of a few small
        fields of a large event reads no blob. This default is ``get``, the event whole (a JSONL
        ledger reads an event's blobs as it reads it); SQLite and PostgreSQL override it to leave them."""
        return self.get(id)

    @abstractmethod
    def stream_version(self, stream: str) -> int:
        """The version of the last event in ``stream`` (0 when the stream is empty)."""

    @abstractmethod
    def lines(self, from_seq: int = 1, to_seq: int | None = None) -> Iterator[tuple[int, bytes]]:
        """(seq, stored JSONL line) pairs in seq order: what export writes and verify hashes."""

    def export_lines(self, from_seq: int = 1, to_seq: int | None = None) -> Iterator[bytes]:
        """The lines ``export`` writes, in order (a store with blobs puts each blob's line before
        the first event that uses it)."""
        return (line for _, line in self.lines(from_seq, to_seq))

    @abstractmethod
    def verify(self, expect_head: Head | None = None) -> VerifyReport:
        """Recompute the hash chain over the stored bytes (and a mirror's), as of one snapshot."""

    @abstractmethod
    def import_lines(self, lines: Iterable[bytes], source: str = "the input") -> int:
        """Store sealed lines into an empty store, checking each (``ledger.importer``) in the same
        pass and keeping nothing when one fails; returns the count."""

    @abstractmethod
    def tracking_position(self, name: str) -> int:
        """The last position committed for tracking record ``name`` (0 when none)."""

    @abstractmethod
    def set_tracking(self, name: str, position: int) -> None:
        """Record a tracking position on its own (stages use ``append(..., tracking=...)``)."""

    @abstractmethod
    def own_files(self) -> list[str]:
        """The files this store is made of (the store, its mirror, sidecars): export refuses them."""

    @abstractmethod
    def read_models_path(self) -> str:
        """The SQLite file where read models of this store may be kept (projections use it)."""

    @abstractmethod
    def tracking_records(self) -> dict[str, int]:
        """Every tracking record, name -> position (``verify`` checks none is past the head)."""

    @abstractmethod
    def close(self) -> None:
        """Release files and connections."""

    @abstractmethod
    def tree_state(self) -> TreeState | None:
        """The RFC 6962 tree over the event hashes as the store keeps it, written in the same
        transaction as the appends (its size is the head's seq, or fewer than TREE_LAG events
        behind it), or None where the store keeps none (a store made before the tree was kept,
        opened read-only)."""

    def leaf_hashes(self, to_seq: int) -> Iterator[bytes]:
        """The Merkle leaves of seq 1..``to_seq``: each event's chain hash as 32 raw bytes, in order.
        A backend may override this with a query of the hash column alone."""
        for event in self.read(1, None, None, to_seq):
            yield bytes.fromhex(event.hash)

    def subscribe(self, callback: Callable[[], None]) -> Callable[[], None] | None:
        """Call ``callback()`` (from another thread) whenever any process appends; returns a
        function that stops it, or None when the store has no such announcements (files: a
        watcher on them tells). A reader must still catch up by position: a wake-up can be lost.
        """
        return None

    def leases(self, owner: str, seconds: float) -> Any:
        """Leases on pending work shared by many workers (``ledger.leases.Leases``), or None.

        None for a store that one machine writes (SQLite, JSONL): there the home's dispatch lock
        already makes runs take turns. A store shared by many machines returns its leases.
        """
        return None

    def keep_file(self, sha256: str, raw: bytes) -> None:
        """Keep an ingested file's bytes in the store, content-addressed, for every machine that
        shares it (PostgreSQL). A file store keeps nothing here: its home's processed/ folder has them."""
        return None

    def file_bytes(self, sha256: str) -> bytes | None:
        """The bytes kept by ``keep_file`` under ``sha256``, or None."""
        return None

    def call_slots(self) -> Any:
        """Slots of the judge endpoints' concurrency budgets shared by many workers
        (``ledger.call_slots.CallSlots``), or None.

        None for a store that one machine writes (SQLite, JSONL): one process judges at a time,
        so its own in-process limit is the whole limit.
        """
        return None


def chain_start(head: Head) -> tuple[int, str]:
    """(next seq, prev_hash) after ``head``."""
    return head.seq + 1, head.hash if head.seq else GENESIS_HASH
