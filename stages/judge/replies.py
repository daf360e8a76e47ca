"""Tolerant decoding of a judge's text reply into JSON.

Real judges wrap JSON in markdown fences, put prose before it, or think aloud in ``<think>``
blocks first (shared/fixtures/karenina/llm_responses holds real examples). This module finds the
JSON value in such text; schema validation is the role's job.
"""

from __future__ import annotations

import json
import re
from typing import Any

_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*[ \t]*\n?(.*?)```", re.S)
_DECODER = json.JSONDecoder()


class ReplyParseError(ValueError):
    """The reply holds no JSON object or array."""


def decode_reply(text: str | None) -> Any:
    """The JSON value in a judge's reply: plain, fenced, or after/before prose.

    Tries, in order: the whole text; each fenced block; the first JSON object or array that
    starts anywhere in the text and decodes completely. Raises ReplyParseError otherwise.
    """
    if text is None or not text.strip():
        raise ReplyParseError("the reply is empty")
    body = _THINK.sub("", text).strip()
    for candidate in (body, *(m.group(1).strip() for m in _FENCE.finditer(body))):
        value = _loads(candidate)
        if value is not None:
            return value
    value = _first_embedded(body)
    if value is not None:
        return value
    preview = body[:120].replace("\n", " ")
    raise ReplyParseError(f"the reply holds no JSON object: {preview!r}")


def _loads(text: str) -> Any:
    """json.loads that answers None instead of raising, for objects and arrays only."""
    if not text or text[0] not in "{[":
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, (dict, list)) else None


def _first_embedded(text: str) -> Any:
    """The first '{' or '[' from which a whole JSON object or array decodes."""
    for match in re.finditer(r"[{\[]", text):
        try:
            value, _ = _DECODER.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, (dict, list)) and value:
            return value
    return None
