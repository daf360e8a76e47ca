"""Chain verification over stored bytes: find the first bad seq, where, and why.

Each copy (the SQLite table, the JSONL file or mirror) is checked on its own: gapless seq,
``prev_hash`` equal to the previous hash, and ``hash = sha256(prev_hash + canonical bytes)``
recomputed from the stored bytes. When a home has both, the mirror must equal SQLite line for
line; equal lines are hashed once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from ledger.envelope import GENESIS_HASH, EnvelopeError, canonical_bytes, line_bytes, split_line
from ledger.mirror import line_seq
from ledger.persistence import Head


@dataclass(frozen=True)
class Problem:
    """The first thing wrong in one copy of the ledger."""

    seq: int
    source: str
    reason: str

    def __str__(self) -> str:
        return f"seq {self.seq}: {self.source}: {self.reason}"


@dataclass
class VerifyReport:
    """What ``verify`` found: the head it verified, how many events, and any problems."""

    head: Head
    count: int
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


class _Chain:
    """Running state of one copy: the next seq, the previous hash, the first problem."""

    def __init__(self, source: str):
        self.source = source
        self.seq = 0
        self.prev = GENESIS_HASH
        self.problem: Problem | None = None
        self.hashes_at: dict[int, str] = {}

    def fail(self, reason: str, seq: int | None = None) -> None:
        if self.problem is None:
            self.problem = Problem(self.seq + 1 if seq is None else seq, self.source, reason)

    def check(self, seq: int, canonical: bytes, prev_hash: str, hash: str, watch: int | None) -> bool:
        """Check one event; returns False (recording the problem) when it breaks the chain."""
        expected = self.seq + 1
        if seq != expected:
            self.fail(f"holds seq {seq} where seq {expected} should be (an event was deleted, "
                      "inserted or moved)", expected)
            return False
        if prev_hash != self.prev:
            self.fail("prev_hash does not match the hash of the event before it "
                      "(an event before it was changed, deleted, inserted or moved)", seq)
            return False
        if hashlib.sha256(prev_hash.encode("ascii") + canonical).hexdigest() != hash:
            self.fail("hash does not match the stored bytes (the event was edited)", seq)
            return False
        self.seq, self.prev = seq, hash
        if watch == seq:
            self.hashes_at[seq] = hash
        return True


def _sqlite_events(rows: Iterable[tuple]) -> Iterator[tuple[int, bytes, str, str, bytes]]:
    for row in rows:
        canonical = canonical_bytes(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7])
        yield row[0], canonical, row[8], row[9], line_bytes(canonical, row[8], row[9])


def _check_line(chain: _Chain, line: bytes, watch: int | None) -> bool:
    if not line.endswith(b"\n"):
        chain.fail("the file ends in the middle of a line (truncated, or a write was interrupted)")
        return False
    try:
        canonical, prev_hash, hash = split_line(line)
        seq = line_seq(line)
    except (EnvelopeError, ValueError) as exc:
        chain.fail(f"the line is not an event ({exc})")
        return False
    return chain.check(seq, canonical, prev_hash, hash, watch)


def verify_lines(lines: Iterable[bytes], source: str, expect_head: Head | None = None) -> VerifyReport:
    """Verify a JSONL ledger given as raw lines."""
    chain = _Chain(source)
    watch = expect_head.seq if expect_head else None
    for line in lines:
        if not _check_line(chain, line, watch):
            break
    return _report([chain], chain, expect_head)


def verify_sqlite(rows: Iterable[tuple], source: str, mirror_lines: Iterable[bytes] | None = None,
                  mirror_source: str = "", expect_head: Head | None = None) -> VerifyReport:
    """Verify SQLite rows and, when given, the mirror's lines alongside them."""
    store = _Chain(source)
    mirror = _Chain(mirror_source) if mirror_lines is not None else None
    watch = expect_head.seq if expect_head else None
    mirror_iter = iter(mirror_lines) if mirror_lines is not None else None
    for seq, canonical, prev_hash, hash, line in _sqlite_events(rows):
        store_ok = store.problem is None and store.check(seq, canonical, prev_hash, hash, watch)
        if mirror is not None and mirror.problem is None:
            mline = next(mirror_iter, None)
            if mline is None:
                mirror.fail(f"ends at seq {mirror.seq}; the SQLite store goes on (the mirror is truncated)")
            elif store_ok and mline == line:
                mirror.seq, mirror.prev = seq, hash  # same bytes as a verified row: hashed once
            elif _check_line(mirror, mline, None):
                mirror.fail("differs from the SQLite store at this seq", mirror.seq)
        if store.problem is not None and (mirror is None or mirror.problem is not None):
            break
    if mirror is not None and mirror.problem is None and store.problem is None:
        extra = next(mirror_iter, None)
        if extra is not None:
            mirror.fail(f"has events after seq {store.seq}, where the SQLite store ends")
    chains = [store] + ([mirror] if mirror is not None else [])
    return _report(chains, store, expect_head)


def _report(chains: list[_Chain], main: _Chain, expect_head: Head | None) -> VerifyReport:
    problems = [c.problem for c in chains if c.problem is not None]
    if expect_head is not None and main.problem is None:
        if main.seq < expect_head.seq:
            problems.append(Problem(main.seq + 1, main.source,
                                    f"the ledger ends at seq {main.seq}, but head {expect_head.seq} was "
                                    "published (events were truncated)"))
        elif main.hashes_at.get(expect_head.seq) != expect_head.hash:
            problems.append(Problem(expect_head.seq, main.source,
                                    f"hash is {main.hashes_at.get(expect_head.seq)}, but the published head "
                                    f"says {expect_head.hash} (history was rewritten)"))
    return VerifyReport(Head(main.seq, main.prev), main.seq, problems)
