"""The openai backend: any OpenAI-compatible chat-completions server over aiohttp.

One connection pool per event loop, a concurrency limit that halves in 429 storms and climbs
back (``flow_control.AdaptiveLimit``), a per-request timeout, a capped reply body
(``reply_body``), exponential backoff with jitter on 429, 5xx, timeouts and dropped connections
(honouring a capped Retry-After), a bounded number of attempts, and re-asking with the reason
when a reply is invalid (does not fit the role's schema, cut off at max_tokens, not storable).

Infrastructure errors are not verdicts: connection refused, DNS failure, 401/403/404, and
5xx/timeouts/dropped connections after the attempts (or ``breaker_failures`` of them in a row,
across calls) raise ``JudgeUnavailable``, which stops the run with its cases pending.

The reply schema travels in the configured response-format mode (``response_format.py``:
``json_schema`` strict, ``json_object`` with the schema, or in the prompt); a server that refuses
the format (400/422/500 naming it) moves the backend to the next mode for the rest of the run,
and every refused call is asked again, those in flight at the switch included. A refusal is the
server answering: it neither counts towards the breaker nor uses up an attempt.

The backend never records: it yields each attempt as it ends and the port records it before the
backend goes on. What the port sends back into the generator is the ledger's refusal of a good
reply (None when it was recorded): that reply is then yielded again as an invalid one, kept as
text, and asked again.

The API key is read from the environment once, sent only in the Authorization header, and
removed from any text that could be recorded or logged (server error bodies included).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import time
from typing import Any, AsyncGenerator, Coroutine
from urllib.parse import urlsplit

import aiohttp
import orjson

from evalledger.stages.judge.calls import Attempt, JudgeCallFailed, JudgeError, JudgeUnavailable, PendingCall
from evalledger.stages.judge.flow_control import AdaptiveLimit, Breaker
from evalledger.stages.judge.http_outcome import HttpOutcome, classify
from evalledger.stages.judge.recorded_calls import redact, redact_cut
from evalledger.stages.judge.replies import decode_reply
from evalledger.stages.judge.reply_body import (
    BodyTooLarge,
    decode_body,
    printable,
    read_capped,
    safe_text,
    storage_problem,
)
from evalledger.stages.judge.response_format import (
    FormatModes,
    messages_for,
    response_format_field,
)
from evalledger.stages.judge.roles import Model
from evalledger.stages.judge.settings import DEFAULT_BASE_URL, JudgeSettings
from evalledger.stages.judge.unasked_answers import CheckedRequest

log = logging.getLogger("evalledger.judge")
LONG_WAIT_S = 5.0           # a wait before a retry at least this long is said on the log
# What the HTTP layer may raise besides aiohttp's errors (ssl and socket errors, a header or body
# Python cannot parse, a stream cut short), taken as the server failing rather than the case.
UNREADABLE = (OSError, ValueError, ArithmeticError, EOFError)


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
        self.url = checked_base_url(settings) + "/chat/completions"
        self._key = read_key(settings.api_key_env)
        if not self._key and settings.resolved_base_url() == DEFAULT_BASE_URL.rstrip("/"):
            # The public API answers every call 401 without a key: refuse before any case fails.
            raise JudgeError(f"the openai judge needs an API key for {DEFAULT_BASE_URL}: set "
                             f"{settings.api_key_env} (or OPENAI_BASE_URL for a local server that needs none)")
        self.formats = FormatModes(settings.response_format)
        # The same for every request: made once, not per call.
        self._headers = {"Content-Type": "application/json"}
        if self._key:
            self._headers["Authorization"] = f"Bearer {self._key}"
        self._timeout = aiohttp.ClientTimeout(total=settings.timeout_s)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.limit: AdaptiveLimit | None = None
        self.breaker = Breaker(settings.breaker_failures)
        self.answered = 0   # HTTP answers that were not infrastructure failures, across calls
        self._random = random.Random()

    def identities(self, role: str) -> list[tuple[str, str | None]]:
        return [(self.name, self.model)]

    # --- the call ---------------------------------------------------------------------------------
    async def attempts(self, call: PendingCall) -> AsyncGenerator[Attempt, str | None]:
        """Ask until a valid reply comes, within the bounds, yielding every attempt as it ends.

        The port sends back None once an attempt is recorded, or why the ledger refused a good
        reply: that attempt is then yielded again as an invalid reply and the model asked again.
        Raises JudgeCallFailed when the replies stay invalid or the server rejects this very
        request (a 4xx other than 401/403/404/429), JudgeUnavailable when the server cannot
        answer at all.
        """
        s = self.settings
        self._ensure_session()
        schema = call.spec.reply_schema(call.request)
        conversation = list(call.messages)
        number, failures, invalid = call.first_attempt, 0, 0
        answered_before = self.answered   # to tell a failing request from a failing server
        while True:
            if self.breaker.is_open:
                raise JudgeUnavailable(self.settings.resolved_base_url(), self.breaker.reason)
            outcome, sent, mode, concurrency = await self._send(call, conversation, schema)
            record = Attempt(number, usage=outcome.usage, latency_ms=outcome.latency_ms,
                             http_status=outcome.status, cost=self._cost(outcome.usage),
                             sent=sent if sent != call.messages else None, response_format=mode,
                             concurrency=concurrency)
            if outcome.kind == "refused_format":  # not an attempt that counts: the server took nothing
                retry_mode = self.formats.after_refusal(mode)
                refusal = redact(outcome.error or "", self._key)[:200]
                record.error = f"the server refused response_format {mode} ({refusal}); asking again in mode {retry_mode}"
                yield record
                _give_way(outcome)
                number += 1
                continue
            if outcome.kind not in ("reply", "invalid"):
                if failures == 0:
                    answered_before = self.answered
                failures += 1
                # The breaker moves before the attempt is yielded (and recorded), so no other call
                # sends meanwhile; whether the call ends is decided once it is recorded.
                request_at_fault = self._note_failure(record, outcome, failures, self.answered > answered_before)
                yield record
                _give_way(outcome)
                self._after_failure(call, record, outcome, request_at_fault, failures)
                number += 1
                delay = self._delay(failures, outcome.retry_after)
                self._say_wait(call, record, outcome.retry_after, delay, failures)
                await self.breaker.sleep(delay)
                continue
            record.raw_reply = redact(outcome.raw or "", self._key)
            reply, reason = self._read_reply(call, outcome)
            if reason is None:
                record.reply = reply
                refused = yield record
                _give_way(outcome)
                if refused is None:
                    return
                # The ledger refused the reply: a paid reply is never lost, it is kept as text
                # (an invalid reply) and the model is asked again.
                reason = f"cannot be stored: {refused}"
                record.reply = None
            record.error = f"invalid reply: {redact(reason, self._key)}"
            yield record
            _give_way(outcome)
            self._log(call, number, record.error)
            if invalid >= s.max_invalid_replies:
                raise JudgeCallFailed(call.role, call.case_id, call.request_hash, record.error,
                                      number - call.first_attempt + 1)
            invalid += 1
            number += 1
            said = [{"role": "assistant", "content": redact(outcome.content, self._key)}] if outcome.content else []
            conversation = list(call.messages) + said + [
                {"role": "user", "content": f"That reply is not valid: {redact(reason, self._key)}\nAnswer again "
                                            "with only the JSON object, matching the schema."}]

    def _note_failure(self, record: Attempt, outcome: HttpOutcome, failures: int, others_answered: bool) -> bool:
        """Name a failed HTTP attempt's error and move the breaker; True when the request is at fault.

        A call out of attempts stops the run, unless its failures were 5xx or timeouts while the
        server kept answering other calls: then this request is the trouble, not the server, and
        only the call fails (else one such case would stop every run for good).
        """
        record.error = redact(outcome.error or "", self._key)
        if outcome.kind == "unavailable":
            self.breaker.trip(record.error)
        elif outcome.kind == "transient":
            self.breaker.failure(record.error)
        exhausted = outcome.kind != "rejected" and failures >= self.settings.max_attempts
        request_at_fault = exhausted and outcome.kind == "transient" and others_answered
        if exhausted and not request_at_fault:
            self.breaker.trip(f"{record.error} (after {failures} attempts)")
        return request_at_fault

    def _after_failure(self, call: PendingCall, record: Attempt, outcome: HttpOutcome, request_at_fault: bool,
                       failures: int) -> None:
        """Once a failed attempt is recorded: raise when it ends the call (or the run), else return to retry."""
        if request_at_fault and not self.breaker.is_open:
            self._log(call, record.number, record.error)
            raise JudgeCallFailed(call.role, call.case_id, call.request_hash,
                                  f"{record.error} (after {failures} attempts; the server answered other calls)",
                                  record.number - call.first_attempt + 1)
        if outcome.kind == "rejected":
            self._log(call, record.number, record.error)
            raise JudgeCallFailed(call.role, call.case_id, call.request_hash, record.error,
                                  record.number - call.first_attempt + 1)
        log.info("judge %s for case %s, attempt %d: %s", call.role, call.case_id, record.number, record.error)
        if self.breaker.is_open:
            raise JudgeUnavailable(self.settings.resolved_base_url(), self.breaker.reason)

    def _read_reply(self, call: PendingCall, outcome: HttpOutcome) -> tuple[Model | None, str | None]:
        """The validated, storable reply of a 200, or why it is an invalid reply."""
        if outcome.kind == "invalid":
            return None, outcome.error
        try:
            data = decode_reply(outcome.content)
        except RecursionError:
            return None, "the reply nests too deeply to read"
        except ValueError as exc:
            return None, _short(exc)
        problem = storage_problem(data)
        if problem is not None:
            return None, f"cannot be stored: {problem}"
        try:
            return call.spec.validate_reply(call.request, data), None
        except ValueError as exc:  # pydantic's ValidationError is a ValueError too
            return None, _short(exc)

    # --- HTTP -------------------------------------------------------------------------------------
    def _ensure_session(self) -> aiohttp.ClientSession:
        """One pool, limit and breaker wake-up per running event loop (they cannot move between loops)."""
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            connector = aiohttp.TCPConnector(limit=self.settings.concurrency, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(connector=connector, request_class=CheckedRequest)
            self.limit = AdaptiveLimit(self.settings.concurrency)
            self.breaker.opened = asyncio.Event()
            if self.breaker.is_open:
                self.breaker.opened.set()
            self._loop = loop
        return self._session

    async def _send(self, call: PendingCall, conversation,
                    schema) -> tuple[HttpOutcome, list[dict[str, str]], str, int]:
        """One POST within the adaptive limit: the outcome, the messages sent, their mode and the limit.

        ``call.sent`` is set as the request goes out (a cancellation from then on cost a request).
        """
        limit = self.limit
        round_sent = await limit.acquire()
        concurrency = limit.current
        if self.breaker.is_open:   # it opened while this call waited for a slot: send nothing
            limit.release()
            raise JudgeUnavailable(self.settings.resolved_base_url(), self.breaker.reason)
        mode = self.formats.current   # chosen once a slot is free: a switch while waiting counts
        sent = messages_for(mode, conversation, schema)
        call.sent = True
        try:
            outcome = await _through_a_stop(self._post(sent, schema, call.role, mode, call.parameters))
        finally:
            limit.release()
        if outcome.kind == "rate_limited":
            limit.on_rate_limited(round_sent)
        elif outcome.status is not None:
            limit.on_success()
        if outcome.kind in ("reply", "invalid", "refused_format", "rejected", "rate_limited"):
            self.breaker.success()   # the server answered
            self.answered += 1
        return outcome, sent, mode, concurrency

    async def _post(self, messages, schema, role: str, mode: str, parameters: dict[str, Any]) -> HttpOutcome:
        """One POST to /chat/completions in ``mode``, never raising for what the server or network did.

        ``parameters`` are the call's (the settings', with a repeat's seed or temperature over them).
        """
        payload: dict[str, Any] = {"model": self.model, "messages": messages, **parameters}
        response_format = response_format_field(mode, role, schema)
        if response_format is not None:
            payload["response_format"] = response_format
        start = time.perf_counter()
        try:
            # Redirects are not followed (nor are they by the OpenAI SDK): a 307 would carry the
            # prompts, and the key, to whatever host its Location names.
            async with self._ensure_session().post(self.url, data=request_body(payload), headers=self._headers,
                                                   timeout=self._timeout, allow_redirects=False) as resp:
                if not 200 <= resp.status <= 599:
                    # no final answer (a 099, an unasked 101): its connection is not used again. aiohttp
                    # may have pooled it already (a body that came with the headers), where the server
                    # closes it and the next call sent on it failed without reaching the server; a
                    # closed transport is one the pool discards (aiohttp internals, as unasked_answers)
                    protocol = getattr(resp, "_protocol", None)
                    if protocol is not None and protocol.transport is not None:
                        protocol.transport.close()
                    resp.close()
                    return classify(resp.status, resp.headers, "", _ms(start))
                try:
                    body = await read_capped(resp, self.settings.max_reply_bytes)
                except BodyTooLarge as exc:
                    return HttpOutcome(_ms(start), resp.status, error=str(exc), kind="invalid",
                                       raw=redact_cut(decode_body(exc.prefix)[0], self._key))
                text, not_utf8 = decode_body(body)
                text = redact(text, self._key)   # whole, before any of it is cut to a length
                return classify(resp.status, resp.headers, text, _ms(start), not_utf8, self.settings.token_limit(),
                                mode != "prompt")
        except TimeoutError:
            return HttpOutcome(_ms(start), error=f"timed out after {self.settings.timeout_s:g} s", kind="transient")
        except aiohttp.ClientConnectorError as exc:   # refused, DNS, TLS: nothing reached the server
            return HttpOutcome(_ms(start), error=f"cannot connect: {type(exc).__name__}: {exc}", kind="unavailable")
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
            return HttpOutcome(_ms(start), error=f"connection failed: {type(exc).__name__}: {exc}", kind="transient")
        except aiohttp.InvalidURL as exc:   # every call would fail the same way: the run stops
            return HttpOutcome(_ms(start), error=f"request failed: {type(exc).__name__}: {exc}", kind="unavailable")
        except aiohttp.ClientResponseError as exc:
            # aiohttp's parser refused the answer (bad status line, invalid header, broken chunked
            # encoding, a header over its limit ...): the server garbled one answer, as a dropped
            # connection would be, so it is retried and counted by the breaker
            return HttpOutcome(_ms(start), error=self._not_http(exc), kind="transient")
        except aiohttp.ClientError as exc:   # no other is known to be raised here: retried, not a stop
            return HttpOutcome(_ms(start), error=f"request failed: {type(exc).__name__}: {exc}", kind="transient")
        except UNREADABLE as exc:
            # Not an aiohttp error, but what the server sent (or did to the connection) that Python
            # could not take: the server failing, retried and counted by the breaker; never the case's fault.
            return HttpOutcome(_ms(start), error=f"the server's answer could not be read: {type(exc).__name__}: "
                                                 f"{safe_text(str(exc))[:300]}", kind="transient")

    def _not_http(self, exc: aiohttp.ClientResponseError) -> str:
        """The error of an answer aiohttp could not parse, on one line: the parser's message (which
        quotes the server's bytes) without the key, cut to 300 characters."""
        message = printable(" ".join(safe_text(str(exc.message)).split()))
        return "the server's answer is not valid HTTP: " + redact_cut(redact(message, self._key)[:300], self._key)

    def _delay(self, failures: int, retry_after: float | None) -> float:
        """Seconds to wait before the next try: Retry-After when given, else backoff with jitter."""
        s = self.settings
        if retry_after is not None:
            return min(max(retry_after, 0.0), s.retry_after_max_s)
        ceiling = min(s.backoff_max_s, s.backoff_base_s * 2 ** (failures - 1))
        return ceiling / 2 + self._random.uniform(0, ceiling / 2)

    def _say_wait(self, call: PendingCall, record: Attempt, asked: float | None, delay: float,
                  failures: int) -> None:
        """Say on the log (stderr for the CLI) why the next attempt waits, when the wait is long or a
        Retry-After was cut: a run held back for minutes must not look hung."""
        cap = self.settings.retry_after_max_s
        cut = asked is not None and asked > cap
        if delay < LONG_WAIT_S and not cut:
            return
        why = f"HTTP {record.http_status}" if record.http_status is not None else (record.error or "a failure")
        if asked is not None:
            why += f" with Retry-After {asked:g} s" + (f", cut to {cap:g} s (--retry-after-max)" if cut else "")
        log.warning("judge server %s answered %s: waiting %.3g s before try %d of %d of this call (case %s)",
                    self.settings.resolved_base_url(), why, delay, failures + 1, self.settings.max_attempts,
                    call.case_id)

    def _cost(self, usage) -> float | None:
        price = self.settings.price_of(self.model)
        return price.cost(usage) if price else None

    def _log(self, call: PendingCall, number: int, error: str) -> None:
        log.warning("judge %s for case %s, attempt %d: %s", call.role, call.case_id, number, error)

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            try:
                await self._session.close()
            except RuntimeError:  # its loop is gone; nothing left to release
                pass
        self._session = None


