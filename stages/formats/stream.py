"""A JSON document read from disk a window at a time: its top-level keys, and the items of its
large arrays one by one (issue 15: a benchmark's file is never held whole, nor its parsed tree).

Every value is parsed by the standard library's own scanner with the same hooks as
``decode.loads`` (duplicate keys, NaN/Infinity, 64-bit integers), so a value read here is the
value a whole-document parse gives. This reader only says yes: anything it does not take as
plainly valid (a syntax error, a duplicate or unpaired-surrogate key, a value ``check_tree``
refuses, a BOM-less oddity) raises ``NotStreamable``, and the caller reads the file whole with
the old readers, whose errors (file, place, reason) stay exactly what they were.
"""

from __future__ import annotations

import codecs
import json
import re
from typing import IO, Any, Iterator

from evalledger.stages.formats.decode import _constant, _float, _has_surrogate, _int, _pairs, check_tree

WINDOW = 1 << 20
# A value that ends this close to the window's end may have been cut short (a number "12" of
# "123", "1" of "1e5"): it is read again with more text.
_MARGIN = 64
_SPACE = re.compile(r"[ \t\n\r]*")
_BOM = "\ufeff"


class NotStreamable(Exception):
    """The document is not plainly valid JSON of the expected shape: read it whole instead."""


def _scanner() -> Any:
    """The standard library's scanner, with ``decode.loads``'s hooks."""
    decoder = json.JSONDecoder(object_pairs_hook=_pairs, parse_float=_float, parse_int=_int,
                               parse_constant=_constant)
    return json.scanner.make_scanner(decoder)


class _Window:
    """The decoded text of a binary file, read on demand; text already consumed is dropped."""

    def __init__(self, fh: IO[bytes], size: int = WINDOW):
        self.fh = fh
        self.size = size
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.text = ""
        self.eof = False
        self.started = False

    def more(self, grow: bool = False) -> bool:
        """Read the next chunk onto the text; False at the end of the file. ``grow``: the value
        being read does not fit in the text yet, so read as much again as the text holds."""
        if self.eof:
            return False
        # Growing geometrically keeps one long value (a 200 MB string) linear: a fixed window
        # re-scanned the value from its start once per window read (a 200 MB string: 31 s, now 1.5 s).
        chunk = self.fh.read(max(self.size, len(self.text)) if grow else self.size)
        try:
            added = self.decoder.decode(chunk, final=not chunk)
        except UnicodeDecodeError:
            raise NotStreamable("not UTF-8") from None
        if not self.started and added:   # the first character: a BOM's 3 bytes may span reads
            self.started = True
            added = added.removeprefix(_BOM)
        self.eof = not chunk
        self.text += added
        return True

    def drop(self, upto: int) -> int:
        """Forget the text before ``upto``; returns the new index of that position (0)."""
        if upto > self.size // 2:
            self.text = self.text[upto:]
            return 0
        return upto

    def space(self, at: int) -> int:
        """The index of the next non-blank character from ``at`` (reading on as needed)."""
        while True:
            at = _SPACE.match(self.text, at).end()
            if at < len(self.text) or not self.more():
                return at

    def char(self, at: int) -> str:
        """The character at ``at`` ('' at the end of the file)."""
        return self.text[at] if at < len(self.text) else ""


def _value(window: _Window, scan: Any, at: int, where: str, depth: int) -> tuple[Any, int]:
    """The JSON value at ``at`` and the index after it, read with more text until it is whole;
    NotStreamable when it is not valid or ``check_tree`` (at ``depth``) refuses it."""
    while True:
        try:
            value, end = scan(window.text, at)
        except (StopIteration, json.JSONDecodeError, RecursionError):
            if window.more(grow=True):
                continue
            raise NotStreamable(f"{where}: not valid JSON") from None
        if end + _MARGIN >= len(window.text) and window.more(grow=True):
            continue
        if check_tree(value, where, depth):
            raise NotStreamable(f"{where}: a value the whole-file reader refuses")
        return value, end


def _key(window: _Window, at: int) -> tuple[str, int]:
    """The object key at ``at`` (a JSON string) and the index after its colon."""
    if window.char(at) != '"':
        raise NotStreamable("an object key was expected")
    while True:
        try:
            key, end = json.decoder.scanstring(window.text, at + 1, True)
        except json.JSONDecodeError:
            if window.more(grow=True):
                continue
            raise NotStreamable("an unterminated key") from None
        break
    if _has_surrogate(key):
        raise NotStreamable("a key holds an unpaired surrogate")
    end = window.space(end)
    if window.char(end) != ":":
        raise NotStreamable("':' was expected")
    return key, window.space(end + 1)


def read_document(fh: IO[bytes], arrays: frozenset[str],
                  read_size: int = WINDOW) -> Iterator[tuple[str, int | None, Any]]:
    """The top-level object of the JSON file ``fh`` as ``(key, None, value)`` for each key, except
    the keys in ``arrays`` whose value is a list: ``(key, index, item)`` for each of its items
    (``(key, -1, None)`` first, so an empty list still shows). Raises NotStreamable (possibly after
    items were given) for anything a whole-document parse would not return as it is. ``read_size``:
    the bytes read at a time."""
    window, scan = _Window(fh, read_size), _scanner()
    seen: set[str] = set()
    at = window.space(0)
    if window.char(at) != "{":
        raise NotStreamable("the top level is not an object")
    at = window.space(at + 1)
    if window.char(at) == "}":
        raise NotStreamable("an empty object")
    while True:
        key, at = _key(window, at)
        if key in seen:
            raise NotStreamable(f"duplicate key {key!r}")
        seen.add(key)
        where = f"$.{key}" if key.isidentifier() else f"$[{json.dumps(key)}]"
        if key in arrays and window.char(at) == "[":
            yield key, -1, None
            at = (yield from _items(window, scan, key, at + 1)) + 1
        else:
            value, at = _value(window, scan, at, where, 2)
            yield key, None, value
        at = window.space(at)
        if window.char(at) == "}":
            break
        if window.char(at) != ",":
            raise NotStreamable("',' or '}' was expected")
        at = window.drop(window.space(at + 1))
    if window.space(at + 1) != len(window.text):
        raise NotStreamable("extra data after the document")


def _items(window: _Window, scan: Any, key: str, at: int) -> Iterator[tuple[str, int, Any]]:
    """The items of the array whose first item (or ``]``) is at or after ``at``; returns the
    index of its closing bracket."""
    at = window.space(at)
    if window.char(at) == "]":
        return at
    index = 0
    while True:
        item, at = _value(window, scan, at, f"$.{key}[{index}]", 3)
        yield key, index, item
        index += 1
        at = window.space(at)
        if window.char(at) == "]":
            return at
        if window.char(at) != ",":
            raise NotStreamable("',' or ']' was expected")
        at = window.drop(window.space(at + 1))
