"""Stage paths against the real chat-completions stand-in on 127.0.0.1 with scripted replies:
excerpt retries with feedback, missing excerpts and auto-fail, search risk, trait auto-fail,
claim re-asks with the problem named, the audit phases."""

from __future__ import annotations

import re

import pytest

from evalledger import ledger
from evalledger.cli.main import main
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.testing.stand_in import Reply, StandIn, StandInThread, Status
from stages_scripted import dispatch, pairs_sentence, role_of, template_judge, user_text
from stages_support import AUDIT_LINES, RESPONSE, data, home_with, reconstruction_file, template_benchmark

DEEP = {"deep_judgment_enabled": True}


def run_openai(home, stand_in: StandIn, **settings) -> object:
    settings = RunSettings(judge_backend="openai", judge_model="stand-in-model",
                           judge_options={"base_url": stand_in.base_url, "backoff_base_s": 0.01}, **settings)
    with ledger.open_ledger(home) as led:
        return run_until_idle(led, settings)


def test_failed_quote_is_retried_with_feedback_and_the_rescued_attribute_is_not_missing(tmp_path):
    home = home_with(tmp_path, ("b.json", template_benchmark(config=DEEP)))
    with StandInThread(StandIn(reply_fn=dispatch(template_judge(paraphrase_first=True)))) as stand_in:
        summary = run_openai(home, stand_in)
    assert summary.judged == 1 and summary.failed == 0
    [retried] = data(home, "excerpt.retried")
    assert retried["attribute"] == "pair_count" and retried["attempt"] == 2 and retried["threshold"] == 0.8
    [failed] = retried["failed"]
    assert failed["text"].startswith("humans possess") and failed["similarity"] < 0.8
    # the retry request names the failed quote, its score and the threshold
    asks = [r["body"] for r in stand_in.requests if role_of(r["body"]) == "extract_excerpts"]
    assert len(asks) == 2
    assert f'"{failed["text"]}" scored {failed["similarity"]:.2f}' in user_text(asks[1])
    assert "threshold 0.80" in user_text(asks[1])
    [extracted] = data(home, "excerpt.extracted")
    assert extracted["attempt"] == 2 and extracted["text"] == pairs_sentence(RESPONSE)
    assert not data(home, "excerpt.missing") and not data(home, "case.auto_failed")
    [judged] = data(home, "case.judged")
    assert judged["verdict"] == "pass" and judged["auto_failed"] is False


def test_quotes_failing_every_retry_leave_the_attribute_missing_and_auto_fail(tmp_path):
    config = {**DEEP, "deep_judgment_excerpt_retry_attempts": 2}
    home = home_with(tmp_path, ("b.json", template_benchmark(config=config)))
    with StandInThread(StandIn(reply_fn=dispatch(template_judge(always_paraphrase=True)))) as stand_in:
        run_openai(home, stand_in)
    assert sum(role_of(r["body"]) == "extract_excerpts" for r in stand_in.requests) == 3   # 1 + 2 retries
    assert [d["attempt"] for d in data(home, "excerpt.retried")] == [2, 3]
    [missing] = data(home, "excerpt.missing")
    assert missing["attribute"] == "pair_count" and missing["failed"][0]["similarity"] < 0.8
    [auto] = data(home, "case.auto_failed")
    assert auto["attributes"] == ["pair_count"]
    [judged] = data(home, "case.judged")
    # the parse still ran and the primitive passed, but an auto-failed case's fields count as not verified
    assert judged["verdict"] == "fail" and judged["auto_failed"] and judged["fields"]["passed"] == []
    assert {d["field"]: d["primitive_passed"] for d in data(home, "field.verified")}["pair_count"] is True


class Search:
    """A custom search callable port (DESIGN.md: any callable returning {title, content, url})."""

    def __init__(self):
        self.queries = []

    async def search(self, query, *, case_id):
        self.queries.append(query)
        return [{"title": "Karyotype", "content": "Humans have 23 pairs of chromosomes.", "url": "https://x"}]


