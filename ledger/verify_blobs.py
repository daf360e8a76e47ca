"""Verification of the blob store: every blob an event refers to is there (in the store, and in
the mirror's blob file) and hashes to its key.

A blob's key is the sha256 of its content and the event's stored bytes (references included) are
in the hash chain, so a blob that is missing or altered is reported at the first event (seq) that
refers to it.
"""

from __future__ import annotations

from typing import Any, Iterator

from evalledger.ledger.blobs import BlobError, BlobReader, has_markers, raw_refs
from evalledger.ledger.envelope import EnvelopeError
from evalledger.ledger.verify import Problem


def checked_blobs(rows: Iterator[tuple[Any, ...]], readers: list[BlobReader],
                  problems: list[Problem]) -> Iterator[tuple[Any, ...]]:
    """The rows unchanged; each blob their data refers to (and every blob inside it) is checked on
    the way in every copy (``readers``: the store, the mirror's blob file), and a Problem recorded,
    once per blob and copy, at the first seq that refers to a bad one."""
    good: list[set[str]] = [set() for _ in readers]
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
