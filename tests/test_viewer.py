"""The viewer without a browser: aiohttp's test client against a real home (escaping, CSP, review
refusals, paging, filters, export, live events), and ``evalledger view`` from the command line."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from html.parser import HTMLParser

import pytest
from aiohttp.test_utils import TestClient, TestServer

from evalledger import ledger
from evalledger.cli.viewer import CSP, export_site, make_app
from evalledger.cli.viewer import live as live_module
from evalledger.cli.viewer.server import asset_bytes
from viewer_support import failing_home, next_event, seq_of, xss_home

TOKEN = "launch-token-for-tests"


def serve(home, test, **options):
    """Run ``await test(client)`` against the viewer of ``home`` on a real local socket."""
    async def main():
        app = make_app(home, token=TOKEN, **options)
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            return await test(client)
    return asyncio.run(main())


class Tags(HTMLParser):
    """Every start tag with its attributes, to check what a page would make a browser do."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        """Record the tag and its attributes."""
        self.tags.append((tag, dict(attrs)))


def tags_of(text: str) -> list[tuple[str, dict]]:
    parser = Tags()
    parser.feed(text)
    return parser.tags


def assert_inert(text: str) -> None:
    """No script but the packaged one, no event-handler attribute, no javascript: URL, no img/svg."""
    for tag, attrs in tags_of(text):
        assert tag not in ("img", "svg", "iframe", "object"), (tag, attrs)
        if tag == "script":                 # the packaged scripts, or the case page's JSON data block
            assert attrs.get("src") in ("/static/view.js", "/static/case.js") or \
                (attrs.get("type") == "application/json" and not attrs.get("src")), attrs
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        for name in ("href", "src", "action"):
            assert not str(attrs.get(name, "")).strip().lower().startswith("javascript:"), (tag, attrs)


@pytest.fixture
def failing(tmp_path):
    ids = failing_home(tmp_path / "home", extra_cases=120)
    return tmp_path / "home", ids


def case_data(text: str) -> dict:
    """The JSON data block of a case page (what ``case.js`` draws the page from)."""
    blocks = re.findall(r'<script type="application/json" id="case-data">(.*?)</script>', text, re.S)
    assert len(blocks) == 1 and "<" not in blocks[0]
    return json.loads(blocks[0])


def test_hostile_content_renders_as_text_on_every_page(tmp_path):
    ids = xss_home(tmp_path / "home")

    async def test(client):
        pages = {}
        for url in ["/", "/cases", "/cases?q=script", "/compare", *[f"/case/{i}" for i in ids]]:
            response = await client.get(url)
            assert response.status == 200, url
            assert response.headers["Content-Security-Policy"] == CSP
            pages[url] = await response.text()
        return pages
    pages = serve(tmp_path / "home", test)
    for url, text in pages.items():
        assert_inert(text)
        assert "<script>alert" not in text and "<img" not in text and "<svg" not in text, url
    case_text = pages[f"/case/{ids[0]}"]
    shown = json.dumps(case_data(case_text))                # carried as data, drawn as text by case.js
    assert '<script>alert(\\"x1\\")</script>' in shown
    assert '\\"><img src=x onerror=alert(\\"x2\\")>' in shown
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP


def test_case_page_carries_the_cases_stored_events_and_its_indexed_result(failing):
    """The page's data block holds every event of the case in ledger order with its payload and
    meta exactly as stored, and the case's result as the read models give it (what case.js draws;
    the browser tests check the drawing)."""
    from evalledger.projections.case_result import case_result
    from evalledger.projections.store import ReadModelStore
    home, ids = failing

    async def test(client):
        return [await (await client.get(f"/case/{ids[k]}")).text() for k in ("failed_quote", "overridden")]
    quote_page, override_page = serve(home, test)
    with ledger.open_ledger(home, readonly=True) as led:
        store = ReadModelStore(led)
        for case_id, text in ((ids["failed_quote"], quote_page), (ids["overridden"], override_page)):
            shown = case_data(text)
            stored = list(led.read(stream=f"case:{case_id}"))
            assert [(e["seq"], e["id"], e["type"], e["hash"]) for e in shown["events"]] == \
                [(e.seq, e.id, e.type, e.hash) for e in stored]
            assert [(e["data"], e["meta"]) for e in shown["events"]] == [(e.data, e.meta) for e in stored]
            seqs = {e.id: e.seq for e in stored}
            assert [e["cause"] for e in shown["events"]] == \
                [seqs.get((e.meta or {}).get("causation")) for e in stored]
            full = case_result(next(c for c in store.iter_cases() if c["case_id"] == case_id))
            assert shown["result"] == {k: full[k] for k in shown["result"]}
            assert {"verdict", "original_verdict", "fields", "failures"} <= set(shown["result"])
        store.close()
    assert case_data(override_page)["result"]["original_verdict"] == "pass"
    assert case_data(override_page)["result"]["verdict"] == "fail"
    assert "form" not in re.sub(r"<form class=\"filters\".*?</form>", "", override_page)   # read-only: no forms


def test_case_table_pages_filters_and_sorts_every_case_once(failing):
    home, ids = failing

    async def test(client):
        seen, page = [], 1
        while True:
            text = await (await client.get(f"/cases?sort=verdict&desc=1&page={page}")).text()
            seen += re.findall(r'class="case-link" href="/case/(\w+)"', text)
            if 'rel="next"' not in text:
                break
            page += 1
        fails = await (await client.get("/cases?verdict=fail")).text()
        auto = await (await client.get("/cases?verdict=auto-failed")).text()
        over = await (await client.get("/cases?verdict=overridden")).text()
        stage = await (await client.get("/cases?verdict=failed-stage")).text()
        found = await (await client.get("/cases?q=fast-track")).text()
        model = await (await client.get("/cases?model=model-y&benchmark=pharma")).text()
        beyond = await (await client.get("/cases?page=999")).text()
        assert "page 3 of 3" in await (await client.get("/cases?page=" + "9" * 5000)).text()   # beyond int()
        assert "page 1 of 3" in await (await client.get("/cases?page=-" + "9" * 5000)).text()
        return seen, page, fails, auto, over, stage, found, model, beyond
    seen, pages, fails, auto, over, stage, found, model, beyond = serve(home, test)
    with ledger.open_ledger(home, readonly=True) as led:
        opened = {e.data["case_id"] for e in led.read(types=["case.opened"])}
    assert sorted(seen) == sorted(opened) and len(seen) == 123 and pages == 3       # 50 a page, each once
    conn = sqlite3.connect(home / "ledger.db")
    fail_count = conn.execute("SELECT COUNT(*) FROM proj_cases WHERE verdict = 'fail'").fetchone()[0]
    model_y = conn.execute("SELECT COUNT(*) FROM proj_cases WHERE model = 'model-y'").fetchone()[0]
    conn.close()
    assert f"{fail_count} cases" in fails and fail_count > 30
    assert re.findall(r'class="case-link" href="/case/(\w+)"', auto) == [ids["failed_quote"]]
    assert re.findall(r'class="case-link" href="/case/(\w+)"', over) == [ids["overridden"]]
    assert re.findall(r'class="case-link" href="/case/(\w+)"', stage) == [ids["stage_failed"]]
    assert re.findall(r'class="case-link" href="/case/(\w+)"', found) == [ids["failed_quote"]]   # response text
    assert f"{model_y} cases" in model
    assert "page 3 of 3" in beyond


def test_writes_are_refused_without_review_mode(failing):
    home, ids = failing

    async def test(client):
        response = await client.post(f"/case/{ids['overridden']}/override",
                                     data={"token": TOKEN, "verdict": "pass", "reason": "r", "author": "a"})
        return response.status
    assert serve(home, test) == 405
    with ledger.open_ledger(home, readonly=True) as led:
        assert len(list(led.read(types=["verdict.overridden"]))) == 1                  # only the original


@pytest.mark.parametrize("token, origin, status", [
    (None, None, 403), ("wrong", None, 403), (TOKEN, "http://evil.example", 403), (TOKEN, "null", 403),
])
def test_review_refuses_a_write_without_the_token_or_from_another_origin(failing, token, origin, status):
    home, ids = failing

    async def test(client):
        data = {"verdict": "pass", "reason": "r", "author": "a", **({"token": token} if token else {})}
        headers = {"Origin": origin} if origin else {}
        response = await client.post(f"/case/{ids['failed_quote']}/override", data=data, headers=headers,
                                     allow_redirects=False)
        return response.status
    assert serve(home, test, review=True) == status
    with ledger.open_ledger(home, readonly=True) as led:
        assert len(list(led.read(types=["verdict.overridden"]))) == 1


def test_review_writes_the_same_events_as_the_cli(failing, run_cli):
    home, ids = failing
    case_id = ids["failed_quote"]

    async def test(client):
        origin = f"http://{client.host}:{client.port}"
        missing = await client.post(f"/case/{case_id}/override", data={"token": TOKEN, "verdict": "pass",
                                    "reason": "synonym", "author": " "}, headers={"Origin": origin},
                                    allow_redirects=False)
        ok = await client.post(f"/case/{case_id}/override", data={"token": TOKEN, "verdict": "pass",
                               "reason": "synonym", "author": "ana"}, headers={"Origin": origin},
                               allow_redirects=False)
        note = await client.post(f"/case/{case_id}/note", data={"token": TOKEN, "text": "checked", "author": "bo"},
                                 headers={"Origin": origin}, allow_redirects=False)
        page = await (await client.get(f"/case/{case_id}?token={TOKEN}")).text()
        return missing.status, ok.status, note.status, page
    missing, ok, note, page = serve(home, test, review=True)
    assert (missing, ok, note) == (400, 303, 303)
    shown = case_data(page)
    assert 'id="override-form"' in page and shown["result"]["verdict"] == "pass"
    assert shown["result"]["original_verdict"] == "fail"
    assert [e["data"]["author"] for e in shown["events"] if e["type"] in ("verdict.overridden", "note.added")] == \
        ["ana", "bo"]
    assert run_cli("override", ids["overridden"], "--verdict", "pass", "--reason", "synonym", "--author", "ana",
                   home=home).returncode == 0
    assert run_cli("note", ids["overridden"], "checked", "--author", "bo", home=home).returncode == 0
    with ledger.open_ledger(home, readonly=True) as led:
        web = [e for e in led.read(stream=f"case:{case_id}") if e.type in ("verdict.overridden", "note.added")]
        by_cli = [e for e in led.read(stream=f"case:{ids['overridden']}")
                  if e.type in ("verdict.overridden", "note.added")][1:]           # after the synthetic override
    assert [(e.type, sorted(e.data), e.meta.get("stage")) for e in web] == \
           [(e.type, sorted(e.data), e.meta.get("stage")) for e in by_cli]
    assert web[0].data == {**by_cli[0].data, "case_id": case_id}


def test_a_host_the_server_did_not_bind_is_refused(failing):
    home, _ = failing

    async def test(client):
        return (await client.get("/")).status, (await client.get("/", headers={"Host": "127.0.0.1:1"})).status
    assert serve(home, test, hosts={"127.0.0.1:1"}) == (403, 200)


def test_only_packaged_assets_are_served(failing):
    home, _ = failing

    async def test(client):
        return [(await client.get(u)).status for u in
                ("/static/view.css", "/static/view.js", "/static/..%2Fledger.db", "/static/index.py",
                 "/case/..%2F..%2Fetc%2Fpasswd", "/case/nosuchcase")]
    assert serve(home, test) == [200, 200, 404, 404, 404, 404]


def test_open_pages_hear_of_new_events(failing, run_cli):
    home, ids = failing

    async def test(client):
        response = await client.get("/events")
        first = await asyncio.wait_for(next_event(response), 10)
        done = await asyncio.to_thread(run_cli, "note", ids["overridden"], "live?", "--author", "cy", home=home)
        assert done.returncode == 0, done.stderr
        second = await asyncio.wait_for(next_event(response), 15)
        response.close()
        return first, second
    first, second = serve(home, test)
    with ledger.open_ledger(home, readonly=True) as led:
        head = led.head()
    assert second == f"{head.seq} {head.hash}" and seq_of(first) == head.seq - 1




def test_export_writes_a_site_whose_links_all_resolve(failing):
    home, ids = failing
    out = home.parent / "site"
    written = export_site(home, out)
    files = sorted(p for p in out.rglob("*.html"))
    assert written == len(files) == 3 + 3 + 123 + 1 - 1                   # index, verify, 3 table pages, cases, compare
    assert (out / "static" / "case.js").read_bytes() == asset_bytes("case.js")
    for path in files:
        text = path.read_text()
        assert "view.js" not in text                                      # nothing live in an export
        scripts = [a for t, a in tags_of(text) if t == "script"]
        assert all(a.get("src") == "../static/case.js" or a.get("type") == "application/json" for a in scripts)
        for _, attrs in tags_of(text):
            for name in ("href", "src"):
                target = attrs.get(name)
                if target and not target.startswith("#"):
                    assert not target.startswith(("/", "http")), (path, target)
                    assert (path.parent / target.split("#")[0]).resolve().exists(), (path, target)
    exported = case_data((out / "case" / f"{ids['failed_quote']}.html").read_text())
    assert "approved in 1999 by the EMA" in json.dumps(exported)


def test_view_command_line(failing, run_cli, tmp_path):
    home, _ = failing
    done = run_cli("view", "--export", tmp_path / "out", home=home)
    assert done.returncode == 0 and "pages to" in done.stdout, done.stderr
    assert (tmp_path / "out" / "index.html").exists()
    missing = run_cli("view", "--export", tmp_path / "o2", home=tmp_path / "nohome")
    assert missing.returncode == 2 and "no evalledger home" in missing.stderr
    bad_port = run_cli("view", "--port", "70000", home=home)
    assert bad_port.returncode == 2 and "--port 70000" in bad_port.stderr
    bad_compare = run_cli("view", "--compare", tmp_path / "nothing", "--export", tmp_path / "o3", home=home)
    assert bad_compare.returncode == 2 and "--compare" in bad_compare.stderr
    assert "example:" in run_cli("view", "--help").stdout


def test_table_queries_agree_with_a_brute_force_filter_and_sort(failing):
    """Any filter, sort and page gives the rows a plain Python filter and sort of the read models give."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from evalledger.cli.viewer import index
    from evalledger.cli.viewer.state import HomeView
    home, ids = failing
    view = HomeView(home)
    try:
        everything = [dict(zip(("case_id", "model", "status", "verdict", "question_id", "question", "response"), r,
                               strict=True))
                      for r in view.index.execute("SELECT case_id, model, status, verdict, question_id, question, "
                                                  "response FROM view_cases")]
        with sqlite3.connect(home / "ledger.db") as db:
            truth = {r[0]: r[1:] for r in db.execute("SELECT case_id, model, status, verdict FROM proj_cases")}
        assert {r["case_id"]: (r["model"], r["status"], r["verdict"]) for r in everything} == truth

        @settings(max_examples=60, deadline=None)
        @given(verdict=st.sampled_from(["", "pass", "fail", "pending"]), model=st.sampled_from(["", "model-x", "model-y"]),
               q=st.sampled_from(["", "x0001", "question", "fast", "%", "_"]),
               sort=st.sampled_from(["case", "model", "status", "verdict", "question"]), desc=st.booleans(),
               page=st.integers(1, 4), size=st.integers(1, 60))
        def check(verdict, model, q, sort, desc, page, size):
            filters = {k: v for k, v in (("verdict", verdict), ("model", model), ("q", q)) if v}
            result = index.query_cases(view.index, filters, sort, desc, page, size)
            wanted = [r for r in everything
                      if (not verdict or (r["status"] == "pending" if verdict == "pending" else r["verdict"] == verdict))
                      and (not model or r["model"] == model)
                      and (not q or any(q.lower() in (r[k] or "").lower() for k in ("question", "response", "case_id")))]
            key = {"case": "case_id", "model": "model", "status": "status", "verdict": "verdict",
                   "question": "question_id"}[sort]
            wanted.sort(key=lambda r: ((r[key] is not None, r[key] or ""), r["case_id"]), reverse=desc)
            pages = max(1, -(-len(wanted) // size))
            start = (min(page, pages) - 1) * size
            assert result["total"] == len(wanted)
            assert [r["case_id"] for r in result["rows"]] == [r["case_id"] for r in wanted[start:start + size]]
        check()
    finally:
        view.close()


def test_case_counts_are_kept_per_head_and_follow_new_cases(failing):
    """Paging reuses the count of a filter (asked once per ledger head); a new case moves the head
    and every count with it."""
    from evalledger.cli.viewer import index
    from evalledger.cli.viewer.state import HomeView
    from evalledger.testing import synthetic as syn
    home, _ = failing
    view = HomeView(home)
    try:
        first = view.cases({"verdict": "fail"}, "case", False, 1)
        assert view._counts == {(view.seen_head, (("verdict", "fail"),)): first["total"]}
        assert view.cases({"verdict": "fail"}, "case", False, 2)["total"] == first["total"]
        assert first["total"] == index.count_cases(view.index, {"verdict": "fail"})
        with ledger.open_ledger(home) as led:
            _, events = syn.template_case("b1", "late", "model-x", "fail", {"f": False})
            led.append(events)
        assert view.refresh()
        after = view.cases({"verdict": "fail"}, "case", False, 1)
        assert after["total"] == first["total"] + 1 and len(view._counts) == 1
    finally:
        view.close()


def test_case_pages_read_deep_judgment_from_the_read_models_as_the_fold_gives_it(failing, tmp_path):
    """The case page takes the deep-judgment fields from the case's read-model state; they equal
    those of folding the case's events again (``history``), case by case."""
    from evalledger.cli.viewer.state import HomeView
    from evalledger.projections.history import case_history
    home, _ = failing
    xss_ids = xss_home(tmp_path / "xss")
    for path in (home, tmp_path / "xss"):
        view = HomeView(path)
        try:
            ids = view.all_case_ids()
            assert len(ids) >= len(xss_ids)
            for case_id in ids:
                shown, _ = view.case(case_id)
                assert shown == case_history(view.led, case_id)
            assert any(view.case(i)[0].get("deep_judgment") for i in ids)
        finally:
            view.close()


def test_the_review_queue_sample_wrote_is_a_filter_of_the_case_table(failing, run_cli, tmp_path):
    """`sample --out FILE` then `view --queue FILE`: the table's queue filter shows exactly those cases."""
    import urllib.request

    from viewer_support import start_viewer, stop_viewer
    home, _ = failing
    for name in ("queue.jsonl", "queue.csv"):
        done = run_cli("sample", "--n", "7", "--seed", "3", "--out", tmp_path / name, home=home)
        assert done.returncode == 0, done.stderr
    queue = [json.loads(line)["case_id"] for line in (tmp_path / "queue.jsonl").read_text().splitlines()]
    assert len(queue) == 7
    proc, url = start_viewer(home, "--queue", str(tmp_path / "queue.csv"))
    try:
        base = url.split("?")[0].rstrip("/")
        with urllib.request.urlopen(f"{base}/cases?queue=1") as reply:
            page = reply.read().decode()
        with urllib.request.urlopen(f"{base}/cases") as reply:
            everything = reply.read().decode()
    finally:
        stop_viewer(proc)
    assert sorted(re.findall(r'class="case-link" href="/case/(\w+)"', page)) == sorted(queue)
    assert "in the review queue (7)" in page and 'name="queue" value="1" checked' in page
    assert len(re.findall(r'class="case-link" href="/case/(\w+)"', everything)) == 50   # unfiltered: a full page
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"case_id": queue[0]}) + "\n{not json\n")
    refused = run_cli("view", "--queue", bad, "--port", "0", home=home)
    assert refused.returncode == 2 and f"--queue {bad}: line 2: not JSON" in refused.stderr


