"""Signed checkpoints of a ledger: size, chain head, Merkle root and time, in a signed note.

The note's text is a C2SP checkpoint (``tlog-checkpoint``) with two extension lines::

    evalledger/<origin>
    <size>
    <base64 Merkle root>
    chain <hex hash of the event at seq size>
    time <UTC time, ISO 8601>

``origin`` names the ledger (the hash of its first event, so two ledgers never share one). A
checkpoint is appended to the ledger as ``checkpoint.signed`` and to ``checkpoints.jsonl`` in
the home; copies published elsewhere (a witness, another disk) are what make a later rewrite of
the ledger by its own writer detectable: ``verify --against`` proves the ledger still extends
every one of them.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import orjson

from evalledger.ledger import merkle, signed_note
from evalledger.ledger.envelope import NewEvent, utc_now

if TYPE_CHECKING:
    from evalledger.ledger.api import Ledger

CHECKPOINTS_FILE = "checkpoints.jsonl"


class CheckpointError(ValueError):
    """A checkpoint that cannot be made, read or trusted."""


class TreeMismatch(CheckpointError):
    """The tree the store keeps gives another root than the events' own hashes: nothing is signed."""


@dataclass(frozen=True)
class Checkpoint:
    """The signed claim: the ledger ``origin`` had ``size`` events, with this chain head and root."""

    origin: str
    size: int
    root: bytes
    head: str
    time: str

    def text(self) -> str:
        """The note text that is signed."""
        return (f"evalledger/{self.origin}\n{self.size}\n{base64.b64encode(self.root).decode()}\n"
                f"chain {self.head}\ntime {self.time}\n")


_SIZE = re.compile(r"0|[1-9][0-9]*", re.ASCII)
_HEX64 = re.compile(r"[0-9a-f]{64}")
_ORIGIN = re.compile(r"[0-9a-f]{16}")


def parse_text(text: str) -> Checkpoint:
    """Read a checkpoint's note text (after its signature has been checked)."""
    lines = text.rstrip("\n").split("\n")
    try:
        origin_line, size, root_b64, chain, when = lines
        if not origin_line.startswith("evalledger/") or not chain.startswith("chain ") or not when.startswith("time "):
            raise ValueError
        root = base64.b64decode(root_b64, validate=True)
        # ASCII only, as any other reader of the note would take it (str.isdigit takes "٣٢٩" too),
        # no leading zero; the chain hash as the ledger writes it
        if len(root) != 32 or not _SIZE.fullmatch(size) or not _HEX64.fullmatch(chain[len("chain "):]) \
                or not _ORIGIN.fullmatch(origin_line[len("evalledger/"):]):
            raise ValueError
    except ValueError:
        raise CheckpointError("not an evalledger checkpoint (origin, size, root, chain, time)") from None
    return Checkpoint(origin_line[len("evalledger/"):], int(size), root, chain[len("chain "):], when[len("time "):])


def open_checkpoint(note: str, verifier: signed_note.Verifier) -> Checkpoint:
    """The checkpoint in ``note`` once its signature by ``verifier`` checks."""
    try:
        return parse_text(signed_note.open_note(note, verifier))
    except signed_note.NoteError as exc:
        raise CheckpointError(str(exc)) from None


def leaves(led: Ledger, upto: int | None = None) -> Iterator[bytes]:
    """The Merkle leaves of ``led``: each event's chain hash as 32 raw bytes, in seq order."""
    yield from led.recorder.leaf_hashes(led.head().seq if upto is None else upto)   # the hash column alone


def origin_of(led: Ledger) -> str:
    """The ledger's name in its checkpoints: the first 16 hex of its first event's hash."""
    first = next(iter(led.read()), None)
    if first is None:
        raise CheckpointError("an empty ledger has nothing to checkpoint")
    return origin_from(first.hash)


def origin_from(first_hash: str) -> str:
    """A ledger's name in its checkpoints from its first event's hash (hex): its first 16 digits."""
    return first_hash[:16]


