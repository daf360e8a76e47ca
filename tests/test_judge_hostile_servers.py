"""``evalledger run --judge openai`` as a real subprocess against hostile servers on 127.0.0.1.

Each test serves one behaviour a real server (or what sits in front of it) may show, runs the
CLI with short limits through its documented flags, and checks that the run ends in bounded
time with a clear reason, that the ledger verifies, and that the API key is nowhere.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.testing.stand_in import Raw, Slow, StandIn, StandInThread, Status
from judge_server_support import judge_calls

SAMPLE = Path(__file__).resolve().parents[1] / "benchmarks" / "samples" / "pharmacology.benchmark.json"
KEY = "sk-hostile-test-key-5f0c2b9e7d41"


def run_against(run_cli, home: Path, stand_in: StandIn, *args: str, timeout: float = 60):
    """Ingest the sample and run the openai judge against ``stand_in``: (result, seconds taken)."""
    assert run_cli("ingest", SAMPLE, home=home).returncode == 0
    with StandInThread(stand_in) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_MODEL": "hostile-1", "OPENAI_API_KEY": KEY}
        start = time.monotonic()
        result = run_cli("run", "--judge", "openai", "--quiet", *args, home=home, env=env, timeout=timeout)
        return result, time.monotonic() - start


def test_the_timeout_flag_bounds_a_request_the_server_never_answers(run_cli, home):
    # A server that takes the request and sends nothing for a minute (a stuck engine).
    server = StandIn().script(*[Slow(60)] * 4)
    result, seconds = run_against(run_cli, home, server, "--timeout", "1", "--breaker-failures", "2",
                                  "--concurrency", "2")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "timed out after 1 s" in result.stderr
    assert seconds < 30
    calls = judge_calls(home)
    assert calls and all(c["error"] == "timed out after 1 s" for c in calls)


def test_a_base_url_carrying_credentials_is_refused_before_any_case_fails(run_cli, home):
    # aiohttp refuses an Authorization header beside URL credentials with a ValueError: every
    # case used to end in stage.failed; and the URL, secret included, is what messages name.
    assert run_cli("ingest", SAMPLE, home=home).returncode == 0
    with StandInThread(StandIn()) as server:
        url = server.base_url.replace("http://", "http://user:url-secret-31337@")
        env = {"OPENAI_BASE_URL": url, "OPENAI_MODEL": "hostile-1", "OPENAI_API_KEY": KEY}
        result = run_cli("run", "--judge", "openai", "--quiet", home=home, env=env, timeout=60)
        assert server.requests == []
    assert result.returncode == 2, result.stdout + result.stderr
    assert "credentials" in result.stderr and "OPENAI_API_KEY" in result.stderr
    assert "url-secret-31337" not in result.stdout + result.stderr
    with ledger.open_ledger(home) as led:
        assert list(led.read(types=["stage.failed", "judge.called"])) == []


def test_a_key_read_with_its_line_ending_is_sent_without_it(run_cli, home):
    # A key file saved with CRLF: "$(cat key.txt)" keeps the \r. aiohttp refuses the header with a
    # ValueError, which used to end every case in stage.failed without one request sent.
    assert run_cli("ingest", SAMPLE, home=home).returncode == 0
    with StandInThread(StandIn()) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_MODEL": "hostile-1", "OPENAI_API_KEY": KEY + "\r\n"}
        run_cli("run", "--judge", "openai", "--quiet", home=home, env=env, timeout=60)
        assert server.requests and all(r["authorized"] for r in server.requests)
    with ledger.open_ledger(home) as led:
        assert [e.data["reason"] for e in led.read(types=["stage.failed"]) if "ValueError" in e.data["reason"]] == []


def test_a_key_with_a_control_character_inside_is_a_usage_error(run_cli, home):
    assert run_cli("ingest", SAMPLE, home=home).returncode == 0
    with StandInThread(StandIn()) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_MODEL": "hostile-1", "OPENAI_API_KEY": "sk-a\nb"}
        result = run_cli("run", "--judge", "openai", "--quiet", home=home, env=env, timeout=60)
        assert server.requests == []
    assert result.returncode == 2 and "OPENAI_API_KEY" in result.stderr, result.stdout + result.stderr
    assert "sk-a" not in result.stderr


def test_calls_the_open_breaker_refused_are_not_counted_as_made(run_cli, home):
    # A 401 opens the breaker at once: the calls waiting for a slot send nothing, and the run's
    # summary, run.completed and the cost line must say as many calls as the ledger recorded.
    server = StandIn(delay=0.2).script(*[Status(401, body='{"error": "bad key"}')] * 40)
    result, seconds = run_against(run_cli, home, server, "--concurrency", "2")
    assert result.returncode == 3 and "HTTP 401" in result.stderr, result.stdout + result.stderr
    sent = len(server.requests)
    # a call still in flight when the breaker opened ends and is recorded (tests/test_judge_stop_in_flight.py)
    assert 1 <= len(judge_calls(home)) == sent <= 2
    assert f"{sent} judge call(s), 0 retries" in result.stdout
    with ledger.open_ledger(home) as led:
        [completed] = [e.data for e in led.read(types=["run.completed"])]
    assert (completed["judge_calls"], completed["model_calls"]) == (sent, sent)


def test_a_key_the_server_echoes_across_the_error_cut_leaves_no_part_of_it(run_cli, home):
    # The error kept is the body's first 300 characters: a key echoed across that cut used to be
    # kept in part (its first characters), past the redaction of the whole key.
    body = '{"error": "' + "x" * (300 - 11 - 8) + KEY + '"}'    # the key starts 8 characters before the cut
    server = StandIn().script(*[Status(400, body=body)] * 200)
    result, _ = run_against(run_cli, home, server, "--concurrency", "2")
    assert server.requests, result.stdout + result.stderr
    part = KEY[:8]
    assert part not in result.stdout + result.stderr
    assert not any(part in json.dumps(c) for c in judge_calls(home))
    with ledger.open_ledger(home) as led:
        assert not any(part in json.dumps(e.data) for e in led.read())


def test_an_over_cap_body_cut_inside_the_echoed_key_keeps_no_part_of_it():
    from evalledger.stages.judge.recorded_calls import redact_cut
    for size in range(3, len(KEY)):
        assert KEY[:size] not in redact_cut("echo: " + KEY + " and " + KEY[:size], KEY)
    assert redact_cut("answer: yes", KEY) == "answer: yes"


@pytest.mark.parametrize("url", ["http://judge..local/v1", "http://" + "a" * 64 + ".local/v1", "http://127.0.0.1:99999/v1"],
                         ids=["empty label", "label over 63", "port over 65535"])
def test_a_base_url_no_request_can_use_is_a_usage_error_before_any_call(run_cli, home, url):
    # The resolver cannot encode an empty or over-long host label: every call used to be recorded
    # as "the server's answer could not be read: UnicodeError", retried until the breaker opened
    # (exit 3); a port out of range failed every call in flight as "request failed".
    assert run_cli("ingest", SAMPLE, home=home).returncode == 0
    env = {"OPENAI_BASE_URL": url, "OPENAI_MODEL": "hostile-1", "OPENAI_API_KEY": KEY}
    result = run_cli("run", "--judge", "openai", "--quiet", home=home, env=env, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "OPENAI_BASE_URL" in result.stderr and "UnicodeError" not in result.stderr
    with ledger.open_ledger(home) as led:
        assert list(led.read(types=["stage.failed", "judge.called"])) == []


ESCAPED_KEY = "\\u0073" + KEY[1:]   # the key as JSON may spell it: its first letter as an escape


@pytest.mark.parametrize("answer", [
    Status(400, body='{"error": "bad key ' + ESCAPED_KEY + '"}'),
    # a reply whose text (itself JSON) holds the key escaped once more: decoded twice, it is whole
    Raw(b'{"choices":[{"message":{"content":"{\\"verdict\\": \\"\\\\u0073' + KEY[1:].encode() + b'\\"}"},'
        b'"finish_reason":"stop"}]}')])
def test_a_key_the_server_echoes_with_json_escapes_is_redacted_too(run_cli, home, answer):
    """The key was blotted out of the body's text as sent; a server that spelled it with a JSON
    escape (``\\u0073k-...``) had it decoded whole into the recorded error or reply, the stderr
    and the reports."""
    server = StandIn().script(*[answer] * 200)
    result, _ = run_against(run_cli, home, server, "--concurrency", "2")
    assert server.requests, result.stdout + result.stderr
    assert KEY[1:] not in result.stdout + result.stderr
    assert not any(KEY[1:] in json.dumps(c) for c in judge_calls(home))
    with ledger.open_ledger(home) as led:
        assert not any(KEY[1:] in json.dumps(e.data) for e in led.read())
    assert run_cli("report", home=home).returncode == 0
    assert not any(KEY[1:] in p.read_text() for p in (home / "reports").rglob("*") if p.is_file())


def test_a_2xx_other_than_200_is_an_answer_when_it_holds_a_completion_and_retried_when_not(run_cli, home):
    """A 201 (or any 2xx but 200) was taken as the server refusing the request: the case failed,
    and a paid reply's usage went unrecorded. A 2xx with a completion is an answer; one without
    (a bare 204) is not a chat completion, and is retried."""
    from evalledger.stages.judge.http_outcome import classify
    completion = '{"choices":[{"message":{"content":"{}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3}}'
    taken = classify(201, {}, completion, 1.0)
    assert taken.kind == "reply" and taken.status == 201 and taken.content == "{}"
    server = StandIn().script(Raw(b"", status=204))
    result, _ = run_against(run_cli, home, server)
    assert "HTTP 204" not in result.stdout + result.stderr   # no case failed for it
    [bare] = [c for c in judge_calls(home) if c["http_status"] == 204]
    assert "not a chat completion" in bare["error"]
    retried = [c for c in judge_calls(home) if c["case_id"] == bare["case_id"] and c["role"] == bare["role"]]
    assert any(c["error"] is None for c in retried), retried   # asked again, and answered


def test_control_characters_a_server_sends_are_escaped_where_they_are_printed(run_cli, home):
    """A server's error text reached the terminal raw: an escape sequence retitled the window and
    a newline forged a line of the log. Control characters are written as \\xNN."""
    body = 'bad \x1b]0;pwned\x07 request\nfake-line level=info'
    server = StandIn().script(*[Status(400, body=body)] * 200)
    result, _ = run_against(run_cli, home, server, "--concurrency", "2")
    said = result.stdout + result.stderr
    assert "\x1b" not in said and "\x07" not in said and "\nfake-line" not in said
    assert "\\x1b]0;pwned\\x07 request\\x0afake-line" in said


def test_the_judges_warnings_under_watch_are_lines_of_its_log(run_cli, home):
    """watch --log-format json printed the judge's retry warnings as bare text among its JSON
    lines (they went to Python's last-resort handler); they are log lines of the daemon now."""
    server = StandIn().script(Status(400, body="refused once"))
    assert run_cli("ingest", SAMPLE, home=home).returncode == 0
    with StandInThread(server) as serving:
        env = {"OPENAI_BASE_URL": serving.base_url, "OPENAI_MODEL": "hostile-1", "OPENAI_API_KEY": KEY}
        done = run_cli("watch", "--once", "--judge", "openai", "--log-format", "json", home=home, env=env,
                       timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines and all(line.startswith("{") for line in lines), done.stderr
    assert any(json.loads(line).get("event") == "judge" and "refused once" in json.loads(line)["message"]
               for line in lines), done.stderr
