"""Pending work: which cases a stage has yet to judge, found from the ledger alone.

A case is pending for a stage when its ``case.opened`` is in the ledger and the stage's terminal
output is not (``case.judged``, ``claim.scored``, ``credit.scored``), nor a ``stage.failed``
(unless ``retry_failed``). A scan starts after each stage's tracking position (a low watermark)
or, for a full reconcile, at seq 1; what it keeps of each case is small (``PendingCases``), and
the cases' events are read back a page at a time as they start (``opened_events``). The
dispatcher (``stages.dispatcher``) runs what a scan finds.
"""

from __future__ import annotations

import heapq
from array import array
from collections import Counter
from dataclasses import dataclass, field
from itertools import chain, islice
from typing import Any, Awaitable, Callable, Iterable, Iterator, NamedTuple

from evalledger.ledger import Event, canonical_json
from evalledger.stages.audit import judge_audit
from evalledger.stages.case_commits import Watermarks
from evalledger.stages.casework import CaseWork
from evalledger.stages.reconstruction import judge_reconstruction
from evalledger.stages.template import judge_template


@dataclass(frozen=True)
class Stage:
    """A stage: the case kind it subscribes to, the event that says a case is done, its handler."""

    name: str
    kind: str
    terminal: str
    handler: Callable[[CaseWork], Awaitable[None]]

    @property
    def tracking(self) -> str:
        return f"stage:{self.name}"


STAGES = (
    Stage("template", "template", "case.judged", judge_template),
    Stage("reconstruction", "reconstruction", "claim.scored", judge_reconstruction),
    Stage("audit", "audit", "credit.scored", judge_audit),
)


class PendingCases:
    """The pending cases a run keeps from a scan until they start: per case its ``case.opened`` seq
    and its stage in one 8-byte integer, in seq order, and the prior failure counts that are not
    0 (``--retry-failed`` only). Iterating gives ``(stage, seq, failures)``.

    A list of ``(stage, CaseRef, failures)`` cost ~300 bytes a case (two id strings, two tuples,
    an int): 30 MB of a run's peak at 100,000 cases. The events are read back a page at a time
    as cases start (``opened_events``).
    """

    def __init__(self, keys: Iterable[int] = (), failures: dict[int, int] | None = None):
        self._keys = array("q", keys)     # seq << 2 | the stage's index in STAGES
        self._failures = failures or {}   # key -> prior stage.failed count, when not 0

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[tuple[Stage, int, int]]:
        failures = self._failures
        for key in self._keys:
            yield STAGES[key & 3], key >> 2, failures.get(key, 0)


def _merged(per_stage: list[array]) -> Iterator[int]:
    """The keys of every stage in seq order (each stage's scan read them in seq order)."""
    return heapq.merge(*per_stage)


@dataclass
class Pending:
    """The pending cases of one scan, per stage, with the scan's upper bound."""

    upto: int
    cases: Any   # (stage, case.opened, prior stage.failed count) items: a list, or the run's PendingCases
    held: Any = field(default_factory=list)   # pending, not this run's
    configs: dict[str, Any] = field(default_factory=dict)   # the cases' distinct configs (as given)



def find_pending(led, retry_failed: bool = False, upto: int | None = None, full: bool = False,
                 select=None) -> Pending:
    """Every (stage, case.opened) whose stage output is not in the ledger, in seq order.

    A scan starts after each stage's tracking position; ``full`` (and ``retry_failed``) scan from
    seq 1, so pending work is found whatever the tracking records say.
    ``select(case_opened_data)`` picks the cases this run judges (its profiles'); the others are
    ``held``: pending, and they keep the tracking watermark below them for the run that takes them.
    """
    return scan_pending(led, retry_failed, upto, full, select, lambda opened: opened)


class CaseRef(NamedTuple):
    """Where a pending case's ``case.opened`` is (not the event: no payload held), with its ids:
    what a run sharing its store with other workers keeps of each case it may claim."""

    seq: int
    id: str
    case_id: str


def case_ref(opened: Event) -> CaseRef:
    """The ``CaseRef`` of a ``case.opened`` event."""
    return CaseRef(opened.seq, opened.id, opened.data.get("case_id"))


