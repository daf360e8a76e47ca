"""An inter-process lock on a file (``flock``), held open so each use costs two system calls.

The kernel drops an ``flock`` when its holder dies, so a writer killed with SIGKILL never leaves
the ledger locked. Locks belong to the open file description: two ``FileLock`` objects (even in
one process) exclude each other, which is what two ``Ledger`` objects on one home need.

The hold is a plain class rather than a generator-based context manager: appending one event
takes it once, and the generator machinery cost as much as the two system calls.
"""

from __future__ import annotations

import fcntl
import os
import threading


class FileLock:
    """Exclusive (writers) and shared (snapshot readers) locks on one lock file, re-entrant."""

    def __init__(self, path: str, create: bool = True):
        self.path = path
        self.thread_lock = threading.RLock()
        self._fd: int | None = None
        self._create = create
        self._depth = 0  # nesting of holds by this object (always under thread_lock)
        self._exclusive = _Hold(self, fcntl.LOCK_EX)  # built once: taken once per append
        self._shared = _Hold(self, fcntl.LOCK_SH)

    def _descriptor(self) -> int | None:
        """The open lock file, opened on first use; None when read-only and there is no lock file."""
        if self._fd is None:
            if self._create:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            elif os.path.exists(self.path):
                self._fd = os.open(self.path, os.O_RDONLY)
        return self._fd

    def acquire(self, mode: int = fcntl.LOCK_EX) -> None:
        """Take the thread lock, then the file lock unless this object already holds it.

        Re-entrant: an inner unlock would otherwise release the outer hold, since flock locks
        belong to the open file, not to the call.
        """
        self.thread_lock.acquire()
        if self._depth == 0:
            fd = self._descriptor()
            if fd is not None:
                try:
                    fcntl.flock(fd, mode)
                except BaseException:
                    self.thread_lock.release()
                    raise
        self._depth += 1

    def release(self) -> None:
        """Undo one ``acquire``."""
        self._depth -= 1
        try:
            if self._depth == 0 and self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self.thread_lock.release()

    def exclusive(self) -> "_Hold":
        """``with lock.exclusive():`` writers, across threads and processes."""
        return self._exclusive

    def shared(self) -> "_Hold":
        """``with lock.shared():`` no writer is inside its critical section meanwhile."""
        return self._shared

    def close(self) -> None:
        """Close the lock file (releasing any lock held through it)."""
        with self.thread_lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


class _Hold:
    __slots__ = ("lock", "mode")

    def __init__(self, lock: FileLock, mode: int):
        self.lock, self.mode = lock, mode

    def __enter__(self) -> None:
        self.lock.acquire(self.mode)

    def __exit__(self, *exc: object) -> None:
        self.lock.release()
