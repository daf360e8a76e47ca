"""Translate a Karenina answer template (Python source) into native fields, without running it.

The source is only parsed with ``ast``; literals are read with ``ast.literal_eval`` (which
evaluates literals and nothing else). Two patterns are translated:

- ``VerifiedField(description=..., ground_truth=<literal>, verify_with=<Primitive>(<literals>))``;
- the older one: fields declared with ``Field(description=...)``, the expected values assigned by
  ``model_post_init`` (or ``ground_truth``) as ``self.correct = {<literal dict>}``, and a
  ``verify()`` returning comparisons (``==``, ``in``, ``is True``, ``<=``/``>=``,
  ``abs(a - b) <= tol``) of fields transformed by ``lower()``/``strip()``/``upper()``,
  ``[x.lower() for x in ...]`` or ``set(...)``, combined with ``and`` (directly or through
  local variables).

Every translation is exact: a comparison is turned into a primitive only when the primitive
decides the same way. Anything else raises Untranslatable naming the construct and its line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from evalledger.stages.formats.checks import FALLBACK_PRIMITIVES
from evalledger.stages.formats.karenina_ast import (
    Constraint,
    Decl,
    Untranslatable,
    is_docstring,
    literal,
    name_of,
    self_attr,
    snippet,
)
from evalledger.stages.formats.karenina_verify import VerifyReader

_SCALAR_TYPES = {"int": "int", "float": "float", "str": "str", "bool": "bool"}
_DATE_PRIMITIVES = {"DateMatch", "DateTolerance", "DateRange"}
_CORRECT_METHODS = ("model_post_init", "ground_truth")
_IGNORED_METHODS = ("verify_granular",)


@dataclass
class Translation:
    """The native fields of a template, and notes on what was left out (never executed)."""

    fields: list[dict]
    notes: list[str] = field(default_factory=list)
    strategy: dict | None = None  # {"type": "any_of"} for a verify() that is an `or` of fields

    def template(self) -> dict:
        """The native template: fields, and the strategy when it is not the default all_of."""
        return {"fields": self.fields, **({"strategy": self.strategy} if self.strategy else {})}


def known_primitives() -> frozenset[str]:
    """The primitive class names a VerifiedField may use."""
    try:
        from evalledger.stages.primitives import KNOWN_TYPES
        return frozenset(KNOWN_TYPES)
    except ImportError:
        return FALLBACK_PRIMITIVES


def translate_template(source: str) -> Translation:
    """Native fields for one template's source; raises Untranslatable."""
    try:
        return _translate(source)
    except (RecursionError, MemoryError):
        raise Untranslatable(None, "the template is nested too deeply to be read") from None


def _translate(source: str) -> Translation:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        err = Untranslatable(None, f"the template is not valid Python: {getattr(exc, 'msg', exc)}")
        err.line = getattr(exc, "lineno", None)
        raise err from None
    notes: list[str] = []
    cls = _answer_class(tree, notes)
    decls, correct, verify = _read_class(cls, notes)
    if not decls:
        raise Untranslatable(cls, "the answer class declares no fields")
    if verify is not None and any(d.verified for d in decls.values()):
        raise Untranslatable(verify, "the class has both VerifiedField declarations and its own verify(); "
                                     "keep one of the two")
    if verify is None:
        verified = {name: d.verified for name, d in decls.items() if d.verified}
        if not verified:
            raise Untranslatable(cls, "no verify() and no VerifiedField: nothing decides whether an answer is correct")
        return Translation(_fields(decls, verified, notes), notes)
    constraints, strategy = VerifyReader(decls, correct).read(verify)
    return Translation(_fields(decls, _merge(constraints), notes), notes, strategy)


def _fields(decls: dict[str, Decl], verified: dict[str, Any], notes: list[str]) -> list[dict]:
    """The native fields of the verified declarations, in declaration order.

    A field nothing checks never decides the verdict; a native field always has a primitive, so
    such fields are left out, and the notes say which.
    """
    unverified = [name for name in decls if name not in verified]
    if unverified:
        notes.append(f"not checked by the template, so not translated: {', '.join(unverified)}")
    return [_native(decls[name], verified[name]) for name in decls if name in verified]