def scan_pending(led, retry_failed: bool, upto: int | None, full: bool, select, keep) -> Pending:
    """``find_pending``, keeping ``keep(case.opened)`` of each case (the event, or its ``CaseRef``),
    and the distinct configs of the selected cases (``Pending.configs``). ``keep=None`` (a run's
    scan) keeps the cases as ``PendingCases``: no object per case."""
    upto = led.head().seq if upto is None else upto
    found: list[tuple[Stage, Any, int, bool]] = []
    chosen_keys: list[array] = []
    held_keys: list[array] = []
    failed: dict[int, int] = {}
    configs: dict[str, Any] = {}
    select = select or _without_profile
    for index, stage in enumerate(STAGES):
        start = 1 if (retry_failed or full) else led.tracking_position(stage.tracking) + 1
        if start > upto:
            continue
        done = {e.data.get("case_id") for e in led.read(from_seq=start, types=[stage.terminal])}
        # Outputs come after their case.opened, so reading from ``start`` sees all of them; with
        # retry_failed ``start`` is 1 and these are the full counts that key the next failure.
        failures = Counter(e.data.get("case_id") for e in led.read(from_seq=start, types=["stage.failed"])
                           if e.data.get("stage") == stage.name)
        mine, others = array("q"), array("q")
        for opened in led.read(from_seq=start, types=["case.opened"], to_seq=upto):
            case_id = opened.data.get("case_id")
            if opened.data.get("kind") != stage.kind or case_id in done:
                continue
            if case_id in failures and not retry_failed:
                continue
            chosen = bool(select(opened.data))
            if chosen:
                config = opened.data.get("config")
                configs.setdefault(canonical_json(config).decode() if config is not None else "null", config)
            if keep is not None:
                found.append((stage, keep(opened), failures[case_id], chosen))
                continue
            key = opened.seq << 2 | index
            (mine if chosen else others).append(key)
            if failures[case_id]:
                failed[key] = failures[case_id]
        chosen_keys.append(mine)
        held_keys.append(others)
    if keep is None:
        return Pending(upto, PendingCases(_merged(chosen_keys), failed),
                        PendingCases(_merged(held_keys), failed), configs)
    found.sort(key=lambda item: item[1].seq)
    return Pending(upto, [(s, o, f) for s, o, f, chosen in found if chosen],
                    [(s, o, f) for s, o, f, chosen in found if not chosen], configs)


def seq_of(kept: Any) -> int:
    """The ``case.opened`` seq of a pending case as a scan kept it (a seq, a CaseRef or the event)."""
    return kept if isinstance(kept, int) else kept.seq


def _without_profile(opened: dict[str, Any]) -> bool:
    """A run without profiles judges the cases that belong to no profile."""
    return not opened.get("profile")


def below_tracking(led, pending: Pending) -> dict[str, list[Any]]:
    """Per stage, the pending cases at or below the stage's tracking position (work a scan that
    trusted tracking would never see again), as the scan kept them."""
    positions = {stage.name: led.tracking_position(stage.tracking) for stage in STAGES}
    stuck: dict[str, list[Any]] = {}
    for stage, opened, _ in chain(pending.cases, pending.held):   # held cases wait for another run
        if seq_of(opened) <= positions[stage.name]:
            stuck.setdefault(stage.name, []).append(opened)
    return stuck


def opened_events(led, cases: Iterable[tuple[Stage, Any, int]], page: int = 256) -> Iterator[tuple[Stage, Event, int]]:
    """The pending cases with their ``case.opened`` events, in the order given, read a page of
    cases at a time (one read over the page's seq range) and handed on as the read gives them:
    only the cases about to run hold their payloads (a page of 256 cases with 1 MB responses held
    whole was 256 MB). Cases given in seq order (a scan's) hold nothing back; an event read before
    its turn, or wanted again later in the page, waits in a buffer."""
    items = iter(cases)
    while chunk := list(islice(items, page)):
        left = Counter(seq_of(ref) for _, ref, _ in chunk)   # turns each event still has in the page
        events = iter(led.read(from_seq=min(left), to_seq=max(left), types=["case.opened"]))
        early: dict[int, Event] = {}
        for stage, ref, failures in chunk:
            seq = seq_of(ref)
            event = early.pop(seq, None)
            while event is None:
                found = next(events, None)
                if found is None:
                    raise LookupError(f"the case.opened event at seq {seq} is not in the ledger")
                if found.seq == seq:
                    event = found
                elif found.seq in left:
                    early[found.seq] = found
            left[seq] -= 1
            if left[seq]:
                early[seq] = event
            yield stage, event, failures


def watermarks_of(led, pending: Pending) -> Watermarks:
    """The watermarks of one scan: every case it found (held ones too) is open until committed."""
    return Watermarks(led, pending.upto, ((stage, seq_of(opened)) for stage, opened, _ in chain(pending.cases, pending.held)),
                      STAGES)
