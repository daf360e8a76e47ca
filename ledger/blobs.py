"""The content-addressed blob store's format: how an event's payload is split into blobs and joined again.

Large or repeated parts of an event's data (a judge call's prompt, its response schema, a
benchmark's questions) are stored once, zlib-compressed, keyed by the sha256 of their canonical
JSON bytes; the event's stored data holds a reference ``{"$blob": "sha256:<hex>"}`` in their place.
The hash chain covers the stored data (references included), and a blob's key is the hash of
its content, so the chain covers every blob transitively. Splitting is a pure function of the
payload: the same data always gives the same stored bytes and the same blobs.

A payload dict that happens to look like a reference (one key, ``$blob`` or ``$lit``) is wrapped
as ``{"$lit": {...}}`` so it reads back as itself. Joining restores the payload exactly: the
canonical JSON of the joined data equals the canonical JSON of the data before the split.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from itertools import starmap
from typing import Any, Callable, Iterable

import orjson

from evalledger.ledger.envelope import EnvelopeError, Event, canonical_json, decode_json, has_long_integer
from evalledger.ledger.persistence import LedgerError, Prepared

REF = "$blob"
LIT = "$lit"
PREFIX = "sha256:"
#: a string at least this long is a blob of its own (a prompt, a reply, a response text)
MIN_STRING = 300
#: an object or array (below the top) whose stored JSON is at least this long becomes a blob
MIN_CONTAINER = 600
_LEVEL = 6
#: the event types whose payloads are split: judge calls are two thirds of a judged home's bytes,
#: and inputs (benchmarks, cases) stay inline so an export of them can be edited line by line
SPLIT_TYPES = frozenset({"judge.called"})
_MARKERS = (b'"$blob"', b'"$lit"')
#: the byte every marker holds, as an int: ``DOLLAR in raw`` is a memchr
DOLLAR = ord("$")
#: the bytes a one-key object with a ``$`` key opens with in canonical JSON: a payload without them
#: holds nothing to escape (one short search, where ``has_markers`` makes two longer ones)
_OPENING = b'{"$'


class BlobError(LedgerError):
    """A referenced blob is missing or does not hash to its key."""


def blob_key(raw: bytes) -> str:
    """The key of a blob: the sha256 (hex) of its uncompressed bytes."""
    return hashlib.sha256(raw).hexdigest()


def pack(raw: bytes) -> bytes:
    """The stored (compressed) form of a blob's bytes: a zlib stream, as ``zlib.decompress`` reads it."""
    packer = deflater(len(raw), _LEVEL, zlib.MAX_WBITS)
    return packer.compress(raw) + packer.flush()


def deflater(size: int, level: int, wbits: int) -> zlib._Compress:
    """A compressor for ``size`` bytes whose window and hash table fit them (same output format).

    Setting up zlib's default state (a 32 KB window, a 64K-entry hash table) cost more than
    compressing a typical blob (~700 bytes): 72 us against 28 us with a window of the blob's size,
    and its compressed bytes within 0.1%. ``wbits`` gives the format (15: zlib, -15: raw deflate);
    any reader takes a smaller window. The hash table shrinks only for windows up to 4 KB: on
    larger inputs a small one makes longer chains, slower and larger.
    """
    bits = min(15, max(9, (size - 1).bit_length()))
    return zlib.compressobj(level, zlib.DEFLATED, bits if wbits > 0 else -bits, min(8, max(4, bits - 6)))


def unpack(key: str, packed: bytes, where: str) -> bytes:
    """A blob's bytes from its stored form, checked against its key (BlobError when altered)."""
    try:
        raw = zlib.decompress(packed)
    except zlib.error as exc:
        raise BlobError(f"{where}: blob {PREFIX}{key} cannot be decompressed ({exc}): it was altered") from None
    if blob_key(raw) != key:
        raise BlobError(f"{where}: blob {PREFIX}{key} does not hash to its key: it was altered")
    return raw


def has_markers(raw: bytes | str) -> bool:
    """True when stored JSON may hold a reference or an escaped literal (a cheap substring test).

    A ``$`` is looked for first, a memchr (as an int for bytes: ``b"$" in raw`` costs four times
    as much, through the buffer protocol), where each marker's search cost 2-3 ns a byte of JSON
    (its last byte, a quote, is everywhere): 1.5 us an event of 500 bytes, then 0.1 us, on every
    event read from a store without blobs, which looks at each one."""
    if isinstance(raw, str):   # rows from SQLite: no encoding on the path every read takes
        return "$" in raw and ('"$blob"' in raw or '"$lit"' in raw)
    return DOLLAR in raw and (_MARKERS[0] in raw or _MARKERS[1] in raw)


