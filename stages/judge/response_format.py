"""How the reply schema travels to the server: the three response-format modes and the fallback.

- ``json_schema`` (the default): ``response_format: {type: json_schema, json_schema: {name,
  schema, strict: true}}``: OpenAI's strict structured outputs; vLLM (xgrammar), Ollama and
  llama.cpp's llama-server constrain decoding with it.
- ``json_object``: ``response_format: {type: json_object, schema}``: the shape llama-cpp-python's
  server takes (it answers ``json_schema`` with HTTP 500).
- ``prompt``: no ``response_format``; the schema is written into the system prompt.

A server that refuses the format (HTTP 400, 422 or 500 whose body names the response format,
``json_schema``, ``json_object`` or the schema) moves the backend to the next mode for the rest
of the run; every refused call is asked again in the new mode, those that were in flight when
the switch happened included (``FormatModes.after_refusal``).
"""

from __future__ import annotations

import json
from typing import Any

MODES = ("json_schema", "json_object", "prompt")
REFUSAL_STATUS = frozenset({400, 422, 500})
REFUSAL_WORDS = ("response_format", "response format", "json_schema", "json_object", "schema")
PROMPT_NOTE = "\n\nAnswer with a JSON object that conforms to this JSON schema:\n"


def response_format_field(mode: str, role: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The ``response_format`` request field of ``mode`` (None: the prompt mode sends none)."""
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": role, "schema": schema, "strict": True}}
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    return None


def messages_for(mode: str, messages: list[dict[str, str]], schema: dict[str, Any]) -> list[dict[str, str]]:
    """The messages to send in ``mode``: as given, or with the schema in the system prompt."""
    if mode != "prompt":
        return messages
    note = PROMPT_NOTE + json.dumps(schema, ensure_ascii=False, sort_keys=True)
    out = [dict(m) for m in messages]
    if out and out[0]["role"] == "system":
        out[0]["content"] += note
    else:
        out.insert(0, {"role": "system", "content": note.strip()})
    return out


def names_the_format(status: int | None, body: str) -> bool:
    """Whether an HTTP error is the server refusing the response format (not some other failure)."""
    if status not in REFUSAL_STATUS:
        return False
    text = body.lower()
    return any(word in text for word in REFUSAL_WORDS)


class FormatModes:
    """The mode a backend sends in now, moved along MODES by refusals (shared by its calls)."""

    def __init__(self, first: str = "json_schema"):
        """Start in mode ``first``; a ValueError names the modes for anything else."""
        if first not in MODES:
            raise ValueError(f"unknown response format {first!r}; one of {', '.join(MODES)}")
        self.current = first

    def after_refusal(self, refused: str) -> str | None:
        """The mode to ask again in after the server refused ``refused``; None when none is left.

        A refusal of the current mode moves to the next one; a refusal of a mode already left
        behind (a call that was in flight during the switch) is asked again in the current mode.
        """
        if refused == "prompt":
            return None
        if refused == self.current:
            self.current = MODES[MODES.index(refused) + 1]
        return self.current
