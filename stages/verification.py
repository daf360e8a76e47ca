"""Field verification: run each template field's primitive and decide the case verdict.

Per field the result is tri-state:
- True / False: the primitive's verdict on the extracted value against the ground truth;
- None: the extraction is null (or absent), which means "not verifiable", not "wrong".
A trace field is always verifiable: it reads the raw response, and passes when
`check_trace(raw) == bool(ground_truth)`.

The case verdict follows a rule over the fields that count (weight > 0; a weight-0 field is
recorded but never decides):
- `all_of` (default): every counted field passed (True). A None counts as not passed.
- `any_of`: at least one counted field passed.
- `at_least_n`: the weights of the passed fields sum to at least `n` (with the default weight
  1 that is "at least n fields passed").
With no counted field the case fails: there is nothing that shows it right. `score` is the
weighted share of counted fields that passed, in [0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from evalledger.stages.primitives import Primitive, PrimitiveSpecError, from_spec
from evalledger.stages.primitives.base import CheckError, ParsedPrimitive, TracePrimitive

STRATEGIES = ("all_of", "any_of", "at_least_n")
Strategy = Literal["all_of", "any_of", "at_least_n"]


@dataclass(frozen=True)
class FieldSpec:
    """One verified field: its name, primitive, ground truth and weight."""

    name: str
    primitive: Primitive
    ground_truth: Any = None
    weight: float = 1.0

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any], *, where: str = "") -> FieldSpec:
        """Load `{"name", "verify_with", "ground_truth", "weight"?}` (other keys are ignored).

        Raises PrimitiveSpecError naming `where` plus the key at fault, and checks at load
        time that the primitive can use the ground truth.
        """
        if not isinstance(spec, Mapping):
            raise PrimitiveSpecError(f"a field is an object, got {spec!r}", where=where)
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            raise PrimitiveSpecError("a field needs a non-empty string 'name'", where=_join(where, "name"))
        if "verify_with" not in spec:
            raise PrimitiveSpecError(f"field {name!r} has no 'verify_with'", where=where)
        primitive = from_spec(spec["verify_with"], where=_join(where, "verify_with"))
        ground_truth = spec.get("ground_truth")
        try:
            primitive.check_expected(ground_truth)
        except ValueError as error:
            raise PrimitiveSpecError(str(error), where=_join(where, "ground_truth")) from None
        weight = _weight(spec.get("weight", 1.0), _join(where, "weight"))
        return cls(name, primitive, ground_truth, weight)

    @property
    def trace(self) -> bool:
        """True when the field reads the raw response instead of an extracted value."""
        return bool(self.primitive.trace)


@dataclass(frozen=True)
class FieldResult:
    """The outcome for one field, ready to become a `field.verified` event."""

    field: str
    primitive: dict[str, Any]  # the full spec, defaults spelled out, so the audit shows what decided
    extracted: Any
    expected: Any
    passed: bool | None
    weight: float = 1.0
    reason: str | None = None  # why it failed or was not verifiable; None when it passed

    def as_dict(self) -> dict[str, Any]:
        """The payload keys of `field.verified` (without case_id) plus weight and reason."""
        return {"field": self.field, "primitive": self.primitive, "extracted": self.extracted,
                "expected": self.expected, "passed": self.passed, "weight": self.weight,
                "reason": self.reason}


@dataclass(frozen=True)
class VerdictRule:
    """How field results combine into the case verdict (see the module docstring)."""

    strategy: Strategy = "all_of"
    n: float | None = None

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r}; use {', '.join(STRATEGIES)}")
        if self.strategy == "at_least_n":
            if isinstance(self.n, bool) or not isinstance(self.n, (int, float)) \
                    or not math.isfinite(self.n) or self.n <= 0:
                raise ValueError(f"at_least_n needs n, a positive number, got {self.n!r}")
        elif self.n is not None:
            raise ValueError(f"n is only used with at_least_n, not {self.strategy}")

    @classmethod
    def from_spec(cls, spec: Any, *, where: str = "") -> VerdictRule:
        """Load `"all_of"`, `{"type": "any_of"}` or `{"type": "at_least_n", "n": 2}`."""
        if spec is None:
            return cls()
        if isinstance(spec, str):
            spec = {"type": spec}
        if not isinstance(spec, Mapping):
            raise PrimitiveSpecError(f'a strategy is like {{"type": "all_of"}}, got {spec!r}', where=where)
        unknown = sorted(set(spec) - {"type", "n"})
        if unknown:
            raise PrimitiveSpecError(f"a strategy takes 'type' and 'n', not {unknown}", where=where)
        try:
            return cls(spec.get("type", "all_of"), spec.get("n"))
        except ValueError as error:
            raise PrimitiveSpecError(str(error), where=where) from None

    def to_spec(self) -> dict[str, Any]:
        """The JSON shape this rule was loaded from."""
        return {"type": self.strategy} if self.n is None else {"type": self.strategy, "n": self.n}


@dataclass(frozen=True)
class CaseVerdict:
    """The case verdict and what it rests on."""

    passed: bool
    rule: VerdictRule
    score: float
    passed_fields: tuple[str, ...] = ()
    failed_fields: tuple[str, ...] = ()
    unverifiable_fields: tuple[str, ...] = ()
    reasons: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class TemplateSpec:
    """A template's verified fields and its verdict rule, loaded and checked once."""

    fields: tuple[FieldSpec, ...]
    rule: VerdictRule = VerdictRule()

    @classmethod
    def from_dict(cls, template: Mapping[str, Any], *, where: str = "template") -> TemplateSpec:
        """Load `{"fields": [...], "strategy"?: ...}`; names must be unique and an at_least_n
        rule must be reachable with the fields' weights."""
        raw_fields = template.get("fields") if isinstance(template, Mapping) else None
        if not isinstance(raw_fields, list):
            raise PrimitiveSpecError("a template needs a list 'fields'", where=where)
        fields = tuple(FieldSpec.from_dict(f, where=f"{where}.fields[{i}]")
                       for i, f in enumerate(raw_fields))
        seen: set[str] = set()
        for i, spec in enumerate(fields):
            if spec.name in seen:
                raise PrimitiveSpecError(f"duplicate field name {spec.name!r}",
                                         where=f"{where}.fields[{i}].name")
            seen.add(spec.name)
        rule = VerdictRule.from_spec(template.get("strategy"), where=f"{where}.strategy")
        total = math.fsum(spec.weight for spec in fields)
        if rule.n is not None and rule.n > total:
            raise PrimitiveSpecError(f"at_least_n needs n <= the total field weight ({total}), "
                                     f"got {rule.n}; the case could never pass", where=f"{where}.strategy")
        return cls(fields, rule)

    def verify(self, extracted: Mapping[str, Any], raw_response: str | None, *,
               embedder: Any = None) -> tuple[tuple[FieldResult, ...], CaseVerdict]:
        """Verify every field and decide the case."""
        results = verify_fields(self.fields, extracted, raw_response, embedder=embedder)
        return results, decide(results, self.rule)


