"""The recorded-call core the judge and search ports share (``stages.judge.recorded_calls``).

Backends only yield attempts; the port records them. A backend written here, knowing nothing of
ports or ledgers, shows that every attempt it yields lands as one ``judge.called`` event.
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalledger import ledger
from evalledger.stages.judge import JudgeCallFailed, JudgeSettings, make_judge
from evalledger.stages.judge.calls import Attempt, PendingCall
from evalledger.stages.judge.offline import OfflineBackend
from evalledger.stages.judge.port import Judge
from evalledger.stages.judge.recorded_calls import RecordedCalls, redact, request_hashes
from evalledger.stages.judge.registry import role as role_spec
from evalledger.stages.judge.replay import ReplayBackend
from evalledger.stages.search import SearchSettings, make_search

REPO = Path(__file__).resolve().parents[1]
MOON = "The first moon landing was on July 20, 1969. Neil Armstrong commanded Apollo 11."
PARSE = {"question": "When?", "response": MOON,
         "fields": [{"name": "year", "type": "int", "description": "Year of the landing"}]}


class FlakyBackend:
    """Two failed attempts, then the offline heuristics' answer: attempts only, no recording."""

    name, model, network = "flaky", "flaky-1", False

    def __init__(self, failures: int = 2):
        self.failures = failures
        self.asked = 0

    def identities(self, role):
        return [(self.name, self.model)]

    async def attempts(self, call: PendingCall):
        self.asked += 1
        number = call.first_attempt
        for _ in range(self.failures):
            yield Attempt(number, error=f"flaky failure {number}")
            number += 1
        async for attempt in OfflineBackend().attempts(call):
            attempt.number = number
            yield attempt

    async def aclose(self):
        return None


class GivingUp(FlakyBackend):
    """One failure, then it gives up."""

    async def attempts(self, call: PendingCall):
        yield Attempt(call.first_attempt, error="no")
        raise JudgeCallFailed(call.role, call.case_id, call.request_hash, "no", 1)


def calls_in(home) -> list:
    with ledger.open_ledger(home) as led:
        return [e.data for e in led.read(types=["judge.called"])]


def test_every_attempt_a_backend_yields_is_recorded_by_the_port_in_order(home):
    backend = FlakyBackend()

    async def go():
        with ledger.open_ledger(home) as led:
            async with Judge(JudgeSettings(), led, backend) as judge:
                first = await judge.call("parse", PARSE, case_id="c1")
                again = await judge.call("parse", PARSE, case_id="c1")   # reused, not asked
                return first, again

    first, again = asyncio.run(go())
    assert first.values == {"year": 1969} and again == first and backend.asked == 1
    recorded = calls_in(home)
    assert [(c["attempt"], c["error"] is None, c["backend"], c["model"]) for c in recorded] == [
        (1, False, "flaky", "flaky-1"), (2, False, "flaky", "flaky-1"), (3, True, "flaky", "flaky-1")]
    assert recorded[0]["error"] == "flaky failure 1" and recorded[2]["reply"] == {"values": {"year": 1969}}
    assert len({c["request_hash"] for c in recorded}) == 1


def test_a_backend_that_gives_up_has_its_failure_recorded_then_raised(home):
    async def go():
        with ledger.open_ledger(home) as led:
            async with Judge(JudgeSettings(), led, GivingUp()) as judge:
                await judge.call("parse", PARSE, case_id="c1")

    with pytest.raises(JudgeCallFailed, match="no"):
        asyncio.run(go())
    [call] = calls_in(home)
    assert call["error"] == "no" and call["attempt"] == 1


HEIGHT = {"question": "How tall is it?", "response": "It is 3.5 m tall.",
          "fields": [{"name": "height", "type": "float", "description": "height in metres"}]}


class UnstorableFirst(FlakyBackend):
    """A reply the ledger cannot hold (a lone surrogate); told so, it yields it again as invalid, then a
    good one."""

    def __init__(self, asks_again: bool = True):
        super().__init__()
        self.asks_again = asks_again
        self.told: list = []

    async def attempts(self, call: PendingCall):
        bad = call.spec.validate_reply(call.request, {"values": {"height": 3.5}})
        bad.values["note"] = "\ud800"   # no UTF-8 for it: the ledger refuses the event
        attempt = Attempt(call.first_attempt, reply=bad, raw_reply='{"values": {"note": "\\ud800"}}')
        refused = yield attempt
        self.told.append(refused)
        if refused is None or not self.asks_again:
            return
        attempt.reply, attempt.error = None, f"invalid reply: cannot be stored: {refused}"
        self.told.append((yield attempt))
        good = call.spec.validate_reply(call.request, {"values": {"height": 3.5}})
        self.told.append((yield Attempt(call.first_attempt + 1, reply=good)))


