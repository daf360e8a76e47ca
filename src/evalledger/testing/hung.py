"""A child process that does not stop when asked: make it say where it hangs, then end it.

A test or benchmark starts the child with ``with_stacks(env)`` (``PYTHONFAULTHANDLER=1``) and its
stderr going somewhere it can read (a log file); ``wait_or_dump`` then waits for the child and, if
it is still running after the timeout, sends it SIGABRT, on which faulthandler writes every
thread's Python stack to that stderr before the process dies. What to do with a hung child (fail
the test, count a finding) is the caller's.
"""

from __future__ import annotations

import signal
import subprocess

# How long a child sent SIGABRT has to write its stacks and die before it is killed.
ABORT_GRACE_SECONDS = 10.0


def with_stacks(env: dict[str, str]) -> dict[str, str]:
    """``env`` with faulthandler on, so SIGABRT makes the child write its threads' stacks."""
    return {**env, "PYTHONFAULTHANDLER": "1"}


def wait_or_dump(proc: subprocess.Popen, timeout: float) -> int | None:
    """Wait up to ``timeout`` seconds for ``proc`` to exit and return its exit code. When it is
    still running then: SIGABRT (its stacks go to its stderr), killed if it outlives
    ``ABORT_GRACE_SECONDS`` too, and None is returned (it has ended either way)."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    proc.send_signal(signal.SIGABRT)
    try:
        proc.wait(timeout=ABORT_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return None
