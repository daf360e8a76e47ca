"""The documented Python API of the ledger: open, append, read, head, verify, export, import.

    >>> import ledger
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
from typing import IO, Iterable, Iterator, Mapping

import evalledger.ledger.events  # noqa: F401  (registers the catalog)
from evalledger.ledger.envelope import Event, NewEvent, utc_now
from evalledger.ledger.jsonl import JSONLRecorder, pending_path
from evalledger.ledger.mirror import lines_upto
from evalledger.ledger.persistence import Head, LedgerError, Recorder, normalise_expected, prepare
from evalledger.ledger.sqlite import SQLiteRecorder
from evalledger.ledger.verify import Problem, VerifyReport, verify_lines, verify_sqlite

HOME_FOLDERS = ("inbox", "processed", "rejected", "reports")
LEDGER_FILE_SUFFIXES = (".jsonl", ".db", ".sqlite", ".sqlite3")


def default_home() -> str:
    """The home named by EVALLEDGER_HOME, else ``./evalledger``."""
    return os.environ.get("EVALLEDGER_HOME") or "evalledger"


def init_home(home: str | os.PathLike) -> Path:
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


def is_home(path: str | os.PathLike) -> bool:
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
        now, metas = utc_now(), {}
        prepared = [prepare(e, now, metas) for e in batch]
        if not prepared:
            if tracking is not None:
                self.recorder.set_tracking(*tracking)
            return []
        expected = {} if expected_version is None else normalise_expected(prepared, expected_version)
        return self.recorder.append(prepared, expected, tracking)

    # --- reading ---------------------------------------------------------------------------------
    def read(self, from_seq: int = 1, types: str | Iterable[str] | None = None,
             stream: str | None = None, to_seq: int | None = None) -> Iterator[Event]:
        """Stream events in seq order from ``from_seq`` (constant memory), filtered by type/stream."""
        if isinstance(types, str):
            types = [types]
        return self.recorder.read(from_seq, types, stream, to_seq)

    def head(self) -> Head:
        """The last event's seq and hash."""
        return self.recorder.head()

    def get(self, id: str) -> Event | None:
        """The event with this id, or None."""
        return self.recorder.get(id)

    def stream_version(self, stream: str) -> int:
        """The version of the last event in ``stream`` (0 when empty)."""
        return self.recorder.stream_version(stream)

    def tracking_position(self, name: str) -> int:
        """The last committed position of tracking record ``name`` (0 when none)."""
        return self.recorder.tracking_position(name)

    @property
    def db(self):
        """The sqlite_utils.Database of a SQLite-backed ledger (projection tables live there), else None."""
        return getattr(self.recorder, "db", None)

    # --- integrity -------------------------------------------------------------------------------
    def verify(self, expect_head: Head | str | None = None) -> VerifyReport:
        """Recompute the hash chain over the stored bytes of the store (and the mirror).

        Verifies what was committed when it started (a snapshot taken under the lock, so a
        concurrent writer never looks like damage); repairs nothing. ``expect_head`` (a Head or
        ``SEQ:HASH``) also checks that a head published earlier is still a prefix.
        """
        if isinstance(expect_head, str):
            expect_head = parse_head(expect_head)
        rec = self.recorder
        if isinstance(rec, SQLiteRecorder):
            return self._verify_sqlite(rec, expect_head)
        snap = rec.snapshot()
        pending = pending_path(rec.path) if snap.pending else None
        if snap.last_seq is None:
            return verify_lines(lines_upto(rec.path, snap.size), rec.location, expect_head, pending)
        with open(rec.path, "rb") as fh:  # the file itself, iterated in C; verify stops at the snapshot's seq
            return verify_lines(fh, rec.location, expect_head, pending, limit=snap.last_seq, torn=snap.torn)

    @staticmethod
    def _verify_sqlite(rec: SQLiteRecorder, expect_head: Head | None) -> VerifyReport:
        head, mirror_size = rec.snapshot()
        mirror = rec.mirror
        if mirror is None or mirror_size is None:
            return Ledger._finish_sqlite(rec, verify_sqlite(
                rec.rows(1, head.seq), rec.location, iter(()) if mirror else None,
                mirror.path if mirror else "", expect_head))
        with open(mirror.path, "rb") as fh:  # iterated in C; lines past the snapshot's size are not extra
            report = verify_sqlite(rec.rows(1, head.seq), rec.location, fh, mirror.path, expect_head,
                                   mirror_size=mirror_size)
        return Ledger._finish_sqlite(rec, report)

    @staticmethod
    def _finish_sqlite(rec: SQLiteRecorder, report: VerifyReport) -> VerifyReport:
        mirror = rec.mirror
        if mirror and mirror.problem and report.ok:
            report.problems.append(Problem(0, mirror.path, mirror.problem))
        missing = rec.missing_triggers()
        if missing:
            report.warnings.append(f"{rec.location}: the triggers that refuse UPDATE and DELETE are missing "
                                   f"({', '.join(missing)}); opening the home for writing restores them")
        return report

    # --- export / import -------------------------------------------------------------------------
    def export(self, out: str | os.PathLike | IO[bytes]) -> int:
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
        rec = self.recorder
        stores = [Path(rec.path)] + ([Path(rec.mirror.path)] if getattr(rec, "mirror", None) else [])
        own = [p for store in stores for p in store.parent.glob(glob.escape(store.name) + "*")]
        if self.home is not None:
            own += [p for p in self.home.iterdir() if p.is_file()]
        return own

    def import_file(self, path: str | os.PathLike) -> int:
        """Import an exported JSONL ledger into this empty ledger.

        Every line is verified (chain, canonical form, unique ids, stream versions) in the same
        pass that stores it; the first bad line raises ImportRefused and nothing is kept.
        """
        if self.head().seq:
            raise LedgerError("import goes into an empty ledger only; this one has events")
        with open(path, "rb") as fh:
            return self.recorder.import_lines(fh, str(path))

    def close(self) -> None:
        self.recorder.close()

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _same_file(a: str | os.PathLike, b: Path) -> bool:
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


def open_ledger(path: str | os.PathLike | None = None, *, durability: str = "normal",
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
