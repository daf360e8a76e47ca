"""The event envelope: canonical bytes, hashing, deterministic ids, the stored line format.

An event's canonical bytes are orjson with sorted keys over every envelope field except
``prev_hash`` and ``hash``; ``data`` and ``meta`` are embedded exactly as they were stored, so
verification hashes stored bytes and never a re-serialisation:

    hash = sha256(prev_hash + canonical)

A JSONL line is the canonical bytes with ``prev_hash`` and ``hash`` appended as the last two keys.
That suffix has a fixed length, so a verifier recovers the canonical bytes from a line by slicing.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import orjson

from evalledger.ledger.schemas import SCHEMAS, payload_model, upcast
from evalledger.ledger.schemas import EnvelopeError as EnvelopeError  # re-exported: raised by the envelope

GENESIS_HASH = "0" * 64
ENVELOPE_FIELDS = ("seq", "id", "stream", "version", "type", "schema", "data", "meta", "prev_hash", "hash")

_TYPE_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
# orjson refuses integers outside 64 bits and reads some of them back as floats (any below -2**63
# has 19 digits). A run of 19 digits is the only way such an integer can appear in canonical JSON
# (floats carry at most 17 significant digits); strings that hold one just take the slower path.
# Digits to "9", everything else to a space: a 19-digit run is then a plain substring search,
# several times faster than a regular expression (this runs twice for every event read).
_DIGITS_TO_9 = bytes(0x39 if 0x30 <= i <= 0x39 else 0x20 for i in range(256))
_NINETEEN = b"9" * 19
_SUFFIX_LEN = len(b',"prev_hash":"') + 64 + len(b'","hash":"') + 64 + len(b'"}')


def canonical_json(value: Any) -> bytes:
    """Canonical JSON bytes of a JSON value: sorted keys, no whitespace, UTF-8, no NaN/Infinity."""
    try:
        out = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError as exc:
        if "64-bit" not in str(exc):
            raise EnvelopeError(f"payload is not canonical JSON: {exc}") from None
        # Integers beyond 64 bits: the standard library writes them exactly.
        try:
            out = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                             allow_nan=False).encode("utf-8")
        except (ValueError, TypeError, UnicodeEncodeError) as exc2:
            raise EnvelopeError(f"payload is not canonical JSON: {exc2}") from None
    if b"null" in out:
        _refuse_non_finite(value)  # orjson writes NaN and Infinity as null; refuse, never lose them
    return out


_LEAVES = frozenset((str, int, bool, type(None)))


def _refuse_non_finite(value: Any) -> None:
    """Raise EnvelopeError when a float in ``value`` (at any depth) is NaN or infinite.

    It runs for nearly every appended event (most payloads hold a null), so it walks with a
    stack and looks at each item's exact type inline: a call per item cost more than the encoding.
    """
    stack: list[Any] = [value]
    pop, push = stack.pop, stack.append
    while stack:
        current = pop()
        kind = type(current)
        items: Any = current.values() if kind is dict else current if kind is list or kind is tuple \
            else (current,)
        for item in items:
            kind = type(item)
            if kind in _LEAVES:
                continue
            if kind is dict or kind is list or kind is tuple:
                push(item)
            elif isinstance(item, float):
                if not math.isfinite(item):
                    raise EnvelopeError(f"payload holds {item!r}, which JSON cannot represent")
            elif isinstance(item, dict):
                push(dict(item))
            elif isinstance(item, (list, tuple)):
                push(list(item))


def decode_json(raw: bytes | str) -> Any:
    """Decode stored canonical JSON exactly (integers beyond 64 bits stay integers)."""
    if has_long_integer(raw):
        return json.loads(raw)
    return orjson.loads(raw)


def has_long_integer(raw: bytes | str) -> bool:
    """True when the JSON text holds a run of 19+ digits (an integer orjson may not read exactly)."""
    return (raw.encode() if isinstance(raw, str) else raw).translate(_DIGITS_TO_9).find(_NINETEEN) >= 0


def event_id(stream: str, type: str, key: str | None) -> str:
    """Deterministic id from (stream, type, idempotency key); a random one when key is None."""
    if key is None:
        return os.urandom(16).hex()  # as random as uuid4, at a fraction of the cost
    return hashlib.sha256(f"{stream}\x1f{type}\x1f{key}".encode("utf-8")).hexdigest()[:32]


_clock = [-1, ""]  # the last whole second formatted, and its text: formatting is the slow part


def utc_now() -> str:
    """The current time in UTC as ISO 8601 with microseconds and a Z (runs once per appended event)."""
    second, micros = divmod(time.time_ns() // 1000, 1_000_000)
    if second != _clock[0]:
        _clock[1] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _clock[0] = second
    return f"{_clock[1]}.{micros:06d}Z"


def check_type_name(type: str) -> None:
    """Refuse a type name that is not a dotted lowercase name such as ``note.added``."""
    if not isinstance(type, str) or not _TYPE_NAME.match(type):
        raise EnvelopeError(f"event type {type!r} is not a dotted lowercase name like 'note.added'")


def canonical_bytes(seq: int, id: str, stream: str, version: int, type: str, schema: int,
                    data: bytes | str, meta: bytes | str) -> bytes:
    """The hashed bytes of an envelope, with data and meta embedded verbatim (bytes, or text as
    SQLite returns it)."""
    return orjson.dumps(
        {"data": orjson.Fragment(data), "id": id, "meta": orjson.Fragment(meta), "schema": schema,
         "seq": seq, "stream": stream, "type": type, "version": version},
        option=orjson.OPT_SORT_KEYS,
    )


def chain_hash(prev_hash: str, canonical: bytes) -> str:
    """sha256(prev_hash + canonical bytes) as hex."""
    return hashlib.sha256(prev_hash.encode("ascii") + canonical).hexdigest()


def line_bytes(canonical: bytes, prev_hash: str, hash: str) -> bytes:
    """The JSONL line (with newline) of an envelope: canonical bytes plus prev_hash and hash."""
    return b"".join((canonical[:-1], b',"prev_hash":"', prev_hash.encode("ascii"),
                     b'","hash":"', hash.encode("ascii"), b'"}\n'))


def split_line(line: bytes) -> tuple[bytes, str, str]:
    """Split a stored JSONL line into (canonical bytes, prev_hash, hash) without parsing it.

    Raises EnvelopeError when the line does not end with the fixed prev_hash/hash suffix.
    """
    body = line[:-1] if line.endswith(b"\n") else line
    if len(body) < _SUFFIX_LEN + 2:
        raise EnvelopeError("line too short to be an event")
    suffix = body[-_SUFFIX_LEN:]
    if not (suffix.startswith(b',"prev_hash":"') and suffix[78:88] == b'","hash":"' and suffix.endswith(b'"}')):
        raise EnvelopeError("line does not end with the prev_hash and hash fields")
    prev_hash = suffix[14:78].decode("ascii", "replace")
    hash = suffix[88:152].decode("ascii", "replace")
    return body[:-_SUFFIX_LEN] + b"}", prev_hash, hash


def line_seq(line: bytes) -> int:
    """The seq of a stored line, read from its tail (stream and type never hold a quote)."""
    canonical, _, _ = split_line(line)
    at = canonical.rfind(b',"seq":')
    if at < 0:
        raise EnvelopeError("line has no seq field")
    end = canonical.index(b",", at + 7)
    return int(canonical[at + 7:end])


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append: the store assigns seq, version, id (from key), hashes and recorded_at.

    ``data`` is a payload model instance or a dict validated against the type's registered model.
    ``key`` is the idempotency key: the same (stream, type, key) appends once. None means "always new".
    ``meta`` may carry run, causation, stage, stage_version, config_hash (recorded_at is added).
    """

    stream: str
    type: str
    data: Any
    key: str | None = None
    meta: Mapping[str, Any] | None = None

    @property
    def id(self) -> str:
        return event_id(self.stream, self.type, self.key) if self.key is not None else ""


