"""Verification of the blob store: every blob an event refers to is there (in the store, and in
the mirror's blob file) and hashes to its key.

A blob's key is the sha256 of its content and the event's stored bytes (references included) are
in the hash chain, so a blob that is missing or altered is reported at the first event (seq) that
refers to it.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Iterable, Iterator

from evalledger.ledger.blobs import BlobError, BlobReader, has_markers, raw_refs
from evalledger.ledger.envelope import EnvelopeError
from evalledger.ledger.verify import Problem

#: blobs a verify remembers as checked, per copy: a blob used again soon after (a shared system
#: prompt, a response schema) is not read again, and memory does not grow with the ledger.
RECENT_BLOBS = 4096


class RecentKeys(set[str]):
    """A set of the keys added most recently (at most ``most``; the oldest is forgotten first).

    Forgetting a checked blob's key only costs a check again if a later event refers to it.
    """

    def __init__(self, most: int = RECENT_BLOBS, keys: Iterable[str] = ()):
        super().__init__()
        self.most = most
        self._order: deque[str] = deque()
        for key in keys:
            self.add(key)

    def add(self, key: str) -> None:
        """Remember ``key``, forgetting the oldest key when more than ``most`` are remembered."""
        if key in self:
            return
        super().add(key)
        self._order.append(key)
        if len(self._order) > self.most:
            self.discard(self._order.popleft())


def checked_blobs(rows: Iterator[tuple[Any, ...]], readers: list[BlobReader],
                  problems: list[Problem]) -> Iterator[tuple[Any, ...]]:
    """The rows unchanged; each blob their data refers to (and every blob inside it) is checked on
    the way in every copy (``readers``: the store, the mirror's blob file), and a Problem recorded,
    once per blob and copy, at the first seq that refers to a bad one. Only the most recently
    checked blobs are remembered as good (``RecentKeys``): memory stays flat however long the ledger."""
    good: list[set[str]] = [RecentKeys() for _ in readers]
    bad: set[tuple[int, str]] = set()
    for row in rows:
        data = row[6]
        if isinstance(data, (str, bytes)) and has_markers(data):
            try:
                keys = raw_refs(data)
            except (EnvelopeError, ValueError) as exc:
                problems.append(Problem(row[0], readers[0].where, f"the event's blob references are not readable "
                                                                  f"({exc})"))
                keys = []
            for key in keys:
                for n, reader in enumerate(readers):
                    if key in good[n] or (n, key) in bad:
                        continue
                    try:
                        reader.check(key, good[n])
                    except BlobError as exc:
                        bad.add((n, key))
                        problems.append(Problem(row[0], reader.where, f"the event refers to a blob that is not "
                                                                      f"right: {exc}"))
        yield row
