"""The peak RSS of a child process, its own and not its parent's.

Linux carries a process's peak RSS across fork and exec: a child started straight from a test
worker that holds 250 MB reports at least the worker's size at the moment of the fork, which moves
as the worker runs other tests. ``peak_rss_mb`` starts the command from a small launcher process,
so the figure ``wait4`` gives is the command's own.
"""

from __future__ import annotations

import subprocess
import sys

# Runs argv[1:], passes its stderr through, and prints its exit code and peak RSS (KB).
LAUNCHER = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def peak_rss_mb(argv: list[str]) -> tuple[int, float, str]:
    """(exit code, peak RSS in MB, stderr) of one process running ``argv``, launched from a small
    process so the peak is the command's own."""
    launched = subprocess.run([sys.executable, "-c", LAUNCHER, *argv], capture_output=True)
    stderr = launched.stderr.decode(errors="replace")
    if launched.returncode != 0:
        return launched.returncode, 0.0, stderr
    code, maxrss_kb = (int(v) for v in launched.stdout.split())
    return code, maxrss_kb / 1024, stderr
