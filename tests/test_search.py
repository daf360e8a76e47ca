"""The search port: local FTS5 corpus, a user callable, Tavily degrading without a key, replay."""

from __future__ import annotations

import asyncio
import sys
import types

import pytest

from evalledger import ledger
from evalledger.stages.search import SearchSettings, make_search
from evalledger.stages.search.backends import TavilySearch
from evalledger.stages.search.local import fts_query


@pytest.fixture()
def home(tmp_path):
    corpus = tmp_path / "home" / "corpus"
    corpus.mkdir(parents=True)
    (corpus / "apollo.md").write_text(
        "# Apollo 11\n\nApollo 11 landed on the Moon on July 20, 1969. Neil Armstrong was the commander.\n\n"
        "Buzz Aldrin was the lunar module pilot.\n")
    (corpus / "genes.txt").write_text("BCL2 is located on chromosome 18q21.33 and inhibits apoptosis.\n")
    (corpus / "notes.pdf").write_text("Apollo Apollo Apollo (not indexed: not .md or .txt)")
    return tmp_path / "home"


def search(home, query, case_id="case1", settings=None, source=None):
    async def go():
        with ledger.open_ledger(home) as led:
            port = make_search(settings or SearchSettings(), led, source=source)
            results = await port.search(query, case_id=case_id)
            await port.aclose()
            return results, port
    return asyncio.run(go())


def recorded(home):
    with ledger.open_ledger(home) as led:
        return [e.data for e in led.read(types=["judge.called"])]


def test_local_search_ranks_the_relevant_passage_first_and_is_recorded(home):
    results, _ = search(home, "Who commanded Apollo 11?")
    assert results[0] == {"title": "Apollo 11", "content": "Apollo 11 landed on the Moon on July 20, 1969. "
                          "Neil Armstrong was the commander.", "url": "corpus/apollo.md#1"}
    assert all("pdf" not in r["url"] for r in results)
    [call] = recorded(home)
    assert (call["role"], call["backend"], call["degraded"], call["error"]) == ("search", "local", False, None)
    assert call["reply"]["results"] == results and call["request"]["payload"] == {"query": "Who commanded Apollo 11?"}


def test_local_search_sees_a_new_document_and_finds_nothing_for_unknown_words(home):
    assert search(home, "zebra stripes")[0] == []
    (home / "corpus" / "zoo.md").write_text("Zebra stripes confuse biting flies.\n")
    assert search(home, "zebra stripes", case_id="case2")[0][0]["url"] == "corpus/zoo.md#1"


def test_a_recorded_search_is_reused_while_the_corpus_is_the_same(home):
    first, _ = search(home, "apoptosis gene")
    again, _ = search(home, "apoptosis gene")
    assert again == first and len(recorded(home)) == 1
    (home / "corpus" / "genes.txt").write_text("BCL2 blocks apoptosis, a gene of note.\n")
    changed, _ = search(home, "apoptosis gene")
    assert changed[0]["content"] == "BCL2 blocks apoptosis, a gene of note."
    assert len(recorded(home)) == 2 and recorded(home)[0]["model"] != recorded(home)[1]["model"]


def test_fts_query_is_safe_for_any_text():
    assert fts_query('What "is" NEAR(x) AND -y * ?') == '"near"'
    assert fts_query('apoptosis "BCL2" (gene*)') == '"apoptosis" OR "bcl2" OR "gene"'
    assert fts_query("the of and ?") == ""


def test_a_user_callable_named_module_function(home, monkeypatch):
    module = types.ModuleType("my_search_module")
    module.lookup = lambda query: [{"title": "T", "content": f"about {query}", "url": "https://x"}] * 5
    monkeypatch.setitem(sys.modules, "my_search_module", module)
    results, _ = search(home, "tuna", settings=SearchSettings(backend="my_search_module:lookup"))
    assert len(results) == 3 and results[0]["content"] == "about tuna"
    assert recorded(home)[0]["backend"] == "callable" and recorded(home)[0]["model"] == "my_search_module:lookup"


def test_a_failing_callable_degrades_to_no_results(home, monkeypatch):
    module = types.ModuleType("broken_search")

    def lookup(query):
        raise RuntimeError("index offline")
    module.lookup = lookup
    monkeypatch.setitem(sys.modules, "broken_search", module)
    results, _ = search(home, "tuna", settings=SearchSettings(backend="broken_search:lookup"))
    assert results == []
    [call] = recorded(home)
    assert call["degraded"] is True and "index offline" in call["error"]
    # a degraded search is not reused: the next try is a new attempt
    search(home, "tuna", settings=SearchSettings(backend="broken_search:lookup"))
    assert [c["attempt"] for c in recorded(home)] == [1, 2]


def test_tavily_without_a_key_degrades_gracefully(home, monkeypatch):
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    results, _ = search(home, "moon landing", settings=SearchSettings(backend="tavily"))
    assert results == []
    [call] = recorded(home)
    assert call["backend"] == "tavily" and call["degraded"] is True and "TAVILY_API_KEY" in call["error"]


def test_tavily_client_failure_degrades_and_never_records_the_key(home, monkeypatch):
    secret = "tvly-SECRET-never-store-42"
    monkeypatch.setenv("TAVILY_API_KEY", secret)

    class FailingClient:
        def __init__(self, key):
            self.key = key

        def search(self, query, **kwargs):
            raise ConnectionError(f"401 for key {self.key}")

    async def go():
        with ledger.open_ledger(home) as led:
            port = make_search(SearchSettings(backend="tavily"), led)
            port.backend = TavilySearch(client_factory=FailingClient)
            return await port.search("moon", case_id="case1")

    assert asyncio.run(go()) == []
    assert "[redacted]" in recorded(home)[0]["error"]
    for path in home.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes()


def test_tavily_results_are_normalised(home, monkeypatch):
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-x")
    seen = {}

    class Client:
        def __init__(self, key):
            pass

        def search(self, query, **kwargs):
            seen.update(kwargs)
            return {"results": [{"title": "Moon", "content": "1969", "url": "https://m", "score": 0.9}]}

    backend = TavilySearch(client_factory=Client)
    assert backend.search("moon", 3) == [{"title": "Moon", "content": "1969", "url": "https://m", "score": 0.9}]
    assert seen == {"max_results": 3, "search_depth": "basic"}


def test_replayed_search_answers_from_the_source(home, tmp_path):
    first, _ = search(home, "Who commanded Apollo 11?")
    target = tmp_path / "target"
    replayed, port = search(target, "Who commanded Apollo 11?",
                            settings=SearchSettings(backend="replay", replay_source=str(home)))
    assert replayed == first
    [call] = recorded(target)
    assert call["backend"] == "replay" and call["source_backend"] == "local"
    missing, port = search(target, "never asked", settings=SearchSettings(backend="replay", replay_source=str(home)))
    assert missing == [] and port.misses and recorded(target)[-1]["degraded"] is True


def test_a_replayed_search_without_any_ledger_is_refused():
    with pytest.raises(ValueError, match="needs a ledger"):
        make_search(SearchSettings(backend="replay"), None)
