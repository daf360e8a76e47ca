"""Leases on pending work, so many workers sharing one PostgreSQL store split the cases between them.

A lease is a row of ``<schema>.claims``: (work, owner, expires_at). A worker claims free or
expired rows with ``FOR UPDATE SKIP LOCKED`` (claimers never wait on each other), a heartbeat
thread extends the leases it holds, and a finished case's lease is deleted. A worker that dies
stops heartbeating: its leases expire and another worker claims the cases.

A lease only spreads the work: correctness rests on the ledger. Outputs have deterministic ids,
so a case judged twice (a lease that expired under a slow worker) is still recorded once.
Leases are coordination state, not history: they are never events and never exported.
"""

from __future__ import annotations

import threading
from typing import Any, Iterable

from evalledger.ledger.persistence import LedgerError

DEFAULT_LEASE_SECONDS = 30.0


def table_sql(schema: str) -> str:
    """The claims table (created by the store under its sequencer lock: CREATE IF NOT EXISTS races)."""
    return f"""
CREATE TABLE IF NOT EXISTS {schema}.claims (
    work TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
"""


class Leases:
    """One worker's leases on one store, on a connection of its own, heartbeated in a thread."""

    def __init__(self, connect: Any, schema: str, owner: str, seconds: float = DEFAULT_LEASE_SECONDS):
        if seconds <= 0:
            raise LedgerError(f"a lease must last more than 0 seconds, not {seconds}")
        self.schema = schema
        self.owner = owner
        self.seconds = float(seconds)
        self.held: set[str] = set()
        self._lock = threading.Lock()
        self._conn = connect()   # the claims table exists: the store creates it when opened for writing
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, name=f"lease-heartbeat-{owner}", daemon=True)
        self._beat.start()

    def claim(self, works: Iterable[str], limit: int) -> list[str]:
        """Claim up to ``limit`` of ``works`` that nobody holds (or whose lease expired); returns them."""
        works = [w for w in dict.fromkeys(works) if w not in self.held]
        if not works or limit < 1:
            return []
        claims = f"{self.schema}.claims"
        with self._lock, self._conn.transaction():
            self._conn.execute(f"INSERT INTO {claims} (work, owner, expires_at) "
                               "SELECT unnest(%s::text[]), '', '-infinity' ON CONFLICT (work) DO NOTHING",
                               (sorted(works),))  # one order for every worker: no deadlock between inserts
            rows = self._conn.execute(
                f"UPDATE {claims} SET owner = %s, expires_at = clock_timestamp() + make_interval(secs => %s) "
                f"WHERE work IN (SELECT work FROM {claims} WHERE work = ANY(%s) AND expires_at < clock_timestamp() "
                "ORDER BY work LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING work",
                (self.owner, self.seconds, works, limit)).fetchall()
        got = [row[0] for row in rows]
        self.held.update(got)
        order = {w: i for i, w in enumerate(works)}
        return sorted(got, key=order.__getitem__)

    def release(self, work: str) -> None:
        """Give up a lease (the case is finished: its outputs are committed)."""
        with self._lock:
            self.held.discard(work)
            self._conn.execute(f"DELETE FROM {self.schema}.claims WHERE work = %s AND owner = %s",
                               (work, self.owner))

    def renew(self) -> int:
        """Extend every lease this worker holds; returns how many it still holds."""
        with self._lock:
            held = list(self.held)
            if not held:
                return 0
            rows = self._conn.execute(
                f"UPDATE {self.schema}.claims SET expires_at = clock_timestamp() + make_interval(secs => %s) "
                "WHERE owner = %s AND work = ANY(%s) RETURNING work", (self.seconds, self.owner, held)).fetchall()
        return len(rows)

    def _heartbeat(self) -> None:
        """Renew the leases every third of their length until closed (a lost beat is retried)."""
        while not self._stop.wait(self.seconds / 3):
            try:
                self.renew()
            except Exception:  # a dropped connection: the leases lapse and others take the cases
                pass

    def close(self) -> None:
        """Stop heartbeating, release what is still held, close the connection."""
        self._stop.set()
        self._beat.join(timeout=5)
        with self._lock:
            try:
                if self.held:
                    self._conn.execute(f"DELETE FROM {self.schema}.claims WHERE owner = %s AND work = ANY(%s)",
                                       (self.owner, list(self.held)))
            finally:
                self.held.clear()
                self._conn.close()
