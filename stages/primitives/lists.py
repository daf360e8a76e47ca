"""List primitives: SetContainment and OrderedMatch."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import Field

from evalledger.stages.primitives.base import CheckError, ParsedPrimitive
from evalledger.stages.primitives.coerce import as_list, as_text
from evalledger.stages.primitives.normalizers import NormalizerList, compile_normalizers

PositiveInt = Annotated[int, Field(strict=True, ge=1)]


def _require_list(expected: Any, primitive: str) -> None:
    """Load-time check that a ground truth is a list (not a bare string)."""
    try:
        as_list(expected)
    except CheckError as error:
        raise ValueError(f"{primitive} ground_truth: {error}") from None


class SetContainment(ParsedPrimitive):
    """Compare two lists as sets.

    mode "exact": same elements; "subset": every extracted element is expected; "superset":
    every expected element was extracted; "overlap": at least `min_overlap` (default 1) in
    common. With `normalize`, elements are compared as normalized text; without it, as they
    are. A bare string is not a list: it fails instead of being split into characters.
    """

    mode: Literal["exact", "subset", "superset", "overlap"] = "exact"
    min_overlap: PositiveInt | None = None
    normalize: NormalizerList = ()

    def load_warnings(self) -> list[str]:
        """min_overlap only means something in overlap mode: elsewhere it is ignored."""
        if self.min_overlap is not None and self.mode != "overlap":
            return [f"min_overlap is only used with mode 'overlap'; ignored with mode {self.mode!r}"]
        return []

    @cached_property
    def _key(self) -> Callable[[Any], Any] | None:
        """How an element is compared: normalized text when `normalize` is given, else as is."""
        if not self.normalize:
            return None
        apply = compile_normalizers(self.normalize)
        return lambda item: apply(as_text(item))

    def _as_set(self, value: Any, role: str) -> set[Any]:
        """The elements of a list as a set (normalized when asked); CheckError if impossible."""
        items = as_list(value)
        if self._key is not None:
            items = [self._key(item) for item in items]
        try:
            return set(items)
        except TypeError:
            raise CheckError(f"{role} list {value!r} has elements that cannot be compared") from None

    def _compare(self, extracted: Any, expected: Any, embedder: Any) -> bool:
        got, want = self._as_set(extracted, "extracted"), self._as_set(expected, "expected")
        if self.mode == "exact":
            return got == want
        if self.mode == "subset":
            return got <= want
        if self.mode == "superset":
            return got >= want
        return len(got & want) >= (self.min_overlap or 1)

    def _mismatch(self, extracted: Any, expected: Any) -> str:
        got, want = self._as_set(extracted, "extracted"), self._as_set(expected, "expected")
        details = {
            "exact": f"missing {sorted(map(str, want - got))}, unexpected {sorted(map(str, got - want))}",
            "subset": f"unexpected {sorted(map(str, got - want))}",
            "superset": f"missing {sorted(map(str, want - got))}",
            "overlap": f"{len(got & want)} in common, need {self.min_overlap or 1}",
        }[self.mode]
        return f"{extracted!r} vs {expected!r} ({self.mode}): {details}"

    def check_expected(self, expected: Any) -> None:
        _require_list(expected, "SetContainment")


class OrderedMatch(ParsedPrimitive):
    """Pass when both lists have the same length and equal elements position by position,
    after normalization (default: lowercase, strip). A bare string is not a list."""

    normalize: NormalizerList = ("lowercase", "strip")

    @cached_property
    def _apply(self) -> Callable[[str], str]:
        """The normalizer pipeline, built once."""
        return compile_normalizers(self.normalize)

    def _compare(self, extracted: Any, expected: Any, embedder: Any) -> bool:
        got, want = as_list(extracted), as_list(expected)
        if len(got) != len(want):
            return False
        apply = self._apply
        return all(apply(as_text(a)) == apply(as_text(b)) for a, b in zip(got, want))

    def check_expected(self, expected: Any) -> None:
        _require_list(expected, "OrderedMatch")
