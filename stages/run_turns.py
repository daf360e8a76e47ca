"""Who runs when: one run of a ledger at a time in a process (a second call returns ``busy``),
runs on one home take turns across processes (``<home>/dispatch.lock``), and which of a
process's passes over a ledger reconcile it in full."""

from __future__ import annotations

import threading

from evalledger.ledger.filelock import FileLock

RECONCILE_EVERY = 20   # passes between full reconciles of a long-lived process (the watch daemon)

_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def process_lock(led) -> threading.Lock:
    """This process's lock for one ledger (by its home, else its store's location)."""
    name = led.label
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(name, threading.Lock())


_PASSES: dict[str, int] = {}


def next_pass_is_full(led) -> bool:
    """True for this process's first pass on ``led`` and every ``RECONCILE_EVERY``-th after it."""
    name = led.label
    count = _PASSES.get(name, 0)
    _PASSES[name] = count + 1
    return count % RECONCILE_EVERY == 0


class home_lock:
    """An exclusive ``FileLock`` on ``<home>/dispatch.lock`` (no-op for a ledger without a home)."""

    def __init__(self, led):
        home = getattr(led, "home", None)
        self.lock = FileLock(str(home / "dispatch.lock")) if home else None

    def __enter__(self):
        if self.lock is not None:
            self.lock.acquire()   # released on exit, or by the kernel on death
        return self

    def __exit__(self, *exc):
        if self.lock is not None:
            self.lock.release()
            self.lock.close()
