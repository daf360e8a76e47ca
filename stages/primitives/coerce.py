"""Coercion of judge-extracted values into the kinds the primitives compare.

Extracted values come from an LLM and may be of any JSON type. Each helper returns the value
in the wanted kind or raises CheckError with a reason, so a check fails instead of crashing.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from evalledger.stages.primitives.base import CheckError

# The spellings pydantic's lax bool parsing accepts, so a ground truth written as "false"
# means False rather than "a non-empty string, hence True".
_TRUE_WORDS = frozenset({"true", "t", "yes", "y", "on", "1"})
_FALSE_WORDS = frozenset({"false", "f", "no", "n", "off", "0"})


def as_text(value: Any) -> str:
    """A string, or a number written as text; anything else cannot be compared as text."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        return str(value)
    raise CheckError(f"expected text, got {_kind(value)} {value!r}")


def as_bool(value: Any) -> bool:
    """True/False from a bool, 0/1, or a word like "yes"/"false"; otherwise a CheckError."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE_WORDS:
            return True
        if word in _FALSE_WORDS:
            return False
    raise CheckError(f"expected a boolean, got {_kind(value)} {value!r}")


def as_number(value: Any) -> int | float:
    """An int or float (numeric strings are parsed); booleans are not numbers here.

    Ints stay ints so that comparisons between large integers are exact.
    """
    if isinstance(value, bool):
        raise CheckError(f"expected a number, got the boolean {value!r}")
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            return float(text)
        except ValueError:
            raise CheckError(f"expected a number, got the text {value!r}") from None
    raise CheckError(f"expected a number, got {_kind(value)} {value!r}")


def as_list(value: Any) -> list[Any]:
    """A list from a list, tuple or set. A bare string is refused: it is one answer, not a list
    of characters."""
    if isinstance(value, (str, bytes)):
        raise CheckError(f"expected a list, got the string {value!r}")
    if isinstance(value, (list, tuple, set, frozenset)):
        return list(value)
    if isinstance(value, Iterable) and not isinstance(value, dict):
        return list(value)
    raise CheckError(f"expected a list, got {_kind(value)} {value!r}")


def _kind(value: Any) -> str:
    """A short noun for the JSON kind of `value`, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, (list, tuple, set, frozenset)):
        return "a list"
    return f"a {type(value).__name__}"
