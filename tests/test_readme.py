"""The README's promises: its two set-up commands, and CI running exactly the test command it gives."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup_commands() -> list[str]:
    """The shell blocks of the README's 'Set up on a fresh machine' section."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Set up on a fresh machine", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)\n```", section, re.S)


def test_readme_keeps_exactly_two_setup_commands_demo_then_tests():
    demo, tests = setup_commands()
    assert demo.endswith("evalledger demo") and "pip install ." in demo
    assert tests.endswith("pytest") and "'.[test]'" in tests


def test_ci_runs_the_readme_test_command():
    _, tests = setup_commands()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert tests in ci.splitlines()
