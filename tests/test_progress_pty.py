"""The progress bar under a real pseudo-terminal: redrawn in place, never wider than the terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
AUDIT = REPO / "benchmarks" / "samples" / "verifyfast-cases.audit.jsonl"
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def run_under_pty(args: list[str], columns: int, timeout: float = 120) -> str:
    """Run ``python -m evalledger ARGS`` with stderr on a pty of ``columns`` columns; its output."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "EVALLEDGER_HOME")}
    proc = subprocess.Popen([sys.executable, "-m", "evalledger", *args], stdout=subprocess.DEVNULL,
                            stderr=follower, stdin=subprocess.DEVNULL, env=env)
    os.close(follower)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(leader)
    assert proc.returncode == 0
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.parametrize("columns", [60, 40, 120])
def test_the_bar_fits_the_terminal_and_redraws_in_place(tmp_path, run_cli, columns):
    home = tmp_path / "h"
    run_cli("init", home=home)
    run_cli("ingest", AUDIT, home=home)
    out = run_under_pty(["--home", str(home), "run"], columns)
    draws = [ANSI.sub("", piece) for piece in re.split(r"[\r\n]", out) if piece.strip()]
    bars = [d for d in draws if "26" in d and ("cases" in d or "/26" in d)]
    assert bars, out
    assert max(len(d) for d in draws) < columns, [d for d in draws if len(d) >= columns]
    assert "26/26" in bars[-1]
    if columns >= 60:  # narrower terminals may cut the ETA, never wrap
        assert bars[-1].strip().endswith("ETA 00:00")
    if columns == 120:
        assert bars[-1].startswith("[") and "judge calls 78" in bars[-1]
