"""Committing finished cases: several cases per transaction, and the stages' low watermarks.

A run's cases finish one after another; appending each in its own transaction costs a lock, a
commit and a mirror write apiece. ``CaseCommits.commit`` queues a case's events (its held judge
calls, its outputs or its ``stage.failed``) and waits; the queue is appended at the next turn
of the event loop, every case waiting by then in ONE transaction per stage, with that stage's
tracking position. Each case's events are thus still committed all or nothing, together with a
tracking position that never passes it; ids are deterministic, so a case redone after a crash
appends nothing twice. A batch the ledger refuses for one case's event is appended again case by
case, so one bad case never fails the others.

``Watermarks``: per stage, the cases of a scan in a sorted array with a committed flag each and
the index of the first open one, so the position to commit with a batch costs a walk over the
cases in flight, not a pass over every open case, and memory is 9 bytes a case.
"""

from __future__ import annotations

import asyncio
from array import array
from bisect import bisect_left
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from evalledger.ledger import Event, LedgerError, NewEvent
from evalledger.ledger.paging import sized_batches
from evalledger.stages.interrupts import interrupt_behind
from evalledger.stages.judge.group_commit import settle, settle_all


class Watermarks:
    """Per stage, the highest seq below which every scanned case is finished.

    A stage's scanned cases are kept as a sorted array of seqs with a byte each that says whether
    the case is committed, and the index of the first one that is not: 9 bytes a case, no object
    per case (a scan of 100,000 cases held a set and a heap of int objects, ~100 bytes a case).
    """

    def __init__(self, led, upto: int, cases: Iterable[tuple[Any, int]], stages: Iterable[Any]):
        self.led = led
        self.upto = upto
        self.stages = list(stages)
        seqs: dict[str, array[int]] = {s.name: array("q") for s in self.stages}
        for stage, seq in cases:
            seqs[stage.name].append(seq)
        self._seqs = {name: _sorted(found) for name, found in seqs.items()}
        self._done = {name: bytearray(len(found)) for name, found in self._seqs.items()}
        self._low = {name: 0 for name in self._seqs}   # every case before this index is committed

    @property
    def open(self) -> dict[str, set[int]]:
        """Per stage, the seqs of the cases not committed yet (built on demand: for checks, not the hot path)."""
        return {name: {seqs[i] for i in range(self._first_open(name), len(seqs)) if not self._done[name][i]}
                for name, seqs in self._seqs.items()}

    def _first_open(self, stage_name: str) -> int:
        """The index of the stage's first case not committed (moving the kept index past committed ones)."""
        done, low = self._done[stage_name], self._low[stage_name]
        while low < len(done) and done[low]:
            low += 1
        self._low[stage_name] = low
        return low

    def lowest(self, stage_name: str, excluding: Iterable[int] = ()) -> int | None:
        """The lowest open seq of a stage that is not in ``excluding`` (None when there is none).

        Walks from the first open case, so it visits only the cases below the answer: the
        excluded ones and those committed out of order (at most the cases in flight, mostly).
        """
        seqs, done = self._seqs[stage_name], self._done[stage_name]
        skip = set(excluding)
        for i in range(self._first_open(stage_name), len(seqs)):
            if not done[i] and seqs[i] not in skip:
                return seqs[i]
        return None

    def after(self, stage: Any, seqs: Iterable[int]) -> tuple[str, int] | None:
        """The tracking record to commit with cases ``seqs``' outputs (None when it would not advance).

        Changes nothing: the cases stay open until ``committed`` says their append returned. Were
        they dropped here, an append interrupted by a signal (the watch daemon raises ``Abandoned``
        in the middle of whatever runs) would leave them dropped, and the next case to commit would
        carry the position past them: cases stuck for ever with their judge calls and no outcome.
        """
        lower = self.lowest(stage.name, seqs)
        position = (lower - 1) if lower is not None else self.upto
        return (stage.tracking, position) if position > self.led.tracking_position(stage.tracking) else None

    def committed(self, stage: Any, seqs: Iterable[int]) -> None:
        """Cases ``seqs``' outputs (or their ``stage.failed``) are in the ledger: they no longer hold the mark."""
        found, done = self._seqs[stage.name], self._done[stage.name]
        for seq in seqs:
            i = bisect_left(found, seq)
            if i < len(found) and found[i] == seq:
                done[i] = 1

    def settle(self) -> None:
        """Advance the stages that had nothing pending up to the scan's bound (cheap next time)."""
        for stage in self.stages:
            if self.lowest(stage.name) is None and self.led.tracking_position(stage.tracking) < self.upto:
                self.led.append([], tracking=(stage.tracking, self.upto))


def _sorted(seqs: array[int]) -> array[int]:
    """``seqs`` in ascending order (a scan gives them in order: then as they are, with no copy)."""
    if all(seqs[i] <= seqs[i + 1] for i in range(len(seqs) - 1)):
        return seqs
    return array("q", sorted(seqs))


@dataclass
class _Queued:
    """One case waiting for its commit: its stage, its ``case.opened`` seq, its events, its future."""

    stage: Any
    seq: int
    events: list[NewEvent]
    done: asyncio.Future


# Prompt and response characters one transaction takes at most, about: encoding a batch holds
# several copies of them at once (16 cases with 1 MB responses took a run to 630 MB).
COMMIT_CHARS = 16_000_000