def read_key(variable: str) -> str | None:
    """The API key from ``variable``, without the whitespace around it (None when unset or blank).

    A key read from a file keeps its line ending ("$(cat key.txt)" of a CRLF file keeps the \\r),
    and aiohttp refuses such a header with a ValueError that failed every case; a control
    character inside the key is refused here (JudgeError), without showing the key.
    """
    key = (os.environ.get(variable) or "").strip()
    if any(ord(ch) < 0x20 or ord(ch) == 0x7f for ch in key):
        raise JudgeError(f"{variable} holds a control character (a line break?) inside the key: "
                         "set it to the key alone")
    return key or None


def checked_base_url(settings: JudgeSettings) -> str:
    """The base URL, refused (JudgeError) when it carries credentials or is not http(s) with a host.

    Credentials in the URL would travel into every message and event that names the server
    (the key is kept out of those only as OPENAI_API_KEY), and aiohttp refuses them beside the
    Authorization header with a ValueError that failed every case.
    """
    url = settings.resolved_base_url()
    try:
        parts = urlsplit(url)
        has_credentials = parts.username is not None or parts.password is not None
        hostname = parts.hostname
        _ = parts.port   # read for its check: a port outside 0-65535 raises
    except ValueError as exc:   # a bad port or bracketed host
        raise JudgeError(f"the judge server URL is not valid ({exc}); set OPENAI_BASE_URL to http(s)://host[:port]/v1") from None
    if hostname and not _resolvable(hostname):
        raise JudgeError(f"the judge server URL's host {hostname[:80]!r} is not a host name (a label is empty or "
                         "over 63 characters); set OPENAI_BASE_URL to http(s)://host[:port]/v1")
    if has_credentials:
        raise JudgeError(f"the judge server URL carries credentials (user:password@ before the host): remove "
                         f"them and put the key in {settings.api_key_env}, which is sent only in the "
                         "Authorization header and kept out of the ledger and logs")
    if parts.scheme not in ("http", "https") or not hostname:
        raise JudgeError(f"the judge server URL {url!r} is not http(s)://host[:port]/...; set OPENAI_BASE_URL "
                         "to one, e.g. http://127.0.0.1:8000/v1")
    return url


