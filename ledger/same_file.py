"""A writer's check that the store file it opened is still the one at its path.

A process holds its SQLite store open by descriptor. When the file is removed, or another is put
in its place (a backup restored, a copy of the home moved in) while the process runs, SQLite goes
on writing to the old file, which nobody can open any more: a watch daemon whose home was removed
and restored wrote every event of a batch there, filed the batch's input away as processed, and
left the restored home refused as a store that lost its mirror's events. The check costs a stat
a write transaction, taken under the write lock, before anything is written.
"""

from __future__ import annotations

import os

from evalledger.ledger.filelock import FileLock
from evalledger.ledger.persistence import StoreReplaced


class OpenedFile:
    """The (device, inode) of a store file as it was opened; ``check()`` raises StoreReplaced when
    ``path`` now names another file or none."""

    __slots__ = ("path", "identity")

    def __init__(self, path: str):
        self.path = os.path.abspath(path)   # a library caller may change directory after the open
        st = os.stat(self.path)
        self.identity = (st.st_dev, st.st_ino)

    def check(self) -> None:
        """Raise StoreReplaced unless ``path`` is still the file that was opened."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise StoreReplaced(f"{self.path}: is gone (removed, or its home moved or removed) since this process "
                                "opened it; nothing was written. Run the command again where the store is "
                                "now") from None
        if (st.st_dev, st.st_ino) != self.identity:
            raise StoreReplaced(f"{self.path}: is no longer the file this process opened: another file was put "
                                "in its place (a backup restored, a copy of the home) while it ran; nothing was "
                                "written to either. Run the command again: it opens the file there now")


class CheckedHold:
    """``with``: take ``lock`` exclusively, then check ``opened`` (the lock given back when the
    check fails). A plain class, as ``FileLock``'s own holds: it is taken once per append."""

    __slots__ = ("lock", "opened")

    def __init__(self, lock: FileLock, opened: OpenedFile):
        self.lock, self.opened = lock, opened

    def __enter__(self) -> None:
        self.lock.acquire()
        try:
            self.opened.check()
        except BaseException:
            self.lock.release()
            raise

    def __exit__(self, *exc: object) -> None:
        self.lock.release()
