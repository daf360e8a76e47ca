"""How hard the openai backend leans on a server: AIMD concurrency on 429, and a circuit breaker.

``AdaptiveLimit`` bounds the calls in flight. It starts at the configured concurrency; when
429s become frequent (a moving average of the share of 429 answers passes ``STORM_SHARE``) it
halves, at most once per round of requests (a 429 of a request sent before the last cut does not
cut again); every success adds ``1 / limit``, so the limit climbs back by one per round of
successes up to the configured ceiling. An occasional 429 alone changes nothing: it is retried
after its Retry-After.

``Breaker`` counts consecutive infrastructure failures (5xx, timeouts, dropped connections)
across all calls; at ``threshold`` it opens and every call stops at once. A failure that cannot
heal by retrying (connection refused, DNS, 401/403/404) opens it straight away.
"""

from __future__ import annotations

import asyncio
import collections
import logging

log = logging.getLogger("evalledger.judge")

STORM_SHARE = 0.3        # 429s are a storm when their moving share reaches this
SHARE_WEIGHT = 1 / 32    # weight of the newest answer: a steady tenth of 429s stays near 0.1


class AdaptiveLimit:
    """An asyncio limit on calls in flight whose size follows 429s (AIMD); one per event loop."""

    def __init__(self, ceiling: int):
        self.ceiling = ceiling
        self.limit = float(ceiling)
        self.in_flight = 0
        self.round = 0               # bumped at every cut: a 429 from an older round cuts nothing
        self.share = 0.0             # moving share of 429 answers
        self.changes: list[tuple[int, int]] = []   # (before, after) of every change, in order
        self._waiters: collections.deque[asyncio.Future] = collections.deque()

    @property
    def current(self) -> int:
        """The number of calls allowed in flight now."""
        return max(1, int(self.limit))

    async def acquire(self) -> int:
        """Wait for a free slot; returns the round the call is sent in (hand it to on_rate_limited).

        A freed slot is handed straight to the first waiter (``_wake``): it stays counted in
        ``in_flight``, so the waiter need not check again and no newcomer can take it first.
        """
        if self.in_flight < self.current and not self._waiters:
            self.in_flight += 1
            return self.round
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except BaseException:   # cancelled (or closed) while waiting
            if waiter.done() and not waiter.cancelled():
                self.release()   # handed a slot, then cancelled: pass the slot on
            elif waiter in self._waiters:   # not yet passed over by _wake
                self._waiters.remove(waiter)
            raise
        return self.round

    def release(self) -> None:
        """Give a slot back (to the first waiter, when one waits and the limit allows)."""
        self.in_flight -= 1
        self._wake()

    def on_success(self) -> None:
        """An answer that was not a 429: the share falls, the limit grows by 1 / limit."""
        self.share *= 1 - SHARE_WEIGHT
        if self.limit < self.ceiling:
            before = self.current
            self.limit = min(float(self.ceiling), self.limit + 1 / self.limit)
            if self.current != before:
                self._changed(before, "recovering")
                self._wake()

    def on_rate_limited(self, sent_in_round: int) -> None:
        """A 429: the share rises; in a storm, halve the limit (once per round)."""
        self.share = self.share * (1 - SHARE_WEIGHT) + SHARE_WEIGHT
        if self.share < STORM_SHARE or sent_in_round != self.round or self.current == 1:
            return
        before = self.current
        self.limit = max(1.0, self.limit / 2)
        self.round += 1
        self._changed(before, "429s")

    def _changed(self, before: int, why: str) -> None:
        self.changes.append((before, self.current))
        log.info("judge concurrency %d -> %d (%s)", before, self.current, why)

    def _wake(self) -> None:
        """Hand the free slots to the waiters, first come first served (each counted as in flight)."""
        waiters = self._waiters
        while waiters and self.in_flight < self.current:
            waiter = waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)


class Breaker:
    """Consecutive infrastructure failures across calls; open means: stop the run."""

    def __init__(self, threshold: int):
        self.threshold = threshold
        self.consecutive = 0
        self.reason: str | None = None
        self.opened = asyncio.Event()

    @property
    def is_open(self) -> bool:
        """True once the run must stop."""
        return self.reason is not None

    def success(self) -> None:
        """The server answered: the count starts again."""
        self.consecutive = 0

    def failure(self, reason: str) -> None:
        """One more infrastructure failure; opens the breaker at the threshold."""
        self.consecutive += 1
        if self.consecutive >= self.threshold:
            self.trip(f"{self.consecutive} failures in a row, the last: {reason}")

    def trip(self, reason: str) -> None:
        """Open at once (a failure retrying cannot heal); the first reason is kept."""
        if self.reason is None:
            self.reason = reason
            self.opened.set()

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds``, or less if the breaker opens meanwhile."""
        if seconds <= 0 or self.is_open:
            return
        # Not asyncio.wait_for: on Python 3.11 it swallows a cancel that lands as the breaker opens.
        opening = asyncio.ensure_future(self.opened.wait())
        try:
            await asyncio.wait({opening}, timeout=seconds)
        finally:
            opening.cancel()
