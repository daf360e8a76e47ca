"""Karenina rubric traits (schema.org ``Rating``) into native traits.

| ``additionalType`` | native trait |
|---|---|
| ``karenina:GlobalRubricTrait``, ``karenina:QuestionSpecificRubricTrait`` | ``llm`` (score range from worstRating/bestRating) |
| ``karenina:GlobalRegexTrait``, ``karenina:QuestionSpecificRegexTrait`` | ``regex`` (pattern, case_sensitive, invert_result) |
| ``karenina:GlobalMetricRubricTrait``, ``karenina:QuestionSpecificMetricRubricTrait`` | ``metric`` |
| ``karenina:GlobalCallableTrait``, ``karenina:QuestionSpecificCallableTrait`` | rejected: the trait is pickled code |

Per-trait deep judgment settings (``deep_judgment_*`` properties) are kept on LLM traits.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from evalledger.stages.formats.errors import Problem, from_validation_error
from evalledger.stages.formats.native import Trait, regex_trait_problem

_NATIVE_TRAIT = TypeAdapter(Trait)

_DEEP_JUDGMENT_KEYS = ("deep_judgment_enabled", "deep_judgment_excerpt_enabled", "deep_judgment_max_excerpts",
                       "deep_judgment_fuzzy_match_threshold", "deep_judgment_excerpt_retry_attempts",
                       "deep_judgment_search_enabled")
_METRIC_KEYS = ("evaluation_mode", "metrics", "tp_instructions", "tn_instructions")


def properties(values: Any) -> dict[str, Any]:
    """``additionalProperty`` ([{"name", "value"}, ...]) as a dict; malformed entries are skipped."""
    if not isinstance(values, list):
        return {}
    return {p["name"]: p.get("value") for p in values if isinstance(p, dict) and isinstance(p.get("name"), str)}


def read_traits(ratings: Any, where: str) -> tuple[list[dict], list[Problem]]:
    """Native traits of a ``rating`` list, and a Problem for every trait that cannot be kept."""
    if ratings is None:
        return [], []
    if isinstance(ratings, dict):
        ratings = [ratings]
    if not isinstance(ratings, list):
        return [], [Problem(where, "rating must be a list of Rating objects")]
    traits, rejected = [], []
    for index, rating in enumerate(ratings):
        place = f"{where}[{index}]"
        try:
            traits.append(_native(_trait(rating, place)))
        except _TraitRejected as exc:
            rejected.append(Problem(place, exc.reason))
    return traits, rejected


class _TraitRejected(Exception):
    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


def _native(trait: dict) -> dict:
    """Check a translated trait against the native trait model (the same rules as native files)."""
    try:
        _NATIVE_TRAIT.validate_python(trait)
    except ValidationError as exc:
        reasons = "; ".join(str(p) for p in from_validation_error(exc, "trait", trait))
        raise _TraitRejected(f"trait {trait['name']!r} does not translate to a valid native trait: {reasons}") from None
    return trait


def _trait(rating: Any, where: str) -> dict:
    if not isinstance(rating, dict) or not isinstance(rating.get("name"), str) or not rating["name"].strip():
        raise _TraitRejected("a Rating needs a name")
    name = rating["name"].strip()
    kind = str(rating.get("additionalType", "")).removeprefix("karenina:")
    props = properties(rating.get("additionalProperty"))
    description = rating.get("description") if isinstance(rating.get("description"), str) else ""
    if kind.endswith("CallableTrait"):
        raise _TraitRejected(f"trait {name!r} not registered: a callable trait is serialised Python code "
                             "(callable_code), which evalledger never executes")
    if kind.endswith("RegexTrait"):
        return _regex(name, description, props)
    if kind.endswith("MetricRubricTrait"):
        return _metric(name, description, props)
    if kind.endswith("RubricTrait"):
        return _llm(name, description, rating, props)
    raise _TraitRejected(f"trait {name!r} has unknown additionalType {rating.get('additionalType')!r}")


def _llm(name: str, description: str, rating: dict, props: dict) -> dict:
    low, high = _score(rating.get("worstRating"), 1), _score(rating.get("bestRating"), 5)
    if low is None or high is None or low >= high:
        raise _TraitRejected(f"trait {name!r}: worstRating/bestRating must be whole numbers with worst < best")
    # Karenina writes a boolean LLM trait as a 0..1 rating (and may say so in a "kind" property).
    boolean = props.get("kind") == "boolean" or (props.get("kind") is None and (low, high) == (0, 1))
    trait = {"name": name, "kind": "llm", "description": description or name, "min_score": low, "max_score": high,
             "score_kind": "boolean" if boolean else "score",
             "higher_is_better": props.get("higher_is_better", True) is not False}
    for key in _DEEP_JUDGMENT_KEYS:
        if key in props and props[key] is not None:
            trait[key] = props[key]
    return trait


def _score(value: Any, default: int) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        return None
    return int(value)


def _regex(name: str, description: str, props: dict) -> dict:
    pattern = props.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        raise _TraitRejected(f"trait {name!r}: a regex trait needs a pattern property")
    reason = regex_trait_problem(pattern, props.get("case_sensitive", True) is not False)
    if reason:
        raise _TraitRejected(f"trait {name!r}: {reason}")
    return {"name": name, "kind": "regex", "description": description, "pattern": pattern,
            "case_sensitive": props.get("case_sensitive", True) is not False,
            "invert": props.get("invert_result", False) is True,
            "higher_is_better": props.get("higher_is_better", True) is not False}


def _metric(name: str, description: str, props: dict) -> dict:
    trait = {"name": name, "kind": "metric", "description": description}
    for key in _METRIC_KEYS:
        if props.get(key) is not None:
            trait[key] = props[key]
    if not trait.get("metrics") or not trait.get("tp_instructions"):
        raise _TraitRejected(f"trait {name!r}: a metric trait needs metrics and tp_instructions")
    return trait
