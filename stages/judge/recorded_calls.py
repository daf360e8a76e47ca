"""The recorded-call core the judge port and the search port share.

A port asks a question (a role, its messages and parameters) on behalf of a case. This core:

- hashes it under every (backend, model) it may have been recorded by (``request_hashes``,
  ``replay_identities``: under replay, the live backend's own identity comes last, so the last
  hash is the one a live answer is recorded under);
- finds a recorded success of it, in the recording ledger (``reusable``) or in the replay source
  (``replayed``), through the per-ledger ``CallIndex``;
- numbers and appends each attempt as a ``judge.called`` event on the case's stream (``record``),
  committed in batches off the event loop for network backends; a free attempt (one no model
  was paid for: offline, replayed, reused) made while the dispatcher runs the case
  (``collecting``) is held in the case's ``CaseCalls`` instead, and committed with the case's
  outputs in the same transaction;
- keeps the requests a replay could not answer (``misses``);
- and blots a secret out of any text before it is recorded or logged (``redact``).

Backends only produce attempts (an async iterator of ``Attempt``); the port records them here.
Nothing in a backend records or calls back into a port.
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from evalledger import ledger
from evalledger.ledger import Event, NewEvent, canonical_json, schema_version, stored_part
from evalledger.stages.judge.group_commit import GroupCommitter
from evalledger.stages.judge.recording import (
    CALL_EVENT,
    CallIndex,
    KeptAnswer,
    call_event,
    case_stream,
    index_for,
    known_index,
    record_events,
    request_hash,
)
from evalledger.stages.judge.source_index import SourceIndex, source_index_for

REPLAY = "replay"
# Secrets shorter than this are placeholders ("x", "ollama", "EMPTY"), redacted only as whole tokens.
SHORT_SECRET = 12


def redact(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` blotted out as ``[redacted]`` (whole tokens only for a short secret)."""
    if not secret or not text:
        return text
    if len(secret) >= SHORT_SECRET:
        text = text.replace(secret, "[redacted]")
        if "\\" in text:   # JSON may spell the key with escapes ("\u0073k-..."): decoded, it is whole again
            text = _spelled_in_json(secret).sub("[redacted]", text)
        return text
    # Blotting a placeholder inside words would garble the recorded replies and errors.
    pattern = rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])"
    return re.sub(pattern, "[redacted]", text)


@lru_cache(maxsize=8)
def _spelled_in_json(secret: str) -> re.Pattern[str]:
    """``secret`` as a JSON string may write it: each character itself or as a ``\\uXXXX`` escape
    (hex digits in either case), a "/" also as ``\\/``."""
    parts = []
    for char in secret:
        hex_digits = "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{ord(char):04x}")
        spellings = [re.escape(char), r"\\u" + hex_digits] + ([r"\\/"] if char == "/" else [])
        parts.append("(?:" + "|".join(spellings) + ")")
    return re.compile("".join(parts))


def redact_cut(text: str, key: str | None) -> str:
    """``text`` (already cut at a length) redacted, and without a start of the key at its end (where the cut fell)."""
    text = redact(text, key)
    if key and len(key) >= SHORT_SECRET:
        for size in range(len(key) - 1, 2, -1):
            if text.endswith(key[:size]):
                return text[:-size] + "[redacted]"
    return text


def request_hashes(role: str, identities: list[tuple[str, str | None]], parameters: dict[str, Any],
                   messages: list[dict[str, Any]]) -> list[str]:
    """The request's hash under each (backend, model), in the order given."""
    return [request_hash(role, backend, model, parameters, messages) for backend, model in identities]


def open_source(source, led) -> tuple[Any, bool]:
    """The ledger a replay answers from: ``led`` itself, a Ledger, or a path opened read-only.

    Returns (ledger, whether it was opened here and so must be closed by the caller).
    """
    if source is None:
        return led, False
    if isinstance(source, (str, Path)):
        return ledger.open_ledger(source, readonly=True), True
    return source, False


@dataclass(frozen=True, slots=True)
class Found:
    """A recorded success: its event, the hash it was found under, and what ``accept`` made of it.

    The event is a stored one, or one held for its case's commit (``CaseCalls``): both have the
    stream and data a reuse reads; or, from a replay source, the answer its index kept.
    """

    event: Event | NewEvent | KeptAnswer
    request_hash: str
    value: Any = None


