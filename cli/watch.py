"""The watch daemon's loop: inbox files in, pending work run, reports refreshed; stops cleanly on signals.

The daemon orchestrates; it does not judge or render. What it does with a file, with pending
work and with the reports are three callbacks (``Callbacks``): ``cli/watch_commands.py`` passes
the real entry points (intake, dispatcher, projections), tests pass plain functions.

One loop in the main thread does all the work. The observer thread only records what it saw and
sets ``wake``; the loop sleeps on ``wake`` (no busy polling), probing files only while some are
waiting to be ready, and rescanning the inbox every ``rescan_seconds`` because watchers lose
events. Work is found from the ledger, not from memory: whenever the ledger head differs from
the one the last pass started from (our own ingest, or an ``evalledger ingest``/``note`` from a
shell, seen through ``ledger.db-wal``/``events.jsonl``), the dispatcher runs again. So a daemon
killed at any moment finds the same work after a restart.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from evalledger.cli.watch_inbox import InboxTracker, is_ignored, scan_inbox
from evalledger.cli.watch_log import Log
from evalledger.cli.watch_observer import ObserverLogForwarder, start_observer
from evalledger.ledger import StoreReplaced
from evalledger.stages.intake import DEFAULT_MAX_RESPONSE_CHARS


@dataclass(frozen=True)
class WatchOptions:
    """How the daemon watches; the defaults are the ones docs/watch.md describes."""

    rescan_seconds: float = 30.0   # safety-net rescan of the inbox
    polling: bool = False          # PollingObserver, for network filesystems
    once: bool = False             # process the inbox and pending work, then return
    quiet: float = 0.2             # a renamed-in or closed file must hold still this long
    settle: float = 1.0            # a file of unknown origin must be unchanged this long
    grace_seconds: float = 10.0    # after SIGTERM/SIGINT, in-flight work may finish within this
    max_response_chars: int = DEFAULT_MAX_RESPONSE_CHARS   # a longer response rejects its file


@dataclass
class Callbacks:
    """What the daemon does; each may raise, the daemon logs it and carries on."""

    ingest: Callable[[Path], Any]    # one ready inbox file -> a result with ``.status``
    # process(between_cases, should_stop): run every pending step until idle -> a summary; calls
    # between_cases() as cases finish (the daemon ingests then) and asks should_stop() before each
    # case starts (True once a stop was requested: the pass starts no new case).
    process: Callable[[Callable[[], None], Callable[[], bool]], Any]
    refresh: Callable[[], list]      # rewrite the reports -> their paths
    head: Callable[[], Any]          # the ledger head, compared to notice new events
    # subscribe(wake) -> stop: calls wake() when a server store announces appends (None: files tell)
    subscribe: Callable[[Callable[[], None]], Callable[[], None] | None] | None = None
    # put_back(home): before each rescan, put back in the inbox the files a killed ingest left
    # hidden in processed/ or rejected/ (intake_files.put_back_taken)
    put_back: Callable[[Path], Any] | None = None


class Abandoned(BaseException):
    """Raised in the main thread to abandon in-flight work after a stop request (not an Exception,
    so that no ``except Exception`` in a callback swallows it)."""


@dataclass
class Outcome:
    """What a daemon run did, for --once callers and the demo."""

    ingested: dict[str, int] = field(default_factory=dict)   # status -> count
    batches: int = 0
    errors: int = 0
    reports: list[Path] = field(default_factory=list)   # written by the last refresh
    abandoned: bool = False
    stopped: str | None = None        # why the last dispatcher pass stopped early (judge unavailable)
    replaced: str | None = None       # the home's store was removed or replaced under the daemon: why it stopped


class Daemon:
    """One watch daemon on one home; ``run()`` blocks until stopped (or idle, with ``once``)."""

    def __init__(self, home: Path, callbacks: Callbacks, options: WatchOptions = WatchOptions(),
                 log: Log | None = None, on_abandon: Callable[[], None] | None = None):
        self.home = Path(home)
        self.on_abandon = on_abandon       # called once in-flight work was abandoned (the CLI arms an exit)
        self.inbox = self.home / "inbox"
        self.callbacks = callbacks
        self.options = options
        self.log = log or Log()
        self.tracker = InboxTracker(quiet=options.quiet, settle=options.settle)
        self.outcome = Outcome()
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self._lock = threading.Lock()      # guards the tracker between observer thread and loop
        self._busy = False                 # inside a callback: a stop must wait or abandon it
        self._signals = 0
        self._grace_over = False
        self._done_head: Any = None        # head the last completed dispatcher pass started from
        self._reported_head: Any = None    # head the reports were last refreshed at
        self._failed: dict[Path, tuple[int, int]] = {}   # files whose ingest raised, by (size, mtime)
        self._retry_batch = False          # the last dispatcher pass raised: try again at the next rescan
        self._between_at = 0.0             # when files were last looked at during a pass

    # --- the loop ----------------------------------------------------------------------------------
    def run(self) -> Outcome:
        """Watch until stopped; returns what was done. Installs SIGTERM/SIGINT handlers when it can."""
        restore = self._install_signals()
        forward = ObserverLogForwarder(self.log)
        logging.getLogger("watchdog").addHandler(forward)
        judge_lines = ObserverLogForwarder(self.log, "judge")   # a retry's warning as a line of the log too
        judge_log = logging.getLogger("evalledger.judge")
        judge_log.addHandler(judge_lines)
        judge_propagates, judge_log.propagate = judge_log.propagate, False
        observer = None if self.options.once else start_observer(
            self.home, self.inbox, self.options.polling,
            on_inbox=lambda path, kind: self.inbox_event(path, kind), on_ledger=self.wake.set)
        # A server store (PostgreSQL) announces appends by other machines: LISTEN/NOTIFY wakes the
        # loop, which then compares heads (a lost notification is made up for at the next rescan).
        unsubscribe = self.callbacks.subscribe(self.wake.set) \
            if observer is not None and self.callbacks.subscribe is not None else None
        self.log("started", home=str(self.home), pid=os.getpid(), once=self.options.once,
                 observer="none" if observer is None else type(observer).__name__,
                 rescan_seconds=self.options.rescan_seconds)
        try:
            self._loop()
        except Abandoned:
            self.outcome.abandoned = True
            if self.on_abandon is not None:
                self.on_abandon()
            self.log("abandoned", level="warning",
                     reason="in-flight work abandoned; recorded calls and committed events stay usable")
        finally:
            if unsubscribe is not None:
                unsubscribe()
            if observer is not None:
                forward.quiet = True   # watchdog complains about its own threads while they stop
                observer.stop()
                observer.join(timeout=5)
            logging.getLogger("watchdog").removeHandler(forward)
            judge_log.removeHandler(judge_lines)
            judge_log.propagate = judge_propagates
            restore()
        self.log("stopped", ingested=self.outcome.ingested, batches=self.outcome.batches,
                 errors=self.outcome.errors)
        return self.outcome

    def _loop(self) -> None:
        next_rescan = 0.0
        # --once scans the inbox at the start only; it has no watcher whose losses to make up for.
        interval = math.inf if self.options.once else self.options.rescan_seconds
        while not self.stopping.is_set():
            self.wake.clear()
            now = time.monotonic()
            if now >= next_rescan:
                self._rescan()
                next_rescan = now + interval
            ingested = self._ingest_ready()
            if self.stopping.is_set():
                break
            if ingested or self.callbacks.head() != self._done_head:
                self._process_batch()
                continue  # look at the head again: events may have arrived during the pass
            with self._lock:
                pending = self.tracker.next_check()
            if self.options.once and pending is None:
                break
            until_rescan = max(0.0, next_rescan - time.monotonic())
            self.wake.wait(until_rescan if pending is None else min(pending, until_rescan))

    def stop(self) -> None:
        """Ask the loop to stop taking work (thread-safe; what the signal handlers do first)."""
        self.stopping.set()
        self.wake.set()

    # --- inbox -------------------------------------------------------------------------------------
    def _rescan(self) -> None:
        """Add inbox files the watcher may have missed (at start, and as a periodic safety net),
        after putting back those a killed ingest left half filed away."""
        if self.callbacks.put_back is not None:
            self.callbacks.put_back(self.home)
        found = scan_inbox(self.inbox)
        with self._lock:
            for path in found:
                if not self._failed_before(path):
                    self.tracker.found(path)
        if self._retry_batch:
            self._retry_batch = False
            self._done_head = None

    def _failed_before(self, path: Path) -> bool:
        """True for a file whose ingest raised and that has not changed since."""
        probe = self._failed.get(path)
        if probe is None:
            return False
        try:
            st = path.stat()
        except FileNotFoundError:
            self._failed.pop(path, None)
            return True
        return probe == (st.st_size, st.st_mtime_ns)

    def _ingest_ready(self) -> int:
        """Ingest every ready inbox file, in name order; returns how many were handed to intake."""
        with self._lock:
            ready = self.tracker.ready()
        count = 0
        for path in ready:
            if self.stopping.is_set():
                break
            with self._lock:
                self.tracker.forget(path)
            self._ingest_one(path)
            count += 1
        return count

    def _ingest_one(self, path: Path) -> None:
        """Hand one file to intake and log what became of it."""
        started = time.monotonic()
        try:
            st = path.stat()
        except FileNotFoundError:
            return  # taken away between the probe and now: nothing to do
        try:
            result = self._call(self.callbacks.ingest, path)
        except StoreReplaced as exc:
            self._store_replaced(exc, file=path.name)
            return
        except Exception as exc:
            # A full disk is no fault of the file: the next rescan tries it again (space may have
            # been freed by then), as a failed pass is; remembered, it stayed in the inbox for good.
            if not _disk_full(exc):
                self._failed[path] = (st.st_size, st.st_mtime_ns)
            self._error("ingest_failed", exc, file=path.name)
            return
        status = str(getattr(result, "status", result))
        self.outcome.ingested[status] = self.outcome.ingested.get(status, 0) + 1
        fields = {"file": path.name, "status": status, **_result_fields(result), "ms": _ms(started)}
        self.log("ingested", level="warning" if status == "rejected" else "info", **fields)

    # --- pending work and reports ------------------------------------------------------------------
    def _process_batch(self) -> None:
        """Run the dispatcher until idle, then refresh the reports if the ledger moved."""
        started = time.monotonic()
        seen = self.callbacks.head()
        try:
            summary = self._call(self.callbacks.process, self.between_cases, self.stopping.is_set)
            current = self.callbacks.head()
            reports = []
            if current != self._reported_head:   # even when stopping: the reports match the ledger at exit
                reports = self._call(self.callbacks.refresh) or []
                self._reported_head = current
                self.outcome.reports = list(reports)
        except StoreReplaced as exc:
            self._store_replaced(exc)
            return
        except Exception as exc:
            self._error("batch_failed", exc)
            self._done_head = self.callbacks.head()  # retried at the next rescan, not in a hot loop
            self._retry_batch = True
            return
        self._done_head = seen
        if getattr(summary, "stop", None) == "requested":
            # Our own stop (SIGTERM/SIGINT): not a failure to report; the cases not started stay
            # pending and the next start takes them.
            self.log("pass_stopped", reason="stop requested", pending=getattr(summary, "pending", None))
            summary.stopped = None
        self.outcome.stopped = getattr(summary, "stopped", None)
        if self.outcome.stopped:
            # The judge could not answer: its cases stay pending. Try again at the next rescan,
            # not at once (the run's own events moved the head, which would start a hot loop).
            self._done_head = current
            self._retry_batch = True
            self.log("run_stopped", level="warning", reason=self.outcome.stopped,
                     pending=getattr(summary, "pending", None), retry_in_seconds=self.options.rescan_seconds)
        if current != seen or reports:   # a pass that found nothing to do is not worth a line
            self.outcome.batches += 1
            fields = {**_result_fields(summary, prefix="run_"), "head": getattr(current, "seq", str(current)),
                      "reports": len(reports), "ms": _ms(started)}
            self.log("batch", **fields)

    def between_cases(self) -> None:
        """Called by a running dispatcher pass between cases: ingest the inbox files that became
        ready, so a long pass (a remote judge) does not hold new drops back; their cases join the
        pass at its next scan. Looks at the files at most every ``quiet`` seconds."""
        now = time.monotonic()
        if self.stopping.is_set() or now - self._between_at < self.options.quiet:
            return
        self._between_at = now
        self._ingest_ready()

    def _call(self, fn: Callable, *args):
        """Run a callback, marking the daemon busy so a signal knows work is in flight (an ingest
        inside a dispatcher pass leaves the pass marked busy)."""
        outer, self._busy = self._busy, True
        try:
            return fn(*args)
        finally:
            self._busy = outer

    def _store_replaced(self, exc: StoreReplaced, **fields) -> None:
        """The home's ledger.db was removed, or another put in its place, while the daemon ran: its
        writes would go to a file nobody can open. Nothing was written; the daemon stops (the
        input stays in the inbox), and a daemon started again opens the home as it is now."""
        self.outcome.replaced = str(exc)
        self._error("store_replaced", exc, **fields)
        self.stop()

    def _error(self, event: str, exc: BaseException, **fields) -> None:
        self.outcome.errors += 1
        where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        at = f"{Path(where[0].filename).name}:{where[0].lineno}" if where else ""
        self.log(event, level="error", error=f"{type(exc).__name__}: {exc}", at=at, **fields)

    # --- watching ----------------------------------------------------------------------------------
    def inbox_event(self, path: Path, kind: str) -> None:
        """Called from the observer thread for a file event in the inbox."""
        in_folder = path.parent.parent == self.inbox and not is_ignored(path.parent.name)  # a dropped folder
        if is_ignored(path.name) or (path.parent != self.inbox and not in_folder):
            return
        with self._lock:
            if self.options.polling:
                self.tracker.found(path)   # polling cannot tell a rename from a write
            else:
                self.tracker.on_event(path, kind)
        self.wake.set()

    # --- signals -----------------------------------------------------------------------------------
    def _install_signals(self) -> Callable[[], None]:
        """SIGTERM/SIGINT stop the daemon; returns a function restoring the previous handlers."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        return lambda: [signal.signal(sig, handler) for sig, handler in previous.items()]

    def _on_signal(self, signum, frame) -> None:
        """First signal: stop taking work, give in-flight work ``grace_seconds``. Then abandon it."""
        self._signals += 1
        if self._signals == 1:
            self.log("stopping", signal=signal.Signals(signum).name, busy=self._busy,
                     grace_seconds=self.options.grace_seconds)
            self.stop()
            if self._busy:
                threading.Thread(target=self._grace_timer, args=(signum,), daemon=True).start()
            return
        if self._busy and (self._grace_over or self._signals > 1):
            raise Abandoned()

    def _grace_timer(self, signum: int) -> None:
        """After the grace period, re-deliver the signal to the main thread to abandon in-flight work,
        and again every second while that work is still in flight: an ``Abandoned`` raised inside
        the event loop's own code (scheduling a task's next step) rather than a task's is logged and
        dropped by asyncio, and the run then waited forever for the task it left behind."""
        time.sleep(self.options.grace_seconds)
        if self._busy:
            self._grace_over = True
        while self._busy:
            # A real signal to the main thread: it also interrupts a blocking sleep or select there.
            signal.pthread_kill(threading.main_thread().ident, signum)
            time.sleep(1.0)


def _result_fields(result: Any, prefix: str = "") -> dict[str, Any]:
    """Loggable fields of an entry point's result: its simple, non-empty attributes, and the first
    error of a rejection (intake's ``error_lines()``)."""
    if result is None or isinstance(result, (str, int, float)):
        return {}
    items = getattr(result, "__dict__", {}) or {}
    fields = {prefix + k: v for k, v in items.items() if not k.startswith("_") and k not in ("status", "file")
              and v is not None and isinstance(v, (str, int, float, bool))}
    errors = result.error_lines() if hasattr(result, "error_lines") else []
    if errors:
        fields[prefix + "errors"] = len(errors)
        fields[prefix + "first_error"] = errors[0]
    return fields


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)



def _disk_full(exc: BaseException) -> bool:
    """True for a failure the disk's room caused (``ledger.DiskFull``, or SQLite's or the system's
    own full-disk error): nothing about the file, so worth trying again."""
    from evalledger.ledger.persistence import DiskFull, is_disk_full
    return isinstance(exc, DiskFull) or is_disk_full(exc)
