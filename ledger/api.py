"""The documented Python API of the ledger: append, read, head, verify, export, import (opening one,
and the home folder around it: ``ledger.home``).

    >>> from evalledger import ledger
    >>> led = ledger.open_ledger("evalledger")          # a home: SQLite + events.jsonl mirror
    >>> led.append(ledger.NewEvent("case:q1", "note.added", {"text": "looks odd"}))
    >>> for event in led.read(types=["note.added"]):
    ...     print(event.seq, event.data["text"])
    >>> led.verify().ok
    True
"""

from __future__ import annotations

import glob
import hashlib
import os
from pathlib import Path
from typing import IO, Any, Callable, Collection, Iterable, Iterator, Mapping

import evalledger.ledger.events  # noqa: F401  (registers the catalog)
from evalledger.ledger.blob_lines import is_blob_line
from evalledger.ledger.blobs import REF, blob_file_path, decode_last, join, ref_key
from evalledger.ledger.envelope import Event, NewEvent, decode_json, utc_now
from evalledger.ledger.gz_members import gz_import_lines, gz_side_file, is_gzip_file
from evalledger.ledger.importer import FileLines
from evalledger.ledger.jsonl import JSONLRecorder, tracking_path
from evalledger.ledger.merkle import Frontier
from evalledger.ledger.persistence import (
    TREE_LAG,
    Head,
    LedgerError,
    Prepared,
    Recorder,
    ScanRow,
    normalise_expected,
    prepare,
)
from evalledger.ledger.schemas import SCHEMAS, schema_version, upcast
from evalledger.ledger.verify import Problem, VerifyReport, tree_problem
from evalledger.ledger.whole_files import naming, open_partial, partial_name, synced

#: ``Ledger.append_many`` stores a long batch this many events (or bytes of payload) at a time
CHUNK_EVENTS = 1000
CHUNK_BYTES = 4_000_000


