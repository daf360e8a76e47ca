"""A long Retry-After: capped by ``--retry-after-max``, said on stderr, and bounded per call.

A server answering 429 with ``Retry-After: 999999`` (or an HTTP date years ahead) used to hold
a run for max_attempts x 120 s without a word. ``evalledger run`` runs as a real subprocess
against a real server on 127.0.0.1.
"""

from __future__ import annotations

import collections
import time
from pathlib import Path

import pytest

from evalledger.stages.config import JudgeOptions
from evalledger.stages.judge import JudgeSettings
from evalledger.testing.stand_in import StandIn, StandInThread, Status
from judge_server_support import SAMPLE, judge_calls, run_openai

KEY = "sk-retry-after-test-key-31c9a"


def run_against(run_cli, home: Path, server: StandIn, *args: str):
    """``evalledger run --judge openai`` against ``server``: (result, seconds taken)."""
    start = time.monotonic()
    result = run_openai(run_cli, home, server, KEY, *args, timeout=90)
    return result, time.monotonic() - start


@pytest.mark.parametrize("retry_after", ["999999", "Fri, 31 Dec 9999 23:59:59 GMT"], ids=["seconds", "date"])
def test_a_long_retry_after_is_cut_to_the_flag_said_on_stderr_and_bounded(run_cli, home, retry_after):
    assert run_cli("ingest", SAMPLE, home=home).returncode == 0
    server = StandIn().script(*[Status(429, retry_after=retry_after)] * 500)
    with StandInThread(server):
        result, seconds = run_against(run_cli, home, server, "--concurrency", "1", "--retry-after-max", "0.5")
        asked = len(server.requests)
    assert result.returncode == 3 and "after 5 attempts" in result.stderr, result.stdout + result.stderr
    assert seconds < 30                     # at most four waits of half a second per call
    waits = [line for line in result.stderr.splitlines() if "waiting 0.5 s before try" in line]
    assert waits and server.base_url in waits[0] and "HTTP 429 with Retry-After" in waits[0], result.stderr
    assert "cut to 0.5 s (--retry-after-max)" in waits[0] and "try 2 of 5" in waits[0]
    calls = judge_calls(home)
    assert len(calls) == asked
    tries = collections.Counter((c["case_id"], c["request_hash"]) for c in calls)
    assert max(tries.values()) == 5              # no call tried past max_attempts
    assert asked - len(tries) <= len(waits) < asked   # every wait before a try was said (the last try has none)


def test_the_flag_is_checked_and_mirrors_the_config_key(run_cli, home):
    result = run_cli("run", "--judge", "openai", "--retry-after-max", "-1", home=home,
                     env={"OPENAI_MODEL": "patient-1", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert result.returncode == 2 and "--retry-after-max" in result.stderr, result.stdout + result.stderr
    assert JudgeOptions(retry_after_max_s=2).settings_keys() == {"retry_after_max_s": 2}
    with pytest.raises(ValueError):
        JudgeSettings(retry_after_max_s=3601)
