"""mypy over the public API modules (non-strict), as CI runs it: ``python .ci/typecheck.py``.

mypy finds modules by path and cannot follow the editable install's import hook, and our layers
are mapped into ``evalledger`` from folders beside it (pyproject.toml's package-dir). So this
builds the ``evalledger`` tree the wheel would have, out of symlinks in a temporary folder, and
points mypy at it. The settings are ``[tool.mypy]`` in pyproject.toml; exit code is mypy's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The modules README.md and docs/ name as the Python API. Errors are reported in these only
# (follow_imports = "silent"); the modules they import are still read for their types.
PUBLIC_API = [
    "evalledger.stages.intake",
    "evalledger.stages.intake_status",
    "evalledger.stages.dispatcher",
    "evalledger.stages.config",
    "evalledger.stages.verification",
    "evalledger.stages.fuzzy",
    "evalledger.stages.embedder",
    "evalledger.stages.primitives",
    "evalledger.stages.judge",
    "evalledger.stages.judge.port",
    "evalledger.stages.judge.recorded_calls",
    "evalledger.stages.search",
    "evalledger.projections",
    "evalledger.cli.main",
]


def build_tree(root: Path) -> Path:
    """``root/evalledger`` laid out as installed, each mapped folder a symlink into the checkout."""
    mapping = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    top = root / "evalledger"
    top.mkdir()
    for entry in (REPO / mapping["evalledger"]).iterdir():
        if entry.name != "__pycache__":
            (top / entry.name).symlink_to(entry)
    for package, folder in mapping.items():
        if package != "evalledger":
            (root / package.replace(".", "/")).symlink_to(REPO / folder, target_is_directory=True)
    return root


def main() -> int:
    """Run mypy over PUBLIC_API against the built tree; its exit code."""
    with tempfile.TemporaryDirectory(prefix="evalledger-mypy-") as tmp:
        tree = build_tree(Path(tmp))
        targets = [arg for module in PUBLIC_API for arg in ("-m", module)]
        command = [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"), *targets]
        return subprocess.run(command, cwd=REPO, env={**os.environ, "MYPYPATH": str(tree)}).returncode


if __name__ == "__main__":
    sys.exit(main())
