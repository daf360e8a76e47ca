"""The offline judge: its heuristics do real work, and its calls are recorded like any other.

Each test goes through the public port (``make_judge(...).call``) with a real SQLite ledger.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.stages.judge import OFFLINE_MODEL, JudgeSettings, make_judge

CHROMOSOMES = ("Human somatic cells are diploid, containing 46 chromosomes organized into 23 pairs. "
               "This was established in 1956 by Tjio and Levan [1].")
MOON = ("The first moon landing occurred on July 20, 1969, as part of NASA's Apollo 11 mission. "
        "The mission was commanded by Neil Armstrong, who became the first human to walk on the lunar surface.")


@pytest.fixture()
def led(tmp_path):
    with ledger.open_ledger(tmp_path / "home") as handle:
        yield handle


def ask(led, role, request, case_id="case1", **settings):
    """One call through a fresh offline judge port."""
    async def go():
        async with make_judge(JudgeSettings(**settings), led) as judge:
            return await judge.call(role, request, case_id=case_id)
    return asyncio.run(go())


def test_excerpts_are_verbatim_sentences_that_carry_the_field(led):
    reply = ask(led, "extract_excerpts", {
        "question": "How many chromosome pairs?", "response": CHROMOSOMES,
        "attributes": [{"name": "pair_count", "type": "int", "description": "The number of chromosome pairs"},
                       {"name": "eye_colour", "type": "str", "description": "Colour of the iris"}]})
    pairs = reply.excerpts["pair_count"]
    assert pairs[0].text == "Human somatic cells are diploid, containing 46 chromosomes organized into 23 pairs."
    assert pairs[0].confidence == "high"
    assert all(q.text in CHROMOSOMES for q in pairs)
    # a str field whose terms appear nowhere: only the sentence naming people, with low confidence
    assert [(q.text, q.confidence) for q in reply.excerpts["eye_colour"]] == \
        [("This was established in 1956 by Tjio and Levan [1].", "low")]


def test_an_attribute_the_response_never_addresses_gets_no_excerpt(led):
    reply = ask(led, "extract_excerpts", {
        "question": "How many chromosome pairs?", "response": "There are twenty-three pairs in total.",
        "attributes": [{"name": "discoverer", "type": "str", "description": "who discovered the count"},
                       {"name": "year", "type": "int", "description": "year of the discovery"}]})
    assert reply.excerpts["discoverer"][0].confidence == "none" and reply.excerpts["discoverer"][0].text == ""
    assert reply.excerpts["year"][0].confidence == "none"


def test_parse_extracts_each_type(led):
    reply = ask(led, "parse", {
        "question": "When was the first moon landing and who commanded the mission?", "response": MOON,
        "fields": [{"name": "year", "type": "int", "description": "Year of the landing"},
                   {"name": "landing_date", "type": "date", "description": "Date of the landing"},
                   {"name": "commander", "type": "str", "description": "Name of the mission commander"},
                   {"name": "walked", "type": "bool", "description": "Whether the commander walked on the lunar surface"},
                   {"name": "agency", "type": "literal", "values": ["ESA", "NASA", "Roscosmos"],
                    "description": "The agency of the mission"}]})
    assert reply.values == {"year": 1969, "landing_date": "1969-07-20", "commander": "Neil Armstrong",
                            "walked": True, "agency": "NASA"}


def test_parse_reads_negation_and_numbers_next_to_their_terms(led):
    reply = ask(led, "parse", {
        "question": "q", "response": "The study did not reach significance. It enrolled 120 patients over 3 years.",
        "fields": [{"name": "significant", "type": "bool", "description": "Whether the study reached significance"},
                   {"name": "patients", "type": "int", "description": "Number of patients enrolled"}]})
    assert reply.values == {"significant": False, "patients": 120}


def test_claim_scores_follow_overlap_and_cite_their_evidence(led):
    reply = ask(led, "score_claims", {
        "doc_id": "d1",
        "claims": [{"id": "c1", "text": "The embassy reports that Singapore supports the ASEAN trade agreement"},
                   {"id": "c2", "text": "Troop levels will fall by 30,000 in 1977"},
                   {"id": "c3", "text": "The ambassador met the fisheries minister about tuna quotas"}],
        "answers": [{"id": "q1", "answer": "Singapore supports the ASEAN trade agreement, the embassy reports."},
                    {"id": "q2", "answer": "Troop levels will fall in 1977, by some 10,000."}],
        "synthesis": "Singapore backs ASEAN trade; troops will be reduced."})
    scores = {e.claim_id: e for e in reply.evaluations}
    assert scores["c1"].score >= 8 and "q1" in scores["c1"].evidence_refs
    assert 1 <= scores["c2"].score <= 5 and "30000" in scores["c2"].justification
    assert scores["c3"].score <= 1 and scores["c3"].evidence_refs == []


def test_a_claim_sharing_only_the_documents_common_words_is_not_reconstructed(led):
    reply = ask(led, "score_claims", {
        "doc_id": "d1",
        "claims": [{"id": "c1", "text": "The Salk vaccine was declared safe and effective."},
                   {"id": "c2", "text": "The vaccine was licensed by the government."},
                   {"id": "c3", "text": "Salk did not patent the vaccine."}],
        "answers": [{"id": "q1", "answer": "The Salk vaccine was declared safe and effective."}],
        "synthesis": "Salk's vaccine was safe; the government licensed it."})
    scores = {e.claim_id: e.score for e in reply.evaluations}
    assert scores["c1"] == 10 and scores["c2"] >= 6
    assert scores["c3"] <= 3  # 'Salk' and 'vaccine' are everywhere; 'patent' is nowhere


def test_risk_compares_each_excerpt_with_its_search_results(led):
    hit = {"title": "Apollo 11", "content": "Apollo 11 landed on July 20, 1969; Neil Armstrong commanded it.",
           "url": "corpus/apollo.md#1"}
    reply = ask(led, "assess_risk", {"attribute": "year", "evidence": [
        {"excerpt": "Apollo 11 landed on July 20, 1969", "results": [hit]},
        {"excerpt": "Apollo 11 landed on July 20, 1971", "results": [hit]},
        {"excerpt": "Apollo 11 landed on July 20, 1969", "results": []}]})
    assert [r.risk for r in reply.risks] == ["none", "high", "medium"]
    assert reply.overall() == "high"


def test_reasoning_names_the_excerpts_and_the_value_they_point_to(led):
    reply = ask(led, "reason", {"question": "When?", "response": MOON,
                                "attributes": [{"name": "year", "type": "int", "description": "Year of the landing"},
                                               {"name": "crew_size", "type": "int", "description": "crew members"}],
                                "excerpts": {"year": ["The first moon landing was on July 20, 1969."]}})
    assert "1969" in reply.reasoning["year"] and "July 20, 1969" in reply.reasoning["year"]
    assert reply.reasoning["crew_size"].startswith("No excerpt was kept") or "Nothing" in reply.reasoning["crew_size"]


CONTEXT = "Revenue rose 12% to $4.5 billion in 2023. Operating costs fell 3%. The company did not pay a dividend."


def test_fact_check_finds_reversed_direction_and_wrong_numbers(led):
    reply = ask(led, "check_facts", {
        "context_input": CONTEXT, "model_output": "",
        "facts": ["Revenue fell 12% to $4.5 billion in 2023.", "Revenue rose 12.5% in 2023.",
                  "Revenue rose 40% in 2023.", "Operating costs fell 3%.", "The company paid a dividend.",
                  "Revenue rose 12% in 2022."]})
    by_claim = {e.claim: (e.level, e.severity) for e in reply.errors}
    assert by_claim["Revenue fell 12% to $4.5 billion in 2023."] == ("contradiction", "high")
    assert by_claim["Revenue rose 12.5% in 2023."] == ("contradiction", "low")
    assert by_claim["Revenue rose 40% in 2023."] == ("contradiction", "high")
    assert by_claim["The company paid a dividend."] == ("contradiction", "high")
    assert by_claim["Revenue rose 12% in 2022."] == ("contradiction", "high")  # a year only equals itself
    assert "Operating costs fell 3%." not in by_claim


def test_decompose_then_logic_check_flags_a_reversed_conclusion(led):
    output = "Operating costs fell 3%. Therefore revenue decreased. Revenue rose 12%, so growth will always continue."
    facts = ask(led, "decompose", {"context_input": CONTEXT, "model_output": output})
    assert len(facts.facts) <= 5 and len(facts.reasoning_chains) == 2
    logic = ask(led, "check_logic", {"context_input": CONTEXT, "model_output": output,
                                     "reasoning_chains": [c.model_dump() for c in facts.reasoning_chains]})
    assert [(e.level, e.severity) for e in logic.errors] == [("contradiction", "high"), ("unsupported", "low")]


def test_a_clean_output_gets_no_errors(led):
    facts = ask(led, "check_facts", {"context_input": CONTEXT, "model_output": "",
                                     "facts": ["Revenue rose 12% to $4.5 billion in 2023."]})
    assert facts.errors == []


def test_offline_calls_are_recorded_as_offline_with_request_and_reply(led):
    request = {"question": "How many chromosome pairs?", "response": CHROMOSOMES,
               "fields": [{"name": "pair_count", "type": "int", "description": "chromosome pairs"}]}
    reply = ask(led, "parse", request, case_id="abc")
    [event] = list(led.read(types=["judge.called"]))
    data = event.data
    assert event.stream == "case:abc"
    assert (data["role"], data["backend"], data["model"], data["attempt"], data["error"]) == \
        ("parse", "offline", OFFLINE_MODEL, 1, None)
    assert data["reply"] == reply.model_dump(mode="json")
    assert data["request"]["payload"]["response"] == CHROMOSOMES
    assert data["request"]["messages"][0]["role"] == "system"
    assert len(data["request_hash"]) == 64 and data["case_id"] == "abc"
    assert event.payload().request_hash == data["request_hash"]  # the declared keys validate


def test_a_redone_step_appends_nothing_and_no_cache_records_a_new_attempt(led):
    request = {"question": "q", "response": MOON, "fields": [{"name": "year", "type": "int"}]}
    first = ask(led, "parse", request)
    again = ask(led, "parse", request)
    assert first == again and len(list(led.read(types=["judge.called"]))) == 1
    ask(led, "parse", request, no_cache=True)
    attempts = [e.data["attempt"] for e in led.read(types=["judge.called"])]
    assert attempts == [1, 2]


def test_a_recorded_answer_reused_on_another_case_is_recorded_there_with_its_source(led):
    request = {"question": "q", "response": MOON, "fields": [{"name": "year", "type": "int"}]}
    ask(led, "parse", request, case_id="first")
    ask(led, "parse", request, case_id="second")
    first, second = list(led.read(types=["judge.called"]))
    assert second.stream == "case:second" and second.data["source_event"] == first.id
    assert second.data["reply"] == first.data["reply"] and second.data["usage"] is None


def test_a_success_recorded_through_another_handle_is_reused(tmp_path):
    """Another process's recording is seen: the index catches up from the ledger, not from memory."""
    home = tmp_path / "home"
    request = {"question": "q", "response": MOON, "fields": [{"name": "year", "type": "int"}]}

    async def go():
        with ledger.open_ledger(home) as first, ledger.open_ledger(home) as second:
            late = make_judge(JudgeSettings(), second)      # its index is built before the call below
            await make_judge(JudgeSettings(), first).call("parse", request, case_id="c1")
            await late.call("parse", request, case_id="c1")
            return late.calls, late.reused

    assert asyncio.run(go()) == (0, 1)
    with ledger.open_ledger(home) as led:
        assert len(list(led.read(types=["judge.called"]))) == 1


