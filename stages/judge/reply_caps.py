"""How much of a judge reply any backend may put into a ``judge.called`` event.

Every attempt is recorded, and a deep-judgment case asks several roles, so one oversized reply
multiplies into the ledger (a 10 MB reply made a 201 MB home from two cases). Two caps apply to
every backend, after it answers and before the attempt is recorded:

- the raw reply text (``raw_reply``) and the message contents of ``sent`` keep at most
  ``MAX_STORED_RAW_CHARS`` characters each; the event says what was cut in ``stored_cut``;
- a validated reply whose canonical JSON is longer than ``MAX_REPLY_CHARS`` is refused: the
  attempt is recorded as failed, with the reason, and the call fails (``JudgeCallFailed``), so no
  stage goes on with, or copies into later requests, a reply of that size.
"""

from __future__ import annotations

from typing import Any

from evalledger.ledger import canonical_json

MAX_STORED_RAW_CHARS = 65_536
MAX_REPLY_CHARS = 262_144      # bytes of the reply's canonical JSON


def cap_payload(payload: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The ``judge.called`` payload within the caps, and the reason the reply is refused (or None)."""
    out = dict(payload)
    cuts: list[str] = []
    raw = out.get("raw_reply")
    if isinstance(raw, str) and len(raw) > MAX_STORED_RAW_CHARS:
        out["raw_reply"] = raw[:MAX_STORED_RAW_CHARS]
        cuts.append(f"raw_reply: {len(raw)} characters, the first {MAX_STORED_RAW_CHARS} kept")
    if isinstance(out.get("sent"), list):
        out["sent"] = [_cut_message(message, index, cuts) for index, message in enumerate(out["sent"])]
    refused = None
    if out.get("reply") is not None:
        size = len(canonical_json(out["reply"]))
        if size > MAX_REPLY_CHARS:
            refused = (f"the reply is {size} bytes of JSON, over the cap of {MAX_REPLY_CHARS} a reply may "
                       "put into the ledger; it is not stored or used")
            out["reply"] = None
            out["error"] = refused
    if cuts:
        out["stored_cut"] = cuts
    return out, refused


def _cut_message(message: Any, index: int, cuts: list[str]) -> Any:
    """One sent message with its content cut to the cap (a re-ask repeats the raw reply)."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str) or len(content) <= MAX_STORED_RAW_CHARS:
        return message
    cuts.append(f"sent[{index}].content: {len(content)} characters, the first {MAX_STORED_RAW_CHARS} kept")
    return {**message, "content": content[:MAX_STORED_RAW_CHARS]}