def test_a_reply_the_ledger_refuses_goes_back_to_the_backend_which_records_it_invalid_and_asks_again(home):
    backend = UnstorableFirst()

    async def go():
        with ledger.open_ledger(home) as led:
            async with Judge(JudgeSettings(), led, backend) as judge:
                return await judge.call("parse", HEIGHT, case_id="c1")

    reply = asyncio.run(go())
    assert reply.values == {"height": 3.5}
    refusal, *acknowledged = backend.told
    assert "surrogates not allowed" in refusal and acknowledged == [None, None]
    first, second = calls_in(home)
    assert first["reply"] is None and first["error"] == f"invalid reply: cannot be stored: {refusal}"
    assert first["raw_reply"] == '{"values": {"note": "\\ud800"}}' and first["attempt"] == 1
    assert second["reply"] == {"values": {"height": 3.5}} and second["attempt"] == 2


def test_replay_passes_the_refusal_on_to_its_live_backend(home, tmp_path):
    """Under replay --live, the live backend hears the refusal too and asks again."""
    source = ledger.init_home(tmp_path / "source")   # records nothing: every request goes live
    live = UnstorableFirst()

    async def go():
        with ledger.open_ledger(home) as led:
            backend = ReplayBackend(JudgeSettings(), led, source, live=live)
            async with Judge(JudgeSettings(), led, backend) as judge:
                return await judge.call("parse", HEIGHT, case_id="c1")

    assert asyncio.run(go()).values == {"height": 3.5}
    assert "surrogates not allowed" in live.told[0] and live.told[1:] == [None, None]
    first, second = calls_in(home)
    assert first["error"].startswith("invalid reply: cannot be stored") and first["backend"] == "flaky"
    assert second["reply"] == {"values": {"height": 3.5}}


def test_a_backend_that_stops_at_a_refused_reply_fails_the_call_and_the_ledger_stays_whole(home):
    with ledger.open_ledger(home) as led:
        before = led.head().seq

    async def go():
        with ledger.open_ledger(home) as led:
            async with Judge(JudgeSettings(), led, UnstorableFirst(asks_again=False)) as judge:
                await judge.call("parse", HEIGHT, case_id="c1")

    with pytest.raises(JudgeCallFailed, match="cannot be stored"):
        asyncio.run(go())
    with ledger.open_ledger(home) as led:
        assert led.head().seq == before and led.verify().ok


def test_a_backend_on_its_own_records_nothing(home):
    """Backends do not call back into the port: driving one directly appends no event."""
    spec = role_spec("parse")
    request = spec.request.model_validate(PARSE)
    messages = spec.build_messages(request)
    pending = PendingCall(spec, request, messages, {}, "h" * 64, "c1", 1, 1, candidates=["h" * 64])

    async def drive():
        return [a async for a in FlakyBackend().attempts(pending)]

    with ledger.open_ledger(home) as led:
        before = led.head().seq
        attempts = asyncio.run(drive())
        assert led.head().seq == before
    assert [a.error is None for a in attempts] == [False, False, True]


def test_the_judge_and_search_ports_hash_alike_and_share_one_index(home):
    """One core: a search's recorded hash is the core's hash of (search, backend, model, params, messages)."""
    (home / "corpus").mkdir(exist_ok=True)
    (home / "corpus" / "moon.md").write_text(MOON)

    async def go():
        with ledger.open_ledger(home) as led:
            search = make_search(SearchSettings(), led)
            judge = make_judge(JudgeSettings(), led)
            await search.search("moon landing", case_id="c1")
            await judge.call("parse", PARSE, case_id="c1")
            assert search.records.index is judge.records.index
            await judge.aclose()
            await search.aclose()

    asyncio.run(go())
    searched, judged = calls_in(home)
    assert searched["request_hash"] == request_hashes(
        "search", [("local", searched["model"])], {"max_results": 3},
        [{"role": "user", "content": "moon landing"}])[0]
    assert searched["role"] == "search" and judged["role"] == "parse"


def test_the_core_finds_a_replayed_answer_and_notes_a_miss(home, tmp_path):
    asyncio.run(_one_offline_call(home))
    [original] = calls_in(home)
    target = ledger.init_home(tmp_path / "target")
    with ledger.open_ledger(home, readonly=True) as source, ledger.open_ledger(target) as led:
        records = RecordedCalls(led, source)
        assert records.replay_identities("parse") == [("offline", original["model"])]
        assert records.replay_identities("parse", live=("openai", "m")) == [("offline", original["model"]),
                                                                             ("openai", "m")]
        assert records.replay_identities("decompose") == [("replay", None)]
        found = records.replayed(["0" * 64, original["request_hash"]])
        # the source's index kept the answer: everything but the request (what was asked, and sent raw)
        kept = {k: v for k, v in original.items() if k not in ("request", "sent", "raw_reply")}
        assert found.request_hash == original["request_hash"] and found.event.data == kept
        assert records.replayed(["0" * 64]) is None
        records.miss("parse", "c9", "0" * 64)
        assert records.misses == [{"role": "parse", "case_id": "c9", "request_hash": "0" * 64}]
        assert records.reusable([original["request_hash"]], lambda e: e) is None   # not in the target