def test_search_risk_per_excerpt_and_attribute_risk_is_the_maximum(tmp_path):
    text = "Cells hold 23 pairs of chromosomes. In total there are 23 pairs, 46 chromosomes [1]."
    home = home_with(tmp_path, ("b.json", template_benchmark(
        config={**DEEP, "deep_judgment_search_enabled": True},
        responses=[{"question_id": "q1", "model": "m", "text": text}])))
    quotes = ["Cells hold 23 pairs of chromosomes.", "In total there are 23 pairs, 46 chromosomes [1]."]

    def handle(body, role):
        if role == "extract_excerpts":
            return {"excerpts": {"pair_count": [{"text": q, "confidence": "high"} for q in quotes]}}
        if role == "assess_risk":
            return {"risks": [{"excerpt": quotes[0], "risk": "low", "justification": "ok"},
                              {"excerpt": quotes[1], "risk": "high", "justification": "contradicted"}]}
        return template_judge()(body, role)

    search = Search()
    with StandInThread(StandIn(reply_fn=dispatch(handle))) as stand_in:
        run_openai(home, stand_in, search=search)
    # a query is generated from each excerpt (not the raw excerpt) and recorded
    assert search.queries == ["Cells hold 23 pairs chromosomes", "total 23 pairs 46 chromosomes 1"]
    [risk] = data(home, "risk.assessed")
    assert [s["query"] for s in risk["searches"]] == search.queries
    assert risk["risk"] == "high" and [e["risk"] for e in risk["excerpts"]] == ["low", "high"]
    [reasoning] = data(home, "reasoning.generated")
    assert reasoning["risks"] == {"pair_count": "high"}
    [judged] = data(home, "case.judged")
    assert judged["verdict"] == "pass"   # risk informs, it never fails a case by itself


def test_deep_trait_without_valid_excerpts_is_auto_failed_without_score(tmp_path):
    rubric = {"traits": [
        {"name": "cites_trials", "kind": "llm", "description": "Cites a trial", "min_score": 1, "max_score": 5},
        {"name": "tone", "kind": "llm", "description": "Neutral tone", "min_score": 1, "max_score": 5},
        {"name": "clarity", "kind": "llm", "description": "Clear", "min_score": 1, "max_score": 5},
    ]}
    config = {"deep_judgment_rubric_mode": "custom", "deep_judgment_rubric_config": {"global": {
        "cites_trials": {"excerpt_retry_attempts": 1}, "tone": {"excerpt_enabled": False}}}}
    home = home_with(tmp_path, ("b.json", template_benchmark(config=config, rubric=rubric)))

    def handle(body, role):
        if role == "extract_excerpts":   # only rubric traits ask for excerpts here
            return {"excerpts": {"cites_trials": [{"text": "NCT01234567 showed benefit", "confidence": "high"}]}}
        if role == "reason":
            name = re.search(r"- (\w+):", body["messages"][0]["content"]).group(1)
            return {"reasoning": {name: "neutral wording throughout"}}
        return template_judge()(body, role)

    with StandInThread(StandIn(reply_fn=dispatch(handle))) as stand_in:
        run_openai(home, stand_in)
    [auto] = data(home, "trait.auto_failed")
    assert auto["trait"] == "cites_trials" and auto["retries"] == 1
    scored = {d["trait"]: d for d in data(home, "trait.scored")}
    assert set(scored) == {"tone", "clarity"}
    assert scored["tone"]["mode"] == "deep" and scored["tone"]["excerpts"] == [] and scored["tone"]["score"] == 4
    assert scored["tone"]["reasoning"] == "neutral wording throughout"
    assert scored["clarity"]["mode"] == "standard"
    [judged] = data(home, "case.judged")
    assert judged["verdict"] == "fail" and judged["auto_failed"]
    assert data(home, "case.auto_failed")[0]["traits"] == ["cites_trials"]


def test_claim_replies_with_problems_are_asked_again_with_the_problem_named(tmp_path):
    home = home_with(tmp_path, ("r.json", reconstruction_file()))
    good = [{"claim_id": "c1", "score": 9, "justification": "Stated.", "evidence_refs": ["q1"]},
            {"claim_id": "c2", "score": 0, "justification": "Absent.", "evidence_refs": []},
            {"claim_id": "c3", "score": 6, "justification": "Roughly.", "evidence_refs": ["q2", "synthesis"]}]
    stand_in = StandIn().script(
        Status(429, retry_after=0.01),                                                  # rate limited
        Reply({"evaluations": good[:1] + good[2:]}),                                    # misses c2
        Reply({"evaluations": [good[0], {**good[1], "score": 7.5}, good[2]]}, fenced=True),  # not an integer
        Reply(good))                                                                     # the spec's JSON array
    with StandInThread(stand_in):
        summary = run_openai(home, stand_in)
    assert summary.judged == 1 and summary.retries == 3   # the 429 and two re-asks, in the progress too
    bodies = [r["body"] for r in stand_in.requests][1:]
    assert len(bodies) == 3
    assert "missing claim(s) c2" in bodies[1]["messages"][-1]["content"]
    assert "integer" in bodies[2]["messages"][-1]["content"]
    scored = data(home, "claim.scored")
    assert [(s["claim_id"], s["score"], s["evidence_refs"]) for s in scored] == \
        [("c1", 9, ["q1"]), ("c2", 0, []), ("c3", 6, ["q2", "synthesis"])]
    calls = data(home, "judge.called")
    assert [c["error"] is None for c in calls] == [False, False, False, True]


