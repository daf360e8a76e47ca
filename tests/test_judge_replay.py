"""Replay: answers only from a source ledger's judge.called events, recorded into another home."""

from __future__ import annotations

import asyncio

import pytest

from evalledger import ledger
from evalledger.stages.judge import JudgeSettings, UnrecordedRequest, make_judge
from evalledger.testing.stand_in import StandIn

MOON = "The first moon landing was on July 20, 1969. Neil Armstrong commanded Apollo 11."
PARSE = {"question": "When and who?", "response": MOON,
         "fields": [{"name": "year", "type": "int", "description": "Year of the landing"},
                    {"name": "commander", "type": "str", "description": "Name of the commander"}]}
TRAIT = {"question": "When and who?", "response": MOON,
         "trait": {"name": "clarity", "kind": "score", "min_score": 1, "max_score": 5}}


def run_calls(home, settings, calls, source=None):
    """Make ``calls`` [(role, request, case_id)] through one port; returns the replies (or errors)."""
    async def go():
        with ledger.open_ledger(home) as led:
            judge = make_judge(settings, led, source=source)
            out = []
            for role, request, case in calls:
                try:
                    out.append(await judge.call(role, request, case_id=case))
                except UnrecordedRequest as exc:
                    out.append(exc)
            await judge.aclose()
            return out, judge.unrecorded
    return asyncio.run(go())


def recorded(home):
    with ledger.open_ledger(home) as led:
        return list(led.read(types=["judge.called"]))


def test_replay_into_a_new_home_answers_from_the_source_and_records_where_from(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    calls = [("parse", PARSE, "case1"), ("score_trait", TRAIT, "case1"), ("parse", {**PARSE, "response": "No."}, "case2")]
    originals, _ = run_calls(source, JudgeSettings(), calls)
    replayed, misses = run_calls(target, JudgeSettings(backend="replay", replay_source=str(source)), calls)
    assert replayed == originals and misses == []
    src_events = {e.data["request_hash"]: e for e in recorded(source)}
    for event in recorded(target):
        data = event.data
        assert data["backend"] == "replay" and data["source_backend"] == "offline"
        assert data["source_event"] == src_events[data["request_hash"]].id
        assert data["reply"] == src_events[data["request_hash"]].data["reply"]
    # replaying again into the same home appends nothing new
    before = len(recorded(target))
    run_calls(target, JudgeSettings(backend="replay", replay_source=str(source)), calls)
    assert len(recorded(target)) == before


def test_a_request_never_recorded_is_an_error_naming_role_case_and_hash(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    run_calls(source, JudgeSettings(), [("parse", PARSE, "case1")])
    other = {**PARSE, "response": "Something else entirely."}
    results, misses = run_calls(target, JudgeSettings(backend="replay", replay_source=str(source)),
                                [("parse", other, "case9")])
    [error] = results
    assert isinstance(error, UnrecordedRequest)
    assert "'parse'" in str(error) and "case9" in str(error) and error.request_hash in str(error)
    assert misses == [{"role": "parse", "case_id": "case9", "request_hash": error.request_hash}]
    assert recorded(target) == []  # nothing was called, nothing recorded


def test_replay_else_live_answers_unrecorded_requests_live_and_records_them_as_live(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    run_calls(source, JudgeSettings(), [("parse", PARSE, "case1")])
    other = {**PARSE, "response": "It was 1969 and Neil Armstrong led it."}
    settings = JudgeSettings(backend="replay", replay_source=str(source), live="offline")
    results, misses = run_calls(target, settings, [("parse", PARSE, "case1"), ("parse", other, "case2")])
    assert results[1].values["year"] == 1969 and misses == []
    backends = [(e.stream, e.data["backend"]) for e in recorded(target)]
    assert backends == [("case:case1", "replay"), ("case:case2", "offline")]


def test_replay_answers_what_the_openai_backend_recorded_with_the_server_gone(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-replay-test")
    source, target = tmp_path / "source", tmp_path / "target"

    async def record_live():
        server = StandIn(reply_fn=lambda body: {"score": 4, "reasoning": "clear"})
        url = await server.start()
        with ledger.open_ledger(source) as led:
            judge = make_judge(JudgeSettings(backend="openai", model="m-7", base_url=url), led)
            reply = await judge.call("score_trait", TRAIT, case_id="case1")
            await judge.aclose()
        await server.stop()
        return reply

    live = asyncio.run(record_live())
    replayed, _ = run_calls(target, JudgeSettings(backend="replay", replay_source=str(source)),
                            [("score_trait", TRAIT, "case1")])
    assert replayed == [live]
    [event] = recorded(target)
    assert (event.data["model"], event.data["source_backend"]) == ("m-7", "openai")
    # and a replay of the replayed home finds the same answer again
    third, _ = run_calls(tmp_path / "third", JudgeSettings(backend="replay", replay_source=str(target)),
                         [("score_trait", TRAIT, "case1")])
    assert third == [live]


def test_replay_with_a_model_set_only_uses_that_models_answers(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    run_calls(source, JudgeSettings(), [("parse", PARSE, "case1")])
    results, _ = run_calls(target, JudgeSettings(backend="replay", model="gpt-other", replay_source=str(source)),
                           [("parse", PARSE, "case1")])
    assert isinstance(results[0], UnrecordedRequest)


def test_replay_from_the_same_ledger(tmp_path):
    home = tmp_path / "home"
    first, _ = run_calls(home, JudgeSettings(), [("parse", PARSE, "case1")])
    again, _ = run_calls(home, JudgeSettings(backend="replay", no_cache=True), [("parse", PARSE, "case1")])
    assert again == first
    assert [e.data["backend"] for e in recorded(home)] == ["offline", "replay"]


@pytest.mark.parametrize("missing", ["nope"])
def test_replay_from_a_missing_home_is_refused(tmp_path, missing):
    with pytest.raises(ledger.LedgerError):
        make_judge(JudgeSettings(backend="replay", replay_source=str(tmp_path / missing)), None)


def test_replay_from_an_exported_jsonl_ledger_into_a_jsonl_ledger(tmp_path):
    source = tmp_path / "source"
    originals, _ = run_calls(source, JudgeSettings(), [("parse", PARSE, "case1"), ("score_trait", TRAIT, "case1")])
    with ledger.open_ledger(source) as led:
        led.export(tmp_path / "exported.jsonl")
    target = tmp_path / "target.jsonl"
    replayed, misses = run_calls(target, JudgeSettings(backend="replay", replay_source=str(tmp_path / "exported.jsonl")),
                                 [("parse", PARSE, "case1"), ("score_trait", TRAIT, "case1")])
    assert replayed == originals and misses == []
    assert [e.data["backend"] for e in recorded(target)] == ["replay", "replay"]
    with ledger.open_ledger(target) as led:
        assert led.verify().ok