SAMPLES = Path(__file__).resolve().parents[1] / "benchmarks" / "samples"


@pytest.mark.skipif(not (SAMPLES / "verifyfast-cases.audit.jsonl").exists(), reason="no sample benchmarks")
def test_what_the_offline_judge_gets_right_on_the_samples_holds(tmp_path):
    """The figures docs/judge.md states, through the real pipeline (a regression guard)."""
    from evalledger.testing.offline_evaluation import audit_metrics, run_samples, template_metrics

    run_samples(SAMPLES, tmp_path / "home")
    with ledger.open_ledger(tmp_path / "home") as led:
        audit, template = audit_metrics(led), template_metrics(led)
    assert audit["cases"] == 26 and audit["cross_band"] == 0 and audit["zone"] >= 24
    assert template["model-alpha"]["cases"] == {"pass": 14}
    assert template["model-gamma"]["cases"] == {"pass": 12, "fail": 2}


def test_group_commit_keeps_the_good_events_of_a_batch_with_a_bad_one(led):
    from evalledger.ledger import EnvelopeError
    from evalledger.stages.judge.group_commit import GroupCommitter
    from evalledger.stages.judge.recording import call_event, index_for

    def event(case, hash):
        payload = {"role": "parse", "backend": "openai", "model": "m", "request_hash": hash, "attempt": 1,
                   "error": None, "reply": {"values": {}}}
        return call_event(case, payload, 1, 1)

    bad = event("c2", "b" * 64)
    bad = type(bad)(bad.stream, bad.type, {**bad.data, "latency_ms": float("nan")}, key=bad.key, meta=bad.meta)

    async def go():
        committer = GroupCommitter(led, index_for(led))
        try:
            return await asyncio.gather(committer.record(event("c1", "a" * 64)), committer.record(bad),
                                        committer.record(event("c3", "c" * 64)), return_exceptions=True)
        finally:
            committer.close()

    first, failed, third = asyncio.run(go())
    assert isinstance(failed, EnvelopeError)
    assert [e.stream for e in led.read(types=["judge.called"])] == ["case:c1", "case:c3"]
    assert index_for(led).success("a" * 64).id == first.id and index_for(led).success("c" * 64).id == third.id


