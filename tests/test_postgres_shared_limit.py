"""One concurrency budget per judge endpoint, kept in the PostgreSQL store and shared by all its
workers (real ``run`` processes, a real stand-in judge counting the requests it answers at once);
a SIGKILLed worker's slots come back. A SQLite home keeps its in-process limit.

Needs a server: EVALLEDGER_TEST_PG (``eval "$(bash .ci/start-postgres)"``).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time

import pytest

from evalledger import ledger
from evalledger.ledger.call_slots import FULL, NO_BUDGET
from evalledger.stages.judge import JudgeSettings, make_judge
from evalledger.stages.judge.shared_limit import SharedLimit, endpoint_key
from evalledger.testing.stand_in import Slow, StandIn, StandInThread
from postgres_support import fresh_store_url, postgres_home
from test_postgres_workers import ingested_store, outcomes, request_seeded_reply, worker

BUDGET = 3
TRAIT = {"question": "What is 15 multiplied by 7?", "response": "105",
         "trait": {"name": "completeness", "kind": "score", "min_score": 1, "max_score": 5}}


def wait_for(condition, seconds: float, what: str) -> None:
    """Poll ``condition`` until true; fail naming ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_workers_share_one_budget_per_endpoint_and_a_killed_workers_slots_come_back(tmp_path):
    stand_in = StandIn(delay=0.05, reply_fn=request_seeded_reply, cancel_on_disconnect=True)
    # The first three requests hang: the first worker then holds every slot of the budget.
    stand_in.script(*[Slow(60)] * BUDGET)
    with StandInThread(stand_in) as server:
        store, home = ingested_store(tmp_path, "team")
        first = worker(tmp_path / "m0", store, server.base_url, 1.5, 4, "--shared-concurrency", str(BUDGET))
        wait_for(lambda: stand_in.in_flight == BUDGET, 60, "the first worker to fill the budget")
        # Two more workers, each allowed 4 calls at once, follow the budget kept in the store.
        others = [worker(tmp_path / f"m{n}", store, server.base_url, 1.5, 4) for n in (1, 2)]
        time.sleep(2.0)
        assert len(stand_in.requests) == BUDGET, "a worker sent a call while the budget was all held"
        assert stand_in.max_in_flight == BUDGET

        first.send_signal(signal.SIGKILL)
        first.wait()
        for proc in others:
            assert proc.wait(timeout=120) in (0, 1), proc.stdout.read()
        assert len(stand_in.requests) > 10 * BUDGET   # the slots came back: the others judged everything
        assert stand_in.max_in_flight == BUDGET       # and never more than the budget at once

    with ledger.open_ledger(home, readonly=True) as led:
        opened = {e.data["case_id"] for e in led.read(types=["case.opened"])}
        assert led.verify().ok
    judged = outcomes(home)
    assert set(judged) == opened and set(judged.values()) == {1}


def test_slots_are_taken_up_to_the_budget_given_back_and_freed_with_their_session(tmp_path):
    store = fresh_store_url()
    with ledger.open_ledger(store) as led:
        a, b = led.call_slots(), led.call_slots()
        try:
            assert a.take("http://judge/v1") is NO_BUDGET   # no budget: calls go without a slot
            a.set_budget("http://judge/v1", 2)
            assert b.budget("http://judge/v1") == 2
            assert sorted([a.take("http://judge/v1"), a.take("http://judge/v1")]) == [0, 1]
            assert a.take("http://judge/v1") == FULL and b.take("http://judge/v1") == FULL
            assert b.take("http://other/v1") is NO_BUDGET   # one budget per endpoint
            a.give("http://judge/v1", 1)
            assert b.take("http://judge/v1") == 1
            a.close()                                        # the session ends: slot 0 is free again
            took: list = []                                  # (once the server has ended it: a moment)
            wait_for(lambda: took.append(b.take("http://judge/v1")) or took[-1] == 0, 10, "slot 0 to come back")
            b.set_budget("http://judge/v1", 0)               # 0 removes the budget
            assert b.take("http://judge/v1") is NO_BUDGET
        finally:
            a.close()
            b.close()


def test_a_slot_is_held_around_each_call_of_the_judge_port(tmp_path):
    home = postgres_home(tmp_path / "h")
    with StandInThread(StandIn(delay=0.3)) as server, ledger.open_ledger(home) as led:
        settings = JudgeSettings(backend="openai", model="m", base_url=server.base_url, shared_concurrency=1,
                                 concurrency=4)

        async def three_calls():
            async with make_judge(settings, led) as judge:
                assert judge.limit.shared
                await asyncio.gather(*(judge.call("score_trait", {**TRAIT, "response": f"{n}"}, case_id=f"c{n}")
                                       for n in range(3)))
        asyncio.run(three_calls())
        assert server.max_in_flight == 1 and len(server.requests) == 3
        check = led.call_slots()
        try:
            assert check.budget(endpoint_key(server.base_url)) == 1
            assert check.take(endpoint_key(server.base_url)) == 0   # given back after each call
        finally:
            check.close()


def test_a_home_of_its_own_keeps_the_in_process_limit(tmp_path):
    with ledger.open_ledger(tmp_path / "h") as led:
        assert led.call_slots() is None
        judge = make_judge(JudgeSettings(backend="openai", model="m", base_url="http://127.0.0.1:9/v1"), led)
        assert not judge.limit.shared
    ledger.init_home(tmp_path / "home")
    result = subprocess.run([sys.executable, "-m", "evalledger", "--home", str(tmp_path / "home"), "run",
                             "--judge", "openai", "--model", "m", "--shared-concurrency", "2"],
                            capture_output=True, text=True, timeout=60,
                            env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "PATH": "/usr/bin:/bin"})
    assert result.returncode == 2, result.stderr
    assert "--shared-concurrency needs a PostgreSQL store" in result.stderr


def test_endpoint_key_drops_credentials_and_query():
    assert endpoint_key("https://user:secret@api.example.com:8443/v1/?x=1") == "https://api.example.com:8443/v1"


@pytest.fixture(autouse=True)
def _server_needed(request):
    if request.node.name.startswith(("test_a_home", "test_endpoint")):
        return
    from postgres_support import pg_url
    pg_url()


def test_a_call_cancelled_while_taking_a_slot_gives_it_back(tmp_path):
    store = fresh_store_url()
    with ledger.open_ledger(store) as led:
        slots = led.call_slots()
        slots.set_budget("http://judge/v1", 1)
        limit = SharedLimit(slots, "http://judge/v1")
        original = slots.take

        def slow_take(endpoint):   # the store answers after the call was given up
            time.sleep(0.3)
            return original(endpoint)
        slots.take = slow_take

        async def cancelled_call():
            async def call():
                async with limit.slot():
                    await asyncio.sleep(10)
            task = asyncio.ensure_future(call())
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await asyncio.sleep(0.6)   # the try ends in its thread, and its slot is given back
        try:
            asyncio.run(cancelled_call())
            assert slots.held("http://judge/v1") == 0
            assert original("http://judge/v1") == 0
        finally:
            limit.close()
