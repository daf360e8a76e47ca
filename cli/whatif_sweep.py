"""The what-if sweep: each point answered from the recorded facts where they decide it
(``stages.whatif_facts``), the remaining cases replayed for real into a temporary ledger, and the
headline metrics computed over both (``projections.whatif.headline_metrics``).

The cost is one read of the read models (brought up to date first, as ``report`` does), one pass
over the extraction calls for a threshold key, then per point a pass over the case states, plus
a replay of the cases the facts cannot answer there.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable

from evalledger import ledger, projections
from evalledger.projections.aggregate import configs_by_hash
from evalledger.projections.results import is_finished
from evalledger.projections.store import ReadModelStore
from evalledger.projections.whatif import headline_metrics
from evalledger.stages.config import merge_layers
from evalledger.stages.repeats import recorded_repeat_layer
from evalledger.stages.replaying import replay_into
from evalledger.stages.whatif import point_layer
from evalledger.stages.whatif_facts import SUBJECT_OF, FactSweep, excerpt_facts

Point = tuple[Any, dict[str, dict[str, Any]], int]


def sweep(led: ledger.Ledger, key: str, values: list[Any], fixed: dict[str, Any] | None = None,
          on_point: Callable[[int, int], None] | None = None) -> list[Point]:
    """(value, headline metrics, requests never recorded) at every point of ``key``; no judge call.

    A home judged with repeats is swept under its own repeat settings (each repeat's requests
    carry its seed); ``fixed`` wins over them.
    """
    fixed = {**recorded_repeat_layer(led), **(fixed or {})}
    with projections.current(led) as store:   # runs and cases of one state, never a rebuild's half
        configs = configs_by_hash(store.load_keyed("proj_runs"))
        extractions = excerpt_facts(led, SUBJECT_OF[key]) if key in SUBJECT_OF else None
        facts = FactSweep(key, fixed, ((state, is_finished(state)) for state in store.iter_cases()),
                          configs, extractions)
    points = []
    for index, value in enumerate(values):
        if on_point is not None:
            on_point(index, len(values))
        decided, to_replay = facts.point(value)
        replayed, unrecorded = replay_cases(led, merge_layers(fixed, point_layer(key, value)), to_replay)
        points.append((value, headline_metrics(decided + replayed), unrecorded))
    return points


def replay_cases(source: ledger.Ledger, layer: dict[str, Any], case_ids: list[str]) -> tuple[list[dict], int]:
    """(folded states, requests never recorded) of ``case_ids`` replayed under ``layer`` into a
    temporary SQLite ledger, deleted afterwards (nothing to do for no case)."""
    if not case_ids:
        return [], 0
    with tempfile.TemporaryDirectory(prefix="evalledger-whatif-") as tmp:
        led = ledger.open_ledger(Path(tmp) / "point.db")
        try:
            result = replay_into(source, led, overrides=layer, live=None, cases=case_ids)
            projections.update(led)
            store = ReadModelStore(led)
            try:
                return list(store.iter_cases()), len(result.missing)
            finally:
                store.close()
        finally:
            led.close()
