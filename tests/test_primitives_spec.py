"""Primitive specs: JSON round-trip, load-time error messages, and checks that never raise."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from evalledger.stages.primitives import (
    KNOWN_TYPES,
    NumericTolerance,
    ParsedPrimitive,
    PrimitiveSpecError,
    TracePrimitive,
    from_spec,
)

WHERE = "questions[0].template.fields[1].verify_with"

# One canonical spec per primitive (every one of the 18), with parameters where it has any.
SPECS: list[dict[str, Any]] = [
    {"type": "BooleanMatch"},
    {"type": "ExactMatch", "normalize": ["lowercase", "strip",
                                         {"type": "SynonymMap", "mapping": {"bcl-2": "bcl2"}}]},
    {"type": "ContainsAny", "substrings": ["apoptosis", "autophagy"]},
    {"type": "ContainsAll", "substrings": ["phase III", "randomized"], "normalize": ["lowercase"]},
    {"type": "RegexMatch", "pattern": r"NCT\d{8}", "flags": ["IGNORECASE"]},
    {"type": "SemanticMatch", "threshold": 0.8},
    {"type": "NumericExact"},
    {"type": "NumericTolerance", "tolerance": 0.05, "mode": "absolute"},
    {"type": "NumericRange", "min": 0.0, "max": 0.05},
    {"type": "SetContainment", "mode": "overlap", "min_overlap": 2, "normalize": ["strip"]},
    {"type": "OrderedMatch", "normalize": ["lowercase"]},
    {"type": "LiteralMatch"},
    {"type": "DateMatch", "format": "%Y-%m-%d"},
    {"type": "DateTolerance", "tolerance": 30, "unit": "days"},
    {"type": "DateRange", "min": "2015-01-01", "max": "2015-12-31"},
    {"type": "TraceRegex", "pattern": r"\[\d+\]", "count_min": 2},
    {"type": "TraceContains", "substring": "limitation"},
    {"type": "TraceLength", "min": 100, "unit": "words"},
]


def test_there_are_eighteen_known_types_and_every_one_is_covered() -> None:
    assert len(KNOWN_TYPES) == 18 and list(KNOWN_TYPES) == sorted(KNOWN_TYPES)
    assert sorted(spec["type"] for spec in SPECS) == list(KNOWN_TYPES)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s["type"])
def test_spec_round_trip(spec: dict[str, Any]) -> None:
    primitive = from_spec(spec, where=WHERE)
    assert primitive.to_spec() == spec
    full = primitive.to_spec(with_defaults=True)
    assert from_spec(full) == primitive and hash(from_spec(full)) == hash(primitive)
    assert from_spec(primitive) is primitive


def test_to_spec_lists_only_given_parameters_unless_asked() -> None:
    primitive = from_spec({"type": "ExactMatch"})
    assert primitive.to_spec() == {"type": "ExactMatch"}
    assert primitive.to_spec(with_defaults=True) == {"type": "ExactMatch", "normalize": ["lowercase", "strip"]}
    assert from_spec({"type": "ExactMatch", "normalize": ["lowercase", "strip"]}) == primitive


def test_karenina_bare_synonym_map_shape_is_accepted() -> None:
    primitive = from_spec({"type": "ExactMatch", "normalize": [{"mapping": {"a": "b"}}]})
    assert primitive.to_spec()["normalize"] == [{"type": "SynonymMap", "mapping": {"a": "b"}}]


def test_primitives_are_frozen() -> None:
    primitive = NumericTolerance(tolerance=0.05)
    with pytest.raises(ValidationError):
        primitive.tolerance = 0.1  # type: ignore[misc]


# Each kind of bad spec, with fragments its message must contain (besides WHERE).
BAD_SPECS: list[tuple[Any, list[str]]] = [
    ({"type": "NumericTol", "tolerance": 0.05},
     ["unknown primitive type 'NumericTol'", "did you mean 'NumericTolerance'", "known types: BooleanMatch"]),
    ({"tolerance": 0.05}, ["missing 'type'", "known types:"]),
    ({"type": 3}, ["'type' must be a string"]),
    ("ExactMatch", ['a primitive spec is an object like {"type": "ExactMatch"}']),
    ({"type": "NumericTolerance", "tol": 0.05},
     ["NumericTolerance has no parameter 'tol'", "its parameters are: tolerance, mode"]),
    ({"type": "NumericExact", "tolerance": 1}, ["NumericExact has no parameter 'tolerance'", "takes no parameters"]),
    ({"type": "NumericTolerance"}, ["NumericTolerance is missing the required parameter 'tolerance'"]),
    ({"type": "NumericTolerance", "tolerance": "0.05"},
     ["NumericTolerance parameter 'tolerance'", "must be a number", "'0.05'"]),
    ({"type": "NumericTolerance", "tolerance": -1}, ["parameter 'tolerance'", "greater than or equal to 0"]),
    ({"type": "NumericTolerance", "tolerance": 0.05, "mode": "percent"},
     ["NumericTolerance parameter 'mode'", "unknown value 'percent'", "'relative' or 'absolute'"]),
    ({"type": "NumericRange", "min": 5, "max": 1}, ["NumericRange", "min (5.0) is greater than max (1.0)"]),
    ({"type": "RegexMatch", "pattern": "NCT(\\d{8}"},
     ["RegexMatch", "invalid regular expression 'NCT(\\\\d{8}'", "missing )"]),
    ({"type": "TraceRegex", "pattern": "[a-"}, ["TraceRegex", "invalid regular expression"]),
    ({"type": "RegexMatch", "pattern": "x", "flags": ["IGNORCASE"]},
     ["RegexMatch parameter 'flags'", "unknown regex flag 'IGNORCASE'", "IGNORECASE"]),
    ({"type": "ExactMatch", "normalize": ["lowercase", "lower"]},
     ["ExactMatch parameter 'normalize[1]'", "unknown normalizer 'lower'", "'collapse_whitespace'"]),
    ({"type": "ExactMatch", "normalize": "lowercase"},
     ["ExactMatch parameter 'normalize'", "must be a list of normalizers"]),
    ({"type": "ExactMatch", "normalize": [{"type": "SynonymMap", "mapping": {"a": 1}}]},
     ["parameter 'normalize[0]'", "SynonymMap needs 'mapping'"]),
    ({"type": "ExactMatch", "normalize": [{"type": "Stemmer"}]}, ["unknown normalizer type 'Stemmer'"]),
    ({"type": "DateTolerance", "tolerance": 3, "unit": "weeks"},
     ["DateTolerance parameter 'unit'", "unknown value 'weeks'", "'days', 'hours' or 'minutes'"]),
    ({"type": "DateTolerance", "tolerance": 1.5}, ["DateTolerance parameter 'tolerance'", "must be an integer"]),
    ({"type": "DateRange", "min": "2016-01-01", "max": "2015-01-01"}, ["DateRange", "min ('2016-01-01') is after max"]),
    ({"type": "DateRange", "min": "April 11"}, ["DateRange parameter 'min'", "'April 11' has no year"]),
    ({"type": "DateRange", "max": "soon"}, ["DateRange parameter 'max'", "'soon' is not a date"]),
    ({"type": "DateMatch", "format": "%d/%m"}, ["DateMatch parameter 'format'", "has no year directive"]),
    ({"type": "DateMatch", "format": "%Y-%q"}, ["DateMatch parameter 'format'", "unknown strptime directive %q"]),
    ({"type": "SetContainment", "mode": "all"}, ["SetContainment parameter 'mode'", "unknown value 'all'"]),
    ({"type": "ContainsAny", "substrings": []}, ["ContainsAny parameter 'substrings'", "at least one substring"]),
    ({"type": "ContainsAll", "substrings": "abc"}, ["ContainsAll parameter 'substrings'", "must be a list"]),
    ({"type": "ContainsAny"}, ["ContainsAny is missing the required parameter 'substrings'"]),
    ({"type": "TraceContains", "substring": ""}, ["TraceContains parameter 'substring'", "must not be empty"]),
    ({"type": "TraceLength", "min": 10, "max": 5}, ["TraceLength", "min (10) is greater than max (5)"]),
    ({"type": "TraceLength", "min": 1, "unit": "tokens"}, ["TraceLength parameter 'unit'", "'chars' or 'words'"]),
    ({"type": "TraceRegex", "pattern": "a", "count_min": 0}, ["TraceRegex parameter 'count_min'"]),
    ({"type": "SemanticMatch", "threshold": 1.5}, ["SemanticMatch parameter 'threshold'", "less than or equal to 1"]),
    ({"type": "SemanticMatch", "threshold": True}, ["SemanticMatch parameter 'threshold'", "must be a number"]),
]


@pytest.mark.parametrize(("spec", "fragments"), BAD_SPECS, ids=[str(s)[:60] for s, _ in BAD_SPECS])
def test_load_time_errors_name_where_and_why(spec: Any, fragments: list[str]) -> None:
    with pytest.raises(PrimitiveSpecError) as caught:
        from_spec(spec, where=WHERE)
    error = caught.value
    assert isinstance(error, ValueError)
    assert error.where == WHERE and str(error).startswith(f"{WHERE}: ")
    for fragment in fragments:
        assert fragment in error.reason, f"{fragment!r} not in {error.reason!r}"


def test_error_without_where_is_just_the_reason() -> None:
    with pytest.raises(PrimitiveSpecError) as caught:
        from_spec({"type": "Nope"})
    assert str(caught.value).startswith("unknown primitive type 'Nope'")


def test_several_problems_are_reported_together() -> None:
    with pytest.raises(PrimitiveSpecError) as caught:
        from_spec({"type": "NumericTolerance", "tolerance": "x", "mode": "y"}, where=WHERE)
    assert "parameter 'tolerance'" in caught.value.reason and "parameter 'mode'" in caught.value.reason


@pytest.mark.parametrize(
    ("spec", "ground_truth", "fragment"),
    [
        ({"type": "NumericExact"}, "twenty", "expected a number"),
        ({"type": "SetContainment"}, "CLL", "expected a list"),
        ({"type": "DateMatch"}, "someday", "is not a date"),
        ({"type": "DateTolerance", "tolerance": 1, "unit": "hours"}, "2016-04-11", "does not give the hour"),
        ({"type": "TraceContains", "substring": "x"}, "yes", "ground_truth true or false"),
        ({"type": "ExactMatch"}, ["a"], "compares text"),
        ({"type": "BooleanMatch"}, "maybe", "expected a boolean"),
    ],
)
def test_check_expected_rejects_unusable_ground_truth(spec: dict[str, Any], ground_truth: Any, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        from_spec(spec).check_expected(ground_truth)


def test_check_expected_accepts_placeholders_for_primitives_that_ignore_ground_truth() -> None:
    for spec in SPECS:
        if spec["type"] in {"ContainsAny", "ContainsAll", "RegexMatch", "NumericRange", "DateRange"}:
            from_spec(spec).check_expected("N/A")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=300, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(extracted=JSON, expected=JSON)
def test_checks_never_raise_on_odd_values(extracted: Any, expected: Any) -> None:
    for spec in SPECS:
        primitive = from_spec(spec)
        if isinstance(primitive, TracePrimitive):
            assert isinstance(primitive.check_trace(str(extracted)), bool)
            continue
        assert isinstance(primitive, ParsedPrimitive)
        assert isinstance(primitive.check(extracted, expected), bool)
        reason = primitive.explain(extracted, expected)
        assert reason is None or isinstance(reason, str)


@pytest.mark.parametrize("spec, warning", [
    ({"type": "NumericRange"}, "NumericRange has neither min nor max"),
    ({"type": "TraceLength", "unit": "words"}, "TraceLength has neither min nor max"),
    ({"type": "SetContainment", "mode": "subset", "min_overlap": 2},
     "min_overlap is only used with mode 'overlap'; ignored with mode 'subset'"),
])
def test_allowed_but_doubtful_specs_load_with_a_warning(spec, warning):
    primitive = from_spec(spec)
    assert [w for w in primitive.load_warnings() if warning in w]
    assert from_spec({"type": "NumericRange", "min": 1}).load_warnings() == []


def test_unbounded_range_and_length_pass_everything_and_ignored_min_overlap_changes_nothing():
    assert all(from_spec({"type": "NumericRange"}).check(v, None) for v in (-1e300, 0, 7.5, 1e300))
    assert from_spec({"type": "TraceLength"}).check_trace("") and from_spec({"type": "TraceLength"}).check_trace("x" * 10_000)
    ignored = from_spec({"type": "SetContainment", "mode": "subset", "min_overlap": 5})
    plain = from_spec({"type": "SetContainment", "mode": "subset"})
    for got, want in ((["a"], ["a", "b"]), (["a", "c"], ["a", "b"]), ([], ["a"])):
        assert ignored.check(got, want) == plain.check(got, want)
