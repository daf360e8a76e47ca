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
import os
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


def parse_text(text: str) -> Checkpoint:
    """Read a checkpoint's note text (after its signature has been checked)."""
    lines = text.rstrip("\n").split("\n")
    try:
        origin_line, size, root_b64, chain, when = lines
        if not origin_line.startswith("evalledger/") or not chain.startswith("chain ") or not when.startswith("time "):
            raise ValueError
        root = base64.b64decode(root_b64, validate=True)
        if len(root) != 32 or not size.isdigit():
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
    for event in led.read():
        if upto is not None and event.seq > upto:
            return
        yield bytes.fromhex(event.hash)


def origin_of(led: Ledger) -> str:
    """The ledger's name in its checkpoints: the first 16 hex of its first event's hash."""
    first = next(iter(led.read()), None)
    if first is None:
        raise CheckpointError("an empty ledger has nothing to checkpoint")
    return str(first.hash[:16])


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
    checkpoint = Checkpoint(origin_of(led), head.seq, root, head.hash, now or utc_now())
    return checkpoint, signed_note.sign(checkpoint.text(), signer)


def checkpoint_line(checkpoint: Checkpoint, note: str) -> bytes:
    """The checkpoint as a line of ``checkpoints.jsonl`` (what ``--publish FILE`` appends too)."""
    return orjson.dumps({"seq": checkpoint.size, "hash": checkpoint.head, "root": checkpoint.root.hex(),
                         "note": note}, option=orjson.OPT_SORT_KEYS) + b"\n"


def record_checkpoint(led: Ledger, checkpoint: Checkpoint, note: str, verifier: signed_note.Verifier) -> Path | None:
    """Append ``checkpoint.signed`` and a line to ``<home>/checkpoints.jsonl``; the file's path."""
    data = {"size": checkpoint.size, "head": checkpoint.head, "root": checkpoint.root.hex(), "note": note,
            "key": f"{verifier.name}+{verifier.key_hash.hex()}"}
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


@dataclass(frozen=True)
class Consistency:
    """How a ledger stands against earlier checkpoints: the latest it still extends, the first it does not."""

    checked: int
    holds: list[int]                 # sizes of the checkpoints the ledger extends
    broken: int | None               # size of the first checkpoint it no longer extends
    reason: str | None
    root: str | None = None          # the Merkle root (hex) of the whole ledger, once computed


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
            return Consistency(number - 1, [c.size for c in checkpoints], row.get("seq"), f"checkpoint {number}: {exc}")
        checkpoints.append(cp)
    hashes = [bytes.fromhex(e.hash) for e in led.read()]
    new_root, holds = merkle.root(hashes), list[int]()
    for cp in checkpoints:
        if cp.size > len(hashes):
            return Consistency(len(checkpoints), holds, cp.size, f"checkpoint at seq {cp.size} is beyond this "
                               f"ledger's head (seq {len(hashes)}): events were removed")
        try:
            proof = merkle.consistency_proof(hashes, cp.size, len(hashes))
            merkle.verify_consistency(cp.size, len(hashes), cp.root, new_root, proof)
        except merkle.ProofError as exc:
            return Consistency(len(checkpoints), holds, cp.size, f"the ledger does not extend the checkpoint at "
                               f"seq {cp.size}: {exc}")
        if hashes[cp.size - 1].hex() != cp.head:
            return Consistency(len(checkpoints), holds, cp.size, f"the event at seq {cp.size} is not the "
                               f"checkpoint's chain head")
        holds.append(cp.size)
    return Consistency(len(checkpoints), holds, None, None, new_root.hex())
