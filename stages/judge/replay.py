"""The replay backend: answers only from ``judge.called`` events of a source ledger.

``evalledger replay --into DIR`` re-runs the stages into a new home while answering from the
source ledger, so the source may differ from the ledger the calls are recorded into. A request
is looked up under the hash each (backend, model) that answered its role in the source would
have given it (the request hash covers the backend), so replay finds what offline or openai
recorded. A request never recorded raises ``UnrecordedRequest`` naming role, case and hash, or,
with a live backend ("replay, else live"), is answered live and recorded as such.
"""

from __future__ import annotations

import dataclasses
from contextlib import aclosing
from typing import Any, AsyncGenerator

from evalledger.stages.judge.calls import Attempt, JudgeCallFailed, PendingCall, UnrecordedRequest
from evalledger.stages.judge.recorded_calls import REPLAY, RecordedCalls, open_source
from evalledger.stages.judge.settings import JudgeSettings


def source_label(led) -> str:
    """How a ledger is named in messages: its home, or its store's location."""
    return led.label


class ReplayBackend:
    """Answers from recorded successes; ``live`` (optional) answers what was never recorded."""

    name = REPLAY

    def __init__(self, settings: JudgeSettings, led, source=None, live=None):
        self.settings = settings
        self.source, self._opened = open_source(source, led)
        if self.source is None:
            raise ValueError("replay needs a ledger to answer from")
        self.records = RecordedCalls(led, self.source)
        self.live = live
        self.model = settings.model
        self.network = bool(live is not None and live.network)

    @property
    def misses(self) -> list[dict[str, Any]]:
        """The requests the source never recorded (role, case_id, request_hash)."""
        return self.records.misses

    def identities(self, role: str) -> list[tuple[str, str | None]]:
        """Every (backend, model) that answered ``role`` in the source (the configured model only,
        when one is set), then the live backend's own."""
        live = self.live.identities(role)[0] if self.live is not None else None
        return self.records.replay_identities(role, live, self.settings.model)

    async def attempts(self, call: PendingCall) -> AsyncGenerator[Attempt, str | None]:
        """The recorded answer as one attempt; else the live backend's attempts; else UnrecordedRequest."""
        found = self.records.replayed(call.candidates)
        if found is not None:
            event = found.event
            try:
                reply = call.spec.validate_reply(call.request, event.data.get("reply"))
            except ValueError as exc:
                reason = f"the recorded reply {event.id} no longer validates: {exc}"
                raise JudgeCallFailed(call.role, call.case_id, found.request_hash, reason, 0) from exc
            origin = event.data.get("source_backend") or event.data.get("backend")
            yield Attempt(call.first_attempt, reply=reply, backend=self.name, model=event.data.get("model"),
                          request_hash=found.request_hash, source_event=event.id, source_backend=origin)
            return
        if self.live is None:
            self.records.miss(call.role, call.case_id, call.request_hash)
            raise UnrecordedRequest(call.role, call.case_id, call.request_hash, source_label(self.source))
        # The live backend's hash is the last candidate: record its attempts under its own name.
        live, live_hash = self.live, call.candidates[-1]
        first = self.records.next_attempt(call.case_id, call.role, live_hash, call.step_attempt)
        async with aclosing(live.attempts(dataclasses.replace(call, request_hash=live_hash,
                                                              first_attempt=first))) as attempts:
            refused: str | None = None   # the port's answer, passed on: the live backend asks again
            while True:
                try:
                    attempt = await attempts.asend(refused)
                except StopAsyncIteration:
                    return
                attempt.backend, attempt.model, attempt.request_hash = live.name, live.model, live_hash
                refused = yield attempt

    async def aclose(self) -> None:
        """Close the live backend and a source this backend opened."""
        if self.live is not None:
            await self.live.aclose()
        if self._opened:
            self.source.close()
