"""Chain verification over stored bytes: find the first bad seq, where, and why.

Each copy (the SQLite table, the JSONL file or mirror) is checked on its own: gapless seq,
``prev_hash`` equal to the previous hash, and ``hash = sha256(prev_hash + canonical bytes)``
recomputed from the stored bytes (a JSONL line is sliced, never re-serialised). When a home has
both, the mirror must equal SQLite line for line; equal lines are hashed once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from hashlib import sha256
from typing import Any, Iterable, Iterator

from evalledger.ledger.envelope import GENESIS_HASH, EnvelopeError, canonical_bytes, line_seq, split_line
from evalledger.ledger.merkle import Frontier
from evalledger.ledger.persistence import Head, TreeState

_SUFFIX = len(b',"prev_hash":"') + 64 + len(b'","hash":"') + 64 + len(b'"}\n')

REPAIR_HINT = "'evalledger verify --repair' (or any command that writes) completes it"


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
    """What ``verify`` found: the head it verified, how many events, problems and warnings."""

    head: Head
    count: int
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    tree_checked: bool = False   # the kept Merkle tree was compared with one recomputed in the same pass

    @property
    def ok(self) -> bool:
        return not self.problems


class _Chain:
    """Running state of one copy: the last good seq and hash, the first problem."""

    def __init__(self, source: str, watch: int | None):
        self.source = source
        self.seq = 0
        self.prev = GENESIS_HASH
        self.problem: Problem | None = None
        self.watch = watch  # the seq of a published head, whose hash is kept
        # seq 0 is the empty ledger, whose head (as verify prints it) is the genesis hash
        self.watched: str | None = GENESIS_HASH if watch == 0 else None
        # with a tree to recompute: the verified hashes not yet folded into it (a chunk at a time)
        self.tree: Frontier | None = None
        self.leaves: list[str] | None = None
        self.snapshot_at = -1                      # the recomputed tree is copied at this size
        self.snapshot: Frontier | None = None

    def fold_leaves(self) -> None:
        """Fold the verified hashes collected so far into the tree being recomputed, keeping a copy
        of it at ``snapshot_at`` (the size of the tree the store kept) on the way."""
        if self.tree is None or not self.leaves:
            return
        tree, leaves = self.tree, self.leaves
        cut = self.snapshot_at - tree.size
        if 0 <= cut <= len(leaves) and self.snapshot is None:
            tree.extend(map(bytes.fromhex, leaves[:cut]))
            self.snapshot = tree.copy()
            leaves = leaves[cut:]
        tree.extend(map(bytes.fromhex, leaves))
        self.leaves.clear()

    def fail(self, reason: str, seq: int | None = None) -> None:
        if self.problem is None:
            self.problem = Problem(self.seq + 1 if seq is None else seq, self.source, reason)

    def check(self, seq: int, canonical: bytes, prev_hash: str, hash: str) -> bool:
        """Check one event; returns False (recording the problem) when it breaks the chain."""
        expected = self.seq + 1
        if seq != expected:
            what = "deleted or moved" if seq > expected else "inserted, duplicated or moved"
            self.fail(f"holds seq {seq} where seq {expected} should be (an event was {what})", expected)
            return False
        if prev_hash != self.prev:
            self.fail("prev_hash does not match the hash of the event before it "
                      "(an event was inserted, deleted or moved here)", seq)
            return False
        if hashlib.sha256(prev_hash.encode("ascii") + canonical).hexdigest() != hash:
            self.fail("hash does not match the stored bytes (the event was edited)", seq)
            return False
        self.advance(seq, hash)
        return True

    def advance(self, seq: int, hash: str) -> None:
        self.seq, self.prev = seq, hash
        if seq == self.watch:
            self.watched = hash
        if self.leaves is not None:
            self.leaves.append(hash)


def _check_line(chain: _Chain, line: bytes) -> bool:
    """Check one stored JSONL line by slicing it (no parse of the payload)."""
    if not line.endswith(b"\n"):
        chain.fail("the file ends in the middle of a line: a write was interrupted (never acknowledged) "
                   "or the file was truncated; 'evalledger verify --repair' cuts the torn line (and "
                   "completes a mirror from SQLite)")
        return False
    try:
        canonical, prev_hash, hash = split_line(line)
        seq = line_seq(line)
    except (EnvelopeError, ValueError) as exc:
        chain.fail(f"the line is not an event ({exc})")
        return False
    return chain.check(seq, canonical, prev_hash, hash)


def verify_lines(lines: Iterable[bytes], source: str, expect_head: Head | None = None,
                 pending: str | None = None, limit: int | None = None, torn: bool = False) -> VerifyReport:
    """Verify a JSONL ledger given as raw lines.

    ``pending``: a batch file waiting to be rolled forward. ``limit``: stop after this seq (the
    last complete line when the snapshot was taken; later lines are a writer's, not damage), and
    ``torn``: whether the file then ended in the middle of a line.
    """
    chain = _Chain(source, expect_head.seq if expect_head else None)
    remaining = iter(lines)
    while chain.seq != limit:
        odd = _fast_lines(remaining, chain, limit)
        if odd is None or not _check_line(chain, odd):
            break  # the end, or the first problem (the careful check names it)
    if torn and chain.problem is None:
        _check_line(chain, b"")  # the torn tail the snapshot saw: reported as a cut line
    problems = [chain.problem] if chain.problem else []
    if pending:
        problems.append(Problem(chain.seq + 1, pending, "a batch whose writer was interrupted waits here "
                                f"to be appended; {REPAIR_HINT}"))
    return _report(chain, problems, expect_head)


_PREV_KEY, _HASH_KEY, _LINE_END = b',"prev_hash":"', b'","hash":"', b'"}\n'


def _fast_lines(lines: Iterator[bytes], chain: _Chain, limit: int | None = None) -> bytes | None:
    """Check lines while they are plainly right, slicing only; return the first line that is not.

    The careful ``_check_line`` then decides about that line (and says what is wrong). Keeping
    this loop to a dozen C calls a line is what holds verify near the cost of hashing the file.
    """
    seq, prev = chain.seq, chain.prev.encode("ascii")
    stop = _next_stop(seq, chain.watch, limit)  # one comparison a line covers both
    for line in lines:
        cut = len(line) - _SUFFIX
        hasher = sha256(prev)
        hasher.update(line[:cut])
        hasher.update(b"}")
        digest = hasher.hexdigest().encode()
        # A matching suffix means the line is long enough; a line without ',"seq":' (rfind -1)
        # is looked at from byte 6, inside '{"data":', where no seq digits can be.
        if (line.endswith(b"".join((_PREV_KEY, prev, _HASH_KEY, digest, _LINE_END)))
                and line.startswith(b"%d," % (seq + 1), line.rfind(b',"seq":', 0, cut) + 7)):
            seq, prev = seq + 1, digest
            if seq == stop:
                if seq == chain.watch:
                    chain.watched = digest.decode()
                if seq == limit:
                    break
                stop = _next_stop(seq, chain.watch, limit)
            continue
        chain.seq, chain.prev = seq, prev.decode()
        return line
    chain.seq, chain.prev = seq, prev.decode()
    return None


def _next_stop(seq: int, watch: int | None, limit: int | None) -> int | None:
    """The next seq after ``seq`` where the fast loop must look up from its work."""
    ahead = [n for n in (watch, limit) if n is not None and n > seq]
    return min(ahead) if ahead else None


_OPENING = '{"data":%s,"id":"%s","meta":%s,"schema":%d,"seq":%d,"stream":"%s","type":"%s","version":%d'


def _fast_rows(rows: Iterator[tuple[Any, ...]], mirror_lines: Iterator[bytes] | None, store: _Chain,
               mirror: _Chain | None) -> tuple[tuple[Any, ...], bytes | None] | None:
    """Check SQLite rows (and the mirror's lines) while they are plainly right.

    Returns the first row that is not, with the mirror line read for it, for the careful path;
    None at the end. The canonical bytes are formatted directly when id, stream and type need
    no JSON escaping (always, unless someone wrote the row by hand; then orjson decides).
    """
    seq, prev = store.seq, store.prev
    watch = store.watch
    leaves = store.leaves
    for row in rows:
        mline = next(mirror_lines, None) if mirror_lines is not None else None
        try:
            rseq, id, stream, version, type, schema, data, meta, prev_hash, hash = row
            names = id + stream + type
            if '"' in names or "\\" in names or not names.isprintable():
                raise TypeError("needs escaping")
            # the canonical bytes without their closing brace: the mirror line goes on from there
            opening = (_OPENING % (data, id, meta, schema, rseq, stream, type, version)).encode()
            good = (rseq == seq + 1 and prev_hash == prev
                    and sha256(b"%b%b}" % (prev_hash.encode(), opening)).hexdigest() == hash
                    and (mirror_lines is None or (
                        mline is not None and len(mline) == len(opening) + _SUFFIX and mline.startswith(opening)
                        and mline.endswith(b"%b%b%b%b%b" % (_PREV_KEY, prev_hash.encode(), _HASH_KEY,
                                                            hash.encode(), _LINE_END)))))
        except (TypeError, ValueError, AttributeError):
            good = False
        if not good:
            store.seq, store.prev = seq, prev
            if mirror is not None:
                mirror.seq, mirror.prev = seq, prev
            return row, mline
        seq, prev = rseq, hash
        if seq == watch:
            store.watched = hash
        if leaves is not None:   # the tree is recomputed in this same pass, 1,024 leaves at a time
            leaves.append(hash)
            if len(leaves) >= 1024:
                store.fold_leaves()
    store.seq, store.prev = seq, prev
    if mirror is not None:
        mirror.seq, mirror.prev = seq, prev
    return None


def verify_sqlite(rows: Iterable[tuple[Any, ...]], source: str, mirror_lines: Iterable[bytes] | None = None,
                  mirror_source: str = "", expect_head: Head | None = None,
                  mirror_size: int | None = None, tree: TreeState | None = None) -> VerifyReport:
    """Verify SQLite rows and, when given, the mirror's lines alongside them.

    ``mirror_size``: the mirror's size at the snapshot, when ``mirror_lines`` is the open file;
    a line that starts past it was written after the snapshot and is not an extra line.
    ``tree``: the Merkle tree the store kept at the same snapshot (its size the rows' last seq);
    it is recomputed from the verified hashes in the same pass and compared (``tree_checked``).
    """
    watch = expect_head.seq if expect_head else None
    store = _Chain(source, watch)
    if tree is not None:
        store.tree, store.leaves, store.snapshot_at = Frontier(), [], tree.size
        if tree.size == 0:
            store.snapshot = Frontier()
    mirror = _Chain(mirror_source, None) if mirror_lines is not None else None
    mirror_iter = iter(mirror_lines) if mirror_lines is not None else None
    rows = iter(rows)
    while True:
        odd = _fast_rows(rows, mirror_iter, store, mirror)
        if odd is None:
            break
        _careful_row(*odd, store, mirror)
        if store.problem is not None or (mirror is not None and mirror.problem is not None):
            break
    for row in rows:  # after the first problem, the copy still unharmed is checked carefully to its end
        mline = next(mirror_iter, None) if mirror_iter is not None and mirror is not None \
            and mirror.problem is None else None
        if not _careful_row(row, mline, store, mirror):
            break
    if mirror_iter is not None and mirror is not None and mirror.problem is None and store.problem is None:
        extra = next(mirror_iter, None)
        if extra is not None and mirror_size is not None:  # mirror_lines is then the open file
            extra = extra if mirror_iter.tell() - len(extra) < mirror_size else None  # type: ignore[attr-defined]
        if extra is not None:
            store.fail(f"ends at seq {store.seq}, but the mirror {mirror_source} goes on: events were "
                       "cut off the end of the SQLite store (truncated), or lines were added to the mirror")
    problems = [c.problem for c in (store, mirror) if c is not None and c.problem is not None]
    report = _report(store, problems, expect_head)
    if tree is not None and store.tree is not None and report.ok:
        store.fold_leaves()
    if tree is not None and store.snapshot is not None and report.ok:
        problem = compare_tree(tree, store.snapshot)
        if problem is not None:
            report.problems.append(problem)
        report.tree_checked = True
    return report


def _careful_row(row: tuple[Any, ...], mline: bytes | None, store: _Chain, mirror: _Chain | None) -> bool:
    """Check one row (and its mirror line) step by step; False once both copies have a problem."""
    try:
        seq, prev_hash, hash = row[0], row[8], row[9]
        canonical = canonical_bytes(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7])
    except (TypeError, ValueError) as exc:
        store.fail(f"the row is not an event ({exc})")
        canonical, seq, prev_hash, hash = b"", store.seq + 1, "", ""
    store_ok = store.problem is None and bool(canonical) and store.check(seq, canonical, prev_hash, hash)
    if mirror is not None and mirror.problem is None:
        _mirror_step(mirror, mline, store, store_ok, canonical, seq, prev_hash, hash)
    return store.problem is None or (mirror is not None and mirror.problem is None)


def _mirror_step(mirror: _Chain, mline: bytes | None, store: _Chain, store_ok: bool, canonical: bytes,
                 seq: int, prev_hash: str, hash: str) -> None:
    """Check the mirror's line for ``seq`` against the SQLite row just checked."""
    if mline is None:
        mirror.fail(f"ends at seq {mirror.seq}, while the SQLite store goes on: a truncated mirror or a crash "
                    f"between commit and mirror write (the two look the same); nothing is lost, SQLite is "
                    f"the store; {REPAIR_HINT}")
        return
    same = (len(mline) == len(canonical) + _SUFFIX - 1 and mline.startswith(canonical[:-1])
            and mline.endswith(b',"prev_hash":"%s","hash":"%s"}\n' % (prev_hash.encode(), hash.encode())))
    if store_ok and same:
        mirror.advance(seq, hash)  # the same bytes as a verified row: hashed once
    elif _check_line(mirror, mline):
        mirror.fail("differs from the SQLite store at this seq", mirror.seq)


def _report(main: _Chain, problems: list[Problem], expect_head: Head | None) -> VerifyReport:
    if expect_head is not None and main.problem is None:
        if main.seq < expect_head.seq:
            problems.append(Problem(main.seq + 1, main.source,
                                    f"the ledger ends at seq {main.seq}, but head {expect_head.seq} was "
                                    "published: events were cut off the end (truncated)"))
        elif main.watched != expect_head.hash:
            problems.append(Problem(expect_head.seq, main.source,
                                    f"hash is {main.watched}, but the published head says "
                                    f"{expect_head.hash}: history up to the published head was rewritten"))
    return VerifyReport(Head(main.seq, main.prev), main.seq, problems)


def tree_problem(state: TreeState, leaves: Iterable[bytes]) -> Problem | None:
    """Compare the Merkle tree a store keeps with one recomputed from its event hashes (``leaves``,
    seq 1..state.size): the first perfect subtree that differs names the seqs it covers."""
    recomputed = Frontier()
    recomputed.extend(leaves)
    return compare_tree(state, recomputed)


def compare_tree(state: TreeState, recomputed: Frontier) -> Problem | None:
    """The kept tree ``state`` against ``recomputed`` from the events (seq 1..its size)."""
    if recomputed.size < state.size:
        return Problem(recomputed.size + 1, state.where,
                       f"the Merkle tree kept covers {state.size} events, but the ledger holds {recomputed.size}: "
                       "the tree state was forged, or copied from another ledger")
    try:
        kept = Frontier.restore(state.size, state.frontier)
    except ValueError as exc:
        return Problem(1, state.where, f"the Merkle tree kept is not a tree of {state.size} events ({exc})")
    for (first, count, mine), (_, _, theirs) in zip(kept.nodes(), recomputed.nodes()):
        if mine != theirs:
            return Problem(first + 1, state.where,
                           f"the Merkle tree kept for seq {first + 1}..{first + count} does not match the hashes of "
                           "those events, whose chain verifies: the tree state was edited")
    return None
