"""Live pages: the ledger files are watched (watchdog, as the watch daemon does), and a home on a
PostgreSQL store is listened to (``Ledger.subscribe``: LISTEN/NOTIFY, as ``watch`` does), since
other machines' appends change no local file; each wake-up folds the new events and tells every
open page the new head through server-sent events.

Wake-ups are coalesced: after one, the next fold waits at least ``MIN_INTERVAL`` seconds, so a
run appending thousands of events costs a fold every half second, not one per commit. A slow
safety check of the head (``SAFETY_SECONDS``) covers a watcher that missed an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import Callable

from aiohttp import web
from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)

from evalledger.cli.viewer.state import HomeUnavailable
from evalledger.cli.watch_observer import WATCHED_EVENTS, LedgerHandler, native_observer

MIN_INTERVAL = 0.5
SAFETY_SECONDS = 5.0
HEARTBEAT_SECONDS = 15.0
# What the home's parent is watched for: the home folder made, deleted, or moved away or into place.
HOME_EVENTS = [DirCreatedEvent, DirDeletedEvent, DirMovedEvent]


class LiveUpdates:
    """The watcher, the fold loop and the open event streams of one viewer."""

    def __init__(self, view, watch: bool = True):
        self.view = view
        self.watch = watch
        self.clients: set[asyncio.Queue] = set()
        self.wake: asyncio.Event | None = None
        self.task: asyncio.Task | None = None
        self.observer = None
        self.unsubscribe = None
        self.problem: str | None = None     # why the home cannot be read now, once logged
        self.watches: list = []             # the observer's watches now: the home's parent's and the home's
        self.watched: tuple | None = None   # (home folder identity, ledger object) they were made for
        self.home_lost = False              # the watched home folder itself was deleted or moved away

    async def start(self) -> None:
        """Start watching the home's ledger files (or listening to its server store) and the fold loop."""
        loop = asyncio.get_running_loop()
        self.wake = asyncio.Event()
        if self.watch:
            # PostgreSQL: called from the listener thread on each NOTIFY; None for a file store
            self.unsubscribe = self.view.led.subscribe(lambda: loop.call_soon_threadsafe(self.wake.set))
        if self.watch and self.view.led.home is not None and self.unsubscribe is None:
            self.observer = native_observer()
            self.observer.start()
            self._attach()
        self.task = asyncio.create_task(self._loop())

    def _attach(self) -> bool:
        """Point the watches at the home folder as it is now; True when watches were (re)made, False
        when nothing changed or no folder could be watched (tried again at the next wake-up).

        A watch follows the folder it was made on, so a home removed, or moved away, and brought
        back (another folder under the same name) would go unwatched: the home's parent is watched
        too, for the home going and coming back, and the home's own watch is made again then, and
        when the view reopened its ledger (the folder's inode may be reused by the one that comes
        back, so its identity alone does not tell)."""
        if self.observer is None:
            return False
        home = os.path.abspath(str(self.view.led.home))
        try:
            st = os.stat(home)
            identity: tuple | None = (st.st_dev, st.st_ino)
        except OSError:
            identity = None
        if self.watches and not self.home_lost and self.watched == (identity, self.view.led):
            return False
        for watch in self.watches:
            with contextlib.suppress(KeyError):       # already gone with its observer
                self.observer.unschedule(watch)
        self.watches, self.home_lost = [], False
        loop = asyncio.get_running_loop()
        handler = HomeHandler(home, lambda: loop.call_soon_threadsafe(self.wake.set),
                              lambda: loop.call_soon_threadsafe(self._lost))
        targets = [(os.path.dirname(home), HOME_EVENTS)]
        if identity is not None:
            targets.append((home, [*WATCHED_EVENTS, DirDeletedEvent]))
        for target, events in targets:
            try:
                self.watches.append(self.observer.schedule(handler, target, recursive=False, event_filter=events))
            except OSError:      # gone (or unreadable) meanwhile: the next wake-up or safety check tries again
                pass
        self.watched = (identity, self.view.led)
        return bool(self.watches)

    def _lost(self) -> None:
        """The watched home folder went: watch again at the next wake-up (which comes now)."""
        self.home_lost = True
        self.wake.set()

    async def stop(self) -> None:
        """Stop the watcher and the loop; open streams end."""
        if self.observer is not None:
            self.observer.stop()
            self.observer.join(timeout=5)
        if self.unsubscribe is not None:
            await asyncio.to_thread(self.unsubscribe)      # joins the listener (up to a second)
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        for queue in list(self.clients):
            queue.put_nowait(None)

    async def _loop(self) -> None:
        while True:
            # Not asyncio.wait_for: on Python 3.11 it swallows a cancel that lands as the wake-up
            # completes, and the viewer's shutdown then waited for this loop for ever.
            waiting = asyncio.ensure_future(self.wake.wait())
            try:
                await asyncio.wait({waiting}, timeout=SAFETY_SECONDS)
            finally:
                waiting.cancel()
            self.wake.clear()
            try:
                moved = self.view.refresh()
                self.problem = None
            except HomeUnavailable as exc:          # said once, not at every safety check
                if str(exc) != self.problem:
                    logging.getLogger("evalledger.view").warning("%s", exc)
                self.problem, moved = str(exc), False
            except Exception:                       # a fold racing a writer: the next wake-up retries
                logging.getLogger("evalledger.view").exception("refresh failed")
                moved = False
            if moved:
                self.publish(self.view.head_token())
            if self._attach():       # a new watch: what landed before it was in place is looked at now
                self.wake.set()
            await asyncio.sleep(MIN_INTERVAL)

    def publish(self, head: str) -> None:
        """Tell every open page the head is now ``head`` (``HomeView.head_token``)."""
        for queue in list(self.clients):
            queue.put_nowait(head)

    async def stream(self, request: web.Request) -> web.StreamResponse:
        """One page's event stream: the current head at once, then each new head."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        queue: asyncio.Queue = asyncio.Queue()
        self.clients.add(queue)
        try:
            await response.write(f"retry: 2000\nevent: head\ndata: {self.view.head_token()}\n\n".encode())
            while True:
                try:
                    head = await asyncio.wait_for(queue.get(), HEARTBEAT_SECONDS)
                except asyncio.TimeoutError:
                    await response.write(b": still here\n\n")
                    continue
                if head is None:
                    break
                await response.write(f"event: head\ndata: {head}\n\n".encode())
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.clients.discard(queue)
        return response


class HomeHandler(FileSystemEventHandler):
    """Watches a home and its parent: ``on_ledger()`` when a ledger file of the home changes
    (``LedgerHandler``) or the home folder comes back (made, or moved into place); ``on_lost()``
    when the home folder is deleted or moved away. Other folders' events are not its business."""

    def __init__(self, home: str, on_ledger: Callable[[], None], on_lost: Callable[[], None]):
        self.home = home
        self.on_ledger = on_ledger
        self.on_lost = on_lost
        self.ledger = LedgerHandler(on_ledger)

    def on_any_event(self, event: FileSystemEvent) -> None:
        if not event.is_directory:          # from the home's own watch (the parent's sees folders only)
            self.ledger.on_any_event(event)
            return
        source = os.path.abspath(str(event.src_path)) if event.src_path else ""
        dest = os.path.abspath(str(event.dest_path)) if event.dest_path else ""
        if self.home == dest or (self.home == source and isinstance(event, DirCreatedEvent)):
            self.on_ledger()                      # the home is back: look now
        elif self.home == source:
            self.on_lost()                        # the home deleted, or moved away
