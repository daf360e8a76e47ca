"""Blob lines: how blobs travel in JSONL (an export, the mirror, a JSONL ledger's ``.blobs`` file).

A blob's line (``{"blob": key, "zlib": base64}``, or the compressed mirror's ``text`` form) goes
before the first event line that refers to it, with the blobs inside it before it, so a file read
from the top never meets a reference it cannot resolve, and the same events always give the same
lines. A JSONL ledger keeps its blob lines in ``<file>.blobs``, found through an index of offsets.
"""

from __future__ import annotations

import base64
from typing import IO, Callable, Iterable, Iterator

import orjson

from evalledger.ledger.blob_reader import BlobReader
from evalledger.ledger.blobs import PREFIX, BlobError, blob_key, has_markers, pack, raw_refs, ref_key, unpack
from evalledger.ledger.envelope import EnvelopeError, decode_json, line_seq

#: how a blob line opens (event lines open with ``{"data":``)
BLOB_LINE_START = b'{"blob":"'


def blob_line(key: str, packed: bytes) -> bytes:
    """The JSONL line that carries a blob in the mirror and in an export, before its first use."""
    return b'{"blob":"%b","zlib":"%b"}\n' % (key.encode(), base64.b64encode(packed))


def blob_text_line(key: str, raw: bytes) -> bytes:
    """The blob line of the compressed mirror: the blob's canonical JSON as a JSON string (``text``),
    left for the mirror's gzip to compress with its neighbours (base64 of zlib would not shrink)."""
    return b'{"blob":"%b","text":%b}\n' % (key.encode(), orjson.dumps(raw.decode("utf-8")))


def is_blob_line(line: bytes) -> bool:
    """True for a blob line (event lines start with ``{"data":``)."""
    return line.startswith(BLOB_LINE_START)


def parse_blob_line(line: bytes, where: str) -> tuple[str, bytes, bytes]:
    """(key, uncompressed bytes, stored form) of a blob line (``zlib`` form, or the compressed
    mirror's ``text`` form), checked (BlobError when it is not right)."""
    try:
        parsed = decode_json(line)
        key = parsed["blob"]
        form = "text" if "text" in parsed else "zlib"
        text = parsed[form]
        if set(parsed) != {"blob", form} or not isinstance(text, str):
            raise ValueError("it holds other fields")
        ref_key(PREFIX + key)
        if form == "text":
            raw = text.encode("utf-8")
            if blob_key(raw) != key:
                raise BlobError(f"{where}: blob {PREFIX}{key} does not hash to its key: it was altered")
            return key, raw, pack(raw)
        packed = base64.b64decode(text, validate=True)
    except (ValueError, KeyError, TypeError, EnvelopeError, UnicodeEncodeError) as exc:
        raise BlobError(f"{where}: not a blob line ({exc})") from None
    return key, unpack(key, packed, where), packed


def interleave(pairs: Iterable[tuple[bytes | str, bytes]], reader: BlobReader,
               load: Callable[[str], bytes | None], strict: bool = True) -> Iterator[bytes]:
    """The lines of an export or a mirror: each pair is (stored JSON holding the event's data, its
    line); each blob's line (``load`` gives its stored form) goes before the first event that uses
    it, with the blobs inside it before it. The same events always give the same lines.

    A blob missing or altered raises BlobError naming it and the event (``strict``: an export
    without it would not import); a mirror (``strict=False``) writes what is there, and verify
    names the blob."""
    emitted: set[str] = set()
    for raw, line in pairs:
        if has_markers(raw):
            found = raw_refs(raw)
            try:
                keys = reader.with_inner(found, emitted)
            except BlobError as exc:
                if strict:
                    raise BlobError(f"{exc}; seq {_line_seq(line)} refers to it, so an export would not import "
                                    "('evalledger verify' names every such event)") from None
                keys = [k for k in found if k not in emitted]
                emitted.update(keys)
            for key in keys:
                packed = load(key)
                if packed is not None:
                    yield blob_line(key, packed)
        yield line


def _line_seq(line: bytes) -> object:
    """The seq of an event line (for a message; ``?`` when the line does not say)."""
    try:
        return line_seq(line)
    except (EnvelopeError, ValueError):
        return "?"


class BlobFile:
    """The blobs of a JSONL ledger: blob lines in ``<file>.blobs``, found through an index of offsets."""

    def __init__(self, path: str):
        self.path = path
        self._at: dict[str, tuple[int, int]] = {}
        self._indexed = 0
        self._fh: IO[bytes] | None = None

    def close(self) -> None:
        """Close the file kept open for reading."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def load(self, key: str) -> bytes | None:
        """The stored form of blob ``key`` (None when the file lacks it)."""
        if key not in self._at:
            self._index()
        place = self._at.get(key)
        if place is None:
            return None
        if self._fh is None:
            self._fh = open(self.path, "rb")   # kept open: a verify reads thousands of blobs
        self._fh.seek(place[0])
        line = self._fh.read(place[1])
        try:
            return base64.b64decode(decode_json(line)["zlib"])
        except (ValueError, KeyError, TypeError):
            return b""   # not a blob line any more: unpack reports it as altered

    def _index(self) -> None:
        """Index the lines written since the last look."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._indexed)
                offset = self._indexed
                for line in fh:
                    if not line.endswith(b"\n"):
                        break
                    if is_blob_line(line):
                        self._at.setdefault(line[9:73].decode("ascii", "replace"), (offset, len(line)))
                    offset += len(line)
                self._indexed = offset
        except FileNotFoundError:
            return
