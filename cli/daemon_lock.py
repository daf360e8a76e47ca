"""One watch daemon per home: an ``fcntl.flock`` on ``<home>/watch.lock`` with the holder's pid inside.

The kernel drops a flock when its holder dies, however it dies (SIGKILL included), so a crashed
daemon never leaves the home locked: the file may stay behind with a stale pid in it, but the
lock on it is gone. The file is never deleted, because deleting a locked file lets a second
daemon lock a new file of the same name while the first still holds the old one.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

LOCK_NAME = "watch.lock"


class AlreadyRunning(Exception):
    """Another daemon holds the home's watch lock; ``pid`` is the one written in the lock file."""

    def __init__(self, path: Path, pid: int | None):
        self.path = path
        self.pid = pid
        who = f"pid {pid}" if pid else "another process (pid unknown)"
        super().__init__(f"a watch daemon is already running for this home: {who} holds {path}")


class WatchLock:
    """The held lock on ``<home>/watch.lock``; ``release()`` (or leaving the ``with``) gives it up."""

    def __init__(self, path: Path, fd: int):
        self.path = path
        self._fd: int | None = fd

    def release(self) -> None:
        """Unlock and close; the file stays (see the module docstring)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "WatchLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def read_pid(path: Path) -> int | None:
    """The pid written in a lock file, or None when it is empty or unreadable."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def acquire(home: str | os.PathLike) -> WatchLock:
    """Take the home's watch lock without waiting, or raise AlreadyRunning naming the holder's pid."""
    path = Path(home) / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        pid = read_pid(path)
        if pid is None:  # the holder is between truncating and writing its pid: look once more
            time.sleep(0.05)
            pid = read_pid(path)
        raise AlreadyRunning(path, pid) from None
    # Only the holder writes, so readers see either the old pid or ours, never a mix.
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return WatchLock(path, fd)
