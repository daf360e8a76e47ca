"""What an HTTP answer of a chat-completions server is: a reply, an invalid one, a refusal of the
response format, rate limiting, a transient failure, the server unavailable, or this request
rejected (``HttpOutcome.kind``). The openai backend acts on the kind; this module only reads the
status, the headers it needs (``Retry-After``, ``Location``) and the body.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

from evalledger.stages.judge.reply_body import printable, safe_text
from evalledger.stages.judge.response_format import names_the_format

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524})
# The server will not answer anyone with these: retrying cannot help and no case is at fault.
UNAVAILABLE_STATUS = frozenset({401, 403, 404, 407})
MAX_TOKEN_COUNT = 2 ** 53   # usage counts beyond this are not real


@dataclass
class HttpOutcome:
    """What one POST gave, and what kind of thing it was.

    ``kind``: ``reply`` (a usable 200), ``invalid`` (a 200 whose reply cannot be used: asked
    again), ``refused_format`` (a 400/422/500 naming the response format: asked again in the next
    mode), ``rate_limited`` (429), ``transient`` (5xx, timeout, dropped connection, an answer that is not HTTP: retried,
    counted by the breaker), ``unavailable`` (retrying cannot help: the run stops), ``rejected``
    (another 4xx: this request is at fault).
    """

    latency_ms: float
    status: int | None = None
    stopped: bool = False             # the call's case was cancelled (the run stopped) while it was out
    content: str | None = None        # the reply text the model sent (fed back on a re-ask)
    usage: dict[str, Any] | None = None
    error: str | None = None
    kind: str = "reply"
    retry_after: float | None = None
    raw: str | None = None            # what is recorded as raw_reply, always storable text


def classify(status: int, headers, text: str, latency_ms: float, not_utf8: str | None = None,
             token_limit: int | None = None, format_sent: bool = False) -> HttpOutcome:
    """Classify an HTTP answer (see ``HttpOutcome.kind``).

    A refusal of the format is only one when a format was sent (a mode other than ``prompt``):
    in the prompt mode there is no next mode, and the error is classified by its status.
    """
    if 200 <= status < 300:   # a 201 or 203 with a completion is an answer; one without is not a completion
        return _completion(text, latency_ms, not_utf8, token_limit, status)
    if not 200 <= status <= 599:
        # aiohttp passes any three digits (099 reads as 99) and a 1xx it did not ask for (a 101):
        # no answer to the request came, so no request is at fault; the server failed, as with a 5xx
        return HttpOutcome(latency_ms, status, kind="transient",
                           error=f"HTTP {status}: not a final HTTP status (200-599): {printable(text[:300])}")
    if 300 <= status < 400:   # not followed: the base URL is not the server's own (like a 404, it stops the run)
        return HttpOutcome(latency_ms, status, kind="unavailable",
                           error=f"HTTP {status}: the server redirects to {redirect_target(headers.get('Location'))}; "
                                 "redirects are not followed: set OPENAI_BASE_URL to the server's own address")
    detail = f"HTTP {status}: {printable(text[:300])}"
    if format_sent and names_the_format(status, text):
        return HttpOutcome(latency_ms, status, error=detail, kind="refused_format")
    if status == 429:
        return HttpOutcome(latency_ms, status, error=detail, kind="rate_limited",
                           retry_after=_retry_after(headers.get("Retry-After")))
    if status in UNAVAILABLE_STATUS:
        return HttpOutcome(latency_ms, status, error=detail, kind="unavailable")
    if status in RETRYABLE_STATUS or status >= 500:
        return HttpOutcome(latency_ms, status, error=detail, kind="transient",
                           retry_after=_retry_after(headers.get("Retry-After")))
    return HttpOutcome(latency_ms, status, error=detail, kind="rejected")


def redirect_target(location: str | None) -> str:
    """Where a redirect pointed, fit to print and record: without credentials, query or fragment
    (either may carry a token), its text made safe and cut to 200 characters."""
    if not location:
        return "no Location"
    try:
        parts = urlsplit(location.strip())
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:   # a bad port or bracketed host: say so rather than echo it
        return "an unreadable Location"
    if ":" in host:
        host = f"[{host}]"
    where = f"{parts.scheme}://{host}{port}{parts.path}" if parts.scheme else parts.path
    return printable(safe_text(where))[:200] or "an empty Location"


def _completion(text: str, latency_ms: float, not_utf8: str | None, token_limit: int | None,
                status: int = 200) -> HttpOutcome:
    """A 2xx: the reply text, or why it is an invalid reply (or not a chat completion at all)."""
    if not_utf8:
        return HttpOutcome(latency_ms, status, error=not_utf8, kind="invalid", raw=text)
    try:
        body = json.loads(text)
        choice = body["choices"][0]
        message = choice["message"]
        content = message.get("content")
    except (ValueError, RecursionError, KeyError, IndexError, TypeError, AttributeError):
        return HttpOutcome(latency_ms, status, error=f"not a chat completion: {safe_text(text[:200])!r}",
                           kind="transient")
    usage = _usage(body.get("usage"))
    raw = safe_text(content) if isinstance(content, str) else safe_text(text)
    said = raw if isinstance(content, str) else None
    if choice.get("finish_reason") == "length":
        limit = f"max_tokens {token_limit}" if token_limit else "the server's token limit"
        return HttpOutcome(latency_ms, status, content=said, usage=usage, error=f"cut off at {limit}",
                           kind="invalid", raw=raw)
    if not isinstance(content, str):
        refusal = message.get("refusal")
        error = (f"the model refused: {safe_text(str(refusal))[:300]}" if refusal
                 else "the reply has no text content")
        return HttpOutcome(latency_ms, status, usage=usage, error=error, kind="invalid", raw=raw)
    if raw is not content:
        return HttpOutcome(latency_ms, status, content=said, usage=usage, kind="invalid", raw=raw,
                           error="the reply text holds an unpaired surrogate (not UTF-8)")
    return HttpOutcome(latency_ms, status, content=content, usage=usage, raw=content)


_DELAY = re.compile(r"[0-9]+(?:\.[0-9]+)?", re.ASCII)


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header: a number of seconds or an HTTP date."""
    if not value:
        return None
    if _DELAY.fullmatch(value.strip()):
        # RFC 9110 delay-seconds (digits; a fraction allowed): float() alone would also take
        # "1_000", "-5", "nan" and "1e999", none of them a delay a server meant
        seconds = float(value)
        return seconds if math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, OverflowError, IndexError):   # a year or zone of 20 digits overflows
        return None


def _usage(usage: Any) -> dict[str, Any] | None:
    if not isinstance(usage, dict):
        return None
    keep = ("prompt_tokens", "completion_tokens", "total_tokens")
    return {k: usage[k] for k in keep if type(usage.get(k)) is int and 0 <= usage[k] <= MAX_TOKEN_COUNT} or None
