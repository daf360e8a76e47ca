"""Numeric primitives: NumericExact, NumericTolerance, NumericRange."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from evalledger.stages.primitives.base import CheckError, ParsedPrimitive
from evalledger.stages.primitives.coerce import as_number

Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(strict=True, ge=0.0, allow_inf_nan=False)]

# Slack for float rounding at a tolerance boundary, in units in the last place (ulps) of the
# operands and the bound. Decimal inputs such as 0.77, 0.72 and 0.05 are stored with an error
# of half an ulp each, so |0.77 - 0.72| computes to 0.05000000000000004 > 0.05. A few ulps
# absorb exactly that representation error and nothing a person would call a difference.
FLOAT_SLACK_ULPS = 4


def _require_number(expected: Any, primitive: str) -> None:
    """Load-time check that a ground truth is a number."""
    try:
        as_number(expected)
    except CheckError as error:
        raise ValueError(f"{primitive} ground_truth: {error}") from None


class NumericExact(ParsedPrimitive):
    """Pass when the two numbers are equal (ints compare exactly, numeric strings are parsed)."""

    def _compare(self, extracted: Any, expected: Any, embedder: Any) -> bool:
        return as_number(extracted) == as_number(expected)

    def check_expected(self, expected: Any) -> None:
        _require_number(expected, "NumericExact")


class NumericTolerance(ParsedPrimitive):
    """Pass when extracted is within `tolerance` of expected, boundary included.

    mode "absolute": |extracted - expected| <= tolerance.
    mode "relative" (default): |extracted - expected| <= tolerance * |expected|; when expected
    is 0 only an exact match passes. A boundary case that float rounding pushes a hair over
    (|0.77 - 0.72| vs 0.05) passes; see FLOAT_SLACK_ULPS.
    """

    tolerance: NonNegative
    mode: Literal["relative", "absolute"] = "relative"

    def _compare(self, extracted: Any, expected: Any, embedder: Any) -> bool:
        got, want = as_number(extracted), as_number(expected)
        try:
            return self._within(got, want)
        except OverflowError:
            raise CheckError(f"{extracted!r} or {expected!r} is too large to compare") from None

    def _within(self, got: int | float, want: int | float) -> bool:
        """The tolerance rule on two numbers."""
        diff = abs(got - want)
        bound = self.tolerance if self.mode == "absolute" else self.tolerance * abs(want)
        if diff <= bound:
            return True
        if want == 0 and self.mode == "relative":
            return False
        slack = FLOAT_SLACK_ULPS * (math.ulp(max(abs(got), abs(want))) + math.ulp(bound))
        return diff <= bound + slack

    def _mismatch(self, extracted: Any, expected: Any) -> str:
        unit = "" if self.mode == "absolute" else " (relative)"
        return f"{extracted!r} is not within {self.tolerance}{unit} of {expected!r}"

    def check_expected(self, expected: Any) -> None:
        _require_number(expected, "NumericTolerance")


class NumericRange(ParsedPrimitive):
    """Pass when min <= extracted <= max (either bound may be omitted; with neither, every
    number passes and loading warns; ignores ground truth)."""

    min: Number | None = None
    max: Number | None = None

    @model_validator(mode="after")
    def _bounds(self) -> NumericRange:
        """min must not exceed max."""
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max})")
        return self

    def load_warnings(self) -> list[str]:
        """A range without bounds passes every number."""
        if self.min is None and self.max is None:
            return ["NumericRange has neither min nor max: every number passes"]
        return []

    def _compare(self, extracted: Any, expected: Any, embedder: Any) -> bool:
        value = as_number(extracted)
        if self.min is not None and value < self.min:
            return False
        return self.max is None or value <= self.max

    def _mismatch(self, extracted: Any, expected: Any) -> str:
        low = "-inf" if self.min is None else self.min
        high = "+inf" if self.max is None else self.max
        return f"{extracted!r} is outside [{low}, {high}]"
