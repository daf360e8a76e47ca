"""What a judge server sends, made safe to keep: a capped body, strict UTF-8, storable JSON.

A chat-completions body is read in chunks up to a cap (``JudgeSettings.max_reply_bytes``), so a
huge or endless body never sits in memory whole. The raw text is always kept as a plain string
(bytes that are not UTF-8 and unpaired surrogates become visible ``\\x..``/``\\u..`` escapes), so
the ledger's canonical JSON accepts it. A decoded reply is storable only when every number is
finite, every string is UTF-8 and it nests at most ``MAX_REPLY_DEPTH`` levels: anything else is
an invalid reply, asked again, never a lost one.
"""

from __future__ import annotations

import math
from typing import Any

# The ledger's canonical JSON (orjson) refuses more than 255 levels; a reply is wrapped a few
# levels deep in its event, and no role's reply needs more than a handful.
MAX_REPLY_DEPTH = 64
READ_CHUNK = 64 * 1024
RAW_PREFIX_CHARS = 2000    # what is kept of an over-cap body, to show what it was


class BodyTooLarge(Exception):
    """The body is longer than the cap; ``prefix`` holds its first bytes."""

    def __init__(self, cap: int, prefix: bytes, declared: int | None):
        self.cap, self.prefix, self.declared = cap, prefix, declared
        size = f"{declared} bytes declared" if declared is not None else f"more than {cap} bytes"
        super().__init__(f"the reply body is over the {cap}-byte cap ({size}); not read further")


async def read_capped(response, cap: int) -> bytes:
    """The body of an aiohttp response, at most ``cap`` bytes; raises BodyTooLarge beyond that.

    A declared Content-Length over the cap is refused before reading anything; otherwise the
    body is read chunk by chunk and reading stops as soon as the cap is passed (the connection
    is then dropped, not reused).
    """
    declared = response.content_length
    if declared is not None and declared > cap:
        raise BodyTooLarge(cap, b"", declared)
    if declared is not None and not response.headers.get("Content-Encoding"):
        # Within the cap and not compressed (a compressed body may inflate past it): read it
        # whole, in one go; the parser stops at the declared length.
        return await response.read()
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(READ_CHUNK):
        size += len(chunk)
        chunks.append(chunk)
        if size > cap:
            raise BodyTooLarge(cap, b"".join(chunks)[:RAW_PREFIX_CHARS], None)
    return b"".join(chunks)


def decode_body(body: bytes) -> tuple[str, str | None]:
    """The body as text, and why it is not valid UTF-8 (None when it is).

    The text is always storable: invalid bytes become ``\\xNN`` escapes.
    """
    try:
        return body.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        text = body.decode("utf-8", "backslashreplace")
        return text, f"the reply body is not valid UTF-8 (byte 0x{body[exc.start]:02x} at offset {exc.start})"


def safe_text(text: str) -> str:
    """``text`` as storable UTF-8: unpaired surrogates become ``\\udXXX`` escapes."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


# C0 and C1 control characters (tab and newline too: a server's text is printed on one line)
_CONTROLS = {code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7f, 0xa0))}


def printable(text: str) -> str:
    """``text`` with its control characters written as ``\\xNN``: a server's error printed on a
    terminal or in a log line cannot move the cursor, retitle the window or start a forged line."""
    return text.translate(_CONTROLS)


def storage_problem(value: Any, path: str = "reply", depth: int = 0) -> str | None:
    """Why a decoded reply cannot be stored in the ledger as JSON (None when it can)."""
    if depth > MAX_REPLY_DEPTH:
        return f"the reply nests deeper than {MAX_REPLY_DEPTH} levels"
    if isinstance(value, float) and not math.isfinite(value):
        return (f"{path} is {value!r}: JSON numbers must be finite (no NaN, Infinity or out-of-range "
                "values such as 1e400)")
    if isinstance(value, str):
        return None if safe_text(value) is value else f"{path} holds an unpaired surrogate (not UTF-8)"
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{safe_text(str(key))}"
            problem = storage_problem(key, where, depth + 1) or storage_problem(item, where, depth + 1)
            if problem:
                return problem
    elif isinstance(value, list):
        for i, item in enumerate(value):
            problem = storage_problem(item, f"{path}[{i}]", depth + 1)
            if problem:
                return problem
    return None