def test_a_cause_in_another_stream_is_linked_by_its_seq_and_the_payload_travels_as_stored(tmp_path):
    """A case opened by an event of another stream (as ingest opens cases from a file's event)
    names that event's seq; an event's payload and meta are the ledger's stored bytes, unchanged."""
    import dataclasses

    from evalledger import projections
    from evalledger.cli.viewer.state import HomeView
    from evalledger.testing import synthetic as syn
    home = ledger.init_home(tmp_path / "home")
    with ledger.open_ledger(home) as led:
        [bench] = led.append([syn.benchmark("b", "template", questions=1)])
        case_id, first = syn.opened("b", "template", "q0", "m", {"id": "q0", "question": "Q <b>?"}, response="R")
        first = dataclasses.replace(first, meta={"causation": bench.id, "stage": "intake"})
        led.append([first, syn.judged(case_id, "pass")])
        projections.update(led)
        stored = list(led.read(stream=f"case:{case_id}"))
    view = HomeView(home)
    try:
        text = view.case_document(case_id)
    finally:
        view.close()
    shown = json.loads(text)
    assert [e["cause"] for e in shown["events"]] == [bench.seq, None]
    for event in stored:                                     # the stored bytes appear verbatim
        assert f'"meta":{event.raw_meta},"data":{event.raw_data}' in text
    assert shown["result"]["verdict"] == "pass"


