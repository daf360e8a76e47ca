"""Read a Karenina ``verify()`` (as AST, never run) into one primitive per field.

Each comparison becomes a primitive only when the primitive decides exactly as the comparison
would: string methods map to normalizers (``lower`` -> lowercase, ``strip`` -> strip; ``upper`` ->
lowercase on both sides, which agrees except for a few non-ASCII letters whose upper case is
ASCII, such as the long s), and the expected value must be reachable (``x.lower() == "Paris"``
can never be true, so it is refused rather than silently changed).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from evalledger.stages.formats.karenina_ast import Constraint, Decl, Untranslatable, is_docstring, literal, self_attr

_STRING_METHODS = {"lower": str.lower, "strip": str.strip, "upper": str.upper}
_NORMALIZER = {"lower": "lowercase", "strip": "strip", "upper": "lowercase"}
_NORMALIZERS_TEXT = "lowercase, strip, remove_punctuation, collapse_whitespace and SynonymMap"


@dataclass
class Ext:
    """The extracted side of a comparison: a field, the string methods applied, and its form
    (``value``, ``list`` for ``[x.m() for x in self.f]``, ``set`` for ``set(...)``)."""

    field: str
    methods: list[str]
    form: str


@dataclass
class Exp:
    """The expected side: its value after the methods applied to it, the raw literal, and its form."""

    value: Any
    raw: Any
    form: str


class VerifyReader:
    """Turns the return expression of verify() into Constraints, one per checked field."""

    def __init__(self, decls: dict[str, Decl], correct: dict | None):
        self.decls = decls
        self.correct = correct
        self.locals: dict[str, ast.AST] = {}

    def read(self, fn: ast.FunctionDef) -> tuple[list[Constraint], dict | None]:
        """Constraints of ``verify()`` and the verdict strategy (None: every field must pass).

        The body is local ``name = <condition>`` lines, then ``return <condition>``. A returned
        ``or`` whose every alternative checks one field, each a different one, is the strategy
        ``any_of``.
        """
        body = [s for s in fn.body if not is_docstring(s)]
        if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
            raise Untranslatable(fn, "verify() must end with `return <condition>`")
        for stmt in body[:-1]:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
                raise Untranslatable(stmt, "only `name = <condition>` lines may come before the return")
            self.locals[stmt.targets[0].id] = stmt.value
        returned = body[-1].value
        if isinstance(returned, ast.Constant):
            raise Untranslatable(returned, f"verify() always returns {returned.value!r}: nothing is checked "
                                           "(a placeholder template)")
        returned = self._resolve(returned)
        if isinstance(returned, ast.BoolOp) and isinstance(returned.op, ast.Or):
            return self._alternatives(returned), {"type": "any_of"}
        return self.condition(returned), None

    def _resolve(self, node: ast.AST) -> ast.AST:
        """A local name stands for the condition assigned to it."""
        while isinstance(node, ast.Name) and node.id in self.locals:
            node = self.locals.pop(node.id)
        return node

    def _alternatives(self, node: ast.BoolOp) -> list[Constraint]:
        """``a or b or ...``: each alternative one field's condition, no field twice."""
        constraints: list[Constraint] = []
        for value in node.values:
            found = self.condition(self._resolve(value))
            if len({c.field for c in found}) != 1 or (len(found) > 1 and not all(c.bound for c in found)):
                raise Untranslatable(value, "`or`: each alternative must check exactly one field (the native "
                                            "strategy any_of passes when any field passes)")
            if found[0].field in {c.field for c in constraints}:
                raise Untranslatable(value, f"`or`: field {found[0].field!r} appears in two alternatives")
            constraints.extend(found)
        return constraints

    # --- conditions ------------------------------------------------------------------------------
    def condition(self, node: ast.AST) -> list[Constraint]:
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            return [c for value in node.values for c in self.condition(value)]
        if isinstance(node, ast.BoolOp):
            raise Untranslatable(node, "`or` inside a larger condition: the native strategies are every "
                                       "field (all_of) or any field (any_of), not a mix")
        if isinstance(node, ast.Name) and node.id in self.locals:
            return self.condition(self.locals.pop(node.id))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and self._bool_field(node.operand):
            return [Constraint(self_attr(node.operand), {"type": "BooleanMatch"}, False, node)]
        if self._bool_field(node):
            return [Constraint(self_attr(node), {"type": "BooleanMatch"}, True, node)]
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            return [self.pair(sides[i], op, sides[i + 1], node) for i, op in enumerate(node.ops)]
        raise Untranslatable(node, "unsupported condition (translated: ==, in, is True/False, <=, >=, "
                                   "abs(a - b) <= tol, joined by `and`)")

    def _bool_field(self, node: ast.AST) -> bool:
        name = self_attr(node)
        return name in self.decls and self.decls[name].type == "bool"

    def pair(self, left: ast.AST, op: ast.cmpop, right: ast.AST, node: ast.AST) -> Constraint:
        """One comparison ``left <op> right`` as a Constraint."""
        if isinstance(op, ast.Eq):
            ext, exp = self._sides(left, right, node)
            return self.equality(ext, exp, node)
        if isinstance(op, ast.Is) and isinstance(right, ast.Constant) and isinstance(right.value, bool) \
                and self._bool_field(left):
            return Constraint(self_attr(left), {"type": "BooleanMatch"}, right.value, node)
        if isinstance(op, ast.In):
            return self.contains(self.expected(left), self._extracted_or_fail(right), node)
        if isinstance(op, (ast.LtE, ast.GtE)):
            return self.ordering(left, op, right, node)
        if isinstance(op, (ast.Lt, ast.Gt)):
            raise Untranslatable(node, "strict < or >: the numeric primitives' bounds are inclusive")
        raise Untranslatable(node, "negated comparisons (!=, is not, not in) have no primitive")

    def _sides(self, left: ast.AST, right: ast.AST, node: ast.AST) -> tuple[Ext, Exp]:
        ext_left, ext_right = self.extracted(left), self.extracted(right)
        if ext_left and ext_right:
            raise Untranslatable(node, "compares two fields with each other; a primitive compares a field "
                                       "with an expected value")
        if ext_left:
            return ext_left, self.expected(right)
        if ext_right:
            return ext_right, self.expected(left)
        raise Untranslatable(node, "the comparison involves no answer field")

    def _extracted_or_fail(self, node: ast.AST) -> Ext:
        ext = self.extracted(node)
        if ext is None:
            raise Untranslatable(node, "expected an answer field here (self.<field>)")
        return ext

    # --- the two sides ---------------------------------------------------------------------------
    def extracted(self, node: ast.AST) -> Ext | None:
        """The field side, or None when ``node`` does not read an answer field."""
        name = self_attr(node)
        if name is not None and name != "correct":
            if name not in self.decls:
                raise Untranslatable(node, f"self.{name} is not a declared field")
            return Ext(name, [], "value")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            inner = self.extracted(node.func.value)
            if inner is None:
                return None
            return self._method(inner, node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "set" \
                and len(node.args) == 1 and not node.keywords:
            inner = self.extracted(node.args[0])
            if inner is not None:
                return Ext(inner.field, inner.methods, "set")
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            return self._comprehension(node)
        if _reads_field(node, self.decls):
            raise Untranslatable(node, "this use of an answer field cannot be translated")
        return None

    def _method(self, inner: Ext, call: ast.Call) -> Ext:
        method = call.func.attr
        if method not in _STRING_METHODS or call.args or call.keywords:
            raise Untranslatable(call, f"str.{method}(...) has no exact equivalent among the normalizers "
                                       f"({_NORMALIZERS_TEXT})")
        if inner.form != "value" or self.decls[inner.field].type != "str":
            raise Untranslatable(call, f"{method}() applies to a str field only")
        return Ext(inner.field, inner.methods + [method], "value")

    def _comprehension(self, node: ast.AST) -> Ext:
        """``[x.lower() for x in self.f]`` or ``{...}`` / ``set(... for ...)`` over a list[str] field."""
        gen = node.generators[0] if len(node.generators) == 1 else None
        if gen is None or gen.ifs or gen.is_async or not isinstance(gen.target, ast.Name):
            raise Untranslatable(node, "only a plain `[x.<method>() for x in self.<field>]` is translated")
        source = self_attr(gen.iter)
        if source not in self.decls or self.decls[source].type != "list[str]":
            raise Untranslatable(node, "the comprehension must run over a list[str] field")
        methods: list[str] = []
        elt = node.elt
        while isinstance(elt, ast.Call) and isinstance(elt.func, ast.Attribute):
            if elt.func.attr not in _STRING_METHODS or elt.args or elt.keywords:
                raise Untranslatable(elt, f"str.{elt.func.attr}(...) has no exact equivalent among the "
                                          f"normalizers ({_NORMALIZERS_TEXT})")
            methods.insert(0, elt.func.attr)
            elt = elt.func.value
        if not (isinstance(elt, ast.Name) and elt.id == gen.target.id):
            raise Untranslatable(node, "the comprehension may only apply string methods to each element")
        return Ext(source, methods, "list" if isinstance(node, ast.ListComp) else "set")

    def expected(self, node: ast.AST) -> Exp:
        """The expected side: a literal or ``self.correct[...]``, with string methods applied."""
        if isinstance(node, ast.Subscript) and self_attr(node.value) == "correct":
            key = literal(node.slice)
            if self.correct is None:
                raise Untranslatable(node, "self.correct is never assigned a literal dict")
            if key not in self.correct:
                raise Untranslatable(node, f"self.correct has no key {key!r}")
            value = self.correct[key]
            return Exp(value, value, "set" if isinstance(value, (set, frozenset)) else "value")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args \
                and not node.keywords and node.func.attr in _STRING_METHODS:
            inner = self.expected(node.func.value)
            if not isinstance(inner.value, str):
                raise Untranslatable(node, f"{node.func.attr}() of a value that is not text")
            return Exp(_STRING_METHODS[node.func.attr](inner.value), inner.raw, "value")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "set" \
                and len(node.args) == 1 and not node.keywords:
            inner = self.expected(node.args[0])
            return Exp(inner.value, inner.raw, "set")
        value = literal(node)
        return Exp(value, value, "set" if isinstance(value, (set, frozenset)) else "value")

    # --- building primitives ---------------------------------------------------------------------
    def equality(self, ext: Ext, exp: Exp, node: ast.AST) -> Constraint:
        """``field == expected`` as the primitive of the field's type."""
        ftype = self.decls[ext.field].type
        value = exp.value
        if ext.form == "set":
            items = _strings(value, node) if exp.form == "set" else _never(node, "a set never equals a list")
            normalize = _normalizers(ext.methods, items, node)
            spec = {"type": "SetContainment", "mode": "exact", **({"normalize": normalize} if normalize else {})}
            return Constraint(ext.field, spec, sorted(set(items)), node)
        if ext.form == "list" or ftype == "list[str]":
            if exp.form == "set":
                _never(node, "a list never equals a set")
            items = _strings(value, node)
            return Constraint(ext.field, {"type": "OrderedMatch", "normalize": _normalizers(ext.methods, items, node)},
                              items, node)
        if ftype == "bool" and isinstance(value, bool):
            return Constraint(ext.field, {"type": "BooleanMatch"}, value, node)
        if ftype in ("int", "float") and isinstance(value, (int, float)) and not isinstance(value, bool):
            return Constraint(ext.field, {"type": "NumericExact"}, value, node)
        if ftype == "literal" and value in (self.decls[ext.field].values or []):
            return Constraint(ext.field, {"type": "LiteralMatch"}, value, node)
        if ftype in ("str", "date") and isinstance(value, str):
            normalize = _normalizers(ext.methods, [value], node)
            return Constraint(ext.field, {"type": "ExactMatch", "normalize": normalize},
                              _display(exp, value, ext.methods), node)
        raise Untranslatable(node, f"a {ftype} field compared with {value!r}")

    def contains(self, exp: Exp, ext: Ext, node: ast.AST) -> Constraint:
        """``"text" in self.f`` (substring of a str field, or element of a list[str] field)."""
        ftype = self.decls[ext.field].type
        if not isinstance(exp.value, str):
            raise Untranslatable(node, "only text can be looked for with `in`")
        if ext.form == "value" and ftype == "str":
            normalize = _normalizers(ext.methods, [exp.value], node)
            return Constraint(ext.field, {"type": "ContainsAny", "substrings": [exp.value], "normalize": normalize},
                              None, node)
        if ext.form == "value" and ftype == "list[str]":
            return Constraint(ext.field, {"type": "SetContainment", "mode": "superset"}, [exp.value], node)
        raise Untranslatable(node, "`in` is translated for a str field (substring) or a list[str] field (element)")

    def ordering(self, left: ast.AST, op: ast.cmpop, right: ast.AST, node: ast.AST) -> Constraint:
        """``abs(self.f - x) <= tol`` (NumericTolerance) or one bound of NumericRange."""
        small, large = (left, right) if isinstance(op, ast.LtE) else (right, left)
        if isinstance(small, ast.Call) and isinstance(small.func, ast.Name) and small.func.id == "abs":
            return self._tolerance(small, large, node)
        ext_small, ext_large = self.extracted(small), self.extracted(large)
        ext = ext_small or ext_large
        if ext is None or (ext_small and ext_large):
            raise Untranslatable(node, "a bound compares one numeric field with a number")
        bound = self.expected(large if ext_small else small).value
        self._numeric(ext, node)
        if not isinstance(bound, (int, float)) or isinstance(bound, bool):
            raise Untranslatable(node, "a bound must be a number")
        side = "max" if ext_small else "min"
        return Constraint(ext.field, {"type": "NumericRange", side: bound}, None, node, bound=side)

    def _tolerance(self, call: ast.Call, limit: ast.AST, node: ast.AST) -> Constraint:
        arg = call.args[0] if len(call.args) == 1 and not call.keywords else None
        if not (isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Sub)):
            raise Untranslatable(node, "only abs(<field> - <expected>) <= <tolerance> is translated")
        ext, exp = self._sides(arg.left, arg.right, node)
        self._numeric(ext, node)
        tol = self.expected(limit).value
        if not isinstance(exp.value, (int, float)) or isinstance(exp.value, bool) \
                or not isinstance(tol, (int, float)) or isinstance(tol, bool) or tol < 0:
            raise Untranslatable(node, "the expected value and the tolerance must be numbers (tolerance >= 0)")
        return Constraint(ext.field, {"type": "NumericTolerance", "tolerance": tol, "mode": "absolute"},
                          exp.value, node)

    def _numeric(self, ext: Ext, node: ast.AST) -> None:
        if ext.form != "value" or ext.methods or self.decls[ext.field].type not in ("int", "float"):
            raise Untranslatable(node, "numeric comparisons apply to an int or float field")


