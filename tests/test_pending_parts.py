"""Responses that arrive before their benchmark are held in bounded-size events, atomically, and
resolved from those parts (issue 15 T2); a home holding one big pending event (every old home)
still resolves and reads the same. Parts of PART responses, not 10,000 (the readers do not depend
on the size), and files spooled from a few hundred bytes, so the streamed paths run in seconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalledger import ledger
from evalledger.stages import intake_events as ev
from evalledger.stages.formats.model import ParsedResponse
from evalledger.stages.intake import ingest_path, resolve_pending
from evalledger.stages.replaying import seed_replay
from intake_support import write_sums_benchmark

PART = 7
QUESTIONS = 10
RESPONSES = 40             # a pending event of 7 and parts of 7, 7, 7, 7, 5
HELD_TYPES = ["responses.registered", "responses.pending_added"]


def _files(folder: Path, count: int = RESPONSES, bad_at: int | None = None) -> tuple[Path, Path]:
    """A benchmark of QUESTIONS questions and a responses JSONL file of ``count`` responses to it
    (the response ``bad_at`` names a question it lacks)."""
    folder.mkdir(parents=True, exist_ok=True)
    bench = write_sums_benchmark(folder / "b.benchmark.json", "held", QUESTIONS)
    lines = [{"benchmark": "held", "question_id": "q-none" if i == bad_at else f"q{i % QUESTIONS}",
              "model": f"m{i // QUESTIONS}", "text": f"It is {i % QUESTIONS + 1}."} for i in range(count)]
    responses = folder / "r.jsonl"
    responses.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return bench, responses


def _home(path: Path) -> Path:
    return ledger.init_home(path)


def _events(home: Path, types: list[str]) -> list[ledger.Event]:
    with ledger.open_ledger(home, readonly=True) as led:
        return list(led.read(types=types))


def _cases(home: Path) -> list[dict]:
    """Every case.opened payload, by case id (a resolution and a direct ingest open them in the
    same order, but compare them as a set of cases)."""
    return sorted((e.data for e in _events(home, ["case.opened"])), key=lambda d: d["case_id"])


def _ingest(home: Path, path: Path, spool_above: int) -> str:
    with ledger.open_ledger(home) as led:
        return ingest_path(led, path, spool_above=spool_above).status


@pytest.mark.parametrize("spool_above", [100, 1 << 30], ids=["streamed", "whole"])
def test_pending_responses_are_held_in_parts_and_resolved_all_at_once(tmp_path, monkeypatch, spool_above):
    monkeypatch.setattr(ev, "PART_CASES", PART)
    bench, responses = _files(tmp_path / "files")
    home = _home(tmp_path / "h")
    assert _ingest(home, responses, spool_above) == "pending"
    held = _events(home, HELD_TYPES)
    assert [e.type for e in held] == ["responses.registered"] + ["responses.pending_added"] * 5
    assert [len(e.data["responses"]) for e in held] == [7, 7, 7, 7, 7, 5]
    assert held[0].data["count"] == RESPONSES and held[0].data["pending"] is True
    assert [e.data["part"] for e in held[1:]] == [1, 2, 3, 4, 5]
    assert {e.stream for e in held} == {held[0].stream}
    assert [e.seq for e in held] == list(range(held[0].seq, held[0].seq + 6))     # one batch
    sha = held[0].data["sha256"]
    assert [e.id for e in held[1:]] == [ledger.event_id(f"file:{sha}", "responses.pending_added",
                                                        f"pending:{sha}:responses:{n}") for n in range(1, 6)]
    whole = list(ev.held_responses(held[0].data, (e.data for e in held[1:])))
    assert [r.where for r in whole] == [f"line {n}" for n in range(1, RESPONSES + 1)]

    assert _ingest(home, bench, spool_above) == "accepted"
    direct = _home(tmp_path / "direct")             # the other order, for comparison
    assert _ingest(direct, bench, spool_above) == "accepted" and _ingest(direct, responses, spool_above) == "accepted"
    assert len(_cases(home)) == RESPONSES
    assert [{**c, "source": None} for c in _cases(home)] == [{**c, "source": None} for c in _cases(direct)]
    records = _events(home, ["responses.registered", "responses.cases_added"])[1:]
    assert [len(e.data["cases"]) for e in records] == [7, 7, 7, 7, 7, 5]
    assert records[0].data["resolved_from"] == held[0].id and records[0].data["count"] == RESPONSES
    with ledger.open_ledger(home) as led:
        assert resolve_pending(led) == 0             # exactly once


def test_streamed_and_whole_reads_hold_the_same_events(tmp_path, monkeypatch):
    monkeypatch.setattr(ev, "PART_CASES", PART)
    _, responses = _files(tmp_path / "files")
    shown = []
    for spool_above in (100, 1 << 30):
        home = _home(tmp_path / f"h{spool_above}")
        assert _ingest(home, responses, spool_above) == "pending"
        shown.append([(e.type, e.stream, e.id, e.data) for e in _events(home, ["file.received", *HELD_TYPES])])
    assert shown[0] == shown[1]


def test_a_file_of_at_most_one_part_keeps_its_single_pending_event():
    source = {"file": "r.jsonl", "sha256": "0" * 64}
    responses = [ParsedResponse(f"q{i}", "m", "t", f"line {i + 1}") for i in range(ev.PART_CASES)]
    [one] = ev.pending_parts("b", iter(responses), len(responses), source, "cause")
    assert one == ev.pending("b", responses, source, "cause")
    head, part = ev.pending_parts("b", iter([*responses, responses[0]]), len(responses) + 1, source, "cause")
    assert len(head.data["responses"]) == ev.PART_CASES and head.data["count"] == ev.PART_CASES + 1
    assert part.type == "responses.pending_added" and part.key == f"pending:{'0' * 64}:responses:1"


def test_parts_are_bounded_in_bytes_too(monkeypatch):
    monkeypatch.setattr(ev, "PART_CASES", 3)
    monkeypatch.setattr(ev, "PART_BYTES", 1000)
    source = {"file": "r.jsonl", "sha256": "0" * 64}
    responses = [ParsedResponse("q", f"m{i}", "x" * 400, f"line {i + 1}") for i in range(5)]
    events = list(ev.pending_parts("b", iter(responses), 5, source, "cause"))
    assert [len(e.data["responses"]) for e in events] == [2, 2, 1]
    assert list(ev.held_responses(events[0].data, (e.data for e in events[1:]))) == responses


def test_an_old_home_with_one_big_pending_event_resolves_the_same(tmp_path, monkeypatch):
    """The old shape made through the public API (parts larger than the file: one event holding
    every response), then resolved with small parts: the same cases and record as a new home."""
    bench, responses = _files(tmp_path / "files")
    old, new = _home(tmp_path / "old"), _home(tmp_path / "new")
    assert _ingest(old, responses, 100) == "pending"
    [big] = _events(old, HELD_TYPES)
    assert len(big.data["responses"]) == RESPONSES
    monkeypatch.setattr(ev, "PART_CASES", PART)
    assert _ingest(new, responses, 100) == "pending" and len(_events(new, HELD_TYPES)) == 6
    for home in (old, new):
        assert _ingest(home, bench, 100) == "accepted"
    assert _cases(old) == _cases(new)
    recorded = [[e.data for e in _events(home, ["responses.registered", "responses.cases_added"])
                 if not e.data.get("pending")] for home in (old, new)]
    assert len(recorded[0]) == 6
    assert [{k: v for k, v in d.items() if k != "resolved_from"} for d in recorded[0]] == \
        [{k: v for k, v in d.items() if k != "resolved_from"} for d in recorded[1]]


def test_a_response_naming_no_question_in_a_late_part_rejects_the_whole_file(tmp_path, monkeypatch):
    monkeypatch.setattr(ev, "PART_CASES", PART)
    bench, responses = _files(tmp_path / "files", bad_at=RESPONSES - 2)
    home = _home(tmp_path / "h")
    assert _ingest(home, responses, 100) == "pending"
    with ledger.open_ledger(home) as led:
        result = ingest_path(led, bench, spool_above=100)
    assert result.status == "accepted" and any("rejected" in note and f"line {RESPONSES - 1}" in note
                                               for note in result.notes)
    assert _cases(home) == []
    [rejected] = [e for e in _events(home, ["responses.registered"]) if e.data.get("rejected")]
    assert rejected.data["errors"] == [{"where": f"line {RESPONSES - 1}: $.question_id",
                                        "reason": "unknown question id 'q-none' in benchmark 'held' "
                                                  f"({rejected.data['benchmark']})"}]


def test_resolve_pending_closes_the_race_once(tmp_path, monkeypatch):
    """A benchmark registered by another process's batch that did not see the pending file (here
    appended without its resolution): the next ``resolve_pending`` opens every case, once."""
    monkeypatch.setattr(ev, "PART_CASES", PART)
    bench, responses = _files(tmp_path / "files")
    home = _home(tmp_path / "h")
    assert _ingest(home, responses, 100) == "pending"
    other = _home(tmp_path / "other")
    assert _ingest(other, bench, 100) == "accepted"
    registration = [e for e in _events(other, ["file.received", "benchmark.registered"])]
    with ledger.open_ledger(home) as led:
        led.append([ledger.NewEvent(e.stream, e.type, e.data, key=e.data.get("sha256") or e.data["benchmark"])
                    for e in registration])
        assert resolve_pending(led) == RESPONSES
        assert resolve_pending(led) == 0
    assert len(_cases(home)) == RESPONSES


def test_a_replay_copies_the_parts_with_their_pending_event(tmp_path, monkeypatch):
    monkeypatch.setattr(ev, "PART_CASES", PART)
    _, responses = _files(tmp_path / "files")
    home = _home(tmp_path / "h")
    assert _ingest(home, responses, 100) == "pending"
    target = _home(tmp_path / "replayed")
    with ledger.open_ledger(home, readonly=True) as source, ledger.open_ledger(target) as led:
        seed_replay(source, led, str(home), {}, None)
    assert [e.data for e in _events(target, HELD_TYPES)] == [e.data for e in _events(home, HELD_TYPES)]


def test_the_cli_holds_resolves_and_verifies(tmp_path, run_cli):
    """Through the command line (one part: the CLI's part size is 10,000): pending, then resolved
    by the benchmark, status and verify agree."""
    bench, responses = _files(tmp_path / "files")
    home = tmp_path / "h"
    run_cli("init", home=home)
    held = run_cli("ingest", responses, home=home)
    assert held.returncode == 0 and held.stdout.startswith("pending")
    status = json.loads(run_cli("status", "--json", home=home).stdout)
    assert [p["responses"] for p in status["pending"]] == [RESPONSES]
    done = run_cli("ingest", bench, home=home)
    assert done.returncode == 0 and "including the responses of 1 pending file" in done.stdout
    assert json.loads(run_cli("status", "--json", home=home).stdout)["pending"] == []
    assert run_cli("verify", home=home).returncode == 0
    assert len(_cases(home)) == RESPONSES
