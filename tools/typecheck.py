"""Run mypy on packages of the ``evalledger`` namespace, as they are mapped on install.

The layers live in root folders (``ledger/`` ...) that ``pyproject.toml`` maps into the namespace
(``evalledger.ledger`` ...). mypy does not run the editable install's import hook, so this builds
the installed layout from symlinks in a temporary directory and points mypy at it:

    python tools/typecheck.py --strict -p evalledger.ledger

Every argument goes to mypy unchanged; the configuration is ``[tool.mypy]`` of pyproject.toml.
Exits with mypy's status.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def stage_namespace(root: Path) -> None:
    """Symlink each mapped package folder into ``root`` under its dotted name, as the wheel lays it out."""
    mapping = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for package, folder in sorted(mapping.items(), key=lambda item: item[0].count(".")):
        target = root.joinpath(*package.split("."))
        target.parent.mkdir(parents=True, exist_ok=True)
        if package.count(".") == 0:  # the root package: its files, not the folder (its children are mapped in)
            target.mkdir(exist_ok=True)
            for entry in (REPO / folder).iterdir():
                if not (target / entry.name).exists():
                    (target / entry.name).symlink_to(entry)
        else:
            target.symlink_to(REPO / folder, target_is_directory=True)


def main(argv: list[str]) -> int:
    """Stage the namespace and run mypy with ``argv`` from inside it."""
    with tempfile.TemporaryDirectory(prefix="evalledger-mypy-") as tmp:
        root = Path(tmp)
        stage_namespace(root)
        env = {**os.environ, "MYPYPATH": str(root)}
        command = [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"), *argv]
        return subprocess.run(command, cwd=root, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
