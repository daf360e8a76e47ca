"""Fixtures shared by the test files: a fresh home, and the CLI run as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def cli(*args: str, home: str | os.PathLike | None = None, env: dict | None = None, timeout: float = 120,
        cwd: str | os.PathLike | None = None, input: bytes | None = None) -> subprocess.CompletedProcess:
    """Run ``evalledger [--home HOME] ARGS`` as ``python -m evalledger`` and capture its output (text)."""
    command = [sys.executable, "-m", "evalledger"]
    if home is not None:
        command += ["--home", str(home)]
    full_env = dict(os.environ)
    full_env.update(env or {})
    result = subprocess.run(command + [str(a) for a in args], capture_output=True, env=full_env,
                            timeout=timeout, cwd=cwd, input=input)
    result.stdout = result.stdout.decode("utf-8", "replace")
    result.stderr = result.stderr.decode("utf-8", "replace")
    return result


@pytest.fixture
def run_cli():
    """The ``cli`` helper: ``run_cli("verify", home=home)`` -> CompletedProcess with text output."""
    return cli


@pytest.fixture
def home(tmp_path) -> Path:
    """A freshly initialised, empty evalledger home."""
    from evalledger import ledger
    return ledger.init_home(tmp_path / "home")


def pytest_addoption(parser):
    """``--skip-postgres``: skip (rather than fail) the PostgreSQL tests when no server is configured."""
    parser.addoption("--skip-postgres", action="store_true",
                     help="skip the PostgreSQL tests when EVALLEDGER_TEST_PG is unset (they fail otherwise)")


def pytest_configure(config):
    """Pass --skip-postgres to tests/postgres_support.py (and to the processes tests start)."""
    if config.getoption("--skip-postgres"):
        os.environ["EVALLEDGER_SKIP_POSTGRES"] = "1"