class CaseCalls:
    """The calls recorded for one case while the dispatcher runs it (``collecting``).

    Free attempts are held here rather than appended one transaction each: the dispatcher takes
    them (``take``) and commits them with the case's outputs, all or nothing. Their ids are
    deterministic, so a case redone after a crash holds the very same events again; nothing was
    paid for them, so losing them with the case costs nothing. Attempts committed at once (paid
    calls) are noted (``stored``) so the run can count the case's retries without reading them back.
    """

    def __init__(self, case_id: str):
        self.case_id = case_id
        self.held: list[NewEvent] = []
        self.stored: list[Event] = []
        self._keys: set[str | None] = set()
        self._successes: dict[str, NewEvent] = {}

    def hold(self, event: NewEvent) -> None:
        """Keep ``event`` for the case's commit (an attempt already held under its id is kept once)."""
        if event.key in self._keys:
            return
        self._keys.add(event.key)
        self.held.append(event)
        data = event.data
        if data.get("error") is None and not data.get("degraded"):
            self._successes.setdefault(data.get("request_hash"), event)

    def success(self, hashes: list[str], accept: Callable[[Any], Any] | None) -> Found | None:
        """The first success held under one of ``hashes`` that ``accept`` takes (as ``_first``)."""
        return _first_accepted(((self._successes[h], h) for h in hashes if h in self._successes), accept)

    def take(self) -> list[NewEvent]:
        """The held attempts, in the order they were made; the case holds none after this."""
        held, self.held = self.held, []
        self._successes = {}
        return held

    def retries(self, committed: list[Event], run: str) -> int:
        """The port's own retries for this case in run ``run`` (429/5xx, timeouts, invalid replies),
        counted over the attempts committed at once and ``committed`` (the case's commit)."""
        return sum(1 for e in self.stored + committed
                   if e.type == CALL_EVENT and (e.meta or {}).get("run") == run
                   and isinstance(e.data.get("attempt"), int) and e.data["attempt"] > 1)


_CASE: ContextVar[CaseCalls | None] = ContextVar("evalledger_case_calls", default=None)


@contextmanager
def collecting(case_id: str) -> Iterator[CaseCalls]:
    """Hold the free attempts recorded for ``case_id`` in this context (the case's task and the
    tasks it starts) in a ``CaseCalls``, for the caller to commit with the case's outputs."""
    calls = CaseCalls(case_id)
    token = _CASE.set(calls)
    try:
        yield calls
    finally:
        _CASE.reset(token)


def _collector(case_id: str) -> CaseCalls | None:
    """The ``CaseCalls`` collecting for ``case_id`` in this context, if any."""
    calls = _CASE.get()
    return calls if calls is not None and calls.case_id == case_id else None


def appending(led, events: int) -> AbstractContextManager[None]:
    """While this process appends ``events`` events outside a port (a case's commit, off the event
    loop), its call index takes no look at the ledger: a lookup on the loop would wait for that
    transaction on the ledger's lock (``CallIndex.under_way``)."""
    index = known_index(led)
    return index.under_way(events) if index is not None else nullcontext()


def note_appended(led, stored: list[Event]) -> None:
    """Tell ``led``'s call index about events this process appended outside a port (a case's
    commit, with the calls it held), so it folds them without reading them back."""
    index = known_index(led)
    if index is not None:   # no index yet: the first port to build one reads the ledger anyway
        index.fold_appended(stored)