def page_events(rows: list[tuple[Any, ...]], row_event: Callable[..., Event]) -> Iterable[Event]:
    """The Events of a page of stored rows. A page of plain rows (text without a ``$``) is made
    in one comprehension (a function call a row was a tenth of a read). A page holding a row
    whose data may hold a marker (text with a ``$``, or bytes) is made lazily, row by row, by
    ``row_event`` (reading its blobs, unwrapping its literals): pages are sized by stored bytes,
    and 256 judge calls with 1 MB prompts made whole at once held 256 MB. Lazily too, a row that
    cannot be read (a lost blob) raises at its place, after the events before it."""
    try:
        return [Event(*row) if row[6].__class__ is str and "$" not in row[6] else _not_plain() for row in rows]
    except Exception:   # noqa: BLE001 (a marked row, or an unreadable one: made lazily, raising at its row)
        return starmap(row_event, rows)


class _NotPlain(Exception):
    """A page holds a row ``page_events`` does not make in its comprehension."""


def _not_plain() -> Event:
    raise _NotPlain


def blob_file_path(path: str) -> str:
    """Where the blob lines of a JSONL file (a mirror, an export, a JSONL ledger) are kept."""
    return path + ".blobs"


def split(data: Any, raw: bytes) -> tuple[bytes, dict[str, bytes]]:
    """(stored bytes, {key: blob bytes}) of a payload whose canonical JSON is ``raw``.

    The blobs are in dependency order (a blob's own references come before it). A payload with
    nothing to split is stored as ``raw`` itself.
    """
    if len(raw) < MIN_STRING and not has_markers(raw):
        return raw, {}
    blobs: dict[str, bytes] = {}
    stored = _split_value(data, blobs, top=True)
    if not blobs and stored is data:
        return raw, {}
    return _encode(stored), blobs


def stored_part(value: Any) -> Any:
    """What one part of a split payload (a judge call's ``request``, say) is stored as: a
    reference when it is a blob of its own, else itself with its large parts referenced. A pure
    function of the value, like ``split``: two parts with the same stored form hold the same data."""
    return _split_value(value, {})


def split_batch(batch: list[Prepared], known: set[str], blobs: dict[str, bytes]) -> list[Prepared]:
    """The batch with the payloads of ``SPLIT_TYPES`` split; the blobs not in ``known`` (committed
    by this writer already, so not packed again) go into ``blobs``, in dependency order."""
    out = []
    for p in batch:
        if p.type in SPLIT_TYPES:
            stored, found = split(p.data_obj, p.data)
            if stored is not p.data:
                p = p._replace(data=stored)
                for key, raw in found.items():
                    if key not in known:
                        blobs.setdefault(key, raw)
        else:
            p = escaped(p)
        out.append(p)
    return out


def escape_batch(batch: list[Prepared]) -> list[Prepared]:
    """The batch as a store that splits nothing stores it (a JSONL ledger, a store made before
    blobs): each payload of any type holding an object shaped like a reference or an escape
    stored escaped, as ``split_batch`` stores it, so every store form holds the same bytes for
    the same events. A payload without a ``$`` costs one memchr."""
    return [p if DOLLAR not in p.data or _OPENING not in p.data else escaped(p) for p in batch]


def escaped(p: Prepared) -> Prepared:
    """``p`` with its payload's reference-shaped objects escaped (``escape_literals``); ``p``
    itself when it holds none, or when it is a stored payload copied as its bytes (``data_obj``
    None: stored, so escaped, where it was first appended)."""
    if p.data_obj is not None and DOLLAR in p.data and _OPENING in p.data:   # a memchr first
        value = escape_literals(p.data_obj)
        if value is not p.data_obj:
            return p._replace(data=_encode(value))
    return p


def has_literal(raw: bytes | str) -> bool:
    """True when stored JSON may hold an escaped literal (``{"$lit": ...}``): a substring test."""
    if isinstance(raw, str):
        return '"$lit"' in raw
    return _MARKERS[1] in raw


def unescape_literals(value: Any) -> Any:
    """Stored data of a store without blobs (its references refused already) as it was appended:
    each escaped literal unwrapped by ``join``'s rule. Not ``join`` itself: a one-key ``$blob``
    object that is no reference (``{"$blob": "x"}``, stored as given by an older version) is
    left as it is, where ``join`` would refuse it as a bad reference."""
    kind = type(value)
    if kind is dict:
        if len(value) == 1 and LIT in value and type(value[LIT]) is dict:
            value = value[LIT]
        return {k: unescape_literals(v) for k, v in value.items()}
    if kind is list:
        return [unescape_literals(v) for v in value]
    return value


