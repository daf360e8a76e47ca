"""The watchdog side of the daemon: one observer on the inbox and on the home's ledger files.

The handlers only forward what they saw (``on_inbox(path, kind)``, ``on_ledger()``); deciding
what to do with it is the daemon's job (``cli.watch``).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Callable

from watchdog.events import (
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers.polling import PollingObserver

from evalledger.cli.watch_inbox import is_ignored
from evalledger.cli.watch_log import Log

# Files of a home whose change means "the ledger may have new events".
LEDGER_FILES = ("ledger.db", "ledger.db-wal", "events.jsonl", "events.jsonl.gz")
# Opens and reads are left out, so that reading a file never wakes anyone.
# A folder renamed into the inbox (DirMovedEvent) brings its files complete.
WATCHED_EVENTS = [FileCreatedEvent, FileMovedEvent, FileModifiedEvent, FileClosedEvent, DirMovedEvent]

# How long watchdog holds an inotify IN_MOVED_FROM to pair it with its IN_MOVED_TO (0.5 s by
# default). Every event of the watch queues behind a held one, and intake moves each ingested file
# out of the inbox to a folder we do not watch, an IN_MOVED_FROM that never pairs: each ingest
# would make the next drop wait half a second. The kernel queues both halves of a rename together,
# so a short wait pairs them just as well; an unpaired half is still handled (FileMovedEvent with
# an empty source or destination).
MOVE_PAIRING_SECONDS = 0.05


def start_observer(home: Path, inbox: Path, polling: bool, on_inbox: Callable[[Path, str], None],
                   on_ledger: Callable[[], None]):
    """Start one observer (polling or native) watching ``inbox`` and the ledger files of ``home``."""
    observer = PollingObserver(timeout=1) if polling else native_observer()
    observer.schedule(InboxHandler(on_inbox), str(inbox), recursive=False, event_filter=WATCHED_EVENTS)
    observer.schedule(LedgerHandler(on_ledger), str(home), recursive=False, event_filter=WATCHED_EVENTS)
    observer.start()
    return observer


def native_observer():
    """inotify with full move events on Linux (a rename into the inbox is told apart from a write);
    the platform's default observer elsewhere."""
    if sys.platform.startswith("linux"):
        from watchdog.observers.inotify import InotifyObserver
        shorten_move_pairing()
        return InotifyObserver(generate_full_events=True)
    from watchdog.observers import Observer
    return Observer()


def shorten_move_pairing() -> None:
    """Set watchdog's move-pairing wait (a class attribute read when a watch is created)."""
    try:
        from watchdog.observers.inotify_move_event_grouper import InotifyMoveEventGrouper
    except ImportError:   # another watchdog layout: keep its default, only latency suffers
        return
    InotifyMoveEventGrouper.delay = MOVE_PAIRING_SECONDS


class InboxHandler(FileSystemEventHandler):
    """Forwards file events in the inbox as ``(path, kind)``: moved (renamed in), created, modified, closed."""

    KINDS = {FileCreatedEvent: "created", FileModifiedEvent: "modified", FileClosedEvent: "closed"}

    def __init__(self, on_inbox: Callable[[Path, str], None]):
        self.on_inbox = on_inbox

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory:
            if isinstance(event, DirMovedEvent) and event.dest_path:  # a folder renamed in: complete
                for path in _files_in(Path(event.dest_path)):
                    self.on_inbox(path, "moved")
            return
        if isinstance(event, FileMovedEvent):
            if event.dest_path:   # moved in (a move out has no destination here)
                self.on_inbox(Path(event.dest_path), "moved")
            return
        kind = self.KINDS.get(type(event))
        if kind:
            self.on_inbox(Path(event.src_path), kind)


def _files_in(folder: Path) -> list[Path]:
    """The regular, non-ignored files directly in a folder dropped into the inbox."""
    if is_ignored(folder.name):
        return []
    try:
        return sorted(p for p in folder.iterdir() if not is_ignored(p.name) and p.is_file() and not p.is_symlink())
    except OSError:  # gone again, or unreadable: the periodic rescan looks again
        return []


class LedgerHandler(FileSystemEventHandler):
    """Calls ``on_ledger()`` when a ledger file of the home changes (another process may have appended)."""

    def __init__(self, on_ledger: Callable[[], None]):
        self.on_ledger = on_ledger

    def on_any_event(self, event: FileSystemEvent) -> None:
        path = event.dest_path if isinstance(event, FileMovedEvent) and event.dest_path else event.src_path
        if not event.is_directory and Path(path).name in LEDGER_FILES:
            self.on_ledger()


class ObserverLogForwarder(logging.Handler):
    """Turns another component's log records into daemon log lines named ``event`` (watchdog's own,
    say an inotify queue overflow: "observer"; the judge's retries and waits: "judge"), so stderr
    stays one format; set ``quiet`` while stopping the observer (it complains then)."""

    def __init__(self, log: Log, event: str = "observer"):
        super().__init__(level=logging.WARNING)
        self.log = log
        self.event = event
        self.quiet = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.quiet:
            self.log(self.event, level=record.levelname.lower(), message=record.getMessage())
