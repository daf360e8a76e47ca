"""The dependency rule as a test: no import cycles, and ``cli -> stages, projections -> ledger``.

The checker lives in ``tests/import_graph.py``; the last tests plant a cycle and a wrong-way
import in a copy of the source to show it fails on each.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from import_graph import PACKAGE_DIRS, cycles, import_edges, layer_violations, modules_of

REPO = Path(__file__).resolve().parents[1]


def test_the_graph_covers_every_module_and_sees_known_imports():
    """Guards against a checker that passes because it saw nothing."""
    modules = modules_of(REPO)
    assert {"evalledger.ledger", "evalledger.stages.dispatcher", "evalledger.projections.reports",
            "evalledger.cli.main", "evalledger.testing.stand_in"} <= set(modules)
    pairs = {(e.importer, e.imported) for e in import_edges(REPO)}
    assert ("evalledger.cli.demo", "evalledger.cli.watch_commands") in pairs
    assert ("evalledger.stages.dispatcher", "evalledger.ledger") in pairs
    assert ("evalledger.projections.case_result", "evalledger.projections.audit") in pairs
    # A lazy import inside a function is an edge too.
    assert ("evalledger.cli.watch_commands", "evalledger.stages.dispatcher") in pairs


def test_the_package_has_no_import_cycles():
    assert cycles(import_edges(REPO)) == []


def test_the_layers_import_only_downwards():
    assert layer_violations(import_edges(REPO), modules_of(REPO)) == []


@pytest.fixture
def source_copy(tmp_path) -> Path:
    """The package's folders copied, to plant bad imports in."""
    for folder in PACKAGE_DIRS:
        shutil.copytree(REPO / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_a_planted_cycle_is_found_even_through_a_lazy_import(source_copy):
    target = source_copy / "ledger" / "filelock.py"
    target.write_text(target.read_text() + "\n\ndef _later():\n    from evalledger.ledger import api  # noqa\n")
    found = cycles(import_edges(source_copy))
    assert any("evalledger.ledger.filelock" in group and "evalledger.ledger.api" in group for group in found)


def test_a_type_checking_import_is_no_cycle_but_still_a_layer_import(source_copy):
    target = source_copy / "ledger" / "schemas.py"
    target.write_text(target.read_text() + "\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from evalledger.ledger import catalog  # noqa\n    from evalledger.cli import main  # noqa\n")
    edges = import_edges(source_copy)
    assert cycles(edges) == []
    assert any("schemas.py" in v and "evalledger.cli.main" in v for v in layer_violations(edges, modules_of(source_copy)))


@pytest.mark.parametrize("folder, module, planted", [
    ("ledger", "verify.py", "from evalledger.stages import dispatcher"),
    ("stages", "template.py", "from evalledger.projections.results import case_status"),
    ("projections", "stats.py", "import evalledger.stages.judge"),
    ("stages", "fuzzy.py", "from evalledger.cli.errors import UsageError"),
    ("cli", "demo.py", "from evalledger.testing import stand_in"),
])
def test_a_planted_wrong_way_import_is_named_with_its_file_and_line(source_copy, folder, module, planted):
    target = source_copy / folder / module
    lines = target.read_text().splitlines()
    target.write_text("\n".join(lines + [planted]) + "\n")
    violations = layer_violations(import_edges(source_copy), modules_of(source_copy))
    assert len(violations) == 1
    assert violations[0].startswith(f"{target}:{len(lines) + 1}: ")
