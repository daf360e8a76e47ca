"""Shared concurrency budgets of judge endpoints, kept in a PostgreSQL store for all its workers.

A budget is a row of ``<schema>.judge_budgets``: (endpoint, slots). A call to that endpoint
holds one slot for as long as it runs; a slot is a session-level advisory lock on one of
``slots`` keys derived from (schema, endpoint, slot number), taken with ``pg_try_advisory_lock``
by the server function ``evalledger_take_slot`` (one round trip tries every slot) and given
back with ``pg_advisory_unlock``. So at most ``slots`` calls are out at once however many
workers on however many machines send them, and a worker that dies gives its slots back the
moment the server ends its session (a killed process's socket closes at once; a machine that
vanishes is found by the TCP keepalives set below). The budget is read at every take, so
changing it applies to every running worker.

Slots are coordination state, not history: they are never events and never exported.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any, Callable

from evalledger.ledger.persistence import LedgerError

MAX_SLOTS = 10_000   # a budget's slot numbers live in the low 16 bits of the lock keys
# Seconds of silence before the server probes a slot holder's connection, the probe interval and
# the probes lost before it ends the session (and frees its slots): a vanished machine's slots
# come back within about a minute.
KEEPALIVE = (30, 10, 3)


def table_sql(schema: str) -> str:
    """The budgets table and the function that takes a slot (created with the store's tables)."""
    return f"""
CREATE TABLE IF NOT EXISTS {schema}.judge_budgets (
    endpoint TEXT PRIMARY KEY,
    slots INTEGER NOT NULL CHECK (slots BETWEEN 1 AND {MAX_SLOTS})
);
CREATE OR REPLACE FUNCTION {schema}.evalledger_take_slot(base BIGINT, wanted TEXT, skip INTEGER[])
RETURNS INTEGER LANGUAGE plpgsql AS $$
DECLARE
    budget INTEGER;
BEGIN
    SELECT slots INTO budget FROM {schema}.judge_budgets WHERE endpoint = wanted;
    IF budget IS NULL THEN
        RETURN NULL;
    END IF;
    FOR i IN 0 .. budget - 1 LOOP
        IF NOT (i = ANY(skip)) AND pg_try_advisory_lock(base + i) THEN
            RETURN i;
        END IF;
    END LOOP;
    RETURN -1;
END $$;
"""


def slot_base(schema: str, endpoint: str) -> int:
    """The first advisory-lock key of an endpoint's slots (a signed 64-bit int, low 16 bits zero).

    Keys are one bigint (not the two-int form the sequencer uses), so the two never collide.
    """
    digest = hashlib.sha256(f"evalledger-slots\0{schema}\0{endpoint}".encode()).digest()
    return (int.from_bytes(digest[:8], "big", signed=True) >> 16) << 16


NO_BUDGET = None   # take(): the endpoint has no shared budget, call without a slot
FULL = -1          # take(): every slot is held, try again later


class CallSlots:
    """One process's slots on one store, on a connection of its own (session locks live on it)."""

    def __init__(self, connect: Callable[[], Any], schema: str):
        self.schema = schema
        self._connect = connect
        self._lock = threading.Lock()        # one connection, shared by the process's threads
        self._held: dict[str, set[int]] = {}  # endpoint -> slots this session holds
        self._conn = self._open()

    def _open(self) -> Any:
        conn = self._connect()
        idle, interval, count = KEEPALIVE
        conn.execute(f"SET tcp_keepalives_idle = {idle}; SET tcp_keepalives_interval = {interval}; "
                     f"SET tcp_keepalives_count = {count}")
        return conn

    def set_budget(self, endpoint: str, slots: int) -> None:
        """Make ``slots`` the endpoint's shared budget (0 removes it: calls are limited locally only)."""
        if not 0 <= slots <= MAX_SLOTS:
            raise LedgerError(f"a shared concurrency budget is 0 to {MAX_SLOTS} calls, not {slots}")
        with self._lock:
            if slots == 0:
                self._conn.execute(f"DELETE FROM {self.schema}.judge_budgets WHERE endpoint = %s", (endpoint,))
            else:
                self._conn.execute(f"INSERT INTO {self.schema}.judge_budgets (endpoint, slots) VALUES (%s, %s) "
                                   "ON CONFLICT (endpoint) DO UPDATE SET slots = excluded.slots", (endpoint, slots))

    def budget(self, endpoint: str) -> int | None:
        """The endpoint's shared budget, or None when it has none."""
        with self._lock:
            row = self._conn.execute(f"SELECT slots FROM {self.schema}.judge_budgets WHERE endpoint = %s",
                                     (endpoint,)).fetchone()
        return int(row[0]) if row else None

    def take(self, endpoint: str) -> int | None:
        """A free slot's number (now held by this process), FULL when none is free, NO_BUDGET when
        the endpoint has no shared budget. A dropped connection is reopened once: the server freed
        the slots it held, so they are forgotten here too."""
        with self._lock:
            try:
                return self._take(endpoint)
            except Exception as exc:  # psycopg.Error: the session is gone, and its locks with it
                if not self._reopen(exc):
                    raise
                return self._take(endpoint)

    def _take(self, endpoint: str) -> int | None:
        held = self._held.setdefault(endpoint, set())
        # A session may take an advisory lock it already holds (they count), so skip our own.
        row = self._conn.execute(f"SELECT {self.schema}.evalledger_take_slot(%s, %s, %s)",
                                 (slot_base(self.schema, endpoint), endpoint, sorted(held))).fetchone()
        slot = row[0] if row else None
        if slot is not None and slot >= 0:
            held.add(slot)
        return slot

    def _reopen(self, exc: Exception) -> bool:
        """Reopen a closed connection (True), or say the error was something else (False)."""
        if not getattr(self._conn, "closed", False):
            return False
        self._held.clear()
        try:
            self._conn = self._open()
        except LedgerError:
            raise LedgerError(f"the shared judge budget's connection dropped and cannot be reopened: {exc}") from None
        return True

    def give(self, endpoint: str, slot: int) -> None:
        """Give a slot back (a slot lost with a dropped connection is already free)."""
        with self._lock:
            held = self._held.get(endpoint, set())
            if slot not in held:
                return
            held.discard(slot)
            try:
                self._conn.execute("SELECT pg_advisory_unlock(%s)", (slot_base(self.schema, endpoint) + slot,))
            except Exception:  # psycopg.Error: the session ended, which freed the slot already
                pass

    def held(self, endpoint: str) -> int:
        """How many of the endpoint's slots this process holds now."""
        with self._lock:
            return len(self._held.get(endpoint, ()))

    def close(self) -> None:
        """Close the connection: the server frees every slot still held."""
        with self._lock:
            self._held.clear()
            self._conn.close()
