"""CI's static checks (.ci/checks) run before the tests and fail on a finding."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_ci_runs_the_checks_after_installing_and_before_the_tests():
    lines = (REPO / ".ci" / "run").read_text().splitlines()
    checks = next(i for i, line in enumerate(lines) if "bash .ci/checks" in line)
    tests = next(i for i, line in enumerate(lines) if line.endswith(".venv/bin/pytest"))
    assert "pip install '.[test]'" in lines[checks] and checks < tests
    script = (REPO / ".ci" / "checks").read_text()
    assert "set -euo pipefail" in script
    assert all(step in script for step in ("-m ruff check .", "tools/typecheck.py --strict -p evalledger.ledger",
                                           "tools/typecheck.py $(printf", "tests/test_import_rules.py"))


def test_ruff_with_the_project_rules_fails_on_each_kind_of_finding(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nimport os\n\n\ndef public():\n    try:\n        pass\n    except Exception:\n"
                   "        raise ValueError('x')\n\n\ndef _private():\n    return [lambda: i for i in range(3)]\n")
    done = run("ruff", "check", "--config", str(REPO / "pyproject.toml"), "--output-format", "concise", str(bad))
    assert done.returncode == 1
    for code in ("F401", "I001", "B904", "B023", "D103"):
        assert code in done.stdout, done.stdout


def test_mypy_with_the_project_settings_fails_on_a_type_error(tmp_path):
    (tmp_path / "typed.py").write_text("def half(n: int) -> int:\n    return n / 2\n")
    done = run("mypy", "--config-file", str(REPO / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"),
               "typed.py", cwd=tmp_path)
    assert done.returncode == 1 and "Incompatible return value" in done.stdout


def test_the_typecheck_tree_maps_every_layer_like_the_wheel(tmp_path):
    sys.path.insert(0, str(REPO / "tools"))
    try:
        from typecheck import stage_namespace
    finally:
        sys.path.remove(str(REPO / "tools"))
    stage_namespace(tmp_path)
    root = tmp_path
    for module in ("__init__.py", "ledger/api.py", "stages/dispatcher.py", "projections/__init__.py",
                   "cli/main.py", "testing/stand_in.py", "py.typed"):
        assert (root / "evalledger" / module).is_file(), module
