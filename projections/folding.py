"""Bring the read models up to the ledger head: fold the events after their tracked position.

``update`` is the incremental path (load only the cases the new events touch); ``rebuild`` drops
the tables and folds from seq 1. Both run the same appliers (``projections.fold``), and every
applier is idempotent per event (state keyed by event id or by stream version), so re-folding an
event after a crash between a flush and the position commit changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from projections.fold import (
    BENCHMARK_TYPES, CASE_APPLIERS, FOLDED_TYPES, RUN_TYPES, apply_benchmark_event,
    apply_case_event, apply_run_event, case_id_of, new_case,
)
from projections.store import ReadModelStore

# A rebuild keeps at most this many case states in memory before writing them out.
FLUSH_EVERY = 50_000


@dataclass(frozen=True)
class FoldResult:
    """What an update did: events folded, cases touched, and the position reached."""

    events: int
    cases: int
    position: tuple[int, str]


class _Folder:
    """Case/benchmark/run states being folded, loaded from the store on first touch."""

    def __init__(self, store: ReadModelStore, fresh: bool):
        self.store = store
        self.fresh = fresh          # the tables are empty: no need to look a case up
        self.flushed: set[str] = set()
        self.cases: dict[str, dict] = {}
        self.benchmarks: dict[str, dict] = {}
        self.runs: dict[str, dict] = {}
        self.touched = 0

    def case(self, case_id: str) -> dict:
        state = self.cases.get(case_id)
        if state is None:
            if not self.fresh or case_id in self.flushed:
                state = self.store.load_cases([case_id]).get(case_id)
            if state is None:
                state = new_case(case_id)
            self.cases[case_id] = state
            self.touched += 1
        return state

    def preload(self, case_ids: set[str]) -> None:
        """Load many cases in a few queries (the incremental path knows them up front)."""
        wanted = [c for c in case_ids if c not in self.cases]
        loaded = self.store.load_cases(wanted) if not self.fresh else {}
        for case_id in wanted:
            self.cases[case_id] = loaded.get(case_id) or new_case(case_id)
        self.touched += len(wanted)

    def fold(self, event) -> None:
        if event.type in CASE_APPLIERS:
            case_id = case_id_of(event)
            if case_id is not None:
                apply_case_event(self.case(case_id), event)
        elif event.type in BENCHMARK_TYPES:
            if not self.benchmarks and not self.fresh:
                self.benchmarks = self.store.load_keyed("proj_benchmarks")
            apply_benchmark_event(self.benchmarks, event)
        elif event.type in RUN_TYPES:
            if not self.runs and not self.fresh:
                self.runs = self.store.load_keyed("proj_runs")
            apply_run_event(self.runs, event)

    def flush(self, position: tuple[int, str] | None) -> None:
        self.store.save(self.cases.values(), self.benchmarks, self.runs, position)
        self.flushed.update(self.cases)
        self.cases = {}


def update(led, store: ReadModelStore, *, fresh: bool = False) -> FoldResult:
    """Fold every event after the store's position up to the current head; save in one commit."""
    start, _ = store.position()
    head = led.head()
    folder = _Folder(store, fresh=fresh)
    if head.seq <= start:
        return FoldResult(0, 0, (start, store.position()[1]))
    if not fresh and head.seq - start <= FLUSH_EVERY:
        events = list(led.read(from_seq=start + 1, to_seq=head.seq, types=FOLDED_TYPES))
        folder.preload({cid for cid in map(case_id_of, events) if cid is not None}
                       if events else set())
    else:
        events = led.read(from_seq=start + 1, to_seq=head.seq, types=FOLDED_TYPES)
    count = 0
    for event in events:
        folder.fold(event)
        count += 1
        if len(folder.cases) >= FLUSH_EVERY:
            folder.flush(None)
    folder.flush((head.seq, head.hash))
    return FoldResult(count, folder.touched, (head.seq, head.hash))


def rebuild(led, store: ReadModelStore) -> FoldResult:
    """Drop every read model and fold the whole ledger from seq 1."""
    store.drop()
    return update(led, store, fresh=True)