class RecordedCalls:
    """The recorded calls a port reads and writes: its ledger, and the source a replay answers from."""

    def __init__(self, led, source=None):
        self.led = led
        self.index: CallIndex | None = index_for(led) if led is not None else None
        self.source = source
        # A separate source is read only for its answers: its index keeps them in a temporary file
        # (no event read back from the source per call, no memory growing with the source).
        self.source_index: CallIndex | SourceIndex | None = (
            None if source is None else index_for(source) if source is led else source_index_for(source))
        self.misses: list[dict[str, Any]] = []
        self._writer: GroupCommitter | None = None
        self._identities: dict[tuple[Any, ...], list[tuple[str, str | None]]] = {}

    # --- finding ------------------------------------------------------------------------------------
    def reusable(self, hashes: list[str], accept: Callable[[Event], Any],
                 request: Callable[[], dict[str, Any]] | None = None) -> Found | None:
        """The first success recorded in this ledger under one of ``hashes`` that ``accept`` takes.

        ``accept`` turns the event into the answer; a ValueError from it (a record this version
        cannot read) skips that record, so the request is asked again rather than trusted.
        ``request()`` gives the request this call would record: a success stored with the very
        same request (the same stored form) is then read without it, and found with this one.
        """
        if self.index is None:
            return None
        calls = _CASE.get()
        held = calls.success(hashes, accept) if calls is not None else None
        return held or _first(self.led, self.index, hashes, accept, request)

    def replayed(self, hashes: list[str]) -> Found | None:
        """The first success recorded in the replay source under one of ``hashes``."""
        if self.source_index is None:
            return None
        return _first(self.source, self.source_index, hashes, None)

    def replay_identities(self, role: str, live: tuple[str, str | None] | None = None,
                          model: str | None = None) -> list[tuple[str, str | None]]:
        """Every (backend, model) that answered ``role`` in the source (only ``model``'s when given),
        then the live backend's own; ``[("replay", model)]`` when there is none.

        A source other than the ledger recorded into is read once per role: a replay answers
        from the source as it was when the replay began, and every call asks this.
        """
        key = (role, live, model)
        known = self._identities.get(key)
        if known is not None:
            return known
        seen = [i for i in self.source_index.seen_identities(role)
                if i[0] != REPLAY and (model is None or i[1] == model)] if self.source_index else []
        if live is not None:
            seen = [i for i in seen if i != live] + [live]
        identities = seen or [(REPLAY, model)]
        if self.source is not None and self.source is not self.led:
            self._identities[key] = identities
        return identities

    def miss(self, role: str, case_id: str, hash: str) -> None:
        """Note a request the replay source never recorded (``misses``, listed after a replay)."""
        self.misses.append({"role": role, "case_id": case_id, "request_hash": hash})

    # --- recording ----------------------------------------------------------------------------------
    def next_attempt(self, case_id: str, role: str, hash: str, step_attempt: int) -> int:
        """The number the next recorded attempt of this call gets (1 when none is recorded)."""
        return self.index.next_attempt(case_stream(case_id), role, hash, step_attempt) if self.index else 1

    async def record(self, case_id: str, payload: dict[str, Any], step_attempt: int, attempt: int | str,
                     meta: dict[str, Any] | None = None, batched: bool = False,
                     free: bool = False) -> Event | None:
        """Append one attempt as a ``judge.called`` event on the case's stream and index it.

        ``batched``: hand it to the group committer (network calls end together; committing off
        the event loop in one transaction keeps the loop free). Returns once it is committed.
        ``free``: nothing was paid for it; while the dispatcher collects the case's calls
        (``collecting``) it is held for the case's commit instead, and None is returned.
        """
        if self.led is None:
            return None
        event = call_event(case_id, payload, step_attempt, attempt, meta)
        calls = _collector(case_id)
        if free and calls is not None and self.index is not None:
            calls.hold(event)
            with self.index.lock:   # the next attempt of this call is numbered after it
                self.index.count_attempt(event.stream, event.data)
            return None
        stored = await self._committer().record(event) if batched else self.append([event])[0]
        if calls is not None:
            calls.stored.append(stored)
        return stored

    def append(self, events: list[NewEvent]) -> list[Event]:
        """Append recorded attempts in one transaction and fold them into the index."""
        return record_events(self.led, self.index, events)

    def _committer(self) -> GroupCommitter:
        if self._writer is None:
            self._writer = GroupCommitter(self.led, self.index)
        return self._writer

    def close(self) -> None:
        """Stop the recording thread (if one was started)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _first(led, index: CallIndex | SourceIndex, hashes: list[str], accept: Callable[[Event], Any] | None,
           request: Callable[[], dict[str, Any]] | None = None) -> Found | None:
    """The first recorded success under ``hashes`` (in order) that ``accept`` takes (its kept
    answer when the index kept one, else the event read back: without its request when
    ``request()`` gives the same one, see ``_same_request``)."""
    def recorded() -> Iterator[tuple[Event | KeptAnswer, str]]:
        for hash in hashes:
            found = index.success(hash)
            if found is None:
                continue
            event = found.answer if found.answer is not None else (
                request is not None and _same_request(led, found.id, request())) or led.get(found.id)
            if event is not None:
                yield event, hash
    return _first_accepted(recorded(), accept)


def _same_request(led, id: str, request: dict[str, Any]) -> KeptAnswer | None:
    """Recorded call ``id`` with ``request`` as its request, when its stored request has the same
    stored form (a blob reference with the same key: the same bytes), so the prompt it holds is
    not read back and decompressed; None (read it whole) otherwise, or when it was stored at an
    older schema. A reuse on another case copies the request: a run that meets the same question
    and response again (a benchmark's repeated items) read each of them back."""
    event = led.get_stored(id)
    if event is None or event.schema != schema_version(event.type):
        return None
    data = event.stored_data
    if canonical_json(data.get("request")) != canonical_json(stored_part(request)):
        return None
    return KeptAnswer(event.id, event.stream,
                      {k: request if k == "request" else led.join(v) for k, v in data.items()})


def _first_accepted(candidates: Iterable[tuple[Any, str]], accept: Callable[[Any], Any] | None) -> Found | None:
    """The first (event, hash) of ``candidates`` that ``accept`` turns into an answer (a ValueError
    from it skips that record: the request is asked again rather than a record trusted that this
    version cannot read); without ``accept``, the first."""
    for event, hash in candidates:
        if accept is None:
            return Found(event, hash)
        try:
            return Found(event, hash, accept(event))
        except ValueError:
            continue
    return None
