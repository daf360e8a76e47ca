"""Recording judge and search calls as ``judge.called`` events, and finding recorded answers fast.

- ``request_hash``: sha256 over the canonical (role, backend, model, parameters, messages).
- ``CallIndex``: an index (recent entries in memory, the rest in a temporary file) of a ledger's ``judge.called`` events (request hash -> the
  first recorded success; call -> the highest attempt number), built once per ledger and caught
  up from the ledger before every miss, so events appended by another process are seen too.
  Correctness never depends on it: a miss only means "call", and event ids are deterministic.
  A replay source's index also keeps each success's answer (``KeptAnswer``: the payload without
  the request), decoded once while it is built, so a replayed call reads no event back.
- ``call_event`` / ``record_events``: one attempt (success or failure) as an event on the case's
  stream, with an id from (case, role, request hash, step attempt, attempt), so a redone step
  appends nothing; appending folds it into the index. The ports record through
  ``recorded_calls.RecordedCalls``, which uses these.
"""

from __future__ import annotations

import hashlib
import sys
import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, NamedTuple

from evalledger.ledger import Event, NewEvent, canonical_json, decode_json
from evalledger.stages.judge.spill_map import SpillMap

CALL_EVENT = "judge.called"


def request_hash(role: str, backend: str, model: str | None, parameters: dict[str, Any],
                 messages: list[dict[str, Any]]) -> str:
    """sha256 (hex) of the canonical JSON of (role, backend, model, parameters, messages)."""
    body = canonical_json({"role": role, "backend": backend, "model": model,
                           "parameters": parameters, "messages": messages})
    return hashlib.sha256(body).hexdigest()


def case_stream(case_id: str) -> str:
    """The stream a case's calls are recorded on."""
    return f"case:{case_id}"


def call_key(role: str, hash: str, step_attempt: int, attempt: int | str) -> str:
    """The idempotency key of one recorded attempt (the stream carries the case)."""
    return f"judge:{role}:{hash}:{step_attempt}:{attempt}"


# What a kept answer leaves out: the request (the prompt messages, most of an event's bytes) and
# what was sent and received raw. Nothing that answers from a record reads them.
_NOT_KEPT = frozenset(("request", "sent", "raw_reply"))
# How far behind the head an index catches up by a scan of stored rows (its own read connection)
# rather than by reading events on the ledger's connection.
_SCAN_FROM = 256


@dataclass(frozen=True, slots=True)
class KeptAnswer:
    """A recorded success as a replay reads it: its event id, stream, and payload without the request."""

    id: str
    stream: str
    data: dict[str, Any]


class Recorded(NamedTuple):
    """Where a recorded success is: its event id, stream, backend and model (and its answer, when kept).

    A NamedTuple rather than a frozen dataclass: the call index pickles one into its spill file
    for every success a run records, and a tuple pickles and loads in about 60% of the time.
    """

    id: str
    stream: str
    backend: str
    model: str | None
    answer: KeptAnswer | None = None


