"""Answers that are not valid HTTP (or carry no final status), from a raw server on 127.0.0.1, through
``evalledger run --judge openai``.

aiohttp's parser reports a bad status line, an invalid header, broken chunked encoding, a header
over its limit ... as ``ClientResponseError``. Such an answer is the server failing, as a dropped
connection is: retried, counted by the breaker, never the case's fault and never a stop at the
first one (it used to fall into the catch-all for a bad URL and stop the run at once).
"""

from __future__ import annotations

import json

import pytest

from evalledger import ledger
from evalledger.stages.judge.http_outcome import classify
from judge_server_support import SAMPLE, judge_calls
from raw_judge_server import RawJudgeServer

KEY = "sk-malformed-http-key-6a1d3c9f"
GARBLED = {
    "bad status line": b"HTTP/1.1 OK\r\n\r\n",
    "invalid header": b"HTTP/1.1 200 OK\r\nBad Header: x\r\nContent-Length: 2\r\n\r\n{}",
    "bad chunk size": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
    "two content-lengths": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    # the key echoed in a header over aiohttp's 8190-byte limit: the error quotes the line
    "header too long": b"HTTP/1.1 200 OK\r\nX-Echo: " + KEY.encode() + b"a" * 9000 + b"\r\n\r\n",
}


def run_against(run_cli, home, server: RawJudgeServer, *args: str):
    """Ingest the sample and run the openai judge against ``server``."""
    assert run_cli("ingest", SAMPLE, home=home).returncode == 0
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_MODEL": "raw-1", "OPENAI_API_KEY": KEY}
    return run_cli("run", "--judge", "openai", "--quiet", *args, home=home, env=env, timeout=60)


def completed(home) -> dict:
    with ledger.open_ledger(home) as led:
        assert list(led.read(types=["stage.failed"])) == []
        [done] = [e.data for e in led.read(types=["run.completed"])]
    return done


def test_a_server_garbling_answers_now_and_then_gets_every_case_judged(run_cli, home):
    # Every other answer is garbled unless it answers a retry: every call fails at most once, and
    # never two answers in a row (a garbled answer to every first try would open the breaker, as
    # eight 503s in a row do).
    def now_and_then(body: bytes, seen: int) -> bytes | None:
        return GARBLED["bad status line"] if seen == 1 and server.requests % 2 == 1 else None

    with RawJudgeServer(now_and_then) as server:
        result = run_against(run_cli, home, server, "--concurrency", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "28 case(s), 28 judged, 0 failed" in result.stdout and not completed(home)["pending"]
    calls = judge_calls(home)
    failed = [c for c in calls if c.get("error")]
    assert server.garbled == len(failed) > 1 and server.requests == len(calls)
    assert all(c["error"].startswith("the server's answer is not valid HTTP: Bad status line") for c in failed)
    answered = {(c["case_id"], c["request_hash"]) for c in calls if not c.get("error")}
    assert {(c["case_id"], c["request_hash"]) for c in failed} <= answered   # each was asked again, and answered


@pytest.mark.parametrize("garbled", GARBLED.values(), ids=GARBLED.keys())
def test_a_server_garbling_every_answer_stops_the_run_through_the_breaker(run_cli, home, garbled):
    with RawJudgeServer(lambda body, seen: garbled) as server:
        result = run_against(run_cli, home, server, "--concurrency", "1", "--breaker-failures", "3")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "3 failures in a row" in result.stderr and "not valid HTTP" in result.stderr
    assert completed(home)["pending"] > 0
    calls = judge_calls(home)
    assert len(calls) == server.requests == 3
    for call in calls:
        assert call["error"].startswith("the server's answer is not valid HTTP: ") and len(call["error"]) <= 400
    assert KEY[:8] not in result.stdout + result.stderr
    with ledger.open_ledger(home) as led:
        assert not any(KEY[:8] in json.dumps(e.data) for e in led.read())


# aiohttp takes any three digits: 099 reads as status 99, and a 101 with no upgrade asked for
# comes back as the answer (an empty body). Neither is an answer to the request.
NO_FINAL_STATUS = {"099": b"HTTP/1.1 099 X\r\nContent-Length: 2\r\n\r\n{}",
                   "101": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n"}


@pytest.mark.parametrize("garbled", NO_FINAL_STATUS.values(), ids=NO_FINAL_STATUS.keys())
def test_a_status_that_is_no_final_answer_is_the_server_failing_not_the_case(run_cli, home, garbled):
    with RawJudgeServer(lambda body, seen: garbled) as server:
        result = run_against(run_cli, home, server, "--concurrency", "1", "--breaker-failures", "3")
    assert result.returncode == 3, result.stdout + result.stderr
    assert completed(home)["pending"] > 0   # and no stage.failed
    calls = judge_calls(home)
    assert len(calls) == server.requests == 3
    assert all("not a final HTTP status" in c["error"] for c in calls)


@pytest.mark.parametrize("status", [99, 100, 101, 103, 199, 600, 999])
def test_a_status_outside_200_599_is_transient_whatever_the_body(status):
    outcome = classify(status, {}, '{"error": "response_format json_schema is not supported"}', 1.0,
                       format_sent=True)
    assert (outcome.kind, outcome.status) == ("transient", status)
    assert outcome.error.startswith(f"HTTP {status}: not a final HTTP status")
