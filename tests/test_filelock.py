"""The one flock helper (``evalledger.ledger.filelock``): a second process racing for it, and no other wrapper."""

from __future__ import annotations

import ast
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalledger.ledger.filelock import FileLock, read_holder_pid

REPO = Path(__file__).resolve().parents[1]

HOLDER = """
import sys, time
from evalledger.ledger.filelock import FileLock
lock = FileLock(sys.argv[1])
lock.acquire()
lock.write_holder_pid()
print("held", flush=True)
time.sleep(60)
"""


def hold_in_child(path):
    """A child process that takes the lock, writes its pid and sleeps; returns once it holds it."""
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "held"
    return child


def test_try_acquire_fails_while_another_process_holds_the_lock_and_succeeds_after_it_dies(tmp_path):
    path = tmp_path / "x.lock"
    child = hold_in_child(path)
    lock = FileLock(str(path))
    try:
        assert lock.try_acquire() is False
        assert read_holder_pid(path) == child.pid
        child.send_signal(signal.SIGKILL)  # the kernel drops the flock with its holder
        child.wait(timeout=10)
        assert lock.try_acquire() is True
        lock.write_holder_pid()
        assert read_holder_pid(path) is not None and read_holder_pid(path) != child.pid
        lock.release()
    finally:
        lock.close()
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_blocking_acquire_waits_for_the_other_process(tmp_path):
    path = tmp_path / "x.lock"
    child = hold_in_child(path)
    lock = FileLock(str(path))
    try:
        started = time.monotonic()
        killer = subprocess.Popen([sys.executable, "-c",
                                   f"import os, time, signal; time.sleep(0.5); os.kill({child.pid}, signal.SIGKILL)"])
        lock.acquire()
        assert time.monotonic() - started >= 0.4
        lock.release()
        killer.wait(timeout=10)
    finally:
        lock.close()
        child.wait(timeout=10)


def test_try_acquire_is_reentrant_for_the_holder_and_release_balances(tmp_path):
    lock = FileLock(str(tmp_path / "x.lock"))
    other = FileLock(str(tmp_path / "x.lock"))
    assert lock.try_acquire() and lock.try_acquire()
    lock.release()
    assert other.try_acquire() is False  # still held once
    lock.release()
    assert other.try_acquire() is True
    other.release()
    lock.close(), other.close()


@pytest.mark.parametrize("text", ["", "not a pid", "12x"])
def test_read_holder_pid_is_none_for_what_is_not_a_pid(tmp_path, text):
    path = tmp_path / "x.lock"
    path.write_text(text)
    assert read_holder_pid(path) is None
    assert read_holder_pid(tmp_path / "missing.lock") is None


def test_only_the_filelock_module_calls_flock():
    """Every other lock (dispatch.lock, watch.lock) goes through the one helper."""
    users = []
    for folder in ("ledger", "stages", "projections", "cli", "src"):
        for file in (REPO / folder).rglob("*.py"):
            tree = ast.parse(file.read_text())
            names = {a.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                     for a in node.names} | {node.module for node in ast.walk(tree)
                                             if isinstance(node, ast.ImportFrom)}
            if "fcntl" in names:
                users.append(file.relative_to(REPO).as_posix())
    assert users == ["ledger/filelock.py"]
