"""Published heads: check a list of heads printed earlier (``verify --expect-head FILE``).

A file holds one head a line, either ``SEQ:HASH`` (as ``verify`` prints it, ``seq N HASH`` too)
or a checkpoints JSONL line ``{"seq": N, "hash": "..."}``; blank lines and ``#`` comments are
skipped. A head still holds when the ledger reaches its seq, the event there has its hash, and
the chain verifies up to it. Since every hash commits to all before it, the heads that hold form
a prefix of the list in seq order: the latest that holds and the first that does not bound where
history was rewritten (or where the ledger was cut).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalledger.ledger.persistence import Head, LedgerError


@dataclass(frozen=True)
class PublishedHead:
    """One head from a published list, where it came from, and whether it still holds."""

    head: Head
    where: str                 # "FILE:LINE"
    holds: bool = True
    reason: str = ""


def looks_like_head(text: str) -> bool:
    """True for ``SEQ:HASH`` text (the single-head form of ``--expect-head``)."""
    seq, sep, rest = text.partition(":")
    return bool(sep) and seq.strip().isdigit() and len(rest.strip()) == 64


def read_heads(path: str | Path) -> list[PublishedHead]:
    """The heads listed in a file, in seq order; LedgerError naming the line for a bad one."""
    from evalledger.ledger.api import parse_head
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LedgerError(f"{path}: cannot read the published heads ({exc})") from None
    heads = []
    for number, line in enumerate(text.split("\n"), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{path}:{number}"
        try:
            if line.startswith("{"):
                data = json.loads(line)
                if not isinstance(data, dict) or not isinstance(data.get("seq"), int) or isinstance(data["seq"], bool):
                    raise LedgerError('a checkpoint line needs {"seq": N, "hash": "..."}')
                head = parse_head(f"{data['seq']}:{data.get('hash')}")
            else:
                # SEQ:HASH, the line verify prints (head SEQ:HASH), or the older form seq SEQ HASH
                head = parse_head(line.removeprefix("seq ").replace(" ", ":", 1) if line.startswith("seq ")
                                  else line.removeprefix("head ").strip())
        except (LedgerError, ValueError) as exc:
            raise LedgerError(f"{where}: {exc}") from None
        heads.append(PublishedHead(head, where))
    if not heads:
        raise LedgerError(f"{path}: no published head in it (one SEQ:HASH, or a checkpoint JSON object, a line)")
    return sorted(heads, key=lambda h: h.head.seq)


def check_heads(led: Any, heads: list[PublishedHead], first_problem: int | None) -> list[PublishedHead]:
    """Each head with ``holds`` and, when it does not, why. ``first_problem``: the seq where
    ``verify`` found the chain broken (None when it verified): a head at or past it cannot hold."""
    out = []
    last = led.head().seq
    for item in heads:
        seq, want = item.head
        if seq > last:
            reason = f"the ledger ends at seq {last}"
        elif first_problem is not None and seq >= first_problem:
            reason = f"the chain is broken at seq {first_problem}"
        else:
            stored = next(led.read(from_seq=seq, to_seq=seq), None) if seq else None
            have = stored.hash if stored is not None else "0" * 64
            reason = "" if have == want else f"the ledger holds {have} at seq {seq}"
        out.append(PublishedHead(item.head, item.where, not reason, reason))
    return out