class Ledger:
    """One ledger: a recorder (SQLite or JSONL) and, for a home, its folders and mirror."""

    def __init__(self, recorder: Recorder, home: Path | None = None):
        self.recorder = recorder
        self.home = home
        self._tree = Frontier()   # the Merkle tree over the events seen so far, advanced incrementally
        self._events_tree = Frontier()   # the tree ``events_root`` computed from the hash column alone

    # --- the Merkle tree ---------------------------------------------------------------------------
    def merkle_root(self, size: int | None = None) -> bytes:
        """The RFC 6962 root over the hashes of seq 1..``size`` (default: the head).

        The store keeps the tree (its frontier) with its events, written in the appends'
        transactions (at most TREE_LAG events behind the head), so the root at the head needs no
        scan: only the events after the kept tree are folded in. A store that keeps none yet (made
        before the tree was kept, opened read-only) is scanned once, then followed by this object;
        an earlier size is computed by one pass from seq 1.
        """
        target = self.head().seq if size is None else size
        tree = self._kept_tree()
        if tree is None:
            tree = Frontier()
        elif tree.size == target:
            return tree.root()
        if tree.size > target:
            tree = Frontier()
        tree.extend(self._leaves(tree.size + 1, target))
        if tree.size != target:
            raise LedgerError(f"{self.location}: no tree of {target} events: the ledger holds {tree.size}")
        if size is None or target >= self._tree.size:
            self._tree = tree   # kept for the next call (a store that keeps no tree reads only what is new)
        return tree.root()

    def events_root(self, size: int) -> bytes:
        """The RFC 6962 root over seq 1..``size`` from the events' own hashes, never from the tree the
        store keeps: a checkpoint's root is checked against it before it is signed, since a signed
        root is published for good. The tree is kept by this object, so a later call (a daemon's
        next checkpoint) folds in only the events after it."""
        tree = self._events_tree if self._events_tree.size <= size else Frontier()
        tree.extend(self._leaves(tree.size + 1, size))
        if tree.size != size:
            raise LedgerError(f"{self.location}: no tree of {size} events: the ledger holds {tree.size}")
        self._events_tree = tree
        return tree.root()

    def _kept_tree(self) -> Frontier | None:
        """A copy of the tree the store keeps (or else of the one this object followed), if any."""
        state = self.recorder.tree_state()
        if state is not None:
            try:
                return Frontier.restore(state.size, state.frontier)
            except ValueError:
                return None   # verify names it; the events are the truth
        return self._tree.copy() if self._tree.size else None

    def _leaves(self, from_seq: int, to_seq: int) -> Iterator[bytes]:
        """The raw hashes of from_seq..to_seq (the whole hash column from seq 1 when from_seq is 1)."""
        if from_seq == 1:
            return self.recorder.leaf_hashes(to_seq)
        return (bytes.fromhex(e.hash) for e in self.read(from_seq=from_seq, to_seq=to_seq))

    # --- writing ---------------------------------------------------------------------------------
    def append(self, events: NewEvent | Iterable[NewEvent],
               expected_version: int | Mapping[str, int] | None = None,
               tracking: tuple[str, int] | None = None) -> list[Event]:
        """Append a batch atomically (all or nothing) and return the stored events, in order.

        An event whose id (from stream, type, key) exists is not appended again: the stored
        event is returned in its place. ``expected_version`` (an int for a one-stream batch, or
        ``{stream: version}``) raises ConflictError, appending nothing, when a stream has moved on.
        ``tracking=(name, position)`` commits a tracking record in the same transaction.
        """
        batch = [events] if isinstance(events, NewEvent) else list(events)
        now = utc_now()
        metas: dict[int, Any] = {}
        prepared = [prepare(e, now, metas) for e in batch]
        if not prepared:
            if tracking is not None:
                self.recorder.set_tracking(*tracking)
            return []
        expected = {} if expected_version is None else normalise_expected(prepared, expected_version)
        return self.recorder.append(prepared, expected, tracking)

    def append_many(self, events: Iterable[NewEvent], seen: Callable[[Event, bool], None] | None = None,
                    chunk_events: int = CHUNK_EVENTS, chunk_bytes: int = CHUNK_BYTES) -> int:
        """Append ``events`` as ONE atomic batch (all or nothing, like ``append``) in bounded memory;
        returns how many were new.

        The events are taken from the iterable, validated and stored a chunk at a time (at most
        ``chunk_events`` events or about ``chunk_bytes`` bytes of payload) inside one transaction,
        so a batch of any size holds one chunk: give a generator, not a list, to gain by it. All
        share one ``recorded_at``; an id that exists is not appended again. ``seen(event, new)`` is
        called with each stored event, in order (``new``: this batch adds it; False for the stored
        event of an id that existed before), before the commit: an exception it raises, or one the iterable raises, appends
        nothing. No expected versions or tracking record: use ``append`` for those.
        """
        added = [0]
        floor: list[int] = []   # the batch's first new seq: every event from it on is this batch's

        def each(stored: list[Event], new: list[Event]) -> None:
            added[0] += len(new)
            if new and not floor:
                floor.append(new[0].seq)
            if seen is not None:
                for event in stored:
                    seen(event, bool(floor) and event.seq >= floor[0])

        self.recorder.append_chunks(_prepared_chunks(events, utc_now(), chunk_events, chunk_bytes), each)
        return added[0]

    # --- where it lives ----------------------------------------------------------------------------
    @property
    def location(self) -> str:
        """How messages name this ledger's store: its file (and table, for SQLite)."""
        return self.recorder.location

    @property
    def path(self) -> Path:
        """The file the events live in (``ledger.db`` of a home, or the bare ledger file)."""
        return Path(self.recorder.path)

    @property
    def label(self) -> str:
        """How messages name this ledger: its home, else its store's location."""
        return str(self.home) if self.home is not None else self.location

    def read_models_path(self) -> Path:
        """The SQLite file where read models of this ledger may be kept: the home's ``ledger.db``
        itself, or ``<name>.projections.db`` beside a bare ``.jsonl`` ledger."""
        return Path(self.recorder.read_models_path())

    # --- reading ---------------------------------------------------------------------------------
    def read(self, from_seq: int = 1, types: str | Iterable[str] | None = None,
             stream: str | None = None, to_seq: int | None = None) -> Iterator[Event]:
        """Stream events in seq order from ``from_seq`` (constant memory), filtered by type/stream.

        ``event.data`` and ``event.payload()`` are at each type's current schema (upcast when
        the event was stored at an older one).
        """
        if isinstance(types, str):
            types = [types]
        return self.recorder.read(from_seq, types, stream, to_seq)

    def scan(self, from_seq: int, to_seq: int, types: Collection[str],
             stamped: Collection[str] = (), timed: Collection[str] = (),
             resolve: bool = True, plain: bool = False) -> Iterator[ScanRow]:
        """The raw, streaming read a fold needs: ScanRow(type, id, stream, version, schema, data,
        config_hash, recorded_at) for the events of ``types`` with from_seq <= seq <= to_seq, in
        seq order.

        ``data`` is the stored canonical JSON bytes of a payload at its type's current schema, or
        the decoded dict upcast to it (``schema`` is then the current one). ``config_hash`` is
        ``meta.config_hash`` for the ``stamped`` types, ``recorded_at`` is ``meta.recorded_at``
        for the ``timed`` types, None for the others.

        ``resolve=False``: a payload stored with blob references may keep them (SQLite leaves them,
        so a reader that needs only an event's small fields reads no blob); ``join`` resolves any
        part of it later. Rows at an older schema are joined before they are upcast.

        ``plain=True``: rows may be plain tuples in ScanRow's field order (a fold unpacking them
        saves making a named tuple per row); an upcast row is still a ScanRow.
        """
        rows = self.recorder.scan(from_seq, to_seq, types, stamped, timed, resolve, plain)
        return _upcast_rows(rows, None if resolve else self.join)

    def join(self, value: Any) -> Any:
        """``value`` (decoded stored data, or a part of it) with every blob reference resolved."""
        reader = self.recorder.blobs
        return value if reader is None else join(value, reader.fetch)

    def open(self, value: Any, last: str | None = None) -> Any:
        """``value`` itself, or when it is one blob reference, that blob's decoded content with the
        references inside it left in place (``join`` resolves them): a reader wanting one small
        part of a large stored part fetches that blob alone.

        ``last``: the reader wants that one key of the content. When it is the content's last key
        (keys are stored sorted: a request's ``payload`` follows its ``messages``), the content is
        a dict holding that key alone and the rest is not decoded; otherwise it is whole."""
        reader = self.recorder.blobs
        if reader is None or value.__class__ is not dict or len(value) != 1 or REF not in value:
            return value
        raw = reader.fetch(ref_key(value[REF]))
        return decode_json(raw) if last is None else decode_last(raw, last)

    def preload(self, keys: Iterable[str]) -> None:
        """Read the blobs of ``keys`` (hex, as in ``sha256:<hex>``) in one query, for the ``open``
        and ``join`` calls that follow: a reader about to open many blobs (a fold, a page of judge
        calls ahead) reads them together, not one lookup each. Each is still checked against its
        key when it is opened. A preload replaces the one before it; a store that reads blobs one
        at a time (a JSONL ledger) ignores it."""
        reader = self.recorder.blobs
        if reader is not None:
            reader.preload(keys)

    def head(self) -> Head:
        """The last event's seq and hash."""
        return self.recorder.head()

    def holds(self, seq: int, hash: str) -> bool:
        """True when this ledger's event at ``seq`` has ``hash`` (seq 0, the empty ledger: always).

        A position recorded from a ledger (the read models', the viewer's index) names that ledger
        only with its hash: another file put in its place (a backup restored, another ledger
        copied over it, a store imported again) may reach the same seq with other events.
        """
        if seq == 0:
            return True
        head = self.head()   # the usual case, read models at the head: no event read (a .jsonl file is scanned)
        if seq >= head.seq:
            return seq == head.seq and hash == head.hash
        event = next(iter(self.read(from_seq=seq, to_seq=seq)), None)
        return event is not None and event.hash == hash

    def get(self, id: str) -> Event | None:
        """The event with this id, or None."""
        return self.recorder.get(id)

    def get_stored(self, id: str) -> Event | None:
        """The event with this id (or None) as stored: in a store with blobs, its ``stored_data``
        may hold blob references (``join`` resolves a part; ``get`` reads it whole), so a reader
        that needs a few small fields of a large event reads no blob. Other stores give it whole."""
        return self.recorder.get_stored(id)

    def stream_version(self, stream: str) -> int:
        """The version of the last event in ``stream`` (0 when empty)."""
        return self.recorder.stream_version(stream)

    # --- tracking --------------------------------------------------------------------------------
    def tracking_position(self, name: str) -> int:
        """The last committed position of tracking record ``name`` (0 when none)."""
        return self.recorder.tracking_position(name)

    def set_tracking(self, name: str, position: int) -> None:
        """Record a tracking position without events (``append([], tracking=...)`` does the same)."""
        self.recorder.set_tracking(name, position)

    def subscribe(self, callback: Callable[[], None]) -> Callable[[], None] | None:
        """Have ``callback()`` called (from another thread) when any process appends to a server
        store (PostgreSQL LISTEN/NOTIFY); returns the function that stops it, or None for a file
        store. Notifications can be lost: read from your last position, never count on them."""
        return self.recorder.subscribe(callback)

    # --- shared work ----------------------------------------------------------------------------
    def leases(self, owner: str, seconds: float) -> Any:
        """Leases on pending cases for worker ``owner`` when many workers share this store
        (PostgreSQL), else None (one machine: the home's dispatch lock suffices)."""
        return self.recorder.leases(owner, seconds)

    # --- ingested files ----------------------------------------------------------------------------
    def keep_file(self, sha256: str, raw: bytes) -> None:
        """Keep an ingested file's bytes where every machine sharing the store can open them (a
        PostgreSQL store's ``files`` table; a home of its own files them in processed/ instead)."""
        self.recorder.keep_file(sha256, raw)

    def file_bytes(self, sha256: str) -> bytes | None:
        """The bytes of the file ingested with this sha256: from the store, else from the home's
        processed/ folder; None when neither has them. Bytes that no longer hash to ``sha256`` are
        an error, never returned."""
        raw = self.recorder.file_bytes(sha256)
        if raw is not None or self.home is None:
            return raw
        for path in sorted((self.home / "processed").glob(glob.escape(sha256) + "*")):
            raw = path.read_bytes()
            if hashlib.sha256(raw).hexdigest() != sha256:
                raise LedgerError(f"{path}: the file no longer hashes to {sha256} (changed after it was ingested)")
            return raw
        return None

    def call_slots(self) -> Any:
        """This process's slots of the judge endpoints' shared concurrency budgets when many
        workers share this store (PostgreSQL), else None (the judge's in-process limit suffices)."""
        return self.recorder.call_slots()

    # --- integrity -------------------------------------------------------------------------------
    def verify(self, expect_head: Head | str | None = None) -> VerifyReport:
        """Recompute the hash chain over the stored bytes of the store (and the mirror).

        Verifies what was committed when it started (a snapshot taken under the lock, so a
        concurrent writer never looks like damage); repairs nothing. ``expect_head`` (a Head or
        ``SEQ:HASH``) also checks that a head published earlier is still a prefix.
        """
        if isinstance(expect_head, str):
            expect_head = parse_head(expect_head)
        report = self.recorder.verify(expect_head)
        self._check_tracking(report)
        if report.ok:   # the tree means something only over a chain that verifies
            self._check_tree(report)
        return report

    def _check_tree(self, report: VerifyReport) -> None:
        """Recompute the Merkle tree from the event hashes and compare the one the store keeps."""
        if report.tree_checked or isinstance(self.recorder, JSONLRecorder):
            return   # compared in the chain's own pass; or (JSONL) derived from the very lines verified
        state = self.recorder.tree_state()
        if state is None:
            report.warnings.append(f"{self.location}: no Merkle tree is kept in this store yet (made before "
                                   "it was); opening it for writing builds it from the events")
            return
        problem = tree_problem(state, self.recorder.leaf_hashes(state.size))
        if problem is not None:
            report.problems.append(problem)
        elif state.size <= report.head.seq - TREE_LAG:
            report.warnings.append(f"{state.where}: the Merkle tree kept covers seq 1..{state.size} of {report.head.seq} "
                                   "(appended by a writer that does not keep it); opening the store for writing "
                                   "completes it")

    def _check_tracking(self, report: VerifyReport) -> None:
        """Flag every tracking record past the head: a scan trusting it would skip every case after."""
        rec = self.recorder
        try:
            records = rec.tracking_records()
        except LedgerError as exc:  # a damaged sidecar costs no event: the stages scan from the start
            report.warnings.append(str(exc))
            return
        head = rec.head().seq   # read after the records: a position committed meanwhile is within it
        where = tracking_path(rec.path) if isinstance(rec, JSONLRecorder) else f"{rec.path} (table tracking)"
        for name, position in records.items():
            if position > head:
                report.problems.append(Problem(position, where,
                                               f"tracking record {name!r} is at seq {position}, past the head "
                                               f"(seq {head}): forged, or copied from another ledger; "
                                               "'evalledger run' sets it back"))

    # --- export / import -------------------------------------------------------------------------
    def export(self, out: str | os.PathLike[str] | IO[bytes]) -> int:
        """Write every event as canonical JSONL (the mirror's exact bytes); returns the count."""
        if isinstance(out, (str, os.PathLike)):
            if any(_same_file(out, own) for own in self._own_files()):
                # opening it "wb" would truncate the store before a line of it is read
                raise LedgerError(f"{out} is one of this ledger's own files; export to another path")
            return self._export_to(Path(out))
        count = 0
        for line in self.recorder.export_lines():
            out.write(line)
            count += not is_blob_line(line)
        return count

    def _export_to(self, out: Path) -> int:
        """Export to a file: the event lines in ``out``, the blob lines they use (a store with blobs)
        in ``<out>.blobs`` beside it, so ``out`` with its blob file is a JSONL ledger of its own.

        Both are written under temporary names beside them, synced, and renamed into place at the
        end (the blobs first), so ``out`` is never half an export: an export that fails or is killed
        leaves what was there before (a kill, also a hidden ``.NAME.PID.partial`` file)."""
        side = Path(blob_file_path(str(out)))
        count = 0
        writing = out   # the file a write, a sync or a close that fails (a full disk) was for
        try:
            with open_partial(out) as fh:
                blob_fh: IO[bytes] | None = None
                try:
                    for line in self.recorder.export_lines():
                        if is_blob_line(line):
                            writing = side
                            if blob_fh is None:
                                blob_fh = open_partial(side)
                            blob_fh.write(line)
                        else:
                            writing = out
                            fh.write(line)
                            count += 1
                    if blob_fh is not None:
                        writing = side
                        synced(blob_fh)
                finally:
                    if blob_fh is not None:
                        blob_fh.close()
                writing = out
                synced(fh)
            if blob_fh is not None:
                os.replace(partial_name(side), side)   # first: a reader of ``out`` finds every blob it names
            os.replace(partial_name(out), out)
            if blob_fh is None:
                side.unlink(missing_ok=True)   # an earlier export's blobs: not this one's
        except OSError:   # a full disk: the write's own error names no file, the line names it
            with naming(writing, partial_name(writing)):
                raise
        finally:   # a blob the store lost, a full disk: no partial export left to import
            for path in (out, side):
                partial_name(path).unlink(missing_ok=True)
        return count

    def _own_files(self) -> list[Path]:
        """The files this ledger lives in: the store, its mirror, what sits beside them in a home."""
        stores = [Path(p) for p in self.recorder.own_files()]
        own = [p for store in stores for p in store.parent.glob(glob.escape(store.name) + "*")]
        if self.home is not None:
            own += [p for p in self.home.iterdir() if p.is_file()]
        return own

    def import_file(self, path: str | os.PathLike[str]) -> int:
        """Import an exported JSONL ledger into this empty ledger.

        Every line is verified (chain, canonical form, unique ids, stream versions) in the same
        pass that stores it; the first bad line raises ImportRefused and nothing is kept.
        """
        if self.head().seq:
            raise LedgerError("import goes into an empty ledger only; this one has events")
        if is_gzip_file(path):   # a compressed mirror (events.jsonl.gz): its blob lines are inside it
            side = gz_side_file(str(path))   # or a gzipped export: its blobs beside it, uncompressed
            if side is None:
                return self.recorder.import_lines(gz_import_lines(str(path)), str(path))
            with open(side, "rb") as blob_fh:
                return self.recorder.import_lines(FileLines(side, blob_fh, gz_import_lines(str(path))),
                                                  f"{path} (with {side})")
        side = blob_file_path(str(path))
        with open(path, "rb") as fh:
            if not os.path.exists(side):
                return self.recorder.import_lines(fh, str(path))
            with open(side, "rb") as blob_fh:   # the blob lines first: every event finds its blobs
                return self.recorder.import_lines(FileLines(side, blob_fh, fh), f"{path} (with {side})")

    def close(self) -> None:
        """Release the store's files and connections."""
        self.recorder.close()

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _prepared_chunks(events: Iterable[NewEvent], now: str, most: int, size: int) -> Iterator[list[Prepared]]:
    """``events`` validated and encoded (``prepare``), in chunks of at most ``most`` events and
    about ``size`` bytes of payload; the meta memo is per chunk, so it stays bounded too."""
    chunk: list[Prepared] = []
    weight = 0
    metas: dict[int, Any] = {}
    for event in events:
        prepared = prepare(event, now, metas)
        chunk.append(prepared)
        weight += len(prepared.data)
        if len(chunk) >= most or weight >= size:
            yield chunk
            chunk, weight, metas = [], 0, {}
    if chunk:
        yield chunk


