"""Headers a hostile server sends that the HTTP client takes but Python cannot read.

A ``Retry-After`` HTTP date with a year (or zone) of twenty digits made ``email.utils`` raise
OverflowError, which is not an aiohttp error: it escaped the backend and every case ended in
``stage.failed``, as if the cases were at fault. It is now no Retry-After at all (the backoff
applies), and the server's 503s count as the server failing: retried, then the breaker stops
the run with exit 3 and the cases pending. Malformed responses (bad status lines, Content-Length,
chunk sizes, NUL in a header, oversized headers) aiohttp reports as its own ClientResponseError:
tests/test_judge_malformed_http.py.
"""

from __future__ import annotations

import pytest

from evalledger import ledger
from evalledger.stages.judge.http_outcome import _retry_after
from evalledger.testing.stand_in import StandIn, StandInThread, Status
from judge_server_support import SAMPLE, run_openai

KEY = "sk-hostile-header-key-0b7e2d"
OVERFLOWING = ["Fri, 31 Dec 99999999999999999999 23:59:59 GMT", "Fri, 31 Dec 2026 23:59:59 +99999999999999999999"]


@pytest.mark.parametrize("retry_after", OVERFLOWING, ids=["year", "zone"])
def test_an_unreadable_retry_after_is_the_server_failing_not_the_cases(run_cli, home, retry_after):
    assert run_cli("ingest", SAMPLE, home=home).returncode == 0
    server = StandIn().script(*[Status(503, retry_after=retry_after)] * 200)
    with StandInThread(server):
        result = run_openai(run_cli, home, server, KEY, "--concurrency", "2", "--breaker-failures", "3")
        asked = len(server.requests)
    assert result.returncode == 3 and "HTTP 503" in result.stderr, result.stdout + result.stderr
    assert "OverflowError" not in result.stdout + result.stderr
    with ledger.open_ledger(home) as led:
        assert led.verify().ok
        assert list(led.read(types=["stage.failed"])) == []
        calls = [e.data for e in led.read(types=["judge.called"])]
    assert 3 <= len(calls) == asked and all(c["http_status"] == 503 for c in calls)


def test_no_retry_after_value_raises():
    for value in OVERFLOWING + ["Fri, 31 Dec 2026 99:59:59 GMT", "\udcff\udcfe", "nan", "-inf", "1e999", "",
                                "Mon, 1 Jan 10000 00:00:00 GMT", "31 Dec 0 00:00:00 GMT", "0x10"]:
        seconds = _retry_after(value)
        assert seconds is None or 0 <= seconds < float("inf"), value


def test_retry_after_is_digits_of_seconds_or_a_date():
    # float() takes all of these; none is RFC 9110's delay-seconds (digits), so none is a delay
    for value in ["1_000", "-5", "+5", " 1e3", "١٢", "5 s"]:
        assert _retry_after(value) is None, value
    assert _retry_after("120") == 120.0 and _retry_after(" 7 ") == 7.0 and _retry_after("1.5") == 1.5
    assert 0 < _retry_after("Fri, 31 Dec 9998 23:59:59 GMT") < float("inf")
