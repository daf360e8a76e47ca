"""``evalledger --help`` builds the parser without importing any command's implementation.

Measured as a correctness property, not a timing: ``python -X importtime`` lists every module a
start-up imported, and none of the heavy ones (the ledger and its SQLite, pydantic, aiohttp,
cryptography, watchdog, numpy through sqlite_utils...) may be among them. Their cost is what made
``--help`` take 0.35 s; benchmarks/perf/cli_startup_bench.py times it.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from evalledger.cli import commands
from evalledger.cli.main import build_parser
from watch_support import REPO, cli_env

HEAVY = ("aiohttp", "pydantic", "sqlite_utils", "sqlite3", "cryptography", "watchdog", "numpy", "pandas",
         "psycopg", "regex", "dateutil", "orjson", "evalledger.ledger", "evalledger.stages.dispatcher",
         "evalledger.stages.intake", "evalledger.projections", "evalledger.cli.ledger_commands",
         "evalledger.cli.watch_commands", "evalledger.cli.viewer")


def imported(*args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run ``python -X importtime -m evalledger ARGS``; the process and the modules it imported."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "evalledger", *args], capture_output=True,
                          text=True, env=cli_env(), cwd=REPO, timeout=60)
    modules = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    return done, modules


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.mark.parametrize("args", [("--help",), ("verify", "--help"), ("watch", "--help"), ("run", "--help")])
def test_help_imports_no_heavy_module(args):
    done, modules = imported(*args)
    assert done.returncode == 0 and "usage: evalledger" in done.stdout
    assert "evalledger.cli.commands" in modules   # the check sees the package's own imports
    assert heavy_in(modules) == []


def test_a_mistyped_option_is_answered_without_importing_the_command():
    done, modules = imported("status", "--jsn")
    assert done.returncode == 2 and "did you mean '--json'?" in done.stderr
    assert heavy_in(modules) == []


def test_a_command_that_runs_imports_its_handler(tmp_path):
    done, modules = imported("--home", str(tmp_path / "h"), "init")
    assert done.returncode == 0 and "initialised" in done.stdout
    # The handler's own module is loaded by importlib.import_module, which -X importtime does not
    # list; what it imports with import statements is listed.
    assert {"evalledger.ledger", "evalledger.projections.history"} <= modules


def test_every_command_names_a_handler_that_exists():
    parser = build_parser()
    choices = parser._subparsers._group_actions[0].choices
    for name, command in choices.items():
        handler = command.get_default("func")
        assert isinstance(handler, commands.Handler), name
        assert callable(handler.resolve()), name
        assert handler.resolve().__name__ == handler.function and handler.function.startswith("cmd_"), name


def test_the_choices_repeated_for_the_parser_agree_with_their_modules():
    from evalledger.cli.watch_log import FORMATS
    from evalledger.projections.review_queue import STRATA
    from evalledger.stages import intake, limits
    assert commands.LOG_FORMATS == FORMATS and commands.STRATA == STRATA
    assert intake.MAX_RESPONSE_CHARS_LIMIT == limits.MAX_RESPONSE_CHARS_LIMIT
