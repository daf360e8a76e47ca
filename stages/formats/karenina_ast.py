"""Shared pieces of the Karenina template translator: the error, the records, AST helpers.

Nothing here evaluates code: ``literal`` uses ``ast.literal_eval``, which accepts literals only.
"""

from __future__ import annotations

import ast
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
    """True when the statement is a bare string (a docstring)."""
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def literal(node: ast.AST) -> Any:
    """The value of a literal expression; Untranslatable for anything that is not a literal."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise Untranslatable(node, "only literal values can be translated") from None