def tree_roots(led: Ledger, sizes: set[int]) -> dict[int, bytes]:
    """The Merkle root of ``led`` at each of ``sizes``, in one pass over the events."""
    frontier, roots = merkle.Frontier(), {}
    if 0 in sizes:
        roots[0] = merkle.EMPTY_ROOT
    for leaf in leaves(led, max(sizes, default=0)):
        frontier.append(leaf)
        if frontier.size in sizes:
            roots[frontier.size] = frontier.root()
    return roots


def make_checkpoint(led: Ledger, signer: signed_note.Signer, *, now: str | None = None) -> tuple[Checkpoint, str]:
    """Sign the ledger's current head: the checkpoint and its note (nothing is written)."""
    head = led.head()
    if head.seq == 0:
        raise CheckpointError("an empty ledger has nothing to checkpoint")
    root = led.merkle_root(head.seq)
    if led.events_root(head.seq) != root:
        raise TreeMismatch(f"{led.location}: the Merkle tree the store keeps (its merkle row) does not match the "
                              f"events' hashes at seq {head.seq}: nothing was signed (a signed root is published "
                              "for good); run 'evalledger verify', which names it")
    checkpoint = Checkpoint(origin_of(led), head.seq, root, head.hash, now or utc_now())
    return checkpoint, signed_note.sign(checkpoint.text(), signer)


def checkpoint_line(checkpoint: Checkpoint, note: str) -> bytes:
    """The checkpoint as a line of ``checkpoints.jsonl`` (what ``--publish FILE`` appends too)."""
    return orjson.dumps({"seq": checkpoint.size, "hash": checkpoint.head, "root": checkpoint.root.hex(),
                         "note": note}, option=orjson.OPT_SORT_KEYS) + b"\n"


def record_checkpoint(led: Ledger, checkpoint: Checkpoint, note: str, verifier: signed_note.Verifier) -> Path | None:
    """Append ``checkpoint.signed`` and a line to ``<home>/checkpoints.jsonl``; the file's path."""
    data = {"size": checkpoint.size, "head": checkpoint.head, "root": checkpoint.root.hex(), "note": note,
            "key": key_id(verifier)}
    led.append([NewEvent("ledger:checkpoints", "checkpoint.signed", data, key=f"{checkpoint.size}:{checkpoint.head}")])
    if led.home is None:
        return None
    path = Path(led.home) / CHECKPOINTS_FILE
    with open(path, "ab") as handle:
        handle.write(checkpoint_line(checkpoint, note))
        handle.flush()
        os.fsync(handle.fileno())
    return path


