"""The viewer when the home changes underneath it: a ledger.db replaced by another home's, damaged,
deleted, or the whole home removed and brought back. Pages must say what is wrong (never a bare 500
or a traceback), and show the home's own ledger again once it is back."""

from __future__ import annotations

import asyncio
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from evalledger import ledger
from evalledger.cli.viewer import make_app
from viewer_support import damage_leaving_wal, failing_home, xss_home


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


def backup(home: Path, to: Path) -> Path:
    """A consistent copy of ``home``'s ledger.db (SQLite's backup API: the WAL included)."""
    source, target = sqlite3.connect(home / "ledger.db"), sqlite3.connect(to)
    with target:
        source.backup(target)
    source.close()
    target.close()
    return to


async def page(client, url: str) -> tuple[int, str]:
    response = await client.get(url)
    return response.status, await response.text()


def assert_says(status_text: tuple[int, str], *words: str) -> None:
    """A 503 page that names what is wrong (no bare 500, no traceback)."""
    status, text = status_text
    assert status == 503, (status, text[:300])
    assert "Traceback" not in text and "Server got itself in trouble" not in text
    for word in words:
        assert word in text, (word, text[:600])


def test_a_ledger_damaged_while_the_viewer_runs_is_named_and_a_restored_one_shown_again(tmp_path):
    """ledger.db cut short while the viewer ran: every page was a bare '500 Internal Server Error'
    (the traceback only on the server's stderr), verify's included, for as long as it ran."""
    home = tmp_path / "home"
    failing_home(home, extra_cases=30)
    saved = backup(home, tmp_path / "saved.db")
    head = opened_in_order(home)

    async def test(client):
        assert (await page(client, "/"))[0] == 200
        with open(home / "ledger.db", "r+b") as fh:        # cut short in place, as a full disk or a bad copy does
            fh.truncate(3 * 4096)
        # verify first: it reads every event (a page of figures may still come from the cache)
        damaged = {url: await page(client, url) for url in ("/verify", "/", "/cases", f"/case/{head[0]}")}
        shutil.copyfile(saved, home / "ledger.db.new")
        (home / "ledger.db.new").replace(home / "ledger.db")   # restored from the backup
        ids, _ = await table_ids(client)
        return damaged, ids
    damaged, ids = serve(home, test)
    for url, answer in damaged.items():
        assert_says(answer, "ledger.db", "malformed"), url
    assert ids == head


def test_a_ledger_gone_while_the_viewer_runs_is_said_to_be_gone_and_a_home_brought_back_is_shown(tmp_path):
    """ledger.db deleted, then the whole home removed, then another home copied to its place: the
    viewer went on showing the deleted file's cases, and then still those, never the home's."""
    home, other = tmp_path / "home", tmp_path / "other"
    failing_home(home, extra_cases=10)
    xss_home(other)

    async def test(client):
        before, _ = await table_ids(client)
        (home / "ledger.db").unlink()
        deleted = await page(client, "/cases")
        shutil.rmtree(home)
        removed = await page(client, "/")
        removed_verify = await page(client, "/verify")
        shutil.copytree(other, home)                       # the home brought back (here: another's)
        after, _ = await table_ids(client)
        return before, deleted, removed, removed_verify, after
    before, deleted, removed, removed_verify, after = serve(home, test)
    assert len(before) == 13
    for answer in (deleted, removed, removed_verify):
        assert_says(answer, f"{home / 'ledger.db'}", "the ledger is gone")
    assert after == opened_in_order(home)


def test_an_empty_ledger_file_is_left_as_it_was_and_its_first_events_are_shown(tmp_path):
    """An empty ledger.db (a killed init leaves one) reads as a ledger of no events; the viewer
    wrote its read-model tables into it, after which every read-only command (status, verify,
    view itself) refused the home as 'an SQLite file without the table events', and the viewer
    never showed the events a writer then added."""
    from evalledger.testing import synthetic as syn
    home = ledger.init_home(tmp_path / "home")
    for name in ("ledger.db-wal", "ledger.db-shm"):
        (home / name).unlink(missing_ok=True)
    (home / "ledger.db").write_bytes(b"")

    async def test(client):
        empty, _ = await table_ids(client)
        size = (home / "ledger.db").stat().st_size
        with ledger.open_ledger(home, readonly=True) as led:      # a read-only command opens it still
            assert led.head().seq == 0
        with ledger.open_ledger(home) as led:
            led.append([syn.benchmark("b1", "template", name="late", questions=1)])
            case_id, events = syn.template_case("b1", "q1", "model-x", "pass", {"f": True})
            led.append(events)
        filled, _ = await table_ids(client)
        return empty, size, filled, case_id
    empty, size, filled, case_id = serve(home, test)
    assert empty == [] and size == 0
    assert filled == [case_id]


