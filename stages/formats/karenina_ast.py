"""Shared pieces of the Karenina template translator: the error, the records, AST helpers.

Nothing here evaluates code: ``literal`` uses ``ast.literal_eval``, which accepts literals only.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any


class Untranslatable(Exception):
    """A construct with no exact native equivalent; ``line`` is 1-based in the template source."""

    def __init__(self, node: ast.AST | None, reason: str):
        self.line = getattr(node, "lineno", None)
        construct = snippet(node) if node is not None else ""
        self.reason = f"`{construct}`: {reason}" if construct else reason
        super().__init__(self.reason)


@dataclass
class Decl:
    """A declared field: its native type, description, literal values and VerifiedField parts."""

    name: str
    type: str
    description: str
    node: ast.AST
    values: list[str] | None = None
    verified: dict | None = None


@dataclass
class Constraint:
    """What verify() requires of one field: a primitive spec and its ground truth.

    ``bound`` is "min" or "max" for a one-sided numeric bound (two merge into NumericRange).
    """

    field: str
    spec: dict
    ground_truth: Any
    node: ast.AST
    bound: str | None = None


def snippet(node: ast.AST) -> str:
    """The source of a node on one line, shortened to 80 characters."""
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        text = f"def {node.name}" if isinstance(node, ast.FunctionDef) else f"class {node.name}"
    else:
        text = ast.unparse(node)
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "..."


def name_of(node: ast.AST) -> str | None:
    """``x`` for ``x`` and for ``a.x``, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def self_attr(node: ast.AST) -> str | None:
    """``x`` for ``self.x``, else None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def is_docstring(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def literal(node: ast.AST) -> Any:
    """The value of a literal expression; Untranslatable for anything that is not a literal, or
    for a literal that JSON cannot hold (the events store canonical JSON)."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise Untranslatable(node, "only literal values can be translated") from None
    reason = unstorable(value)
    if reason:
        raise Untranslatable(node, reason)
    return value


_INT_LIMIT = 2**63


def unstorable(value: Any) -> str | None:
    """Why a Python literal cannot be stored as JSON (infinite float, integer beyond 64 bits,
    unpaired surrogate, bytes, complex), or None when it can."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, bool) or item is None:
            continue
        if isinstance(item, float) and not math.isfinite(item):
            return f"the number {item} cannot be stored (JSON has no infinity or NaN)"
        if isinstance(item, int) and not -_INT_LIMIT <= item < _INT_LIMIT:
            return "the integer does not fit in 64 bits"
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "the text holds an unpaired surrogate (\\ud800-\\udfff), which is not valid Unicode"
        elif isinstance(item, (bytes, complex)):
            return f"a {type(item).__name__} value cannot be stored as JSON"
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
    return None
