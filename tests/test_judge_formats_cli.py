"""``evalledger run --judge openai`` against real servers on 127.0.0.1 that behave like real engines.

- a schema-instance server: every reply is an arbitrary instance of the schema the request sent,
  as any grammar-constrained model (OpenAI strict, vLLM's xgrammar, llama.cpp) may produce: the
  sample pharmacology benchmark, the reconstruction sample and the audit sample must all end
  judged or auto-failed, never ``stage.failed``;
- a server refusing ``json_schema`` with HTTP 400 at concurrency 8: every call in flight when the
  mode switches is asked again, and every case is judged;
- llama-cpp-python's behaviour, HTTP 500 on ``json_schema``: the run moves to ``json_object``;
- the mode chosen by ``--response-format`` and by the ``judge_response_format`` config key.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.testing.stand_in import StandIn, StandInThread, format_mode, schema_instance_reply

SAMPLES = Path(__file__).resolve().parents[1] / "benchmarks" / "samples"
ALL_SAMPLES = [SAMPLES / "pharmacology.benchmark.json", SAMPLES / "polio-vaccine-1955.reconstruction.json",
               SAMPLES / "verifyfast-cases.audit.jsonl"]
DEEP = ["--set", "deep_judgment_enabled=true", "--set", "deep_judgment_search_enabled=true",
        "--set", "deep_judgment_rubric_mode=enable_all"]
CASES = 28 + 1 + 26   # pharmacology (14 questions x 2 models), one reconstruction, 26 audit cases


def events(home: Path, *types: str) -> list:
    with ledger.open_ledger(home) as led:
        return list(led.read(types=list(types) or None))


def run_against(run_cli, home: Path, stand_in: StandIn, files, *args: str):
    """Ingest ``files`` and run the openai judge against ``stand_in`` served on 127.0.0.1."""
    assert run_cli("ingest", *files, home=home).returncode == 0
    with StandInThread(stand_in) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_MODEL": "engine-1", "OPENAI_API_KEY": "x"}
        return run_cli("run", "--judge", "openai", "--quiet", *args, home=home, env=env, timeout=600)


def assert_every_case_ended(home: Path, cases: int) -> None:
    """No stage.failed, and every case reached its kind's terminal event."""
    assert events(home, "stage.failed") == []
    ended = {e.data["case_id"] for e in events(home, "case.judged", "credit.scored", "claim.scored")}
    opened = {e.data["case_id"] for e in events(home, "case.opened")}
    assert len(opened) == cases and opened == ended


@pytest.mark.parametrize("seed", [1, 2])
def test_arbitrary_schema_instances_judge_every_sample_case(run_cli, home, seed):
    result = run_against(run_cli, home, StandIn(reply_fn=schema_instance_reply(seed)), ALL_SAMPLES,
                         *DEEP, "--concurrency", "8")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{CASES} case(s), {CASES} judged, 0 failed" in result.stdout
    assert_every_case_ended(home, CASES)
    calls = [e.data for e in events(home, "judge.called") if e.data["backend"] == "openai"]
    # every reply the server sent fitted its request: no re-ask was ever needed
    assert calls and all(c["error"] is None for c in calls)
    # (score_trait is not among them: with rubric deep judgment on, a trait without valid
    # excerpts is auto-failed unscored; the refusal test below scores traits)
    assert {c["role"] for c in calls} >= {"extract_excerpts", "reason", "parse", "score_claims", "decompose",
                                          "check_facts", "check_logic"}
    assert events(home, "case.auto_failed")   # arbitrary quotes are not in the response


def test_a_format_refusal_at_concurrency_8_still_judges_every_case(run_cli, home):
    server = StandIn(delay=0.05, refuse_formats={"json_schema": 400}, reply_fn=schema_instance_reply(7))
    result = run_against(run_cli, home, server, ALL_SAMPLES, "--concurrency", "8")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{CASES} case(s), {CASES} judged, 0 failed" in result.stdout
    assert_every_case_ended(home, CASES)
    modes = collections.Counter(format_mode(r["body"]) for r in server.requests)
    assert modes["json_schema"] > 1          # several were in flight when the first refusal came
    refused = [e.data for e in events(home, "judge.called") if e.data["http_status"] == 400]
    assert len(refused) == modes["json_schema"]
    assert all(c["request"]["response_format"] == "json_schema" for c in refused)
    later = [e.data for e in events(home, "judge.called") if e.data["error"] is None]
    assert later and all(c["request"]["response_format"] == "json_object" for c in later)
    assert "score_trait" in {c["role"] for c in later}


def test_a_500_on_json_schema_moves_the_run_to_json_object(run_cli, home):
    server = StandIn(refuse_formats={"json_schema": 500}, reply_fn=schema_instance_reply(11))
    result = run_against(run_cli, home, server, ALL_SAMPLES[1:], "--concurrency", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert_every_case_ended(home, 27)
    modes = [format_mode(r["body"]) for r in server.requests]
    assert modes[0] == "json_schema" and set(modes[1:]) == {"json_object"}
    assert json.dumps(server.requests[1]["body"]["response_format"]["schema"])   # the schema rides along


@pytest.mark.parametrize("how, mode", [(["--response-format", "prompt"], "prompt"),
                                       (["--set", "judge_response_format=json_object"], "json_object")])
def test_the_mode_is_chosen_by_flag_or_config(run_cli, home, how, mode):
    server = StandIn(reply_fn=schema_instance_reply(13))
    result = run_against(run_cli, home, server, ALL_SAMPLES[1:2], *how)
    assert result.returncode == 0, result.stdout + result.stderr
    assert {format_mode(r["body"]) for r in server.requests} == {mode}
    assert {e.data["request"]["response_format"] for e in events(home, "judge.called")} == {mode}


def test_a_benchmark_file_cannot_choose_the_response_format(run_cli, home, tmp_path):
    bench = json.loads((SAMPLES / "pharmacology.benchmark.json").read_text())
    bench["config"] = {**(bench.get("config") or {}), "judge_response_format": "prompt"}
    path = tmp_path / "chooser.benchmark.json"
    path.write_text(json.dumps(bench))
    result = run_cli("ingest", path, home=home)
    assert "judge_response_format" in result.stdout + result.stderr
    assert "chosen per run" in result.stdout + result.stderr
