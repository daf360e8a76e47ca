"""Infrastructure errors are not verdicts: real runs against a real server on 127.0.0.1, or none.

A dead server, 401, and 5xx storms stop `evalledger run` early with one line and exit 3; no case
gets `stage.failed`, `status` shows them pending, and a rerun against a live server finishes
them. A 5xx blip is retried and judged. A 429 storm with Retry-After is survived: every case is
judged, and the recorded `concurrency` of the attempts falls, then climbs back to the ceiling.
Under `watch` the daemon logs the stop and tries again at its next rescan.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import time
from pathlib import Path

from evalledger import ledger
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.intake import ingest_path
from evalledger.stages.judge import JudgeCallFailed, JudgeSettings, make_judge
from evalledger.testing.stand_in import Reply, StandIn, StandInThread, Status
from watch_support import CLI, cli_env, wait_for

AUDIT = Path(__file__).resolve().parents[1] / "benchmarks" / "samples" / "verifyfast-cases.audit.jsonl"
AUDIT_CASES = 26


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def audit_home(tmp_path: Path, run_cli) -> Path:
    """A home with the 26 VerifyFast audit sample cases ingested."""
    home = tmp_path / "home"
    run_cli("init", home=home)
    assert run_cli("ingest", AUDIT, home=home).returncode == 0
    return home


def judge_env(port: int) -> dict[str, str]:
    """The environment pointing the openai judge at 127.0.0.1:port."""
    return {"OPENAI_API_KEY": "sk-local-placeholder-key", "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"}


def run_openai(run_cli, home: Path, port: int, *extra: str):
    """``evalledger run`` with the openai judge against 127.0.0.1:port."""
    return run_cli("run", "--judge", "openai", "--model", "stand-in-1", "--quiet", *extra, home=home,
                   env=judge_env(port))


def of_type(home: Path, type: str) -> list[dict]:
    """The payloads of every event of ``type`` in the home."""
    with ledger.open_ledger(home) as led:
        return [e.data for e in led.read(types=[type])]


def assert_stopped_with_cases_pending(home: Path, run_cli, done, reason: str) -> None:
    """Exit 3 with one stderr line naming ``reason``; nothing failed or judged; status says pending."""
    assert done.returncode == 3, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "stopped early" in lines[0] and reason in lines[0] and "left pending" in lines[0]
    assert of_type(home, "stage.failed") == [] and of_type(home, "credit.scored") == []
    status = json.loads(run_cli("status", "--json", home=home).stdout)
    assert status["cases"] == {"failed": 0, "judged": 0, "opened": AUDIT_CASES}
    [completed] = of_type(home, "run.completed")
    assert reason in completed["stopped"] and completed["pending"] == AUDIT_CASES
    assert completed["stop"] == "judge_unavailable" and completed["left_pending"] == AUDIT_CASES
    assert run_cli("verify", home=home).returncode == 0


def assert_rerun_finishes(home: Path, run_cli, port: int) -> None:
    """A rerun against a live stand-in on the same port judges every case, failing none."""
    with StandInThread(StandIn(), port=port):
        done = run_openai(run_cli, home, port)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(of_type(home, "credit.scored")) == AUDIT_CASES and of_type(home, "stage.failed") == []


def test_a_dead_server_stops_the_run_with_one_line_and_a_rerun_finishes(tmp_path, run_cli):
    home = audit_home(tmp_path, run_cli)
    port = free_port()
    done = run_openai(run_cli, home, port)
    assert_stopped_with_cases_pending(home, run_cli, done, "cannot connect")
    # At most one refused attempt per call in flight, not five attempts per case.
    assert len(of_type(home, "judge.called")) <= 8
    assert_rerun_finishes(home, run_cli, port)


def test_401_stops_the_run_and_fails_no_case(tmp_path, run_cli):
    home = audit_home(tmp_path, run_cli)
    server = StandIn().script(*[Status(401, body='{"error": {"message": "invalid api key"}}')] * 50)
    with StandInThread(server, port=free_port()) as stand_in:
        done = run_openai(run_cli, home, stand_in.port)
        asked = len(stand_in.requests)
    assert_stopped_with_cases_pending(home, run_cli, done, "HTTP 401")
    assert asked <= 8 and "invalid api key" in done.stderr
    assert_rerun_finishes(home, run_cli, stand_in.port)


def test_a_5xx_storm_opens_the_breaker_after_n_failures_in_a_row(tmp_path, run_cli):
    home = audit_home(tmp_path, run_cli)
    server = StandIn().script(*[Status(503)] * 500)
    with StandInThread(server, port=free_port()) as stand_in:
        done = run_openai(run_cli, home, stand_in.port, "--breaker-failures", "4", "--concurrency", "2")
        asked = len(stand_in.requests)
    assert_stopped_with_cases_pending(home, run_cli, done, "4 failures in a row")
    # the breaker stops the calls in flight too: a few more than the threshold, never 5 a case
    assert 4 <= asked <= 4 + 2
    assert {c["http_status"] for c in of_type(home, "judge.called")} == {503}
    assert_rerun_finishes(home, run_cli, stand_in.port)


def test_5xx_after_the_attempts_stop_the_run(tmp_path):
    # One call at a time, so the breaker's count never reaches its threshold first.
    home = tmp_path / "home"
    ledger.init_home(home)
    with ledger.open_ledger(home) as led:
        ingest_path(led, AUDIT)
    with StandInThread(StandIn().script(*[Status(500)] * 50)) as stand_in:
        settings = RunSettings(judge_backend="openai", judge_model="m", max_cases_in_flight=1,
                               judge_options={"base_url": stand_in.base_url, "backoff_base_s": 0.01,
                                              "max_attempts": 3, "breaker_failures": 100, "concurrency": 1})
        with ledger.open_ledger(home) as led:
            summary = run_until_idle(led, settings)
    assert summary.stopped is not None and "HTTP 500" in summary.stopped and "after 3 attempts" in summary.stopped
    assert (summary.failed, summary.judged, summary.pending) == (0, 0, AUDIT_CASES)
    assert len(stand_in.requests) == 3


def test_a_request_that_fails_while_the_server_answers_others_fails_alone(tmp_path):
    """5xx for one request while other calls succeed: that call fails (its case can be retried),
    the run is not stopped, so one such case cannot hold every later run back."""
    home = tmp_path / "home"
    ledger.init_home(home)
    check = {"context_input": "c", "model_output": "o", "facts": ["f"]}
    # one slot: A's first try, B (answered), then A's two retries
    server = StandIn().script(Status(500), Reply({"errors": []}), Status(500), Status(500))
    with StandInThread(server) as stand_in:
        async def go():
            with ledger.open_ledger(home) as led:
                settings = JudgeSettings(backend="openai", model="m", base_url=stand_in.base_url, concurrency=1,
                                         max_attempts=3, backoff_base_s=0.05, backoff_max_s=0.05)
                async with make_judge(settings, led) as judge:
                    return await asyncio.gather(
                        judge.call("check_facts", {**check, "facts": ["a"]}, case_id="a"),
                        judge.call("check_facts", {**check, "facts": ["b"]}, case_id="b"), return_exceptions=True)

        failed_a, answered_b = asyncio.run(asyncio.wait_for(go(), 30))
    assert isinstance(failed_a, JudgeCallFailed) and "the server answered other calls" in str(failed_a)
    assert answered_b.errors == []


def test_a_5xx_blip_is_retried_and_every_case_judged(tmp_path, run_cli):
    home = audit_home(tmp_path, run_cli)
    server = StandIn().script(Status(500), Status(502), Status(503, retry_after=0.05), Status(504))
    with StandInThread(server, port=free_port()) as stand_in:
        done = run_openai(run_cli, home, stand_in.port, "--set", "judge_options.breaker_failures=10")
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(of_type(home, "credit.scored")) == AUDIT_CASES
    assert sorted(c["http_status"] for c in of_type(home, "judge.called") if c["error"]) == [500, 502, 503, 504]


def test_a_429_storm_with_retry_after_lowers_concurrency_then_it_recovers(tmp_path, run_cli):
    home = audit_home(tmp_path, run_cli)
    server = StandIn(delay=0.01).script(*[Status(429, retry_after=0.05)] * 24)
    with StandInThread(server, port=free_port()) as stand_in:
        done = run_openai(run_cli, home, stand_in.port, "--concurrency", "8")
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(of_type(home, "credit.scored")) == AUDIT_CASES and of_type(home, "stage.failed") == []
    with ledger.open_ledger(home) as led:
        attempts = [e.data for e in led.read(types=["judge.called"])]
    limits = [a["concurrency"] for a in attempts]
    assert sum(a["http_status"] == 429 for a in attempts) == 24
    assert limits[0] == 8 and min(limits) < 8       # cut in the storm
    assert limits[-1] == 8                          # and back to the ceiling once it passed


def test_a_retry_after_longer_than_the_cap_is_cut_to_it(tmp_path):
    home = tmp_path / "home"
    ledger.init_home(home)
    with StandInThread(StandIn().script(Status(429, retry_after=3600))) as stand_in:
        async def go():
            with ledger.open_ledger(home) as led:
                async with make_judge(JudgeSettings(backend="openai", model="m", base_url=stand_in.base_url,
                                                    retry_after_max_s=0.2), led) as judge:
                    return await asyncio.wait_for(judge.call("check_facts", {
                        "context_input": "c", "model_output": "o", "facts": ["f"]}, case_id="c1"), 20)

        started = time.perf_counter()
        assert asyncio.run(go()).errors == []
    assert time.perf_counter() - started < 10


def test_infrastructure_errors_never_degrade_a_template_case_into_a_verdict(tmp_path):
    """Template and rubric steps go on without reasoning when a call fails; not when the server is down."""
    from stages_support import home_with, template_benchmark
    home = home_with(tmp_path, ("b.json", template_benchmark(config={"deep_judgment_enabled": True})))
    with StandInThread(StandIn().script(*[Status(403)] * 20)) as stand_in:
        settings = RunSettings(judge_backend="openai", judge_model="m",
                               judge_options={"base_url": stand_in.base_url})
        with ledger.open_ledger(home) as led:
            summary = run_until_idle(led, settings)
    assert "HTTP 403" in summary.stopped and summary.judged == 0 and summary.failed == 0
    assert of_type(home, "case.judged") == [] and of_type(home, "reasoning.generated") == []


def test_provider_flags_out_of_bounds_are_usage_errors(tmp_path, run_cli):
    home = audit_home(tmp_path, run_cli)
    for flags, message in ((["--temperature", "3"], "--temperature"), (["--temperature", "warm"], "--temperature"),
                           (["--max-tokens", "0"], "--max-tokens"), (["--breaker-failures", "0"], "--breaker-failures"),
                           (["--set", "judge_options.timeout_s=0"], "judge_options.timeout_s")):
        done = run_openai(run_cli, home, free_port(), *flags)
        assert done.returncode == 2 and message in done.stderr, (flags, done.stderr)


def test_provider_settings_reach_the_server_from_flags_and_config(tmp_path, run_cli):
    home = audit_home(tmp_path, run_cli)
    config = tmp_path / "judge.toml"
    config.write_text('[judge_options]\ntemperature = "omit"\nmax_completion_tokens = 300\n')
    with StandInThread(StandIn(), port=free_port()) as stand_in:
        done = run_openai(run_cli, home, stand_in.port, "--config", str(config), "--max-tokens", "200")
        bodies = [r["body"] for r in stand_in.requests]
    assert done.returncode == 0, done.stderr
    assert all("temperature" not in b and b["max_completion_tokens"] == 300 and b["max_tokens"] == 200
               for b in bodies)
    [started] = of_type(home, "run.started")
    assert started["config"]["judge_options"]["max_completion_tokens"] == 300


def test_watch_logs_the_stop_keeps_cases_pending_and_finishes_once_the_server_is_back(tmp_path, run_cli):
    home = tmp_path / "home"
    run_cli("init", home=home)
    port = free_port()
    log_path = tmp_path / "watch.log"
    with open(log_path, "ab") as log:
        daemon = subprocess.Popen([*CLI, "--home", str(home), "watch", "--judge", "openai", "--model", "m",
                                   "--log-format", "json", "--rescan-seconds", "0.5"],
                                  stdout=subprocess.DEVNULL, stderr=log, env={**cli_env(), **judge_env(port)})
    try:
        (home / "inbox" / AUDIT.name).write_bytes(AUDIT.read_bytes())
        assert wait_for(lambda: '"run_stopped"' in log_path.read_text(), timeout=60), log_path.read_text()
        assert of_type(home, "stage.failed") == []
        with StandInThread(StandIn(), port=port):
            assert wait_for(lambda: len(of_type(home, "credit.scored")) == AUDIT_CASES, timeout=90), \
                log_path.read_text()
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(30)
    assert of_type(home, "stage.failed") == []
    stopped = [json.loads(line) for line in log_path.read_text().splitlines() if '"run_stopped"' in line]
    assert "cannot connect" in stopped[0]["reason"] and stopped[0]["pending"] == AUDIT_CASES


def test_watch_once_exits_3_when_the_judge_is_down(tmp_path, run_cli):
    home = tmp_path / "home"
    run_cli("init", home=home)
    (home / "inbox" / AUDIT.name).write_bytes(AUDIT.read_bytes())
    done = run_cli("watch", "--once", "--judge", "openai", "--model", "m", home=home, env=judge_env(free_port()))
    assert done.returncode == 3, done.stderr
    assert "run_stopped" in done.stderr and of_type(home, "stage.failed") == []


def test_a_benchmark_file_cannot_set_the_provider_settings():
    from evalledger.stages.config import benchmark_config_errors
    errors = benchmark_config_errors({"judge_options": {"timeout_s": 3600}})
    assert [e["where"] for e in errors] == ["config.judge_options"]
    assert "chosen per run" in errors[0]["reason"]
