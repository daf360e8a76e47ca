"""Every stage path end to end with the offline judge, through `evalledger run`."""

from __future__ import annotations

import json

from evalledger import ledger
from evalledger.cli.main import main
from evalledger.stages.audit import credit_score, zone
from evalledger.stages.config import AuditStrategy, effective_config
from stages_support import (
    AUDIT_LINES,
    RESPONSE,
    data,
    events,
    home_with,
    reconstruction_file,
    template_benchmark,
)


def run(home, *args) -> int:
    return main(["--home", str(home), "run", "--quiet", *args])


def test_template_deep_judgment_path_emits_each_step_in_order(tmp_path):
    home = home_with(tmp_path, ("b.json", template_benchmark(config={"deep_judgment_enabled": True})))
    assert run(home) == 0
    [opened] = events(home, "case.opened")
    stream = [e for e in events(home, stream=opened.stream) if e.type != "judge.called"]
    assert [e.type for e in stream] == ["case.opened", "excerpt.extracted", "reasoning.generated",
                                        "answer.parsed", "field.verified", "field.verified", "case.judged"]
    excerpt = stream[1].data
    assert excerpt["attribute"] == "pair_count" and excerpt["similarity"] >= 0.8 and excerpt["text"] in RESPONSE
    values = stream[3].data["values"]
    assert set(values) == {"pair_count"}
    parsed = next(e.data for e in stream if e.type == "field.verified" and e.data["field"] == "pair_count")
    assert parsed["extracted"] == values["pair_count"] and parsed["passed"] is (values["pair_count"] == 23)
    judged = stream[-1].data
    assert judged["verdict"] == ("pass" if parsed["passed"] else "fail")
    assert judged["auto_failed"] is False and judged["deep_judgment"] is True
    # The trace field is decided on the raw response and never sent to the judge.
    traced = next(e.data for e in stream if e.type == "field.verified" and e.data["field"] == "cites_source")
    assert traced["passed"] is True and traced["primitive"]["type"] == "TraceRegex"
    for call in events(home, "judge.called"):
        assert "cites_source" not in json.dumps(call.data["request"]["payload"])
    # meta on every output: run, causation, stage, stage_version, config_hash of the effective config
    cfg_hash = effective_config({"deep_judgment_enabled": True}).hash()
    for event in stream[1:]:
        assert event.meta["causation"] == opened.id and event.meta["stage"] == "template"
        assert event.meta["config_hash"] == cfg_hash and event.meta["run"] and event.meta["stage_version"]


def test_template_without_deep_judgment_parses_verifies_and_judges(tmp_path):
    wrong = RESPONSE.replace("23 pairs", "24 pairs")
    home = home_with(tmp_path, ("b.json", template_benchmark(responses=[
        {"question_id": "q1", "model": "m", "text": wrong}])))
    assert run(home) == 0
    types = [e.type for e in events(home) if e.stream.startswith("case:") and e.type != "judge.called"]
    assert types == ["case.opened", "answer.parsed", "field.verified", "field.verified", "case.judged"]
    [judged] = data(home, "case.judged")
    assert judged["verdict"] == "fail" and not judged["auto_failed"]
    assert any("pair_count" in reason for reason in judged["reasons"])


def test_attribute_without_excerpt_auto_fails_the_case(tmp_path):
    home = home_with(tmp_path, ("b.json", template_benchmark(
        config={"deep_judgment_enabled": True},
        responses=[{"question_id": "q1", "model": "m", "text": "I am not sure, sorry."}])))
    assert run(home) == 0
    [missing] = data(home, "excerpt.missing")
    assert missing["attribute"] == "pair_count"
    [auto] = data(home, "case.auto_failed")
    assert auto["attributes"] == ["pair_count"]
    [judged] = data(home, "case.judged")
    assert judged["verdict"] == "fail" and judged["auto_failed"] is True