def _upcast_rows(rows: Iterator[ScanRow], join: Callable[[Any], Any] | None = None) -> Iterator[ScanRow]:
    """The rows with every payload stored at an older schema decoded (its references resolved by
    ``join`` when given) and upcast to the current one."""
    current = SCHEMAS
    for row in rows:
        if current.get(row[0]) != row[4]:   # (type, schema) by index: no property call on every row
            row = ScanRow._make(row)   # the recorder may give plain tuples (``plain``)
            data = decode_json(row.data) if isinstance(row.data, (bytes, str)) else row.data
            if join is not None:
                data = join(data)
            row = row._replace(data=upcast(row.type, row.schema, data), schema=schema_version(row.type))
        yield row


def _same_file(a: str | os.PathLike[str], b: Path) -> bool:
    """True when both paths exist and are the same file (a missing path is no ledger file)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def parse_head(text: str) -> Head:
    """Parse ``SEQ:HASH`` (as printed by verify) into a Head."""
    seq, sep, hash = text.partition(":")
    hash = hash.strip().lower()
    if not sep or not seq.strip().isdigit() or len(hash) != 64 or hash.strip("0123456789abcdef"):
        raise LedgerError(f"expected head as SEQ:HASH (64 hex digits), got {text!r}")
    return Head(int(seq), hash)
