"""Bring the read models up to the ledger head: fold the events after their tracked position.

``update`` is the incremental path (load only the cases the new events touch); ``rebuild`` drops
the tables and folds from seq 1. Both run the same appliers (``projections.fold``), and every
applier is idempotent per event (each entry keyed by the event's version in its case stream, or
"latest version wins"), so re-folding an event after a crash between a flush and the position
commit changes nothing.
"""

from __future__ import annotations

import gc
import logging
import re
from dataclasses import dataclass
from functools import partial
from typing import Iterator

import orjson

from evalledger.ledger.envelope import EnvelopeError, decode_json
from evalledger.ledger.paging import row_chunks
from evalledger.projections.appliers import (
    BENCHMARK_TYPES,
    CASE_APPLIERS,
    CHECKPOINT_TYPES,
    DEEP_ROLES,
    FOLDED_TYPES,
    RUN_TYPES,
    apply_benchmark_event,
    apply_case_event,
    apply_checkpoint_event,
    apply_run_event,
    case_id_of,
    judge_call_entry,
    judge_call_reads,
    new_case,
    note_recorded_at,
)
from evalledger.projections.store import ReadModelStore, StaleFold

# A rebuild keeps at most this many case states in memory before writing them out.
FLUSH_EVERY = 5_000


@dataclass(frozen=True)
class FoldResult:
    """What an update did: events folded, cases touched, and the position reached."""

    events: int
    cases: int
    position: tuple[int, str]


# The events whose meta.config_hash the read models record: a stage's final event for a case and
# its failures carry the effective config the case was judged (or failed) under; reading meta for
# every event would cost a JSON parse each.
CONFIG_STAMPED = ("case.judged", "claim.scored", "credit.scored", "stage.failed")
# The events whose meta.recorded_at the read models keep: when a reconstruction was judged (the
# spec's metadata timestamp). It is part of the event, so reports stay a function of the ledger.
TIME_STAMPED = ("claim.scored",)


def scan(led, start: int, end: int) -> Iterator[tuple]:
    """(type, id, stream, version, schema, payload, config_hash, recorded_at) of the folded events
    in (start, end], in seq order, through the ledger's raw scan (``Ledger.scan``): ``payload`` is
    the stored JSON bytes of a payload at its current schema, or the dict the ledger already
    upcast; ``_decoded`` turns either into the dict. ``config_hash`` is read from meta for the
    CONFIG_STAMPED types only, ``recorded_at`` for the TIME_STAMPED types only (None otherwise).
    Blob references stay in stored bytes (``resolve=False``): ``_Folder.resolved`` fetches the
    parts the appliers read, never a judge call's prompt or reply. Rows are plain tuples where the
    store can give them (``plain=True``): the fold unpacks them, a named tuple each would cost more.
    """
    return led.scan(start + 1, end, FOLDED_TYPES, CONFIG_STAMPED, TIME_STAMPED, resolve=False, plain=True)


# A run of 19+ digits is an integer orjson may read inexactly: such payloads take the exact decoder.
_DIGITS_TO_9 = bytes.maketrans(b"012345678", b"999999999")
_NINETEEN_DIGITS = b"9" * 19
# In canonical JSON a blob reference or an escaped literal starts with these bytes ("$blob", "$lit").
_MARKER = b'"$'


def _decoded(etype: str, schema: int, raw) -> dict:
    """The payload dict, decoded exactly (the ledger's scan has already upcast older schemas)."""
    try:
        data = decode_json(raw) if isinstance(raw, (bytes, str)) else raw
    except ValueError as exc:   # a row altered in the store: an error naming it, not a crash
        raise EnvelopeError(f"a {etype} event's stored data is not JSON ({exc}): an event was altered in the "
                            "store; 'evalledger verify' names its seq") from None
    return data if isinstance(data, dict) else {}