def _reads_field(node: ast.AST, decls: dict[str, Decl]) -> bool:
    return any(self_attr(n) in decls for n in ast.walk(node))


def _never(node: ast.AST, reason: str):
    raise Untranslatable(node, f"this comparison can never be true ({reason})")


def _strings(value: Any, node: ast.AST) -> list[str]:
    if isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(v, str) for v in value):
        return sorted(value) if isinstance(value, (set, frozenset)) else list(value)
    raise Untranslatable(node, f"expected a list of strings, got {value!r}")


def _apply(methods: list[str], text: str) -> str:
    for method in methods:
        text = _STRING_METHODS[method](text)
    return text


def _normalizers(methods: list[str], targets: list[str], node: ast.AST) -> list[str]:
    """The normalizers equivalent to ``methods``, after checking every target is reachable."""
    if "upper" in methods and "lower" in methods:
        raise Untranslatable(node, "mixing upper() and lower() cannot be translated")
    for target in targets:
        if _apply(methods, target) != target:
            chain = ".".join(f"{m}()" for m in methods)
            _never(node, f"{target!r} is not a possible result of .{chain}")
    return list(dict.fromkeys(_NORMALIZER[m] for m in methods))


def _display(exp: Exp, value: str, methods: list[str]) -> str:
    """The ground truth to show: the literal as written when the normalizers make it equal."""
    if isinstance(exp.raw, str):
        norm = _apply([("lower" if m == "upper" else m) for m in methods], exp.raw)
        if norm == _apply([("lower" if m == "upper" else m) for m in methods], value):
            return exp.raw
    return value
