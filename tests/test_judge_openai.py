"""The openai backend against a real aiohttp chat-completions server on 127.0.0.1 (the stand-in).

Scripted behaviours: plain JSON, fenced JSON, invalid then valid, 429 with Retry-After, 500s,
a reply slower than the timeout, a dropped connection, a server refusing response_format.
Every attempt must be recorded, attempts bounded, no task may hang, and the key never lands on disk.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.stages.judge import JudgeCallFailed, JudgeError, JudgeSettings, make_judge
from evalledger.stages.judge.registry import role
from evalledger.testing.stand_in import (
    Drop, Reply, Slow, StandIn, Status, format_mode, requested_schema, schema_instance_reply,
)

SECRET = "sk-evalledger-test-5f1c0ffee-DO-NOT-STORE"
SAMPLES_DIR = Path(__file__).resolve().parents[1] / "benchmarks" / "samples"
TRAIT = {"question": "What is 15 multiplied by 7?", "response": "15 multiplied by 7 is 105.",
         "trait": {"name": "completeness", "kind": "score", "min_score": 1, "max_score": 5}}
HANG_GUARD_S = 20


@pytest.fixture(autouse=True)
def secret_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture()
def home(tmp_path) -> Path:
    return tmp_path / "home"


def settings(url: str, **overrides) -> JudgeSettings:
    base = dict(backend="openai", model="stand-in-1", base_url=url, timeout_s=1.0, backoff_base_s=0.01,
                backoff_max_s=0.05, max_attempts=3)
    return JudgeSettings(**{**base, **overrides})


def run_with_server(home: Path, scenario, stand_in: StandIn | None = None, **overrides):
    """Start a stand-in, open the ledger, run ``scenario(judge, stand_in)``, close everything."""
    server = stand_in or StandIn()

    async def go():
        url = await server.start()
        led = ledger.open_ledger(home)
        judge = make_judge(settings(url, **overrides), led)
        try:
            return await asyncio.wait_for(scenario(judge, server), HANG_GUARD_S)
        finally:
            await judge.aclose()
            await server.stop()
            led.close()

    return asyncio.run(go())


def calls(home: Path) -> list:
    with ledger.open_ledger(home) as led:
        return [e.data for e in led.read(types=["judge.called"])]


def test_plain_json_reply_is_parsed_and_recorded_with_usage_latency_and_cost(home):
    async def scenario(judge, server):
        server.script(Reply({"score": 4, "reasoning": "complete"}))
        return await judge.call("score_trait", TRAIT, case_id="c1")

    prices = {"stand-in-1": {"input_per_million": 2.0, "output_per_million": 8.0}}
    reply = run_with_server(home, scenario, prices=prices)
    assert reply.score == 4
    [call] = calls(home)
    assert (call["backend"], call["model"], call["attempt"], call["error"]) == ("openai", "stand-in-1", 1, None)
    usage = call["usage"]
    assert usage["prompt_tokens"] > 0 and usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert call["cost"] == pytest.approx((usage["prompt_tokens"] * 2 + usage["completion_tokens"] * 8) / 1e6)
    assert call["latency_ms"] > 0 and call["http_status"] == 200


def test_request_carries_the_role_schema_as_response_format(home):
    async def scenario(judge, server):
        server.script(Reply({"score": 3}))
        await judge.call("score_trait", TRAIT, case_id="c1")
        return server.requests[0]["body"]

    body = run_with_server(home, scenario)
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "score_trait"
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["properties"]["score"] == {"type": "integer", "minimum": 1, "maximum": 5}
    assert body["model"] == "stand-in-1" and body["temperature"] == 0.0


@pytest.mark.parametrize("mode", ["json_object", "prompt"])
def test_the_configured_response_format_mode_is_sent_and_recorded(home, mode):
    async def scenario(judge, server):
        reply = await judge.call("score_trait", TRAIT, case_id="c1")
        return reply, server.requests[0]["body"]

    reply, body = run_with_server(home, scenario, StandIn(reply_fn=lambda body: {"score": 5, "reasoning": None}),
                                  response_format=mode)
    assert reply.score == 5
    schema = role("score_trait").reply_schema(role("score_trait").request.model_validate(TRAIT))
    if mode == "json_object":
        assert body["response_format"] == {"type": "json_object", "schema": schema}
    else:
        assert "response_format" not in body and requested_schema(body) == schema
    [call] = calls(home)
    assert call["request"]["response_format"] == mode and call["error"] is None


def test_a_500_naming_json_schema_moves_to_json_object_for_the_rest_of_the_run(home):
    """llama-cpp-python's server answers json_schema with HTTP 500; its json_object takes a schema."""
    async def scenario(judge, server):
        first = await judge.call("score_trait", TRAIT, case_id="c1")
        second = await judge.call("score_trait", {**TRAIT, "response": "105"}, case_id="c2")
        return first, second, [format_mode(r["body"]) for r in server.requests]

    server = StandIn(refuse_formats={"json_schema": 500}, reply_fn=schema_instance_reply(3))
    first, second, modes = run_with_server(home, scenario, server)
    assert 1 <= first.score <= 5 and 1 <= second.score <= 5
    assert modes == ["json_schema", "json_object", "json_object"]
    recorded = calls(home)
    assert recorded[0]["http_status"] == 500 and "asking again in mode json_object" in recorded[0]["error"]


