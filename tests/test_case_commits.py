"""Group commit of finished cases (issue 16 item 11, issue 15 item 3).

A run commits the free judge calls of a case (offline, replayed) with the case's outputs and
tracking position, and the cases that finish together share one transaction. Events of one
transaction share their ``recorded_at``, which is how the tests below see transactions through
the public interfaces. The watermark keeps issue 13's rule: a stage's tracking position never
passes a case that is still open, whatever order cases commit in.
"""

from __future__ import annotations

import asyncio
import collections
import json
import random
from dataclasses import dataclass

from evalledger import ledger
from evalledger.ledger import EnvelopeError, NewEvent
from evalledger.stages.case_commits import CaseCommits, Watermarks
from evalledger.stages.dispatcher import RunSettings, run_until_idle
from evalledger.stages.intake import ingest_path
from evalledger.stages.replaying import replay_into
from stages_support import InterruptedOnce


@dataclass(frozen=True)
class Stage:
    """A stage as the watermarks see it: a name and a tracking record."""

    name: str

    @property
    def tracking(self) -> str:
        return f"stage:{self.name}"


TEMPLATE = Stage("template")


def arithmetic_benchmark(questions: int) -> dict:
    """``questions`` arithmetic questions, each answered right and wrong, under deep judgment."""
    items, responses = [], []
    for i in range(questions):
        a, b = 12 + i, 7
        items.append({"id": f"q{i}", "question": f"What is {a} times {b}?", "template": {"fields": [
            {"name": "result", "type": "int", "description": "The product", "ground_truth": a * b,
             "verify_with": {"type": "NumericTolerance", "tolerance": 0, "mode": "absolute"}}]}})
        for model, value in (("right", a * b), ("wrong", a * b + 1)):
            responses.append({"question_id": f"q{i}", "model": model, "text": f"{a} x {b} = {value}."})
    return {"format": "evalledger/benchmark@1", "name": "group-commit", "questions": items,
            "responses": responses, "config": {"deep_judgment_enabled": True}}


def transactions(home) -> dict[str, list[tuple[str, str]]]:
    """recorded_at -> [(type, stream)] of the judging events (one entry per transaction)."""
    out: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
    with ledger.open_ledger(home, readonly=True) as led:
        for event in led.read(types=["judge.called", "case.judged", "stage.failed"]):
            out[event.meta["recorded_at"]].append((event.type, event.stream))
    return out


def assert_each_case_in_one_transaction_with_its_calls(home, cases: int) -> None:
    """Every case judged once, its judge calls in the transaction of its verdict, cases sharing them."""
    groups = transactions(home)
    judged = [stream for group in groups.values() for kind, stream in group if kind == "case.judged"]
    assert len(judged) == len(set(judged)) == cases
    for group in groups.values():
        verdicts = {stream for kind, stream in group if kind == "case.judged"}
        assert verdicts, "no judge call is committed apart from its case's verdict"
        assert {stream for _, stream in group} == verdicts
    assert len(groups) < cases / 2, "finished cases share transactions"