def test_rubric_mixed_deep_standard_regex_and_metric_traits(tmp_path):
    rubric = {"traits": [
        {"name": "clarity", "kind": "llm", "description": "Is the answer clear?", "min_score": 1, "max_score": 5},
        {"name": "precision", "kind": "llm", "description": "Does it state the number of pairs?",
         "min_score": 0, "max_score": 3},
        {"name": "no_hedging", "kind": "regex", "pattern": "(?i)maybe|perhaps", "invert": True},
        {"name": "coverage", "kind": "metric", "evaluation_mode": "full_matrix", "metrics": ["precision", "recall"],
         "tp_instructions": ["mentions 23 pairs", "mentions 46 chromosomes"],
         "tn_instructions": ["mentions 48 chromosomes"]},
    ]}
    config = {"deep_judgment_rubric_mode": "custom",
              "deep_judgment_rubric_config": {"global": {"clarity": {"excerpt_enabled": True, "max_excerpts": 2}}}}
    home = home_with(tmp_path, ("b.json", template_benchmark(config=config, rubric=rubric)))
    assert run(home) == 0
    scored = {d["trait"]: d for d in data(home, "trait.scored")}
    assert scored["clarity"]["mode"] == "deep" and scored["clarity"]["excerpts"]
    assert scored["clarity"]["plan"]["source"] == "custom:global" and scored["clarity"]["plan"]["max_excerpts"] == 2
    assert 1 <= scored["clarity"]["score"] <= 5
    assert scored["precision"]["mode"] == "standard" and 0 <= scored["precision"]["score"] <= 3
    assert scored["no_hedging"] == {**scored["no_hedging"], "score": True, "matched": False, "mode": "standard"}
    metric = scored["coverage"]
    counts = metric["counts"]
    assert counts["tp"] + counts["fn"] == 2 and counts["fp"] + counts["tn"] == 1
    tp, fp, fn = counts["tp"], counts["fp"], counts["fn"]
    assert metric["metrics"]["recall"] == round(tp / (tp + fn), 6)
    assert metric["metrics"]["precision"] == (round(tp / (tp + fp), 6) if tp + fp else None)
    rubric_events = [e for e in events(home) if e.type in ("trait.scored", "excerpt.extracted")]
    assert all(e.meta["stage"] == "rubric" for e in rubric_events)
    calls = events(home, "judge.called")
    assert {e.meta["stage"] for e in calls if e.data["role"] == "score_trait"} == {"rubric"}
    assert all(e.meta["causation"] == events(home, "case.opened")[0].id for e in calls)


def test_reconstruction_scores_every_claim_and_asks_for_no_metric(tmp_path):
    home = home_with(tmp_path, ("r.json", reconstruction_file()))
    assert run(home) == 0
    scored = data(home, "claim.scored")
    assert [s["claim_id"] for s in scored] == ["c1", "c2", "c3"]
    for s in scored:
        assert isinstance(s["score"], int) and 0 <= s["score"] <= 10 and s["justification"]
    assert {s["claim_type"] for s in scored} == {"policy_position", "event", "economic"}
    roles = {e.data["role"] for e in events(home, "judge.called")}
    assert roles == {"score_claims"}


def test_audit_path_scores_credit_by_formula_with_configured_parameters(tmp_path):
    home = home_with(tmp_path, ("a.jsonl", AUDIT_LINES))
    assert run(home, "--set", "audit.low_boundary_min=3") == 0
    strategy = AuditStrategy(low_boundary_min=3)
    decomposed = data(home, "facts.decomposed")
    assert len(decomposed) == 2 and all(len(d["facts"]) <= 5 for d in decomposed)
    for credit in data(home, "credit.scored"):
        assert credit["credit_score"] == credit_score(credit["high"], credit["low"], strategy)
        assert credit["zone"] == zone(credit["credit_score"], strategy)
        assert credit["formula"]["low_boundary_min"] == 3
    case = events(home, "credit.scored")[0].stream
    order = [e.type for e in events(home, stream=case) if e.type != "judge.called"]
    assert order[1:] == ["facts.decomposed", "facts.checked", "logic.checked", "credit.scored"]


def test_credit_formula_table_of_the_spec():
    s = AuditStrategy()
    table = {(3, 0): 1, (5, 2): 1, (1, 0): 2, (2, 9): 2, (0, 2): 3, (0, 7): 3, (0, 1): 4, (0, 0): 5}
    assert {k: credit_score(*k, s) for k in table} == table
    assert [zone(n, s) for n in (1, 2, 3, 4, 5)] == ["BAD", "BAD", "MID", "GOOD", "GOOD"]
    strict = AuditStrategy(high_severe_min=2, low_boundary_min=1)
    assert credit_score(2, 0, strict) == 1 and credit_score(0, 1, strict) == 3


def test_run_records_the_effective_configs_and_judge(tmp_path):
    home = home_with(tmp_path, ("b.json", template_benchmark(config={"deep_judgment_enabled": True})))
    assert run(home, "--set", "deep_judgment_fuzzy_match_threshold=0.9") == 0
    [started] = data(home, "run.started")
    [completed] = data(home, "run.completed")
    assert started["judge"]["backend"] == "offline" and completed["judged"] == 1
    [config] = completed["configs"].values()
    assert config["deep_judgment_enabled"] is True and config["deep_judgment_fuzzy_match_threshold"] == 0.9
    [extracted] = data(home, "excerpt.extracted")
    assert extracted["threshold"] == 0.9
    with ledger.open_ledger(home) as led:
        assert led.verify().ok


def test_rubric_only_question_is_judged_on_its_rubric(tmp_path):
    bench = template_benchmark(rubric={"traits": [
        {"name": "no_hedging", "kind": "regex", "pattern": "(?i)maybe|perhaps", "invert": True}]})
    del bench["questions"][0]["template"]
    home = home_with(tmp_path, ("b.json", bench))
    assert run(home) == 0
    assert data(home, "judge.called") == [] and data(home, "field.verified") == []
    [trait] = data(home, "trait.scored")
    assert trait["score"] is True
    [judged] = data(home, "case.judged")
    assert judged["verdict"] == "pass" and judged["rubric_only"] is True
