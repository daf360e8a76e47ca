"""Rules of the five specifications, each reached from real input files: a benchmark file is
ingested through the CLI, judged (offline, or by the chat-completions stand-in on 127.0.0.1 with
scripted replies), and the events and report files are checked."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from evalledger import ledger
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.testing.stand_in import StandIn, StandInThread
from stages_scripted import audit_reply, dispatch, role_of, template_judge
from stages_support import AUDIT_LINES, data, reconstruction_file, template_benchmark, write_json, write_jsonl

DEEP = {"deep_judgment_enabled": True}


def ingest(run_cli, tmp_path, name: str, content, *more: tuple[str, object]):
    """A fresh home with each file ingested through ``evalledger ingest``."""
    home = tmp_path / "home"
    assert run_cli("init", home=home).returncode == 0
    for file_name, body in ((name, content), *more):
        path = tmp_path / file_name
        (write_jsonl if file_name.endswith(".jsonl") else write_json)(path, body)
        done = run_cli("ingest", str(path), home=home)
        assert done.returncode == 0, done.stderr
    return home


def run_stand_in(home, reply_fn, **settings):
    """Run every pending case with the openai backend against the stand-in answering ``reply_fn``."""
    with StandInThread(StandIn(reply_fn=reply_fn)) as stand_in:
        settings = RunSettings(judge_backend="openai", judge_model="stand-in-model",
                               judge_options={"base_url": stand_in.base_url, "backoff_base_s": 0.01}, **settings)
        with ledger.open_ledger(home) as led:
            summary = run_until_idle(led, settings)
        return summary, stand_in.requests


def evaluations(run_cli, home) -> list[dict]:
    """The lines of evaluations.jsonl after ``evalledger report``."""
    done = run_cli("report", home=home)
    assert done.returncode in (0, 1), done.stderr
    return [json.loads(line) for line in (home / "reports" / "evaluations.jsonl").read_text().splitlines()]


def stats(home) -> dict:
    """aggregate-stats.json of the home (after a report)."""
    return json.loads((home / "reports" / "aggregate-stats.json").read_text())


# --- item 11: an auto-failed case's fields count as not verified ---------------------------------------

def test_auto_failed_case_marks_every_field_not_verified(run_cli, tmp_path):
    home = ingest(run_cli, tmp_path, "b.json", template_benchmark(config={**DEEP,
                                                                          "deep_judgment_excerpt_retry_attempts": 0}))
    summary, _ = run_stand_in(home, dispatch(template_judge(always_paraphrase=True)))
    assert summary.judged == 1
    fields = {d["field"]: d for d in data(home, "field.verified")}
    # the primitive alone passes 23 pairs and the cited source, but the case auto-failed
    assert fields["pair_count"]["primitive_passed"] is True and fields["cites_source"]["primitive_passed"] is True
    assert all(f["passed"] is False and f["auto_failed"] is True for f in fields.values())
    assert "case auto-failed" in fields["pair_count"]["reason"]
    [judged] = data(home, "case.judged")
    assert judged["verdict"] == "fail" and judged["fields"]["passed"] == []
    [line] = evaluations(run_cli, home)
    assert line["fields"]["pair_count"]["passed"] is False and line["fields"]["pair_count"]["auto_failed"] is True
    [(_, per_model)] = stats(home)["benchmarks"].items()
    per_field = per_model["models"]["model-a"]["per_field"]
    assert per_field["pair_count"]["passed"] == 0 and per_field["pair_count"]["failed"] == 1


# --- item 13: template and rubric evidence are kept apart -------------------------------------------

def test_field_and_trait_of_one_name_keep_their_own_evidence(run_cli, tmp_path):
    rubric = {"traits": [{"name": "pair_count", "kind": "llm", "description": "Does it state the number of pairs?",
                          "min_score": 1, "max_score": 5}]}
    config = {**DEEP, "deep_judgment_rubric_mode": "enable_all"}
    home = ingest(run_cli, tmp_path, "b.json", template_benchmark(config=config, rubric=rubric))
    assert run_cli("run", "--quiet", home=home).returncode == 0
    subjects = sorted(d["subject"] for d in data(home, "excerpt.extracted"))
    assert "template" in subjects and "rubric" in subjects
    [line] = evaluations(run_cli, home)
    per_subject = line["excerpts"]
    for subject in ("template", "rubric"):
        wanted = sorted(d["text"] for d in data(home, "excerpt.extracted")
                        if d["subject"] == subject and d["attribute"] == "pair_count")
        assert sorted(e["text"] for e in per_subject[subject]["pair_count"]) == wanted
    assert line["missing_excerpts"] == {} and set(line["excerpt_retry_count"]) <= {"template", "rubric"}


# --- item 2: claim_bands is live configuration -----------------------------------------------------

def _claims_scored(scores: dict[str, int]):
    """A stand-in reply_fn scoring the claims of a score_claims request as ``scores`` says."""
    def reply(body):
        assert role_of(body) == "score_claims"
        return {"evaluations": [{"claim_id": cid, "score": score, "justification": "scripted",
                                 "evidence_refs": []} for cid, score in scores.items()]}
    return reply


def test_claim_bands_from_config_decide_recorded_bands_and_the_reports(run_cli, tmp_path):
    home = ingest(run_cli, tmp_path, "doc.reconstruction.json", reconstruction_file())
    layer = {"claim_bands": {"fully_min": 9, "partially_min": 6}}
    summary, _ = run_stand_in(home, _claims_scored({"c1": 8, "c2": 5, "c3": 9}), config_layer=layer)
    assert summary.judged == 1
    recorded = {d["claim_id"]: d for d in data(home, "claim.scored")}
    # 8 is "fully" under the default bands; the configured ones make it partial and 5 not reconstructed
    assert {cid: d["band"] for cid, d in recorded.items()} == {"c1": "partially", "c2": "not", "c3": "fully"}
    assert recorded["c1"]["bands"] == {"fully_min": 9, "partially_min": 6}
    evaluations(run_cli, home)
    [(_, bench)] = stats(home)["benchmarks"].items()
    [(_, agg)] = bench["reconstruction"].items()
    assert agg["claim_bands"] == [{"fully_min": 9, "partially_min": 6}]
    assert agg["overall"]["pct_fully_reconstructed"] == 33.33
    assert agg["overall"]["pct_partially_reconstructed"] == 33.33
    report = next((home / "reports").rglob("report.md")).read_text()
    assert "fully (>= 9)" in report and "partially (6-8)" in report and "not (< 6)" in report
    # a rebuild from the events alone gives the same bytes
    before = (home / "reports" / "aggregate-stats.json").read_bytes()
    assert run_cli("rebuild", home=home).returncode == 0
    assert (home / "reports" / "aggregate-stats.json").read_bytes() == before


# --- item 6: one zone rule, recorded in credit.scored, used everywhere --------------------------------

def test_configured_zone_bounds_decide_the_event_and_the_matrix_alike(run_cli, tmp_path):
    home = ingest(run_cli, tmp_path, "cases.audit.jsonl", AUDIT_LINES)
    layer = {"audit": {"zone_bad_max": 1}}
    summary, _ = run_stand_in(home, lambda body: audit_reply(body, role_of(body)), config_layer=layer)
    assert summary.judged == 2
    credits = {d["credit_score"]: d for d in data(home, "credit.scored")}
    # score 2 is MID when BAD ends at 1; the event says so and names the bounds that decided
    assert credits[2]["zone"] == "MID" and credits[2]["expected_zone"] == "MID"
    assert credits[2]["formula"]["zone_bad_max"] == 1 and credits[2]["formula"]["zone_mid_max"] == 3
    lines = evaluations(run_cli, home)
    assert sorted(line["audit"]["expected_zone"] for line in lines) == ["GOOD", "MID"]
    [(_, bench)] = stats(home)["benchmarks"].items()
    [(_, group)] = bench["audit"].items()
    assert group["matrix"]["MID"]["MID"] == 1 and group["matrix"]["BAD"]["BAD"] == 0
    assert group["zone_accuracy"] == 1.0


# --- items 5, 7, 8: VerifyFast error cap, reasonable inferences, max facts from config ---------------

def _audit_judge(facts: int):
    """decompose gives ``facts`` facts; check_facts finds four low errors; check_logic only a
    reasonable inference (in the spec's spelling, without a severity)."""
    def reply(body):
        role = role_of(body)
        if role == "decompose":
            return {"facts": [f"fact {i}" for i in range(facts)], "reasoning_chains": [
                {"premises": ["revenue rose"], "conclusion": "the company grew"}]}
        if role == "check_facts":
            return {"errors": [{"level": "unsupported", "severity": "low", "detail": f"vague {i}"} for i in range(4)]}
        return {"errors": [{"level": "Reasonable Inference", "detail": "growth follows from the revenue"}]}
    return reply


def test_error_cap_inferences_and_fact_limit_from_config(run_cli, tmp_path):
    home = ingest(run_cli, tmp_path, "cases.audit.jsonl", AUDIT_LINES[:1])
    layer = {"audit": {"max_errors_per_phase": 1, "max_facts": 7}}
    summary, requests = run_stand_in(home, _audit_judge(7), config_layer=layer)
    assert summary.judged == 1 and summary.failed == 0
    roles = [role_of(r["body"]) for r in requests]
    # 7 facts are within audit.max_facts=7, and a reasonable inference is a valid finding: no re-ask
    assert sorted(roles) == ["check_facts", "check_logic", "decompose"]
    assert len(data(home, "facts.decomposed")[0]["facts"]) == 7
    prompt = next(r["body"] for r in requests if role_of(r["body"]) == "check_facts")["messages"][0]["content"]
    assert "at most 1 errors" in prompt
    [facts] = data(home, "facts.checked")
    assert len(facts["errors"]) == 4 and facts["counted"] == [0] and facts["dropped"] == 3
    [logic] = data(home, "logic.checked")
    assert logic["errors"] == [] and logic["inferences"][0]["level"] == "reasonable_inference"
    [credit] = data(home, "credit.scored")
    # one low error counts (4 points), not four (3 points); the cap is part of the formula
    assert (credit["low"], credit["credit_score"]) == (1, 4)
    assert credit["formula"]["max_errors_per_phase"] == 1
    [line] = evaluations(run_cli, home)
    assert line["audit"]["facts_not_counted"] == 3 and line["audit"]["logic_inferences"][0]["detail"]


def test_more_facts_than_max_facts_are_asked_again_naming_the_limit(run_cli, tmp_path):
    home = ingest(run_cli, tmp_path, "cases.audit.jsonl", AUDIT_LINES[:1])
    summary, requests = run_stand_in(home, _audit_judge(3), config_layer={"audit": {"max_facts": 2}})
    decompose = [r["body"] for r in requests if role_of(r["body"]) == "decompose"]
    assert len(decompose) > 1 and "at most 2 atomic facts, not 3" in json.dumps(decompose[1]["messages"])
    # the strict reply schema sent with every decompose call allows no more than audit.max_facts
    assert {body["response_format"]["json_schema"]["schema"]["properties"]["facts"]["maxItems"]
            for body in decompose} == {2}
    assert summary.failed == 1 and not data(home, "credit.scored")


# --- item 15: parameter combinations the spec allows load with a warning -----------------------------

def test_unbounded_range_and_stray_min_overlap_are_accepted_with_warnings(run_cli, tmp_path):
    fields = [
        {"name": "pair_count", "type": "int", "description": "pairs", "ground_truth": 23,
         "verify_with": {"type": "NumericRange"}},
        {"name": "length", "type": "bool", "description": "any length", "ground_truth": True,
         "verify_with": {"type": "TraceLength", "unit": "words"}},
        {"name": "terms", "type": "list[str]", "description": "terms", "ground_truth": ["pairs"],
         "verify_with": {"type": "SetContainment", "mode": "superset", "min_overlap": 3}},
    ]
    path = write_json(tmp_path / "b.json", template_benchmark(fields=fields))
    home = tmp_path / "home"
    run_cli("init", home=home)
    checked = run_cli("validate", str(path), home=home)   # validate prints what ingest would
    assert checked.returncode == 0 and "valid" in checked.stdout
    assert "b.json: warning: $.questions[0] (id q1).template.fields[0].verify_with: NumericRange has neither" \
        in checked.stdout
    done = run_cli("ingest", str(path), home=home)
    assert done.returncode == 0 and "accepted" in done.stdout
    out = done.stdout + done.stderr
    assert "b.json: warning: $.questions[0] (id q1).template.fields[0].verify_with: NumericRange has neither" in out
    assert "fields[1].verify_with: TraceLength has neither min nor max" in out
    assert "fields[2].verify_with: min_overlap is only used with mode 'overlap'; ignored" in out
    [registered] = data(home, "benchmark.registered")
    assert [w["where"].rsplit(".", 2)[-2] for w in registered["warnings"]] == ["fields[0]", "fields[1]", "fields[2]"]
    assert run_cli("run", "--quiet", home=home).returncode == 0
    verified = {d["field"]: d for d in data(home, "field.verified")}
    assert verified["length"]["passed"] is True
    assert verified["pair_count"]["extracted"] == 23 and verified["pair_count"]["passed"] is True


# --- item 10: degradation as the specs say -----------------------------------------------------------

def test_unusable_excerpt_reply_continues_with_the_attributes_missing(run_cli, tmp_path):
    home = ingest(run_cli, tmp_path, "b.json", template_benchmark(config=DEEP))
    base = template_judge()

    def handle(body):
        role = role_of(body)
        return "this is no JSON at all" if role == "extract_excerpts" else base(body, role)

    summary, requests = run_stand_in(home, handle)
    assert summary.failed == 0 and summary.judged == 1
    assert not data(home, "stage.failed")
    [missing] = data(home, "excerpt.missing")
    assert missing["attribute"] == "pair_count" and "unusable reply to excerpt extraction" in missing["error"]
    [judged] = data(home, "case.judged")
    assert judged["verdict"] == "fail" and judged["auto_failed"] is True
    assert any(role_of(r["body"]) == "parse" for r in requests)   # the later steps still ran


SEARCH_MODULE = '''
def as_string(query):
    return "Humans have 23 pairs of chromosomes, 46 in all."

def as_strings(query):
    return ["Karyotype: 23 pairs.", "", "Somatic cells are diploid."]

def empty(query):
    return []

def broken(query):
    raise RuntimeError("the index is down")
'''


def _search_run(run_cli, tmp_path, monkeypatch, function):
    """A deep-judgment run with search through the callable ``spec_search:<function>``."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "spec_search.py").write_text(SEARCH_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    home = ingest(run_cli, tmp_path, "b.json", template_benchmark(config={**DEEP, "deep_judgment_search_enabled": True}))
    base = template_judge()

    def handle(body):
        role = role_of(body)
        if role == "assess_risk":
            count = json.dumps(body["messages"]).count("EXCERPT ")
            return {"risks": [{"excerpt": "x", "risk": "low", "justification": "seen"}] * count}
        return base(body, role)

    layer = {"deep_judgment_search_tool": f"spec_search:{function}"}
    summary, requests = run_stand_in(home, handle, config_layer=layer)
    assert summary.judged == 1
    return home, [role_of(r["body"]) for r in requests], requests


def test_failed_or_empty_search_gives_no_risk_assessment_and_says_why(run_cli, tmp_path, monkeypatch):
    for function, reason in (("empty", "search found nothing"), ("broken", "the index is down")):
        home, roles, _ = _search_run(run_cli, tmp_path / function, monkeypatch, function)
        assert "assess_risk" not in roles   # the judge is not asked to rate excerpts on no evidence
        [risk] = data(home, "risk.assessed")
        assert risk["risk"] is None and risk["excerpts"] == [] and "no risk assessed" in risk["reason"]
        assert reason in risk["searches"][0]["reason"]
        [reasoning] = data(home, "reasoning.generated")
        assert reasoning["risks"] == {}


def test_search_callable_may_return_a_string_or_a_list_of_strings(run_cli, tmp_path, monkeypatch):
    for function, contents in (("as_string", ["Humans have 23 pairs of chromosomes, 46 in all."]),
                               ("as_strings", ["Karyotype: 23 pairs.", "Somatic cells are diploid."])):
        home, roles, requests = _search_run(run_cli, tmp_path / function, monkeypatch, function)
        assert roles.count("assess_risk") == 1
        [risk] = data(home, "risk.assessed")
        assert risk["risk"] == "low" and risk["searches"][0]["results"] == len(contents)
        sent = next(r["body"] for r in requests if role_of(r["body"]) == "assess_risk")
        assert all(c in json.dumps(sent["messages"]) for c in contents)


# --- item 9: abstention detection, before the auto-fail -----------------------------------------------

ABSTAINING = "I am not sure, sorry. I cannot answer that question."


def test_offline_judge_detects_abstention_which_takes_priority_over_auto_fail(run_cli, tmp_path):
    config = {**DEEP, "abstention_enabled": True, "deep_judgment_rubric_mode": "enable_all"}
    rubric = {"traits": [{"name": "clarity", "kind": "llm", "description": "Is the answer clear?",
                          "min_score": 1, "max_score": 5}]}
    home = ingest(run_cli, tmp_path, "b.json", template_benchmark(config=config, rubric=rubric, responses=[
        {"question_id": "q1", "model": "m", "text": ABSTAINING},
        {"question_id": "q1", "model": "n", "text": "Human somatic cells hold 23 pairs of chromosomes [1]."}]))
    assert run_cli("run", "--quiet", home=home).returncode == 0
    [detected] = data(home, "abstention.detected")
    assert detected["evidence"] in ABSTAINING and detected["evidence"]
    # no excerpt could be found either: the auto-fail was skipped, and says what it would have been
    assert detected["skipped_auto_fail"] and not data(home, "case.auto_failed")
    judged = {d["case_id"]: d for d in data(home, "case.judged")}
    abstained = judged[detected["case_id"]]
    assert abstained["verdict"] == "fail" and abstained["abstained"] is True and abstained["auto_failed"] is False
    assert not any(d["auto_failed"] for d in data(home, "field.verified") if d["case_id"] == detected["case_id"])
    other = next(d for cid, d in judged.items() if cid != detected["case_id"])
    assert not other.get("abstained") and other["verdict"] == "pass"
    lines = {line["case_id"]: line for line in evaluations(run_cli, home)}
    assert lines[detected["case_id"]]["abstained"] is True and not lines[detected["case_id"]]["auto_failed"]
    assert lines[detected["case_id"]]["abstention"]["evidence"] == detected["evidence"]
    [(_, bench)] = stats(home)["benchmarks"].items()
    assert bench["models"]["m"]["abstained"] == 1 and bench["models"]["m"]["auto_failed"] == 0
    report = next((home / "reports").rglob("report.md")).read_text()
    assert "abstained: " + detected["evidence"] in report


def test_abstention_role_on_the_openai_backend_is_asked_and_recorded(run_cli, tmp_path):
    home = ingest(run_cli, tmp_path, "b.json", template_benchmark(config={"abstention_enabled": True}))
    base = template_judge()

    def handle(body):
        role = role_of(body)
        if role == "detect_abstention":
            return {"abstained": True, "evidence": "Human somatic cells are diploid", "reasoning": "scripted"}
        return base(body, role)

    summary, requests = run_stand_in(home, handle)
    assert summary.judged == 1 and [role_of(r["body"]) for r in requests][0] == "detect_abstention"
    [detected] = data(home, "abstention.detected")
    assert detected["evidence"] == "Human somatic cells are diploid" and detected["skipped_auto_fail"] == []
    [judged] = data(home, "case.judged")
    assert judged["verdict"] == "fail" and judged["abstained"] and "abstention" in judged["reasons"][0]


# --- item 1: reconstruction documents aggregate by collection ----------------------------------------

def test_documents_aggregate_across_files_by_collection(run_cli, tmp_path):
    home = tmp_path / "home"
    run_cli("init", home=home)
    # two single documents in their own files: the home's default collection
    for doc_id in ("A1", "A2"):
        write_json(tmp_path / f"{doc_id}.json", reconstruction_file(doc_id))
        assert run_cli("ingest", str(tmp_path / f"{doc_id}.json"), home=home).returncode == 0
    # three documents in one JSONL file, one of which names its own collection
    named = {**reconstruction_file("B3"), "collection": "named"}
    write_jsonl(tmp_path / "batch.jsonl", [reconstruction_file("B1"), reconstruction_file("B2"), named])
    done = run_cli("ingest", str(tmp_path / "batch.jsonl"), home=home)
    assert done.returncode == 0 and "3 new cases" in done.stdout, done.stdout
    # a folder ingested names the collection of its documents
    folder = tmp_path / "cables-1976"
    folder.mkdir()
    write_json(folder / "C1.json", reconstruction_file("C1"))
    write_json(folder / "C2.json", {**reconstruction_file("C2"), "collection": "named"})
    assert run_cli("ingest", str(folder), home=home).returncode == 0
    assert run_cli("run", "--quiet", home=home).returncode == 0
    evaluations(run_cli, home)
    collections = stats(home)["reconstruction_collections"]
    docs = {name: sorted(d["doc_id"] for d in c["models"]["(no model)"]["by_document"])
            for name, c in collections.items()}
    assert docs == {"default": ["A1", "A2", "B1", "B2"], "named": ["B3", "C2"], "cables-1976": ["C1"]}
    default = collections["default"]["models"]["(no model)"]
    assert default["total_documents"] == 4 and default["total_claims"] == 12
    assert len(collections["default"]["benchmarks"]) == 3   # two single files and the JSONL file
    report = (home / "reports" / "aggregate-report.md").read_text()
    assert "## Reconstruction collection default" in report and "4 documents, 12 scored claims" in report


def test_jsonl_of_documents_names_the_line_of_a_bad_document(run_cli, tmp_path):
    bad = reconstruction_file("B2")
    bad["original_claims"][1]["id"] = "c1"
    write_jsonl(tmp_path / "batch.jsonl", [reconstruction_file("B1"), bad, reconstruction_file("B1")])
    home = tmp_path / "home"
    run_cli("init", home=home)
    done = run_cli("ingest", str(tmp_path / "batch.jsonl"), home=home)
    assert done.returncode == 1
    assert "line 2: $.original_claims[1].id: duplicate claim id 'c1'" in done.stdout
    assert "line 3: $.doc_id: duplicate doc_id 'B1' (first on line 1)" in done.stdout


# --- item 4: tags set expected scores; contradictions are intake errors; zone coverage -------------

def test_tags_set_expected_scores_and_zone_coverage_is_reported(run_cli, tmp_path):
    lines = [{k: v for k, v in line.items() if k != "expected_credit_score"} for line in AUDIT_LINES]
    lines.append({**lines[0], "id": 3, "tag": "multi_minor"})
    home = ingest(run_cli, tmp_path, "tags.audit.jsonl", lines)
    assert run_cli("run", "--quiet", home=home).returncode == 0
    credits = sorted((d["expected_credit_score"], d["expected_zone"]) for d in data(home, "credit.scored"))
    assert credits == [(2, "BAD"), (3, "MID"), (5, "GOOD")]
    evaluated = sorted(line["audit"]["expected_credit_score"] for line in evaluations(run_cli, home))
    assert evaluated == [2, 3, 5]
    [(_, bench)] = stats(home)["benchmarks"].items()
    [(_, group)] = bench["audit"].items()
    assert group["compared"] == 3
    coverage = group["zone_coverage"]
    assert [coverage[z]["count"] for z in ("BAD", "MID", "GOOD")] == [1, 1, 1]
    # a third each: BAD and MID are within, MID above 25% and GOOD under 35% are not
    assert coverage["BAD"]["within"] is True and coverage["MID"]["within"] is False
    assert "MID 33% (recommended 15%-25%)" in coverage["warning"] and "GOOD 33%" in coverage["warning"]
    report = next((home / "reports").rglob("report.md")).read_text()
    assert "**Warning**: zone coverage outside the recommended proportions" in report


def test_a_tag_contradicting_its_expected_score_is_an_intake_error_naming_the_line(run_cli, tmp_path):
    lines = [AUDIT_LINES[0], {**AUDIT_LINES[1], "expected_credit_score": 4}]
    write_jsonl(tmp_path / "bad.audit.jsonl", lines)
    home = tmp_path / "home"
    run_cli("init", home=home)
    done = run_cli("ingest", str(tmp_path / "bad.audit.jsonl"), home=home)
    assert done.returncode == 1 and "rejected" in done.stdout
    assert ("line 2: $.expected_credit_score: 4 contradicts tag 'major_factual', which expects 2 (BAD)"
            in done.stdout)
    assert not data(home, "case.opened")


# --- item 3: reconstruction metadata: timestamp, judge model and reconstruction model ---------------

def test_document_report_names_judge_and_reconstruction_models_and_its_timestamp(run_cli, tmp_path):
    doc = {**reconstruction_file("D1"), "model": "writer-7b"}
    home = ingest(run_cli, tmp_path, "D1.json", doc)
    summary, _ = run_stand_in(home, _claims_scored({"c1": 9, "c2": 5, "c3": 2}))
    assert summary.judged == 1
    evaluations(run_cli, home)
    [path] = (home / "reports").rglob("D1.json")
    report = json.loads(path.read_text())
    assert report["metadata"]["model"] == "stand-in-model"            # the judge, as the spec means it
    assert report["metadata"]["reconstruction_model"] == "writer-7b"
    with ledger.open_ledger(home) as led:
        stamps = {e.meta["recorded_at"] for e in led.read(types=["claim.scored"])}
    assert report["timestamp"] in stamps
    text = path.with_suffix(".md").read_text()
    assert "reconstruction by writer-7b, judged by stand-in-model at " + report["timestamp"] in text
    before = path.read_bytes()
    assert run_cli("rebuild", home=home).returncode == 0 and path.read_bytes() == before


# --- item 12: the result fields the specs name --------------------------------------------------------

def test_deep_judgment_result_fields_in_evaluations_and_history(run_cli, tmp_path):
    rubric = {"traits": [
        {"name": "clarity", "kind": "llm", "description": "Is the answer clear?", "min_score": 1, "max_score": 5},
        {"name": "tone", "kind": "llm", "description": "Is it polite?", "min_score": 1, "max_score": 5}]}
    config = {**DEEP, "deep_judgment_rubric_mode": "custom",
              "deep_judgment_rubric_config": {"global": {"clarity": {"enabled": True}}}}
    home = ingest(run_cli, tmp_path, "b.json", template_benchmark(config=config, rubric=rubric))
    template = template_judge(paraphrase_first=True)
    sentence = "Human somatic cells are diploid"

    def handle(body):
        role, system = role_of(body), body["messages"][0]["content"]
        if role == "extract_excerpts" and "rubric traits" in system:
            retry = "previous excerpts" in body["messages"][-1]["content"]
            return {"excerpts": {"clarity": [{"text": sentence if retry else "cells are all haploid",
                                              "confidence": "high"}]}}
        if role == "reason" and "score each trait" in system:
            return {"reasoning": {"clarity": "It states the count plainly."}}
        return template(body, role)

    summary, requests = run_stand_in(home, handle)
    assert summary.judged == 1
    [line] = evaluations(run_cli, home)
    template_fields = line["deep_judgment"]
    assert template_fields["deep_judgment_performed"] is True
    assert template_fields["deep_judgment_stages_completed"] == ["excerpts", "reasoning", "parameters"]
    # two excerpt attempts, one reason and one parse call for the template; rubric calls not included
    assert template_fields["deep_judgment_model_calls"] == 4
    assert template_fields["deep_judgment_excerpt_retry_count"] == 1
    assert template_fields["attributes_without_excerpts"] == []
    rubric_fields = line["deep_judgment_rubric"]
    assert rubric_fields["trait_metadata"] == {"clarity": {
        "stages_completed": ["excerpt_extraction", "reasoning_generation", "score_extraction"],
        "model_calls": 4, "had_excerpts": True, "excerpt_retry_count": 1, "excerpt_validation_failed": False}}
    assert rubric_fields["traits_without_valid_excerpts"] == []
    assert (rubric_fields["total_deep_judgment_model_calls"], rubric_fields["total_traits_evaluated"],
            rubric_fields["total_excerpt_retries"]) == (4, 1, 1)
    assert line["excerpt_retry_count"] == {"rubric": {"clarity": 1}, "template": {"pair_count": 1}}
    # the calls counted are the ones the judge really received (the standard trait's one apart)
    roles = [role_of(r["body"]) for r in requests]
    assert roles.count("extract_excerpts") == 4 and roles.count("score_trait") == 2
    shown = run_cli("history", line["case_id"], "--json", home=home)
    history = json.loads(shown.stdout)
    assert history["deep_judgment"] == template_fields and history["deep_judgment_rubric"] == rubric_fields
    text = run_cli("history", line["case_id"], home=home).stdout
    assert "deep judgment: stages excerpts, reasoning, parameters; 4 model calls" in text


# --- the error cap as a property: any findings, any limit ---------------------------------------------

FINDING = st.one_of(
    st.builds(lambda level, severity, n: {"level": level, "severity": severity, "detail": f"d{n}"},
              st.sampled_from(["contradiction", "unsupported"]), st.sampled_from(["high", "low"]), st.integers(0, 99)),
    st.builds(lambda n: {"level": "reasonable_inference", "detail": f"i{n}"}, st.integers(0, 99)))


@settings(max_examples=200, deadline=None)
@given(st.lists(FINDING, max_size=12), st.integers(1, 6))
def test_error_cap_keeps_high_first_then_judge_order_and_never_counts_inferences(findings, limit):
    from evalledger.stages.audit import counted_errors, phase_findings
    from evalledger.stages.judge.roles import CheckFactsReply
    reply = CheckFactsReply.model_validate({"errors": findings})
    phase = phase_findings(reply, limit)
    errors = [f for f in findings if f["level"] != "reasonable_inference"]
    assert phase["errors"] == errors and len(phase["inferences"]) == len(findings) - len(errors)
    kept = counted_errors(phase)
    assert len(kept) == min(limit, len(errors)) and phase["dropped"] == len(errors) - len(kept)
    highs = [i for i, e in enumerate(errors) if e["severity"] == "high"]
    lows = [i for i, e in enumerate(errors) if e["severity"] == "low"]
    assert phase["counted"] == sorted((highs + lows)[:limit])          # high first, then in order
    assert phase_findings(reply, limit) == phase                          # the same reply keeps the same ones


def test_a_folder_dropped_into_the_inbox_names_the_collection(run_cli, tmp_path):
    home = tmp_path / "home"
    run_cli("init", home=home)
    staging = tmp_path / "cables-1976"
    staging.mkdir()
    write_json(staging / "C1.json", reconstruction_file("C1"))
    write_json(staging / "C2.json", reconstruction_file("C2"))
    (staging / ".C3.json.part").write_text("{")             # ignored, and keeps the folder
    staging.rename(home / "inbox" / "cables-1976")           # dropped in complete
    write_json(home / "inbox" / "A1.json", reconstruction_file("A1"))
    done = run_cli("watch", "--once", home=home)
    assert done.returncode == 0, done.stderr
    collections = stats(home)["reconstruction_collections"]
    docs = {name: sorted(d["doc_id"] for d in c["models"]["(no model)"]["by_document"])
            for name, c in collections.items()}
    assert docs == {"cables-1976": ["C1", "C2"], "default": ["A1"]}
    assert sorted(p.name for p in (home / "inbox" / "cables-1976").iterdir()) == [".C3.json.part"]
    (home / "inbox" / "cables-1976" / ".C3.json.part").unlink()
    write_json(home / "inbox" / "cables-1976" / "C4.json", reconstruction_file("C4"))
    assert run_cli("ingest", home=home).returncode == 0      # ingest of the inbox takes the same files
    assert not (home / "inbox" / "cables-1976").exists()     # emptied, so removed
    assert run_cli("run", "--quiet", home=home).returncode == 0
    evaluations(run_cli, home)
    assert [d["doc_id"] for d in stats(home)["reconstruction_collections"]["cables-1976"]["models"]["(no model)"]
            ["by_document"]] == ["C1", "C2", "C4"]


def test_the_running_daemon_takes_a_folder_renamed_into_the_inbox(run_cli, tmp_path):
    import signal
    import time

    from watch_support import start_watch, wait_for
    home = tmp_path / "home"
    run_cli("init", home=home)
    proc = start_watch(home, "--rescan-seconds", "3600", log_path=tmp_path / "watch.log")  # no rescan: the event must do it
    try:
        assert wait_for(lambda: "started" in (tmp_path / "watch.log").read_text(), 20)
        time.sleep(0.2)
        staging = tmp_path / "memos"
        staging.mkdir()
        write_jsonl(staging / "two.jsonl", [reconstruction_file("M1"), reconstruction_file("M2")])
        staging.rename(home / "inbox" / "memos")

        def scored() -> int:
            with ledger.open_ledger(home, readonly=True) as led:
                return sum(1 for _ in led.read(types=["claim.scored"]))
        assert wait_for(lambda: scored() == 6, 20)
        assert wait_for(lambda: not (home / "inbox" / "memos").exists(), 10)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    assert {q.get("collection") for d in data(home, "benchmark.registered") for q in d["questions"]} == {"memos"}


def test_rubric_search_risk_is_one_call_for_all_searching_traits(run_cli, tmp_path, monkeypatch):
    (tmp_path / "spec_search.py").write_text(SEARCH_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    rubric = {"traits": [{"name": name, "kind": "llm", "description": f"Is it {name}?", "min_score": 1,
                          "max_score": 5} for name in ("clear", "precise")]}
    config = {"deep_judgment_rubric_mode": "enable_all", "deep_judgment_rubric_search_enabled": True}
    home = ingest(run_cli, tmp_path, "b.json", template_benchmark(config=config, rubric=rubric))
    base = template_judge()
    sentence = "Human somatic cells are diploid"

    def handle(body):
        role, text = role_of(body), json.dumps(body["messages"])
        if role == "extract_excerpts":
            name = "clear" if "- clear:" in body["messages"][0]["content"] else "precise"
            return {"excerpts": {name: [{"text": sentence, "confidence": "high"}]}}
        if role == "assess_risk":
            return {"risks": [{"excerpt": sentence, "risk": "low", "justification": "seen"}] * text.count("EXCERPT ")}
        if role == "reason":
            name = "clear" if "- clear:" in body["messages"][0]["content"] else "precise"
            return {"reasoning": {name: "plain"}}
        return base(body, role)

    summary, requests = run_stand_in(home, handle, config_layer={"deep_judgment_rubric_search_tool": "spec_search:as_string"})
    assert summary.judged == 1
    roles = [role_of(r["body"]) for r in requests]
    assert roles.count("assess_risk") == 1 and roles.count("extract_excerpts") == 2
    risks = {d["attribute"]: d for d in data(home, "risk.assessed")}
    assert set(risks) == {"clear", "precise"} and all(r["subject"] == "rubric" and r["risk"] == "low"
                                                      for r in risks.values())
    assert {d["trait"]: d["risk"] for d in data(home, "trait.scored")} == {"clear": "low", "precise": "low"}
    [line] = evaluations(run_cli, home)
    metadata = line["deep_judgment_rubric"]["trait_metadata"]
    assert all(m["stages_completed"] == ["excerpt_extraction", "hallucination_assessment", "reasoning_generation",
                                         "score_extraction"] and m["model_calls"] == 4 for m in metadata.values())
    # excerpts, reasoning and score per trait, and the one shared risk call counted once
    assert line["deep_judgment_rubric"]["total_deep_judgment_model_calls"] == 7
