"""The PostgreSQL layout of the ledger: store URLs (which schema, the password kept out of messages),
the tables, index and immutability triggers of one schema, and how a connection is opened.

psycopg 3 is an optional dependency, imported on first connection: the ledger imports this module
for its URL helpers on every command.
"""

from __future__ import annotations

import zlib
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from evalledger.ledger.persistence import LedgerError

# psycopg is imported on first connection (``_psycopg``), not with this module: the ledger imports
# this module for its URL helpers, and psycopg costs every command ~0.1 s at start-up.
psycopg: Any = None
pg_errors: Any = None


def _psycopg() -> Any:
    """The psycopg module, imported on first use; None when the optional extra is not installed."""
    global psycopg, pg_errors
    if psycopg is None:
        try:
            import psycopg as module
            from psycopg import errors
        except ImportError:  # the optional extra is not installed: say so when a store needs it
            return None
        psycopg, pg_errors = module, errors
    return psycopg

URL_SCHEMES = ("postgresql://", "postgres://")
DEFAULT_SCHEMA = "public"
TRIGGERS = ("events_refuse_update", "events_refuse_delete", "events_refuse_truncate")


def is_store_url(text: str) -> bool:
    """True when ``text`` names a PostgreSQL store (``postgresql://...``)."""
    return isinstance(text, str) and text.startswith(URL_SCHEMES)


def split_store_url(url: str) -> tuple[str, str]:
    """(connection URL for libpq, schema name) from a store URL; ``?schema=NAME`` picks the schema.

    One database can hold many ledgers, one a schema (``public`` when not given).
    """
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), DEFAULT_SCHEMA)
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    if not schema or not schema.replace("_", "a").isalnum() or not schema[0].isalpha() or schema != schema.lower():
        raise LedgerError(f"store URL: schema {schema!r} must be lowercase letters, digits and _ "
                          "(starting with a letter)")
    return urlunsplit((parts.scheme, parts.netloc, parts.path, rest, parts.fragment)), schema


def redact_url(url: str) -> str:
    """The URL without its password: what messages, logs and files may show."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = (parts.username or "") + ":***"
    return urlunsplit((parts.scheme, f"{user}@{netloc[-1]}", parts.path, parts.query, parts.fragment))


def notify_channel(schema: str) -> str:
    """The LISTEN/NOTIFY channel on which a schema's appends announce the new head seq."""
    return f"evalledger_{schema}"


def schema_sql(schema: str) -> str:
    """Tables, index and immutability triggers of one ledger, created if missing."""
    return f"""
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.events (
    seq BIGINT PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    stream TEXT NOT NULL,
    version INTEGER NOT NULL,
    type TEXT NOT NULL,
    schema INTEGER NOT NULL,
    data TEXT NOT NULL,
    meta TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    UNIQUE (stream, version)
);
CREATE INDEX IF NOT EXISTS events_type_seq ON {schema}.events (type, seq);
CREATE TABLE IF NOT EXISTS {schema}.tracking (
    name TEXT PRIMARY KEY,
    position BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS {schema}.merkle (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    size BIGINT NOT NULL,
    frontier BYTEA NOT NULL,
    built TEXT NOT NULL
);
CREATE OR REPLACE FUNCTION {schema}.evalledger_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'evalledger events are immutable: % refused', TG_OP;
END $$;
CREATE OR REPLACE TRIGGER events_refuse_update BEFORE UPDATE ON {schema}.events
    FOR EACH ROW EXECUTE FUNCTION {schema}.evalledger_refuse_change();
CREATE OR REPLACE TRIGGER events_refuse_delete BEFORE DELETE ON {schema}.events
    FOR EACH ROW EXECUTE FUNCTION {schema}.evalledger_refuse_change();
CREATE OR REPLACE TRIGGER events_refuse_truncate BEFORE TRUNCATE ON {schema}.events
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.evalledger_refuse_change();
"""


def blob_sql(schema: str) -> str:
    """The blob store's table (ledger/blobs.py), made with a new store only, immutable like the events."""
    return f"""
CREATE TABLE IF NOT EXISTS {schema}.blobs (
    key BYTEA PRIMARY KEY,
    data BYTEA NOT NULL
);
CREATE OR REPLACE TRIGGER blobs_refuse_update BEFORE UPDATE ON {schema}.blobs
    FOR EACH ROW EXECUTE FUNCTION {schema}.evalledger_refuse_change();
CREATE OR REPLACE TRIGGER blobs_refuse_delete BEFORE DELETE ON {schema}.blobs
    FOR EACH ROW EXECUTE FUNCTION {schema}.evalledger_refuse_change();
"""


def connect(url: str, readonly: bool = False) -> Any:
    """An autocommit psycopg connection to ``url`` (no schema parameter), with clear errors."""
    if _psycopg() is None:
        raise LedgerError("a PostgreSQL store needs psycopg 3: pip install 'evalledger[postgres]'")
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise LedgerError(f"cannot connect to the store {redact_url(url)}: {str(exc).strip()}") from None
    # A writer that holds the sequencer lock and hangs must not hang everyone: give up after 60 s,
    # as SQLite's busy timeout does (the error names the store).
    conn.execute("SET lock_timeout = '60s'")
    if readonly:
        conn.execute("SET default_transaction_read_only = on")
    return conn


def lock_key(schema: str) -> int:
    """The advisory-lock key of one schema's sequencer (a signed 32-bit int)."""
    return zlib.crc32(schema.encode()) - (1 << 31)
