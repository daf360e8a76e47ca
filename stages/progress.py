"""The run's progress display: a redrawn bar on a terminal, plain lines otherwise.

Shows cases done of total, judge calls, retries, failures, elapsed time and an ETA (from the
mean time per finished case). Only the display reads the clock; nothing here reaches an event.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from stages.casework import Counters


def _clock(seconds: float | None) -> str:
    """mm:ss (or h:mm:ss); '--:--' when unknown."""
    if seconds is None:
        return "--:--"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


class Progress:
    """Receives the dispatcher's counters; draws them on ``stream`` (stderr by default)."""

    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None, width: int = 24):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.width = width
        self.total = 0
        self.started = time.monotonic()
        self._last = ""

    def start(self, total: int, counters: Counters) -> None:
        """A scan found ``total`` cases to do (called again, growing, when new cases arrive)."""
        self.total = total
        self._draw(counters)

    def update(self, counters: Counters) -> None:
        """A case finished (or failed)."""
        self._draw(counters)

    def finish(self, counters: Counters) -> None:
        """The run is idle; end the bar's line."""
        self._draw(counters)
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()

    def line(self, counters: Counters) -> str:
        """The status text: cases, judge calls, retries, failures, elapsed, ETA."""
        elapsed = time.monotonic() - self.started
        done = counters.cases_done
        eta = elapsed / done * (self.total - done) if done else None
        return (f"cases {done}/{self.total} | judge calls {counters.judge_calls} | retries {counters.retries} "
                f"| failures {counters.failures} | elapsed {_clock(elapsed)} | ETA {_clock(eta)}")

    def _draw(self, counters: Counters) -> None:
        text = self.line(counters)
        if self.tty:
            filled = int(self.width * counters.cases_done / self.total) if self.total else self.width
            self.stream.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] {text}\x1b[K")
        elif text != self._last:
            self.stream.write(text + "\n")
        self._last = text
        self.stream.flush()