def bounded(items: list[_Queued], most: int = COMMIT_CHARS) -> Iterator[list[_Queued]]:
    """``items`` in order, in batches of at most about ``most`` prompt and response characters
    (one case alone may be more): cases of usual size still go in one transaction."""
    return sized_batches(items, lambda item: sum(_call_chars(event) for event in item.events), most)


def _call_chars(event: NewEvent) -> int:
    """The characters of a judge call's prompts and response (0 for any other event): the bulk of
    a case's events, found without encoding them."""
    if event.type != "judge.called":
        return 0
    request = event.data.get("request")
    if not isinstance(request, dict):
        return 0
    messages = request.get("messages")
    payload = request.get("payload")
    size = sum(len(m.get("content") or "") for m in messages if isinstance(m, dict)) if isinstance(messages, list) else 0
    response = payload.get("response") if isinstance(payload, dict) else None
    return size + (len(response) if isinstance(response, str) else 0)


class CaseCommits:
    """Group commit of finished cases (see module docstring); ``appended`` sees every stored batch.

    ``off_loop``: append in a writer thread of its own rather than on the event loop, for a run
    whose judge calls a server: its loop must stay free to read the replies, and an append on
    it also waited for the recording thread's commit (a sixth of the run's wall time at 64
    calls in flight). The batches, their order and their transactions are the same; ``close``
    waits for the last one.
    """

    def __init__(self, led, marks: Watermarks, appended: Callable[[list[Event]], None] | None = None,
                 off_loop: bool = False, appending: Callable[[int], AbstractContextManager[None]] | None = None):
        self.led = led
        self.marks = marks
        self.appended = appended
        # Around each append and its ``appended`` call: says how many events are under way (the
        # call index then takes no look that would wait for this transaction).
        self.appending = appending or (lambda events: nullcontext())
        self._queue: list[_Queued] = []
        self._scheduled = False
        self.batches = 0
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="case-commit") if off_loop else None

    async def commit(self, stage: Any, seq: int, events: list[NewEvent]) -> list[Event]:
        """Append ``events`` of case ``seq`` (with the other cases waiting) with the stage's tracking
        position; returns the stored events once committed (raises what the append raised)."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._queue.append(_Queued(stage, seq, events, done))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)   # after the cases that are ready now have queued theirs too
        return await done

    def _flush(self) -> None:
        """Append what is queued: one batch per stage, in the order the cases queued."""
        self._scheduled = False
        queue, self._queue = self._queue, []
        by_stage: dict[str, list[_Queued]] = {}
        for item in queue:
            by_stage.setdefault(item.stage.name, []).append(item)
        batches = [batch for items in by_stage.values() for batch in bounded(items)]
        if self._writer is not None:
            self._writer.submit(self._append_off_loop, batches, asyncio.get_running_loop())
            return
        for items in batches:
            self._append(items)

    def _append_off_loop(self, batches: list[list[_Queued]], loop: asyncio.AbstractEventLoop) -> None:
        """In the writer thread: append each batch, then hand the cases their outcomes on the loop
        (at once, and even if an append raised)."""
        outcomes: list[tuple[asyncio.Future, Any]] = []
        try:
            for items in batches:
                self._append(items, lambda done, outcome: outcomes.append((done, outcome)))
        finally:
            try:
                loop.call_soon_threadsafe(settle_all, outcomes)
            except RuntimeError:   # the loop is closed: nobody waits for these any more
                pass

    def close(self) -> None:
        """Wait for the appends handed to the writer thread (if any), then end it."""
        if self._writer is not None:
            self._writer.shutdown(wait=True)

    def _append(self, items: list[_Queued], deliver: Callable[[asyncio.Future, Any], None] = settle) -> None:
        """One transaction for ``items`` (all of one stage); hands each future its outcome (``deliver``)."""
        with self.appending(sum(len(item.events) for item in items)):
            self._append_under_way(items, deliver)

    def _append_under_way(self, items: list[_Queued], deliver: Callable[[asyncio.Future, Any], None]) -> None:
        """``_append`` once its events are counted as under way."""
        stage, seqs = items[0].stage, [item.seq for item in items]
        try:
            stored = self.led.append([e for item in items for e in item.events],
                                     tracking=self.marks.after(stage, seqs))
        except Exception as exc:
            interrupt = interrupt_behind(exc)
            if interrupt is not None:   # a signal Python wrapped: as the signal itself, below
                self._interrupted(items, interrupt, deliver)
                return
            if len(items) > 1 and not isinstance(exc, LedgerError):
                for item in items:   # find the case at fault: the others still commit
                    self._append([item], deliver)
                return
            for item in items:
                deliver(item.done, exc)
            return
        except BaseException as exc:   # a signal (the daemon's Abandoned): nothing committed, hand it on
            self._interrupted(items, exc, deliver)
            return
        self.marks.committed(stage, seqs)
        self.batches += 1
        start = 0
        for item in items:
            deliver(item.done, stored[start:start + len(item.events)])
            start += len(item.events)
        if self.appended is not None:
            self.appended(stored)

    @staticmethod
    def _interrupted(items: list[_Queued], interrupt: BaseException,
                     deliver: Callable[[asyncio.Future, Any], None]) -> None:
        """Nothing of ``items`` was committed: hand each case the interrupt (re-raised here when it
        is Ctrl-C or an exit, which the thread appending must not swallow)."""
        for item in items:
            deliver(item.done, interrupt)
        if isinstance(interrupt, (KeyboardInterrupt, SystemExit)):
            raise interrupt


