"""The documented Python API of the ledger: open, append, read, head, verify, export, import.

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
from urllib.parse import urlsplit

import evalledger.ledger.events  # noqa: F401  (registers the catalog)
from evalledger.ledger.blobs import REF, blob_file_path, decode_last, is_blob_line, join, ref_key
from evalledger.ledger.envelope import Event, NewEvent, decode_json, utc_now
from evalledger.ledger.gz_members import gz_import_lines, gz_side_file, is_gz_mirror, is_gzip_file
from evalledger.ledger.importer import FileLines
from evalledger.ledger.jsonl import JSONLRecorder, tracking_path
from evalledger.ledger.merkle import Frontier
from evalledger.ledger.mirror_gz import GZ_MIRROR
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
from evalledger.ledger.postgres_schema import is_store_url, redact_url, split_store_url
from evalledger.ledger.row_codec import ROWS_FORMS, is_compact
from evalledger.ledger.schemas import SCHEMAS, schema_version, upcast
from evalledger.ledger.sqlite import SQLiteRecorder
from evalledger.ledger.sqlite_schema import connect
from evalledger.ledger.verify import Problem, VerifyReport, tree_problem

HOME_FOLDERS = ("inbox", "processed", "rejected", "reports")
LEDGER_FILE_SUFFIXES = (".jsonl", ".db", ".sqlite", ".sqlite3")
#: in a home whose events live in PostgreSQL: the store's URL (no password), and the local read models
STORE_FILE = "store.url"
#: the mirror a home keeps beside its ledger.db, by form (``init --mirror``)
MIRROR_FILES = {"jsonl": "events.jsonl", "gzip": GZ_MIRROR}
#: ``Ledger.append_many`` stores a long batch this many events (or bytes of payload) at a time
CHUNK_EVENTS = 1000
CHUNK_BYTES = 4_000_000
READ_MODELS_FILE = "read-models.db"


def default_home() -> str:
    """The home named by EVALLEDGER_HOME, else ``./evalledger``."""
    return os.environ.get("EVALLEDGER_HOME") or "evalledger"


def init_home(home: str | os.PathLike[str], store: str | None = None, mirror: str = "jsonl",
              rows: str = "text") -> Path:
    """Create a home's layout (DESIGN.md): ledger.db, events.jsonl, inbox/, processed/, rejected/, reports/.

    With ``store`` (a ``postgresql://`` URL) the events live in that database instead: the home
    keeps its folders, ``store.url`` naming the store, and ``read-models.db`` (``bind_store``).
    ``mirror="gzip"``: a new home keeps its mirror compressed, as ``events.jsonl.gz``.
    ``rows="compact"``: a new home's ledger.db stores its events in compact rows (ledger/row_codec.py).
    """
    home = Path(home)
    check_mirror_form(home, mirror)
    check_rows_form(home, store, rows)
    if store is not None:
        bind_store(home, store)
    if home.exists() and not home.is_dir() and home.suffix not in LEDGER_FILE_SUFFIXES:
        raise LedgerError(f"{home} is a file, not a home directory; choose another --home")
    if home.suffix in LEDGER_FILE_SUFFIXES:  # a bare ledger file: no folders around it
        open_ledger(home, rows=rows).close()
        return home
    home.mkdir(parents=True, exist_ok=True)
    for name in HOME_FOLDERS:
        (home / name).mkdir(exist_ok=True)
    open_ledger(home, mirror=mirror, rows=rows).close()
    return home


def mirror_form(led: "Ledger") -> str:
    """The mirror a ledger keeps: "gzip" for a home with ``events.jsonl.gz``, else "jsonl"."""
    mirror = led.recorder.mirror
    return "gzip" if mirror is not None and is_gz_mirror(mirror.path) else "jsonl"


def check_mirror_form(home: Path, mirror: str) -> None:
    """Refuse a mirror form that is not one, or a compressed mirror for a home made without one
    (a home keeps the mirror it was made with: changing it would rewrite the mirror)."""
    if mirror not in MIRROR_FILES:
        raise LedgerError(f"the mirror is 'jsonl' or 'gzip', not {mirror!r}")
    if mirror == "gzip" and (home / "ledger.db").exists() and not (home / GZ_MIRROR).exists():
        raise LedgerError(f"{home} was made with a plain mirror ({MIRROR_FILES['jsonl']}); it keeps it")


def check_rows_form(home: Path, store: str | None, rows: str) -> None:
    """Refuse compact rows for a PostgreSQL store or for a ledger.db made with text rows (a store keeps
    the rows form it was made with: ``migrate --rows compact`` copies it into a new one)."""
    if rows not in ROWS_FORMS:
        raise LedgerError(f"rows are 'text' or 'compact', not {rows!r}")
    if rows != "compact":
        return
    if store is not None or store_of(home) is not None or home.suffix == ".jsonl":
        raise LedgerError("compact rows are a form of ledger.db; a PostgreSQL store or a JSONL file keeps its own")
    db = home if home.suffix in LEDGER_FILE_SUFFIXES else home / "ledger.db"
    if db.exists():
        conn = connect(str(db), readonly=True)
        try:
            compact = is_compact(conn)
        finally:
            conn.close()
        if not compact:
            raise LedgerError(f"{db} was made with text rows; it keeps them ('evalledger migrate --to NEW "
                              "--rows compact' copies it into a new home with compact rows)")


def mirror_file(home: Path, mirror: str = "jsonl") -> Path:
    """A home's mirror: ``events.jsonl.gz`` when the home has one (or ``mirror`` asks for it in a new
    home, which gets the file now, before its ledger.db), else ``events.jsonl``."""
    gz = home / GZ_MIRROR
    if mirror == "gzip" and not (home / "ledger.db").exists():
        check_mirror_form(home, mirror)
        gz.touch()
    return gz if gz.exists() else home / MIRROR_FILES["jsonl"]


def is_home(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a directory holding a ledger.db (or a store.url naming a server store)."""
    return (Path(path) / "ledger.db").is_file() or (Path(path) / STORE_FILE).is_file()


