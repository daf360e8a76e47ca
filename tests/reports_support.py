"""Shared by the report tests: the oracle's rendering of a home, and a sink that notes streams."""

from __future__ import annotations

from pathlib import Path

import reference_reports
from evalledger import ledger
from evalledger.projections.report_files import DictSink
from evalledger.projections.store import ReadModelStore


def reference_files(home: Path) -> dict[str, bytes]:
    """Every report file as the in-memory renderer (the oracle) renders it from ``home``'s read models."""
    with ledger.open_ledger(home, readonly=True) as led:
        store = ReadModelStore(led)
        try:
            return reference_reports.render_files(store)
        finally:
            store.close()


class StreamsNoted(DictSink):
    """A DictSink that notes which files came in pieces."""

    def __init__(self):
        super().__init__()
        self.streamed: list[str] = []

    def stream(self, rel):
        self.streamed.append(rel)
        return super().stream(rel)
