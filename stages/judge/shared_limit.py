"""The judge port's seam for a concurrency budget shared by every worker of a store.

``endpoint_limit(settings, led, backend)`` gives the port what it holds around each backend
call: ``SharedLimit`` when the ledger's store keeps shared budgets (PostgreSQL:
``Ledger.call_slots()``) and the backend calls a network endpoint, else ``LocalLimit``, which
adds nothing (a SQLite home has one process judging: the backend's in-process limit, AIMD on
429s included, is the whole limit). Under a shared budget the backend's own limit still applies
too, so a worker never has more calls out than its ``--concurrency``.

A slot is held for one call, its retries included: a call backing off after a 429 keeps its
place rather than let another worker's call hit the endpoint meanwhile.
"""

from __future__ import annotations

import asyncio
import random
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator
from urllib.parse import urlsplit, urlunsplit

from evalledger.ledger.call_slots import FULL, NO_BUDGET
from evalledger.stages.judge.calls import JudgeError

POLL_FIRST, POLL_MAX = 0.005, 0.05   # seconds between tries while every slot is held (doubling)


def endpoint_key(base_url: str) -> str:
    """The budget's key for a judge server: its base URL without credentials or query."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


class LocalLimit:
    """No limit beyond the backend's own (one process judges the ledger)."""

    shared = False

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Nothing to hold."""
        yield

    def close(self) -> None:
        """Nothing to release."""


class SharedLimit:
    """Hold one of the endpoint's shared slots around each call; wait while all are held.

    One waiter per process asks the store at a time (the others queue behind it), so the store
    sees at most one poll per worker however many calls wait.
    """

    shared = True

    def __init__(self, slots: Any, endpoint: str):
        self.slots = slots
        self.endpoint = endpoint
        self.waited = 0.0   # seconds calls spent waiting for a slot (all of them together)
        self._turn: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self._random = random.Random()

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a slot (or nothing, when the endpoint has no budget) while the body runs."""
        number = await self._take()
        try:
            yield
        finally:
            if number is not NO_BUDGET:
                self.slots.give(self.endpoint, number)   # one quick round trip; never skipped on cancel

    async def _take(self) -> int | None:
        loop = asyncio.get_running_loop()
        if self._turn is None or self._turn[0] is not loop:
            self._turn = (loop, asyncio.Lock())
        start = loop.time()
        async with self._turn[1]:
            delay = POLL_FIRST
            while True:
                number = await self._take_once()
                if number != FULL:
                    self.waited += loop.time() - start
                    return number
                await asyncio.sleep(delay * (0.5 + self._random.random()))
                delay = min(POLL_MAX, delay * 2)

    async def _take_once(self) -> int | None:
        """One try, off the event loop. A call cancelled meanwhile gives back the slot the try got
        (else a daemon running for days would lose that slot of the budget for good)."""
        trying = asyncio.ensure_future(asyncio.to_thread(self.slots.take, self.endpoint))
        try:
            return await asyncio.shield(trying)
        except asyncio.CancelledError:
            trying.add_done_callback(self._give_back)
            raise

    def _give_back(self, tried: asyncio.Future) -> None:
        if not tried.cancelled() and tried.exception() is None and tried.result() not in (NO_BUDGET, FULL):
            self.slots.give(self.endpoint, tried.result())

    def close(self) -> None:
        """Close the slots' connection (the server frees any slot still held)."""
        self.slots.close()


def endpoint_limit(settings: Any, led: Any, backend: Any) -> LocalLimit | SharedLimit:
    """The limit the port holds around each call (see the module docstring).

    ``settings.shared_concurrency`` set writes the endpoint's budget into the store first (0
    removes it); unset, the budget already in the store (if any) applies. A budget asked of a
    store that cannot share one is an error, not silently ignored.
    """
    wanted = getattr(settings, "shared_concurrency", None)
    slots = led.call_slots() if led is not None and getattr(backend, "network", False) else None
    if slots is None:
        if wanted:
            raise JudgeError("--shared-concurrency needs a PostgreSQL store shared by several workers "
                             "(--store postgresql://...) and the openai judge; here --concurrency is the limit")
        return LocalLimit()
    endpoint = endpoint_key(settings.resolved_base_url())
    try:
        if wanted is not None:
            slots.set_budget(endpoint, wanted)
    except BaseException:
        slots.close()
        raise
    return SharedLimit(slots, endpoint)


def check_shared(settings: Any, led: Any) -> None:
    """Raise JudgeError now when ``--shared-concurrency`` was given for a store that cannot share
    a budget (a run builds its judge only once it has work: this says so before)."""
    if not getattr(settings, "shared_concurrency", None):
        return
    slots = led.call_slots() if led is not None else None
    if slots is None:
        raise JudgeError("--shared-concurrency needs a PostgreSQL store shared by several workers "
                         "(--store postgresql://...); a home of its own is limited by --concurrency")
    slots.close()
