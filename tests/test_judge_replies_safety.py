"""Provider settings and replies that cannot be used as sent, against the real stand-in server.

A reply cut off at max_tokens, NaN/Infinity/1e400, nesting past the limit, a body that is not
UTF-8, an unpaired surrogate, a body over the cap: each is an invalid reply, recorded as an
attempt (its raw text kept as a plain string the hash chain accepts), asked again, and the
call is answered when a later attempt is good. The ledger still verifies afterwards.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalledger import ledger
from evalledger.ledger import EnvelopeError, canonical_json
from evalledger.stages.judge import JudgeCallFailed, JudgeSettings, make_judge
from evalledger.stages.judge.reply_body import MAX_REPLY_DEPTH, RAW_PREFIX_CHARS, storage_problem
from evalledger.stages.judge.reply_caps import MAX_STORED_RAW_CHARS
from evalledger.testing.stand_in import Raw, Reply, StandIn

TRAIT = {"question": "What is 15 multiplied by 7?", "response": "15 multiplied by 7 is 105.",
         "trait": {"name": "completeness", "kind": "score", "min_score": 1, "max_score": 5}}
PARSE = {"question": "How tall is it?", "response": "It is 3.5 m tall.",
         "fields": [{"name": "height", "type": "float", "description": "height in metres"}]}
HANG_GUARD_S = 30


@pytest.fixture(autouse=True)
def local_server_env(monkeypatch):
    """A placeholder key; no base URL from the environment."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-0000")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def run_scenario(home: Path, script, role: str, request: dict, **overrides):
    """Serve ``script`` from a stand-in, make one call; returns (reply or exception, requests)."""
    server = StandIn()

    async def go():
        url = await server.start()
        base = dict(backend="openai", model="stand-in-1", base_url=url, timeout_s=5.0, backoff_base_s=0.01,
                    backoff_max_s=0.05, max_attempts=3, max_invalid_replies=3)
        led = ledger.open_ledger(home)
        judge = make_judge(JudgeSettings(**{**base, **overrides}), led)
        server.script(*script)
        try:
            return await asyncio.wait_for(judge.call(role, request, case_id="c1"), HANG_GUARD_S)
        except JudgeCallFailed as exc:
            return exc
        finally:
            await judge.aclose()
            await server.stop()
            led.close()

    return asyncio.run(go()), server.requests


def recorded(home: Path) -> list[dict]:
    """Every recorded judge.called payload, after checking the hash chain."""
    with ledger.open_ledger(home) as led:
        assert led.verify().ok
        return [e.data for e in led.read(types=["judge.called"])]


def completion(content_json: str, finish_reason: str = "stop") -> bytes:
    """A chat-completion body whose content is the given text, written by hand (raw bytes)."""
    return (b'{"choices": [{"index": 0, "finish_reason": "' + finish_reason.encode() +
            b'", "message": {"role": "assistant", "content": ' + content_json.encode("utf-8", "surrogatepass") +
            b'}}], "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}')


def test_provider_settings_are_sent_and_temperature_can_be_omitted(tmp_path):
    _, requests = run_scenario(tmp_path / "home", [Reply({"score": 4})], "score_trait", TRAIT,
                               temperature=None, max_completion_tokens=256, max_tokens=128)
    body = requests[0]["body"]
    assert "temperature" not in body
    assert (body["max_completion_tokens"], body["max_tokens"]) == (256, 128)
    [call] = recorded(tmp_path / "home")
    assert call["request"]["parameters"] == {"max_completion_tokens": 256, "max_tokens": 128}


def test_provider_settings_are_bounded():
    for bad in ({"temperature": 2.5}, {"max_tokens": 0}, {"timeout_s": 0}, {"max_reply_bytes": 10},
                {"breaker_failures": 0}, {"max_completion_tokens": -1}):
        with pytest.raises(ValueError):
            JudgeSettings(**bad)


def test_a_reply_cut_off_at_max_tokens_is_an_invalid_reply_naming_the_cap(tmp_path):
    script = [Reply('{"score": 4, "reasoning": "the answer is compl', finish_reason="length"),
              Reply({"score": 4})]
    reply, requests = run_scenario(tmp_path / "home", script, "score_trait", TRAIT, max_tokens=12)
    assert reply.score == 4
    first, second = recorded(tmp_path / "home")
    assert first["error"] == "invalid reply: cut off at max_tokens 12"
    assert first["raw_reply"].startswith('{"score": 4, "reasoning"') and first["reply"] is None
    assert second["error"] is None and second["attempt"] == 2
    assert "cut off at max_tokens 12" in requests[1]["body"]["messages"][-1]["content"]


def test_replies_cut_off_every_time_fail_the_call_with_that_reason(tmp_path):
    script = [Reply('{"score": ', finish_reason="length")] * 3
    failed, _ = run_scenario(tmp_path / "home", script, "score_trait", TRAIT, max_completion_tokens=7,
                             max_invalid_replies=2)
    assert isinstance(failed, JudgeCallFailed) and "cut off at max_tokens 7" in str(failed)
    assert len(recorded(tmp_path / "home")) == 3


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_a_number_json_cannot_hold_is_an_invalid_reply_recorded_and_asked_again(tmp_path, number):
    # The parse role takes any float: today such a reply validates, then the ledger refuses it.
    script = [Reply('{"values": {"height": %s}}' % number), Reply({"values": {"height": 3.5}})]
    reply, requests = run_scenario(tmp_path / "home", script, "parse", PARSE)
    assert reply.values == {"height": 3.5}
    first, second = recorded(tmp_path / "home")
    assert first["error"].startswith("invalid reply: cannot be stored: reply.values.height is ")
    assert first["raw_reply"] == '{"values": {"height": %s}}' % number and first["reply"] is None
    assert second["error"] is None and len(requests) == 2


