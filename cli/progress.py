"""The run's progress display: a redrawn bar on a terminal, plain lines otherwise.

Shows cases done of total, judge calls, retries, failures, elapsed time and an ETA (from the
mean time per finished case). Plain lines (logs, pipes) come at each tenth of the cases and at
least every ``every_s`` seconds while cases finish, not once per case. Only the display reads
the clock; nothing here reaches an event.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import TextIO

from evalledger.stages.casework import Counters


def _clock(seconds: float | None) -> str:
    """mm:ss (or h:mm:ss); '--:--' when unknown."""
    if seconds is None:
        return "--:--"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


class Progress:
    """Receives the dispatcher's counters; draws them on ``stream`` (stderr by default)."""

    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None, width: int = 24,
                 every_s: float = 5.0):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.width = width
        self.total = 0
        self.started = time.monotonic()
        self.every_s = every_s
        self._last = ""
        self._last_at = 0.0
        self._last_tenth = -1
        self._bar = ""
        self._handler: _AboveTheBar | None = None

    def start(self, total: int, counters: Counters) -> None:
        """A scan found ``total`` cases to do (called again, growing, when new cases arrive)."""
        self.total = total
        if self.tty and self._handler is None:
            self._handler = _AboveTheBar(self)
            logging.getLogger("evalledger").addHandler(self._handler)
        self._draw(counters)

    def update(self, counters: Counters) -> None:
        """A case finished (or failed)."""
        self._draw(counters)

    def finish(self, counters: Counters) -> None:
        """The run is idle; end the bar's line (or write the last plain line)."""
        self._draw(counters, final=True)
        if self._handler is not None:
            logging.getLogger("evalledger").removeHandler(self._handler)
            self._handler = None
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

    def short_line(self, counters: Counters) -> str:
        """The status text for a narrow terminal: the same figures, fewer words."""
        elapsed = time.monotonic() - self.started
        done = counters.cases_done
        eta = elapsed / done * (self.total - done) if done else None
        return (f"{done}/{self.total} calls {counters.judge_calls} retr {counters.retries} "
                f"fail {counters.failures} {_clock(elapsed)} ETA {_clock(eta)}")

    def columns(self) -> int | None:
        """The terminal's width now (it can change while a run draws), None when it cannot be read."""
        try:
            return os.get_terminal_size(self.stream.fileno()).columns or None
        except (OSError, ValueError, AttributeError):
            return None

    def bar_line(self, counters: Counters, columns: int | None) -> str:
        """The bar and the status, fitted to ``columns - 1`` characters so the line never wraps
        (a wrapped line is redrawn below itself at every update instead of in place); the full
        line when the width is unknown."""
        text = self.line(counters)
        if columns is None:
            filled = int(self.width * counters.cases_done / self.total) if self.total else self.width
            return f"[{'#' * filled}{'.' * (self.width - filled)}] {text}"
        room = max(columns - 1, 10)
        if len(text) + 4 > room:
            text = self.short_line(counters)
        width = min(self.width, room - len(text) - 3)
        if width < 5:
            return text[:room]
        filled = int(width * counters.cases_done / self.total) if self.total else width
        return f"[{'#' * filled}{'.' * (width - filled)}] {text}"

    def _draw(self, counters: Counters, final: bool = False) -> None:
        if self.tty:
            self._bar = f"\r{self.bar_line(counters, self.columns())}\x1b[K"
            self.stream.write(self._bar)
            self.stream.flush()
            return
        text = self.line(counters)
        tenth = counters.cases_done * 10 // self.total if self.total else 10
        now = time.monotonic()
        due = final or tenth != self._last_tenth or now - self._last_at >= self.every_s
        if not due or text == self._last:
            return
        self.stream.write(text + "\n")
        self._last, self._last_at, self._last_tenth = text, now, tenth
        self.stream.flush()


class _AboveTheBar(logging.Handler):
    """Prints evalledger's warnings on their own lines above the bar, then redraws the bar.

    Without it a warning (a judge reply asked again, a retry) lands in the middle of the bar's
    line, since the bar is redrawn in place with a carriage return.
    """

    def __init__(self, progress: Progress):
        super().__init__(logging.WARNING)
        self.progress = progress

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = self.progress.stream
            stream.write(f"\r\x1b[K{self.format(record)}\n{self.progress._bar}")
            stream.flush()
        except Exception:  # a display problem must never stop a run
            self.handleError(record)
