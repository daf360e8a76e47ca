"""Boolean, categorical and string primitives: BooleanMatch, LiteralMatch, ExactMatch,
ContainsAny, ContainsAll, RegexMatch, SemanticMatch."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cached_property
from typing import Annotated, Any

import regex
from pydantic import Field, field_validator, model_validator

from evalledger.stages.embedder import Embedder, get_default_embedder
from evalledger.stages.primitives.base import CheckError, ParsedPrimitive
from evalledger.stages.primitives.coerce import as_bool, as_text
from evalledger.stages.primitives.normalizers import NormalizerList, StrictStr, compile_normalizers
from evalledger.stages.primitives.patterns import compile_benchmark_pattern, search

UnitInterval = Annotated[float, Field(strict=True, ge=0.0, le=1.0, allow_inf_nan=False)]

# Flag names RegexMatch accepts (Karenina looks them up with getattr(re, name)). LOCALE only
# works on bytes patterns and DEBUG prints to stdout, so neither is offered.
REGEX_FLAGS: dict[str, re.RegexFlag] = {
    name: getattr(re, name)
    for name in ("IGNORECASE", "I", "MULTILINE", "M", "DOTALL", "S", "VERBOSE", "X", "ASCII",
                 "A", "UNICODE", "U")
}


def _require_scalar_text(expected: Any, primitive: str) -> None:
    """Load-time check that a ground truth can be compared as text."""
    if isinstance(expected, bool) or not isinstance(expected, (str, int, float)):
        raise ValueError(f"{primitive} compares text; ground_truth must be a string, got {expected!r}")


class BooleanMatch(ParsedPrimitive):
    """Pass when extracted and expected are the same boolean.

    "true"/"yes"/"1" and "false"/"no"/"0" (any case) are read as booleans; any other value
    fails with a reason instead of being judged by Python truthiness.
    """

    def _compare(self, extracted: Any, expected: Any, embedder: Any) -> bool:
        return as_bool(extracted) == as_bool(expected)

    def check_expected(self, expected: Any) -> None:
        try:
            as_bool(expected)
        except CheckError as error:
            raise ValueError(f"BooleanMatch ground_truth: {error}") from None


class LiteralMatch(ParsedPrimitive):
    """Pass when extracted equals expected exactly (for Literal/enum fields)."""

    def _compare(self, extracted: Any, expected: Any, embedder: Any) -> bool:
        # bool is an int in Python; True must not match a literal 1.
        if isinstance(extracted, bool) != isinstance(expected, bool):
            return False
        return bool(extracted == expected)


class _Normalizing(ParsedPrimitive):
    """Shared part of the string primitives that take `normalize`."""

    normalize: NormalizerList = ()

    # Derived helpers are cached properties, not pydantic private attributes: those are read
    # through BaseModel.__getattr__ at ~1.8 us a time, which would dominate a check.
    @cached_property
    def _apply(self) -> Callable[[str], str]:
        """The normalizer pipeline, built once."""
        return compile_normalizers(self.normalize)


class ExactMatch(_Normalizing):
    """Pass when both values are equal after normalization (default: lowercase, strip)."""

    normalize: NormalizerList = ("lowercase", "strip")

    def _compare(self, extracted: Any, expected: Any, embedder: Any) -> bool:
        apply = self._apply
        return apply(as_text(extracted)) == apply(as_text(expected))

    def check_expected(self, expected: Any) -> None:
        _require_scalar_text(expected, "ExactMatch")


class _Substrings(_Normalizing):
    """Shared part of ContainsAny and ContainsAll: a non-empty list of substrings."""

    substrings: tuple[StrictStr, ...]

    @field_validator("substrings", mode="after")
    @classmethod
    def _not_empty(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """An empty list would make ContainsAll always pass and ContainsAny always fail."""
        if not value:
            raise ValueError("must list at least one substring")
        if any(item == "" for item in value):
            raise ValueError("must not contain the empty string (it is in every text)")
        return value

    @cached_property
    def _needles(self) -> tuple[str, ...]:
        """The substrings normalized once, the same way the extracted text will be."""
        return tuple(self._apply(item) for item in self.substrings)


class ContainsAny(_Substrings):
    """Pass when the extracted text contains at least one of `substrings` (ignores ground truth)."""

    def _compare(self, extracted: Any, expected: Any, embedder: Any) -> bool:
        text = self._apply(as_text(extracted))
        return any(needle in text for needle in self._needles)

    def _mismatch(self, extracted: Any, expected: Any) -> str:
        return f"{extracted!r} contains none of {list(self.substrings)!r}"


class ContainsAll(_Substrings):
    """Pass when the extracted text contains every one of `substrings` (ignores ground truth)."""

    def _compare(self, extracted: Any, expected: Any, embedder: Any) -> bool:
        text = self._apply(as_text(extracted))
        return all(needle in text for needle in self._needles)

    def _mismatch(self, extracted: Any, expected: Any) -> str:
        text = self._apply(as_text(extracted))
        missing = [raw for raw, needle in zip(self.substrings, self._needles) if needle not in text]
        return f"{extracted!r} lacks {missing!r}"


class RegexMatch(ParsedPrimitive):
    """Pass when `pattern` is found anywhere in the extracted text (re.search semantics; ignores
    ground truth). `flags` are re flag names such as "IGNORECASE". The search runs with a time
    limit (`primitives.patterns`): a pattern that runs out of time fails the check, saying so."""

    pattern: StrictStr
    flags: tuple[StrictStr, ...] = ()

    @field_validator("flags", mode="after")
    @classmethod
    def _known_flags(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """Unknown flag names are an error here (Karenina silently ignores them)."""
        for name in value:
            if name not in REGEX_FLAGS:
                known = ", ".join(sorted(n for n in REGEX_FLAGS if len(n) > 1))
                raise ValueError(f"unknown regex flag {name!r}; use {known}")
        return value

    @model_validator(mode="after")
    def _valid_pattern(self) -> RegexMatch:
        """A bad pattern is a load-time error."""
        compile_pattern(self.pattern, self.flags)
        return self

    @cached_property
    def _regex(self) -> regex.Pattern:
        """The compiled pattern (regex module, for its time limit)."""
        return compile_benchmark_pattern(self.pattern, self.flags)

    def _compare(self, extracted: Any, expected: Any, embedder: Any) -> bool:
        return search(self._regex, as_text(extracted))

    def _mismatch(self, extracted: Any, expected: Any) -> str:
        return f"{extracted!r} does not match the pattern {self.pattern!r}"


def compile_pattern(pattern: str, flag_names: tuple[str, ...] = ()) -> re.Pattern[str]:
    """Compile a regex, turning re.error into a ValueError that quotes the pattern."""
    flags = 0
    for name in flag_names:
        flags |= REGEX_FLAGS[name]
    try:
        return re.compile(pattern, flags)
    except re.error as error:
        raise ValueError(f"invalid regular expression {pattern!r}: {error}") from None


class SemanticMatch(ParsedPrimitive):
    """Pass when the embedder's similarity of extracted and expected text is >= `threshold`.

    The embedder is the one passed to `check(..., embedder=...)`, else the process default
    (`stages.embedder.get_default_embedder()`, a deterministic offline one unless replaced).
    """

    threshold: UnitInterval = 0.85

    def score(self, extracted: Any, expected: Any, *, embedder: Embedder | None = None) -> float:
        """The similarity the verdict is based on, in [0, 1]."""
        chosen = embedder if embedder is not None else get_default_embedder()
        return float(chosen.similarity(as_text(extracted), as_text(expected)))

    def _compare(self, extracted: Any, expected: Any, embedder: Any) -> bool:
        return self.score(extracted, expected, embedder=embedder) >= self.threshold

    def explain(self, extracted: Any, expected: Any, *, embedder: Any = None) -> str | None:
        """None when the similarity reaches the threshold, else the score and threshold."""
        try:
            value = self.score(extracted, expected, embedder=embedder)
        except CheckError as error:
            return str(error)
        if value >= self.threshold:
            return None
        return f"similarity {value:.4f} is below the threshold {self.threshold}"

    def check_expected(self, expected: Any) -> None:
        _require_scalar_text(expected, "SemanticMatch")