def test_refused_calls_in_flight_at_the_switch_are_asked_again(home):
    """Eight calls go out in json_schema together; every refusal lands after the first switched."""
    async def scenario(judge, server):
        requests = [{**TRAIT, "response": f"answer {i}"} for i in range(8)]
        return await asyncio.gather(*(judge.call("score_trait", r, case_id=f"c{i}")
                                      for i, r in enumerate(requests)))

    server = StandIn(delay=0.1, refuse_formats={"json_schema": 400}, reply_fn=schema_instance_reply(5))
    replies = run_with_server(home, scenario, server, concurrency=8)
    assert len(replies) == 8 and all(1 <= r.score <= 5 for r in replies)
    modes = [format_mode(r["body"]) for r in server.requests]
    assert modes.count("json_schema") == 8 and modes.count("json_object") == 8
    recorded = calls(home)
    assert sum(c["error"] is None for c in recorded) == 8
    assert all("refused response_format json_schema" in c["error"] for c in recorded if c["error"])


def test_fenced_json_after_prose_is_parsed(home):
    async def scenario(judge, server):
        server.script(Reply({"score": 5}, fenced=True, prose="Here is my evaluation:"))
        return await judge.call("score_trait", TRAIT, case_id="c1")

    assert run_with_server(home, scenario).score == 5


def test_invalid_reply_is_asked_again_with_the_error_as_feedback(home):
    async def scenario(judge, server):
        server.script(Reply("I think it deserves a five."), Reply({"score": 9}), Reply({"score": 5}))
        reply = await judge.call("score_trait", TRAIT, case_id="c1")
        return reply, server.requests

    reply, requests = run_with_server(home, scenario, max_invalid_replies=2)
    assert reply.score == 5
    recorded = calls(home)
    assert [c["attempt"] for c in recorded] == [1, 2, 3]
    assert recorded[0]["error"].startswith("invalid reply: the reply holds no JSON")
    assert recorded[0]["raw_reply"] == "I think it deserves a five."
    assert "from 1 to 5" in recorded[1]["error"] and recorded[2]["error"] is None
    feedback = requests[2]["body"]["messages"]
    assert feedback[-2] == {"role": "assistant", "content": '{"score": 9}'}
    assert "from 1 to 5" in feedback[-1]["content"]
    assert recorded[2]["sent"] == feedback and len({c["request_hash"] for c in recorded}) == 1


def test_invalid_replies_are_bounded(home):
    async def scenario(judge, server):
        server.script(*[Reply("nope")] * 5)
        with pytest.raises(JudgeCallFailed, match="failed after 2 attempt"):
            await judge.call("score_trait", TRAIT, case_id="c1")
        return len(server.requests)

    assert run_with_server(home, scenario, max_invalid_replies=1) == 2
    assert [c["error"] is not None for c in calls(home)] == [True, True]


