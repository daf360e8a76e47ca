"""The viewer when the home changes underneath it: a ledger.db replaced by another home's, damaged,
deleted, or the whole home removed and brought back. Pages must say what is wrong (never a bare 500
or a traceback), and show the home's own ledger again once it is back."""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from evalledger import ledger
from evalledger.cli.viewer import make_app
from viewer_support import failing_home, xss_home


def serve(home: Path, test):
    """Run ``await test(client)`` against the viewer of ``home`` on a real local socket."""
    async def main():
        async with TestClient(TestServer(make_app(home, live=False), host="127.0.0.1")) as client:
            return await test(client)
    return asyncio.run(main())


async def table_ids(client) -> tuple[list[str], str]:
    """Every case id the case table lists (sorted by ledger seq, page by page), and its first page."""
    ids, page, first = [], 1, ""
    while True:
        response = await client.get(f"/cases?sort=seq&page={page}")
        assert response.status == 200
        text = await response.text()
        first = first or text
        ids += re.findall(r'class="case-link" href="/case/(\w+)"', text)
        if 'rel="next"' not in text:
            return ids, first
        page += 1


def opened_in_order(home: Path) -> list[str]:
    """The case ids of ``home``'s ledger in the order they were opened."""
    with ledger.open_ledger(home, readonly=True) as led:
        return [e.data["case_id"] for e in led.read(types=["case.opened"])]


def replace_ledger(home: Path, other: Path) -> None:
    """Put ``other``'s ledger.db where ``home``'s was (a new file, as cp or a restore from backup
    makes), leaving the rest of the home, the viewer's index included, as it was."""
    for suffix in ("-wal", "-shm"):
        Path(f"{home / 'ledger.db'}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(other / "ledger.db", home / "ledger.db.new")
    (home / "ledger.db.new").replace(home / "ledger.db")


def test_an_index_left_by_another_ledger_under_the_same_name_is_rebuilt(tmp_path):
    """The index knew only the seq it was synced to: a ledger.db replaced by a longer one kept the
    old ledger's cases in the table (and its runs on the overview) and added only the new
    ledger's events after that seq."""
    home, other = tmp_path / "home", tmp_path / "other"
    xss_home(home)
    failing_home(other, extra_cases=20)
    with ledger.open_ledger(home, readonly=True) as a, ledger.open_ledger(other, readonly=True) as b:
        assert b.head().seq > a.head().seq                 # the index would be synced onwards, not rebuilt
    before, _ = serve(home, table_ids)
    assert before == opened_in_order(home)
    replace_ledger(home, other)
    after, first = serve(home, table_ids)
    assert after == opened_in_order(other)
    assert f"{len(after)} cases" in first
