"""Base classes shared by every verification primitive, and the two exceptions.

A primitive is a frozen pydantic model whose fields are its JSON parameters. Parsed primitives
compare a judge-extracted value with the ground truth (`check`); trace primitives read the raw
response (`check_trace`). Parameters are validated when the primitive is built, so a bad spec
fails at load time and a check never raises on odd extracted values: it returns False.
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson
from pydantic import BaseModel, ConfigDict

from evalledger.stages.primitives.normalizers import SynonymMap


class PrimitiveSpecError(ValueError):
    """A verification spec that cannot be loaded.

    `where` is the path of the offending spec in its file (for example
    `questions[0].template.fields[1].verify_with`), `reason` says what is wrong. The message is
    `"<where>: <reason>"`, ready to show to the person who wrote the file.
    """

    def __init__(self, reason: str, *, where: str = "") -> None:
        self.where = where
        self.reason = reason
        super().__init__(f"{where}: {reason}" if where else reason)


class ParameterError(ValueError):
    """Raised by a validator to blame one parameter (or one item of it, e.g. `normalize[1]`),
    so the load-time message can name it precisely."""

    def __init__(self, parameter: str, reason: str) -> None:
        self.parameter = parameter
        super().__init__(reason)


class CheckError(Exception):
    """Raised inside a check when a value cannot be compared; the check then returns False.

    Its message is the human-readable reason, surfaced by `explain()` and field verification.
    """


class Primitive(BaseModel):
    """Common behaviour: spec round-trip, value equality, hashing.

    Equality and hashing go through the full spec (defaults included), so two primitives are
    equal exactly when they decide the same way, whatever private caches they hold.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    trace: ClassVar[bool] = False

    def to_spec(self, *, with_defaults: bool = False) -> dict[str, Any]:
        """Return the JSON shape `{"type": "<ClassName>", ...parameters}`.

        By default only the parameters that were given are listed, so
        `from_spec(s).to_spec() == s` for any canonical spec `s`. With `with_defaults=True`
        every parameter is spelled out, which is what an audit event should record.
        """
        fields = type(self).model_fields
        names = fields if with_defaults else self.model_fields_set
        spec: dict[str, Any] = {"type": type(self).__name__}
        for name in fields:
            if name in names:
                spec[name] = _to_json(getattr(self, name))
        return spec

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.to_spec(with_defaults=True) == other.to_spec(with_defaults=True)  # type: ignore[union-attr]

    def __hash__(self) -> int:
        canonical = orjson.dumps(self.to_spec(with_defaults=True), option=orjson.OPT_SORT_KEYS)
        return hash(canonical)

    def load_warnings(self) -> list[str]:
        """What is allowed but probably not meant in this spec (shown at load time, never fatal)."""
        return []

    def check_expected(self, expected: Any) -> None:
        """Raise ValueError if `expected` (a field's ground truth) cannot be used by this primitive.

        Called at load time by field verification; the default accepts anything.
        """


class ParsedPrimitive(Primitive):
    """A primitive that compares a judge-extracted value with the expected value."""

    def check(self, extracted: Any, expected: Any, *, embedder: Any = None) -> bool:
        """True if `extracted` matches `expected` under this primitive's rule; never raises."""
        try:
            return self._compare(extracted, expected, embedder)
        except CheckError:
            return False

    def explain(self, extracted: Any, expected: Any, *, embedder: Any = None) -> str | None:
        """None when the check passes, otherwise a sentence saying why it did not."""
        if type(self).check is not ParsedPrimitive.check:
            # A custom primitive that overrides check() (as the spec's examples do) has no
            # _compare; its verdict is all there is to explain.
            passed = self.check(extracted, expected)
            return None if passed else self._mismatch(extracted, expected)
        try:
            if self._compare(extracted, expected, embedder):
                return None
        except CheckError as error:
            return str(error)
        return self._mismatch(extracted, expected)

    def _compare(self, extracted: Any, expected: Any, embedder: Any) -> bool:
        """The rule itself; raise CheckError when a value cannot be compared."""
        raise NotImplementedError

    def _mismatch(self, extracted: Any, expected: Any) -> str:
        """Reason for a plain mismatch (values comparable, rule not met)."""
        return f"{extracted!r} does not match {expected!r} ({type(self).__name__})"


class TracePrimitive(Primitive):
    """A primitive that reads the raw response; its field passes when
    `check_trace(raw) == bool(ground_truth)`."""

    trace: ClassVar[bool] = True

    def check(self, extracted: Any, expected: Any, *, embedder: Any = None) -> bool:
        """Trace primitives do not compare extracted values; use check_trace."""
        raise TypeError(
            f"{type(self).__name__} is a trace primitive: call check_trace(raw_response)"
        )

    def check_trace(self, raw: str) -> bool:
        """True if the raw response shows what this primitive looks for."""
        raise NotImplementedError

    def check_expected(self, expected: Any) -> None:
        """A trace field's ground truth says whether the check should succeed: a bool."""
        if not isinstance(expected, bool):
            raise ValueError(
                f"a {type(self).__name__} field needs ground_truth true or false "
                f"(whether the check should succeed), got {expected!r}"
            )


def _to_json(value: Any) -> Any:
    """Turn a stored parameter value back into its JSON form (tuples become lists)."""
    if isinstance(value, SynonymMap):
        return value.to_spec()
    if isinstance(value, tuple):
        return [_to_json(item) for item in value]
    return value