def test_429_with_retry_after_is_honoured_and_each_attempt_recorded(home):
    stamps: list[float] = []

    def reply_fn(body):
        stamps.append(time.perf_counter())
        return {"score": 2}

    async def scenario(judge, server):
        server.script(Status(429, retry_after=1))
        original = server._answer

        async def timed(request):
            stamps.append(time.perf_counter())
            return await original(request)
        server._answer = timed
        return await judge.call("score_trait", TRAIT, case_id="c1")

    assert run_with_server(home, scenario, StandIn(reply_fn=reply_fn)).score == 2
    assert stamps[1] - stamps[0] >= 0.95  # waited the Retry-After second, not the 10 ms backoff
    first, second = calls(home)
    assert (first["attempt"], first["http_status"], second["attempt"], second["error"]) == (1, 429, 2, None)
    assert first["error"].startswith("HTTP 429")


def test_server_errors_are_retried_up_to_the_bound_then_fail(home):
    async def scenario(judge, server):
        server.script(*[Status(500)] * 10)
        started = time.perf_counter()
        with pytest.raises(JudgeCallFailed, match="after 3 attempt"):
            await judge.call("score_trait", TRAIT, case_id="c1")
        return len(server.requests), time.perf_counter() - started

    count, elapsed = run_with_server(home, scenario, max_attempts=3)
    assert count == 3 and elapsed < 5
    assert [(c["attempt"], c["http_status"]) for c in calls(home)] == [(1, 500), (2, 500), (3, 500)]


def test_a_reply_slower_than_the_timeout_and_a_dropped_connection_are_retried(home):
    async def scenario(judge, server):
        server.script(Slow(3), Drop(), Reply({"score": 3}))
        started = time.perf_counter()
        reply = await judge.call("score_trait", TRAIT, case_id="c1")
        return reply, time.perf_counter() - started

    reply, elapsed = run_with_server(home, scenario, timeout_s=0.4)
    assert reply.score == 3 and elapsed < 2.5
    errors = [c["error"] for c in calls(home)]
    assert errors[0] == "timed out after 0.4 s"
    assert errors[1].startswith("connection failed") and errors[2] is None


def test_a_client_error_is_not_retried(home):
    async def scenario(judge, server):
        server.script(Status(401, body='{"error": "bad key"}'))
        with pytest.raises(JudgeCallFailed, match="HTTP 401"):
            await judge.call("score_trait", TRAIT, case_id="c1")
        return len(server.requests)

    assert run_with_server(home, scenario) == 1


def test_a_server_refusing_response_format_gets_the_schema_in_the_prompt(home):
    async def scenario(judge, server):
        server.script(Reply({"score": 4}), Reply({"score": 2}))
        first = await judge.call("score_trait", TRAIT, case_id="c1")
        second = await judge.call("score_trait", {**TRAIT, "response": "105"}, case_id="c1")
        return first, second, server.requests

    first, second, requests = run_with_server(home, scenario, StandIn(reject_response_format=True))
    assert (first.score, second.score) == (4, 2)
    # json_schema refused, json_object refused, then the schema rides in the prompt for every call
    assert [format_mode(r["body"]) for r in requests] == ["json_schema", "json_object", "prompt", "prompt"]
    assert "JSON schema" in requests[2]["body"]["messages"][0]["content"]
    recorded = calls(home)
    assert "refused response_format json_schema" in recorded[0]["error"]
    assert "refused response_format json_object" in recorded[1]["error"]
    assert [c["request"]["response_format"] for c in recorded] == ["json_schema", "json_object", "prompt", "prompt"]


def test_concurrency_is_limited_and_no_call_hangs(home):
    async def scenario(judge, server):
        requests = [{**TRAIT, "response": f"answer {i}"} for i in range(8)]
        await asyncio.gather(*(judge.call("score_trait", r, case_id=f"c{i}") for i, r in enumerate(requests)))
        return server.max_in_flight

    server = StandIn(delay=0.1, reply_fn=lambda body: {"score": 3})
    assert run_with_server(home, scenario, server, concurrency=3) == 3
    assert len(calls(home)) == 8


def test_a_restarted_stage_reuses_the_recorded_answer_without_calling(home):
    async def first(judge, server):
        server.script(Reply({"score": 4}))
        return await judge.call("score_trait", TRAIT, case_id="c1")

    async def again(judge, server):
        reply = await judge.call("score_trait", TRAIT, case_id="c1")
        return reply, len(server.requests)

    run_with_server(home, first)
    reply, requests = run_with_server(home, again)
    assert reply.score == 4 and requests == 0 and len(calls(home)) == 1


