"""Text from files shown on a terminal or written to a note: escaped so it cannot forge lines.

A file name (or a place in a file) may hold a newline, a carriage return, an ANSI escape
sequence or a bidirectional override. Printed raw, a newline forges extra output lines and an
escape sequence reaches the terminal. Every character ``str.isprintable()`` refuses is written as
a backslash escape (``\\n``, ``\\u001b``); the escapes are valid in JSON and in Python string
literals, so the same function serves text lines and JSON lines.
"""

from __future__ import annotations

_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_unprintable(text: str) -> str:
    """``text`` with every unprintable character (control, format, separator other than the space,
    lone surrogate) replaced by a backslash escape; printable text is returned unchanged."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def shown_name(name: str) -> str:
    """A file name as printed: unchanged when it is all printable, else quoted with escapes
    (``'a\\nb'``), so a name can never start a line of its own or drive the terminal."""
    return name if name.isprintable() else repr(name)


def _escape(char: str) -> str:
    """One character as a JSON-compatible escape (astral characters as a surrogate pair)."""
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