def test_audit_phases_and_credit_from_error_counts(tmp_path):
    home = home_with(tmp_path, ("a.jsonl", AUDIT_LINES[1:]))

    def handle(body, role):
        if role == "decompose":
            return {"facts": ["Revenue fell 12% in 2023"], "reasoning_chains": [
                {"premises": ["Revenue fell 12%"], "conclusion": "the company is shrinking"}]}
        if role == "check_facts":
            return {"errors": [{"level": "contradiction", "severity": "high", "detail": "rose, not fell"}]}
        if role == "check_logic":
            return {"errors": [{"level": "unsupported", "severity": "low", "detail": "overgeneralises"}]}
        raise AssertionError(role)

    with StandInThread(StandIn(delay=0.05, reply_fn=dispatch(handle))) as stand_in:
        run_openai(home, stand_in)
    assert [role_of(r["body"]) for r in stand_in.requests][0] == "decompose"
    [decomposed] = data(home, "facts.decomposed")
    assert decomposed["facts"] == ["Revenue fell 12% in 2023"]
    assert decomposed["reasoning_chains"][0]["conclusion"] == "the company is shrinking"
    [facts] = data(home, "facts.checked")
    [logic] = data(home, "logic.checked")
    assert facts["errors"][0]["severity"] == "high" and logic["errors"][0]["level"] == "unsupported"
    [credit] = data(home, "credit.scored")
    assert (credit["high"], credit["low"], credit["credit_score"], credit["zone"]) == (1, 1, 2, "BAD")
    assert credit["expected_zone"] == "BAD"


def test_cli_run_with_the_openai_judge_against_the_stand_in(tmp_path, monkeypatch, capsys):
    home = home_with(tmp_path, ("b.json", template_benchmark(config=DEEP)))
    with StandInThread(StandIn(reply_fn=dispatch(template_judge()))) as stand_in:
        monkeypatch.setenv("OPENAI_BASE_URL", stand_in.base_url)
        code = main(["--home", str(home), "run", "--judge", "openai", "--model", "m1"])
    assert code == 0
    err = capsys.readouterr().err
    assert "cases 1/1" in err and "judge calls 3" in err
    [started] = data(home, "run.started")
    assert started["judge"] == {"backend": "openai", "model": "m1"}
    assert {c["backend"] for c in data(home, "judge.called")} == {"openai"}


def test_boolean_llm_trait_is_answered_true_or_false_and_asked_again_otherwise(tmp_path):
    """A boolean trait (``score_kind: boolean``, as a checkpoint's boolean LLM trait) in a case.opened."""
    home = tmp_path / "home"
    question = {"id": "q1", "question": "How many pairs?", "template": {"fields": [
        {"name": "cites_source", "type": "bool", "description": "cites", "ground_truth": True,
         "verify_with": {"type": "TraceRegex", "pattern": "\\[\\d+\\]"}}]},
        "rubric": {"traits": [{"name": "accurate", "kind": "llm", "score_kind": "boolean",
                               "description": "Factually correct"}]}}
    with ledger.open_ledger(home) as led:
        led.append(ledger.NewEvent("case:c0ffee", "case.opened", {
            "case_id": "c0ffee", "benchmark": "b1", "kind": "template", "question_id": "q1", "model": "m",
            "question": question, "response": RESPONSE, "config": {}}, key="open"))
    stand_in = StandIn().script(Reply({"score": 3}), Reply({"score": True, "reasoning": "correct"}))
    with StandInThread(stand_in):
        summary = run_openai(home, stand_in)
    assert summary.judged == 1
    assert "true or false" in stand_in.requests[1]["body"]["messages"][-1]["content"]
    [scored] = data(home, "trait.scored")
    assert scored["score"] is True and scored["mode"] == "standard"
    [judged] = data(home, "case.judged")
    assert judged["verdict"] == "pass"       # only the trace field counts; no judge call for it


