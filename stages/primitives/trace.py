"""Trace primitives, which read the raw response: TraceRegex, TraceContains, TraceLength.

A trace field passes when `check_trace(raw_response) == bool(ground_truth)`, so a ground truth
of false tests for absence.
"""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, Literal

import regex
from pydantic import Field, field_validator, model_validator

from evalledger.stages.primitives.base import TracePrimitive
from evalledger.stages.primitives.normalizers import StrictStr
from evalledger.stages.primitives.patterns import compile_benchmark_pattern, count_at_least, search
from evalledger.stages.primitives.text import compile_pattern

PositiveInt = Annotated[int, Field(strict=True, ge=1)]
NonNegativeInt = Annotated[int, Field(strict=True, ge=0)]


def _text(raw: object) -> str:
    """The raw response as text (a missing response is empty)."""
    return raw if isinstance(raw, str) else "" if raw is None else str(raw)


class TraceRegex(TracePrimitive):
    """True when `pattern` is found in the raw response, or found at least `count_min` times
    (non-overlapping matches) when that is given. Runs with a time limit: a pattern that runs
    out of time raises PatternTimeout (a CheckError), which fails the field whatever its ground
    truth."""

    pattern: StrictStr
    count_min: PositiveInt | None = None

    @model_validator(mode="after")
    def _valid_pattern(self) -> TraceRegex:
        """A bad pattern is a load-time error."""
        compile_pattern(self.pattern)
        return self

    @cached_property
    def _regex(self) -> regex.Pattern:
        """The compiled pattern (regex module, for its time limit)."""
        return compile_benchmark_pattern(self.pattern)

    def check_trace(self, raw: str) -> bool:
        text = _text(raw)
        if self.count_min is None:
            return search(self._regex, text)
        return count_at_least(self._regex, text, self.count_min)


class TraceContains(TracePrimitive):
    """True when `substring` appears in the raw response (case-sensitive)."""

    substring: StrictStr

    @field_validator("substring", mode="after")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        """The empty string is in every response, so it would test nothing."""
        if not value:
            raise ValueError("must not be empty (it is in every response)")
        return value

    def check_trace(self, raw: str) -> bool:
        return self.substring in _text(raw)


class TraceLength(TracePrimitive):
    """True when the raw response's length lies within [min, max], in characters or in
    whitespace-separated words (either bound may be omitted, not both)."""

    min: NonNegativeInt | None = None
    max: NonNegativeInt | None = None
    unit: Literal["chars", "words"] = "chars"

    @model_validator(mode="after")
    def _bounds(self) -> TraceLength:
        """A length check needs a bound, and min must not exceed max."""
        if self.min is None and self.max is None:
            raise ValueError("needs min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max})")
        return self

    def length(self, raw: str) -> int:
        """The response's length in this primitive's unit."""
        text = _text(raw)
        return len(text.split()) if self.unit == "words" else len(text)

    def check_trace(self, raw: str) -> bool:
        size = self.length(raw)
        if self.min is not None and size < self.min:
            return False
        return self.max is None or size <= self.max
