"""The two validations other parts own: primitive specs and benchmark ``config`` keys.

Primitive specs go through ``stages.primitives.from_spec`` (the primitives issue); benchmark
``config`` goes through ``stages.config.VerificationConfig`` (the configuration issue). While
either is missing, a conservative fallback runs here, so switching over is this file only.
"""

from __future__ import annotations

from typing import Any

from evalledger.stages.formats.errors import Problem, join_path
from evalledger.stages.interrupts import reraise_interrupt

# The 18 primitives of spec/verification-primitives.md, for the fallback only.
FALLBACK_PRIMITIVES = frozenset({
    "BooleanMatch", "ContainsAll", "ContainsAny", "DateMatch", "DateRange", "DateTolerance",
    "ExactMatch", "LiteralMatch", "NumericExact", "NumericRange", "NumericTolerance", "OrderedMatch",
    "RegexMatch", "SemanticMatch", "SetContainment", "TraceContains", "TraceLength", "TraceRegex",
})
TRACE_PRIMITIVES = frozenset({"TraceContains", "TraceLength", "TraceRegex"})

# The VerificationConfig fields named by spec/deep-judgment-templates.md and deep-judgment-rubrics.md,
# with the JSON type each takes, for the fallback only.
FALLBACK_CONFIG_FIELDS: dict[str, tuple[type, ...]] = {
    "deep_judgment_enabled": (bool,),
    "deep_judgment_max_excerpts_per_attribute": (int,),
    "deep_judgment_fuzzy_match_threshold": (int, float),
    "deep_judgment_excerpt_retry_attempts": (int,),
    "deep_judgment_search_enabled": (bool,),
    "deep_judgment_search_tool": (str,),
    "deep_judgment_rubric_mode": (str,),
    "deep_judgment_rubric_global_excerpts": (bool,),
    "deep_judgment_rubric_max_excerpts_default": (int,),
    "deep_judgment_rubric_fuzzy_match_threshold_default": (int, float),
    "deep_judgment_rubric_excerpt_retry_attempts_default": (int,),
    "deep_judgment_rubric_search_enabled": (bool,),
    "deep_judgment_rubric_search_tool": (str,),
    "deep_judgment_rubric_config": (dict, type(None)),
}


def check_primitive(spec: Any, where: str) -> tuple[Any, list[Problem]]:
    """Load a ``verify_with`` spec: (primitive or None, problems). Never raises on bad input."""
    try:
        from evalledger.stages.primitives import PrimitiveSpecError, from_spec
    except ImportError:
        return None, _fallback_primitive(spec, where)
    try:
        return from_spec(spec, where=where), []
    except PrimitiveSpecError as exc:
        return None, [Problem(exc.where or where, exc.reason)]
    except Exception as exc:  # noqa: BLE001 - a loader failing on odd input is still bad input
        reraise_interrupt(exc)
        return None, [Problem(where, f"cannot load this primitive: {type(exc).__name__}: {exc}")]


def _fallback_primitive(spec: Any, where: str) -> list[Problem]:
    if not isinstance(spec, dict):
        return [Problem(where, "a primitive spec is an object like {\"type\": \"ExactMatch\"}")]
    kind = spec.get("type")
    if kind not in FALLBACK_PRIMITIVES:
        return [Problem(join_path(where, ["type"]),
                        f"unknown primitive {kind!r}; known: {', '.join(sorted(FALLBACK_PRIMITIVES))}")]
    return []


def is_trace(spec: Any) -> bool:
    """True when a spec names a trace primitive (reads the raw response, field must be bool)."""
    return isinstance(spec, dict) and spec.get("type") in TRACE_PRIMITIVES


def check_expected(primitive: Any, ground_truth: Any, where: str) -> list[Problem]:
    """Ask the loaded primitive whether it can use this ground truth."""
    checker = getattr(primitive, "check_expected", None)
    if checker is None:
        return []
    try:
        checker(ground_truth)
    except Exception as exc:  # noqa: BLE001 - the primitive refuses this ground truth
        reraise_interrupt(exc)
        return [Problem(where, str(exc) or type(exc).__name__)]
    return []


def check_loadable(template: dict, where: str) -> list[Problem]:
    """Load the template with the template stage's own loader (strategy, weights, fields), so
    intake accepts exactly what the stage can judge."""
    try:
        from evalledger.stages.verification import TemplateSpec
    except ImportError:
        return []
    from evalledger.stages.primitives import PrimitiveSpecError
    try:
        TemplateSpec.from_dict(template, where=where)
    except PrimitiveSpecError as exc:
        return [Problem(exc.where or where, exc.reason)]
    except Exception as exc:  # noqa: BLE001 - the stage could not load it: neither can we accept it
        reraise_interrupt(exc)
        return [Problem(where, f"the template stage cannot load this template: {type(exc).__name__}: {exc}")]
    return []


def check_config(config: Any, where: str = "$.config") -> list[Problem]:
    """Validate a benchmark's ``config`` against VerificationConfig (missing fields are fine)."""
    if not isinstance(config, dict):
        return [Problem(where, "config is an object of VerificationConfig fields")]
    try:
        from evalledger.stages.config import benchmark_config_errors
    except ImportError:
        return _fallback_config(config, where)
    return [Problem(e["where"], e["reason"]) for e in benchmark_config_errors(config, where)]


def _fallback_config(config: dict, where: str) -> list[Problem]:
    problems = []
    for key, value in config.items():
        kinds = FALLBACK_CONFIG_FIELDS.get(key)
        if kinds is None:
            problems.append(Problem(join_path(where, [key]),
                                    f"unknown VerificationConfig field; known: {', '.join(FALLBACK_CONFIG_FIELDS)}"))
        elif isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            names = " or ".join(k.__name__.replace("NoneType", "null") for k in kinds)
            problems.append(Problem(join_path(where, [key]), f"expected {names}, got {value!r}"))
    return problems