GOOD_CLAIMS = [{"claim_id": "c1", "score": 9, "justification": "Stated.", "evidence_refs": ["q1"]},
               {"claim_id": "c2", "score": 0, "justification": "Absent.", "evidence_refs": []},
               {"claim_id": "c3", "score": 6, "justification": "Roughly.", "evidence_refs": ["q2"]}]


@pytest.mark.parametrize("bad, named", [
    (GOOD_CLAIMS[:2], "missing claim(s) c3"),
    (GOOD_CLAIMS + [GOOD_CLAIMS[0]], "scored twice: c1"),
    ([GOOD_CLAIMS[0], {**GOOD_CLAIMS[1], "score": 11}, GOOD_CLAIMS[2]], "less than or equal to 10"),
    ([GOOD_CLAIMS[0], {**GOOD_CLAIMS[1], "score": -1}, GOOD_CLAIMS[2]], "greater than or equal to 0"),
    ([GOOD_CLAIMS[0], {**GOOD_CLAIMS[1], "score": 4.5}, GOOD_CLAIMS[2]], "integer"),
])
def test_each_claim_reply_problem_is_named_when_asked_again(tmp_path, bad, named):
    home = home_with(tmp_path, ("r.json", reconstruction_file()))
    stand_in = StandIn().script(Reply({"evaluations": bad}), Reply({"evaluations": GOOD_CLAIMS}))
    with StandInThread(stand_in):
        assert run_openai(home, stand_in).judged == 1
    assert len(stand_in.requests) == 2
    assert named in stand_in.requests[1]["body"]["messages"][-1]["content"]
    assert [(d["claim_id"], d["score"]) for d in data(home, "claim.scored")] == [("c1", 9), ("c2", 0), ("c3", 6)]


def test_deep_trait_whose_score_from_reasoning_fails_is_scored_from_the_response(tmp_path):
    rubric = {"traits": [{"name": "tone", "kind": "llm", "description": "Neutral tone", "min_score": 1,
                          "max_score": 5}]}
    config = {"deep_judgment_rubric_mode": "enable_all", "deep_judgment_rubric_global_excerpts": False}
    home = home_with(tmp_path, ("b.json", template_benchmark(config=config, rubric=rubric)))

    def handle(body, role):
        if role == "reason":
            return {"reasoning": {"tone": "neutral"}}
        if role == "score_trait":
            deep = "neutral" in user_text(body)
            return {"score": 9 if deep else 3}         # out of range from the reasoning, every time
        return template_judge()(body, role)

    with StandInThread(StandIn(reply_fn=dispatch(handle))) as stand_in:
        summary = run_openai(home, stand_in)
    assert summary.failed == 0
    [scored] = data(home, "trait.scored")
    assert scored["mode"] == "deep" and scored["score"] == 3 and scored["reasoning"] == "neutral"
    assert "scored from the response" in scored["degraded"][0]


def test_threshold_decides_on_the_exact_score_not_the_rounded_one(tmp_path):
    # "23!" shares "23" with the response: an exact score of 2/3 = 0.6666666..., which rounds to
    # 0.666667. Under a threshold of 0.6666669 the quote must fail, although its rounded figure passes.
    config = {**DEEP, "deep_judgment_fuzzy_match_threshold": 0.6666669,
              "deep_judgment_excerpt_retry_attempts": 0}
    home = home_with(tmp_path, ("b.json", template_benchmark(config=config)))
    base = template_judge()

    def handle(body, role):
        if role == "extract_excerpts":
            return {"excerpts": {"pair_count": [{"text": "23!", "confidence": "high"}]}}
        return base(body, role)

    with StandInThread(StandIn(reply_fn=dispatch(handle))) as stand_in:
        run_openai(home, stand_in)
    assert not data(home, "excerpt.extracted")
    [missing] = data(home, "excerpt.missing")
    assert missing["failed"] == [{"text": "23!", "similarity": 0.666667}]
    [judged] = data(home, "case.judged")
    assert judged["auto_failed"] is True
