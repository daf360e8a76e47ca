"""Field verification (tri-state, weights, verdict strategies) and the embedder port."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from evalledger.stages.embedder import CharNgramEmbedder, VectorEmbedder, cosine
from evalledger.stages.primitives import ExactMatch, PrimitiveSpecError
from evalledger.stages.verification import (
    CaseVerdict,
    FieldResult,
    FieldSpec,
    TemplateSpec,
    VerdictRule,
    decide,
    verify_field,
    verify_fields,
)

RESPONSE = "Human somatic cells are diploid, containing 46 chromosomes organized into 23 pairs [1]."

TEMPLATE = {
    "fields": [
        {"name": "pair_count", "type": "int", "ground_truth": 23, "verify_with": {"type": "NumericExact"}},
        {"name": "cites_source", "type": "bool", "ground_truth": True,
         "verify_with": {"type": "TraceRegex", "pattern": r"\[\d+\]"}},
        {"name": "ploidy", "type": "str", "ground_truth": "diploid", "verify_with": {"type": "ExactMatch"}},
    ]
}


def result(name: str, passed: bool | None, weight: float = 1.0) -> FieldResult:
    """A bare field result for verdict tests."""
    return FieldResult(name, {"type": "NumericExact"}, 1, 1, passed, weight, None if passed else "x")


def test_template_verifies_every_field() -> None:
    template = TemplateSpec.from_dict(TEMPLATE, where="questions[0].template")
    results, verdict = template.verify({"pair_count": 23, "ploidy": " Diploid"}, RESPONSE)
    assert [r.passed for r in results] == [True, True, True]
    assert verdict.passed and verdict.score == 1.0 and verdict.rule == VerdictRule("all_of")
    assert results[0].as_dict() == {
        "field": "pair_count", "primitive": {"type": "NumericExact"}, "extracted": 23, "expected": 23,
        "passed": True, "weight": 1.0, "reason": None,
    }
    assert results[2].primitive == {"type": "ExactMatch", "normalize": ["lowercase", "strip"]}


def test_null_extraction_is_not_verifiable_not_false() -> None:
    template = TemplateSpec.from_dict(TEMPLATE)
    results, verdict = template.verify({"pair_count": None}, RESPONSE)
    by_name = {r.field: r for r in results}
    assert by_name["pair_count"].passed is None and "null" in by_name["pair_count"].reason
    assert by_name["ploidy"].passed is None  # absent key = null extraction
    assert by_name["cites_source"].passed is True  # trace fields read the response: always verifiable
    assert not verdict.passed and verdict.unverifiable_fields == ("pair_count", "ploidy")
    assert verdict.failed_fields == () and verdict.passed_fields == ("cites_source",)
    assert any("not verifiable" in line for line in verdict.reasons)


def test_wrong_extraction_is_false_with_a_reason() -> None:
    spec = FieldSpec.from_dict(TEMPLATE["fields"][0])
    outcome = verify_field(spec, 46, RESPONSE)
    assert outcome.passed is False and outcome.reason == "46 does not match 23 (NumericExact)"
    unreadable = verify_field(spec, "twenty-three", RESPONSE)
    assert unreadable.passed is False and "expected a number" in unreadable.reason


def test_trace_field_compares_with_bool_ground_truth_and_records_what_it_saw() -> None:
    absent = FieldSpec.from_dict({"name": "no_brand", "ground_truth": False,
                                  "verify_with": {"type": "TraceContains", "substring": "Venclexta"}})
    clean = verify_field(absent, None, "The BCL2 inhibitor was approved.")
    assert clean.passed is True and clean.extracted is False and clean.expected is False
    dirty = verify_field(absent, None, "Venclexta was approved.")
    assert dirty.passed is False and "gave True, expected False" in dirty.reason
    assert verify_field(absent, None, None).passed is True  # no response: substring absent


@pytest.mark.parametrize(
    ("strategy", "outcomes", "passed"),
    [
        ("all_of", [True, True, True], True),
        ("all_of", [True, True, False], False),
        ("all_of", [True, True, None], False),
        ("any_of", [False, None, True], True),
        ("any_of", [False, None, None], False),
    ],
)
def test_all_of_and_any_of(strategy: str, outcomes: list[bool | None], passed: bool) -> None:
    results = [result(f"f{i}", outcome) for i, outcome in enumerate(outcomes)]
    assert decide(results, VerdictRule(strategy)).passed is passed  # type: ignore[arg-type]


def test_at_least_n_counts_passed_fields_and_none_is_not_passed() -> None:
    results = [result("a", True), result("b", None), result("c", True), result("d", False)]
    assert decide(results, VerdictRule("at_least_n", 2)).passed
    assert not decide(results, VerdictRule("at_least_n", 3)).passed


def test_weights_shape_the_score_and_at_least_n() -> None:
    results = [result("major", True, 3.0), result("minor", False, 1.0), result("info", False, 0.0)]
    verdict = decide(results, VerdictRule("at_least_n", 3))
    assert verdict.passed and verdict.score == 0.75
    assert "info" not in verdict.failed_fields  # weight 0: recorded, never decides
    assert decide(results).passed is False  # all_of: 'minor' failed
    assert decide([result("info", False, 0.0), result("x", True)]).passed


def test_no_counted_field_fails_the_case() -> None:
    verdict = decide([])
    assert isinstance(verdict, CaseVerdict) and not verdict.passed and verdict.score == 0.0
    assert verdict.reasons == ("no field with a positive weight to verify",)
    assert not decide([result("info", True, 0.0)], VerdictRule("any_of")).passed


def test_semantic_field_uses_the_embedder_passed() -> None:
    class Always:
        def similarity(self, a: str, b: str) -> float:
            return 1.0

    spec = FieldSpec.from_dict({"name": "why", "ground_truth": "Targets BCL2",
                                "verify_with": {"type": "SemanticMatch"}})
    assert verify_fields([spec], {"why": "completely different"}, "", embedder=Always())[0].passed
    assert verify_fields([spec], {"why": "completely different"}, "")[0].passed is False


def test_verdict_rule_specs() -> None:
    assert VerdictRule.from_spec(None) == VerdictRule()
    assert VerdictRule.from_spec("any_of").strategy == "any_of"
    rule = VerdictRule.from_spec({"type": "at_least_n", "n": 2})
    assert rule.to_spec() == {"type": "at_least_n", "n": 2}


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({"type": "most_of"}, "unknown strategy 'most_of'; use all_of, any_of, at_least_n"),
        ({"type": "at_least_n"}, "at_least_n needs n, a positive number, got None"),
        ({"type": "at_least_n", "n": 0}, "at_least_n needs n"),
        ({"type": "all_of", "n": 2}, "n is only used with at_least_n"),
        ({"type": "all_of", "count": 2}, "takes 'type' and 'n'"),
    ],
)
def test_verdict_rule_errors(spec: dict[str, Any], fragment: str) -> None:
    with pytest.raises(PrimitiveSpecError) as caught:
        VerdictRule.from_spec(spec, where="questions[2].template.strategy")
    assert str(caught.value).startswith("questions[2].template.strategy: ") and fragment in str(caught.value)


@pytest.mark.parametrize(
    ("template", "where", "fragment"),
    [
        ({"fields": [{"name": "x", "ground_truth": 1, "verify_with": {"type": "NumericExat"}}]},
         "q.fields[0].verify_with", "did you mean 'NumericExact'"),
        ({"fields": [{"name": "x", "ground_truth": "many", "verify_with": {"type": "NumericExact"}}]},
         "q.fields[0].ground_truth", "expected a number"),
        ({"fields": [{"name": "x", "ground_truth": 1, "weight": -1, "verify_with": {"type": "NumericExact"}}]},
         "q.fields[0].weight", "weight must be a finite number >= 0"),
        ({"fields": [{"ground_truth": 1, "verify_with": {"type": "NumericExact"}}]},
         "q.fields[0].name", "non-empty string 'name'"),
        ({"fields": [{"name": "x"}]}, "q.fields[0]", "has no 'verify_with'"),
        ({"fields": [{"name": "x", "ground_truth": 1, "verify_with": {"type": "NumericExact"}}] * 2},
         "q.fields[1].name", "duplicate field name 'x'"),
        ({"fields": [{"name": "x", "ground_truth": 1, "verify_with": {"type": "NumericExact"}}],
          "strategy": {"type": "at_least_n", "n": 2}}, "q.strategy", "could never pass"),
        ({}, "q", "a template needs a list 'fields'"),
    ],
)
def test_template_load_errors(template: dict[str, Any], where: str, fragment: str) -> None:
    with pytest.raises(PrimitiveSpecError) as caught:
        TemplateSpec.from_dict(template, where="q")
    assert caught.value.where == where and fragment in caught.value.reason


def test_field_spec_accepts_a_primitive_instance() -> None:
    spec = FieldSpec.from_dict({"name": "x", "ground_truth": "a", "verify_with": ExactMatch()})
    assert not spec.trace and spec.weight == 1.0


# --- the embedder port ---------------------------------------------------------------------------

def test_char_ngram_embedder_is_deterministic_and_bounded() -> None:
    embedder = CharNgramEmbedder()
    assert embedder.similarity("BCL2  inhibitor", "bcl2 inhibitor") == 1.0
    assert embedder.similarity("", "") == 1.0 and embedder.similarity("a", "") == 0.0
    close = embedder.similarity("Targets the BCL2 anti-apoptotic protein", "Targets BCL2, an anti-apoptotic protein")
    far = embedder.similarity("Targets the BCL2 anti-apoptotic protein", "Approved in 2016 for CLL")
    assert 0.0 <= far < close < 1.0
    assert close == CharNgramEmbedder().similarity("Targets the BCL2 anti-apoptotic protein",
                                                   "Targets BCL2, an anti-apoptotic protein")
    with pytest.raises(ValueError):
        CharNgramEmbedder(0)


class CountingVectors(VectorEmbedder):
    """A model-backed embedder stand-in: bag of vowels, counting calls to embed()."""

    name = "vowels"

    def __init__(self) -> None:
        super().__init__(cache_size=2)
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> list[Sequence[float]]:
        self.calls += 1
        return [[text.count(v) for v in "aeiou"] for text in texts]


def test_vector_embedder_base_caches_and_clamps() -> None:
    embedder = CountingVectors()
    assert embedder.similarity("banana", "banana") == pytest.approx(1.0)
    assert embedder.calls == 1  # both texts in one batch, the duplicate embedded once
    embedder.similarity("banana", "banana")
    assert embedder.calls == 1  # served from the cache
    assert embedder.similarity("xyz", "banana") == 0.0  # zero vector
    assert cosine([1.0, 0.0], [-1.0, 0.0]) == 0.0  # negative cosine counts as unrelated
