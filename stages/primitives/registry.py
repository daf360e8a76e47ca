"""Building primitives from their JSON specs, with load-time errors people can act on.

`from_spec({"type": "NumericTolerance", "tolerance": 0.05, "mode": "absolute"}, where=...)`
returns the primitive or raises PrimitiveSpecError naming `where` and the reason: unknown
type (listing the known ones), unknown parameter (listing the valid ones), wrong parameter
type, bad regex, unknown mode or unit, min > max, and so on.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import ValidationError

from evalledger.stages.primitives.base import Primitive, PrimitiveSpecError
from evalledger.stages.primitives.dates import DateMatch, DateRange, DateTolerance
from evalledger.stages.primitives.lists import OrderedMatch, SetContainment
from evalledger.stages.primitives.numeric import NumericExact, NumericRange, NumericTolerance
from evalledger.stages.primitives.text import (
    BooleanMatch,
    ContainsAll,
    ContainsAny,
    ExactMatch,
    LiteralMatch,
    RegexMatch,
    SemanticMatch,
)
from evalledger.stages.primitives.trace import TraceContains, TraceLength, TraceRegex

_CLASSES: tuple[type[Primitive], ...] = (
    BooleanMatch, ExactMatch, ContainsAny, ContainsAll, RegexMatch, SemanticMatch,
    NumericExact, NumericTolerance, NumericRange, SetContainment, OrderedMatch, LiteralMatch,
    DateMatch, DateTolerance, DateRange, TraceRegex, TraceContains, TraceLength,
)
REGISTRY: dict[str, type[Primitive]] = {cls.__name__: cls for cls in _CLASSES}
KNOWN_TYPES: tuple[str, ...] = tuple(sorted(REGISTRY))


def from_spec(spec: Any, *, where: str = "") -> Primitive:
    """Build a primitive from `{"type": "<ClassName>", ...parameters}`.

    `where` is the spec's path in its file; every PrimitiveSpecError message starts with it.
    A primitive instance is returned unchanged.
    """
    if isinstance(spec, Primitive):
        return spec
    if not isinstance(spec, dict):
        raise PrimitiveSpecError(
            f'a primitive spec is an object like {{"type": "ExactMatch"}}, got {spec!r}', where=where
        )
    cls = _class_for(spec.get("type"), where)
    params = {key: value for key, value in spec.items() if key != "type"}
    _reject_unknown_parameters(cls, params, where)
    try:
        return cls(**params)
    except ValidationError as error:
        reasons = [_describe(cls.__name__, detail) for detail in error.errors()]
        raise PrimitiveSpecError("; ".join(dict.fromkeys(reasons)), where=where) from None


def is_trace(primitive: Primitive | type[Primitive] | str) -> bool:
    """True for trace primitives (instance, class or type name), which read the raw response."""
    if isinstance(primitive, str):
        return REGISTRY[primitive].trace
    return bool(primitive.trace)


def _class_for(name: Any, where: str) -> type[Primitive]:
    """The primitive class called `name`, or a PrimitiveSpecError listing the known ones."""
    known = ", ".join(KNOWN_TYPES)
    if name is None:
        raise PrimitiveSpecError(f"missing 'type'; known types: {known}", where=where)
    if not isinstance(name, str):
        raise PrimitiveSpecError(f"'type' must be a string, got {name!r}; known types: {known}",
                                 where=where)
    if name not in REGISTRY:
        raise PrimitiveSpecError(
            f"unknown primitive type {name!r}{_did_you_mean(name, KNOWN_TYPES)}; known types: {known}",
            where=where,
        )
    return REGISTRY[name]


def _reject_unknown_parameters(cls: type[Primitive], params: dict[str, Any], where: str) -> None:
    """Name any parameter the primitive does not have, and list the ones it does."""
    valid = list(cls.model_fields)
    unknown = [key for key in params if key not in cls.model_fields]
    if not unknown:
        return
    listed = ", ".join(valid) if valid else "none (it takes no parameters)"
    reasons = [
        f"{cls.__name__} has no parameter {key!r}{_did_you_mean(str(key), valid)}; "
        f"its parameters are: {listed}"
        for key in unknown
    ]
    raise PrimitiveSpecError("; ".join(reasons), where=where)


def _did_you_mean(word: str, choices: list[str] | tuple[str, ...]) -> str:
    """' (did you mean X?)' when a choice is close to `word`, else ''."""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if not close:
        close = [c for c in choices if c.lower() == word.lower()]
    return f" (did you mean {close[0]!r}?)" if close else ""


def _describe(primitive: str, detail: Any) -> str:
    """One pydantic error as a sentence: '<Type> parameter '<name>': <what is wrong>'."""
    location = _location(detail.get("loc", ()))
    blamed = getattr((detail.get("ctx") or {}).get("error"), "parameter", None)
    if blamed:
        location = blamed  # a validator named the exact parameter or item at fault
    kind = detail.get("type", "")
    message = str(detail.get("msg", ""))
    if kind == "missing":
        return f"{primitive} is missing the required parameter {location!r}"
    if kind == "value_error":
        reason = message.removeprefix("Value error, ")
    elif kind == "literal_error":
        expected = (detail.get("ctx") or {}).get("expected", "")
        reason = f"unknown value {detail.get('input')!r}; expected {expected}"
    else:
        reason = _plain(message) + f", got {detail.get('input')!r}"
    return f"{primitive} parameter {location!r}: {reason}" if location else f"{primitive}: {reason}"


def _location(loc: tuple[Any, ...]) -> str:
    """('normalize', 1) -> 'normalize[1]'; pydantic's type tags inside the path are dropped."""
    if not loc:
        return ""
    text = str(loc[0])
    for part in loc[1:]:
        if isinstance(part, int):
            text += f"[{part}]"
    return text


def _plain(message: str) -> str:
    """Pydantic's 'Input should be a valid tuple' in the JSON vocabulary: 'must be a list'."""
    text = message.replace("Input should be ", "must be ").replace("a valid ", "a ")
    text = text.replace("a tuple", "a list").replace("a dictionary", "an object")
    return re.sub(r"\ba (?=[aeiou])", "an ", text)
