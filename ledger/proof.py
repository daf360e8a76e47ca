"""Proof bundles: some events of a ledger, shown to be in a signed checkpoint, checkable offline.

A bundle is one JSON object::

    {"format": "evalledger/proof@1",
     "checkpoint": "<the signed note of a checkpoint>",
     "events": [{"line": "<the event's stored JSONL line, without its newline>",
                 "proof": ["<hex>", ...]}, ...]}

It carries only the events it proves (selective disclosure: a case's events and nothing else).
``check_proof`` needs no ledger and nothing of evalledger's but this module's few imports, and
an auditor can redo it by hand:

1. Check the checkpoint note's Ed25519 signature with the publisher's verifier key (C2SP signed
   note) and read its size N, Merkle root R and chain head H.
2. For each event line: the last 154 bytes are ``,"prev_hash":"<64 hex>","hash":"<64 hex>"}``;
   the canonical bytes are the line without them, plus ``}``. The event's hash must equal
   ``sha256(prev_hash as ASCII + canonical bytes)``, its ``seq`` (read from the canonical JSON)
   must be at most N, and the event at seq N must have hash H.
3. The RFC 6962 inclusion proof of leaf ``seq - 1`` (the 32 bytes of the hash) must lead to R.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalledger.ledger import merkle

if TYPE_CHECKING:
    from evalledger.ledger.api import Ledger
from evalledger.ledger.checkpoint import Checkpoint, CheckpointError, open_checkpoint
from evalledger.ledger.signed_note import Verifier

FORMAT = "evalledger/proof@1"
_SUFFIX = len(',"prev_hash":"') + 64 + len('","hash":"') + 64 + len('"}')


class ProofFailed(ValueError):
    """The bundle does not prove what it claims; the message says where and why."""


@dataclass(frozen=True)
class ProvenEvent:
    """An event whose bytes are in the signed checkpoint."""

    seq: int
    hash: str
    type: str
    stream: str
    data: Any
    version: int = 0   # its version in its stream (0 when the envelope gives none)


def build_bundle(led: Ledger, seqs: list[int], checkpoint_note: str, checkpoint: Checkpoint) -> dict[str, Any]:
    """The bundle proving the events at ``seqs`` against ``checkpoint`` (they must be within it)."""
    wanted = sorted(set(seqs))
    if not wanted or wanted[-1] > checkpoint.size or wanted[0] < 1:
        raise CheckpointError(f"the checkpoint covers seq 1..{checkpoint.size}; "
                              f"the events asked for are not all in it")
    hashes, lines = [], {}
    for event in led.read():
        if event.seq > checkpoint.size:
            break
        hashes.append(bytes.fromhex(event.hash))
        if event.seq in wanted:
            lines[event.seq] = event.line().rstrip(b"\n").decode("utf-8")
    if len(hashes) != checkpoint.size or merkle.root(hashes) != checkpoint.root:
        raise CheckpointError("this ledger no longer matches the checkpoint: it was rewritten after it")
    events = [{"line": lines[seq], "proof": [p.hex() for p in merkle.inclusion_proof(hashes, seq - 1, checkpoint.size)]}
              for seq in wanted]
    for seq, entry in zip(wanted, events):   # as the auditor will: a line that does not hash is not shipped
        try:
            _event(entry, f"seq {seq}")
        except ProofFailed as exc:
            raise CheckpointError(f"{led.location}: {exc}; this bundle would fail every check: run "
                                  "'evalledger verify', which names what was changed") from None
    return {"format": FORMAT, "checkpoint": checkpoint_note, "events": events}


def _event(entry: Any, where: str) -> tuple[bytes, str, str, dict[str, Any]]:
    """The canonical bytes, prev_hash, hash and parsed envelope of one bundle entry."""
    if not isinstance(entry, dict) or not isinstance(entry.get("line"), str) or not isinstance(entry.get("proof"), list):
        raise ProofFailed(f"{where}: an entry is {{\"line\": str, \"proof\": [hex, ...]}}")
    for number, node in enumerate(entry["proof"]):
        if not isinstance(node, str) or len(node) != 64 or node.strip("0123456789abcdef"):
            raise ProofFailed(f"{where}: proof[{number}] is not a hash (64 lowercase hex digits): {str(node)[:80]!r}")
    line = entry["line"].encode("utf-8")
    suffix = line[-_SUFFIX:]
    if len(line) <= _SUFFIX or not (suffix.startswith(b',"prev_hash":"') and suffix[78:88] == b'","hash":"'
                                    and suffix.endswith(b'"}')):
        raise ProofFailed(f"{where}: the line does not end with its prev_hash and hash")
    canonical, prev_hash, hash_ = line[:-_SUFFIX] + b"}", suffix[14:78].decode(), suffix[88:152].decode()
    if hashlib.sha256(prev_hash.encode("ascii") + canonical).hexdigest() != hash_:
        raise ProofFailed(f"{where}: the event's bytes do not hash to its hash (the event was changed)")
    try:
        envelope = json.loads(canonical)
        seq = envelope["seq"]
    except (ValueError, KeyError, TypeError):
        raise ProofFailed(f"{where}: the event's canonical bytes are not an envelope") from None
    if not isinstance(seq, int) or seq < 1:
        raise ProofFailed(f"{where}: the event has no valid seq")
    return canonical, prev_hash, hash_, envelope


def check_proof(bundle: Any, verifier: Verifier) -> tuple[Checkpoint, list[ProvenEvent]]:
    """Check a bundle with no ledger at hand; the checkpoint and the proven events, or ProofFailed."""
    if not isinstance(bundle, dict) or bundle.get("format") != FORMAT:
        raise ProofFailed(f"not a proof bundle (format {FORMAT!r})")
    if not isinstance(bundle.get("checkpoint"), str):
        raise ProofFailed("the bundle carries no checkpoint note")
    try:
        checkpoint = open_checkpoint(bundle["checkpoint"], verifier)
    except CheckpointError as exc:
        raise ProofFailed(f"checkpoint: {exc}") from None
    events = bundle.get("events")
    if not isinstance(events, list) or not events:
        raise ProofFailed("the bundle proves no event")
    proven = []
    listed: dict[int, int] = {}
    for number, entry in enumerate(events):
        where = f"events[{number}]"
        _, _, hash_, envelope = _event(entry, where)
        seq = envelope["seq"]
        if seq in listed:   # one event shown twice would count as two
            raise ProofFailed(f"{where}: seq {seq} is listed twice (events[{listed[seq]}] too)")
        listed[seq] = number
        if seq > checkpoint.size:
            raise ProofFailed(f"{where}: seq {seq} is after the checkpoint (size {checkpoint.size})")
        if seq == checkpoint.size and hash_ != checkpoint.head:
            raise ProofFailed(f"{where}: seq {seq} is the checkpoint's head but its hash differs")
        try:
            path = [bytes.fromhex(p) for p in entry["proof"]]
            merkle.verify_inclusion(bytes.fromhex(hash_), seq - 1, checkpoint.size, path, checkpoint.root)
        except (ValueError, TypeError) as exc:
            raise ProofFailed(f"{where}: seq {seq} is not in the checkpoint's tree: {exc}") from None
        version = envelope.get("version")
        proven.append(ProvenEvent(seq, hash_, envelope.get("type", ""), envelope.get("stream", ""), envelope.get("data"),
                                  version if isinstance(version, int) else 0))
    return checkpoint, proven


def missing_versions(events: list[ProvenEvent]) -> dict[str, list[int]]:
    """Per stream, the versions below the highest proven one that the events do not hold: a case's
    bundle (``prove``) holds every event of its stream up to its checkpoint, so any is a selection.
    (What came after the last proven version no bundle can show.)"""
    seen: dict[str, set[int]] = {}
    for event in events:
        seen.setdefault(event.stream, set()).add(event.version)
    gaps = {stream: sorted(set(range(1, max(versions) + 1)) - versions) for stream, versions in sorted(seen.items())}
    return {stream: missing for stream, missing in gaps.items() if missing}
