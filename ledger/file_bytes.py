"""Ingested files' bytes, content-addressed (by sha256), in a PostgreSQL store's ``files`` table.

A worker on another machine judges a case from its events alone, but a person (or a later
stage) may want the file a case came from: with a shared store its bytes live beside the events,
so any home bound to the store can open them (``Ledger.file_bytes``). The bytes are written before
the events that name them commit, and never changed (same hash, same bytes), so a committed
``file.received`` always has its bytes and two machines storing one file store it once. The
server compresses large values itself (TOAST). Like leases, these rows are not events: they are
checked against their hash when read, not exported (the events carry what a case needs).
"""

from __future__ import annotations

import hashlib
from typing import Any

from evalledger.ledger.persistence import LedgerError


def table_sql(schema: str) -> str:
    """The content-addressed table (created with the store's tables)."""
    return f"""
CREATE TABLE IF NOT EXISTS {schema}.files (
    sha256 TEXT PRIMARY KEY,
    size BIGINT NOT NULL,
    bytes BYTEA NOT NULL
);
"""


def put(conn: Any, schema: str, sha256: str, raw: bytes) -> None:
    """Store ``raw`` under its sha256, once (a second machine storing the same file adds nothing)."""
    if hashlib.sha256(raw).hexdigest() != sha256:
        raise LedgerError(f"the bytes given for sha256 {sha256} do not hash to it")
    conn.execute(f"INSERT INTO {schema}.files (sha256, size, bytes) VALUES (%s, %s, %s) "
                 "ON CONFLICT (sha256) DO NOTHING", (sha256, len(raw), raw))


def get(conn: Any, schema: str, sha256: str, where: str) -> bytes | None:
    """The bytes stored under ``sha256`` (None when absent); damaged bytes are an error naming ``where``."""
    row = conn.execute(f"SELECT bytes FROM {schema}.files WHERE sha256 = %s", (sha256,)).fetchone()
    if row is None:
        return None
    raw = bytes(row[0])
    if hashlib.sha256(raw).hexdigest() != sha256:
        raise LedgerError(f"{where}: the bytes stored for sha256 {sha256} no longer hash to it (changed "
                          "around evalledger)")
    return raw
