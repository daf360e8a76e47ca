"""The package's import graph built from the source with ``ast``, and the two rules it must keep.

- No cycles: no module reaches itself through the imports that run (imports inside functions
  count, since a lazy import that dodges a cycle is still one; ``if TYPE_CHECKING:`` imports do
  not, since they never run).
- Layers: ``cli -> stages, projections -> ledger``. ``ledger`` imports none of the layers above
  it; ``stages`` and ``projections`` import ``ledger`` but not ``cli`` and not each other (today's
  code keeps them apart: the dispatcher never renders and the folds never judge); ``cli`` may
  import everything but the test kits. ``evalledger.testing`` may use any layer.

import-linter cannot check this: grimp finds modules by walking the top package's folder, and our
layers are mapped into ``evalledger`` from folders beside it (``package-dir``), so it reports that
``evalledger.cli`` does not exist.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

# Folder of the checkout -> the package it is installed as (pyproject.toml's package-dir).
PACKAGE_DIRS = {
    "src/evalledger": "evalledger",
    "ledger": "evalledger.ledger",
    "stages": "evalledger.stages",
    "projections": "evalledger.projections",
    "cli": "evalledger.cli",
}

# Each layer and the layers it may import (a layer may always import itself).
ALLOWED = {
    "evalledger.ledger": set(),
    "evalledger.stages": {"evalledger.ledger"},
    "evalledger.projections": {"evalledger.ledger"},
    "evalledger.cli": {"evalledger.ledger", "evalledger.stages", "evalledger.projections"},
    "evalledger.testing": {"evalledger.ledger", "evalledger.stages", "evalledger.projections",
                           "evalledger.cli"},
    "evalledger": {"evalledger.cli"},   # the root package and ``python -m evalledger``
}


@dataclass(frozen=True)
class Edge:
    """One import: ``importer`` imports ``imported`` at ``line``; ``runs`` is False under TYPE_CHECKING."""

    importer: str
    imported: str
    line: int
    runs: bool


def modules_of(repo: Path) -> dict[str, tuple[Path, bool]]:
    """Every module of the package: its dotted name -> (file, whether it is a package ``__init__``)."""
    found = {}
    for folder, package in PACKAGE_DIRS.items():
        for file in sorted((repo / folder).rglob("*.py")):
            parts = list(file.relative_to(repo / folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            found[".".join([package, *parts])] = (file, is_package)
    return found


def _type_checking_lines(tree: ast.AST) -> set[int]:
    """Line numbers inside ``if TYPE_CHECKING:`` blocks."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                lines.update(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return lines


def _targets(node: ast.Import | ast.ImportFrom, name: str, is_package: bool, modules) -> list[str]:
    """The modules of the package one import statement loads (submodules named in ``from`` count)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = name.split(".") if is_package else name.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    return [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source for alias in node.names]


def import_edges(repo: Path) -> list[Edge]:
    """Every import between two modules of the package, read from the source of the checkout."""
    modules = modules_of(repo)
    edges = []
    for name, (file, is_package) in modules.items():
        tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
        hidden = _type_checking_lines(tree)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in _targets(node, name, is_package, modules):
                while target and target not in modules:   # `import a.b.c` of a name inside a module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.append(Edge(name, target, node.lineno, node.lineno not in hidden))
    return edges


def cycles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), over the imports that run."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.importer, set())
        graph.setdefault(edge.imported, set())
        if edge.runs:
            graph[edge.importer].add(edge.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


def layer_of(module: str) -> str:
    """The layer a module belongs to: the longest key of ALLOWED that is it or a package above it."""
    return max((layer for layer in ALLOWED if module == layer or module.startswith(layer + ".")), key=len)


def layer_violations(edges: list[Edge], files: dict[str, tuple[Path, bool]]) -> list[str]:
    """One line per import that crosses the layers the wrong way: ``file:line: a imports b``."""
    out = []
    for edge in edges:
        mine, theirs = layer_of(edge.importer), layer_of(edge.imported)
        if theirs != mine and theirs not in ALLOWED[mine]:
            out.append(f"{files[edge.importer][0]}:{edge.line}: {edge.importer} ({mine}) imports "
                       f"{edge.imported} ({theirs})")
    return out
