"""Projections: pure folds of ledger events into read models, statistics and reports.

    projections.refresh(led) -> list[Path]   # fold events after the tracked position, write reports
    projections.rebuild(led) -> list[Path]   # drop the read models, fold from seq 1: the same bytes
    projections.update(led) -> FoldResult    # fold only (no reports): the incremental path

Read models are the ``proj_*`` tables of the ledger's SQLite file (``projections.store``);
reports go to ``<home>/reports/`` (``projections.reports``). Nothing here calls a judge or
imports ``stages``.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from evalledger.projections import catch_up as _update
from evalledger.projections.catch_up import FoldResult
from evalledger.projections.report_files import folder_turn
from evalledger.projections.reports import render_files, write_reports
from evalledger.projections.store import ReadModelsAltered, ReadModelsBusy, ReadModelStore, reports_dir

#: folds a reader makes before giving up on read models another process keeps rebuilding
READ_TRIES = 5


def update(led) -> FoldResult:
    """Fold the events appended since the last update into the read models (no reports).

    Tables changed outside evalledger stay detectable: the digest is only moved by the rows the
    fold replaces and writes (``projections.store``), never recomputed from what is there.
    """
    store = ReadModelStore(led)
    try:
        return _update.update(led, store)
    finally:
        store.close()


def _fold_and_write(led, fresh: bool) -> list[Path]:
    """Fold (afresh or from the position), then render the reports from one snapshot of the read
    models; one process at a time per reports folder (``folder_turn``)."""
    directory = reports_dir(led)
    with folder_turn(directory):
        store = ReadModelStore(led)
        try:
            if fresh:
                _update.rebuild(led, store)
            else:
                _update.update(led, store)
            with store.snapshot():   # another process's fold may commit meanwhile: render one state
                store.check_digest()   # never render from tables changed outside evalledger
                return write_reports(store, directory)
        finally:
            store.close()


def refresh(led) -> list[Path]:
    """Update the read models incrementally and (re)write every report; returns the report paths."""
    return _fold_and_write(led, fresh=False)


def rebuild(led) -> list[Path]:
    """Drop every read model, fold the ledger from seq 1, write every report (byte-identical)."""
    return _fold_and_write(led, fresh=True)


def render(led) -> dict[str, bytes]:
    """The report files the current read models render to (relative path -> bytes), written nowhere."""
    store = ReadModelStore(led)
    try:
        with store.snapshot():
            store.check_digest()
            return render_files(store)
    finally:
        store.close()


@contextmanager
def current(led, store: ReadModelStore | None = None) -> Iterator[ReadModelStore]:
    """The read models folded up to the ledger's head, read by the body inside one snapshot
    (``ReadModelStore.snapshot``), as ``report`` renders them.

    Another process's rebuild drops them (one transaction) and folds them again: a snapshot taken
    in between finds them behind the position this fold reached (empty, or refolded in part with
    no position yet). It is let go and the models folded again (a fold is idempotent), so the body
    never reads a half-updated state, nor the tables of two commits. ``store``: one the caller
    keeps open (the viewer's), not already in a snapshot; else one is opened for the body.
    """
    own = store is None
    models = ReadModelStore(led) if store is None else store
    try:
        for _ in range(READ_TRIES):
            reached = _update.update(led, models).position[0]
            with models.snapshot():
                if models.position()[0] >= reached:
                    yield models
                    return
        raise ReadModelsBusy(f"{models.path}: the read models were dropped by another process's rebuild "
                             f"{READ_TRIES} times while this command read them (busy); run it again")
    finally:
        if own:
            models.close()


__all__ = ["FoldResult", "ReadModelsAltered", "ReadModelsBusy", "current", "rebuild", "refresh", "render", "update"]