def store_of(home: str | os.PathLike[str]) -> str | None:
    """The PostgreSQL store URL a home is bound to, or None (its events are in its ledger.db)."""
    try:
        text = (Path(home) / STORE_FILE).read_text(encoding="utf-8").strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not is_store_url(text):
        raise LedgerError(f"{Path(home) / STORE_FILE}: line 1: not a postgresql:// URL")
    return text


def bind_store(home: str | os.PathLike[str], url: str) -> Path:
    """Make ``home`` a home whose events live in the PostgreSQL store ``url``; returns the home.

    Creates the folders and writes ``store.url``. A URL with a password is refused (the file
    would keep it): give the password in PGPASSWORD or ~/.pgpass, which libpq reads. A home
    that holds events of its own (ledger.db) or is bound to another store is refused too.
    """
    home = Path(home)
    if home.suffix in LEDGER_FILE_SUFFIXES:
        raise LedgerError(f"{home} names a ledger file; a PostgreSQL store is bound to a home directory")
    if not is_store_url(url):
        raise LedgerError(f"--store {redact_url(url)}: not a postgresql:// URL")
    split_store_url(url)  # a bad schema name fails here
    if urlsplit(url).password is not None:
        raise LedgerError(f"--store {redact_url(url)}: a password in the URL would be written to "
                          f"{home / STORE_FILE}; give it in PGPASSWORD or ~/.pgpass instead")
    bound = store_of(home)
    if bound is not None and bound != url:
        raise LedgerError(f"{home} is bound to the store {bound}, not {url}; use another --home")
    if (home / "ledger.db").exists():
        raise LedgerError(f"{home} keeps its events in {home / 'ledger.db'}; a PostgreSQL store needs a new "
                          "home (export this one and import it there)")
    if bound is None:
        home.mkdir(parents=True, exist_ok=True)
        for name in HOME_FOLDERS:
            (home / name).mkdir(exist_ok=True)
        (home / STORE_FILE).write_text(url + "\n", encoding="utf-8")
    return home