def _answer_class(tree: ast.Module, notes: list[str]) -> ast.ClassDef:
    """The one class deriving from BaseAnswer; other module-level code is ignored (never run)."""
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)
               and any(name_of(b) == "BaseAnswer" for b in n.bases)]
    if len(classes) != 1:
        raise Untranslatable(None, f"expected one class deriving from BaseAnswer, found {len(classes)}")
    for node in tree.body:
        if node is classes[0] or isinstance(node, (ast.Import, ast.ImportFrom)) or is_docstring(node):
            continue
        notes.append(f"line {node.lineno}: module-level `{snippet(node)}` ignored (templates are never executed)")
    return classes[0]


def _read_class(cls: ast.ClassDef, notes: list[str]):
    """Fields, the ``self.correct`` dict and the verify() function of the answer class."""
    decls: dict[str, Decl] = {}
    correct: dict | None = None
    verify: ast.FunctionDef | None = None
    for node in cls.body:
        if is_docstring(node):
            continue
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            decl = _declaration(node, notes)
            if decl is not None:
                decls[decl.name] = decl
        elif isinstance(node, ast.FunctionDef) and node.name in _CORRECT_METHODS:
            correct = _correct_dict(node)
        elif isinstance(node, ast.FunctionDef) and node.name == "verify":
            verify = node
        elif isinstance(node, ast.FunctionDef) and node.name in _IGNORED_METHODS:
            notes.append(f"line {node.lineno}: {node.name}() ignored (partial credit is not part of the verdict)")
        else:
            notes.append(f"line {node.lineno}: `{snippet(node)}` ignored")
    return decls, correct, verify


def _declaration(node: ast.AnnAssign, notes: list[str]) -> Decl | None:
    """A field declaration ``name: type = Field(...) | VerifiedField(...)``.

    Only ``description``, ``ground_truth`` and ``verify_with`` matter to a verdict and are read
    (as literals); other keywords, such as a ``default``, are noted and ignored, never evaluated.
    """
    name = node.target.id
    if name.startswith("_") or name in ("id", "correct", "model_config"):
        return None
    ftype, values = _field_type(node.annotation)
    call = node.value
    kind = name_of(call.func) if isinstance(call, ast.Call) else None
    if call is not None and kind not in ("Field", "VerifiedField"):
        raise Untranslatable(node, "a field is declared with Field(...) or VerifiedField(...)")
    if call is not None and (call.args or any(k.arg is None for k in call.keywords)):
        raise Untranslatable(call, "positional arguments and **kwargs are not supported; use keywords")
    keywords = {k.arg: k.value for k in call.keywords} if call is not None else {}
    for key in sorted(set(keywords) - {"description", "ground_truth", "verify_with"}):
        notes.append(f"line {keywords[key].lineno}: {name}: keyword {key!r} ignored (not part of the verdict)")
    description = literal(keywords["description"]) if "description" in keywords else None
    if not isinstance(description, str) or not description.strip():
        description = name.replace("_", " ")
    decl = Decl(name, ftype, description, node, values)
    if kind == "VerifiedField":
        if "verify_with" not in keywords:
            raise Untranslatable(node, "VerifiedField without verify_with")
        spec = _primitive_spec(keywords["verify_with"])
        if ftype == "str" and spec["type"] in _DATE_PRIMITIVES:
            decl.type = "date"
        gt = literal(keywords["ground_truth"]) if "ground_truth" in keywords else None
        decl.verified = {"spec": spec, "ground_truth": gt}
    return decl


