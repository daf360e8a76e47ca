"""One watch daemon per home: the shared ``FileLock`` on ``<home>/watch.lock``, with the holder's pid inside.

The kernel drops a flock when its holder dies, however it dies (SIGKILL included), so a crashed
daemon never leaves the home locked: the file may stay behind with a stale pid in it, but the
lock on it is gone. The file is never deleted, because deleting a locked file lets a second
daemon lock a new file of the same name while the first still holds the old one.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from evalledger.ledger.filelock import FileLock, read_holder_pid

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

    def __init__(self, path: Path, lock: FileLock):
        self.path = path
        self._lock: FileLock | None = lock

    def release(self) -> None:
        """Unlock and close; the file stays (see the module docstring)."""
        if self._lock is not None:
            self._lock.release()
            self._lock.close()
            self._lock = None

    def __enter__(self) -> "WatchLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def acquire(home: str | os.PathLike) -> WatchLock:
    """Take the home's watch lock without waiting, or raise AlreadyRunning naming the holder's pid."""
    path = Path(home) / LOCK_NAME
    lock = FileLock(str(path))
    if not lock.try_acquire():
        lock.close()
        pid = read_holder_pid(path)
        if pid is None:  # the holder is between truncating and writing its pid: look once more
            time.sleep(0.05)
            pid = read_holder_pid(path)
        raise AlreadyRunning(path, pid)
    lock.write_holder_pid()
    return WatchLock(path, lock)
