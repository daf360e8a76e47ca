"""The judge port the stages call: ``await judge.call(role, request, case_id=..., attempt=1)``.

For every call it builds the role's messages, hashes the request, reuses a recorded success
with that hash (unless ``no_cache``), and otherwise lets the backend answer, recording every
attempt as a ``judge.called`` event on ``case:<case_id>`` the moment the attempt ends.
"""

from __future__ import annotations

import asyncio
from typing import Any

from evalledger.stages.judge.calls import Attempt, Backend, JudgeCallFailed, PendingCall
from evalledger.stages.judge.group_commit import GroupCommitter
from evalledger.stages.judge.recording import (
    CallIndex, call_event, case_stream, index_for, record_attempt, request_hash,
)
from evalledger.stages.judge.registry import role as role_spec
from evalledger.stages.judge.reply_caps import cap_payload
from evalledger.stages.judge.roles import Model
from evalledger.stages.judge.settings import JudgeSettings


class Judge:
    """One judge port: a backend, the ledger it records into, and that ledger's call index."""

    def __init__(self, settings: JudgeSettings, led, backend: Backend):
        self.settings = settings
        self.led = led
        self.backend = backend
        self.index: CallIndex | None = index_for(led) if led is not None else None
        self.calls = 0            # calls answered by the backend (not from the record)
        self.reused = 0           # calls answered from a recorded success
        self._writer: GroupCommitter | None = None
        self._in_flight: dict[str, asyncio.Future] = {}   # request hash -> done, while a call is out
        self.budget = None        # a run's Budget (stages.judge.budget): asked before every model call
        self._budget_gate: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None
        self._sending = 0         # backend calls under way (aclose lets them end and be recorded)

    @property
    def name(self) -> str:
        """The backend's name: offline, openai or replay."""
        return self.backend.name

    @property
    def model(self) -> str | None:
        return self.backend.model

    @property
    def unrecorded(self) -> list[dict[str, Any]]:
        """Replay: the requests asked that the source never recorded (role, case_id, request_hash)."""
        return list(getattr(self.backend, "misses", []))

    async def call(self, role: str, request: Model | dict[str, Any], *, case_id: str, attempt: int = 1,
                   meta: dict[str, Any] | None = None) -> Model:
        """Answer ``request`` for ``role`` on behalf of case ``case_id``: the role's reply model.

        ``attempt`` is the stage's own attempt (an excerpt retry, say); it is recorded as
        ``step_attempt`` and keys the events, so a redone step appends nothing new.
        """
        spec = role_spec(role)
        typed = request if isinstance(request, spec.request) else spec.request.model_validate(
            request.model_dump() if isinstance(request, Model) else request)
        messages = spec.build_messages(typed)
        parameters = self.settings.parameters()
        hashes = [request_hash(role, b, m, parameters, messages) for b, m in self.backend.identities(role)]
        caching = not self.settings.no_cache and self.index is not None
        if caching:
            reply = await self._reuse(spec, typed, hashes, case_id, attempt, meta)
            if reply is None and await self._wait_for_twin(hashes[0]):
                reply = await self._reuse(spec, typed, hashes, case_id, attempt, meta)
            if reply is not None:
                return reply
        stream = case_stream(case_id)
        first = self.index.next_attempt(stream, role, hashes[0], attempt) if self.index else 1
        pending = PendingCall(spec, typed, messages, parameters, hashes[0], case_id, attempt, first,
                              record=self._recorder(role, typed, messages, parameters, hashes[0],
                                                    case_id, attempt, meta),
                              candidates=hashes)
        self.calls += 1
        if not caching:
            return await self._answer(pending)
        done = asyncio.get_running_loop().create_future()
        self._in_flight[hashes[0]] = done
        try:
            return await self._answer(pending)
        finally:
            self._in_flight.pop(hashes[0], None)
            done.set_result(None)

    async def _answer(self, pending: PendingCall) -> Model:
        """The backend's answer, admitted by the run's budget first (BudgetExhausted: nothing sent).

        Under a cap, at most ``concurrency`` admitted calls are out at once and the others wait
        here, so each is admitted against what the calls before it cost.
        """
        free = not self.backend.network and self.backend.name == "replay"   # answers from the record
        if self.budget is None or free:
            return await self._send(pending)
        if not self.budget.capped:
            self.budget.admit(pending.case_id)   # counts the call
            return await self._send(pending)
        loop = asyncio.get_running_loop()
        if self._budget_gate is None or self._budget_gate[0] is not loop:
            self._budget_gate = (loop, asyncio.Semaphore(self.settings.concurrency))
        async with self._budget_gate[1]:
            self.budget.admit(pending.case_id)
            return await self._send(pending)

    async def _send(self, pending: PendingCall) -> Model:
        """The backend's answer, counted while under way."""
        self._sending += 1
        try:
            return await self.backend.answer(pending)
        finally:
            self._sending -= 1

    async def _wait_for_twin(self, hash: str) -> bool:
        """Wait for the same request already in flight (another case with the same response, say), so
        it is paid once; True when there was one to wait for (its answer is then recorded)."""
        twin = self._in_flight.get(hash)
        if twin is None or twin.get_loop() is not asyncio.get_running_loop():
            return False
        await asyncio.shield(twin)
        return True

    async def _reuse(self, spec, request, hashes, case_id, step_attempt, meta) -> Model | None:
        """A recorded success of this request, validated; recorded on this case too when it came from another."""
        for hash in hashes:
            found = self.index.success(hash)
            if found is None:
                continue
            event = self.led.get(found.id)
            if event is None or event.data.get("reply") is None:
                continue
            try:
                reply = spec.validate_reply(request, event.data["reply"])
            except ValueError:
                continue  # a record this version cannot read: ask again rather than trust it
            if found.stream != case_stream(case_id) and self.settings.record:
                payload = {**_copy_of(event.data), "source_event": event.id, "usage": None, "cost": None,
                           "latency_ms": None, "attempt": 1}
                record_attempt(self.led, self.index, case_id, payload, step_attempt, "reused", meta)
            self.reused += 1
            return reply
        return None

    def _recorder(self, role, request, messages, parameters, hash, case_id, step_attempt, meta):
        """The ``record`` coroutine handed to the backend for this call."""
        request_record = {"payload": request.model_dump(mode="json"), "messages": messages,
                          "parameters": parameters}

        async def record(attempt: Attempt):
            if self.budget is not None:
                billed = attempt.usage is not None or attempt.error is None
                self.budget.spend(attempt.cost, unpriced=attempt.cost is None and self.backend.network
                                  and attempt.source_event is None and billed)
            if not self.settings.record or self.led is None:
                return None
            payload = {
                "role": role, "backend": attempt.backend or self.backend.name,
                "model": attempt.model if attempt.model is not None else self.backend.model,
                "request_hash": attempt.request_hash or hash, "attempt": attempt.number,
                "error": attempt.error, "usage": attempt.usage, "latency_ms": attempt.latency_ms,
                "request": _with_mode(request_record, attempt.response_format),
                "reply": _jsonable(attempt.reply), "cost": attempt.cost,
                "cost_usd": attempt.cost,
                "raw_reply": attempt.raw_reply, "sent": attempt.sent, "http_status": attempt.http_status,
                "source_event": attempt.source_event, "source_backend": attempt.source_backend,
                "concurrency": attempt.concurrency,
            }
            payload, refused = cap_payload(payload)
            if self.backend.network:  # commit off the event loop, batched with calls ending together
                stored = await self._committer().record(call_event(case_id, payload, step_attempt,
                                                                   attempt.number, meta))
            else:
                stored = record_attempt(self.led, self.index, case_id, payload, step_attempt, attempt.number, meta)
            if refused:   # recorded as a failed attempt; the call fails rather than use it
                raise JudgeCallFailed(role, case_id, payload["request_hash"], refused, attempt.number)
            return stored

        return record

    def _committer(self) -> GroupCommitter:
        if self._writer is None:
            self._writer = GroupCommitter(self.led, self.index)
        return self._writer

    async def aclose(self) -> None:
        """Let calls under way end and be recorded, then close the backend's connections and the recording thread.

        A stage that gives up on a case (a spent budget refused one of two calls it made at once)
        leaves its other call running: it was paid for, so its answer is recorded, not cut off.
        Each call is bounded by its timeout and attempts.
        """
        while self._sending:
            await asyncio.sleep(0.01)
        await self.backend.aclose()
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    async def __aenter__(self) -> "Judge":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()


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
