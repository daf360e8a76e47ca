"""The judge-call path's per-call costs (issue 15, target 5): what was cut must stay cut, and
nothing it cut may change what is sent, recorded or decided.

- a freed concurrency slot goes straight to the first waiter (no newcomer takes it first);
- a case's effective config is worked out once per distinct benchmark config, and each case
  still carries its own config's hash;
- the call index does not read back the calls this process is committing right now, and still
  reads what others appended once those are folded;
- paid calls are recorded by one writer thread that ends when the port closes;
- check_logic's indented chains are json's bytes exactly (the prompt is hashed and recorded);
- a declared reply body is read whole, and a compressed one is still held to the cap.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import sqlite3
import subprocess
import sys
import threading

import pytest
from aiohttp import web

from evalledger import ledger
from evalledger.stages import config as stage_config
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.judge import JudgeSettings, make_judge
from evalledger.stages.judge.flow_control import AdaptiveLimit
from evalledger.stages.judge.prompts_audit import logic_messages
from evalledger.stages.judge.recording import call_event, index_for, record_events
from evalledger.stages.judge.roles import CheckLogicRequest
from evalledger.testing.stand_in import StandIn, StandInThread
from stages_support import RESPONSE, home_with, template_benchmark


def _takes_at_once(limit: AdaptiveLimit) -> bool:
    """Whether an acquire asked right now gets a slot without waiting (a waiting one is withdrawn)."""
    asking = limit.acquire()
    try:
        asking.send(None)
    except StopIteration:
        return True
    asking.close()
    return False


def test_a_freed_slot_goes_to_the_first_waiter_not_to_a_newcomer():
    async def go():
        limit = AdaptiveLimit(1)
        await limit.acquire()
        first = asyncio.create_task(limit.acquire())
        await asyncio.sleep(0)
        limit.release()                                   # handed to `first`, which has not run yet
        assert not _takes_at_once(limit)                  # a newcomer cannot take it first
        assert limit.in_flight == 1 and len(limit._waiters) == 0
        await asyncio.wait_for(first, 2)
        limit.release()
        assert _takes_at_once(limit) and limit.in_flight == 1

    asyncio.run(go())


def test_a_raised_limit_hands_the_new_slots_to_waiters_and_a_cut_one_hands_none(monkeypatch):
    async def go():
        limit = AdaptiveLimit(4)
        limit.limit = 2.0                                 # as after a 429 storm
        await limit.acquire()
        await limit.acquire()
        waiting = [asyncio.create_task(limit.acquire()) for _ in range(3)]
        await asyncio.sleep(0)
        limit.limit = 1.0                                 # cut again: a release frees nothing
        limit.release()
        await asyncio.sleep(0)
        assert not any(w.done() for w in waiting) and limit.in_flight == 1
        while limit.current < 4:                          # recovering: each new slot goes to a waiter
            limit.on_success()
        await asyncio.wait_for(asyncio.gather(*waiting), 2)
        assert limit.in_flight == 4

    asyncio.run(go())


def test_a_case_config_is_worked_out_once_per_distinct_config_and_each_case_keeps_its_hash(tmp_path, monkeypatch):
    responses = [{"question_id": "q1", "model": f"model-{i}", "text": RESPONSE} for i in range(6)]
    home = home_with(tmp_path, ("a.json", template_benchmark(name="plain", responses=responses)),
                     ("b.json", template_benchmark(name="deep", responses=responses,
                                                   config={"deep_judgment_enabled": True})))
    calls = []
    real = stage_config.effective_config

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    import evalledger.stages.dispatcher as dispatcher
    monkeypatch.setattr(dispatcher, "effective_config", counted)
    with ledger.open_ledger(home) as led:
        summary = run_until_idle(led)
        assert summary.judged == 12
        opened = {e.data["case_id"]: e.data.get("config") or {} for e in led.read(types=["case.opened"])}
        judged = list(led.read(types=["case.judged"]))
    # The run's own config twice, then each distinct case config once for run.started and once for
    # the cases: not once per case (12 cases, 2 configs).
    assert len([c for c in calls if c[0] is not None]) == 4
    for event in judged:
        assert event.meta["config_hash"] == real(opened[event.data["case_id"]]).hash()
    assert len({e.meta["config_hash"] for e in judged}) == 2


def _called(case: str, hash: str):
    payload = {"role": "parse", "backend": "openai", "model": "m", "request_hash": hash, "attempt": 1,
               "error": None, "reply": {"values": {}}}
    return call_event(case, payload, 1, 1)


def test_the_index_does_not_read_back_calls_being_committed_and_reads_others_once_they_are_folded(tmp_path):
    home = tmp_path / "home"
    ledger.init_home(home)
    with ledger.open_ledger(home) as led, ledger.open_ledger(home) as other:
        index = index_for(led)
        record_events(led, index, [_called("c1", "a" * 64)])
        index.catch_up()                                  # caught up once: our own event, nothing read
        assert index.successes.keys() == {"a" * 64} and index.last_seq == 1
        index.appending += 1                              # an append of ours under way (the recording thread's)
        other.append(_called("c2", "b" * 64))             # ... and one by another writer, indistinguishable yet
        seen = index.last_seq
        index.catch_up()
        assert index.last_seq == seen and "b" * 64 not in index.successes   # nothing read back now
        index.appending -= 1                              # ours folded: the rest is someone else's
        assert index.success("b" * 64) is not None        # read at the next look


def test_paid_calls_are_recorded_by_one_writer_thread_that_ends_with_the_port(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    home = tmp_path / "home"
    ledger.init_home(home)
    request = {"context_input": "Revenue rose 5%.", "model_output": "Revenue rose 5%.", "facts": ["f"]}
    with StandInThread(StandIn(delay=0.01)) as stand_in, ledger.open_ledger(home) as led:
        async def go():
            settings = JudgeSettings(backend="openai", model="m", base_url=stand_in.base_url, concurrency=8)
            async with make_judge(settings, led) as judge:
                await asyncio.gather(*(judge.call("check_facts", {**request, "facts": [f"fact {i}"]},
                                                  case_id=f"c{i}") for i in range(16)))
                writers = [t for t in threading.enumerate() if t.name == "judge-record"]
                assert len(writers) == 1
                committer = judge.records._writer
                assert committer is not None and 1 <= committer.batches <= 16
            assert not any(t.name == "judge-record" for t in threading.enumerate())

        asyncio.run(go())
        assert len(list(led.read(types=["judge.called"]))) == 16


@pytest.mark.parametrize("chains", [
    [],
    [{"premises": ["Revenue rose 5%", "costs fell"], "conclusion": "margins grew"}],
    [{"premises": ["é \u2028 \u00a0 \U0001f600 \\ \" / \x7f \x1f"], "conclusion": ""}],
    [{"premises": ["a lone \ud800 surrogate"], "conclusion": "x"}],   # orjson refuses it: json writes it
])
def test_check_logic_chains_are_json_indented_byte_for_byte(chains):
    request = CheckLogicRequest(context_input="ctx", model_output="out", reasoning_chains=chains, max_errors=3)
    user = logic_messages(request)[1]["content"]
    expected = json.dumps([c.model_dump() for c in request.reasoning_chains], indent=2, ensure_ascii=False)
    assert user.endswith("REASONING CHAINS TO CHECK:\n" + expected)


def _completion_body(text: str) -> bytes:
    return json.dumps({"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()


def test_a_compressed_reply_that_inflates_past_the_cap_is_refused_and_a_declared_one_is_read_whole(tmp_path):
    """The body read in one go is only one whose declared length is what is read: a gzip body
    declares its compressed length, so it is still read chunk by chunk against the cap."""
    small = _completion_body('{"errors": []}')
    huge = gzip.compress(_completion_body('{"errors": []}' + " " * 3_000_000))

    async def go():
        async def handler(request: web.Request) -> web.Response:
            if "INFLATE" in (await request.json())["messages"][1]["content"]:
                return web.Response(body=huge, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})
            return web.Response(body=small, content_type="application/json")

        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
        try:
            settings = JudgeSettings(backend="openai", model="m", base_url=url, max_reply_bytes=1_000_000,
                                     max_invalid_replies=0, record=False)
            async with make_judge(settings, None) as judge:
                ok = await judge.call("check_facts", {"context_input": "c", "model_output": "o", "facts": []},
                                      case_id="fine")
                assert ok.errors == []
                with pytest.raises(Exception, match="over the 1000000-byte cap"):
                    await judge.call("check_facts", {"context_input": "INFLATE", "model_output": "o", "facts": []},
                                     case_id="big")
        finally:
            await runner.cleanup()

    import os
    os.environ.setdefault("OPENAI_API_KEY", "sk-test-not-a-real-key")
    asyncio.run(go())


def test_a_run_at_high_concurrency_against_the_stand_in_records_each_call_once(tmp_path, monkeypatch):
    """The whole path at once: audit cases through run_until_idle at --concurrency 32."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    rows = [{"id": i, "tag": "clean", "difficulty": "easy", "description": f"case {i}",
             "context_input": f"Revenue rose {i}% in quarter {i}.", "model_output": f"Revenue rose {i}%.",
             "expected_credit_score": 5} for i in range(40)]
    home = home_with(tmp_path, ("cases.audit.jsonl", rows))
    with StandInThread(StandIn(delay=0.01)) as stand_in, ledger.open_ledger(home) as led:
        settings = RunSettings(judge_backend="openai", judge_model="m",
                               judge_options={"base_url": stand_in.base_url, "concurrency": 32})
        summary = run_until_idle(led, settings)
        assert (summary.judged, summary.failed, summary.model_calls) == (40, 0, 120)
        assert 1 < stand_in.max_in_flight <= 32
        called = list(led.read(types=["judge.called"]))
        assert len(called) == len({e.id for e in called}) == 120
        assert len(list(led.read(types=["credit.scored"]))) == 40


