"""The overview's runs: judge backend and model, config hashes, and the tokens and cost of each
run's judge calls, summed in the viewer's index (not from the events on each page view), with
the cost "unknown" (never 0) when a call of the run had no price."""

from __future__ import annotations

import asyncio
import re

import pytest
from aiohttp.test_utils import TestClient, TestServer

from conftest import cli
from evalledger import ledger
from evalledger.cli.viewer import index, make_app
from evalledger.cli.viewer.state import HomeView
from evalledger.testing import synthetic as syn
from viewer_support import costed_home, usage_by_run


@pytest.fixture(scope="module")
def costed(tmp_path_factory):
    return costed_home(tmp_path_factory.mktemp("costed"), cli)


def test_each_run_has_the_tokens_and_cost_of_its_judge_calls(costed):
    expected = usage_by_run(costed)
    assert len(expected) == 2 and sorted(e["cost"] is None for e in expected.values()) == [False, True]
    view = HomeView(costed)
    try:
        _, runs = view.overview()
    finally:
        view.close()
    assert set(runs) == set(expected)
    for run_id, want in expected.items():
        usage = runs[run_id]["usage"]
        assert want["tokens"] > 0 and usage["calls"] == want["calls"] and usage["tokens"] == want["tokens"]
        assert (None if usage["cost"] is None else round(usage["cost"], 6)) == want["cost"]
        assert (usage["unpriced_calls"] > 0) == (want["cost"] is None)
        assert runs[run_id]["started"]["judge"] == {"backend": "openai", "model": "judge-1"}


def test_the_overview_page_shows_unknown_beside_a_known_cost(costed):
    expected = usage_by_run(costed)

    async def main():
        async with TestClient(TestServer(make_app(costed, token="t", live=False), host="127.0.0.1")) as client:
            return await (await client.get("/")).text()
    text = asyncio.run(main())
    runs = re.search(r'<table class="runs">.*?</table>', text).group(0)
    rows = re.findall(r"<tr>(.*?)</tr>", runs)[1:]
    assert len(rows) == 2
    for row in rows:
        cells = re.findall(r"<td>(.*?)</td>", row)
        want = expected[cells[0]]
        assert cells[1:3] == ["openai", "judge-1"] and re.fullmatch(r"[0-9a-f]{12}", cells[3])
        assert f'<span class="tokens">{want["tokens"]}</span>' == cells[8]
        cost = "unknown" if want["cost"] is None else f'{want["cost"]:.6f}'
        assert f'<span class="cost">{cost}</span>' == cells[9]
    assert re.search(r'<p id="totals">tokens \d+, cost unknown USD</p>', text)   # one run was unpriced


def test_sums_follow_new_calls_and_equal_a_fresh_build(costed, tmp_path):
    """Calls appended later are added by the next sync; the sums equal those of an index built at
    once from the whole ledger (integer nano-USD: the same whatever the batches)."""
    home = tmp_path / "copy"
    ledger.init_home(home)
    with ledger.open_ledger(costed, readonly=True) as src, ledger.open_ledger(home) as led:
        led.append([ledger.NewEvent(e.stream, e.type, e.data, key=e.id, meta=e.meta) for e in src.read()])
    view = HomeView(home)
    try:
        before = index.run_usage(view.index)
        case_id = next(iter(view.all_case_ids()))
        with ledger.open_ledger(home) as led:
            for i, cost in enumerate([0.0000013, 0.25, 0.0000007]):
                call = syn.judge_call(case_id, "decompose", step=f"late-{i}", tokens=(10, i), cost=cost)
                call.meta["run"] = "late-run"
                led.append(call)
            orphan = syn.judge_call(case_id, "decompose", step="orphan", tokens=(5, 5), cost=0.5)
            led.append(orphan)
        assert view.refresh()
        after = index.run_usage(view.index)
    finally:
        view.close()
    assert {k: v for k, v in after.items() if k in before} == before
    assert after["late-run"] == {"calls": 3, "input_tokens": 30, "output_tokens": 3, "tokens": 33,
                                 "cost": 0.250002, "unpriced_calls": 0}
    assert after[index.NO_RUN]["tokens"] == 10 and after[index.NO_RUN]["cost"] == 0.5
    (home / "view-index.db").unlink()
    fresh = HomeView(home)
    try:
        assert index.run_usage(fresh.index) == after
        _, runs = fresh.overview()
    finally:
        fresh.close()
    assert runs[index.NO_RUN]["usage"]["calls"] == 1 and runs["late-run"]["started"] is None
