"""The AIMD limit and the circuit breaker as units: what moves them and what does not."""

from __future__ import annotations

import asyncio
import random

from evalledger.stages.judge.flow_control import AdaptiveLimit, Breaker


def test_a_steady_tenth_of_429s_never_cuts_the_limit():
    limit = AdaptiveLimit(16)
    rng = random.Random(7)
    for _ in range(5000):
        if rng.random() < 0.1:
            limit.on_rate_limited(limit.round)
        else:
            limit.on_success()
    assert limit.changes == [] and limit.current == 16


def test_a_storm_halves_once_per_round_then_successes_bring_it_back():
    limit = AdaptiveLimit(16)
    run = 0
    while not limit.changes:
        limit.on_rate_limited(0)            # requests sent in round 0: a run of 429s cuts, once
        run += 1
    assert 8 <= run <= 16                   # a run of them, not one
    assert limit.current == 8 and limit.round == 1 and limit.changes == [(16, 8)]
    for _ in range(5):
        limit.on_rate_limited(0)            # late 429s of requests sent before the cut: no second cut
    assert limit.current == 8
    limit.on_rate_limited(1)                # a 429 of a request sent after the cut: cut again
    assert limit.current == 4
    while limit.current < 16:
        limit.on_success()
    assert limit.changes[:2] == [(16, 8), (8, 4)] and limit.changes[-1] == (15, 16)
    successes_needed = sum(range(4, 16))    # one more slot per round of `limit` successes
    assert len(limit.changes) == 2 + 12 and successes_needed == 114


def test_the_limit_bounds_calls_in_flight_and_a_cancelled_waiter_passes_its_turn_on():
    async def go():
        limit = AdaptiveLimit(2)
        await limit.acquire()
        await limit.acquire()
        first = asyncio.create_task(limit.acquire())
        second = asyncio.create_task(limit.acquire())
        await asyncio.sleep(0)
        assert not first.done() and not second.done()
        limit.release()                     # wakes `first` ...
        first.cancel()                      # ... which is cancelled before it runs
        await asyncio.wait_for(second, 2)   # so `second` gets the slot instead of waiting for ever
        assert limit.in_flight == 2

    asyncio.run(go())


def test_the_breaker_opens_after_n_in_a_row_and_a_success_starts_the_count_again():
    breaker = Breaker(3)
    breaker.failure("HTTP 503")
    breaker.failure("HTTP 503")
    breaker.success()
    breaker.failure("HTTP 503")
    breaker.failure("HTTP 502")
    assert not breaker.is_open
    breaker.failure("HTTP 504")
    assert breaker.is_open and breaker.reason == "3 failures in a row, the last: HTTP 504"
    breaker.trip("later reason")
    assert breaker.reason.endswith("HTTP 504")   # the first reason is kept


def test_a_sleep_ends_when_the_breaker_opens():
    async def go():
        breaker = Breaker(1)
        breaker.opened = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, breaker.trip, "HTTP 401")
        started = loop.time()
        await breaker.sleep(30)
        return loop.time() - started

    assert asyncio.run(go()) < 5
