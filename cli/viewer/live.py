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

from aiohttp import web

from evalledger.cli.viewer.state import HomeUnavailable
from evalledger.cli.watch_observer import WATCHED_EVENTS, LedgerHandler, native_observer

MIN_INTERVAL = 0.5
SAFETY_SECONDS = 5.0
HEARTBEAT_SECONDS = 15.0


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

    async def start(self) -> None:
        """Start watching the home's ledger files (or listening to its server store) and the fold loop."""
        loop = asyncio.get_running_loop()
        self.wake = asyncio.Event()
        if self.watch:
            # PostgreSQL: called from the listener thread on each NOTIFY; None for a file store
            self.unsubscribe = self.view.led.subscribe(lambda: loop.call_soon_threadsafe(self.wake.set))
        if self.watch and self.view.led.home is not None and self.unsubscribe is None:
            observer = native_observer()
            observer.schedule(LedgerHandler(lambda: loop.call_soon_threadsafe(self.wake.set)),
                              str(self.view.led.home), recursive=False, event_filter=WATCHED_EVENTS)
            observer.start()
            self.observer = observer
        self.task = asyncio.create_task(self._loop())

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
                self.publish(self.view.seen_head)
            await asyncio.sleep(MIN_INTERVAL)

    def publish(self, seq: int) -> None:
        """Tell every open page the head is now ``seq``."""
        for queue in list(self.clients):
            queue.put_nowait(seq)

    async def stream(self, request: web.Request) -> web.StreamResponse:
        """One page's event stream: the current head at once, then each new head."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        queue: asyncio.Queue = asyncio.Queue()
        self.clients.add(queue)
        try:
            await response.write(f"retry: 2000\nevent: head\ndata: {self.view.seen_head}\n\n".encode())
            while True:
                try:
                    seq = await asyncio.wait_for(queue.get(), HEARTBEAT_SECONDS)
                except asyncio.TimeoutError:
                    await response.write(b": still here\n\n")
                    continue
                if seq is None:
                    break
                await response.write(f"event: head\ndata: {seq}\n\n".encode())
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.clients.discard(queue)
        return response
