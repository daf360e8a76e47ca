"""``evalledger migrate``: copy a home into a new home made with the blob store, recording what was done.

Events are never rewritten: the new home holds every event of the old one byte for byte (the same
seqs, ids and hashes, so heads and checkpoints published from the old home still verify), then a
``store.migrated`` event naming the source and its head. Events appended from then on keep their
large payload parts in the blob store. ``--mirror gzip`` gives the new home the compressed mirror
(``events.jsonl.gz``), recorded in the event as ``mirror``; ``--rows compact`` gives its ledger.db
compact rows (ledger/row_codec.py), recorded as ``rows``. The old home is left as it was.

A migration killed part way carries on when it is run again: the copy of the events is one
transaction, so the target holds none of them, all of them, or all of them and ``store.migrated``;
a target holding no event, the source's first events byte for byte, or a whole migration of the
source is taken up where it stopped (the folders are copied again), anything else is refused.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from evalledger.ledger.api import Ledger
from evalledger.ledger.blobs import SPLIT_TYPES
from evalledger.ledger.envelope import Event, NewEvent
from evalledger.ledger.home import HOME_FOLDERS, is_home, mirror_form, open_ledger, store_of
from evalledger.ledger.mirror_gz import GZ_MIRROR
from evalledger.ledger.persistence import Head, LedgerError

#: the folders of ingested files copied with the events (reports are rebuilt from the events)
COPIED_FOLDERS = ("processed", "rejected")
#: files a home being made holds, empty, before its ledger.db: a migration killed then left them
BEGUN_FILES = (GZ_MIRROR, "ledger.lock")


@dataclass(frozen=True)
class Migrated:
    """What a migration did: the source's head it copied, how many events, and the event recording it."""

    source_head: Head
    events: int
    recorded: Event


def migrate_home(source: str | Path, target: str | Path, mirror: str = "jsonl", rows: str = "text") -> Migrated:
    """Copy the home ``source`` into the new home ``target`` (made with the blob store, and with the
    compressed mirror when ``mirror`` is "gzip", with compact rows when ``rows`` is "compact") and record it.

    Refuses a source that is not a home of its own (a PostgreSQL store, a bare file), a target
    that exists and holds anything but this migration begun earlier (of another form, or other
    events), and a source whose chain does not verify (nothing is written).
    """
    source, target = Path(source), Path(target)
    _check_places(source, target)
    with open_ledger(source, readonly=True) as src:
        report = src.verify()
        if not report.ok:
            raise LedgerError(f"{source}: the ledger does not verify ({report.problems[0]}); migrate copies "
                              "only a ledger that verifies; nothing was written")
        head = report.head
        with open_ledger(target, mirror=mirror, rows=rows) as dst:
            _check_form(dst, target, mirror, rows)
            recorded = _finished(src, dst, source, target)
            if recorded is None:
                if dst.head().seq == 0:
                    dst.recorder.import_lines(src.recorder.export_lines(1, head.seq), str(source))
                head = dst.head()   # what is copied: all of the source's head, or what a killed migrate copied
                [recorded] = dst.append(NewEvent("ledger:store", "store.migrated", {
                    "source": str(source), "source_head_seq": head.seq, "source_head_hash": head.hash,
                    "events": head.seq, "blob_types": sorted(SPLIT_TYPES),
                    "mirror": mirror, **({"rows": rows} if rows != "text" else {})},
                    key=f"{head.seq}:{head.hash}"))
            head, count = Head(recorded.data["source_head_seq"], recorded.data["source_head_hash"]), \
                recorded.data["events"]
    for name in COPIED_FOLDERS:
        if (source / name).is_dir():
            shutil.copytree(source / name, target / name, dirs_exist_ok=True)
    return Migrated(head, count, recorded)


def _check_places(source: Path, target: Path) -> None:
    """Refuse a source that is not a home with its own ledger.db, or a target that is neither new nor
    a home (which ``_finished`` then checks holds this migration begun earlier)."""
    if not is_home(source) or store_of(source) is not None:
        raise LedgerError(f"{source}: not a home with its own ledger.db; migrate copies such a home")
    if target.exists() and not (target.is_dir() and store_of(target) is None and (is_home(target) or _new(target))):
        raise LedgerError(f"{target}: exists and is not empty; migrate writes a new home")
    if target.resolve() == source.resolve():
        raise LedgerError(f"{target}: is the source itself; migrate writes a new home and keeps the old one")


def _new(target: Path) -> bool:
    """A folder holding nothing but empty home folders, or what a migrate killed before it made the
    ledger.db left (the empty compressed mirror and lock file)."""
    for path in target.iterdir():
        if path.name in HOME_FOLDERS and path.is_dir():
            if any(path.iterdir()):
                return False
        elif path.name not in BEGUN_FILES or not path.is_file() or path.stat().st_size:
            return False
    return True


def _check_form(dst: Ledger, target: Path, mirror: str, rows: str) -> None:
    """Refuse a target made earlier with another mirror or rows form than this migrate asks for."""
    have = (mirror_form(dst), "compact" if getattr(dst.recorder, "compact", False) else "text")
    if have != (mirror, rows):
        raise LedgerError(f"{target}: exists and is not empty; migrate writes a new home (it holds a home with "
                          f"the {have[0]} mirror and {have[1]} rows, not the {mirror} mirror and {rows} rows asked for)")


def _finished(src: Ledger, dst: Ledger, source: Path, target: Path) -> Event | None:
    """The ``store.migrated`` event of a migration of ``source`` that a killed migrate finished in
    ``target`` (None when the target holds nothing yet, or the source's first events byte for byte:
    the migration carries on). A target holding anything else is refused."""
    head = dst.head()
    if head.seq == 0:
        return None
    last = next(dst.read(from_seq=head.seq))
    copied = Head(head.seq - 1, last.prev_hash) if last.type == "store.migrated" else head
    theirs = next(src.read(from_seq=copied.seq), None) if copied.seq else None
    if theirs is None or theirs.seq != copied.seq or theirs.hash != copied.hash or \
            (last.type == "store.migrated" and last.data.get("source_head_hash") != copied.hash):
        raise LedgerError(f"{target}: exists and is not empty; migrate writes a new home (its events are not a "
                          f"migration of {source} begun there)")
    return last if last.type == "store.migrated" else None