def _field_type(node: ast.AST) -> tuple[str, list[str] | None]:
    """The native type of an annotation: int, float, str, bool, list[str] or Literal[...].

    ``Optional[T]``, ``T | None`` and ``Union[T, None]`` are T: a null extraction is "not
    verifiable", which fails the field just as comparing None would.
    """
    inner = _without_none(node)
    if inner is not node:
        return _field_type(inner)
    if isinstance(node, ast.Name) and node.id in _SCALAR_TYPES:
        return _SCALAR_TYPES[node.id], None
    if isinstance(node, ast.Subscript) and name_of(node.value) in ("list", "List"):
        if isinstance(node.slice, ast.Name) and node.slice.id == "str":
            return "list[str]", None
    if isinstance(node, ast.Subscript) and name_of(node.value) == "Literal":
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        values = [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]
        if len(values) == len(items) and values:
            return "literal", values
    raise Untranslatable(node, "unsupported field type (native types: int, float, str, bool, list[str], "
                               "Literal of strings)")


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _without_none(node: ast.AST) -> ast.AST:
    """T for ``Optional[T]``, ``T | None``, ``None | T`` or ``Union[T, None]``; else the node itself."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        if _is_none(node.right):
            return node.left
        if _is_none(node.left):
            return node.right
    if isinstance(node, ast.Subscript) and name_of(node.value) == "Optional":
        return node.slice
    if isinstance(node, ast.Subscript) and name_of(node.value) == "Union" and isinstance(node.slice, ast.Tuple):
        rest = [e for e in node.slice.elts if not _is_none(e)]
        if len(rest) == 1 and len(node.slice.elts) == 2:
            return rest[0]
    return node


def _literal_kwargs(call: ast.Call, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    if call.args:
        raise Untranslatable(call, "positional arguments are not supported; use keywords")
    out = {}
    for kw in call.keywords:
        if kw.arg is None:
            raise Untranslatable(call, "**kwargs cannot be translated")
        if kw.arg not in skip:
            out[kw.arg] = literal(kw.value)
    return out


def _primitive_spec(node: ast.AST) -> dict:
    """``ExactMatch(normalize=["lowercase", SynonymMap(mapping={...})])`` -> its JSON spec."""
    kind = name_of(node.func) if isinstance(node, ast.Call) else None
    if kind not in known_primitives():
        raise Untranslatable(node, f"verify_with must be one of the built-in primitives "
                                   f"({', '.join(sorted(known_primitives()))})")
    if node.args:
        raise Untranslatable(node, "positional arguments are not supported; use keywords")
    spec: dict[str, Any] = {"type": kind}
    for kw in node.keywords:
        if kw.arg is None:
            raise Untranslatable(node, "**kwargs cannot be translated")
        if kw.arg == "normalize" and isinstance(kw.value, (ast.List, ast.Tuple)):
            spec["normalize"] = [_normalizer(item) for item in kw.value.elts]
        else:
            spec[kw.arg] = literal(kw.value)
    return spec


def _normalizer(node: ast.AST) -> Any:
    if isinstance(node, ast.Call) and name_of(node.func) == "SynonymMap":
        return {"type": "SynonymMap", **_literal_kwargs(node)}
    return literal(node)


def _correct_dict(fn: ast.FunctionDef) -> dict:
    """The literal dict of ``self.correct = {...}`` (the only statement allowed there)."""
    body = [s for s in fn.body if not is_docstring(s)]
    if len(body) != 1 or not isinstance(body[0], ast.Assign) or len(body[0].targets) != 1 \
            or self_attr(body[0].targets[0]) != "correct":
        raise Untranslatable(body[0] if body else fn, f"{fn.name}() may only assign self.correct = {{...}}")
    value = literal(body[0].value)
    if not isinstance(value, dict):
        raise Untranslatable(body[0], "self.correct must be a literal dict")
    return value


def _merge(constraints: list[Constraint]) -> dict[str, tuple[dict, Any]]:
    """One primitive per field: two one-sided bounds merge into NumericRange, anything else is an error."""
    by_field: dict[str, list[Constraint]] = {}
    for c in constraints:
        by_field.setdefault(c.field, []).append(c)
    out = {}
    for name, items in by_field.items():
        if len(items) == 1 and items[0].bound is None:
            out[name] = (items[0].spec, items[0].ground_truth)
            continue
        bounds = {c.bound: c for c in items if c.bound}
        if len(bounds) != len(items) or len(items) > 2:
            raise Untranslatable(items[1].node, f"field {name!r} is checked more than once; a native field has "
                                                "one primitive")
        spec = {"type": "NumericRange", **{k: c.spec[k] for k, c in bounds.items()}}
        out[name] = (spec, None)
    return out


def _native(decl: Decl, verified: Any) -> dict:
    """The native field dict (FORMATS.md) of a declaration and its primitive (or none)."""
    out: dict[str, Any] = {"name": decl.name, "type": decl.type, "description": decl.description,
                           "ground_truth": None, "verify_with": None}
    if decl.values is not None:
        out["values"] = decl.values
    if isinstance(verified, dict):
        out["verify_with"], out["ground_truth"] = verified["spec"], verified["ground_truth"]
    elif verified is not None:
        out["verify_with"], out["ground_truth"] = verified
    return out
