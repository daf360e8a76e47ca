"""Bytes to JSON values, safely: UTF-8 (a BOM is accepted), limits, and exact error places.

Everything a reader needs to know about the raw file is checked here once: the file is not
empty, is UTF-8, parses as JSON (or JSONL, line by line), nests at most ``MAX_DEPTH`` levels, has
no duplicate keys, no NaN/Infinity, no integer beyond 64 bits and no unpaired surrogate. Any of
these would either be ambiguous (duplicate keys) or could not be stored as canonical JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from evalledger.stages.formats.errors import FileRejected, Problem, join_path

MAX_DEPTH = 64
_INT_LIMIT = 2**63
_BOM = b"\xef\xbb\xbf"
_JSON_SPACE = " \t\r"  # JSON's whitespace within a line; U+2028 or U+00A0 alone is not a blank line


class _BadNumber:
    """A number JSON allows but we cannot keep (NaN, Infinity, overflow); reported with its path."""

    def __init__(self, text: str, reason: str):
        self.text = text
        self.reason = reason


class _DupDict(dict):
    """An object that repeated a key; the walk reports it with its path."""

    duplicates: list[str]


def decode_text(raw: bytes) -> str:
    """UTF-8 text of the file (a leading BOM removed); raises FileRejected when empty or not UTF-8."""
    if raw.startswith(_BOM):
        raw = raw[len(_BOM):]
    if not raw.strip():
        raise FileRejected([Problem("$", "the file is empty")])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise FileRejected([Problem(f"line {line}, byte {exc.start}",
                                    f"not valid UTF-8 ({exc.reason}); save the file as UTF-8")]) from None


def _pairs(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    duplicates = []
    for key, value in pairs:
        if key in out:
            duplicates.append(key)
        out[key] = value
    if duplicates:
        marked = _DupDict(out)
        marked.duplicates = duplicates
        return marked
    return out


def _float(text: str) -> Any:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        return _BadNumber(text, f"the number {text[:40]} is too large to represent")
    return value


def _int(text: str) -> Any:
    if len(text) < 19:   # at most 18 digits fit in 64 bits: the usual number, read once
        return int(text)
    digits = text.lstrip("-")
    if len(digits) > 19 or not -_INT_LIMIT <= int(text) < _INT_LIMIT:
        return _BadNumber(text, f"the integer {text[:40]}{'...' if len(text) > 40 else ''} "
                                "does not fit in 64 bits")
    return int(text)


def _constant(text: str) -> Any:
    return _BadNumber(text, f"{text} is not a JSON number (NaN and Infinity are not allowed)")


def loads(text: str, where: str = "$", line_offset: int = 0) -> Any:
    """Parse one JSON document; raises FileRejected naming the line and column of a syntax error."""
    try:
        value = json.loads(text, object_pairs_hook=_pairs, parse_float=_float, parse_int=_int,
                           parse_constant=_constant)
    except json.JSONDecodeError as exc:
        place = f"line {exc.lineno + line_offset}, column {exc.colno}"
        raise FileRejected([Problem(place, f"not valid JSON: {exc.msg}")]) from None
    except RecursionError:   # nested thousands deep: the scanner gave up before check_tree could say where
        raise FileRejected([too_deep(text, where)]) from None
    problems = check_tree(value, where)
    if problems:
        raise FileRejected(problems)
    return value


# A JSON string (escapes and all) or one of the characters that open, close or separate values.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]', re.DOTALL)


def too_deep(text: str, where: str = "$") -> Problem:
    """The problem of a document nested too deep for the scanner: the place of its first value
    nested deeper than ``MAX_DEPTH`` (as ``check_tree`` would name it), found by walking the
    document's brackets without recursion; ``where`` itself when no such value is found."""
    place: list[Any] = []     # per open container: the key or index of the value being read
    keyed: list[bool] = []    # per open container: an object (its next string is a key)
    for token in _TOKEN.finditer(text):
        mark = token.group()
        if mark in "[{":
            if len(place) >= MAX_DEPTH:
                return Problem(join_path(where, place), f"nesting deeper than {MAX_DEPTH} levels")
            place.append(0 if mark == "[" else None)
            keyed.append(mark == "{")
        elif mark in "]}":
            if place:
                place.pop()
                keyed.pop()
        elif mark == ",":
            if keyed and not keyed[-1]:
                place[-1] += 1
            elif keyed:
                place[-1] = None
        elif keyed and keyed[-1] and place[-1] is None:
            place[-1] = _key_text(mark)
    return Problem(where, f"nesting deeper than {MAX_DEPTH} levels")


