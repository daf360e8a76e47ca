"""The viewer of a home on a PostgreSQL store: open pages hear of appends through LISTEN/NOTIFY
(no local file changes when another machine appends), against the real test server."""

from __future__ import annotations

import asyncio
import time

from aiohttp.test_utils import TestClient, TestServer

from evalledger import ledger
from evalledger.cli.viewer import live, make_app
from evalledger.testing import synthetic as syn
from postgres_support import postgres_home
from viewer_support import next_event, seq_of


def test_open_pages_wake_on_notify_from_a_postgres_store(tmp_path, monkeypatch):
    home = postgres_home(tmp_path / "home")
    with ledger.open_ledger(home) as led:
        led.append([syn.benchmark("b1", "template", name="pg", questions=1)])
        case_id, events = syn.template_case("b1", "q1", "model-x", "fail", {"f": False})
        led.append(events)
    # The safety check of the head would find the append too, a minute later: only a NOTIFY is in time.
    monkeypatch.setattr(live, "SAFETY_SECONDS", 60.0)

    async def test(client):
        response = await client.get("/events")
        first = seq_of(await asyncio.wait_for(next_event(response), 10))
        table = await (await client.get("/cases")).text()
        started = time.monotonic()

        def append_elsewhere() -> None:                  # another connection to the store, as another machine's
            with ledger.open_ledger(home) as other:
                other.append(ledger.NewEvent(f"case:{case_id}", "note.added",
                                             {"text": "from elsewhere", "author": "pg"}))
        await asyncio.to_thread(append_elsewhere)
        second = seq_of(await asyncio.wait_for(next_event(response), 20))
        waited = time.monotonic() - started
        page = await (await client.get(f"/case/{case_id}")).text()
        response.close()
        return first, second, waited, table, page

    async def main():
        async with TestClient(TestServer(make_app(home, token="t"), host="127.0.0.1")) as client:
            return await test(client)
    first, second, waited, table, page = asyncio.run(main())
    assert second == first + 1 and waited < 10
    assert case_id in table and "from elsewhere" in page