@dataclass
class CallIndex:
    """Recorded successes by request hash and attempt counts by call, for one ledger."""

    led: Any
    last_seq: int = 0
    # One entry a recorded success and one a call: kept mostly in a temporary file (``SpillMap``)
    # so a long run's memory stays flat.
    successes: SpillMap = field(default_factory=SpillMap)
    attempts: SpillMap = field(default_factory=SpillMap)
    identities: dict[str, set[tuple[str, str | None]]] = field(default_factory=dict)
    own_seqs: set[int] = field(default_factory=set)   # appended here, after last_seq
    keep_answers: bool = False   # a replay source: keep each success's answer (``KeptAnswer``)
    lock: threading.Lock = field(default_factory=threading.Lock)
    appending: int = 0   # events this process is appending right now (``record_events``, ``under_way``)

    def catch_up(self) -> bool:
        """Fold the ``judge.called`` events appended since the last look (by anyone); False when
        nothing was read (so nothing new can be known).

        When every event after the last look is one this process appended (and so already
        folded), the head alone tells: no read is needed. While appends of this process are under
        way (the recording thread's, or a case's commit counted by ``under_way``: committed or not,
        not yet folded), nothing is looked at and the position stays: the next look, once they
        are folded, reads only what others appended
        (without this, a look racing the recording thread waited for its commit and then read
        every call it had just committed back, prompts and all). An index not yet caught up
        once always looks.
        """
        if self.appending and self.last_seq:
            # Read without the lock first: the recording thread holds it while it folds a batch,
            # and a lookup on the event loop waiting for that is a turn of the loop lost.
            return False
        with self.lock:
            if self.appending and self.last_seq:
                # This process is committing calls right now: the head would be read after that
                # commit (the ledger's lock is held meanwhile, and the event loop would wait for
                # it) and could not tell its events from others'. The next look, once they are
                # folded, reads what others appended. (An index never caught up, being built,
                # always looks.)
                return False
            head = self.led.head().seq
            if head - self.last_seq == len(self.own_seqs):
                self.last_seq, self.own_seqs = head, set()
                return False
            if head - self.last_seq > _SCAN_FROM:
                # A long way behind (an index being built): the stored rows, blob references left
                # in place, since the index reads small fields only and a kept answer resolves
                # just its own parts (a prompt is never read back).
                for row in self.led.scan(self.last_seq + 1, head, (CALL_EVENT,), resolve=False):
                    self.add_row(row)
            else:   # a few events behind: the writer's own connection, no new one for a scan
                for event in self.led.read(from_seq=self.last_seq + 1, types=[CALL_EVENT]):
                    self.add(event)
            self.last_seq = max(self.last_seq, head)
            self.own_seqs = {seq for seq in self.own_seqs if seq > self.last_seq}
            return True

    @contextmanager
    def under_way(self, events: int) -> Iterator[None]:
        """Count ``events`` this process appends outside ``record_events`` (a case's commit) as under
        way for the body: ``catch_up`` takes no look meanwhile (it would wait for that transaction
        on the ledger's lock, and the events are folded by ``fold_appended`` once it returns)."""
        with self.lock:
            self.appending += events
        try:
            yield
        finally:
            with self.lock:
                self.appending -= events

    def add(self, event: Event, advance: bool = True) -> None:
        """Fold one ``judge.called`` event into the index.

        ``advance=False`` (for an event this process just appended) leaves the catch-up position
        alone, so events another process appended just before it are still read.
        """
        self._fold(event.id, event.stream, event.data, lambda kept: kept)   # event.data is whole
        if advance:
            self.last_seq = max(self.last_seq, event.seq)
        else:
            self._own(event.seq)

    def _own(self, seq: int) -> None:
        """Note event ``seq`` as appended (and folded) by this process. Own events right after
        ``last_seq`` move it on at once: with nobody else appending, ``own_seqs`` stays empty
        instead of holding every seq a long run appends."""
        if seq == self.last_seq + 1:
            self.last_seq = seq
            own = self.own_seqs
            while self.last_seq + 1 in own:
                self.last_seq += 1
                own.discard(self.last_seq)
        elif seq > self.last_seq:
            self.own_seqs.add(seq)

    def add_row(self, row: Any) -> None:
        """Fold one stored ``judge.called`` row (``Ledger.scan``, references unresolved) into the index."""
        data = decode_json(row.data) if isinstance(row.data, (bytes, str)) else row.data
        self._fold(row.id, row.stream, data, self.led.join)

    def _fold(self, id: str, stream: str, data: dict[str, Any], whole: Any) -> None:
        """Count the attempt, note the identity and keep the first success (its answer made whole
        by ``whole`` when answers are kept)."""
        hash = data.get("request_hash")
        self.count_attempt(stream, data)
        if data.get("error") is None and not data.get("degraded") and hash not in self.successes:
            answer = None
            if self.keep_answers:
                answer = KeptAnswer(id, stream, whole({k: v for k, v in data.items() if k not in _NOT_KEPT}))
            # backend and model repeat across a run's calls: one string each, not one per call kept
            self.successes[hash] = Recorded(id, stream, _shared(data.get("backend")), _shared(data.get("model")),
                                            answer)
        self.identities.setdefault(data.get("role"), set()).add(
            (data.get("source_backend") or data.get("backend"), data.get("model")))

    def count_attempt(self, stream: str, data: dict[str, Any]) -> None:
        """Note an attempt's number for its call (so the next attempt of that call is numbered after it)."""
        key = (stream, _shared(data.get("role")), data.get("request_hash"), data.get("step_attempt") or 1)
        number = data.get("attempt") or 0
        if isinstance(number, int) and number > self.attempts.get(key, 0):
            self.attempts[key] = number

    def fold_appended(self, events: list[Event]) -> None:
        """Fold events this process just appended (of any type) without reading them back.

        ``judge.called`` events go into the index; the others only count as seen, so the next
        ``catch_up`` knows from the head alone that nobody else appended.
        """
        with self.lock:
            for event in events:
                if event.type == CALL_EVENT:
                    self.add(event, advance=False)
                else:
                    self._own(event.seq)

    def success(self, hash: str) -> Recorded | None:
        """The first recorded success of this request, looking at new events on a miss."""
        found = self.successes.get(hash)
        if found is None and self.catch_up():   # a second look only when something new was read
            found = self.successes.get(hash)
        return found

    def next_attempt(self, stream: str, role: str, hash: str, step_attempt: int) -> int:
        """The number the next attempt of this call gets (1 unless attempts were recorded)."""
        return self.attempts.get((stream, role, hash, step_attempt), 0) + 1

    def seen_identities(self, role: str) -> list[tuple[str, str | None]]:
        """Every (backend, model) that answered ``role`` in this ledger, sorted."""
        self.catch_up()
        return sorted(self.identities.get(role, ()), key=lambda i: (i[0] or "", i[1] or ""))


