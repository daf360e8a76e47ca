"""Role models, prompts and tolerant reply decoding (no ledger, no network).

The recorded Karenina judge replies in shared/fixtures are real model output: every one must
decode and validate into the reply model of the role that asked for it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evalledger.stages.judge import ROLE_NAMES, role
from evalledger.stages.judge.replies import ReplyParseError, decode_reply
from evalledger.stages.judge.roles import (
    AttributeSpec,
    ExtractExcerptsRequest,
    FailedQuote,
    ParseRequest,
    ScoreClaimsRequest,
    ScoreTraitRequest,
)
from shared_fixtures import KARENINA_REPLIES as FIXTURES  # noqa: E402


def _fixture_files() -> list[Path]:
    return sorted(FIXTURES.glob("*.json"))


def _schema_fields(text: str) -> dict:
    """The properties of the first JSON schema block in a recorded prompt."""
    block = re.search(r"```(?:json)?\n(\{.*?\})\n```", text, re.S).group(1)
    return json.loads(block)["properties"]


def _request_for(recorded: dict):
    """The typed request of the role that produced a recorded Karenina reply."""
    scenario = recorded["metadata"]["scenario"]
    messages = recorded["request"]["messages"]
    system, user = messages[0]["content"], messages[1]["content"]
    if scenario == "e2e_deep_judgment":
        names = re.findall(r"^- (\w+): (.+)$", system.split("# Attribute Definitions")[1].split("# Extraction")[0], re.M)
        attrs = [AttributeSpec(name=n, description=d) for n, d in names]
        response = user.split("<response_to_analyze>\n")[1].split("\n</response_to_analyze>")[0]
        return "extract_excerpts", ExtractExcerptsRequest(question="q", response=response, attributes=attrs)
    if scenario == "template_parsing":
        props = _schema_fields(user)
        type_names = {"string": "str", "boolean": "bool", "integer": "int", "number": "float"}
        fields = [AttributeSpec(name=n, type=type_names.get(p.get("type"), "str"), description=p.get("description", ""))
                  for n, p in props.items() if n != "id"]
        return "parse", ParseRequest(question="q", response="r", fields=fields)
    trait_lines = re.findall(r"\*\*(\w+)\*\* \((boolean|score 1-5)\)", user)
    if not trait_lines:  # the single-trait prompt: "assessing the trait: **completeness**"
        trait_lines = [(re.search(r"trait: \*\*(\w+)\*\*", system).group(1), "score 1-5")]
    name, kind = trait_lines[-1]
    trait = {"name": name, "kind": "boolean" if kind == "boolean" else "score", "min_score": 1, "max_score": 5}
    return "score_trait", ScoreTraitRequest(question="q", response="r", trait=trait)


@pytest.mark.parametrize("path", _fixture_files(), ids=lambda p: p.name[:40])
def test_every_recorded_karenina_reply_parses_into_its_role_reply(path):
    recorded = json.loads(path.read_text())
    name, request = _request_for(recorded)
    reply = role(name).validate_reply(request, decode_reply(recorded["response"]["content"]))
    if name == "extract_excerpts":
        assert set(reply.excerpts) == {a.name for a in request.attributes}
        for quotes in reply.excerpts.values():
            assert all(q.text and q.text in request.response for q in quotes)
    elif name == "parse":
        assert set(reply.values) == {f.name for f in request.fields}
        assert all(v is not None for v in reply.values.values())
    else:
        assert reply.score in (True, False) or 1 <= reply.score <= 5


def test_fixtures_are_present():
    assert len(_fixture_files()) >= 9


@pytest.mark.parametrize("text", [
    '{"score": 3}',
    '```json\n{"score": 3}\n```',
    'Sure! Here is my evaluation:\n```\n{"score": 3}\n```\nHope that helps.',
    'The answer is {"score": 3} as requested.',
    '<think>maybe {"score": 1}? no.</think>\n{"score": 3}',
])
def test_decode_reply_finds_the_json_in_fences_and_prose(text):
    assert decode_reply(text) == {"score": 3}


@pytest.mark.parametrize("text", ["", "   ", "no json at all", "{broken: json"])
def test_decode_reply_refuses_text_without_json(text):
    with pytest.raises(ReplyParseError):
        decode_reply(text)


def test_every_role_has_models_prompts_and_a_schema():
    for name in ROLE_NAMES:
        spec = role(name)
        assert spec.reply.model_json_schema()["type"] == "object"
    with pytest.raises(ValueError, match="unknown judge role 'judge_everything'"):
        role("judge_everything")


def test_parse_reply_is_typed_by_the_template_and_rejects_wrong_types():
    request = ParseRequest(question="q", response="r", fields=[
        AttributeSpec(name="pairs", type="int"), AttributeSpec(name="when", type="date"),
        AttributeSpec(name="kind", type="literal", values=["diploid", "haploid"]),
        AttributeSpec(name="genes", type="list[str]"), AttributeSpec(name="ok", type="bool")])
    spec = role("parse")
    reply = spec.validate_reply(request, {"pairs": "23", "when": "1969-07-20", "kind": "diploid",
                                          "genes": ["BCL2"], "ok": None, "extra": 1})
    assert reply.values == {"pairs": 23, "when": "1969-07-20", "kind": "diploid", "genes": ["BCL2"], "ok": None}
    with pytest.raises(ValueError, match="kind"):
        spec.validate_reply(request, {"pairs": 23, "when": None, "kind": "triploid", "genes": [], "ok": True})
    with pytest.raises(ValueError, match="pairs"):
        spec.validate_reply(request, {"when": None, "kind": None, "genes": None, "ok": None})
    schema = spec.reply_schema(request)
    assert set(schema["required"]) == {"pairs", "when", "kind", "genes", "ok"}


def test_score_trait_reply_is_checked_against_the_trait_range():
    spec = role("score_trait")
    request = ScoreTraitRequest(question="q", response="r", trait={"name": "t", "min_score": 1, "max_score": 5})
    assert spec.validate_reply(request, {"result": 4}).score == 4
    with pytest.raises(ValueError, match="from 1 to 5"):
        spec.validate_reply(request, {"score": 7})
    boolean = ScoreTraitRequest(question="q", response="r", trait={"name": "t", "kind": "boolean"})
    with pytest.raises(ValueError, match="boolean"):
        spec.validate_reply(boolean, {"score": 3})


def test_score_claims_requires_every_claim_exactly_once_and_accepts_the_spec_array():
    spec = role("score_claims")
    request = ScoreClaimsRequest(doc_id="d", claims=[{"id": "c1", "text": "a"}, {"id": "c2", "text": "b"}],
                                 answers=[{"id": "q1", "answer": "a"}])
    reply = spec.validate_reply(request, [
        {"claim_id": "c1", "score": 9, "justification": "j", "evidence": "q1"},
        {"claim_id": "[c2]", "score": 0, "justification": "j", "evidence": "none"}])
    assert [(e.claim_id, e.evidence_refs) for e in reply.evaluations] == [("c1", ["q1"]), ("c2", [])]
    with pytest.raises(ValueError, match="missing claim"):
        spec.validate_reply(request, [{"claim_id": "c1", "score": 9, "justification": "j"}])
    with pytest.raises(ValueError):
        spec.validate_reply(request, [{"claim_id": "c1", "score": 11, "justification": "j"},
                                      {"claim_id": "c2", "score": 1, "justification": "j"}])


def test_excerpt_retry_prompt_lists_each_failed_quote_with_its_score_and_the_threshold():
    request = ExtractExcerptsRequest(
        question="q", response="Water boils at 100 C.", attributes=[AttributeSpec(name="celsius")],
        feedback=[FailedQuote(attribute="celsius", text="water boils at a hundred", similarity=0.42, threshold=0.8)])
    user = role("extract_excerpts").build_messages(request)[1]["content"]
    assert '"water boils at a hundred" scored 0.42' in user and "threshold 0.80" in user


def test_audit_reply_levels_and_severities_are_closed_sets():
    spec = role("check_facts")
    request = {"context_input": "c", "model_output": "o", "facts": ["f"]}
    typed = spec.request.model_validate(request)
    ok = spec.validate_reply(typed, {"errors": [{"level": "Contradiction", "severity": "HIGH", "detail": "d"}]})
    assert ok.errors[0].level == "contradiction" and ok.errors[0].severity == "high"
    with pytest.raises(ValueError):
        spec.validate_reply(typed, {"errors": [{"level": "inference", "severity": "high", "detail": "d"}]})


def test_parse_prompt_shows_the_template_schema_encoded_once_per_template():
    # The schema text is the same bytes json.dumps wrote per case before (recorded request hashes
    # depend on it), and a second case of the same template reuses it instead of encoding again.
    from evalledger.stages.judge.template_schema import _schema_text, template_schema

    fields = [AttributeSpec(name="pairs", type="int", description="How many pairs"),
              AttributeSpec(name="kind", type="literal", values=["diploid", "haploid"])]
    expected = json.dumps(template_schema(fields), indent=2, ensure_ascii=False, sort_keys=True)
    first = role("parse").build_messages(ParseRequest(question="q1", response="r1", fields=fields))
    hits = _schema_text.cache_info().hits
    second = role("parse").build_messages(ParseRequest(question="q2", response="r2", fields=list(fields)))
    assert f"```json\n{expected}\n```" in first[1]["content"]
    assert f"```json\n{expected}\n```" in second[1]["content"]
    assert _schema_text.cache_info().hits == hits + 1


def test_deep_judgment_evidence_in_the_reason_and_parse_prompts_is_json_dumps_byte_for_byte():
    # The prompts are hashed and recorded: the evidence orjson writes must be the bytes json wrote.
    from evalledger.stages.judge.prompts_deep import _evidence_json, parse_messages, reason_messages
    from evalledger.stages.judge.roles import ReasonRequest

    def indented(value):
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)

    awkward = ['say "hi"\\', "tab\there\nnew\x00\x1f\x7f", "é ü 東京 😀 \u2028", "", "b", "a"]
    attrs = [AttributeSpec(name="Ω"), AttributeSpec(name="z"), AttributeSpec(name="a\x01")]
    reason = ReasonRequest(question="q", response="r", attributes=attrs,
                           excerpts={"Ω": awkward, "a\x01": [], "z": ["x"]}, risks={"z": "high"})
    user = reason_messages(reason)[1]["content"]
    evidence = {"Ω": {"excerpts": awkward}, "z": {"excerpts": ["x"], "hallucination_risk": "high"},
                "a\x01": {"excerpts": []}}
    assert user.endswith("<evidence>\n" + indented(evidence) + "\n</evidence>")
    parse = ParseRequest(question="q", response="r", fields=attrs, reasoning={"z": awkward[2], "Ω": "ok"},
                         excerpts={"z": awkward})
    text = parse_messages(parse)[1]["content"]
    assert indented({"reasoning": {"z": awkward[2], "Ω": "ok"}, "excerpts": {"z": awkward}}) + "\n\n" in text
    lone = {"a": ["\ud800 half a pair"], "b": {}}   # orjson refuses a lone surrogate: json writes it
    assert _evidence_json(lone) == indented(lone)
