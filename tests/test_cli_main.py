"""The command line's own contract: exit codes however it is started."""

from __future__ import annotations

import subprocess
import sys


def test_usage_error_exits_2_when_started_as_a_module(tmp_path):
    # `python -m cli.main` loads cli.main twice (as __main__ and as cli.main); a usage error raised
    # by a command module must still be caught and exit 2, not escape as a traceback.
    subprocess.run([sys.executable, "-m", "evalledger", "--home", str(tmp_path / "h"), "init"], check=True)
    done = subprocess.run([sys.executable, "-m", "evalledger", "--home", str(tmp_path / "h"), "run",
                           "--set", "no_such_setting=1"], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "no_such_setting" in done.stderr and "Traceback" not in done.stderr


def test_no_command_prints_help_and_exits_2():
    done = subprocess.run([sys.executable, "-m", "evalledger"], capture_output=True, text=True)
    assert done.returncode == 2 and "COMMAND" in done.stderr