def test_the_api_key_is_sent_but_never_lands_on_disk(home):
    async def scenario(judge, server):
        # a misbehaving server that echoes the key back in an error and in a reply
        server.script(Status(500, body=f'{{"error": "bad auth Bearer {SECRET}"}}'), Reply(f"key {SECRET}"),
                      Reply({"score": 1}))
        await judge.call("score_trait", TRAIT, case_id="c1")
        return server.requests

    requests = run_with_server(home, scenario, max_invalid_replies=1)
    assert all(r["authorized"] for r in requests)
    errors = [c["error"] for c in calls(home)]
    assert "[redacted]" in errors[0] and "[redacted]" in errors[1]
    needle = SECRET.encode()
    for path in home.rglob("*"):
        if path.is_file():
            assert needle not in path.read_bytes(), f"the API key leaked into {path}"


def test_the_openai_backend_needs_a_model(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    with pytest.raises(JudgeError, match="needs a model"):
        make_judge(JudgeSettings(backend="openai"), None)


def test_the_same_request_for_two_cases_at_once_is_paid_once(home):
    async def scenario(judge, server):
        both = await asyncio.gather(judge.call("score_trait", TRAIT, case_id="alpha"),
                                    judge.call("score_trait", TRAIT, case_id="gamma"))
        return both, len(server.requests)

    (first, second), requests = run_with_server(home, scenario, StandIn(delay=0.2, reply_fn=lambda b: {"score": 5}))
    assert first == second and requests == 1
    alpha, gamma = calls(home)
    assert alpha["case_id"] == "alpha" and alpha["usage"] is not None
    assert gamma["case_id"] == "gamma" and gamma["usage"] is None and gamma["reply"] == alpha["reply"]
    with ledger.open_ledger(home) as led:
        assert gamma["source_event"] == next(led.read(types=["judge.called"])).id


def test_the_stand_in_runs_as_a_program_for_trying_the_openai_backend(home):
    import re
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "evalledger.testing.stand_in", "--port", "0", "--delay", "0.01"],
                            cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE, text=True)
    try:
        url = re.search(r"http://127\.0\.0\.1:\d+/v1", proc.stdout.readline()).group()

        async def go():
            with ledger.open_ledger(home) as led:
                async with make_judge(settings(url), led) as judge:
                    return await judge.call("check_facts", {"context_input": "c", "model_output": "o",
                                                            "facts": ["f"]}, case_id="c1")

        assert asyncio.run(asyncio.wait_for(go(), HANG_GUARD_S)).errors == []  # the smallest valid reply
    finally:
        proc.terminate()
        proc.wait(10)
    assert calls(home)[0]["http_status"] == 200


def test_no_api_key_for_the_public_api_is_a_usage_error_before_any_case_fails(home, run_cli):
    """QA: without OPENAI_API_KEY every call to api.openai.com would fail case by case (401)."""
    run_cli("init", home=home)
    run_cli("ingest", SAMPLES_DIR / "polio-vaccine-1955.reconstruction.json", home=home)
    head = run_cli("verify", home=home).stdout
    env = {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}
    done = run_cli("run", "--judge", "openai", "--model", "gpt-4o-mini", home=home, env=env)
    assert done.returncode == 2 and "OPENAI_API_KEY" in done.stderr
    assert run_cli("verify", home=home).stdout == head   # no run.started, no stage.failed


def test_a_placeholder_key_is_redacted_as_a_whole_token_without_garbling_words(home, monkeypatch):
    """QA: with OPENAI_API_KEY=k every 'k' of a recorded error became '[redacted]' ("ta[redacted]es")."""
    monkeypatch.setenv("OPENAI_API_KEY", "k")

    async def scenario(judge, server):
        server.script(Status(500, body='{"error": "bad key k; take care"}'), Reply({"score": 2}))
        return await judge.call("score_trait", TRAIT, case_id="c1")

    assert run_with_server(home, scenario).score == 2
    first = calls(home)[0]["error"]
    assert "bad key [redacted]; take care" in first
