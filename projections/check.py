"""``verify --projections``: fold the events afresh, aside, and compare with the stored read models.

The fresh fold goes into a temporary file and stops at the seq the stored models say they were
folded up to, so models that are merely behind the head (reports not refreshed yet) compare
equal; anything else that differs (a row edited, added or removed in the ``proj_*`` tables) is
named: the table, the row's key and the first column that differs.
"""

from __future__ import annotations

import os
import tempfile
from itertools import zip_longest

from evalledger.ledger import Head
from evalledger.projections.catch_up import update
from evalledger.projections.store import KEYED_TABLES, ReadModelStore


def compare_read_models(led) -> list[str]:
    """What is wrong with the stored read models: [] when they equal a fresh fold of the events."""
    stored = ReadModelStore(led)
    try:
        seq, hash = stored.position()
        problems = []
        at = next(led.read(from_seq=seq, to_seq=seq), None) if seq else None
        if seq and (at is None or at.hash != hash):
            return [f"proj_position: the read models say they were folded up to seq {seq} {hash}, which the "
                    "ledger does not hold"]
        altered = stored.stored_digest() not in (None, stored.contents_digest())
        with tempfile.TemporaryDirectory(prefix="evalledger-verify-") as folder:
            fresh = ReadModelStore(led, path=os.path.join(folder, "fresh.db"))
            try:
                update(led, fresh, fresh=True, upto=Head(seq, hash))
                difference = first_difference(stored, fresh)
            finally:
                fresh.close()
        if difference:
            problems.append(difference)
        if altered:
            problems.append(f"{stored.path}: the read models do not match the digest stored when they were written")
        return problems
    finally:
        stored.close()


def first_difference(stored: ReadModelStore, fresh: ReadModelStore) -> str | None:
    """The first row, in table and key order, where the stored models and a fresh fold differ."""
    for table, key in KEYED_TABLES:
        columns = [d[1] for d in stored.conn.execute(f"PRAGMA table_info({table})")]
        for mine, theirs in zip_longest(stored.rows(table, key), fresh.rows(table, key)):
            if mine == theirs:
                continue
            if theirs is None or (mine is not None and mine[0] < theirs[0]):
                return f"{table} row {key}={mine[0]!r}: stored, but no such row comes from the events"
            if mine is None or theirs[0] < mine[0]:
                return f"{table} row {key}={theirs[0]!r}: comes from the events, but is not stored"
            column = next(c for c, a, b in zip(columns, mine, theirs, strict=True) if a != b)
            a, b = dict(zip(columns, mine, strict=True))[column], dict(zip(columns, theirs, strict=True))[column]
            return (f"{table} row {key}={mine[0]!r}: column {column} is {_short(a)} in the stored read models, "
                    f"{_short(b)} folded from the events")
    return None


def _short(value) -> str:
    """A value for a message: its repr, cut to 120 characters."""
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