class _Folder:
    """Case/benchmark/run states being folded, loaded from the store on first touch."""

    def __init__(self, led, store: ReadModelStore, fresh: bool):
        # Bound once: called for every judge call. Only a request's payload is read (its last key).
        self.join, self.open = led.join, partial(led.open, last="payload")
        self.preload_blobs = led.preload   # not ``preload``: that loads cases (the incremental path)
        self.store = store
        self.fresh = fresh          # the tables are empty: no need to look a case up
        self.flushed: set[str] = set()
        self.cases: dict[str, dict] = {}
        self.benchmarks: dict[str, dict] | None = {} if fresh else None
        self.runs: dict[str, dict] | None = {} if fresh else None
        self.checkpoints: dict[str, dict] | None = {} if fresh else None
        self.touched = 0

    def case(self, case_id: str) -> dict:
        state = self.cases.get(case_id)
        if state is None:
            if not self.fresh or case_id in self.flushed:
                state = self.store.load_cases([case_id]).get(case_id)
            if state is None:
                state = new_case(case_id)
            self.cases[case_id] = state
            self.touched += 1
        return state

    def preload(self, case_ids: set[str]) -> None:
        """Load many cases in a few queries (the incremental path knows them up front)."""
        wanted = [c for c in case_ids if c not in self.cases]
        loaded = self.store.load_cases(wanted) if not self.fresh else {}
        for case_id in wanted:
            self.cases[case_id] = loaded.get(case_id) or new_case(case_id)
        self.touched += len(wanted)

    def payload(self, etype: str, schema: int, raw) -> dict:
        """The payload dict of a scanned row, the parts the appliers read resolved from the blobs."""
        data = _decoded(etype, schema, raw)
        return self.resolved(etype, data) if raw.__class__ is bytes and _MARKER in raw else data

    def resolved(self, etype: str, data: dict) -> dict:
        """``data`` (stored bytes holding ``"$``: blob references, or a key that merely starts with
        ``$``) with what the appliers read resolved: for a judge call its small fields and its
        request's payload, for any other type the whole payload."""
        if etype == "judge.called":
            return judge_call_reads(data, self.join, self.open)
        data = self.join(data)
        return data if isinstance(data, dict) else {}

    def fold(self, etype: str, eid: str, stream: str, version: int, schema: int, raw, config_hash,
             recorded_at=None) -> None:
        data = self.payload(etype, schema, raw)
        if etype in CASE_APPLIERS:
            case_id = case_id_of(stream, data)
            if case_id is not None:
                case = self.cases.get(case_id) or self.case(case_id)
                apply_case_event(case, etype, data, slot_key(stream, case_id, eid, version), version, config_hash)
                if recorded_at:
                    note_recorded_at(case, recorded_at)
        elif etype in BENCHMARK_TYPES:
            if self.benchmarks is None:
                self.benchmarks = self.store.load_keyed("proj_benchmarks")
            apply_benchmark_event(self.benchmarks, etype, data)
        elif etype in RUN_TYPES:
            if self.runs is None:
                self.runs = self.store.load_keyed("proj_runs")
            apply_run_event(self.runs, etype, data)
        elif etype in CHECKPOINT_TYPES:
            if self.checkpoints is None:
                self.checkpoints = self.store.load_keyed("proj_checkpoints")
            apply_checkpoint_event(self.checkpoints, data)

    def flush(self, position: tuple[int, str] | None, folded_from: int | None = None) -> None:
        # A rebuild into empty tables knows which cases it has written: only those are looked up.
        self.store.save(self.cases.values(), self.benchmarks or {}, self.runs or {}, position, folded_from,
                        self.checkpoints or {}, self.flushed if self.fresh else None)
        self.flushed.update(self.cases)
        self.cases = {}


def update(led, store: ReadModelStore, *, fresh: bool = False, upto=None) -> FoldResult:
    """Fold every event after the store's position up to the current head (or ``upto``, a Head);
    save in one commit.

    When another process folded at the same time and committed first, this fold is thrown away
    and done again from the new position (at most a few times; folds are idempotent anyway).
    """
    for _ in range(4):
        try:
            return _update_once(led, store, fresh, upto)
        except StaleFold:
            fresh = False
    return _update_once(led, store, fresh, upto)


def _update_once(led, store: ReadModelStore, fresh: bool, upto=None) -> FoldResult:
    start, start_hash = store.position()
    head = led.head() if upto is None else upto
    if not fresh and not led.holds(start, start_hash):
        # Folded from another ledger under this name (read models kept beside a .jsonl ledger or
        # a server store, a file restored or copied over): folding on from ``start`` would add this
        # ledger's events to that one's cases. They are dropped and this ledger folded from seq 1.
        logging.getLogger("evalledger.projections").warning(
            "%s: the read models in %s were folded from another ledger (its seq %d has another hash "
            "here, or is not there); they are dropped and rebuilt from seq 1", led.label, store.path, start)
        store.drop()
        start, fresh = 0, True
    folder = _Folder(led, store, fresh=fresh)
    if head.seq <= start:
        return FoldResult(0, 0, (start, store.position()[1]))
    if not fresh and head.seq - start <= FLUSH_EVERY:
        # A few events: their cases are loaded in a few queries first. The rows are read twice
        # rather than held decoded (5,000 cases with 1 MB responses would be 5 GB); a case id is
        # never in a blob, so none is opened here.
        folder.preload({cid for cid in (case_id_of(e[2], _decoded(e[0], e[4], e[5]))
                                        for e in scan(led, start, head.seq) if e[0] in CASE_APPLIERS)
                        if cid is not None})
    events = scan(led, start, head.seq)
    collecting = gc.isenabled()
    gc.disable()               # the fold allocates many small, long-lived containers: no cycles to find
    try:
        count = _fold_all(folder, events)
        folder.flush((head.seq, head.hash), None if folder.flushed else start)
    finally:
        if collecting:
            gc.enable()
    return FoldResult(count, folder.touched, (head.seq, head.hash))


def slot_key(stream: str, case_id: str, eid: str, version: int) -> str:
    """The key an event's entry gets in its case state (calls, excerpts, failures ...): its version
    in the case's stream (short, unique there, the same in any interleaving), else its event id."""
    return str(version) if stream == "case:" + case_id else eid


