"""The openai backend: any OpenAI-compatible chat-completions server over aiohttp.

One connection pool per event loop, a concurrency limit, a per-request timeout, exponential
backoff with jitter on 429, 5xx, timeouts and dropped connections (honouring Retry-After), a
bounded number of attempts, and re-asking with the validation error when a reply does not fit
the role's schema. The reply schema travels in the configured response-format mode
(``response_format.py``: ``json_schema`` strict, ``json_object`` with the schema, or in the
prompt); a server that refuses the format moves the backend to the next mode for the rest of the
run, and every refused call is asked again, those in flight at the switch included.

The API key is read from the environment once, sent only in the Authorization header, and
removed from any text that could be recorded or logged (server error bodies included).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import re
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import aiohttp

from evalledger.stages.judge.calls import Attempt, JudgeCallFailed, JudgeError, PendingCall
from evalledger.stages.judge.replies import decode_reply
from evalledger.stages.judge.response_format import (
    FormatModes, messages_for, names_the_format, response_format_field,
)
from evalledger.stages.judge.roles import Model
from evalledger.stages.judge.settings import DEFAULT_BASE_URL, JudgeSettings

# Keys shorter than this are placeholders, redacted only where they stand as a whole token.
SHORT_KEY = 12

log = logging.getLogger("evalledger.judge")
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524})


@dataclass
class HttpOutcome:
    """What one POST gave: a reply text, or an error and whether trying again may help."""

    latency_ms: float
    status: int | None = None
    content: str | None = None
    usage: dict[str, Any] | None = None
    error: str | None = None
    retryable: bool = False
    retry_after: float | None = None
    refused_format: bool = False


class OpenAIBackend:
    """Chat completions against ``settings.resolved_base_url()`` with ``settings.model``."""

    name = "openai"
    network = True

    def __init__(self, settings: JudgeSettings):
        self.settings = settings
        self.model = settings.model or os.environ.get("OPENAI_MODEL")
        if not self.model:
            raise JudgeError("the openai judge needs a model: set OPENAI_MODEL, or pass --model to "
                             "run or watch (replay takes the live model from OPENAI_MODEL only)")
        self.url = settings.resolved_base_url() + "/chat/completions"
        self._key = os.environ.get(settings.api_key_env) or None
        if not self._key and settings.resolved_base_url() == DEFAULT_BASE_URL.rstrip("/"):
            # The public API answers every call 401 without a key: refuse before any case fails.
            raise JudgeError(f"the openai judge needs an API key for {DEFAULT_BASE_URL}: set "
                             f"{settings.api_key_env} (or OPENAI_BASE_URL for a local server that needs none)")
        self.formats = FormatModes(settings.response_format)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: asyncio.Semaphore | None = None
        self._random = random.Random()

    def identities(self, role: str) -> list[tuple[str, str | None]]:
        return [(self.name, self.model)]

    # --- the call ---------------------------------------------------------------------------------
    async def answer(self, call: PendingCall) -> Model:
        """Ask until a valid reply comes, within the bounds; every attempt is recorded."""
        s = self.settings
        schema = call.spec.reply_schema(call.request)
        conversation = list(call.messages)
        number, failures, invalid = call.first_attempt, 0, 0
        while True:
            async with self._slots_now():
                mode = self.formats.current   # chosen once a slot is free: a switch while waiting counts
                sent = messages_for(mode, conversation, schema)
                outcome = await self._post(sent, schema, call.role, mode)
            record = Attempt(number, usage=outcome.usage, latency_ms=outcome.latency_ms,
                             http_status=outcome.status, cost=self._cost(outcome.usage),
                             sent=sent if sent != call.messages else None, response_format=mode)
            retry_mode = self.formats.after_refusal(mode) if outcome.refused_format else None
            if retry_mode is not None:  # not an attempt that counts: the server took nothing
                record.error = (f"the server refused response_format {mode} ({self._redact(outcome.error or '')[:200]}); "
                                f"asking again in mode {retry_mode}")
                await call.record(record)
                number += 1
                continue
            if outcome.error is not None:
                record.error = self._redact(outcome.error)
                await call.record(record)
                failures += 1
                self._log(call, number, record.error)
                if not outcome.retryable or failures >= s.max_attempts:
                    raise JudgeCallFailed(call.role, call.case_id, call.request_hash, record.error,
                                          number - call.first_attempt + 1)
                number += 1
                await asyncio.sleep(self._delay(failures, outcome.retry_after))
                continue
            record.raw_reply = self._redact(outcome.content or "")
            try:
                reply = call.spec.validate_reply(call.request, decode_reply(outcome.content))
            except ValueError as exc:  # pydantic's ValidationError is a ValueError too
                reason = self._redact(_short(exc))
                record.error = f"invalid reply: {reason}"
                await call.record(record)
                self._log(call, number, record.error)
                if invalid >= s.max_invalid_replies:
                    raise JudgeCallFailed(call.role, call.case_id, call.request_hash, record.error,
                                          number - call.first_attempt + 1)
                invalid += 1
                number += 1
                conversation = list(call.messages) + [
                    {"role": "assistant", "content": record.raw_reply},
                    {"role": "user", "content": f"That reply is not valid: {reason}\nAnswer again with only "
                                                "the JSON object, matching the schema."}]
                continue
            record.reply = reply
            await call.record(record)
            return reply

    # --- HTTP -------------------------------------------------------------------------------------
    def _slots_now(self) -> asyncio.Semaphore:
        self._ensure_session()
        return self._slots  # type: ignore[return-value]

    def _ensure_session(self) -> aiohttp.ClientSession:
        """One pool per running event loop (a session cannot move between loops)."""
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            connector = aiohttp.TCPConnector(limit=self.settings.concurrency, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(connector=connector)
            self._slots = asyncio.Semaphore(self.settings.concurrency)
            self._loop = loop
        return self._session

    async def _post(self, messages, schema, role: str, mode: str) -> HttpOutcome:
        """One POST to /chat/completions, never raising for what the server or network did."""
        payload: dict[str, Any] = {"model": self.model, "messages": messages, **self.settings.parameters()}
        response_format = response_format_field(mode, role, schema)
        if response_format is not None:
            payload["response_format"] = response_format
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        timeout = aiohttp.ClientTimeout(total=self.settings.timeout_s)
        start = time.perf_counter()
        try:
            async with self._ensure_session().post(self.url, json=payload, headers=headers, timeout=timeout) as resp:
                text = await resp.text()
                return _outcome(resp.status, resp.headers, text, _ms(start))
        except TimeoutError:
            return HttpOutcome(_ms(start), error=f"timed out after {self.settings.timeout_s:g} s", retryable=True)
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
            return HttpOutcome(_ms(start), error=f"connection failed: {type(exc).__name__}: {exc}", retryable=True)
        except aiohttp.ClientError as exc:
            return HttpOutcome(_ms(start), error=f"request failed: {type(exc).__name__}: {exc}", retryable=False)

    def _delay(self, failures: int, retry_after: float | None) -> float:
        """Seconds to wait before the next try: Retry-After when given, else backoff with jitter."""
        s = self.settings
        if retry_after is not None:
            return min(max(retry_after, 0.0), s.retry_after_max_s)
        ceiling = min(s.backoff_max_s, s.backoff_base_s * 2 ** (failures - 1))
        return ceiling / 2 + self._random.uniform(0, ceiling / 2)

    def _cost(self, usage) -> float | None:
        price = self.settings.price_of(self.model)
        return price.cost(usage) if price else None

    def _redact(self, text: str) -> str:
        """``text`` with the API key (if any) blotted out."""
        if not self._key or not text:
            return text
        if len(self._key) >= SHORT_KEY:
            return text.replace(self._key, "[redacted]")
        # Local servers take placeholder keys ("x", "ollama", "EMPTY"): blotting every occurrence
        # inside words would garble the recorded replies and errors, so only whole tokens go.
        pattern = rf"(?<![A-Za-z0-9]){re.escape(self._key)}(?![A-Za-z0-9])"
        return re.sub(pattern, "[redacted]", text)

    def _log(self, call: PendingCall, number: int, error: str) -> None:
        log.warning("judge %s for case %s, attempt %d: %s", call.role, call.case_id, number, error)

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            try:
                await self._session.close()
            except RuntimeError:  # its loop is gone; nothing left to release
                pass
        self._session = None


def _outcome(status: int, headers, text: str, latency_ms: float) -> HttpOutcome:
    """Classify an HTTP answer: a reply, a retryable failure, or a final one."""
    if status == 200:
        try:
            body = json.loads(text)
            content = body["choices"][0]["message"].get("content")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            return HttpOutcome(latency_ms, status, error=f"unreadable completion body: {text[:200]!r}",
                               retryable=True)
        return HttpOutcome(latency_ms, status, content=content, usage=_usage(body.get("usage")))
    detail = f"HTTP {status}: {text[:300]}"
    retryable = status in RETRYABLE_STATUS or status >= 500
    return HttpOutcome(latency_ms, status, error=detail, retryable=retryable,
                       retry_after=_retry_after(headers.get("Retry-After")) if retryable else None,
                       refused_format=names_the_format(status, text))


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header: a number of seconds or an HTTP date."""
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _usage(usage: Any) -> dict[str, Any] | None:
    if not isinstance(usage, dict):
        return None
    keep = ("prompt_tokens", "completion_tokens", "total_tokens")
    return {k: usage[k] for k in keep if isinstance(usage.get(k), int)} or None


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


def _short(exc: Exception) -> str:
    """A validation error as one line of "where: what" items (enough feedback, no URLs)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            items = [f"{'.'.join(map(str, e.get('loc', ()))) or 'reply'}: {e.get('msg')}" for e in errors()][:8]
            return "; ".join(items)
        except Exception:  # noqa: BLE001 - fall back to the plain text
            pass
    return " ".join(str(exc).split())[:500]