def escape_literals(value: Any) -> Any:
    """``value`` with every object shaped like a reference or an escape (one key, ``$blob`` or
    ``$lit``) wrapped in ``{"$lit": ...}``, as ``split`` wraps them, so a read gives it back as it
    was rather than taking it for a blob; ``value`` itself when it holds none. A payload of any
    type may hold such an object (a judge call's is escaped by ``split``): stored as given, every
    read of a store with blobs would have looked for a blob that is not there."""
    kind = type(value)
    if kind is list:
        items = [escape_literals(v) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else items
    if kind is not dict:
        return value
    out = {k: escape_literals(v) for k, v in value.items()}
    same = all(out[k] is v for k, v in value.items())
    if len(out) == 1 and (REF in out or LIT in out):
        return {LIT: out}
    return value if same else out


def remember_blobs(known: set[str], blobs: dict[str, bytes], most: int = 10_000) -> None:
    """After a commit: these keys are in the store (a bounded set: forgetting only costs a pack).

    ~150 bytes a key: 10,000 keep a run's shared prompts known at 1.5 MB (100,000 made 15 MB of a
    100,000-case run's peak, mostly the keys of answers never written again)."""
    if len(known) > most:
        known.clear()
    known.update(blobs)


def _encode(value: Any) -> bytes:
    """Canonical JSON of a part of a payload that ``canonical_json`` already accepted whole (so no
    NaN to look for): orjson directly, the standard library for integers beyond 64 bits."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return canonical_json(value)


def _ref(encoded: bytes, blobs: dict[str, bytes]) -> dict[str, str]:
    key = blob_key(encoded)
    blobs.setdefault(key, encoded)
    return {REF: PREFIX + key}


# Long strings already encoded and hashed, by value: a run's judge calls repeat the same system
# prompts, and sha256 over them was a tenth of splitting a batch. Bounded in count and in the
# length kept (a prompt, not a 50 KB response: at most ~8 MB held); forgetting costs a hash.
_STRING_REFS: dict[str, tuple[str, bytes]] = {}
_MOST_STRINGS = 512
_LONGEST_KEPT = 8192


def _string_ref(value: str, blobs: dict[str, bytes]) -> dict[str, str]:
    """The reference of a long string (its blob added to ``blobs``), hashed once per distinct string."""
    known = _STRING_REFS.get(value)
    if known is None:
        encoded = _encode(value)
        known = (PREFIX + blob_key(encoded), encoded)
        if len(value) <= _LONGEST_KEPT:
            if len(_STRING_REFS) >= _MOST_STRINGS:
                _STRING_REFS.clear()
            _STRING_REFS[value] = known
    blobs.setdefault(known[0][len(PREFIX):], known[1])
    return {REF: known[0]}


def _split_value(value: Any, blobs: dict[str, bytes], top: bool = False) -> Any:
    """``value`` with its large parts replaced by references (bottom-up, so inner parts dedupe).

    A part below the top whose JSON is shorter than MIN_STRING and has no marker is returned as
    it is without a walk: no string in it reaches MIN_STRING, no container MIN_CONTAINER, and no
    object in it looks like a reference. A part whose children all came back unchanged keeps the
    JSON already encoded for that test (so a large part is encoded once, not once per level).
    """
    kind = type(value)
    if kind is str:
        return _string_ref(value, blobs) if len(value) >= MIN_STRING else value
    if kind is not dict and kind is not list:
        return value
    encoded = None
    if not top:
        encoded = _encode(value)
        if len(encoded) < MIN_STRING and not has_markers(encoded):
            return value
    same = True
    if kind is dict:
        out: Any = {}
        for k, v in value.items():
            inner = type(v)   # a number, a boolean, null or a short string: kept without a call
            if inner is not dict and inner is not list and (inner is not str or len(v) < MIN_STRING):
                out[k] = v
                continue
            part = out[k] = _split_value(v, blobs)
            same = same and part is v
        if len(out) == 1 and (REF in out or LIT in out):
            out, same = {LIT: out}, False
    else:
        out = []
        for v in value:
            part = _split_value(v, blobs)
            out.append(part)
            same = same and part is v
    if top:
        return value if same else out   # the same object: ``split`` then stores the bytes it was given
    if not out:
        return out
    if not same:
        encoded = _encode(out)
    if len(encoded) >= MIN_CONTAINER:  # type: ignore[arg-type]  # encoded above when not top
        return _ref(encoded, blobs)  # type: ignore[arg-type]
    return value if same else out   # unchanged: the parent then reuses its own encoding too


def join(value: Any, fetch: Callable[[str], bytes]) -> Any:
    """``value`` with every reference replaced by its blob's content (``fetch(key)`` gives its bytes)."""
    kind = type(value)
    if kind is dict:
        if len(value) == 1:
            if REF in value:
                return join(decode_json(fetch(ref_key(value[REF]))), fetch)
            if LIT in value and type(value[LIT]) is dict:
                return {k: join(v, fetch) for k, v in value[LIT].items()}
        return {k: join(v, fetch) for k, v in value.items()}
    if kind is list:
        return [join(v, fetch) for v in value]
    return value


def join_bytes(raw: bytes | str, fetch: Callable[[str], bytes]) -> bytes:
    """The canonical JSON of the whole payload of stored data ``raw``, joined as text: each
    reference replaced by its blob's bytes, with no decoding and re-encoding of the parts between
    (a part's canonical JSON is the same wherever it stands, and keys are sorted by name, not by
    value). An escaped literal, or an integer beyond 64 bits (encoded by the standard library,
    whose floats read differently), takes the structural join instead."""
    data = raw.encode() if isinstance(raw, str) else raw
    if _MARKERS[1] in data:
        return canonical_json(join(decode_json(data), fetch))

    def whole(match: re.Match[bytes]) -> bytes:
        inner = fetch(match.group(1).decode())
        return join_bytes(inner, fetch) if has_markers(inner) else inner

    out = _REF_TEXT.sub(whole, data)
    return canonical_json(decode_json(out)) if has_long_integer(out) else out


def decode_last(raw: bytes, name: str) -> Any:
    """Canonical JSON ``raw`` decoded, or, when it is an object whose last key is ``name``, a dict
    holding that key alone, decoded from its own text (a request's ``payload`` is half its bytes;
    its messages are the slow half to decode, with their escaped prompt text).

    Found from the text: ``,"name":`` can only be a key (a quote inside a string is escaped), and
    the text from its value to the object's closing brace decodes only when that key is the
    outermost object's last: a key nested deeper leaves the brackets around it unmatched, one
    followed by others leaves them behind its value. Anything else is decoded whole."""
    marker = b',"%s":' % name.encode()
    at = raw.rfind(marker)
    if at < 0:
        marker = marker.replace(b",", b"{", 1)
        at = 0 if raw.startswith(marker) else -1
    if at >= 0 and raw.endswith(b"}"):
        try:
            return {name: decode_json(raw[at + len(marker):-1])}
        except ValueError:
            pass
    return decode_json(raw)


def ref_key(ref: Any) -> str:
    """The hex key of a reference's ``sha256:<hex>`` text (EnvelopeError when it is not one)."""
    if not isinstance(ref, str) or not ref.startswith(PREFIX) or len(ref) != len(PREFIX) + 64 \
            or ref[len(PREFIX):].strip("0123456789abcdef"):
        raise EnvelopeError(f"{ref!r} is not a blob reference (sha256:<64 hex digits>)")
    return ref[len(PREFIX):]


_REF_TEXT = re.compile(rb'\{"\$blob":"sha256:([0-9a-f]{64})"\}')


def raw_refs(raw: bytes | str) -> list[str]:
    """The keys stored JSON refers to directly, in document order, read from the text: without an
    escaped literal (``$lit``) every one-key ``{"$blob": ...}`` object in it is a reference (the
    quotes of one inside a string would be escaped)."""
    data = raw.encode() if isinstance(raw, str) else raw
    if b'"$lit"' in data:
        return refs(decode_json(data))
    return [m.decode() for m in _REF_TEXT.findall(data)]


def refs(value: Any) -> list[str]:
    """The keys a stored value refers to directly, in document order (not those inside blobs)."""
    found: list[str] = []
    stack = [value]
    while stack:
        current = stack.pop()
        kind = type(current)
        if kind is dict:
            if len(current) == 1 and REF in current:
                found.append(ref_key(current[REF]))
                continue
            inner = current[LIT] if len(current) == 1 and LIT in current and type(current[LIT]) is dict else current
            stack.extend(reversed(list(inner.values())))
        elif kind is list:
            stack.extend(reversed(current))
    return found