def verify_field(spec: FieldSpec, extracted: Any, raw_response: str | None, *,
                 embedder: Any = None) -> FieldResult:
    """The result for one field given its extracted value and the raw response."""
    primitive_spec = spec.primitive.to_spec(with_defaults=True)
    if isinstance(spec.primitive, TracePrimitive):
        try:
            shown = spec.primitive.check_trace(raw_response or "")
        except CheckError as error:  # e.g. a pattern out of time: failed whatever the ground truth
            return FieldResult(spec.name, primitive_spec, None, bool(spec.ground_truth), False, spec.weight,
                               str(error))
        expected = bool(spec.ground_truth)
        passed = shown == expected
        reason = None if passed else (
            f"{spec.primitive.__class__.__name__} on the response gave {shown}, expected {expected}")
        return FieldResult(spec.name, primitive_spec, shown, expected, passed, spec.weight, reason)
    if extracted is None:
        return FieldResult(spec.name, primitive_spec, None, spec.ground_truth, None, spec.weight,
                           "extraction is null: not verifiable")
    assert isinstance(spec.primitive, ParsedPrimitive)
    reason = spec.primitive.explain(extracted, spec.ground_truth, embedder=embedder)
    return FieldResult(spec.name, primitive_spec, extracted, spec.ground_truth, reason is None,
                       spec.weight, reason)


def verify_fields(fields: Sequence[FieldSpec], extracted: Mapping[str, Any],
                  raw_response: str | None, *, embedder: Any = None) -> tuple[FieldResult, ...]:
    """Results for every field, in order; an absent key counts as a null extraction."""
    return tuple(verify_field(spec, extracted.get(spec.name), raw_response, embedder=embedder)
                 for spec in fields)


def decide(results: Sequence[FieldResult], rule: VerdictRule = VerdictRule()) -> CaseVerdict:
    """Combine field results into the case verdict under `rule` (see the module docstring)."""
    counted = [r for r in results if r.weight > 0]
    passed = tuple(r.field for r in counted if r.passed is True)
    failed = tuple(r.field for r in counted if r.passed is False)
    unverifiable = tuple(r.field for r in counted if r.passed is None)
    total = math.fsum(r.weight for r in counted)
    won = math.fsum(r.weight for r in counted if r.passed is True)
    score = won / total if total > 0 else 0.0
    if not counted:
        ok = False
    elif rule.strategy == "all_of":
        ok = len(passed) == len(counted)
    elif rule.strategy == "any_of":
        ok = bool(passed)
    else:
        ok = won >= rule.n  # type: ignore[operator]
    reasons = tuple(_reason_line(r) for r in counted if r.passed is not True)
    if not counted:
        reasons = ("no field with a positive weight to verify",)
    return CaseVerdict(ok, rule, score, passed, failed, unverifiable, reasons)


def _reason_line(result: FieldResult) -> str:
    """'field x failed: ...' or 'field x not verifiable: ...'."""
    state = "not verifiable" if result.passed is None else "failed"
    return f"field {result.field!r} {state}: {result.reason or 'no reason given'}"


def _weight(value: Any, where: str) -> float:
    """A field weight: a finite number >= 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0:
        raise PrimitiveSpecError(f"weight must be a finite number >= 0, got {value!r}", where=where)
    return float(value)


def _join(where: str, key: str) -> str:
    """Append a key to a path: ('q.fields[0]', 'verify_with') -> 'q.fields[0].verify_with'."""
    return f"{where}.{key}" if where else key
