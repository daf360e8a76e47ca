"""An answer the server sends on a pooled connection while no request is out on it.

aiohttp keeps such bytes in the idle connection's buffer and hands them, as the answer, to the
next request sent on that connection: the judge recorded one request's reply (another case's
verdict) as the answer to the next, and every later answer on that connection one behind. The
backend now refuses a connection that holds an answer before its request is sent (dropped,
the attempt retried on another), through the documented ``make_judge`` API against a raw server.
"""

from __future__ import annotations

import asyncio

from evalledger import ledger
from evalledger.stages.judge import JudgeSettings, make_judge
from raw_judge_server import RawJudgeServer, completion_bytes

FRESH = {"abstained": False, "evidence": "", "reasoning": "answered this request"}
STALE = {"abstained": True, "evidence": "STALE", "reasoning": "an answer to no request"}


def test_an_answer_sent_to_no_request_is_never_taken_for_the_next(home):
    with RawJudgeServer(lambda body, seen: None, reply_fn=lambda request: FRESH,
                        unasked=completion_bytes({}, STALE)) as server:
        settings = JudgeSettings(backend="openai", model="raw-1", base_url=server.base_url, concurrency=1,
                                 backoff_base_s=0.05)

        async def two_calls():
            with ledger.open_ledger(home) as led:
                async with make_judge(settings, led) as judge:
                    first = await judge.call("detect_abstention", {"question": "q1?", "response": "r1"},
                                             case_id="case-1")
                    await asyncio.sleep(0.3)   # the unasked answer arrives on the idle connection
                    second = await judge.call("detect_abstention", {"question": "q2?", "response": "r2"},
                                              case_id="case-2")
                    return first, second

        first, second = asyncio.run(two_calls())
    assert first.reasoning == second.reasoning == FRESH["reasoning"]
    with ledger.open_ledger(home) as led:
        calls = [e.data for e in led.read(types=["judge.called"])]
    assert not any("STALE" in str(c) for c in calls)
    refused = [c for c in calls if c.get("error")]
    assert [c["case_id"] for c in refused] == ["case-2"] and "before its request" in refused[0]["error"]