# Rows a page: the deep-judgment requests among them are read from the blob store in one query.
PAGE = 1024
# A judge call's request stored as one blob, as its canonical JSON holds it (the key's 64 hex digits
# follow); then its role, read from the text after it (``request_hash`` is the one key between).
_REQUEST_REF = b'"request":{"$blob":"sha256:'
_HEX_KEY = re.compile(rb'[0-9a-f]{64}"\}')
_ROLE = b'"role":"'
_DEEP_ROLES = frozenset(role.encode() for role in DEEP_ROLES)


def paged(events, preload) -> Iterator[tuple]:
    """The scanned rows of ``events``, in order, a page at a time (at most ``PAGE`` rows and about
    ``row_chunks``' bytes of payload: a page of cases with 1 MB responses is a few of them, not a
    gigabyte): before a page is folded, ``preload`` (``Ledger.preload``) gets the keys of the
    request blobs its deep-judgment calls will open (``request_keys``), so they are read in one
    query rather than one lookup a call."""
    for page in row_chunks(events, PAGE, data_column=5):
        preload(request_keys(page))
        yield from page


def request_keys(page: list[tuple]) -> list[str]:
    """The request blobs the fold opens for a page of scanned rows: a ``judge.called`` stored as
    bytes whose request is one blob and whose role is a deep-judgment one. Read from the stored
    text without decoding it; a guess that misses costs only a lookup of its own when the blob
    is opened, and one that is wrong only a read, since ``open`` checks every blob it opens."""
    keys = []
    ref_at, key_at, role_at = len(_REQUEST_REF), len(_REQUEST_REF) + 64, len(_ROLE)
    for row in page:
        raw = row[5]
        if row[0] == "judge.called" and raw.__class__ is bytes:
            at = raw.find(_REQUEST_REF)
            if at >= 0 and _HEX_KEY.match(raw, at + ref_at):
                role = raw.find(_ROLE, at + key_at) + role_at
                if role >= role_at and raw[role:raw.find(b'"', role)] in _DEEP_ROLES:
                    keys.append(raw[at + ref_at:at + key_at].decode())
    return keys


def _fold_all(folder: _Folder, events) -> int:
    """The hot loop: route each event to its case (inlined ``_Folder.fold`` for case events).

    The batch is written out (``FLUSH_EVERY`` cases) before a case is added to a full one: only
    a new case makes it grow, so the events of cases already held never test its size.
    """
    appliers = CASE_APPLIERS
    cases = folder.cases
    loads, digits_to_9, nineteen, marker = orjson.loads, _DIGITS_TO_9, _NINETEEN_DIGITS, _MARKER
    judge_called, join, open_ref = appliers["judge.called"], folder.join, folder.open
    flush_every, version_keys, known = FLUSH_EVERY, _VERSION_KEYS, len(_VERSION_KEYS)
    count = 0
    for etype, eid, stream, version, schema, raw, config_hash, recorded_at in paged(events, folder.preload_blobs):
        count += 1
        applier = appliers.get(etype)
        if applier is None:
            folder.fold(etype, eid, stream, version, schema, raw, config_hash, recorded_at)
            continue
        if raw.__class__ is bytes and raw.translate(digits_to_9).find(nineteen) < 0:
            data = loads(raw)                   # the common case, inlined: no long integer
            if b"$" in raw and marker in raw:   # one byte is found fastest; then the two
                if applier is judge_called and data.__class__ is dict:
                    case_id = data.get("case_id")
                    if case_id.__class__ is str:   # its entry resolves what it reads, in one pass
                        case = cases.get(case_id)
                        if case is None:
                            if len(cases) >= flush_every:
                                folder.flush(None)
                                cases = folder.cases
                            case = folder.case(case_id)
                        key = (version_keys[version] if -1 < version < known else str(version)) \
                            if stream == "case:" + case_id else eid
                        case["calls"][key] = judge_call_entry(data, join, open_ref)
                        continue   # a judge call carries no config_hash or recorded_at the fold reads
                data = folder.resolved(etype, data)
        else:
            data = folder.payload(etype, schema, raw)
        if data.__class__ is not dict:
            data = {}
        case_id = data.get("case_id")
        if case_id.__class__ is not str:
            case_id = case_id_of(stream, data)
            if case_id is None:
                continue
        case = cases.get(case_id)
        if case is None:
            if len(cases) >= flush_every:
                folder.flush(None)
                cases = folder.cases
            case = folder.case(case_id)
        key = (version_keys[version] if -1 < version < known else str(version)) if stream == "case:" + case_id else eid
        applier(case, data, key, version)
        if config_hash and etype != "case.opened" and config_hash not in case["config_hashes"]:
            case["config_hashes"] = sorted([*case["config_hashes"], config_hash])
        if recorded_at:
            note_recorded_at(case, recorded_at)
    return count


# The slot keys of the first stream versions, made once: ``str(version)`` for every event cost more.
_VERSION_KEYS = tuple(str(v) for v in range(1024))


def rebuild(led, store: ReadModelStore) -> FoldResult:
    """Drop every read model and fold the whole ledger from seq 1."""
    store.drop()
    return update(led, store, fresh=True)
