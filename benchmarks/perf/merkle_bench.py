"""What the Merkle tree costs, against baselines measured in the same run.

Run:  python benchmarks/perf/merkle_bench.py [EVENTS]     (default 1,000,000; CI runs a few thousand)

1. Root vs chain verify: the RFC 6962 root over every event hash of a home (one streamed pass,
   ``checkpoint.tree_roots``) against ``Ledger.verify()`` of the same home. Target: <= 2x.
2. Keeping the tree while appending: events appended in batches of 1,000 with the frontier fed
   each new hash (``merkle.Frontier.append``, what an append-time tree costs) against the same
   appends without it. Target: at most 20% slower (ratio >= 0.8).
3. Proof size: hashes and bytes of one event's inclusion proof at this size (O(log n)).

Exit 0 when both targets are met, 1 otherwise.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from evalledger import ledger
from evalledger.ledger import merkle
from evalledger.ledger.checkpoint import tree_roots

ROOT_TARGET = 2.0
APPEND_TARGET = 0.8


def fill(home: Path, n: int, frontier: merkle.Frontier | None) -> float:
    """Append ``n`` note events in batches of 1,000; CPU seconds (the frontier fed when given)."""
    start = time.process_time()
    with ledger.open_ledger(home) as led:
        for lo in range(0, n, 1000):
            stored = led.append([ledger.NewEvent(f"case:c{i % 997}", "note.added", {"text": f"note {i}"})
                                 for i in range(lo, min(n, lo + 1000))])
            if frontier is not None:
                for event in stored:
                    frontier.append(bytes.fromhex(event.hash))
    return time.process_time() - start


def main(argv: list[str]) -> int:
    """Print each figure with its target; exit 1 when one is missed."""
    n = int(argv[0]) if argv else 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        plain = fill(Path(tmp) / "plain", n, None)
        frontier = merkle.Frontier()
        with_tree = fill(Path(tmp) / "tree", n, frontier)
        append_ratio = plain / with_tree
        with ledger.open_ledger(Path(tmp) / "tree", readonly=True) as led:
            start = time.process_time()
            report = led.verify()
            verify_s = time.process_time() - start
            start = time.process_time()
            root = tree_roots(led, {n})[n]
            root_s = time.process_time() - start
            assert report.ok and root == frontier.root()
            hashes = [bytes.fromhex(e.hash) for e in led.read()]
        proof = merkle.inclusion_proof(hashes, n // 2, n)
    root_ratio = root_s / verify_s
    print(f"events: {n}")
    print(f"merkle root {root_s:.2f} s CPU vs chain verify {verify_s:.2f} s: {root_ratio:.2f}x "
          f"(target <= {ROOT_TARGET}x) {'ok' if root_ratio <= ROOT_TARGET else 'MISSED'}")
    print(f"append keeping the tree: {append_ratio:.2f} of plain appends ({with_tree:.2f} s vs {plain:.2f} s CPU; "
          f"target >= {APPEND_TARGET}) {'ok' if append_ratio >= APPEND_TARGET else 'MISSED'}")
    print(f"inclusion proof at {n} events: {len(proof)} hashes, {len(proof) * 64} bytes as hex")
    return 0 if root_ratio <= ROOT_TARGET and append_ratio >= APPEND_TARGET else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