def _resolvable(hostname: str) -> bool:
    """Whether the resolver can take ``hostname``: it encodes a name as IDNA, which refuses an empty
    label or one over 63 characters, and every call would then fail the same way (as a
    UnicodeError, not an error of the server). An IPv6 address is not a name."""
    if ":" in hostname:
        return True
    try:
        hostname.encode("idna")
    except UnicodeError:
        return False
    return True


def request_body(payload: dict[str, Any]) -> bytes:
    """The POST body: orjson (a tenth of a millisecond a call less than json at high concurrency),
    else json for what orjson refuses (a lone surrogate in a response, say), as aiohttp sent it."""
    try:
        return orjson.dumps(payload)
    except TypeError:
        return json.dumps(payload).encode()


def _give_way(outcome: HttpOutcome) -> None:
    """Once a request that went out through a stop is recorded, end the call as cancelled (its case stays pending)."""
    if outcome.stopped:
        raise asyncio.CancelledError()


async def _through_a_stop(post: Coroutine[Any, Any, HttpOutcome]) -> HttpOutcome:
    """The outcome of ``post``, a request already on its way, even when the caller is cancelled meanwhile.

    A run that stops cancels its cases; a request the server already has is a reply paid for, so
    it is let end (bounded by the request timeout) and comes back marked ``stopped``: the attempt
    is then recorded before the call gives way to the cancellation. A second cancellation (a
    second Ctrl-C) cuts the request off.
    """
    task = asyncio.ensure_future(post)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        try:
            outcome = await asyncio.shield(task)
        except asyncio.CancelledError:
            task.cancel()
            raise
        outcome.stopped = True
        return outcome


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