class Event:
    """A stored event: the ten envelope fields; ``data`` and ``meta`` are decoded on first use.

    ``raw_data`` and ``raw_meta`` are the stored canonical bytes (data and meta exactly as hashed);
    an event read from a JSONL file keeps its stored line, so ``line()`` gives the stored bytes.
    In a store with blobs, ``raw_data`` may hold blob references; the store reads such an event
    with its whole payload given, so ``data`` and ``stored_data`` hold the blobs' content.
    ``data`` is the payload at its type's current schema (upcast when it was stored at an older
    one), ``payload()`` the same as its typed model; ``stored_data`` is the payload as stored.
    """

    __slots__ = ("seq", "id", "stream", "version", "type", "schema", "prev_hash", "hash",
                 "_raw_data", "_raw_meta", "_data", "_meta", "_line", "_current")

    def __init__(self, seq: int, id: str, stream: str, version: int, type: str, schema: int,
                 raw_data: bytes | str | None, raw_meta: bytes | str | None, prev_hash: str, hash: str,
                 data: Any = None, meta: Any = None, line: bytes | None = None):
        self.seq = seq
        self.id = id
        self.stream = stream
        self.version = version
        self.type = type
        self.schema = schema
        self.prev_hash = prev_hash
        self.hash = hash
        self._raw_data = raw_data
        self._raw_meta = raw_meta
        self._data = data
        self._meta = meta
        self._line = line
        self._current: Any = None

    @property
    def data(self) -> Any:
        """The payload dict at its type's current schema: as stored, or upcast from an older one."""
        value = self._current
        if value is None:
            value = self._data   # ``stored_data`` inlined: this runs for every event a reader decodes
            if value is None:
                self._decode()
                value = self._data
            if SCHEMAS.get(self.type) != self.schema:
                value = upcast(self.type, self.schema, value)
            self._current = value
        return value

    @property
    def stored_data(self) -> Any:
        """The payload as stored (a dict at the stored ``schema``), decoded on first use."""
        value = self._data
        if value is None:
            self._decode()
            value = self._data
        return value

    @property
    def meta(self) -> Any:
        """The meta dict as stored, decoded on first use."""
        value = self._meta
        if value is None:
            self._decode()
            value = self._meta
        return value

    def _decode(self) -> None:
        """Decode data and meta together: one look for long integers covers both (the hot path
        of every read; '}' and '{' at the seam keep a digit run from spanning the two)."""
        raw_data, raw_meta = self._raw_data, self._raw_meta
        if raw_data.__class__ is str and raw_meta.__class__ is str:  # rows from SQLite
            both = (raw_data + raw_meta).encode()
        else:
            both = _as_bytes(raw_data) + _as_bytes(raw_meta)
        loads = json.loads if both.translate(_DIGITS_TO_9).find(_NINETEEN) >= 0 else orjson.loads
        try:
            if self._data is None:
                self._data = loads(raw_data)  # type: ignore[arg-type]  # None only when _data was given
            if self._meta is None:
                self._meta = loads(raw_meta)  # type: ignore[arg-type]
        except ValueError as exc:   # a row altered in the store (verify names it): an error, not a crash
            raise EnvelopeError(f"seq {self.seq}: the stored data or meta is not JSON ({exc}): the event was "
                                "altered in the store; 'evalledger verify' says where") from None

    @property
    def raw_data(self) -> bytes | str:
        """The stored canonical bytes of ``data`` (text when read from SQLite)."""
        if self._raw_data is None:
            self._raw_data = canonical_json(self._data)
        return self._raw_data

    @property
    def raw_meta(self) -> bytes | str:
        """The stored canonical bytes of ``meta`` (text when read from SQLite)."""
        if self._raw_meta is None:
            self._raw_meta = canonical_json(self._meta)
        return self._raw_meta

    def canonical(self) -> bytes:
        """The canonical (hashed) bytes of this event."""
        if self._line is not None:
            return split_line(self._line)[0]
        return canonical_bytes(self.seq, self.id, self.stream, self.version, self.type, self.schema,
                               self.raw_data, self.raw_meta)

    def line(self) -> bytes:
        """The JSONL line of this event, exactly as the JSONL store and export write it."""
        if self._line is not None:
            return self._line
        return line_bytes(self.canonical(), self.prev_hash, self.hash)

    def to_dict(self) -> dict[str, Any]:
        """The envelope as stored, as a plain dict (data and meta decoded; data at the stored schema)."""
        envelope = {name: getattr(self, name) for name in ENVELOPE_FIELDS}
        envelope["data"] = self.stored_data
        return envelope

    def upcast(self) -> dict[str, Any]:
        """The payload dict at the current schema version of its type (stored bytes untouched)."""
        return self.data  # type: ignore[no-any-return]

    def payload(self) -> Any:
        """The payload as its registered (frozen) pydantic model, upcast to the current schema."""
        return payload_model(self.type).model_validate(self.data)

    def __repr__(self) -> str:
        return f"Event(seq={self.seq}, type={self.type!r}, stream={self.stream!r}, version={self.version})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Event) and other.hash == self.hash and other.seq == self.seq

    def __hash__(self) -> int:
        return hash((self.seq, self.hash))


def _as_bytes(raw: bytes | str | None) -> bytes:
    if raw is None:
        return b""
    return raw.encode() if isinstance(raw, str) else bytes(raw)


def event_from_line(line: bytes, blobs: Callable[[bytes | str, Any], Any] | None = None) -> Event:
    """Parse one stored JSONL line (with its newline) into an Event that keeps the stored line.

    The line is the canonical bytes plus prev_hash and hash, which is itself a JSON object: one
    parse gives every field. ``blobs`` (a store's ``BlobReader.resolve``) replaces blob references
    and unwraps escaped literals; ``raw_data`` then stays the stored bytes, references and escapes
    included, as a row's does (a copy of the event, ``stored_payload``, copies them).
    """
    env = decode_json(line)
    stored = env["data"]
    data = stored if blobs is None else blobs(line, stored)   # a store with blobs: the whole payload
    raw = None if data is stored else canonical_json(stored)
    return Event(env["seq"], env["id"], env["stream"], env["version"], env["type"], env["schema"],
                 raw, None, env["prev_hash"], env["hash"], data=data, meta=env["meta"], line=line)