def test_a_viewer_started_on_a_damaged_ledger_with_a_stale_wal_names_the_file(tmp_path, run_cli):
    """ledger.db cut short with the write-ahead log of its last append beside it: the log holds
    page 1, so the file opened, and `view` stopped with a Python traceback (sqlite3.DatabaseError)
    reading its tables. It refuses to start as it does on a file that is no database, naming the
    file and SQLite's reason, as a running viewer's 503 page does."""
    home = tmp_path / "home"
    failing_home(home, extra_cases=30)
    damage_leaving_wal(home)
    done = run_cli("view", "--port", "0", home=home, timeout=60)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and "serving" not in done.stdout
    assert f"{home / 'ledger.db'}: cannot be read as an SQLite database" in done.stderr
    assert "malformed" in done.stderr and "import" in done.stderr


@pytest.mark.parametrize("how", ["removed", "moved"])
def test_a_home_removed_and_brought_back_is_watched_again(tmp_path, monkeypatch, how):
    """The watcher watched the folder that was removed (or moved away): once the home was back,
    only the periodic check (every 5 s) saw new events. It is attached to the home again when the
    home is back, so an event appended then reaches an open page's stream at once. (The periodic
    check is put out of reach here, so only the watcher can tell.)"""
    from evalledger.cli.viewer import live
    from evalledger.testing import synthetic as syn
    from viewer_support import next_event, seq_of
    monkeypatch.setattr(live, "SAFETY_SECONDS", 120.0)
    home = tmp_path / "home"
    failing_home(home, extra_cases=5)
    shutil.copytree(home, tmp_path / "saved")

    def append_one() -> int:
        with ledger.open_ledger(home) as led:
            _, events = syn.template_case("b1", f"late{led.head().seq}", "model-x", "pass", {"f": True})
            return led.append(events)[-1].seq

    async def main():
        async with TestClient(TestServer(make_app(home), host="127.0.0.1")) as client:
            stream = await client.get("/events")
            first = seq_of(await asyncio.wait_for(next_event(stream), 10))
            before = await asyncio.to_thread(append_one)            # the watcher works at all
            assert seq_of(await asyncio.wait_for(next_event(stream), 5)) == before
            if how == "removed":
                shutil.rmtree(home)
            else:
                home.rename(tmp_path / "home.old")
            await asyncio.sleep(1.0)
            gone = await page(client, "/")
            if how == "removed":
                shutil.copytree(tmp_path / "saved", home)           # the home brought back
            else:
                (tmp_path / "saved").rename(home)                   # another copy moved into place
            await asyncio.sleep(1.5)
            after = await asyncio.to_thread(append_one)
            heard = []                      # the restored head (a seq back) may be told first
            while after not in heard:
                heard.append(seq_of(await asyncio.wait_for(next_event(stream), 5)))
            stream.close()
            return first, before, gone, after, heard
    first, before, gone, after, heard = asyncio.run(main())
    assert_says(gone, "the ledger is gone")
    assert after == before > first and heard[-1] == after and set(heard) <= {first, after}


def test_another_ledger_at_the_same_seq_is_told_to_open_pages(tmp_path):
    """Pages were told the head by its seq alone, and the viewer's caches were kept per seq: a
    ledger.db replaced by another home's of the same length changed what every page shows, yet no
    open page heard of it, and a page served from the caches could show the old ledger's head. A
    head is its seq and hash now."""
    from evalledger.testing import synthetic as syn
    from viewer_support import next_event
    home, other = tmp_path / "home", tmp_path / "other"
    heads = []
    for where, model in ((home, "model-a"), (other, "model-b")):
        with ledger.open_ledger(ledger.init_home(where)) as led:
            led.append([syn.benchmark("b1", "template", name="same-length", questions=2)])
            for question in ("q1", "q2"):
                led.append(syn.template_case("b1", question, model, "pass", {"f": True})[1])
            heads.append(led.head())
    old, new = heads
    assert old.seq == new.seq and old.hash != new.hash

    async def main():
        async with TestClient(TestServer(make_app(home), host="127.0.0.1")) as client:
            stream = await client.get("/events")
            first = await asyncio.wait_for(next_event(stream), 10)
            before = await page(client, "/")
            replace_ledger(home, other)
            second = await asyncio.wait_for(next_event(stream), 10)   # the watcher, or the 5 s check
            after = await page(client, "/")
            cases = await page(client, "/cases")
            stream.close()
            return first, before, second, after, cases
    first, before, second, after, cases = asyncio.run(main())
    assert first == f"{old.seq} {old.hash}" and second == f"{new.seq} {new.hash}"
    assert old.hash in before[1] and new.hash in after[1] and old.hash not in after[1]
    assert "model-b" in cases[1] and "model-a" not in cases[1]