def test_no_content_can_end_the_data_block():
    from evalledger.cli.viewer.case_page import data_block
    document = json.dumps({"text": "</script><script>alert(1)</script><!-- x"})
    block = data_block(document)
    inner = block[len('<script type="application/json" id="case-data">'):-len("</script>")]
    assert "<" not in inner and json.loads(inner) == json.loads(document)
    assert [t for t, _ in tags_of(block)] == ["script"]


def test_a_cancel_of_the_live_fold_loop_is_never_lost(failing):
    """The cancel lands after the wake-up completed and before the loop resumed (the order is
    fixed by chaining call_soon): the loop must still end, or the viewer's shutdown waits for it
    for ever (asyncio.wait_for on Python 3.11 swallowed exactly this cancel)."""
    from evalledger.cli.viewer.server import LIVE_KEY
    home, _ = failing

    async def main():
        live = make_app(home, token=TOKEN, live=False)[LIVE_KEY]
        await live.start()
        await asyncio.sleep(live_module.MIN_INTERVAL + 1.0)   # past the first fold: waiting for a wake-up
        loop = asyncio.get_running_loop()
        live.wake.set()                                        # the waiting task resumes next turn...
        loop.call_soon(lambda: loop.call_soon(live.task.cancel))   # ...the cancel lands the turn after
        done, _ = await asyncio.wait({live.task}, timeout=3)
        assert done, "the fold loop went on after its cancel"
        await live.stop()

    asyncio.run(main())


def test_the_compare_page_without_another_home_offers_no_form_that_cannot_work(failing, tmp_path):
    """It said "or give one here" over a form whose home the server (rightly) never opens: the
    form only reloaded the same page, whatever home was typed in."""
    home, _ = failing
    other = tmp_path / "other"
    failing_home(other)

    async def test(client):
        response = await client.get("/compare", params={"home": str(other)})
        return response.status, await response.text()
    status, text = serve(home, test)
    assert status == 200 and "--compare OTHER_HOME" in text
    assert not [tag for tag, attrs in tags_of(text) if tag in ("form", "input")]
