"""String normalizers applied, in the order listed, before string primitives compare values.

A normalizer is one of the names `lowercase`, `strip`, `remove_punctuation`,
`collapse_whitespace`, or a `SynonymMap` (exact whole-string lookup). In JSON a SynonymMap is
`{"type": "SynonymMap", "mapping": {...}}`; the bare `{"mapping": {...}}` Karenina writes is
accepted too.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Strict

StrictStr = Annotated[str, Strict()]

_PUNCTUATION_TABLE = str.maketrans("", "", string.punctuation)


def _remove_punctuation(text: str) -> str:
    """Delete ASCII punctuation (string.punctuation), as Karenina does."""
    return text.translate(_PUNCTUATION_TABLE)


def _collapse_whitespace(text: str) -> str:
    """Replace whitespace runs with one space and strip the ends."""
    return " ".join(text.split())


_NAMED: dict[str, Callable[[str], str]] = {
    "collapse_whitespace": _collapse_whitespace,
    "lowercase": str.lower,
    "remove_punctuation": _remove_punctuation,
    "strip": str.strip,
}

NORMALIZER_NAMES: tuple[str, ...] = tuple(sorted(_NAMED))


class SynonymMap(BaseModel):
    """Replace a whole string by its canonical form when it is a key of `mapping`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mapping: dict[StrictStr, StrictStr]

    def apply(self, text: str) -> str:
        """The canonical form of `text`, or `text` unchanged when it is not a key."""
        return self.mapping.get(text, text)

    def to_spec(self) -> dict[str, Any]:
        """The JSON shape `{"type": "SynonymMap", "mapping": {...}}`."""
        return {"type": "SynonymMap", "mapping": dict(self.mapping)}

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.mapping.items())))


Normalizer = str | SynonymMap


def _known_normalizers_hint() -> str:
    """The list of accepted normalizers, for error messages."""
    names = ", ".join(repr(name) for name in NORMALIZER_NAMES)
    return f'{names} or {{"type": "SynonymMap", "mapping": {{...}}}}'


def parse_normalizer(value: Any) -> Normalizer:
    """Turn one JSON normalizer (a name or a SynonymMap object) into its stored form.

    Raises ValueError with a reason when the value is not a known normalizer.
    """
    if isinstance(value, SynonymMap):
        return value
    if isinstance(value, str):
        if value in _NAMED:
            return value
        raise ValueError(f"unknown normalizer {value!r}; use {_known_normalizers_hint()}")
    if isinstance(value, dict):
        kind = value.get("type", "SynonymMap")
        if kind != "SynonymMap":
            raise ValueError(f"unknown normalizer type {kind!r}; use {_known_normalizers_hint()}")
        extra = sorted(set(value) - {"type", "mapping"})
        if extra:
            raise ValueError(f"SynonymMap takes only 'mapping', not {', '.join(map(repr, extra))}")
        mapping = value.get("mapping")
        if not isinstance(mapping, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()
        ):
            raise ValueError("SynonymMap needs 'mapping': an object of string to string")
        return SynonymMap(mapping=mapping)
    raise ValueError(f"a normalizer is a name or an object, got {value!r}")


class NormalizerError(ValueError):
    """A bad entry in a normalize list; `parameter` names it, e.g. `normalize[1]`."""

    def __init__(self, parameter: str, reason: str) -> None:
        self.parameter = parameter
        super().__init__(reason)


def parse_normalizers(value: Any) -> tuple[Normalizer, ...]:
    """Validate a JSON list of normalizers; a bad entry is reported with its position."""
    if isinstance(value, (str, dict)) or not isinstance(value, Iterable):
        raise ValueError(f"must be a list of normalizers, got {value!r}")
    parsed = []
    for position, item in enumerate(value):
        try:
            parsed.append(parse_normalizer(item))
        except ValueError as error:
            raise NormalizerError(f"normalize[{position}]", str(error)) from None
    return tuple(parsed)


NormalizerList = Annotated[tuple[StrictStr | SynonymMap, ...], BeforeValidator(parse_normalizers)]


def compile_normalizers(normalizers: Iterable[Normalizer]) -> Callable[[str], str]:
    """Return one function that applies `normalizers` in order (identity when there are none)."""
    steps = tuple(
        item.apply if isinstance(item, SynonymMap) else _NAMED[item] for item in normalizers
    )
    if not steps:
        return _identity
    if len(steps) == 1:
        return steps[0]

    def apply_all(text: str) -> str:
        for step in steps:
            text = step(text)
        return text

    return apply_all


def _identity(text: str) -> str:
    """No normalization."""
    return text