def test_a_run_commits_each_case_with_its_calls_and_several_cases_a_transaction(tmp_path, run_cli):
    source = tmp_path / "bench.json"
    source.write_text(json.dumps(arithmetic_benchmark(20)))
    home = ledger.init_home(tmp_path / "home")
    with ledger.open_ledger(home) as led:
        assert ingest_path(led, source).status == "accepted"
    done = run_cli("run", "--quiet", home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert_each_case_in_one_transaction_with_its_calls(home, 40)
    # Replay: the recorded answers are committed the same way, and the verdicts are the same.
    result = replay_into(home, tmp_path / "replayed")
    assert result.summary.judged == 40 and result.missing == [] and result.live_calls == 0
    assert_each_case_in_one_transaction_with_its_calls(tmp_path / "replayed", 40)

    def verdicts(path):
        with ledger.open_ledger(path, readonly=True) as led:
            assert led.verify().ok
            return sorted((e.data["case_id"], e.data.get("verdict")) for e in led.read(types=["case.judged"]))

    assert verdicts(tmp_path / "replayed") == verdicts(home)
    # Done again from scratch (tracking forgotten), the run appends nothing: the calls committed
    # with each case are found and reused, the outputs exist under their ids.
    with ledger.open_ledger(home) as led:
        head = led.head()
        led.append([], tracking=("stage:template", 0))
        assert run_until_idle(led, RunSettings(judge_backend="offline")).cases == 0
        assert led.head() == head


def opened_cases(led, count: int) -> list[int]:
    """Append ``count`` case.opened-like notes; their seqs stand for the cases of a scan."""
    stored = led.append([NewEvent(f"case:c{i}", "note.added", {"text": f"case {i}"}, key=f"c{i}")
                         for i in range(count)])
    return [e.seq for e in stored]


def verdict(case: int, text: str = "ok") -> NewEvent:
    return NewEvent(f"case:c{case}", "note.added", {"text": text}, key=f"verdict-{case}")


def test_the_watermark_never_passes_an_open_case_in_any_commit_order(tmp_path):
    rng = random.Random(13)
    with ledger.open_ledger(tmp_path / "home") as led:
        seqs = opened_cases(led, 300)
        marks = Watermarks(led, led.head().seq, [(TEMPLATE, s) for s in seqs], [TEMPLATE])
        still = set(seqs)
        order = seqs[:]
        rng.shuffle(order)
        while order:
            size = rng.randint(1, 7)
            batch, order = order[:size], order[size:]
            tracking = marks.after(TEMPLATE, batch)
            expected = min(still - set(batch), default=led.head().seq + 1) - 1
            assert marks.lowest(TEMPLATE.name, batch) == min(still - set(batch), default=None)
            if tracking is not None:
                assert tracking == (TEMPLATE.tracking, expected)
                led.append([], tracking=tracking)
            assert led.tracking_position(TEMPLATE.tracking) <= expected
            marks.committed(TEMPLATE, batch)
            still -= set(batch)
        assert led.tracking_position(TEMPLATE.tracking) == led.head().seq


def test_an_interrupted_group_commit_leaves_its_cases_open_and_the_others_commit(tmp_path):
    with ledger.open_ledger(tmp_path / "home") as led:
        seqs = opened_cases(led, 6)
        marks = Watermarks(led, led.head().seq, [(TEMPLATE, s) for s in seqs], [TEMPLATE])
        faulty = InterruptedOnce(led, 1)
        commits = CaseCommits(faulty, marks)

        def judged(case):
            return NewEvent(f"case:c{case}", "case.judged", {"case_id": f"c{case}", "question_id": "q",
                            "model": "m", "verdict": "pass", "fields": []}, key=f"judged-{case}")

        async def go():
            first = [asyncio.ensure_future(commits.commit(TEMPLATE, seqs[i], [verdict(i)])) for i in (1, 2)]
            await asyncio.sleep(0)
            return await asyncio.gather(*first, return_exceptions=True)

        assert all(not isinstance(r, BaseException) for r in asyncio.run(go()))
        assert marks.open[TEMPLATE.name] == set(seqs) - {seqs[1], seqs[2]}
        assert led.tracking_position(TEMPLATE.tracking) == seqs[0] - 1   # case 0 is still open

        async def interrupted():
            return await asyncio.gather(commits.commit(TEMPLATE, seqs[0], [judged(0)]),
                                        commits.commit(TEMPLATE, seqs[3], [verdict(3)]),
                                        return_exceptions=True)

        try:
            outcomes = asyncio.run(interrupted())
        except KeyboardInterrupt:
            outcomes = None
        assert outcomes is None or all(isinstance(o, KeyboardInterrupt) for o in outcomes)
        assert {seqs[0], seqs[3]} <= marks.open[TEMPLATE.name], "nothing committed: both stay open"
        assert led.tracking_position(TEMPLATE.tracking) == seqs[0] - 1
        assert not list(led.read(types=["case.judged"]))


def test_a_case_the_ledger_refuses_fails_alone_and_the_cases_beside_it_commit(tmp_path):
    with ledger.open_ledger(tmp_path / "home") as led:
        seqs = opened_cases(led, 3)
        marks = Watermarks(led, led.head().seq, [(TEMPLATE, s) for s in seqs], [TEMPLATE])
        commits = CaseCommits(led, marks)
        bad = NewEvent("case:c1", "judge.called", {"role": "parse", "backend": "offline", "request_hash": "a" * 64,
                                                   "attempt": 1, "latency_ms": float("nan")}, key="bad")

        async def go():
            return await asyncio.gather(*(commits.commit(TEMPLATE, seqs[i], [verdict(i)] + ([bad] if i == 1 else []))
                                          for i in range(3)), return_exceptions=True)

        good0, failed, good2 = asyncio.run(go())
        assert isinstance(failed, EnvelopeError)
        assert [e.stream for e in good0] == ["case:c0"] and [e.stream for e in good2] == ["case:c2"]
        assert marks.open[TEMPLATE.name] == {seqs[1]}
        assert led.tracking_position(TEMPLATE.tracking) == seqs[1] - 1


def test_the_call_index_takes_no_look_while_a_case_commit_is_under_way_off_the_loop(tmp_path):
    """A lookup of recorded calls on the event loop would wait for the case-commit thread's
    transaction on the ledger's lock: while it is under way the index counts it and looks at
    nothing, and once it is folded the index knows its calls without reading them back."""
    from functools import partial

    from evalledger.stages.judge.recorded_calls import appending, note_appended
    from evalledger.stages.judge.recording import call_event, index_for

    with ledger.open_ledger(tmp_path / "home") as led:
        seqs = opened_cases(led, 2)
        index = index_for(led)
        seen: list[tuple[int, bool]] = []

        def appended(stored):
            seen.append((index.appending, index.catch_up()))   # inside the commit: counted, no look
            note_appended(led, stored)

        marks = Watermarks(led, led.head().seq, [(TEMPLATE, s) for s in seqs], [TEMPLATE])
        commits = CaseCommits(led, marks, appended, off_loop=True, appending=partial(appending, led))
        call = call_event("c0", {"role": "parse", "backend": "offline", "model": None, "request_hash": "e" * 64,
                                 "attempt": 1, "error": None, "reply": {"values": {}}}, 1, 1)

        async def go():
            return await asyncio.gather(commits.commit(TEMPLATE, seqs[0], [call, verdict(0)]),
                                        commits.commit(TEMPLATE, seqs[1], [verdict(1)]))

        try:
            stored = asyncio.run(go())
        finally:
            commits.close()
        assert seen == [(3, False)]
        assert index.appending == 0
        assert index.success("e" * 64).id == stored[0][0].id   # folded, found without a read
        assert led.tracking_position(TEMPLATE.tracking) == seqs[1]
