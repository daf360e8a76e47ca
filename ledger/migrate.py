"""``evalledger migrate``: copy a home into a new home made with the blob store, recording what was done.

Events are never rewritten: the new home holds every event of the old one byte for byte (the same
seqs, ids and hashes, so heads and checkpoints published from the old home still verify), then a
``store.migrated`` event naming the source and its head. Events appended from then on keep their
large payload parts in the blob store. ``--mirror gzip`` gives the new home the compressed mirror
(``events.jsonl.gz``), recorded in the event as ``mirror``; ``--rows compact`` gives its ledger.db
compact rows (ledger/row_codec.py), recorded as ``rows``. The old home is left as it was.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from evalledger.ledger.api import HOME_FOLDERS, is_home, open_ledger, store_of
from evalledger.ledger.blobs import SPLIT_TYPES
from evalledger.ledger.envelope import Event, NewEvent
from evalledger.ledger.persistence import Head, LedgerError

#: the folders of ingested files copied with the events (reports are rebuilt from the events)
COPIED_FOLDERS = ("processed", "rejected")


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
    that exists and is not empty, and a source whose chain does not verify (nothing is written).
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
            count = dst.recorder.import_lines(src.recorder.export_lines(1, head.seq), str(source))
            [recorded] = dst.append(NewEvent("ledger:store", "store.migrated", {
                "source": str(source), "source_head_seq": head.seq, "source_head_hash": head.hash,
                "events": count, "blob_types": sorted(SPLIT_TYPES),
                "mirror": mirror, **({"rows": rows} if rows != "text" else {})},
                key=f"{head.seq}:{head.hash}"))
    for name in COPIED_FOLDERS:
        if (source / name).is_dir():
            shutil.copytree(source / name, target / name, dirs_exist_ok=True)
    return Migrated(head, count, recorded)


def _check_places(source: Path, target: Path) -> None:
    """Refuse a source that is not a home with its own ledger.db, or a target that is not new."""
    if not is_home(source) or store_of(source) is not None:
        raise LedgerError(f"{source}: not a home with its own ledger.db; migrate copies such a home")
    if target.exists() and (not target.is_dir() or any(p for p in target.iterdir() if p.name not in HOME_FOLDERS)
                            or any(any((target / n).iterdir()) for n in HOME_FOLDERS if (target / n).is_dir())):
        raise LedgerError(f"{target}: exists and is not empty; migrate writes a new home")
    if target.resolve() == source.resolve():
        raise LedgerError(f"{target}: is the source itself; migrate writes a new home and keeps the old one")
