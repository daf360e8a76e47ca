"""The built wheel: one top-level package, every sub-package and its data, nothing else.

The wheel is built from a copy of the checkout (so no ``build/`` folder lands in the work tree)
with the build tools already installed (no network).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from fnmatch import fnmatch
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def package_dirs() -> dict[str, str]:
    """pyproject.toml's package-dir: installed package -> folder of the checkout."""
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]


def installed_path(folder: Path) -> str:
    """Where a folder of the checkout lands in the wheel (``ledger/x`` -> ``evalledger/ledger/x``)."""
    best = max((f for f in package_dirs().values() if folder == REPO / f or (REPO / f) in folder.parents),
               key=len)
    package = next(p for p, f in package_dirs().items() if f == best)
    rest = folder.relative_to(REPO / best).as_posix()
    return "/".join([package.replace(".", "/")] + ([rest] if rest != "." else []))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """The wheel built from a copy of the checkout."""
    work = tmp_path_factory.mktemp("build")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, work / name)
    for folder in package_dirs().values():   # every folder the wheel is built from, and nothing else
        shutil.copytree(REPO / folder, work / folder, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    out = work / "dist"
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--no-index", "-q", str(work), "-w", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=work)
    assert done.returncode == 0, done.stderr
    [built] = out.glob("evalledger-*.whl")
    with zipfile.ZipFile(built) as archive:
        yield archive


def test_top_level_names_only_evalledger(wheel):
    [top_level] = [n for n in wheel.namelist() if n.endswith(".dist-info/top_level.txt")]
    assert wheel.read(top_level).decode().split() == ["evalledger"]
    assert {name.split("/")[0] for name in wheel.namelist() if not name.split("/")[0].endswith(".dist-info")} \
        == {"evalledger"}


def test_every_package_folder_of_the_checkout_is_in_the_wheel(wheel):
    names = set(wheel.namelist())
    folders = [init.parent for f in package_dirs().values() for init in (REPO / f).rglob("__init__.py")
               if "__pycache__" not in init.parts]
    assert len(folders) >= 11
    missing = [installed_path(folder) for folder in folders if f"{installed_path(folder)}/__init__.py" not in names]
    assert missing == []
    modules = [p for f in package_dirs().values() for p in (REPO / f).rglob("*.py") if "__pycache__" not in p.parts]
    assert sorted(f"{installed_path(p.parent)}/{p.name}" for p in modules if
                  f"{installed_path(p.parent)}/{p.name}" not in names) == []


def test_package_data_is_in_the_wheel(wheel):
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["*"]
    data = [p for f in package_dirs().values() for p in (REPO / f).rglob("*")
            if p.is_file() and any(fnmatch(p.name, pattern) for pattern in patterns)
            and "__pycache__" not in p.parts]
    assert any(p.name == "py.typed" for p in data)
    names = set(wheel.namelist())
    assert [p for p in data if f"{installed_path(p.parent)}/{p.name}" not in names] == []
    assert "evalledger/py.typed" in names
    assert any(name.startswith("evalledger/samples/") and name.endswith(".json") for name in names)


def test_the_wheel_runs_as_python_m_evalledger(wheel, tmp_path):
    """Unpacked on its own (no checkout on the path), ``python -m evalledger --help`` lists the commands."""
    wheel.extractall(tmp_path / "site")
    done = subprocess.run([sys.executable, "-m", "evalledger", "--help"], capture_output=True, text=True,
                          cwd=tmp_path, env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"},
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "demo" in done.stdout and "verify" in done.stdout
