"""A run that stops (401, server gone, budget spent) with judge calls in flight records every one of them.

Each request that reached the server is a paid reply: the run lets it end (bounded by the request
timeout) and records it as a ``judge.called`` event before it exits, and sends no new one. These
run ``evalledger run --judge openai`` as a real subprocess against a real server on 127.0.0.1.
"""

from __future__ import annotations

import pytest

from evalledger.testing.stand_in import Drop, Slow, StandIn, StandInThread, Status
from judge_server_support import SAMPLE, judge_calls, run_openai

KEY = "sk-stop-in-flight-test-key-9a41"


@pytest.mark.parametrize("first, said", [(Status(401, body='{"error": "bad key"}', delay=0.0), "HTTP 401"),
                                         (Drop(delay=0.0), "connection failed")], ids=["401", "dropped"])
def test_a_call_in_flight_when_the_breaker_opens_is_recorded_and_not_paid_again(run_cli, home, first, said):
    # The first request to arrive fails at once and opens the breaker (a dropped connection, with
    # --breaker-failures 1); the other, in flight, answers a second later.
    assert run_cli("ingest", SAMPLE, home=home).returncode == 0
    server = StandIn().script(first, Slow(1.0))
    with StandInThread(server):
        result = run_openai(run_cli, home, server, KEY, "--concurrency", "2", "--breaker-failures", "1")
        assert result.returncode == 3 and said in result.stderr, result.stdout + result.stderr
        sent = [r["body"] for r in server.requests]
    calls = judge_calls(home)
    assert len(sent) == 2 and len(calls) == 2, (len(sent), calls)
    assert [c for c in calls if c["http_status"] != 200] and len([c for c in calls if c["http_status"] == 200]) == 1
    assert f"{len(sent)} judge call(s)" in result.stdout
    [answered] = [c for c in calls if c["http_status"] == 200]
    assert answered["error"] is None and answered["reply"] is not None
    # A rerun against a server that answers everything does not ask the recorded request again
    # (the stand-in's smallest replies fail some cases: exit 1, not a stop).
    again = StandIn()
    with StandInThread(again):
        result = run_openai(run_cli, home, again, KEY, "--concurrency", "2")
        assert result.returncode in (0, 1), result.stdout + result.stderr
        assert again.requests and not any(r["body"]["messages"] == answered["request"]["messages"]
                                          for r in again.requests)
    assert judge_calls(home)


def test_calls_in_flight_when_the_budget_is_spent_are_recorded(run_cli, home):
    # --max-calls 2 at concurrency 2: both calls go out together, slowly; the run stops on the cap.
    assert run_cli("ingest", SAMPLE, home=home).returncode == 0
    server = StandIn(delay=0.5)
    with StandInThread(server):
        result = run_openai(run_cli, home, server, KEY, "--concurrency", "2", "--max-calls", "2")
        assert result.returncode == 0, result.stdout + result.stderr
        sent = len(server.requests)
    assert sent == 2 and len(judge_calls(home)) == sent
