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
from pathlib import Path
from typing import Any

from evalledger.stages.judge.calls import Attempt, JudgeCallFailed, PendingCall, UnrecordedRequest
from evalledger.stages.judge.recording import case_stream, index_for
from evalledger.stages.judge.roles import Model
from evalledger.stages.judge.settings import JudgeSettings


def open_source(source, led):
    """The source ledger: ``led`` itself, a Ledger, or a path opened read-only. Returns (ledger, opened)."""
    if source is None:
        return led, False
    if isinstance(source, (str, Path)):
        from evalledger import ledger
        return ledger.open_ledger(source, readonly=True), True
    return source, False


def source_label(led) -> str:
    """How a ledger is named in messages: its home, or its store's location."""
    return led.label


class ReplayBackend:
    """Answers from recorded successes; ``live`` (optional) answers what was never recorded."""

    name = "replay"

    def __init__(self, settings: JudgeSettings, led, source=None, live=None):
        self.settings = settings
        self.led = led
        self.source, self._opened = open_source(source, led)
        if self.source is None:
            raise ValueError("replay needs a ledger to answer from")
        self.source_index = index_for(self.source)
        self.live = live
        self.model = settings.model
        self.network = bool(live is not None and live.network)
        self.misses: list[dict[str, Any]] = []

    def identities(self, role: str) -> list[tuple[str, str | None]]:
        """Every (backend, model) that answered ``role`` in the source (the configured model only,
        when one is set), then the live backend's own."""
        seen = [i for i in self.source_index.seen_identities(role)
                if i[0] != self.name and (self.settings.model is None or i[1] == self.settings.model)]
        if self.live is not None:
            own = self.live.identities(role)[0]
            seen = [i for i in seen if i != own] + [own]
        return seen or [(self.name, self.settings.model)]

    async def answer(self, call: PendingCall) -> Model:
        for hash in call.candidates:
            found = self.source_index.success(hash)
            if found is None:
                continue
            event = self.source.get(found.id)
            try:
                reply = call.spec.validate_reply(call.request, event.data.get("reply"))
            except ValueError as exc:
                reason = f"the recorded reply {event.id} no longer validates: {exc}"
                raise JudgeCallFailed(call.role, call.case_id, hash, reason, 0) from exc
            origin = event.data.get("source_backend") or event.data.get("backend")
            await call.record(Attempt(call.first_attempt, reply=reply, backend=self.name,
                                      model=event.data.get("model"), request_hash=hash,
                                      source_event=event.id, source_backend=origin))
            return reply
        if self.live is not None:
            return await self._answer_live(call)
        miss = {"role": call.role, "case_id": call.case_id, "request_hash": call.request_hash}
        self.misses.append(miss)
        raise UnrecordedRequest(call.role, call.case_id, call.request_hash, source_label(self.source))

    async def _answer_live(self, call: PendingCall) -> Model:
        """Answer through the live backend, recorded under its own name and hash."""
        live_hash = call.candidates[-1]
        live = self.live
        first = index_for(self.led).next_attempt(case_stream(call.case_id), call.role, live_hash,
                                                 call.step_attempt) if self.led is not None else 1
        outer = call.record

        async def record(attempt: Attempt):
            attempt.backend, attempt.model, attempt.request_hash = live.name, live.model, live_hash
            return await outer(attempt)

        return await live.answer(dataclasses.replace(call, request_hash=live_hash, first_attempt=first,
                                                     record=record))

    async def aclose(self) -> None:
        if self.live is not None:
            await self.live.aclose()
        if self._opened:
            self.source.close()
