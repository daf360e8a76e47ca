"""Date primitives: DateMatch, DateTolerance, DateRange.

All three are deterministic: a partial date never borrows today's month or day (see
dateparse), values are compared at the precision their texts carry, and a naive and an aware
datetime are compared as wall-clock values instead of raising. When the texts do not carry
enough precision for the comparison asked for, the check fails and says so.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from evalledger.stages.primitives.base import CheckError, ParameterError, ParsedPrimitive
from evalledger.stages.primitives.normalizers import StrictStr
from evalledger.stages.primitives.partial_dates import (
    DAY,
    HOUR,
    LEVEL_NAMES,
    MINUTE,
    PartialDate,
    format_precision,
    on_common_clock,
    parse_partial_date,
    truncate,
)

NonNegativeInt = Annotated[int, Field(strict=True, ge=0)]

_UNIT_PRECISION = {"days": DAY, "hours": HOUR, "minutes": MINUTE}


def _aligned(a: PartialDate, b: PartialDate, precision: int) -> tuple[datetime, datetime]:
    """Both values on a common clock (see on_common_clock), then cut to `precision`."""
    try:
        x, y = on_common_clock(a.value, b.value)
    except OverflowError:
        raise CheckError(f"{a.text!r} or {b.text!r} is out of range after zone conversion") from None
    return truncate(x, precision), truncate(y, precision)


def _require_date(expected: Any, fmt: str | None, primitive: str) -> PartialDate:
    """Load-time check that a ground truth is a date with a year; returns it parsed."""
    try:
        return parse_partial_date(expected, fmt)
    except CheckError as error:
        raise ValueError(f"{primitive} ground_truth: {error}") from None


class DateMatch(ParsedPrimitive):
    """Pass when both values are the same date (time of day is ignored).

    The comparison is made at the expected value's precision, up to the day: a ground truth
    of "2016" accepts any date in 2016. An extracted value less precise than that ("2016"
    against "2016-04-11") fails with a reason. `format` is a strptime format for both values;
    without it python-dateutil reads the text (month-first for 04/11/2016).
    """

    format: StrictStr | None = None

    @field_validator("format", mode="after")
    @classmethod
    def _valid_format(cls, value: str | None) -> str | None:
        """Unknown directives and formats without a year fail at load time."""
        if value is not None:
            format_precision(value)
        return value

    def _compare(self, extracted: Any, expected: Any, embedder: Any) -> bool:
        want = parse_partial_date(expected, self.format)
        got = parse_partial_date(extracted, self.format)
        needed = min(want.precision, DAY)
        if got.precision < needed:
            raise CheckError(
                f"extracted {got.describe()} is less precise than expected "
                f"{want.text!r}, which gives the {LEVEL_NAMES[needed]}"
            )
        left, right = _aligned(got, want, needed)
        return left == right

    def _mismatch(self, extracted: Any, expected: Any) -> str:
        return f"{extracted!r} is not the date {expected!r}"

    def check_expected(self, expected: Any) -> None:
        _require_date(expected, self.format, "DateMatch")


class DateTolerance(ParsedPrimitive):
    """Pass when the two dates are at most `tolerance` `unit`s apart.

    Both values are compared at the finer precision both texts carry, which must reach the
    unit: days need full dates, hours a time with the hour, minutes a time with minutes.
    "2016-04" against a day tolerance fails with a reason rather than guessing a day.
    """

    tolerance: NonNegativeInt
    unit: Literal["days", "hours", "minutes"] = "days"

    def _compare(self, extracted: Any, expected: Any, embedder: Any) -> bool:
        want = parse_partial_date(expected)
        got = parse_partial_date(extracted)
        needed = _UNIT_PRECISION[self.unit]
        for value, role in ((got, "extracted"), (want, "expected")):
            if value.precision < needed:
                raise CheckError(
                    f"{role} {value.describe()} does not give the {LEVEL_NAMES[needed]}, "
                    f"which a tolerance in {self.unit} needs"
                )
        left, right = _aligned(got, want, min(got.precision, want.precision))
        return abs(left - right) <= timedelta(**{self.unit: self.tolerance})

    def _mismatch(self, extracted: Any, expected: Any) -> str:
        return f"{extracted!r} is more than {self.tolerance} {self.unit} from {expected!r}"

    def check_expected(self, expected: Any) -> None:
        parsed = _require_date(expected, None, "DateTolerance")
        needed = _UNIT_PRECISION[self.unit]
        if parsed.precision < needed:
            raise ValueError(
                f"DateTolerance ground_truth {parsed.describe()} does not give the "
                f"{LEVEL_NAMES[needed]}, which a tolerance in {self.unit} needs"
            )


class DateRange(ParsedPrimitive):
    """Pass when the extracted date lies within [min, max], bounds included (ignores ground
    truth). A partial text is the whole period it names: "2015" is within
    ["2015-01-01", "2015-12-31"], but not within ["2015-06-01", "2015-12-31"], since only part
    of 2015 is. Bounds are parsed at load time."""

    min: StrictStr | None = None
    max: StrictStr | None = None

    @model_validator(mode="after")
    def _valid_bounds(self) -> DateRange:
        """Bounds must be dates with a year, at least one given, min not after max."""
        if self.min is None and self.max is None:
            raise ValueError("needs min, max or both")
        low_bound, high_bound = self._bound("min", self.min), self._bound("max", self.max)
        if low_bound is not None and high_bound is not None:
            try:
                low, high = on_common_clock(low_bound.value, high_bound.end())
            except OverflowError:
                raise ValueError(f"min ({self.min!r}) or max ({self.max!r}) is out of range") from None
            if low >= high:
                raise ValueError(f"min ({self.min!r}) is after max ({self.max!r})")
        return self

    @cached_property
    def _low(self) -> PartialDate | None:
        """The parsed lower bound (validated at load time)."""
        return self._bound("min", self.min)

    @cached_property
    def _high(self) -> PartialDate | None:
        """The parsed upper bound (validated at load time)."""
        return self._bound("max", self.max)

    @staticmethod
    def _bound(name: str, text: str | None) -> PartialDate | None:
        """Parse one bound, naming it in the error."""
        if text is None:
            return None
        try:
            return parse_partial_date(text)
        except CheckError as error:
            raise ParameterError(name, str(error)) from None

    def _compare(self, extracted: Any, expected: Any, embedder: Any) -> bool:
        got = parse_partial_date(extracted)
        try:
            if self._low is not None:
                start, low = on_common_clock(got.value, self._low.value)
                if start < low:
                    return False
            if self._high is not None:
                end, high = on_common_clock(got.end(), self._high.end())
                if end > high:
                    return False
        except OverflowError:
            raise CheckError(f"{got.text!r} is out of range after zone conversion") from None
        return True

    def _mismatch(self, extracted: Any, expected: Any) -> str:
        return f"{extracted!r} is not entirely within [{self.min}, {self.max}]"