def test_nesting_past_the_limit_is_an_invalid_reply(tmp_path):
    deep = "[" * (MAX_REPLY_DEPTH + 5) + "]" * (MAX_REPLY_DEPTH + 5)
    very_deep = "[" * 100_000 + "]" * 100_000   # past Python's own recursion limit
    script = [Reply('{"values": {"height": %s}}' % deep), Reply(very_deep), Reply({"values": {"height": 1.0}})]
    reply, _ = run_scenario(tmp_path / "home", script, "parse", PARSE)
    assert reply.values == {"height": 1.0}
    first, second, third = recorded(tmp_path / "home")
    assert f"nests deeper than {MAX_REPLY_DEPTH} levels" in first["error"]
    assert second["error"].startswith("invalid reply:")
    # the raw text is kept up to the stored-size cap of every judge.called, and the cut is said
    assert second["raw_reply"] == very_deep[:MAX_STORED_RAW_CHARS]
    assert second["stored_cut"] == [f"raw_reply: 200000 characters, the first {MAX_STORED_RAW_CHARS} kept"]
    assert third["error"] is None


def test_a_body_that_is_not_utf8_is_an_invalid_reply_kept_as_escaped_text(tmp_path):
    bad = completion('"{\\"score\\": 4} @@"').replace(b"@@", b"\xff\xfe")   # bytes 0xff 0xfe: not UTF-8
    reply, requests = run_scenario(tmp_path / "home", [Raw(bad), Reply({"score": 3})], "score_trait", TRAIT)
    assert reply.score == 3
    first, second = recorded(tmp_path / "home")
    assert first["error"].startswith("invalid reply: the reply body is not valid UTF-8 (byte 0xff at offset")
    assert "\\xff\\xfe" in first["raw_reply"] and first["http_status"] == 200
    assert second["error"] is None
    # the re-ask says what was wrong, without echoing bytes the model never sent as text
    assert "not valid UTF-8" in requests[1]["body"]["messages"][-1]["content"]
    assert requests[1]["body"]["messages"][-2]["role"] != "assistant"


def test_an_unpaired_surrogate_in_the_reply_text_is_an_invalid_reply(tmp_path):
    body = completion(json.dumps('{"score": 4, "reasoning": "\ud800"}'))   # \\ud800 escaped in the body
    reply, _ = run_scenario(tmp_path / "home", [Raw(body), Reply({"score": 2})], "score_trait", TRAIT)
    assert reply.score == 2
    first, _ = recorded(tmp_path / "home")
    assert "unpaired surrogate" in first["error"] and "\\ud800" in first["raw_reply"]


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_2mb_body_is_an_invalid_reply_and_only_its_start_is_kept(tmp_path, chunked):
    huge = completion(json.dumps('{"score": 4, "reasoning": "' + "x" * (2 * 1024 * 1024) + '"}'))
    reply, _ = run_scenario(tmp_path / "home", [Raw(huge, chunked=chunked), Reply({"score": 5})],
                            "score_trait", TRAIT)
    assert reply.score == 5
    first, second = recorded(tmp_path / "home")
    assert first["error"].startswith("invalid reply: the reply body is over the 1048576-byte cap")
    assert len(first["raw_reply"]) <= RAW_PREFIX_CHARS
    assert second["error"] is None


def test_the_reply_cap_is_configurable(tmp_path):
    body = completion(json.dumps('{"score": 4, "reasoning": "' + "y" * 5000 + '"}'))
    reply, _ = run_scenario(tmp_path / "home", [Raw(body), Raw(body)], "score_trait", TRAIT,
                            max_reply_bytes=1024 * 1024)
    assert reply.score == 4
    failed, _ = run_scenario(tmp_path / "small", [Raw(body)] * 3, "score_trait", TRAIT,
                             max_reply_bytes=4096, max_invalid_replies=1)
    assert isinstance(failed, JudgeCallFailed) and "4096-byte cap" in str(failed)


def test_a_refusal_without_content_is_an_invalid_reply(tmp_path):
    body = (b'{"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", '
            b'"content": null, "refusal": "I cannot help with that."}}]}')
    reply, _ = run_scenario(tmp_path / "home", [Raw(body), Reply({"score": 1})], "score_trait", TRAIT)
    assert reply.score == 1
    first, _ = recorded(tmp_path / "home")
    assert first["error"] == "invalid reply: the model refused: I cannot help with that."


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(alphabet=st.characters(categories=["Cs", "Lu", "Ll", "Nd", "Po", "Cc"])),   # lone surrogates too
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_what_storage_problem_accepts_the_ledgers_canonical_json_accepts(value):
    """The check runs before recording; the ledger's own encoder is the judge of what is storable."""
    problem = storage_problem({"reply": value})
    try:
        canonical_json({"reply": value})
        stored = True
    except EnvelopeError:
        stored = False
    assert (problem is None) == stored, (problem, value)
