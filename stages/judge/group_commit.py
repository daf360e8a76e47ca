"""Group commit of recorded calls: attempts that end together are appended in one transaction.

Network calls end concurrently; appending each in its own transaction costs a lock, a commit and
a mirror write apiece. ``GroupCommitter.record`` hands an event to one writer thread and waits
until it is committed (so a call still returns only after its event is in the ledger); the
writer takes every event waiting at that moment and appends them as one batch. A batch that
fails is retried one event at a time, so one bad event never loses the others.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from evalledger.ledger import Event, NewEvent
from evalledger.stages.judge.recording import CallIndex, record_events


class GroupCommitter:
    """One writer thread appending queued ``judge.called`` events in batches."""

    def __init__(self, led, index: CallIndex | None):
        self.led = led
        self.index = index
        self._lock = threading.Lock()
        self._pending: list[tuple[asyncio.AbstractEventLoop, asyncio.Future, NewEvent]] = []
        self._draining = False
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="judge-record")
        self.batches = 0

    async def record(self, event: NewEvent) -> Event:
        """Append ``event`` (with whatever else is waiting) and return it once committed."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        with self._lock:
            self._pending.append((loop, done, event))
            start, self._draining = not self._draining, True
        if start:
            self._thread.submit(self._drain)
        return await done

    def _drain(self) -> None:
        while True:
            with self._lock:
                batch, self._pending = self._pending, []
                if not batch:
                    self._draining = False
                    return
            self.batches += 1
            # One wake-up of each waiting loop per batch, not one per event: each is a write to
            # the loop's self-pipe and a turn of the loop.
            by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future, Any]]] = {}
            for (loop, done, _), outcome in zip(batch, self._append(batch)):
                by_loop.setdefault(loop, []).append((done, outcome))
            for loop, outcomes in by_loop.items():
                loop.call_soon_threadsafe(settle_all, outcomes)

    def _append(self, batch) -> list[Event | BaseException]:
        try:
            return list(record_events(self.led, self.index, [event for _, _, event in batch]))
        except Exception:  # noqa: BLE001 - find the event at fault; the rest still commit
            outcomes: list[Event | BaseException] = []
            for _, _, event in batch:
                try:
                    outcomes.append(record_events(self.led, self.index, [event])[0])
                except Exception as exc:  # noqa: BLE001 - handed to the caller that recorded it
                    outcomes.append(exc)
            return outcomes

    def close(self) -> None:
        self._thread.shutdown(wait=True)


def settle_all(outcomes: list[tuple[asyncio.Future, Any]]) -> None:
    """Give each waiting caller of a batch its outcome (``settle``)."""
    for done, outcome in outcomes:
        settle(done, outcome)


def settle(done: asyncio.Future, outcome: Any) -> None:
    """Give a waiting caller its outcome: a result, or the exception its append raised (a caller
    that gave up waiting, cancelled, gets nothing)."""
    if done.cancelled():
        return
    if isinstance(outcome, BaseException):
        done.set_exception(outcome)
    else:
        done.set_result(outcome)
