"""Problems found in an input file: each names the place (JSON path or line) and the reason.

Readers collect every problem of a file before giving up (``Problems``), so a person fixing a
file sees all of its errors at once, not one per attempt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from pydantic import ValidationError


@dataclass(frozen=True, slots=True)
class Problem:
    """One error: ``where`` is a JSON path (``$.questions[2].id``) or a line (``line 7: $.tag``)."""

    where: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"where": self.where, "reason": self.reason}

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


class FileRejected(Exception):
    """A whole file cannot be registered; ``problems`` lists every reason found."""

    def __init__(self, problems: Iterable[Problem]):
        self.problems = list(problems)
        super().__init__("; ".join(map(str, self.problems)))


@dataclass
class Problems:
    """A collector of problems for one file (or one part of it)."""

    items: list[Problem] = field(default_factory=list)

    def add(self, where: str, reason: str) -> None:
        self.items.append(Problem(where, reason))

    def extend(self, problems: Iterable[Problem]) -> None:
        self.items.extend(problems)

    def __bool__(self) -> bool:
        return bool(self.items)

    def raise_if_any(self) -> None:
        """Raise FileRejected with everything collected so far, if anything was."""
        if self.items:
            raise FileRejected(self.items)


def join_path(base: str, loc: Iterable[Any]) -> str:
    """Extend a JSON path: ``join_path("$", ["questions", 2, "id"]) == "$.questions[2].id"``."""
    out = base
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and part.isidentifier():
            out += f".{part}"
        else:
            out += f"[{part!r}]"
    return out


# pydantic adds the tag of a discriminated union or the type of a union member to ``loc``; those
# are not places in the file, so they are dropped from the path shown to people.
_NOT_PLACES = {"function-after", "function-before", "function-plain", "function-wrap", "tagged-union"}


def from_validation_error(exc: ValidationError, base: str = "$", doc: Any = None) -> list[Problem]:
    """Turn every error of a pydantic ValidationError into a Problem with a JSON path.

    ``doc`` is the validated input: walking it along each error's location tells the places in
    the file from the tags pydantic inserts for discriminated unions (``traits[0].llm.min_score``).
    """
    reasons: dict[str, list[str]] = {}
    for err in exc.errors(include_url=False):
        reasons.setdefault(join_path(base, _places(err["loc"], doc)), []).append(_reason(err))
    # A value that fits no member of a union gets one error per member, at the same place.
    return [Problem(where, " or ".join(dict.fromkeys(items))) for where, items in reasons.items()]


def _places(loc: tuple, doc: Any) -> list[Any]:
    """The parts of a pydantic location that are places in the document."""
    out, node = [], doc
    for part in loc:
        if isinstance(part, str) and (part in _NOT_PLACES or "[" in part):
            continue
        if isinstance(part, str) and isinstance(node, dict) and part not in node and node.get("kind") == part:
            continue  # the discriminator's tag, not a key of the document
        if isinstance(part, str) and node is not None and not isinstance(node, dict):
            continue  # the label of a union member (a scalar or list has no keys)
        out.append(part)
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            node = None
    return out


def _reason(err: dict) -> str:
    """A readable reason from one pydantic error, with the offending value when it is short."""
    kind = err.get("type", "")
    msg = err.get("msg", "invalid value")
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        return "unknown key (not part of this format)"
    value = err.get("input")
    shown = repr(value)
    if kind.endswith("_type") or kind in ("literal_error", "enum", "value_error", "string_too_short"):
        if len(shown) <= 60:
            return f"{msg.rstrip('.')} (got {shown})"
    return msg
