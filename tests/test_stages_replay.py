"""Replaying the stages under a new config with the replay judge: deterministic steps recompute
from the recorded judge replies, and nothing is asked of a model."""

from __future__ import annotations

from evalledger import ledger
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.judge import JudgeSettings, make_judge
from evalledger.testing.stand_in import StandIn, StandInThread
from stages_scripted import every_path_judge
from stages_support import AUDIT_LINES, data, home_with, template_benchmark


def test_replay_with_new_credit_parameters_recomputes_scores_from_recorded_replies(tmp_path):
    lines = [AUDIT_LINES[1]]
    source = home_with(tmp_path / "a", ("a.jsonl", lines))
    with StandInThread(StandIn(reply_fn=every_path_judge())) as stand_in, ledger.open_ledger(source) as led:
        settings = RunSettings(judge_backend="openai", judge_model="m", judge_options={"base_url": stand_in.base_url})
        assert run_until_idle(led, settings).judged == 1
    [original] = data(source, "credit.scored")
    assert (original["high"], original["low"], original["credit_score"], original["zone"]) == (1, 1, 2, "BAD")

    target = home_with(tmp_path / "b", ("a.jsonl", lines))
    with ledger.open_ledger(target) as led, ledger.open_ledger(source) as src:
        judge = make_judge(JudgeSettings(backend="replay"), led, source=src)
        layer = {"audit": {"high_severe_min": 1, "zone_bad_max": 1}}
        summary = run_until_idle(led, RunSettings(judge=judge, config_layer=layer))
    assert (summary.judged, summary.failed) == (1, 0)
    [replayed] = data(target, "credit.scored")
    assert (replayed["high"], replayed["low"]) == (1, 1)                   # the same recorded findings
    assert (replayed["credit_score"], replayed["zone"]) == (1, "BAD")      # new formula parameters
    assert replayed["formula"]["high_severe_min"] == 1
    assert {c["backend"] for c in data(target, "judge.called")} == {"replay"}


def test_replay_cannot_invent_an_answer_it_never_recorded(tmp_path):
    bench = template_benchmark(config={"deep_judgment_enabled": True})
    source = home_with(tmp_path / "a", ("b.json", bench))
    with ledger.open_ledger(source) as led:
        run_until_idle(led)
    target = home_with(tmp_path / "b", ("b.json", bench))
    with ledger.open_ledger(target) as led, ledger.open_ledger(source) as src:
        judge = make_judge(JudgeSettings(backend="replay"), led, source=src)
        # deep judgment off asks a different parse request, which was never recorded
        summary = run_until_idle(led, RunSettings(judge=judge, config_layer={"deep_judgment_enabled": False}))
    assert summary.failed == 1
    [failed] = data(target, "stage.failed")
    assert "parse" in failed["reason"]
    assert data(target, "case.judged") == []
