"""Log lines of the watch daemon on stderr: readable text, or one JSON object a line.

Every line has a UTC timestamp, a level and an event name, then fields::

    2026-11-22T08:30:00.123Z info  ingested file=bench.json status=accepted
    {"event":"ingested","file":"bench.json","level":"info","status":"accepted","ts":"2026-11-22T08:30:00.123Z"}

Event names and field names are stable (docs/watch.md lists them), so scripts can follow a
daemon with ``--log-format json``.
"""

from __future__ import annotations

import sys
import threading
from datetime import datetime, timezone
from typing import IO, Any

import orjson

from evalledger.stages.printable import escape_unprintable

FORMATS = ("text", "json")


def utc_now() -> str:
    """The current UTC time with milliseconds, ISO 8601 with a Z."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _text_value(value: Any) -> str:
    """A field value for a text line: quoted when it holds spaces or quotes."""
    if isinstance(value, dict):   # counts by name read better as name:count,name:count
        value = ",".join(f"{k}:{v}" for k, v in value.items())
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    if not text or any(c in text for c in ' "=') or not text.isprintable():
        # orjson escapes only what JSON must (below U+0020); the rest (DEL, U+0085, U+2028,
        # bidi overrides) is escaped too, so a file name can neither forge a line nor drive the terminal
        return escape_unprintable(orjson.dumps(text).decode())
    return text


def _utf8(value: Any) -> Any:
    """``value`` with every string made encodable: a file name that is not UTF-8 reaches Python
    as lone surrogates, which orjson refuses; they are written as ``\\udcff`` escapes instead."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {k: _utf8(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_utf8(v) for v in value]
    return value


class Log:
    """Writes log lines in one format to one stream; safe to call from the observer thread."""

    def __init__(self, fmt: str = "text", stream: IO[str] | None = None):
        if fmt not in FORMATS:
            raise ValueError(f"log format must be one of {FORMATS}, not {fmt!r}")
        self.fmt = fmt
        self.stream = stream
        self._lock = threading.RLock()  # re-entrant: a signal handler may log while the main thread is logging

    def __call__(self, event: str, level: str = "info", **fields: Any) -> None:
        """Write one line: ``event`` is a stable name, ``fields`` its details."""
        line = self.format(event, level, fields)
        with self._lock:
            stream = self.stream or sys.stderr
            stream.write(line + "\n")
            stream.flush()

    def format(self, event: str, level: str, fields: dict[str, Any]) -> str:
        """The line for one event, without its newline."""
        ts = utc_now()
        if self.fmt == "json":
            record = {"ts": ts, "level": level, "event": event, **_utf8(fields)}
            return escape_unprintable(orjson.dumps(record, default=str, option=orjson.OPT_SORT_KEYS).decode())
        details = " ".join(f"{key}={_text_value(value)}" for key, value in fields.items())
        return f"{ts} {level:<5} {event}" + (f" {details}" if details else "")