def _key_text(token: str) -> str:
    """An object key from its JSON string token (its raw text when its escapes are bad)."""
    try:
        return str(json.loads(token))
    except ValueError:
        return token[1:-1]


def check_tree(value: Any, where: str = "$", depth: int = 1) -> list[Problem]:
    """Every place in a parsed value that cannot be kept: depth, numbers, duplicate keys, surrogates.
    ``depth``: the nesting level of ``value`` itself (1 for a whole document).

    The walk holds one iterator per open container, and makes a place's path only for a container
    or a problem: a 5 MB list of numbers, each waiting on the stack with its path made, took 430 MB."""
    problems: list[Problem] = []
    _check_node(value, where, depth, problems)
    open_: list[tuple[Iterator[tuple[Any, Any]], str, int]] = []   # (children as (key, value), path, depth)
    if isinstance(value, (dict, list)) and depth <= MAX_DEPTH:
        open_.append((_children(value), where, depth + 1))
    while open_:
        children, parent, level = open_[-1]
        child = next(children, None)
        if child is None:
            open_.pop()
            continue
        key, node = child
        if level > MAX_DEPTH or isinstance(node, (dict, list, str, _BadNumber)):
            path = join_path(parent, [key])
            _check_node(node, path, level, problems)
            if isinstance(node, (dict, list)) and level <= MAX_DEPTH:
                open_.append((_children(node), path, level + 1))
    problems.sort(key=lambda p: p.where)
    return problems


def _children(node: dict | list) -> Iterator[tuple[Any, Any]]:
    """(key or index, value) of each item of a container."""
    return iter(node.items()) if isinstance(node, dict) else enumerate(node)


def _check_node(node: Any, path: str, depth: int, problems: list[Problem]) -> None:
    """The problems of one value itself (not of its items), at ``path`` and nesting ``depth``."""
    if depth > MAX_DEPTH:
        problems.append(Problem(path, f"nesting deeper than {MAX_DEPTH} levels"))
        return
    if isinstance(node, _BadNumber):
        problems.append(Problem(path, node.reason))
    elif isinstance(node, str):
        if _has_surrogate(node):
            problems.append(Problem(path, "text holds an unpaired surrogate escape (\\ud800-\\udfff), "
                                          "which is not valid Unicode"))
    elif isinstance(node, dict):
        for key in getattr(node, "duplicates", ()):
            problems.append(Problem(join_path(path, [key]), "duplicate key in the same object"))
        for key in node:
            if _has_surrogate(key):
                problems.append(Problem(path, "a key holds an unpaired surrogate escape"))


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def jsonl_lines(text: str) -> list[str]:
    """The lines of a JSONL text: split on ``\n`` only (a ``\r`` before it is dropped).

    ``str.splitlines()`` would also split on U+2028, U+0085, ``\v``, ``\f`` and others, which
    JSON allows raw inside strings: a valid line would be cut in two and every later line number
    would be wrong.
    """
    return list(iter_jsonl_lines(text))


def iter_jsonl_lines(text: str) -> Iterator[str]:
    """The lines of ``jsonl_lines`` one at a time, so a parse never holds a second copy of the file.

    A large JSONL file's text split whole into a list doubles the memory ingest needs; slicing
    one line at a time keeps only the line being parsed besides the text itself.
    """
    start, end = 0, len(text)
    while start < end:
        stop = text.find("\n", start)
        if stop < 0:
            stop = end
        line = text[start:stop]
        yield line[:-1] if line.endswith("\r") else line
        start = stop + 1


def parse_jsonl(text: str) -> tuple[list[tuple[int, Any]], list[Problem]]:
    """Parse JSONL: (line number, value) for each non-blank line, and the problems of bad lines."""
    rows: list[tuple[int, Any]] = []
    problems: list[Problem] = []
    for number, line in enumerate(iter_jsonl_lines(text), start=1):
        if not line.strip(_JSON_SPACE):
            continue
        try:
            rows.append((number, loads(line, where=f"line {number}: $", line_offset=number - 1)))
        except FileRejected as exc:
            problems.extend(exc.problems)
    return rows, problems


def first_json_line(text: str) -> Any:
    """The first non-blank line parsed as JSON, or None when it does not parse."""
    for line in iter_jsonl_lines(text):
        if line.strip(_JSON_SPACE):
            try:
                return loads(line)
            except FileRejected:
                return None
    return None
