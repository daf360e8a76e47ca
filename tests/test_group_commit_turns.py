"""The judge calls' group committer hands the writer thread one batch per turn of the event loop.

Replies read in one turn (64 calls in flight) were each a put that woke the writer thread; now
they go over together at the end of the turn, and ``close`` still commits what a loop recorded
but never handed over (a paid call is never lost).
"""

from __future__ import annotations

import asyncio

import pytest

from evalledger import ledger
from evalledger.stages.judge.group_commit import GroupCommitter
from evalledger.stages.judge.recording import call_event, index_for


@pytest.fixture()
def led(tmp_path):
    with ledger.open_ledger(tmp_path / "home") as handle:
        yield handle


def _event(case: str, hash: str):
    payload = {"role": "parse", "backend": "openai", "model": "m", "request_hash": hash, "attempt": 1,
               "error": None, "reply": {"values": {}}}
    return call_event(case, payload, 1, 1)


def test_the_calls_recorded_in_one_turn_are_one_transaction(led):
    async def go():
        committer = GroupCommitter(led, index_for(led))
        try:
            stored = await asyncio.gather(*(committer.record(_event(f"c{i}", f"{i:064x}")) for i in range(5)))
        finally:
            committer.close()
        return committer.batches, stored

    batches, stored = asyncio.run(go())
    assert batches == 1
    assert [e.stream for e in stored] == [f"case:c{i}" for i in range(5)]
    instants = {e.meta["recorded_at"] for e in led.read(types=["judge.called"])}
    assert len(instants) == 1   # one append: one recorded_at for the batch


def test_close_commits_what_a_stopped_loop_recorded_but_never_handed_over(led):
    committer = GroupCommitter(led, index_for(led))
    loop = asyncio.new_event_loop()

    async def start_recording():
        task = asyncio.ensure_future(committer.record(_event("c1", "a" * 64)))
        await asyncio.sleep(0)   # the task has queued its event; the hand-over waits for the next turn
        loop.stop()
        return task

    task = loop.create_task(start_recording())
    loop.run_forever()   # stopped in the same turn: the hand-over never ran
    assert task.done() and [e.stream for e in led.read(types=["judge.called"])] == []
    committer.close()
    assert [e.stream for e in led.read(types=["judge.called"])] == ["case:c1"]
    for pending in asyncio.all_tasks(loop):
        pending.cancel()
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()
