"""Strict per-request reply schemas: every instance passes the role's checks, and OpenAI accepts them.

The requests are real ones: every judge request the stages make when the sample benchmarks are
judged offline with deep judgment, search and rubric deep judgment on, plus parse, excerpt,
reason and trait requests built from every template and trait the sample benchmarks and the
Karenina fixtures register. Instances are drawn by hypothesis (``evalledger.testing.schema_instances``)
and each is first checked to be an instance of the schema by ``jsonschema``, which we did not write.
(hypothesis-jsonschema 0.23.1 no longer runs on the hypothesis we use: it calls a removed
internal, ``many.more``.)
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, FormatChecker
from shared_fixtures import KARENINA

from evalledger.stages.judge.registry import ROLE_NAMES, role
from evalledger.stages.judge.roles import ScoreClaimsReply
from evalledger.testing.sample_requests import sample_files, sample_requests
from evalledger.testing.schema_instances import instances
from evalledger.testing.strict_schema import strict_mode_problems


@pytest.fixture(scope="module")
def requests() -> list[tuple[str, object]]:
    """(role, typed request) for every distinct request shape of the samples and Karenina fixtures."""
    return sample_requests(sample_files() + sorted(KARENINA.glob("*.jsonld")))


def test_the_requests_cover_every_role(requests):
    assert {name for name, _ in requests} == set(ROLE_NAMES)


def test_every_schema_satisfies_openai_strict_mode(requests):
    for name, request in requests:
        schema = role(name).reply_schema(request)
        assert strict_mode_problems(schema) == [], (name, schema)


def check_instances(name: str, request) -> None:
    """Draw instances of the request's schema; each must be one by jsonschema and pass the checks."""
    spec = role(name)
    schema = spec.reply_schema(request)
    validator = Draft202012Validator(schema, format_checker=FormatChecker())

    @settings(max_examples=15, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(instances(schema))
    def passes(instance):
        validator.validate(instance)   # an instance by jsonschema's reading, not only ours
        spec.validate_reply(request, json.loads(json.dumps(instance)))

    try:
        passes()
    except Exception as exc:
        raise AssertionError(f"role {name}: an instance of its schema fails its checks: {exc}") from exc


def test_every_instance_of_a_request_schema_passes_the_role_checks(requests):
    """The property: whatever a grammar-constrained judge emits inside the schema is a valid reply."""
    for name, request in requests:
        check_instances(name, request)


def test_the_checker_refuses_what_strict_mode_refuses():
    ok = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": False}
    assert strict_mode_problems(ok) == []
    cases = {
        "additionalProperties must be false": {**ok, "additionalProperties": {"type": "string"}},
        "every property must be required": {**ok, "required": []},
        "root must be an object": {"anyOf": [ok]},
        "'default' must not be emitted": {**ok, "properties": {"a": {"type": "string", "default": "x"}}},
        "'title' must not be emitted": {**ok, "title": "Reply"},
        "keyword 'minLength' is not supported": {**ok, "properties": {"a": {"type": "string", "minLength": 1}}},
        "keyword 'allOf' is not supported": {**ok, "properties": {"a": {"allOf": [{"type": "string"}]}}},
        "format 'color' is not supported": {**ok, "properties": {"a": {"type": "string", "format": "color"}}},
    }
    for expected, schema in cases.items():
        assert any(expected in p for p in strict_mode_problems(schema)), (expected, strict_mode_problems(schema))
    deep = ok
    for _ in range(11):
        deep = {**ok, "properties": {"a": deep}}
    assert any("levels of object nesting" in p for p in strict_mode_problems(deep))
    wide = {**ok, "properties": {f"p{i}": {"type": "string"} for i in range(5001)},
            "required": [f"p{i}" for i in range(5001)]}
    assert any("5001 object properties" in p for p in strict_mode_problems(wide))
    enums = {**ok, "properties": {"a": {"type": "string", "enum": [f"v{i}" for i in range(1001)]}}}
    assert any("1001 enum values" in p for p in strict_mode_problems(enums))


def test_pydantic_reply_models_would_break_strict_mode():
    """Why the schemas are built by hand: pydantic's own schemas carry titles, defaults, free dicts."""
    from evalledger.stages.judge.roles import ExtractExcerptsReply
    assert strict_mode_problems(ExtractExcerptsReply.model_json_schema())


def test_claims_keyed_by_id_become_the_event_list_form():
    reply = ScoreClaimsReply.model_validate({"evaluations": {
        "c1": {"score": 7, "justification": "mostly", "evidence_refs": ["q1"]},
        "c2": {"score": 0, "justification": "absent", "evidence_refs": []}}})
    assert [(e.claim_id, e.score) for e in reply.evaluations] == [("c1", 7), ("c2", 0)]


def _trait(min_score=1, max_score=5, kind="score"):
    return role("score_trait").request.model_validate(
        {"question": "q", "response": "r", "trait": {"name": "t", "kind": kind, "min_score": min_score,
                                                     "max_score": max_score}})


def test_schemas_fit_the_request():
    spec = role("score_trait")
    assert spec.reply_schema(_trait(2, 9))["properties"]["score"] == {"type": "integer", "minimum": 2, "maximum": 9}
    assert spec.reply_schema(_trait(kind="boolean"))["properties"]["score"] == {"type": "boolean"}
    decompose = role("decompose")
    schema = decompose.reply_schema(decompose.request(context_input="c", model_output="o", max_facts=8))
    assert schema["properties"]["facts"]["maxItems"] == 8
    with pytest.raises(ValueError, match="at most 2 fact"):
        decompose.validate_reply(decompose.request(context_input="c", model_output="o", max_facts=2),
                                 {"facts": ["a", "b", "c"], "reasoning_chains": []})
    risk = role("assess_risk")
    request = risk.request.model_validate({"attribute": "a", "evidence": [{"excerpt": "x"}, {"excerpt": "y"}]})
    assert (risk.reply_schema(request)["properties"]["risks"]["minItems"],
            risk.reply_schema(request)["properties"]["risks"]["maxItems"]) == (2, 2)
    with pytest.raises(ValueError, match="one risk per excerpt"):
        risk.validate_reply(request, {"risks": [{"excerpt": "x", "risk": "low", "justification": ""}]})


@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=6, unique=True), st.integers(1, 9))
@settings(max_examples=30, deadline=None)
def test_excerpt_schema_has_one_required_list_per_attribute(names, max_excerpts):
    spec = role("extract_excerpts")
    request = spec.request.model_validate({"question": "q", "response": "r", "max_excerpts": max_excerpts,
                                           "attributes": [{"name": n} for n in names]})
    inner = spec.reply_schema(request)["properties"]["excerpts"]
    assert inner["required"] == names and inner["additionalProperties"] is False
    assert all(p["minItems"] == 1 and p["maxItems"] == max_excerpts for p in inner["properties"].values())
