"""Size limits: responses at intake (``--max-response-chars``) and what a judge reply may put into
a ``judge.called`` event (the raw text is cut, an oversized reply refused), against a real
chat-completions server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from intake_support import events, response_lines
from evalledger import ledger
from evalledger.stages.intake import DEFAULT_MAX_RESPONSE_CHARS, MAX_RESPONSE_CHARS_LIMIT
from evalledger.stages.judge import JudgeCallFailed, JudgeSettings, make_judge
from evalledger.stages.judge.reply_caps import MAX_REPLY_CHARS, MAX_STORED_RAW_CHARS
from evalledger.testing.stand_in import Reply, StandIn

SECRET = "sk-evalledger-size-test-DO-NOT-STORE"
TRAIT = {"question": "What is 15 multiplied by 7?", "response": "15 multiplied by 7 is 105.",
         "trait": {"name": "completeness", "kind": "score", "min_score": 1, "max_score": 5}}


# --- responses at intake -------------------------------------------------------------------------

def test_a_response_over_the_default_cap_rejects_its_file_naming_the_line(home, run_cli, tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_text(response_lines("bench", [("q1", "m", "ok"), ("q2", "m", "x" * (DEFAULT_MAX_RESPONSE_CHARS + 1))]))
    done = run_cli("ingest", path, home=home)
    assert done.returncode == 1
    assert (f"big.jsonl: line 2: the response is {DEFAULT_MAX_RESPONSE_CHARS + 1} characters, over the limit "
            f"of {DEFAULT_MAX_RESPONSE_CHARS} per response (--max-response-chars)") in done.stdout
    [rejected] = events(ledger.open_ledger(home), "benchmark.rejected")
    assert rejected.data["errors"][0]["where"] == "line 2"
    again = run_cli("ingest", "--max-response-chars", DEFAULT_MAX_RESPONSE_CHARS + 1, path, home=home)
    assert again.returncode == 0 and again.stdout.startswith("pending")


def test_the_cap_counts_the_texts_of_a_reconstruction_response(home, run_cli, tmp_path):
    from evalledger.stages.formats import ParsedResponse
    from evalledger.stages.intake import response_size_problems
    response = ParsedResponse("d1", "m", {"answers": ["a" * 60, "b" * 60], "synthesis": "c" * 60}, "$.response")
    assert response_size_problems([response], 180) == []
    [problem] = response_size_problems([response], 179)
    assert problem.where == "$.response" and "180 characters" in problem.reason


@pytest.mark.parametrize("value", [0, MAX_RESPONSE_CHARS_LIMIT + 1])
def test_the_cap_itself_is_bounded(home, run_cli, value):
    for command in (["ingest"], ["watch", "--once"]):
        done = run_cli(*command, "--max-response-chars", value, home=home)
        assert done.returncode == 2 and "--max-response-chars must be between 1 and" in done.stderr


def test_watch_applies_its_cap(home, run_cli):
    (home / "inbox" / "big.jsonl").write_text(response_lines("bench", [("q1", "m", "x" * 50)]))
    done = run_cli("watch", "--once", "--max-response-chars", 10, home=home)
    assert done.returncode == 1
    assert (home / "rejected" / "big.jsonl.error.txt").read_text().count("over the limit of 10") == 1


# --- judge replies --------------------------------------------------------------------------------

@pytest.fixture(autouse=True)
def secret_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def ask(home: Path, *replies: Reply, **overrides):
    """Serve ``replies`` from a stand-in and make one score_trait call; the reply or the error."""
    server = StandIn()

    async def go():
        url = await server.start()
        led = ledger.open_ledger(home)
        judge = make_judge(JudgeSettings(backend="openai", model="stand-in-1", base_url=url, timeout_s=10,
                                         backoff_base_s=0.01, max_attempts=2, **overrides), led)
        try:
            server.script(*replies)
            return await asyncio.wait_for(judge.call("score_trait", TRAIT, case_id="c1"), 60)
        except JudgeCallFailed as exc:
            return exc
        finally:
            await judge.aclose()
            await server.stop()
            led.close()

    return asyncio.run(go())


def recorded(home: Path) -> list[dict]:
    with ledger.open_ledger(home) as led:
        return [e.data for e in led.read(types=["judge.called"])]


def test_an_invalid_huge_reply_is_stored_cut_with_the_reason_and_the_reask_too(tmp_path):
    home = tmp_path / "home"
    huge = "z" * (3 * MAX_STORED_RAW_CHARS)
    reply = ask(home, Reply(huge), Reply({"score": 4}), max_invalid_replies=1)
    assert reply.score == 4
    first, second = recorded(home)
    assert first["error"].startswith("invalid reply") and len(first["raw_reply"]) == MAX_STORED_RAW_CHARS
    assert first["stored_cut"] == [f"raw_reply: {len(huge)} characters, the first {MAX_STORED_RAW_CHARS} kept"]
    assert any(cut.startswith("sent[") and "the first" in cut for cut in second["stored_cut"])
    assert all(len(m["content"]) <= MAX_STORED_RAW_CHARS for m in second["sent"])
    assert second["reply"]["score"] == 4 and second["error"] is None
    assert (home / "ledger.db").stat().st_size < 2 * len(huge)


def test_a_valid_reply_over_the_cap_is_recorded_as_a_failure_and_not_used(tmp_path):
    home = tmp_path / "home"
    reasoning = "r" * (MAX_REPLY_CHARS + 10)
    outcome = ask(home, Reply({"score": 3, "reasoning": reasoning}))
    assert isinstance(outcome, JudgeCallFailed) and "over the cap" in str(outcome)
    [call] = recorded(home)
    assert call["reply"] is None and call["error"].startswith("the reply is ")
    assert f"over the cap of {MAX_REPLY_CHARS}" in call["error"]
    assert len(call["raw_reply"]) == MAX_STORED_RAW_CHARS
    assert SECRET not in json.dumps(call)


def test_a_reply_within_the_caps_is_stored_whole(tmp_path):
    home = tmp_path / "home"
    reply = ask(home, Reply({"score": 5, "reasoning": "fine " * 100}))
    assert reply.score == 5
    [call] = recorded(home)
    assert call.get("stored_cut") is None and call["reply"]["score"] == 5 and len(call["raw_reply"]) > 500