def test_a_record_the_accept_function_refuses_is_skipped_for_the_next(home):
    asyncio.run(_one_offline_call(home))
    [original] = calls_in(home)
    with ledger.open_ledger(home) as led:
        records = RecordedCalls(led)

        def refuse(event):
            raise ValueError("unreadable")

        assert records.reusable([original["request_hash"]], refuse) is None
        found = records.reusable([original["request_hash"]], lambda e: e.data["reply"])
        assert found.value == original["reply"]


def test_a_success_reused_on_another_case_is_copied_without_reading_its_prompt_back(home):
    # The copy on c2 carries c1's request: when the one c2 would record has the same stored form
    # (the same blob key), that one is used and no blob is read; the events are as before.
    asyncio.run(_one_offline_call(home))
    [original] = calls_in(home)
    with ledger.open_ledger(home) as led:
        stored = led.get_stored(next(led.read(types=["judge.called"])).id)
        assert b'"$blob"' in ledger.canonical_json(stored.stored_data["request"])   # the prompt is in blobs
        assert led.join(stored.stored_data) == original                     # join gives it whole
        reads = []
        load = led.recorder.blobs._load
        led.recorder.blobs._load = lambda key: reads.append(key) or load(key)

        async def again():
            async with make_judge(JudgeSettings(), led) as judge:
                reply = await judge.call("parse", PARSE, case_id="c2")
                return reply, judge.calls, judge.reused

        reply, asked, reused = asyncio.run(again())
        assert (reply.values, asked, reused, reads) == ({"year": 1969}, 0, 1, [])
        copy = led.get_stored(next(e.id for e in led.read(types=["judge.called"]) if e.stream == "case:c2"))
        assert copy.stored_data["request"] == stored.stored_data["request"]   # the same blob
    first, second = calls_in(home)
    assert second["source_event"] == stored.id and second["request"] == first["request"]
    copied = ("role", "backend", "model", "request_hash", "request", "reply", "source_backend", "error")
    assert [second[k] for k in copied] == [first[k] for k in copied] and second["case_id"] == "c2"


def test_a_success_stored_with_another_request_is_read_back_and_its_request_copied(home, tmp_path):
    # A record whose request differs from this call's (an openai response-format mode, say) under
    # the same hash is read whole, and the copy carries ITS request, as it always did.
    asyncio.run(_one_offline_call(home))
    [original] = calls_in(home)
    other = ledger.init_home(tmp_path / "other")
    moded = {**original, "case_id": "c0", "request": {**original["request"], "response_format": "tool"}}
    with ledger.open_ledger(other) as led:
        led.append(ledger.NewEvent("case:c0", "judge.called", moded, key="judge:parse:x:1:1"))

        async def ask():
            async with make_judge(JudgeSettings(), led) as judge:
                await judge.call("parse", PARSE, case_id="c2")
                return judge.calls

        assert asyncio.run(ask()) == 0
    source, copy = calls_in(other)
    assert copy["case_id"] == "c2" and copy["request"] == source["request"] and "response_format" in copy["request"]


async def _one_offline_call(home):
    with ledger.open_ledger(home) as led:
        async with make_judge(JudgeSettings(), led) as judge:
            await judge.call("parse", PARSE, case_id="c1")


# --- redaction ---------------------------------------------------------------------------------------

def test_a_long_secret_is_blotted_out_everywhere():
    secret = "sk-live-0123456789abcdef"
    assert redact(f"401: bad key {secret}; key={secret}x", secret) == "401: bad key [redacted]; key=[redacted]x"


def test_a_short_placeholder_secret_is_blotted_only_as_a_whole_token():
    assert redact("key x rejected; maximum exceeded", "x") == "key [redacted] rejected; maximum exceeded"


@pytest.mark.parametrize("secret", [None, ""])
def test_no_secret_leaves_text_alone(secret):
    assert redact("anything", secret) == "anything"


@given(st.text(), st.text(), st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=12, max_size=40))
def test_a_long_secret_never_survives_redaction(before, after, secret):
    assert secret not in redact(before + secret + after, secret).replace("[redacted]", "\0")


def test_redaction_and_recording_live_in_the_core_only():
    """No port or backend writes its own redaction or appends judge.called events itself."""
    offenders = []
    for file in sorted((REPO / "stages").rglob("*.py")):
        tree = ast.parse(file.read_text())
        name = file.relative_to(REPO).as_posix()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "redact" in node.name \
                    and name != "stages/judge/recorded_calls.py":
                offenders.append(f"{name}: defines {node.name}")
            if isinstance(node, ast.ImportFrom) and node.module == "evalledger.stages.judge.recording" \
                    and any(a.name in ("record_attempt", "record_events", "call_event", "index_for")
                            for a in node.names) \
                    and name not in ("stages/judge/recorded_calls.py", "stages/judge/group_commit.py"):
                offenders.append(f"{name}: imports recording internals")
    assert offenders == []
