"""Deterministic parsing of dates that may be partial ("2016", "March 2016", "2016-04-11 10:30").

python-dateutil fills whatever the text leaves out from a default datetime (today, unless told
otherwise), so "March 2016" would become March <today's day> 2016 and a verdict would change
with the calendar. Here the text is parsed twice with two defaults that differ in every
component; a component is present in the text exactly when both parses agree on it. The result
records the precision the text carries (year, month, day, hour, minute or second) and nothing
is borrowed from the clock. Two-digit years use a fixed pivot (00-68 -> 2000s, 69-99 -> 1900s,
as POSIX strptime does) instead of dateutil's "within 50 years of now".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone, tzinfo
from typing import Any

from dateutil import parser as dateutil_parser

from evalledger.stages.primitives.base import CheckError

YEAR, MONTH, DAY, HOUR, MINUTE, SECOND = range(6)
LEVEL_NAMES = ("year", "month", "day", "hour", "minute", "second")
_COMPONENTS = ("year", "month", "day", "hour", "minute", "second")

# Two defaults that differ in every component (leap years both, so "Feb 29" parses with either).
_DEFAULT_A = datetime(2000, 1, 1, 0, 0, 0, 0)
_DEFAULT_B = datetime(2004, 2, 2, 1, 1, 1, 1)

# strptime directives and the component each one supplies.
_DIRECTIVE_LEVEL = {
    "Y": YEAR, "y": YEAR, "G": YEAR,
    "m": MONTH, "b": MONTH, "B": MONTH,
    "d": DAY, "j": DAY,
    "H": HOUR, "I": HOUR,
    "M": MINUTE,
    "S": SECOND,
}
_OTHER_DIRECTIVES = set("aAwuUWVpfzZcxX%")
_DIRECTIVE = re.compile(r"%(.?)")


class _FixedCenturyInfo(dateutil_parser.parserinfo):
    """dateutil parser settings whose two-digit years do not depend on today's date."""

    def convertyear(self, year: int, century_specified: bool = False) -> int:
        if year < 100 and not century_specified:
            return year + (2000 if year <= 68 else 1900)
        return year


_PARSER = dateutil_parser.parser(info=_FixedCenturyInfo())


def _tzinfos(name: str | None, offset: int | None) -> tzinfo | None:
    """Resolve a parsed zone without consulting the machine's local zone.

    Numeric offsets and UTC/GMT/Z are honoured; other names ("EST") are ambiguous worldwide
    and are treated as no zone, so the wall-clock time as written is compared.
    """
    if offset is not None:
        return timezone(timedelta(seconds=offset))
    if name is not None and name.upper() in {"UTC", "GMT", "Z", "UT"}:
        return timezone.utc
    return None


@dataclass(frozen=True)
class PartialDate:
    """A date known to a precision: `value` holds the components up to `precision` (later
    ones at their minimum) and denotes the interval [value, end()). A zone is kept when the
    text gave one."""

    text: str
    value: datetime
    precision: int

    def end(self) -> datetime:
        """The first instant after the interval this text denotes ("2016" -> 2017-01-01)."""
        start = self.value
        try:
            if self.precision == YEAR:
                return start.replace(year=start.year + 1)
            if self.precision == MONTH:
                if start.month == 12:
                    return start.replace(year=start.year + 1, month=1)
                return start.replace(month=start.month + 1)
            step = {DAY: timedelta(days=1), HOUR: timedelta(hours=1),
                    MINUTE: timedelta(minutes=1), SECOND: timedelta(seconds=1)}[self.precision]
            return start + step
        except (ValueError, OverflowError):
            return datetime.max.replace(tzinfo=start.tzinfo)

    def describe(self) -> str:
        """"'2016' (precise to the year)", for messages."""
        return f"{self.text!r} (precise to the {LEVEL_NAMES[self.precision]})"


def parse_partial_date(value: Any, fmt: str | None = None) -> PartialDate:
    """Parse a date text (or a date/datetime object) into a PartialDate.

    Raises CheckError with a reason when the value is not a date or has no year.
    """
    if isinstance(value, datetime):
        return PartialDate(value.isoformat(), truncate(value, SECOND), SECOND)
    if isinstance(value, date):
        return PartialDate(value.isoformat(), datetime(value.year, value.month, value.day), DAY)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # a bare year such as 2016
    if not isinstance(value, str):
        raise CheckError(f"expected a date, got {value!r}")
    text = value.strip()
    if not text:
        raise CheckError("expected a date, got an empty string")
    return _parse_with_format(text, fmt) if fmt else _parse_free_text(text)


def _parse_free_text(text: str) -> PartialDate:
    """Parse with dateutil twice (two defaults) and keep only what the text itself says."""
    try:
        first = _PARSER.parse(text, default=_DEFAULT_A, tzinfos=_tzinfos)
        second = _PARSER.parse(text, default=_DEFAULT_B, tzinfos=_tzinfos)
    except (ValueError, ArithmeticError, TypeError) as error:
        # dateutil reads untrusted text; huge digit runs raise decimal/overflow errors.
        raise CheckError(f"{text!r} is not a date ({error})") from None
    precision = -1
    for name in _COMPONENTS:
        if getattr(first, name) != getattr(second, name):
            break
        precision += 1
    if precision < YEAR:
        raise CheckError(f"{text!r} has no year")
    return PartialDate(text, truncate(first, precision), precision)


def _parse_with_format(text: str, fmt: str) -> PartialDate:
    """Parse with strptime; the precision is what the format's directives supply."""
    try:
        parsed = datetime.strptime(text, fmt)
    except (ValueError, OverflowError) as error:
        raise CheckError(f"{text!r} does not match the format {fmt!r} ({error})") from None
    precision = format_precision(fmt)
    return PartialDate(text, truncate(parsed, precision), precision)


def truncate(value: datetime, precision: int) -> datetime:
    """`value` with the components after `precision` at their minimum (month and day 1, time
    0); this drops whatever a parser filled in from its default."""
    keep = [getattr(value, name) if level <= precision else (1 if level < HOUR else 0)
            for level, name in enumerate(_COMPONENTS)]
    return datetime(*keep, tzinfo=value.tzinfo)


def format_precision(fmt: str) -> int:
    """The precision a strptime format yields: the longest run year, month, day, ... that its
    directives supply. Raises ValueError for an unknown directive or a format with no year."""
    levels = set()
    for match in _DIRECTIVE.finditer(fmt):
        directive = match.group(1)
        if directive in _DIRECTIVE_LEVEL:
            levels.add(_DIRECTIVE_LEVEL[directive])
            if directive == "j":
                levels.add(MONTH)  # a day of the year fixes the month too
        elif directive not in _OTHER_DIRECTIVES:
            shown = f"%{directive}" if directive else "a lone % at the end"
            raise ValueError(f"format {fmt!r} has an unknown strptime directive {shown}")
    if YEAR not in levels:
        raise ValueError(f"format {fmt!r} has no year directive (%Y or %y)")
    precision = YEAR
    while precision + 1 in levels:
        precision += 1
    return precision


def on_common_clock(a: datetime, b: datetime) -> tuple[datetime, datetime]:
    """Make two datetimes comparable without crashing on naive vs aware.

    When both carry a zone they are compared as instants (converted to UTC); otherwise the
    wall-clock values as written are compared (zones dropped).
    """
    if a.tzinfo is not None and b.tzinfo is not None:
        return (a.astimezone(timezone.utc).replace(tzinfo=None),
                b.astimezone(timezone.utc).replace(tzinfo=None))
    return a.replace(tzinfo=None), b.replace(tzinfo=None)
