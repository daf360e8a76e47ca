"""The judge port the stages call: ``await judge.call(role, request, case_id=..., attempt=1)``.

For every call it builds the role's messages, hashes the request, reuses a recorded success
with that hash (unless ``no_cache``), and otherwise lets the backend answer, recording every
attempt the backend yields as a ``judge.called`` event on ``case:<case_id>`` the moment the
attempt ends. Hashing, finding and recording are the recorded-call core's (``recorded_calls``),
which the search port shares. When the ledger refuses a reply (it cannot be stored), the port
sends the reason back into the backend's attempts, which records it as an invalid reply and asks
again; a backend that stops there fails the call.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from typing import Any

from evalledger.ledger import EnvelopeError
from evalledger.stages.judge.calls import UNSENT, Attempt, Backend, JudgeCallFailed, PendingCall
from evalledger.stages.judge.recorded_calls import RecordedCalls, request_hashes
from evalledger.stages.judge.recording import CallIndex, case_stream
from evalledger.stages.judge.registry import role as role_spec
from evalledger.stages.judge.reply_caps import cap_payload
from evalledger.stages.judge.roles import Model
from evalledger.stages.judge.settings import JudgeSettings
from evalledger.stages.judge.shared_limit import endpoint_limit


class Judge:
    """One judge port: a backend, and the recorded calls of the ledger it records into."""

    def __init__(self, settings: JudgeSettings, led, backend: Backend):
        self.settings = settings
        self.led = led
        self.backend = backend
        self.records = RecordedCalls(led)
        self.calls = 0            # calls answered by the backend (not from the record)
        self.reused = 0           # calls answered from a recorded success
        self._in_flight: dict[str, asyncio.Future] = {}   # request hash -> done, while a call is out
        self.budget = None        # a run's Budget (stages.judge.budget): asked before every model call
        self._budget_gate: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None
        self._sending = 0         # backend calls under way (aclose lets them end and be recorded)
        # A store shared by many workers may keep one budget for the endpoint: a slot is held per call.
        self.limit = endpoint_limit(settings, led, backend)

    @property
    def index(self) -> CallIndex | None:
        """The ledger's call index (None without a ledger)."""
        return self.records.index

    @property
    def name(self) -> str:
        """The backend's name: offline, openai or replay."""
        return self.backend.name

    @property
    def model(self) -> str | None:
        """The backend's model (None for replay without a configured model)."""
        return self.backend.model

    @property
    def unrecorded(self) -> list[dict[str, Any]]:
        """Replay: the requests asked that the source never recorded (role, case_id, request_hash)."""
        return list(getattr(self.backend, "misses", []))

    async def call(self, role: str, request: Model | dict[str, Any], *, case_id: str, attempt: int = 1,
                   meta: dict[str, Any] | None = None, sampling: dict[str, Any] | None = None) -> Model:
        """Answer ``request`` for ``role`` on behalf of case ``case_id``: the role's reply model.

        ``attempt`` is the stage's own attempt (an excerpt retry, say); it is recorded as
        ``step_attempt`` and keys the events, so a redone step appends nothing new. ``sampling``
        (a repeat's ``seed``, maybe ``temperature``) is laid over the settings' parameters: it is
        sent, recorded and hashed, so each repeat is a request of its own that replay finds.
        A call that ends (raises or is cancelled) before any attempt went out, the open breaker
        refusing it or its case cancelled while it waited for a slot, is not counted as made:
        the exception carries ``UNSENT = True`` for the caller's own counts.
        """
        spec = role_spec(role)
        typed = request if isinstance(request, spec.request) else spec.request.model_validate(
            request.model_dump() if isinstance(request, Model) else request)
        messages = spec.build_messages(typed)
        parameters = {**self.settings.parameters(), **(sampling or {})}
        hashes = request_hashes(role, self.backend.identities(role), parameters, messages)
        caching = not self.settings.no_cache and self.index is not None
        if caching:
            def recorded() -> dict[str, Any]:
                return _request_record(typed, messages, parameters)
            reply = await self._reuse(spec, typed, hashes, case_id, attempt, meta, recorded)
            if reply is None and await self._wait_for_twin(hashes[0]):
                reply = await self._reuse(spec, typed, hashes, case_id, attempt, meta, recorded)
            if reply is not None:
                return reply
        first = self.records.next_attempt(case_id, role, hashes[0], attempt)
        pending = PendingCall(spec, typed, messages, parameters, hashes[0], case_id, attempt, first,
                              candidates=hashes)
        self.calls += 1
        if not caching:
            return await self._answer_counted(pending, meta)
        done = asyncio.get_running_loop().create_future()
        self._in_flight[hashes[0]] = done
        try:
            return await self._answer_counted(pending, meta)
        finally:
            self._in_flight.pop(hashes[0], None)
            done.set_result(None)

    async def _answer_counted(self, call: PendingCall, meta: dict[str, Any] | None) -> Model:
        """``_answer``, taking the call back from the counts when it ends before sending anything."""
        try:
            return await self._answer(call, meta)
        except BaseException as exc:   # the cancellation of a case waiting for a slot included
            if not call.sent:
                self.calls -= 1
                setattr(exc, UNSENT, True)
            raise

    async def _answer(self, call: PendingCall, meta: dict[str, Any] | None) -> Model:
        """The backend's answer, admitted by the run's budget first (BudgetExhausted: nothing sent).

        Under a cap, at most ``concurrency`` admitted calls are out at once and the others wait
        here, so each is admitted against what the calls before it cost.
        """
        free = not self.backend.network and self.backend.name == "replay"   # answers from the record
        if self.budget is None or free:
            return await self._send(call, meta)
        if not self.budget.capped:
            self.budget.admit(call.case_id)   # counts the call
            return await self._send_admitted(call, meta)
        loop = asyncio.get_running_loop()
        if self._budget_gate is None or self._budget_gate[0] is not loop:
            self._budget_gate = (loop, asyncio.Semaphore(self.settings.concurrency))
        async with self._budget_gate[1]:
            self.budget.admit(call.case_id)
            return await self._send_admitted(call, meta)

    async def _send_admitted(self, call: PendingCall, meta: dict[str, Any] | None) -> Model:
        """``_send`` for a call the budget counted: taken back from the budget when nothing went out."""
        assert self.budget is not None
        try:
            return await self._send(call, meta)
        except BaseException:
            if not call.sent:
                self.budget.withdraw()
            raise

    async def _send(self, call: PendingCall, meta: dict[str, Any] | None) -> Model:
        """The backend's answer (``_ask``), counted while under way."""
        self._sending += 1
        try:
            if not self.limit.shared:   # nothing to hold (and no context manager to make per call)
                return await self._ask(call, meta)
            async with self.limit.slot():
                return await self._ask(call, meta)
        finally:
            self._sending -= 1

    async def _ask(self, call: PendingCall, meta: dict[str, Any] | None) -> Model:
        """Let the backend answer, recording each attempt it yields before it goes on.

        What goes back into the backend's attempts is None once an attempt is recorded, or why
        the ledger refused the reply it carries (the backend then records it as invalid and asks
        again).
        """
        request_record = _request_record(call.request, call.messages, call.parameters)
        last: Attempt | None = None
        refused: str | None = None
        async with aclosing(self.backend.attempts(call)) as attempts:
            while True:
                try:
                    last = await attempts.asend(refused)
                except StopAsyncIteration:
                    break
                call.sent = True
                refused = await self._record(call, request_record, last, meta)
        if refused is not None:   # the backend stopped at a reply the ledger cannot hold
            raise JudgeCallFailed(call.role, call.case_id, call.request_hash,
                                  f"invalid reply: cannot be stored: {refused}",
                                  last.number - call.first_attempt + 1 if last else 0)
        if last is None or last.error is not None:
            raise JudgeCallFailed(call.role, call.case_id, call.request_hash,
                                  f"the {self.backend.name} backend gave no reply", 0)
        return last.reply

    async def _record(self, call: PendingCall, request_record: dict[str, Any], attempt: Attempt,
                      meta: dict[str, Any] | None) -> str | None:
        """Record one attempt as a ``judge.called`` event (unless recording is off).

        Returns why the ledger refused the attempt's reply (None once recorded); a failed attempt
        the ledger refuses raises, as there is nothing left to ask again for.
        """
        if self.budget is not None:
            billed = attempt.usage is not None or attempt.error is None
            self.budget.spend(attempt.cost, unpriced=attempt.cost is None and self.backend.network
                              and attempt.source_event is None and billed)
        if not self.settings.record or self.led is None:
            return None
        payload = {
            "role": call.role, "backend": attempt.backend or self.backend.name,
            "model": attempt.model if attempt.model is not None else self.backend.model,
            "request_hash": attempt.request_hash or call.request_hash, "attempt": attempt.number,
            "error": attempt.error, "usage": attempt.usage, "latency_ms": attempt.latency_ms,
            "request": _with_mode(request_record, attempt.response_format),
            "reply": _jsonable(attempt.reply), "cost": attempt.cost,
            "cost_usd": attempt.cost,
            "raw_reply": attempt.raw_reply, "sent": attempt.sent, "http_status": attempt.http_status,
            "source_event": attempt.source_event, "source_backend": attempt.source_backend,
            "concurrency": attempt.concurrency,
        }
        try:
            payload, refused = cap_payload(payload)   # measuring a reply encodes it: it may refuse too
            # Network calls commit off the event loop, batched with the calls ending together; a
            # local backend's (offline, replay) cost nothing and go with the case's outputs.
            await self.records.record(call.case_id, payload, call.step_attempt, attempt.number, meta,
                                      batched=self.backend.network, free=not self.backend.network)
        except EnvelopeError as exc:   # a reply the ledger cannot hold: the backend asks again
            if attempt.reply is None:
                raise
            return str(exc)
        if refused:   # recorded as a failed attempt; the call fails rather than use it
            raise JudgeCallFailed(call.role, call.case_id, payload["request_hash"], refused, attempt.number)
        return None

    async def _wait_for_twin(self, hash: str) -> bool:
        """Wait for the same request already in flight (another case with the same response, say), so
        it is paid once; True when there was one to wait for (its answer is then recorded)."""
        twin = self._in_flight.get(hash)
        if twin is None or twin.get_loop() is not asyncio.get_running_loop():
            return False
        await asyncio.shield(twin)
        return True

    async def _reuse(self, spec, request, hashes, case_id, step_attempt, meta, recorded=None) -> Model | None:
        """A recorded success of this request, validated; recorded on this case too when it came from another.

        ``recorded()`` gives the request as ``_ask`` would record it (a success stored with the
        same one is found without reading its prompt back: ``RecordedCalls.reusable``)."""

        def reply_of(event):
            if event.data.get("reply") is None:
                raise ValueError("no reply recorded")
            return spec.validate_reply(request, event.data["reply"])

        found = self.records.reusable(hashes, reply_of, recorded)
        if found is None:
            return None
        event = found.event
        if event.stream != case_stream(case_id) and self.settings.record:
            payload = {**_copy_of(event.data), "source_event": event.id, "usage": None, "cost": None,
                       "latency_ms": None, "attempt": 1}
            await self.records.record(case_id, payload, step_attempt, "reused", meta, free=True)
        self.reused += 1
        return found.value

    async def aclose(self) -> None:
        """Let calls under way end and be recorded, then close the backend's connections and the recording thread.

        A stage that gives up on a case (a spent budget refused one of two calls it made at once)
        leaves its other call running: it was paid for, so its answer is recorded, not cut off.
        Each call is bounded by its timeout and attempts.
        """
        while self._sending:
            await asyncio.sleep(0.01)
        await self.backend.aclose()
        self.records.close()
        self.limit.close()

    async def __aenter__(self) -> "Judge":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()


def _request_record(request: Model, messages: list[dict[str, Any]], parameters: dict[str, Any]) -> dict[str, Any]:
    """The request as a ``judge.called`` event records it (before any response-format mode)."""
    return {"payload": request.model_dump(mode="json"), "messages": messages, "parameters": parameters}


def _jsonable(reply: Any) -> Any:
    """A reply model as JSON data (dicts and None pass through)."""
    if isinstance(reply, Model):
        return reply.model_dump(mode="json")
    return reply


def _with_mode(request_record: dict[str, Any], mode: str | None) -> dict[str, Any]:
    """The recorded request, with the response-format mode the attempt was sent in (openai)."""
    return request_record if mode is None else {**request_record, "response_format": mode}


def _copy_of(data: dict[str, Any]) -> dict[str, Any]:
    """The keys of a recorded call that a reuse on another case carries over."""
    keep = ("role", "backend", "model", "request_hash", "request", "reply", "source_backend")
    return {k: data.get(k) for k in keep} | {"error": None}
