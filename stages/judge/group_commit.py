"""Group commit of recorded calls: attempts that end together are appended in one transaction.

Network calls end concurrently; appending each in its own transaction costs a lock, a commit and
a mirror write apiece. ``GroupCommitter.record`` hands an event to one writer thread and waits
until it is committed (so a call still returns only after its event is in the ledger); the
writer takes every event waiting at that moment and appends them as one batch. A batch that
fails is retried one event at a time, so one bad event never loses the others.

The writer is one thread of its own, fed through a ``queue.SimpleQueue``: handing it an event
is one C-level put, where a thread pool's ``submit`` took two locks, a work item and a future for
every batch (the biggest single cost of the judge-call path at 64 calls in flight). It wakes each
waiting event loop once per batch.

The writer is a daemon thread, so a program that never closes its judge still exits; an exit
hook lets every live writer commit what it was handed first (a paid call whose caller gave up
waiting is still recorded, and not paid again next run).
"""

from __future__ import annotations

import asyncio
import atexit
import queue
import threading
import weakref
from typing import Any

from evalledger.ledger import Event, NewEvent
from evalledger.stages.interrupts import reraise_interrupt
from evalledger.stages.judge.recording import CallIndex, record_events

_STOP = None   # put on the queue by close(): the writer ends once it gets there

Waiting = tuple[asyncio.AbstractEventLoop, asyncio.Future, NewEvent]

_LIVE: weakref.WeakSet[GroupCommitter] = weakref.WeakSet()   # writers whose thread runs


class GroupCommitter:
    """One writer thread appending queued ``judge.called`` events in batches."""

    def __init__(self, led, index: CallIndex | None):
        self.led = led
        self.index = index
        self._queue: queue.SimpleQueue[Waiting | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.batches = 0

    async def record(self, event: NewEvent) -> Event:
        """Append ``event`` (with whatever else is waiting) and return it once committed."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        if self._thread is None:
            self._start()
        self._queue.put((loop, done, event))
        return await done

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._write, name="judge-record", daemon=True)
                self._thread.start()
                _LIVE.add(self)

    def _write(self) -> None:
        """The writer: wait for an event, take every other one waiting too, append them as one batch."""
        while True:
            first = self._queue.get()
            batch: list[Waiting] = []
            stopping = first is _STOP
            if first is not _STOP:
                batch.append(first)
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stopping = True
                else:
                    batch.append(item)
            if batch:
                self._commit(batch)
            if stopping:
                return

    def _commit(self, batch: list[Waiting]) -> None:
        """Append one batch and hand each waiting caller its outcome (one wake-up per loop)."""
        self.batches += 1
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future, Any]]] = {}
        for (loop, done, _), outcome in zip(batch, self._append(batch)):
            by_loop.setdefault(loop, []).append((done, outcome))
        for loop, outcomes in by_loop.items():
            try:
                loop.call_soon_threadsafe(settle_all, outcomes)
            except RuntimeError:   # that loop is closed: nobody waits for these any more
                pass

    def _append(self, batch: list[Waiting]) -> list[Event | BaseException]:
        try:
            return list(record_events(self.led, self.index, [event for _, _, event in batch]))
        except Exception as exc:  # noqa: BLE001 - find the event at fault; the rest still commit
            reraise_interrupt(exc)
            outcomes: list[Event | BaseException] = []
            for _, _, event in batch:
                try:
                    outcomes.append(record_events(self.led, self.index, [event])[0])
                except Exception as exc:  # noqa: BLE001 - handed to the caller that recorded it
                    reraise_interrupt(exc)
                    outcomes.append(exc)
            return outcomes

    def close(self) -> None:
        """Let the writer commit what it was handed, then end it."""
        with self._start_lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(_STOP)
            thread.join()


@atexit.register
def _close_live_writers() -> None:
    """At interpreter exit, let every writer still running commit its queue (see the module note)."""
    for committer in list(_LIVE):
        committer.close()


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