def read_checkpoints(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The lines of a checkpoints file (``{"seq", "hash", "root", "note"}``), in order."""
    out = []
    for number, raw in enumerate(Path(path).read_bytes().split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            row = orjson.loads(raw)
            if not isinstance(row, dict) or not isinstance(row.get("note"), str):
                raise ValueError
        except ValueError:
            raise CheckpointError(f"{path}: line {number}: not a checkpoint line") from None
        out.append(row)
    return out


def key_id(verifier: signed_note.Verifier) -> str:
    """How events and reports name a verifier key: ``name+<hex key hash>`` (never the key itself)."""
    return f"{verifier.name}+{verifier.key_hash.hex()}"


def check_report_claim(claim: dict[str, Any], rows: list[dict[str, Any]], verifier: signed_note.Verifier) -> str:
    """Check what a report says of its checkpoint against a checkpoints file; what holds, as a sentence.

    ``claim``: {seq, root, key, note_sha256, ledger_head: {seq, hash}} as the report states it.
    The checkpoint is the line of ``rows`` whose note has that sha256; its signature must check
    with ``verifier``, and its signed size and root must be the report's. When the report's head is
    the checkpoint's size, its hash must be the signed chain head; a later head is stated (events
    after the checkpoint, which no signature covers). Raises CheckpointError naming what fails.
    """
    want = str(claim.get("note_sha256"))
    note = next((row["note"] for row in rows
                 if hashlib.sha256(row["note"].encode("utf-8")).hexdigest() == want), None)
    if note is None:
        raise CheckpointError(f"no checkpoint there has a note with sha256 {want}: the report names a "
                              "checkpoint that was not published there")
    checkpoint = open_checkpoint(note, verifier)
    if checkpoint.size != claim.get("seq") or checkpoint.root.hex() != claim.get("root"):
        raise CheckpointError(f"the report says seq {claim.get('seq')} root {claim.get('root')}, the signed "
                              f"checkpoint says seq {checkpoint.size} root {checkpoint.root.hex()}")
    if claim.get("key") != key_id(verifier):
        raise CheckpointError(f"the report names key {claim.get('key')}, the checkpoint checks with {key_id(verifier)}")
    head = claim.get("ledger_head") or {}
    seq = head.get("seq")
    if not isinstance(seq, int) or seq < checkpoint.size:
        raise CheckpointError(f"the report's head (seq {seq}) is before its checkpoint (seq {checkpoint.size})")
    if seq == checkpoint.size and head.get("hash") != checkpoint.head:
        raise CheckpointError(f"the report's head hash {head.get('hash')} is not the signed chain head "
                              f"{checkpoint.head} at seq {seq}")
    what = (f"the report's head is the checkpoint's (seq {seq}, hash {checkpoint.head})" if seq == checkpoint.size
            else f"the report's head is seq {seq}: {seq - checkpoint.size} event(s) after the checkpoint "
                 "(its own checkpoint.signed record among them), not covered by it")
    return (f"checkpoint of ledger {checkpoint.origin} at seq {checkpoint.size} ({checkpoint.time}), signed by "
            f"{verifier.name}; {what}")


@dataclass(frozen=True)
class Consistency:
    """How a ledger stands against earlier checkpoints: the latest it still extends, the first it does not."""

    checked: int
    holds: list[int]                 # sizes of the checkpoints the ledger extends
    broken: int | None               # size of the first checkpoint it no longer extends
    reason: str | None
    root: str | None = None          # the Merkle root (hex) of the whole ledger, once computed
    # why the first failing checkpoint fails: "unreadable" (its note, or its signature with the
    # key), "other ledger" (its origin names another ledger), "rewritten" (this ledger does not extend it)
    kind: str | None = None


def check_consistency(led: Ledger, rows: list[dict[str, Any]], verifier: signed_note.Verifier | None = None) -> Consistency:
    """Prove with RFC 6962 consistency proofs that ``led`` extends every checkpoint in ``rows``.

    Each row is a line of a checkpoints file. With ``verifier`` each note's signature is checked
    first; without it the note's text is read as it stands (its signature unchecked).
    """
    checkpoints: list[Checkpoint] = []
    for number, row in enumerate(rows, 1):
        try:
            cp = open_checkpoint(row["note"], verifier) if verifier else parse_text(
                row["note"].rpartition("\n\n")[0] + "\n")
        except CheckpointError as exc:
            return Consistency(number - 1, [c.size for c in checkpoints], row.get("seq"), f"checkpoint {number}: {exc}",
                               kind="unreadable")
        checkpoints.append(cp)
    hashes = [bytes.fromhex(e.hash) for e in led.read()]
    new_root, holds = merkle.root(hashes), list[int]()
    mine = origin_from(hashes[0].hex()) if hashes else None
    for cp in checkpoints:
        if mine is not None and cp.origin != mine:
            return Consistency(len(checkpoints), holds, cp.size, f"the checkpoint at seq {cp.size} is of ledger "
                               f"{cp.origin}, not of this one ({mine})", kind="other ledger")
        if cp.size > len(hashes):
            return Consistency(len(checkpoints), holds, cp.size, f"checkpoint at seq {cp.size} is beyond this "
                               f"ledger's head (seq {len(hashes)}): events were removed", kind="rewritten")
        try:
            proof = merkle.consistency_proof(hashes, cp.size, len(hashes))
            merkle.verify_consistency(cp.size, len(hashes), cp.root, new_root, proof)
        except merkle.ProofError as exc:
            return Consistency(len(checkpoints), holds, cp.size, f"the ledger does not extend the checkpoint at "
                               f"seq {cp.size}: {exc}", kind="rewritten")
        if hashes[cp.size - 1].hex() != cp.head:
            return Consistency(len(checkpoints), holds, cp.size, f"the event at seq {cp.size} is not the "
                               f"checkpoint's chain head", kind="rewritten")
        holds.append(cp.size)
    return Consistency(len(checkpoints), holds, None, None, new_root.hex())
