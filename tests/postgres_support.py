"""Reaching the test PostgreSQL server: its URL from EVALLEDGER_TEST_PG, one fresh schema per use.

Without EVALLEDGER_TEST_PG the PostgreSQL tests fail, saying how to start a server; a developer
without one may skip them explicitly with ``pytest --skip-postgres``.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from evalledger import ledger

START = "eval \"$(bash .ci/start-postgres)\"   # starts a throwaway cluster and exports EVALLEDGER_TEST_PG"
SKIP_ENV = "EVALLEDGER_SKIP_POSTGRES"


def pg_url() -> str:
    """The test server's URL; fails (or skips, with --skip-postgres) when none is configured."""
    url = os.environ.get("EVALLEDGER_TEST_PG")
    if url:
        return url
    if os.environ.get(SKIP_ENV):
        pytest.skip("PostgreSQL tests skipped on request (--skip-postgres)")
    pytest.fail(f"EVALLEDGER_TEST_PG is not set, so the PostgreSQL tests have no server. Start one with:\n"
                f"    {START}\nor skip them explicitly with: pytest --skip-postgres", pytrace=False)


def skipping_postgres() -> bool:
    """True when there is no server and --skip-postgres asked to skip the PostgreSQL tests."""
    return not os.environ.get("EVALLEDGER_TEST_PG") and bool(os.environ.get(SKIP_ENV))


def fresh_store_url() -> str:
    """A store URL naming a new, empty schema on the test server."""
    return f"{pg_url()}?schema=t_{uuid.uuid4().hex[:16]}"


def postgres_home(path: Path, url: str | None = None) -> Path:
    """A home at ``path`` bound to a fresh schema (or to ``url``)."""
    return ledger.init_home(path, store=url or fresh_store_url())