def _shared(value: Any) -> Any:
    """One string object for each short name (a backend, a model, a role) the index keeps per
    call: decoded events give a copy each, and a long run's index keeps one entry a call."""
    return sys.intern(value) if type(value) is str and len(value) <= 200 else value


_INDEXES: "weakref.WeakKeyDictionary[Any, CallIndex]" = weakref.WeakKeyDictionary()
_INDEXES_LOCK = threading.Lock()


def index_for(led, keep_answers: bool = False) -> CallIndex:
    """The one CallIndex of a ledger (shared by every judge and search port on it), caught up.

    ``keep_answers``: the ledger is a replay source; its index keeps the answers it folds (one
    built before without them reads those events back when asked).
    """
    with _INDEXES_LOCK:
        index = _INDEXES.get(led)
        if index is None:
            index = _INDEXES[led] = CallIndex(led, keep_answers=keep_answers)
        elif keep_answers:
            index.keep_answers = True
    index.catch_up()
    return index


def known_index(led) -> CallIndex | None:
    """The CallIndex of a ledger if one was built (no catch-up), else None."""
    with _INDEXES_LOCK:
        return _INDEXES.get(led)


def call_event(case_id: str, payload: dict[str, Any], step_attempt: int, attempt: int | str,
               meta: dict[str, Any] | None = None) -> NewEvent:
    """The ``judge.called`` event of one attempt, on the case's stream, with its deterministic key."""
    data = {k: v for k, v in payload.items() if v is not None or k in ("error", "model")}
    data["case_id"] = case_id
    data["step_attempt"] = step_attempt
    meta = dict(meta or {})
    order = meta.pop("order", None)   # a call made at once with others (CaseWork.together): its place
    if order is not None:
        data["order"] = order
    key = call_key(payload["role"], payload["request_hash"], step_attempt, attempt)
    return NewEvent(case_stream(case_id), CALL_EVENT, data, key=key, meta={"stage": "judge", **meta})


def record_events(led, index: CallIndex | None, events: list[NewEvent]) -> list[Event]:
    """Append attempts in one transaction and fold them into the index (which counts them as
    under way meanwhile: see ``CallIndex.catch_up``)."""
    if index is None:
        return led.append(events)
    with index.lock:
        index.appending += len(events)
    stored: list[Event] = []
    try:
        stored = led.append(events)
    finally:
        with index.lock:
            index.appending -= len(events)
            for event in stored:
                index.add(event, advance=False)
    return stored