class _OutcomeThreads(ledger.Ledger):
    """A real ledger noting the thread of every append that holds a case's outcome."""

    def __init__(self, led: ledger.Ledger):
        super().__init__(led.recorder, led.home)
        self.threads: set[str] = set()

    def append(self, events, expected_version=None, tracking=None):
        """Append, noting the thread when the batch holds a ``credit.scored``."""
        batch = list(events) if isinstance(events, list) else [events]
        if any(e.type == "credit.scored" for e in batch):
            self.threads.add(threading.current_thread().name)
        return super().append(events, expected_version, tracking)


def test_a_run_against_a_server_commits_its_cases_off_the_event_loop_and_an_offline_run_on_it(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    rows = [{"id": i, "tag": "clean", "difficulty": "easy", "description": f"case {i}",
             "context_input": f"Revenue rose {i}%.", "model_output": f"Revenue rose {i}%.",
             "expected_credit_score": 5} for i in range(12)]
    served = home_with(tmp_path / "served", ("cases.audit.jsonl", rows))
    offline = home_with(tmp_path / "offline", ("cases.audit.jsonl", rows))
    with StandInThread(StandIn(delay=0.01)) as stand_in, ledger.open_ledger(served) as led:
        watched = _OutcomeThreads(led)
        settings = RunSettings(judge_backend="openai", judge_model="m",
                               judge_options={"base_url": stand_in.base_url, "concurrency": 8})
        summary = run_until_idle(watched, settings)
        assert (summary.judged, summary.failed) == (12, 0)
        assert watched.threads and all(name.startswith("case-commit") for name in watched.threads)
        last = max(e.seq for e in led.read(types=["credit.scored"]))
        assert led.tracking_position("stage:audit") >= last        # the watermark followed the commits
        assert not any(t.name.startswith("case-commit") for t in threading.enumerate())
    with ledger.open_ledger(offline) as led:
        watched = _OutcomeThreads(led)
        assert run_until_idle(watched).judged == 12
        assert watched.threads == {threading.current_thread().name}   # CPU-bound: on the loop, as before


def test_a_stand_in_that_forgets_its_requests_still_counts_them():
    """A benchmark's server answering thousands of calls keeps no prompt (it grew slower as it did)."""
    async def go():
        stand_in = StandIn(keep_requests=False)
        url = await stand_in.start()
        try:
            settings = JudgeSettings(backend="openai", model="m", base_url=url, record=False)
            async with make_judge(settings, None) as judge:
                for i in range(3):
                    await judge.call("check_facts", {"context_input": f"c{i}", "model_output": "o", "facts": []},
                                     case_id=f"c{i}")
        finally:
            await stand_in.stop()
        return stand_in

    import os
    os.environ.setdefault("OPENAI_API_KEY", "sk-test-not-a-real-key")
    stand_in = asyncio.run(go())
    assert len(stand_in.requests) == 3 and all(r["body"] is None for r in stand_in.requests)


_EXIT_WITHOUT_CLOSING = """
import asyncio, sys
from evalledger import ledger
from evalledger.stages.judge import JudgeSettings, make_judge

async def go(led):
    settings = JudgeSettings(backend="openai", model="m", base_url=sys.argv[2], concurrency=1)
    judge = make_judge(settings, led)          # never closed: the program just ends
    request = {"context_input": "Revenue rose 5%.", "model_output": "Revenue rose 5%.", "facts": ["f"]}
    try:
        await asyncio.wait_for(judge.call("check_facts", request, case_id="c1"), 1.0)
    except asyncio.TimeoutError:
        print("gave up waiting", flush=True)   # the reply came, its record waits for the write lock

led = ledger.open_ledger(sys.argv[1])
asyncio.run(go(led))
"""


def test_a_paid_call_queued_for_recording_is_committed_when_the_program_exits_without_closing(tmp_path, monkeypatch):
    """A caller that gives up waiting, in a program that never closes its judge, still gets its
    paid call recorded: the exit waits for the writer thread instead of killing it mid-queue."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    home = tmp_path / "home"
    ledger.init_home(home)
    with StandInThread(StandIn()) as stand_in:
        blocker = sqlite3.connect(home / "ledger.db", isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")                  # another writer holds the ledger
        child = subprocess.Popen([sys.executable, "-c", _EXIT_WITHOUT_CLOSING, str(home), stand_in.base_url],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "gave up waiting"
            with pytest.raises(subprocess.TimeoutExpired):
                child.wait(timeout=1.0)                     # the exit waits for the record to commit
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        _, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
    with ledger.open_ledger(home) as led:
        calls = list(led.read(types=["judge.called"]))
    assert len(calls) == 1 and calls[0].data["case_id"] == "c1"
