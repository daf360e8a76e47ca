"""history and override on a home the real stages judged (offline judge)."""

from __future__ import annotations

import json

import pytest

from evalledger import ledger
from evalledger.cli.main import main
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from stages_support import RESPONSE, home_with, template_benchmark


@pytest.fixture
def judged_home(tmp_path):
    home = home_with(tmp_path, ("b.json", template_benchmark(
        config={"deep_judgment_enabled": True},
        responses=[{"question_id": "q1", "model": "model-a", "text": RESPONSE},
                   {"question_id": "q1", "model": "model-b", "text": "There are 24 pairs."}])))
    with ledger.open_ledger(home) as led:
        assert run_until_idle(led, RunSettings(judge_backend="offline")).judged == 2
    return home


def case_of(home, model: str) -> str:
    with ledger.open_ledger(home) as led:
        return next(e.data["case_id"] for e in led.read(types=["case.opened"]) if e.data["model"] == model)


def test_history_json_is_the_exact_ordered_stream_with_judge_calls(judged_home, capsys):
    case_id = case_of(judged_home, "model-a")
    assert main(["--home", str(judged_home), "history", case_id[:6], "--json"]) == 0
    history = json.loads(capsys.readouterr().out)
    with ledger.open_ledger(judged_home) as led:
        stream = list(led.read(stream=f"case:{case_id}"))
    assert history["case_id"] == case_id and history["model"] == "model-a"
    assert [(r["seq"], r["type"], r["hash"]) for r in history["events"]] == [(e.seq, e.type, e.hash) for e in stream]
    # every envelope field, as the docs promise (stream, version, schema and meta were left out)
    assert [(r["stream"], r["version"], r["schema"], r["meta"], r["prev_hash"], r["id"]) for r in history["events"]] \
        == [(e.stream, e.version, e.schema, e.meta, e.prev_hash, e.id) for e in stream]
    rows = {r["type"]: r for r in history["events"]}
    opened = rows["case.opened"]
    with ledger.open_ledger(judged_home) as led:                 # caused by an event of another stream
        assert opened["causation_seq"] == led.get(opened["causation"]).seq
    for row in history["events"][1:]:
        assert row["causation"] == opened["id"] and row["causation_seq"] == opened["seq"]
        assert row["recorded_at"] and row["stage"]
    [extract] = [r for r in history["events"] if r["type"] == "judge.called" and r["data"]["role"] == "extract_excerpts"]
    excerpt_calls = [c["seq"] for r in history["events"] if r["type"] == "excerpt.extracted" for c in r["judge_calls"]]
    assert excerpt_calls and set(excerpt_calls) == {extract["seq"]}
    parsed = rows["answer.parsed"]["judge_calls"]
    assert [(c["role"], c["backend"], c["model"], c["attempt"]) for c in parsed] == [
        ("parse", "offline", "offline-heuristics-1", 1)]
    assert rows["case.judged"]["judge_calls"] == [] and rows["case.judged"]["computed"] is True


def test_history_text_lists_every_event_and_its_calls(judged_home, capsys):
    case_id = case_of(judged_home, "model-b")
    assert main(["--home", str(judged_home), "history", case_id]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"case {case_id}  benchmark ")
    assert "case.judged" in text and "verdict='fail'" in text
    assert "judge seq" in text and "parse offline/offline-heuristics-1 attempt 1" in text
    assert "computed by code, no judge call" in text


def test_history_of_an_unknown_case_is_a_usage_error(judged_home, capsys):
    assert main(["--home", str(judged_home), "history", "ffffffffffff"]) == 2
    assert "no case 'ffffffffffff'" in capsys.readouterr().err


def test_override_is_recorded_honoured_and_shown_in_history(judged_home, capsys):
    case_id = case_of(judged_home, "model-b")
    assert main(["--home", str(judged_home), "override", case_id, "--verdict", "pass",
                 "--reason", "24 is what the source says", "--author", "rev"]) == 0
    assert "verdict.overridden" in capsys.readouterr().out
    assert main(["--home", str(judged_home), "report"]) == 0
    capsys.readouterr()
    rows = [json.loads(x) for x in (judged_home / "reports" / "evaluations.jsonl").read_text().splitlines()]
    row = next(r for r in rows if r["case_id"] == case_id)
    assert (row["verdict"], row["original_verdict"]) == ("pass", "fail")
    assert row["override"] == {"verdict": "pass", "reason": "24 is what the source says", "author": "rev"}
    assert main(["--home", str(judged_home), "history", case_id]) == 0
    text = capsys.readouterr().out
    assert "verdict='fail'" in text and "verdict.overridden" in text and "author='rev'" in text


def test_override_needs_a_known_case_and_a_reason(judged_home, capsys):
    assert main(["--home", str(judged_home), "override", "nope", "--verdict", "pass",
                 "--reason", "x", "--author", "a"]) == 2
    case_id = case_of(judged_home, "model-a")
    assert main(["--home", str(judged_home), "override", case_id, "--verdict", "fail",
                 "--reason", "  ", "--author", "a"]) == 2
    with pytest.raises(SystemExit):
        main(["--home", str(judged_home), "override", case_id, "--verdict", "maybe", "--reason", "r", "--author", "a"])


def test_the_text_view_shows_notes_parsed_values_quotes_facts_and_errors(tmp_path, run_cli):
    """What only --json showed: note texts, parsed values, quotes, audit facts and errors."""
    from pathlib import Path
    samples = Path(__file__).resolve().parents[1] / "benchmarks" / "samples"
    home = tmp_path / "h"
    run_cli("init", home=home)
    run_cli("ingest", samples / "pharmacology.benchmark.json", home=home)
    run_cli("ingest", samples / "verifyfast-cases.audit.jsonl", home=home)
    assert run_cli("run", "--set", "deep_judgment_enabled=true", home=home).returncode == 0
    with ledger.open_ledger(home, readonly=True) as led:
        template = next(e.data["case_id"] for e in led.read(types=["answer.parsed"]))
        parsed = next(e.data["values"] for e in led.read(types=["answer.parsed"]) if e.data["case_id"] == template)
        quote = next(e.data["text"] for e in led.read(types=["excerpt.extracted"]) if e.data["case_id"] == template)
        audit = next(e for e in led.read(types=["facts.decomposed"]) if e.data["facts"])
        flagged = next(e for e in led.read(types=["facts.checked", "logic.checked"]) if e.data["errors"])
    run_cli("note", template[:12], "parse\nlooks \x1b[31mwrong", "--author", "ana", home=home)
    text = run_cli("history", template, home=home).stdout
    assert "note by ana: parse\\nlooks \\x1b[31mwrong" in text  # rendered as text, escapes and all
    for name in parsed:
        assert f"parsed {name} = " in text
    assert f"quote: {quote[:60]}" in text
    audit_text = run_cli("history", audit.data["case_id"], home=home).stdout
    assert f"fact 1: {audit.data['facts'][0][:60]}" in audit_text
    flagged_text = run_cli("history", flagged.data["case_id"], home=home).stdout
    error = flagged.data["errors"][0]
    assert f"{error['severity']} {error['level']}: {error['detail'][:60]}" in flagged_text
