"""Verification of the blob store: every blob an event refers to is there (in the store, and in
the mirror's blob file) and hashes to its key.

A blob's key is the sha256 of its content and the event's stored bytes (references included) are
in the hash chain, so a blob that is missing or altered is reported at the first event (seq) that
refers to it.
"""

from __future__ import annotations

from itertools import chain
from typing import Any, Iterator

from evalledger.ledger.blob_reader import BlobReader
from evalledger.ledger.blobs import BlobError, has_markers, raw_refs
from evalledger.ledger.envelope import EnvelopeError
from evalledger.ledger.paging import row_chunks
from evalledger.ledger.verify import Problem

#: blobs a verify remembers as checked, per copy (twice this at most): a blob used again and again
#: (a shared system prompt, a response schema) is not read again, and memory does not grow with the
#: number of distinct blobs in the ledger.
RECENT_BLOBS = 16384


class RecentKeys(set[str]):
    """The keys added or found recently: at most ``most`` in this set, and the ``most`` before them
    kept aside (a key found there is kept again). Older keys are forgotten, which only costs a
    blob checked again when a later event refers to it."""

    def __init__(self, most: int = RECENT_BLOBS):
        super().__init__()
        self.most = most
        self._before: set[str] = set()

    def __contains__(self, key: object) -> bool:
        if set.__contains__(self, key):
            return True
        if key in self._before:
            self.add(key)   # only str keys are ever added (``key in self._before``)
            return True
        return False

    def add(self, key: str) -> None:
        """Remember ``key``; when ``most`` are remembered, they are set aside and the set starts again."""
        if len(self) >= self.most:
            self._before = set(self)
            self.clear()
        super().add(key)

    def remembered(self) -> int:
        """How many keys are remembered (this set and those set aside)."""
        return len(self) + len(self._before)


def checked_blobs(rows: Iterator[tuple[Any, ...]], readers: list[BlobReader],
                  problems: list[Problem]) -> Iterator[tuple[Any, ...]]:
    """The rows unchanged; each blob their data refers to (and every blob inside it) is checked on
    the way in every copy (``readers``: the store, the mirror's blob file), and a Problem recorded,
    once per blob and copy, at the first seq that refers to a bad one. Only the most recently
    checked blobs are remembered as good (``RecentKeys``): memory stays flat however long the ledger.

    The rows are taken a chunk at a time (at most ``_CHUNK`` rows and about ``PAGE_BYTES`` of
    payload, so large events are held a few at a time) and the chunk's rows that refer to no blob
    are passed on by C iteration (a generator step a row cost 2-4% of a home's verify)."""
    good: list[set[str]] = [RecentKeys() for _ in readers]
    bad: set[tuple[int, str]] = set()

    def checked(chunk: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        # "$" first (a memchr), as has_markers does: most rows have none
        for row in [row for row in chunk if row[6].__class__ is not str or "$" in row[6]]:
            if _may_refer(row[6]):
                _check_row(row, readers, good, bad, problems)
        return chunk

    return chain.from_iterable(map(checked, row_chunks(rows, _CHUNK)))   # sized like a read's pages


_CHUNK = 256


def _may_refer(data: Any) -> bool:
    """True when stored data may hold a blob reference (text or bytes with a marker)."""
    return isinstance(data, (str, bytes)) and has_markers(data)


def _check_row(row: tuple[Any, ...], readers: list[BlobReader], good: list[set[str]],
               bad: set[tuple[int, str]], problems: list[Problem]) -> None:
    """Check every blob one row refers to, in every copy, recording each bad one once a copy."""
    try:
        keys = raw_refs(row[6])
    except (EnvelopeError, ValueError) as exc:
        problems.append(Problem(row[0], readers[0].where, f"the event's blob references are not readable "
                                                          f"({exc})"))
        return
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
