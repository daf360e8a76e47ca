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
import os
from pathlib import Path
from typing import IO, Any, Collection, Iterable, Iterator, Mapping

import evalledger.ledger.events  # noqa: F401  (registers the catalog)
from evalledger.ledger.envelope import Event, NewEvent, decode_json, utc_now
from evalledger.ledger.jsonl import JSONLRecorder
from evalledger.ledger.persistence import Head, LedgerError, Recorder, ScanRow, normalise_expected, prepare
from evalledger.ledger.schemas import SCHEMAS, schema_version, upcast
from evalledger.ledger.sqlite import SQLiteRecorder
from evalledger.ledger.verify import VerifyReport

HOME_FOLDERS = ("inbox", "processed", "rejected", "reports")
LEDGER_FILE_SUFFIXES = (".jsonl", ".db", ".sqlite", ".sqlite3")


def default_home() -> str:
    """The home named by EVALLEDGER_HOME, else ``./evalledger``."""
    return os.environ.get("EVALLEDGER_HOME") or "evalledger"


def init_home(home: str | os.PathLike[str]) -> Path:
    """Create a home's layout (DESIGN.md): ledger.db, events.jsonl, inbox/, processed/, rejected/, reports/."""
    home = Path(home)
    if home.exists() and not home.is_dir() and home.suffix not in LEDGER_FILE_SUFFIXES:
        raise LedgerError(f"{home} is a file, not a home directory; choose another --home")
    if home.suffix in LEDGER_FILE_SUFFIXES:  # a bare ledger file: no folders around it
        open_ledger(home).close()
        return home
    home.mkdir(parents=True, exist_ok=True)
    for name in HOME_FOLDERS:
        (home / name).mkdir(exist_ok=True)
    open_ledger(home).close()
    return home


def is_home(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a directory holding a ledger.db."""
    return (Path(path) / "ledger.db").is_file()


class Ledger:
    """One ledger: a recorder (SQLite or JSONL) and, for a home, its folders and mirror."""

    def __init__(self, recorder: Recorder, home: Path | None = None):
        self.recorder = recorder
        self.home = home

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
             stamped: Collection[str] = ()) -> Iterator[ScanRow]:
        """The raw, streaming read a fold needs: ScanRow(type, id, stream, version, schema, data,
        config_hash) for the events of ``types`` with from_seq <= seq <= to_seq, in seq order.

        ``data`` is the stored canonical JSON bytes of a payload at its type's current schema, or
        the decoded dict upcast to it (``schema`` is then the current one). ``config_hash`` is
        ``meta.config_hash`` for the ``stamped`` types, None for the others.
        """
        return _upcast_rows(self.recorder.scan(from_seq, to_seq, types, stamped))

    def head(self) -> Head:
        """The last event's seq and hash."""
        return self.recorder.head()

    def get(self, id: str) -> Event | None:
        """The event with this id, or None."""
        return self.recorder.get(id)

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

    # --- integrity -------------------------------------------------------------------------------
    def verify(self, expect_head: Head | str | None = None) -> VerifyReport:
        """Recompute the hash chain over the stored bytes of the store (and the mirror).

        Verifies what was committed when it started (a snapshot taken under the lock, so a
        concurrent writer never looks like damage); repairs nothing. ``expect_head`` (a Head or
        ``SEQ:HASH``) also checks that a head published earlier is still a prefix.
        """
        if isinstance(expect_head, str):
            expect_head = parse_head(expect_head)
        return self.recorder.verify(expect_head)

    # --- export / import -------------------------------------------------------------------------
    def export(self, out: str | os.PathLike[str] | IO[bytes]) -> int:
        """Write every event as canonical JSONL (the mirror's exact bytes); returns the count."""
        if isinstance(out, (str, os.PathLike)):
            if any(_same_file(out, own) for own in self._own_files()):
                # opening it "wb" would truncate the store before a line of it is read
                raise LedgerError(f"{out} is one of this ledger's own files; export to another path")
            with open(out, "wb") as fh:
                return self.export(fh)
        count = 0
        for _, line in self.recorder.lines():
            out.write(line)
            count += 1
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
        with open(path, "rb") as fh:
            return self.recorder.import_lines(fh, str(path))

    def close(self) -> None:
        """Release the store's files and connections."""
        self.recorder.close()

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _upcast_rows(rows: Iterator[ScanRow]) -> Iterator[ScanRow]:
    """The rows with every payload stored at an older schema decoded and upcast to the current one."""
    current = SCHEMAS
    for row in rows:
        if current.get(row.type) != row.schema:
            data = decode_json(row.data) if isinstance(row.data, (bytes, str)) else row.data
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
                readonly: bool = False) -> Ledger:
    """Open a ledger: a home directory (SQLite + events.jsonl mirror), a ``.jsonl`` file, or a ``.db``.

    A home that does not exist is created (``init_home``) unless ``readonly``. Opening for
    writing recovers from a crash (completes a mirror that is behind, rolls an interrupted JSONL
    batch forward, cuts a torn last line); ``readonly`` changes nothing on disk, so ``verify``
    reports what it finds instead of repairing it.
    """
    path = Path(path if path is not None else default_home())
    if path.suffix == ".jsonl":
        return Ledger(JSONLRecorder(str(path), durability, readonly=readonly))
    if path.suffix in (".db", ".sqlite", ".sqlite3"):
        if readonly and not path.exists():
            raise LedgerError(f"{path}: no such ledger file")
        return Ledger(SQLiteRecorder(str(path), durability, readonly=readonly))
    if not (path / "ledger.db").exists():
        if readonly:
            raise LedgerError(f"{path}: no evalledger home here (run 'evalledger --home {path} init' first)")
        path.mkdir(parents=True, exist_ok=True)
        for name in HOME_FOLDERS:
            (path / name).mkdir(exist_ok=True)
    recorder = SQLiteRecorder(str(path / "ledger.db"), durability, mirror_path=str(path / "events.jsonl"),
                              lock_path=str(path / "ledger.lock"), readonly=readonly)
    return Ledger(recorder, home=path)
