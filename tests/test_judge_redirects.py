"""A judge server answering with a redirect: not followed (the prompts stay where they were sent).

The OpenAI SDK does not follow redirects either. A 3xx is a failed call naming the status and
where it pointed (without credentials), and, like a 401 or 404, it stops the run (exit 3, cases
pending): a redirect on every call is a base URL that is not the server's.
"""

from __future__ import annotations

import pytest

from evalledger import ledger
from evalledger.testing.stand_in import StandIn, StandInThread, Status
from judge_server_support import SAMPLE, run_openai

KEY = "sk-redirect-test-key-77c0de51"


@pytest.mark.parametrize("status", [307, 308, 302])
def test_a_redirect_is_not_followed_and_stops_the_run(run_cli, home, status):
    assert run_cli("ingest", SAMPLE, home=home).returncode == 0
    elsewhere = StandIn()
    with StandInThread(elsewhere):
        port = elsewhere.port
        location = f"http://collector:hunter2-secret@127.0.0.1:{port}/v1/chat/completions?k={KEY}"
        server = StandIn().script(*[Status(status, body="", headers={"Location": location})] * 50)
        with StandInThread(server):
            result = run_openai(run_cli, home, server, KEY, "--concurrency", "2")
            asked = len(server.requests)
        assert elsewhere.requests == []   # the prompts never went where the Location pointed
    output = result.stdout + result.stderr
    assert result.returncode == 3, output
    assert f"HTTP {status}" in result.stderr and f"127.0.0.1:{port}/v1/chat/completions" in result.stderr
    assert "hunter2-secret" not in output and KEY not in output
    with ledger.open_ledger(home) as led:
        assert led.verify().ok
        calls = [e.data for e in led.read(types=["judge.called"])]
        assert list(led.read(types=["stage.failed"])) == []
    assert 1 <= len(calls) == asked <= 2
    assert all(c["http_status"] == status and "redirect" in c["error"] for c in calls)
    assert not any("hunter2-secret" in c["error"] or KEY in c["error"] for c in calls)


def test_the_redirect_target_named_carries_no_credentials_query_or_control_characters():
    from evalledger.stages.judge.http_outcome import redirect_target
    assert redirect_target("https://u:p@[::1]:8443/v1/x?token=abc#f") == "https://[::1]:8443/v1/x"
    assert redirect_target("/v2/chat/completions?key=1") == "/v2/chat/completions"
    assert redirect_target(None) == "no Location"
    assert redirect_target("http://h:99999/") == "an unreadable Location"
    assert "\n" not in redirect_target("http://h/a\nb") and len(redirect_target("/" + "a" * 5000)) == 200
