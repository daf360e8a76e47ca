"""A case's data for its page: the case's events as stored and its indexed result, as one JSON text.

The events' payloads and meta go into the document as the ledger stored them (canonical JSON), not
decoded and encoded again; the result is the view index's JSON of ``case_result``. Building the
document is string joining, so a case page costs about the queries that fetch its rows.
"""

from __future__ import annotations

import re
from typing import Any

from evalledger.ledger.schemas import SCHEMAS
from evalledger.projections.store import json_bytes

# Ids, event types and hashes are made of these characters: quoted as they are, no encoder call.
_PLAIN = re.compile(r"[A-Za-z0-9_.:-]*").fullmatch
_CAUSATION_KEY = '"causation":"'


def _text(raw: bytes | str) -> str:
    """Stored JSON as text (SQLite gives text; other stores bytes)."""
    return raw if isinstance(raw, str) else bytes(raw).decode("utf-8")


def _json_str(value: Any) -> str:
    return json_bytes(value).decode("utf-8")


def _quoted(text: str) -> str:
    """``text`` as a JSON string."""
    return f'"{text}"' if _PLAIN(text) else _json_str(text)


def stored_payload(event) -> str:
    """The event's payload as JSON text: the stored bytes when they are at the type's current
    schema (nearly always), else the upcast payload encoded."""
    if SCHEMAS.get(event.type) == event.schema:
        return _text(event.raw_data)
    return _json_str(event.data)


def causation_of(meta: str) -> str | None:
    """The id of the causing event named in an event's stored meta (canonical, compact JSON:
    found by its key without decoding the meta), or None."""
    at = meta.find(_CAUSATION_KEY)
    if at < 0:
        return None
    at += len(_CAUSATION_KEY)
    end = meta.find('"', at)
    cause = meta[at:end]
    return cause if _PLAIN(cause) else None      # ids are plain; anything else is not an id


def causes(events: list) -> list[str | None]:
    """The causing event's id of each of ``events``, in order."""
    return [causation_of(meta) if _CAUSATION_KEY in meta else None for meta in (_text(e.raw_meta) for e in events)]


def outside_causes(events: list, caused_by: list[str | None]) -> set[str]:
    """Ids of events that caused one of ``events`` (``caused_by``: ``causes(events)``) but belong
    to another stream (a file, a run)."""
    ids = {e.id for e in events}
    return {c for c in caused_by if c and c not in ids}


def case_document(case_id: str, events: list, caused_by: list[str | None], result_json: str | None,
                  outside: dict[str, int | None]) -> str:
    """The case's data as one JSON text: its events in ledger order (seq, id, type, hash, the seq
    of the event that caused each, meta and payload as stored) and its result (``result_json``,
    the view index's JSON of ``case_result``, or null). ``caused_by``: ``causes(events)``;
    ``outside``: seqs of causing events in other streams, by id."""
    seqs = {e.id: e.seq for e in events}
    seqs.update(outside)
    rows = []
    for e, cause in zip(events, caused_by):
        cause_seq = seqs.get(cause) if cause else None
        rows.append(f'{{"seq":{e.seq},"id":{_quoted(e.id)},"type":{_quoted(e.type)},"hash":{_quoted(e.hash)},'
                    f'"cause":{"null" if cause_seq is None else cause_seq},'
                    f'"meta":{_text(e.raw_meta)},"data":{stored_payload(e)}}}')
    return (f'{{"case_id":{_quoted(case_id)},"result":{result_json or "null"},'
            f'"events":[{",".join(rows)}]}}')
