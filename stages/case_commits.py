"""Committing finished cases: several cases per transaction, and the stages' low watermarks.

A run's cases finish one after another; appending each in its own transaction costs a lock, a
commit and a mirror write apiece. ``CaseCommits.commit`` queues a case's events (its held judge
calls, its outputs or its ``stage.failed``) and waits; the queue is appended at the next turn
of the event loop, every case waiting by then in ONE transaction per stage, with that stage's
tracking position. Each case's events are thus still committed all or nothing, together with a
tracking position that never passes it; ids are deterministic, so a case redone after a crash
appends nothing twice. A batch the ledger refuses for one case's event is appended again case by
case, so one bad case never fails the others.

``Watermarks``: per stage, the still-open cases of a scan in a heap (lazy deletion), so the
position to commit with a batch costs O(log n), not a pass over every open case.
"""

from __future__ import annotations

import asyncio
import heapq
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from evalledger.ledger import Event, LedgerError, NewEvent
from evalledger.stages.judge.group_commit import settle, settle_all


class Watermarks:
    """Per stage, the highest seq below which every scanned case is finished.

    ``open`` holds the cases not yet committed; ``_heaps`` the same seqs in a heap whose entries
    are dropped only once they reach the top (lazy deletion).
    """

    def __init__(self, led, upto: int, cases: Iterable[tuple[Any, int]], stages: Iterable[Any]):
        self.led = led
        self.upto = upto
        self.stages = list(stages)
        self.open: dict[str, set[int]] = {s.name: set() for s in self.stages}
        for stage, seq in cases:
            self.open[stage.name].add(seq)
        self._heaps = {name: sorted(seqs) for name, seqs in self.open.items()}   # a sorted list is a heap

    def lowest(self, stage_name: str, excluding: Iterable[int] = ()) -> int | None:
        """The lowest open seq of a stage that is not in ``excluding`` (None when there is none).

        Walks the heap best-first from its top, so it visits only the entries below the answer:
        the excluded cases and entries already committed, which the next call drops for good.
        """
        heap, still = self._heaps[stage_name], self.open[stage_name]
        while heap and heap[0] not in still:
            heapq.heappop(heap)
        skip = set(excluding)
        frontier = [(heap[0], 0)] if heap else []
        while frontier:
            seq, index = heapq.heappop(frontier)
            if seq in still and seq not in skip:
                return seq
            for child in (2 * index + 1, 2 * index + 2):
                if child < len(heap):
                    heapq.heappush(frontier, (heap[child], child))
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
        self.open[stage.name].difference_update(seqs)

    def settle(self) -> None:
        """Advance the stages that had nothing pending up to the scan's bound (cheap next time)."""
        for stage in self.stages:
            if not self.open[stage.name] and self.led.tracking_position(stage.tracking) < self.upto:
                self.led.append([], tracking=(stage.tracking, self.upto))


@dataclass
class _Queued:
    """One case waiting for its commit: its stage, its ``case.opened`` seq, its events, its future."""

    stage: Any
    seq: int
    events: list[NewEvent]
    done: asyncio.Future


class CaseCommits:
    """Group commit of finished cases (see module docstring); ``appended`` sees every stored batch.

    ``off_loop``: append in a writer thread of its own rather than on the event loop, for a run
    whose judge calls a server: its loop must stay free to read the replies, and an append on
    it also waited for the recording thread's commit (a sixth of the run's wall time at 64
    calls in flight). The batches, their order and their transactions are the same; ``close``
    waits for the last one.
    """

    def __init__(self, led, marks: Watermarks, appended: Callable[[list[Event]], None] | None = None,
                 off_loop: bool = False):
        self.led = led
        self.marks = marks
        self.appended = appended
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
        if self._writer is not None:
            self._writer.submit(self._append_off_loop, list(by_stage.values()), asyncio.get_running_loop())
            return
        for items in by_stage.values():
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
        stage, seqs = items[0].stage, [item.seq for item in items]
        try:
            stored = self.led.append([e for item in items for e in item.events],
                                     tracking=self.marks.after(stage, seqs))
        except Exception as exc:
            if len(items) > 1 and not isinstance(exc, LedgerError):
                for item in items:   # find the case at fault: the others still commit
                    self._append([item], deliver)
                return
            for item in items:
                deliver(item.done, exc)
            return
        except BaseException as exc:   # a signal (the daemon's Abandoned): nothing committed, hand it on
            for item in items:
                deliver(item.done, exc)
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            return
        self.marks.committed(stage, seqs)
        self.batches += 1
        start = 0
        for item in items:
            deliver(item.done, stored[start:start + len(item.events)])
            start += len(item.events)
        if self.appended is not None:
            self.appended(stored)