from shared_fixtures import KARENINA_REPLIES as KARENINA  # noqa: E402


def test_offline_parse_agrees_with_the_recorded_model_parses(led):
    """The recorded Karenina template parses (a real model's): the offline parse of the same
    question and response gives the same values, but for a free-text explanation it leaves null."""
    import json
    import re

    from evalledger.stages.judge.replies import decode_reply

    compared = agreed = 0
    for path in sorted(KARENINA.glob("template_parsing__*.json")):
        recorded = json.loads(path.read_text())
        user = recorded["request"]["messages"][1]["content"]
        question = user.split("**ORIGINAL QUESTION:**\n")[1].split("\n\n")[0]
        response = user.split("**RESPONSE TO PARSE:**\n")[1].split("\n\n**JSON SCHEMA")[0]
        props = json.loads(re.search(r"```json\n(\{.*?\})\n```", user, re.S).group(1))["properties"]
        kinds = {"string": "str", "boolean": "bool", "integer": "int", "number": "float"}
        fields = [{"name": n, "type": kinds.get(p.get("type"), "str"), "description": p.get("description", "")}
                  for n, p in props.items() if n != "id"]
        mine = ask(led, "parse", {"question": question, "response": response, "fields": fields},
                   case_id=path.stem[-12:]).values
        theirs = decode_reply(recorded["response"]["content"])
        for name in mine:
            compared += 1
            agreed += mine[name] == theirs[name]
    assert (compared, agreed) == (6, 5)