class Ledger:
    """One ledger: a recorder (SQLite or JSONL) and, for a home, its folders and mirror."""

    def __init__(self, recorder: Recorder, home: Path | None = None):
        self.recorder = recorder
        self.home = home
        self._tree = Frontier()   # the Merkle tree over the events seen so far, advanced incrementally

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
        in ``<out>.blobs`` beside it, so ``out`` with its blob file is a JSONL ledger of its own."""
        side = Path(blob_file_path(str(out)))
        count = 0
        blob_fh = None
        try:
            with open(out, "wb") as fh:
                for line in self.recorder.export_lines():
                    if is_blob_line(line):
                        if blob_fh is None:
                            blob_fh = open(side, "wb")
                        blob_fh.write(line)
                    else:
                        fh.write(line)
                        count += 1
        except BaseException:   # a blob the store lost, a full disk: no partial export left to import
            for path in (out, side):
                path.unlink(missing_ok=True)
            raise
        finally:
            if blob_fh is not None:
                blob_fh.close()
        if blob_fh is None and side.exists():
            side.unlink()   # an earlier export's blobs: not this one's
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


def open_ledger(path: str | os.PathLike[str] | None = None, *, durability: str = "normal",
                readonly: bool = False, mirror: str = "jsonl", rows: str = "text") -> Ledger:
    """Open a ledger: a home directory (SQLite + events.jsonl mirror), a ``.jsonl`` file, or a ``.db``.

    A home bound to a PostgreSQL store (``bind_store``) opens that store; a ``postgresql://`` URL
    opens the store alone (no home: export, import, verify, but no read models).

    A home that does not exist is created (``init_home``) unless ``readonly``. Opening for
    writing recovers from a crash (completes a mirror that is behind, rolls an interrupted JSONL
    batch forward, cuts a torn last line); ``readonly`` changes nothing on disk, so ``verify``
    reports what it finds instead of repairing it. ``mirror="gzip"``: a home made by this call keeps
    its mirror compressed (``events.jsonl.gz``); an existing home keeps the mirror it has.
    ``rows="compact"``: a ledger.db made by this call stores compact rows; an existing one keeps its form.
    """
    if isinstance(path, str) and is_store_url(path):  # a store without a home: no read models
        from evalledger.ledger.postgres import PostgresRecorder  # only a PostgreSQL store needs it
        return Ledger(PostgresRecorder(path, readonly=readonly))
    path = Path(path if path is not None else default_home())
    store = store_of(path)
    if store is not None:
        from evalledger.ledger.postgres import PostgresRecorder
        return Ledger(PostgresRecorder(store, str(path / READ_MODELS_FILE), readonly=readonly), home=path)
    if path.suffix == ".jsonl":
        return Ledger(JSONLRecorder(str(path), durability, readonly=readonly))
    if path.suffix in (".db", ".sqlite", ".sqlite3"):
        if readonly and not path.exists():
            raise LedgerError(f"{path}: no such ledger file")
        return Ledger(SQLiteRecorder(str(path), durability, readonly=readonly, rows=rows))
    if not (path / "ledger.db").exists():
        if readonly:
            raise LedgerError(f"{path}: no evalledger home here (run 'evalledger --home {path} init' first)")
        path.mkdir(parents=True, exist_ok=True)
        for name in HOME_FOLDERS:
            (path / name).mkdir(exist_ok=True)
    check_mirror_form(path, mirror)
    mirror_path = str(mirror_file(path, "jsonl" if readonly else mirror))
    recorder = SQLiteRecorder(str(path / "ledger.db"), durability, mirror_path=mirror_path,
                              lock_path=str(path / "ledger.lock"), readonly=readonly, rows=rows)
    return Ledger(recorder, home=path)
